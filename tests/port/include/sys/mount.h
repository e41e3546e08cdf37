/* Stand-in for macOS (tests/port/darwin.h): its <sys/mount.h> has another mount(2). */
#error "<sys/mount.h> differs on macOS: include it under #if defined(__linux__)"
