/* Stand-in for macOS (tests/port/darwin.h): macOS has no <sys/inotify.h>. */
#error "<sys/inotify.h> is Linux-only: include it under #if defined(__linux__)"
