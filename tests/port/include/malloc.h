/* Stand-in for macOS (tests/port/darwin.h): macOS has no <malloc.h>. */
#error "<malloc.h> is Linux-only: include it under #if defined(__linux__)"
