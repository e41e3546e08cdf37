/*
 * The shim's malloc (the static musl build only: SHIMBRIDGE_SHIM_MALLOC).
 *
 * musl's allocator gives freed memory back to the kernel at once: a shim call
 * made five munmaps, the last three while it read the bridge's EXIT frame,
 * each a TLB shootdown once the process has run on more than one CPU (an
 * interrupt to every other CPU, a VM exit each on a virtual machine). The shim
 * lives for one command and holds a few buffers, so it keeps what it frees:
 * blocks of power-of-two sizes carved from 1 MiB regions, a free list per
 * size, nothing returned before exit; a block over 1 MiB is a mapping of its
 * own, unmapped when freed. Measured (bench/README.md): the shim's CPU per
 * call 714-792 -> 597-614 us. Single-threaded, as the shim is; no signal
 * handler of the shim allocates.
 */
#if defined(SHIMBRIDGE_SHIM_MALLOC)
#include <sys/mman.h>

#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ALLOC_HDR	16		/* before each block: its class (or map length) */
#define ALLOC_MIN	5		/* 32-byte blocks at least */
#define ALLOC_MAX	20		/* 1 MiB blocks at most; larger ones are mapped */
#define ALLOC_REGION	((size_t)1 << ALLOC_MAX)

struct alloc_free {
	struct alloc_free	*next;
};

static struct alloc_free	*alloc_lists[ALLOC_MAX + 1];
static unsigned char		*alloc_cur, *alloc_end;

/* The header of a block: its class, or ALLOC_MAX + 1 and the mapping's length. */
struct alloc_hdr {
	size_t	cls;
	size_t	maplen;
};

/* The smallest class holding n bytes and the header, or ALLOC_MAX + 1 for a mapping. */
static size_t
alloc_class(size_t n)
{
	size_t c = ALLOC_MIN;

	if (n > ALLOC_REGION - ALLOC_HDR)
		return ALLOC_MAX + 1;
	while (((size_t)1 << c) < n + ALLOC_HDR)
		c++;
	return c;
}

/* A fresh mapping of len bytes, or NULL (errno ENOMEM). */
static void *
alloc_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	return p;
}

void *
malloc(size_t n)
{
	struct alloc_hdr *h;
	size_t c = alloc_class(n), len;

	if (c > ALLOC_MAX) {
		if (n > SIZE_MAX - ALLOC_HDR - 4095) {
			errno = ENOMEM;
			return NULL;
		}
		len = (n + ALLOC_HDR + 4095) & ~(size_t)4095;
		if ((h = alloc_map(len)) == NULL)
			return NULL;
		h->cls = c;
		h->maplen = len;
		return (unsigned char *)h + ALLOC_HDR;
	}
	if (alloc_lists[c] != NULL) {
		struct alloc_free *f = alloc_lists[c];

		alloc_lists[c] = f->next;
		return f;
	}
	if (alloc_cur == NULL || (size_t)(alloc_end - alloc_cur) < ((size_t)1 << c)) {
		/* The rest of the region stays unused: regions are few. */
		if ((alloc_cur = alloc_map(ALLOC_REGION)) == NULL)
			return NULL;
		alloc_end = alloc_cur + ALLOC_REGION;
	}
	h = (struct alloc_hdr *)alloc_cur;
	alloc_cur += (size_t)1 << c;
	h->cls = c;
	h->maplen = 0;
	return (unsigned char *)h + ALLOC_HDR;
}

void
free(void *p)
{
	struct alloc_hdr *h;
	struct alloc_free *f = p;

	if (p == NULL)
		return;
	h = (struct alloc_hdr *)((unsigned char *)p - ALLOC_HDR);
	if (h->cls > ALLOC_MAX) {
		(void)munmap(h, h->maplen);
		return;
	}
	f->next = alloc_lists[h->cls];
	alloc_lists[h->cls] = f;
}

/* Usable bytes of a block. */
size_t
malloc_usable_size(void *p)
{
	const struct alloc_hdr *h;

	if (p == NULL)
		return 0;
	h = (const struct alloc_hdr *)((unsigned char *)p - ALLOC_HDR);
	return h->cls > ALLOC_MAX ? h->maplen - ALLOC_HDR : ((size_t)1 << h->cls) - ALLOC_HDR;
}

void *
calloc(size_t k, size_t n)
{
	void *p;

	if (n != 0 && k > SIZE_MAX / n) {
		errno = ENOMEM;
		return NULL;
	}
	if ((p = malloc(k * n)) != NULL)
		memset(p, 0, k * n);
	return p;
}

void *
realloc(void *p, size_t n)
{
	size_t have;
	void *q;

	if (p == NULL)
		return malloc(n);
	have = malloc_usable_size(p);
	if (n <= have && (have <= 4096 || n > have / 2))
		return p;
	if ((q = malloc(n)) == NULL)
		return NULL;
	memcpy(q, p, n < have ? n : have);
	free(p);
	return q;
}

/* Alignment beyond 16 bytes: nothing in the shim asks for it. */
void *
aligned_alloc(size_t align, size_t n)
{
	if (align > ALLOC_HDR || (align & (align - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	return malloc(n);
}

#elif defined(__SANITIZE_ADDRESS__)
/*
 * The sanitized shim (build/san, which the -asan integration suites run): the
 * sanitizers' own malloc, AddressSanitizer and UBSan on, but not LeakSanitizer's
 * scan at exit. The shim lives for one command, and its static build never gives
 * back what it allocates (above), so a leak is no bug here; the scan (threads
 * stopped, memory walked) cost ~57 ms of CPU per call on the test VM, a call
 * 87 -> 30 ms, most of what an -asan suite spent in its shims.
 */
const char	*__lsan_default_options(void);

const char *
__lsan_default_options(void)
{
	return "detect_leaks=0";
}
#else
typedef int	shim_alloc_unused;	/* the system's malloc */
#endif
