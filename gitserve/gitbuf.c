/* A growable byte buffer with a hard cap, for output read from git. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "gitserve.h"

/* Prepare an empty buffer that will hold at most max bytes. */
void
gitbuf_init(struct gitbuf *b, size_t max)
{
	memset(b, 0, sizeof *b);
	b->max = max;
}

/* Append len bytes; refuses (counting them in dropped) whatever would pass the cap. */
int
gitbuf_add(struct gitbuf *b, const void *p, size_t len)
{
	size_t	room, take, want;

	room = b->max - b->len;
	take = len < room ? len : room;
	if (take > 0) {
		want = b->len + take + 1;
		if (want > b->size) {
			b->size = b->size == 0 ? 256 : b->size;
			while (b->size < want)
				b->size *= 2;
			b->data = xreallocarray(b->data, 1, b->size);
		}
		memcpy(b->data + b->len, p, take);
		b->len += take;
		b->data[b->len] = '\0';
	}
	if (take < len) {
		b->dropped += len - take;
		return -1;
	}
	return 0;
}

/* The contents as a string. */
const char *
gitbuf_str(const struct gitbuf *b)
{
	return b->data == NULL ? "" : b->data;
}

/* Release the buffer (it can be reused after gitbuf_init()). */
void
gitbuf_free(struct gitbuf *b)
{
	if (b->data != NULL) {
		gitcred_wipe(b->data, b->size);
		free(b->data);
	}
	b->data = NULL;
	b->len = b->size = b->dropped = 0;
}

/* Read fd to EOF into b; -1 with *cause on error or if more than b->max bytes come. */
int
gitbuf_read_fd(struct gitbuf *b, int fd, char **cause)
{
	char	buf[16384];
	ssize_t	n;

	for (;;) {
		n = read(fd, buf, sizeof buf);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			xasprintf(cause, "read: %s", strerror(errno));
			return -1;
		}
		if (n == 0)
			return 0;
		if (gitbuf_add(b, buf, n) != 0) {
			xasprintf(cause, "more than %zu bytes of input", b->max);
			return -1;
		}
	}
}
