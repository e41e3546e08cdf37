/* Stand-in for macOS (tests/port/darwin.h), as <launch.h> declares it. */
#include <stddef.h>
int	launch_activate_socket(const char *, int **, size_t *);
