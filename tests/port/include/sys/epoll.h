/* Stand-in for macOS (tests/port/darwin.h): macOS has no <sys/epoll.h>. */
#error "<sys/epoll.h> is Linux-only: include it under #if defined(__linux__)"
