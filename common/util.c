/* Small helpers shared by every program. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

const char *util_progname = "shimbridge";

/* Report an allocation failure and stop: the callers have no sane way to go on. */
static void __attribute__((noreturn))
oom(void)
{
	static const char msg[] = ": out of memory\n";

	(void)!write(STDERR_FILENO, util_progname, strlen(util_progname));
	(void)!write(STDERR_FILENO, msg, sizeof msg - 1);
	_exit(125);
}

/* malloc that never returns NULL. */
void *
xmalloc(size_t n)
{
	void *p = malloc(n == 0 ? 1 : n);

	if (p == NULL)
		oom();
	return p;
}

/* calloc that never returns NULL. */
void *
xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n == 0 ? 1 : n, sz == 0 ? 1 : sz);

	if (p == NULL)
		oom();
	return p;
}

/* Overflow-checked realloc of n elements of sz bytes. */
void *
xreallocarray(void *p, size_t n, size_t sz)
{
	void *q;

	if (sz != 0 && n > SIZE_MAX / sz)
		oom();
	q = realloc(p, n * sz == 0 ? 1 : n * sz);
	if (q == NULL)
		oom();
	return q;
}

/* strdup that never returns NULL. */
char *
xstrdup(const char *s)
{
	char *p = strdup(s);

	if (p == NULL)
		oom();
	return p;
}

/* strndup that never returns NULL. */
char *
xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);

	if (p == NULL)
		oom();
	return p;
}

/* vasprintf that never fails. */
int
xvasprintf(char **ret, const char *fmt, va_list ap)
{
	int n = vasprintf(ret, fmt, ap);

	if (n < 0)
		oom();
	return n;
}

/* asprintf that never fails. */
int
xasprintf(char **ret, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = xvasprintf(ret, fmt, ap);
	va_end(ap);
	return n;
}

/* Copy a string, refusing to truncate. */
int
strcpy_checked(char *dst, size_t dstsz, const char *src)
{
	size_t n = strlen(src);

	if (n >= dstsz) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(dst, src, n + 1);
	return 0;
}

/* One-line error and exit. */
void
die(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", util_progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

/* Value of a hex digit, or -1. */
int
util_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* pipe(2) with both ends close-on-exec, optionally non-blocking. */
int
util_pipe(int p[2], int nonblock)
{
#if defined(__linux__)
	return pipe2(p, O_CLOEXEC | (nonblock ? O_NONBLOCK : 0));
#else
	int i, fl, e;

	if (pipe(p) != 0)
		return -1;
	for (i = 0; i < 2; i++) {
		if (fcntl(p[i], F_SETFD, FD_CLOEXEC) != 0 || (nonblock &&
		    ((fl = fcntl(p[i], F_GETFL)) == -1 || fcntl(p[i], F_SETFL, fl | O_NONBLOCK) != 0))) {
			e = errno;
			close(p[0]);
			close(p[1]);
			errno = e;
			return -1;
		}
	}
	return 0;
#endif
}

/* dup2(from, to) with the new descriptor close-on-exec. */
int
util_dup_cloexec(int from, int to)
{
#if defined(__linux__)
	return dup3(from, to, O_CLOEXEC);
#else
	if (from == to) {
		errno = EINVAL;		/* as dup3 */
		return -1;
	}
	if (dup2(from, to) != to)
		return -1;
	if (fcntl(to, F_SETFD, FD_CLOEXEC) != 0) {
		int e = errno;

		close(to);
		errno = e;
		return -1;
	}
	return to;
#endif
}
