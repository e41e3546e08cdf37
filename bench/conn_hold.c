/*
 * conn_hold: open N connections to the bridge, complete the HELLO exchange on each,
 * then hold them idle (for the per-connection memory figure in bench/run).
 *
 *	conn_hold [-u USER] -n N SOCKET
 *
 * Raises its fd limit, drops to USER (the session user the bridge maps the
 * connections to), connects, sends HELLO on every connection, reads every HELLO
 * answer, prints "ready N" and waits until stdin reaches EOF; then closes them all
 * and prints "released". Exits 1 if any connection fails or is refused.
 */
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"

/* Read exactly len bytes. */
static int
read_full(int fd, void *buf, size_t len)
{
	size_t off = 0;
	ssize_t n;

	while (off < len) {
		n = read(fd, (char *)buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	char hello[64];
	unsigned char hdr[FRAME_HDR], frame[FRAME_HDR + sizeof hello];
	size_t hlen;
	struct sockaddr_un sun;
	struct rlimit rl;
	const char *user = NULL, *cause;
	char buf[FRAME_SMALL_MAX];
	uint32_t len;
	uint8_t type;
	int n = 1000, ch, i, *fds;

	while ((ch = getopt(argc, argv, "u:n:")) != -1) {
		switch (ch) {
		case 'u':
			user = optarg;
			break;
		case 'n':
			n = atoi(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (optind + 1 != argc || n < 1)
		goto usage;
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(argv[optind]) >= sizeof sun.sun_path)
		goto usage;
	strcpy(sun.sun_path, argv[optind]);

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 64) {
		rl.rlim_cur = (rlim_t)n + 64;
		if (rl.rlim_max < rl.rlim_cur)
			rl.rlim_max = rl.rlim_cur;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
			perror("conn_hold: setrlimit");
			return 1;
		}
	}
	if (user != NULL) {
		struct passwd *pw = getpwnam(user);

		if (pw == NULL || initgroups(user, pw->pw_gid) != 0 ||
		    setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0) {
			fprintf(stderr, "conn_hold: cannot become %s\n", user);
			return 1;
		}
	}
	hlen = (size_t)snprintf(hello, sizeof hello, "{\"proto\":%d,\"client\":\"conn_hold\"}",
	    PROTO_VERSION);
	frame_put_header(frame, FRAME_HELLO, (uint32_t)hlen);
	memcpy(frame + FRAME_HDR, hello, hlen);
	if ((fds = calloc((size_t)n, sizeof *fds)) == NULL)
		return 1;
	for (i = 0; i < n; i++) {
		if ((fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
		    connect(fds[i], (struct sockaddr *)&sun, sizeof sun) != 0) {
			fprintf(stderr, "conn_hold: connection %d: %s\n", i, strerror(errno));
			return 1;
		}
		if (write(fds[i], frame, FRAME_HDR + hlen) != (ssize_t)(FRAME_HDR + hlen)) {
			fprintf(stderr, "conn_hold: HELLO %d: %s\n", i, strerror(errno));
			return 1;
		}
	}
	for (i = 0; i < n; i++) {
		if (read_full(fds[i], hdr, FRAME_HDR) != 0 ||
		    frame_parse_header(hdr, &type, &len, &cause) != 0 ||
		    len > sizeof buf || read_full(fds[i], buf, len) != 0) {
			fprintf(stderr, "conn_hold: connection %d: no HELLO answer\n", i);
			return 1;
		}
		if (type != FRAME_HELLO) {
			fprintf(stderr, "conn_hold: connection %d: answered with frame type %d: "
			    "%.*s\n", i, type, (int)len, buf);
			return 1;
		}
	}
	printf("ready %d\n", n);
	fflush(stdout);
	while (read(STDIN_FILENO, buf, sizeof buf) > 0)
		;
	for (i = 0; i < n; i++)
		close(fds[i]);
	printf("released\n");
	return 0;
usage:
	fprintf(stderr, "usage: conn_hold [-u USER] -n N SOCKET\n");
	return 2;
}
