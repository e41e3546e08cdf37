/* Stand-in for macOS (tests/port/darwin.h), as <mach-o/dyld.h> declares it. */
#include <stdint.h>
int	_NSGetExecutablePath(char *, uint32_t *);
