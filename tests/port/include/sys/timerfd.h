/* Stand-in for macOS (tests/port/darwin.h): macOS has no <sys/timerfd.h>. */
#error "<sys/timerfd.h> is Linux-only: include it under #if defined(__linux__)"
