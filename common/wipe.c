/* Wiping allocator hooks (see wipe.h). */
#if defined(__APPLE__)
#include <malloc/malloc.h>
#elif defined(__linux__)
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "wipe.h"

/*
 * The usable size of a block from malloc: what a wipe must cover. A platform
 * without a way to ask must not build (wiping only the requested size would leave
 * a credential's tail behind where the caller cannot know it).
 */
static size_t
wipe_size(void *p)
{
#if defined(__APPLE__)
	return malloc_size(p);
#elif defined(__linux__)
	return malloc_usable_size(p);
#else
#error "wipe_size: no way to learn an allocation's size on this platform"
#endif
}

/* free() with the block wiped first. */
void
wipe_free(void *p)
{
	if (p == NULL)
		return;
	sodium_memzero(p, wipe_size(p));
	free(p);
}

/* realloc(): a new block, the old one copied, wiped and freed. */
void *
wipe_realloc(void *p, size_t n)
{
	size_t	 old;
	void	*q;

	if (p == NULL)
		return malloc(n);
	if ((q = malloc(n > 0 ? n : 1)) == NULL)
		return NULL;
	old = wipe_size(p);
	memcpy(q, p, old < n ? old : n);
	wipe_free(p);
	return q;
}
