/*
 * Unix sockets for the fuzz targets that talk to a component over a real one
 * (fuzz_inject, fuzz_upstream): a listener at a path, a nonblocking client, and
 * a read that checks what comes back for the secret, across reads too. A failure
 * of the harness itself is not a finding, but still aborts.
 */
#ifndef SHIMBRIDGE_FUZZSOCK_H
#define SHIMBRIDGE_FUZZSOCK_H

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* path's address; path fits (the targets name theirs under /tmp). */
static struct sockaddr_un
fuzzsock_addr(const char *path)
{
	struct sockaddr_un	 sun;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path)
		abort();
	memcpy(sun.sun_path, path, strlen(path) + 1);
	return sun;
}

/* A listening socket at path (replacing a stale one). */
static int
fuzzsock_listen(const char *path)
{
	struct sockaddr_un	 sun = fuzzsock_addr(path);
	int			 fd;

	unlink(path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&sun, sizeof sun) == -1 || listen(fd, 16) == -1)
		abort();
	return fd;
}

/* A nonblocking connection to the listener at path. */
static int
fuzzsock_connect(const char *path)
{
	struct sockaddr_un	 sun = fuzzsock_addr(path);
	int			 fd;

	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof sun) == -1 ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == -1)
		abort();
	return fd;
}

/* The last bytes a client read, to find a secret split across two reads. */
struct fuzzsock_tail {
	char	 buf[64];
	size_t	 len;
};

/*
 * One read(2) of what the component answers (up to 64 KiB); aborts if secret is
 * in it, or begins in the last read and ends in this one, unless allowed (the
 * input held it: an echo is no leak). Returns read's result.
 */
static ssize_t
fuzzsock_read(int fd, struct fuzzsock_tail *t, const char *secret, int allowed)
{
	char	 buf[65536 + sizeof t->buf];
	ssize_t	 n;
	size_t	 all;

	memcpy(buf, t->buf, t->len);
	if ((n = read(fd, buf + t->len, 65536)) <= 0)
		return n;
	all = t->len + (size_t)n;
	if (!allowed && memmem(buf, all, secret, strlen(secret)) != NULL)
		abort();
	t->len = all < sizeof t->buf ? all : sizeof t->buf;
	memcpy(t->buf, buf + all - t->len, t->len);
	return n;
}

/* Whether a fuzzsock_read result ends the stream. */
static int
fuzzsock_ended(ssize_t n)
{
	return n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR);
}

#endif
