/* Stand-in for macOS (tests/port/darwin.h): macOS has no <sys/eventfd.h>. */
#error "<sys/eventfd.h> is Linux-only: include it under #if defined(__linux__)"
