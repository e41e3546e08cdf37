/*
 * noop: the least a process can cost. bench/run execs it (static, musl, built like
 * the shim) to measure the floor of any design in which a program in the sandbox
 * hands a command to a process that runs the tool: one exec of a small static
 * binary, one round trip over a Unix socket to a process that waits for it, plus
 * the tool's own exec (docs/PERFORMANCE.md, "floor").
 *
 *	noop			exit 0 at once
 *	noop SOCKET		connect to SOCKET, write a byte, read one back; exit 0
 *				if it is the same byte (an echo) or a zero byte (the
 *				status of a tool the server ran: bench/jailfloor)
 *	noop --serve SOCKET	listen on SOCKET (mode 0666) and echo one byte to each
 *				connection, one after the other, until killed (or
 *				until accept fails for another reason than a signal
 *				or an aborted connection)
 *
 * Any failure exits 1.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* A Unix socket address for path; -1 if it does not fit. */
static int
noop_addr(struct sockaddr_un *sun, const char *path)
{
	memset(sun, 0, sizeof *sun);
	sun->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun->sun_path)
		return -1;
	memcpy(sun->sun_path, path, strlen(path) + 1);
	return 0;
}

static int
noop_serve(const char *path)
{
	struct sockaddr_un sun;
	char b;
	int l, c;

	if (noop_addr(&sun, path) != 0 ||
	    (l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return 1;
	(void)unlink(path);
	if (bind(l, (struct sockaddr *)&sun, sizeof sun) != 0 || chmod(path, 0666) != 0 ||
	    listen(l, 64) != 0)
		return 1;
	for (;;) {
		if ((c = accept4(l, NULL, NULL, SOCK_CLOEXEC)) == -1) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return 1;	/* anything else would only repeat */
		}
		if (read(c, &b, 1) == 1)
			(void)write(c, &b, 1);
		close(c);
	}
}

int
main(int argc, char **argv)
{
	struct sockaddr_un sun;
	char b = 'x';
	int s;

	if (argc == 3 && strcmp(argv[1], "--serve") == 0)
		return noop_serve(argv[2]);
	if (argc != 2)
		return argc == 1 ? 0 : 1;
	if (noop_addr(&sun, argv[1]) != 0 || (s = socket(AF_UNIX, SOCK_STREAM, 0)) == -1 ||
	    connect(s, (struct sockaddr *)&sun, sizeof sun) != 0 || write(s, &b, 1) != 1 ||
	    read(s, &b, 1) != 1)
		return 1;
	return b == 'x' || b == '\0' ? 0 : 1;
}
