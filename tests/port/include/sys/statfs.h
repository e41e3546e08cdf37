/* Stand-in for macOS (tests/port/darwin.h): macOS has no <sys/statfs.h>. */
#error "<sys/statfs.h> is Linux-only: include it under #if defined(__linux__)"
