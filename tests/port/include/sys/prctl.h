/* Stand-in for macOS (tests/port/darwin.h): macOS has no <sys/prctl.h>. */
#error "<sys/prctl.h> is Linux-only: include it under #if defined(__linux__)"
