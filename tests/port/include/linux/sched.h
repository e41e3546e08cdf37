/* Stand-in for macOS (tests/port/darwin.h): macOS has no <linux/sched.h>. */
#error "<linux/sched.h> is Linux-only: include it under #if defined(__linux__)"
