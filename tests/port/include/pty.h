/* Stand-in for macOS (tests/port/darwin.h): macOS has no <pty.h>. */
#error "<pty.h> is Linux-only (macOS: <util.h>): include it under #if defined(__linux__)"
