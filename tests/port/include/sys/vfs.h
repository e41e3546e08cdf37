/* Stand-in for macOS (tests/port/darwin.h): macOS has no <sys/vfs.h>. */
#error "<sys/vfs.h> is Linux-only: include it under #if defined(__linux__)"
