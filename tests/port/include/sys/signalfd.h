/* Stand-in for macOS (tests/port/darwin.h): macOS has no <sys/signalfd.h>. */
#error "<sys/signalfd.h> is Linux-only: include it under #if defined(__linux__)"
