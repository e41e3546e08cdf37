/* Stand-in for macOS (tests/port/darwin.h): macOS has no <sys/sendfile.h>. */
#error "<sys/sendfile.h> is Linux-only: include it under #if defined(__linux__)"
