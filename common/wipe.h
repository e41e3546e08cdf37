/*
 * Allocator hooks that wipe a block before it is freed, for the libraries that copy
 * credentials into memory of their own (libevent's request heads, jansson's parse of
 * a token, libcurl's Authorization header). Also the one place that asks the C
 * library how large a block is, which differs per platform.
 */
#ifndef SHIMBRIDGE_WIPE_H
#define SHIMBRIDGE_WIPE_H

#include <stddef.h>

/* free() with the whole block (as the allocator sized it) wiped first. */
void	 wipe_free(void *);
/* realloc() that never leaves the old block behind unwiped: a new block, a copy. */
void	*wipe_realloc(void *, size_t);

#endif
