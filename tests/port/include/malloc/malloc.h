/* Stand-in for macOS (tests/port/darwin.h), as <malloc/malloc.h> declares it. */
#include <stddef.h>
size_t	malloc_size(const void *);
