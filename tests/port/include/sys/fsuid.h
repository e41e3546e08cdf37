/* Stand-in for macOS (tests/port/darwin.h): macOS has no <sys/fsuid.h>. */
#error "<sys/fsuid.h> is Linux-only: include it under #if defined(__linux__)"
