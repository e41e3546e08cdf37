/* Stand-in for macOS (tests/port/darwin.h): macOS has no <mntent.h>. */
#error "<mntent.h> is Linux-only: include it under #if defined(__linux__)"
