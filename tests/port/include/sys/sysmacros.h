/* Stand-in for macOS (tests/port/darwin.h): macOS has no <sys/sysmacros.h>. */
#error "<sys/sysmacros.h> is Linux-only: include it under #if defined(__linux__)"
