/*
 * shim: the sandbox-side client. Installed under tool names (gh, ...), as the
 * git remote helper git-remote-shimbridge and as shimbridge (`shimbridge list`); forwards argv, cwd, a small env
 * allowlist and stdio to the bridge and exits as the remote child did.
 * Static (musl), no third-party libraries, no fds passed.
 */
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

#include "context.h"
#include "jsonw.h"
#include "proto.h"
#include "util.h"

#ifndef SHIMBRIDGE_VERSION
#define SHIMBRIDGE_VERSION "dev"
#endif

#define SHIM_DEFAULT_SOCKET	"/run/shimbridge/bridge.sock"
#define SHIM_HELPER_NAME	"git-remote-shimbridge"
#define SHIM_OUT_HIGH		(256 * 1024)	/* stop reading stdin above this */
#define SHIM_SOCK_BUF		(1024 * 1024)	/* socket send buffer asked for */
#define SHIM_CONTEXT_MAX	4096

extern char **environ;

/* Everything the relay loop needs. */
struct shim {
	const char	*tool;		/* name shown in messages */
	int		 sock;
	unsigned char	*out;		/* bytes queued for the bridge: out[outoff..outlen) */
	size_t		 outoff, outlen, outcap;
	unsigned char	*in;		/* bytes read from the bridge */
	size_t		 inlen, incap;
	int		 stdin_open;	/* still forwarding stdin */
	int		 stdout_broken;	/* EPIPE seen on stdout */
	int		 sigpipe[2];	/* self-pipe for forwarded signals */
	int		 helper_ready;	/* helper mode: "\n" sent to git */
	int		 helper;	/* running as the git remote helper */
	int		 nfiles;	/* FILE_REQ frames answered */
	size_t		 file_bytes;	/* bytes of files sent */
};

static int shim_sigfd = -1;

/* Print "tool: message" and exit with code. */
static void __attribute__((noreturn, format(printf, 3, 4)))
shim_fail(struct shim *s, int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", s->tool);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

/* Room for a frame of len bytes at the end of the queue; returns where its header goes. */
static unsigned char *
shim_reserve(struct shim *s, size_t len)
{
	if (s->outoff > 0 && s->outlen + FRAME_HDR + len > s->outcap) {
		/* Slide what is left to the front before growing. */
		memmove(s->out, s->out + s->outoff, s->outlen - s->outoff);
		s->outlen -= s->outoff;
		s->outoff = 0;
	}
	if (s->outlen + FRAME_HDR + len > s->outcap) {
		size_t cap = s->outcap ? s->outcap : 4096;

		while (cap < s->outlen + FRAME_HDR + len)
			cap *= 2;
		s->out = xreallocarray(s->out, cap, 1);
		s->outcap = cap;
	}
	return s->out + s->outlen;
}

/* Queue a frame for the bridge. */
static void
shim_queue(struct shim *s, uint8_t type, const void *buf, size_t len)
{
	unsigned char *p = shim_reserve(s, len);

	frame_put_header(p, type, (uint32_t)len);
	if (len > 0)
		memcpy(p + FRAME_HDR, buf, len);
	s->outlen += FRAME_HDR + len;
}

/* Write as much of the queue to the socket as it takes without blocking. */
static void
shim_flush(struct shim *s)
{
	ssize_t n;

	while (s->outlen > s->outoff) {
		n = send(s->sock, s->out + s->outoff, s->outlen - s->outoff,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EPIPE || errno == ECONNRESET) {
				/*
				 * The bridge closed its end, usually right after a final
				 * ERROR frame (refusals close at once): stop sending and
				 * let the loop read that frame; EOF there is a lost link.
				 */
				s->outlen = s->outoff = 0;
				s->stdin_open = 0;
				return;
			}
			shim_fail(s, EXIT_CONN_LOST, "lost the connection to the shimbridge "
			    "bridge (%s); the command may or may not have run", strerror(errno));
		}
		s->outoff += (size_t)n;
	}
	s->outlen = s->outoff = 0;	/* all sent: reuse from the start */
}

/* Connect to the bridge socket. */
static void
shim_connect(struct shim *s)
{
	struct sockaddr_un sun;
	const char *path = getenv("SHIMBRIDGE_SOCKET");

	if (path == NULL || *path == '\0')
		path = SHIM_DEFAULT_SOCKET;
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strcpy_checked(sun.sun_path, sizeof sun.sun_path, path) != 0)
		shim_fail(s, EXIT_UNREACHABLE, "bridge socket path too long: %s", path);
	s->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->sock < 0)
		shim_fail(s, EXIT_UNREACHABLE, "socket: %s", strerror(errno));
	if (connect(s->sock, (struct sockaddr *)&sun, sizeof sun) != 0) {
		shim_fail(s, EXIT_UNREACHABLE, "cannot reach the shimbridge bridge at %s "
		    "(%s). %s runs on the host through that bridge; it is not running or "
		    "this account may not use it. Ask the operator to check shimbridged.",
		    path, strerror(errno), s->tool);
	}
}

/* Append the forwarded environment variables to a request. */
static void
shim_env(struct jbuf *jb, int helper)
{
	char **e;
	int n = 0;

	jw_key(jb, "env");
	jw_obj_open(jb);
	for (e = environ; *e != NULL && n < REQ_MAX_ENV; e++) {
		const char *eq = strchr(*e, '=');
		size_t nl;

		if (eq == NULL)
			continue;
		nl = (size_t)(eq - *e);
		if (!proto_env_allowed(*e, nl) &&
		    !(helper && nl == 12 && memcmp(*e, "GIT_PROTOCOL", 12) == 0))
			continue;
		if (strlen(eq + 1) > 1024)
			continue;
		{
			char *name = xstrndup(*e, nl);

			jw_key(jb, name);
			free(name);
		}
		jw_cstr(jb, eq + 1);
		n++;
	}
	jw_obj_close(jb);
}

/* Send the hello and the request; the bridge checks the version before anything else. */
static void
shim_send_request(struct shim *s, struct jbuf *req)
{
	struct jbuf hello;

	jw_init(&hello);
	jw_obj_open(&hello);
	jw_key(&hello, "proto");
	jw_int(&hello, PROTO_VERSION);
	jw_key(&hello, "client");
	jw_cstr(&hello, "shim " SHIMBRIDGE_VERSION);
	jw_obj_close(&hello);
	shim_queue(s, FRAME_HELLO, hello.buf, hello.len);
	jw_free(&hello);
	if (req->len > FRAME_CTRL_MAX) {
		shim_fail(s, EXIT_PROTOCOL, "request too large (%zu bytes; the bridge "
		    "accepts at most %d): pass long text through a file or stdin instead",
		    req->len, FRAME_CTRL_MAX);
	}
	shim_queue(s, FRAME_REQUEST, req->buf, req->len);
}

/* Signal handler: hand the number to the loop through the self-pipe. */
static void
shim_onsignal(int sig)
{
	unsigned char c = (unsigned char)sig;
	int saved = errno;

	(void)!write(shim_sigfd, &c, 1);
	errno = saved;
}

/* Install forwarding handlers for the signals the child should see. */
static void
shim_signals(struct shim *s)
{
	struct sigaction sa;

	if (util_pipe(s->sigpipe, 1) != 0)
		shim_fail(s, EXIT_PROTOCOL, "pipe: %s", strerror(errno));
	shim_sigfd = s->sigpipe[1];
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = shim_onsignal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
}

/* Die the way the remote child died, so callers see the same status. */
static void __attribute__((noreturn))
shim_die_by(struct shim *s, const char *name)
{
	struct rlimit rl = { 0, 0 };
	struct sigaction sa;
	sigset_t set;
	int sig = proto_signum(name);

	if (sig < 0)
		shim_fail(s, EXIT_PROTOCOL, "child killed by unknown signal %s", name);
	fflush(stdout);
	/* Re-raising SIGSEGV or SIGQUIT must not leave a core of the shim. */
	setrlimit(RLIMIT_CORE, &rl);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	sigaction(sig, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	exit(128 + sig);
}

/* Write all of buf to fd (stdout/stderr are left blocking: they are not ours). */
static int
shim_write_all(int fd, const unsigned char *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The FILE_END status for an errno from open/read. */
static const char *
shim_file_errno(int e)
{
	switch (e) {
	case ENOENT:
	case ENOTDIR:
	case ENAMETOOLONG:
		return FILE_NOT_FOUND;
	case EACCES:
	case EPERM:
		return FILE_DENIED;
	case EISDIR:
	case ENXIO:
	case ENODEV:
		return FILE_NOT_REGULAR;
	case EFBIG:
		return FILE_TOO_LARGE;
	default:
		return FILE_ERROR;
	}
}

/*
 * Read a file the bridge asked for into buf (at most PROTO_FILE_MAX + 1 bytes),
 * as this process: the sandbox user, with its rights and nothing more. Symbolic
 * links are followed on purpose (they reach only what this user could cat), but
 * only a regular file is read: no FIFO, device, socket or directory, which could
 * block or never end. Returns FILE_OK or the status saying why not.
 */
static const char *
shim_read_file(const char *path, size_t left, unsigned char *buf, size_t *len)
{
	struct stat st;
	const char *status = NULL;	/* NULL: fine so far */
	ssize_t n;
	int fd;

	*len = 0;
	/* O_NONBLOCK: opening a FIFO must not wait for a writer (fstat refuses it next). */
	fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return shim_file_errno(errno);
	if (fstat(fd, &st) != 0)
		status = shim_file_errno(errno);
	else if (!S_ISREG(st.st_mode))
		status = FILE_NOT_REGULAR;
	else if (st.st_size > PROTO_FILE_MAX || (size_t)st.st_size > left)
		status = FILE_TOO_LARGE;
	while (status == NULL) {
		/* /proc files report size 0: the cap holds whatever the size says. */
		n = read(fd, buf + *len, PROTO_FILE_MAX + 1 - *len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			status = shim_file_errno(errno);
		else if (n == 0)
			break;
		else if ((*len += (size_t)n) > PROTO_FILE_MAX || *len > left)
			status = FILE_TOO_LARGE;
	}
	close(fd);
	return status != NULL ? status : FILE_OK;
}

/* Answer one FILE_REQ: the file's bytes in FILE_DATA frames, then FILE_END. */
static void
shim_send_file(struct shim *s, const unsigned char *p, uint32_t plen)
{
	char path[REQ_MAX_PATH + 1];
	unsigned char *buf;
	const char *status;
	struct jbuf end;
	size_t len = 0, off;

	if (s->helper || plen == 0 || plen > REQ_MAX_PATH || memchr(p, '\0', plen) != NULL ||
	    ++s->nfiles > PROTO_FILES_MAX)
		shim_fail(s, EXIT_PROTOCOL, "protocol error from the bridge: bad file request");
	memcpy(path, p, plen);
	path[plen] = '\0';
	buf = xmalloc(PROTO_FILE_MAX + 1);
	status = shim_read_file(path, PROTO_FILES_TOTAL_MAX - s->file_bytes, buf, &len);
	if (strcmp(status, FILE_OK) == 0) {
		for (off = 0; off < len; off += FRAME_DATA_MAX)
			shim_queue(s, FRAME_FILE_DATA, buf + off,
			    len - off < FRAME_DATA_MAX ? len - off : FRAME_DATA_MAX);
		s->file_bytes += len;
	}
	free(buf);
	jw_init(&end);
	jw_obj_open(&end);
	jw_key(&end, "status");
	jw_cstr(&end, status);
	if (strcmp(status, FILE_OK) == 0) {
		jw_key(&end, "size");
		jw_int(&end, (long long)len);
	}
	jw_obj_close(&end);
	shim_queue(s, FRAME_FILE_END, end.buf, end.len);
	jw_free(&end);
}

/* Handle the bridge's final ERROR frame. */
static void __attribute__((noreturn))
shim_on_error(struct shim *s, const char *json, size_t len)
{
	char *code = NULL, *msg = NULL;

	if (jr_get_str(json, len, "code", &code) != 1)
		shim_fail(s, EXIT_PROTOCOL, "malformed error message from the bridge");
	if (jr_get_str(json, len, "message", &msg) != 1)
		msg = xstrdup("(no message)");
	/* A structured refusal names itself ("shimbridge: refused: ..."). */
	if (strncmp(msg, "shimbridge: ", 12) == 0)
		fprintf(stderr, "%s\n", msg);
	else
		fprintf(stderr, "%s: %s\n", s->tool, msg);
	exit(proto_error_exit(code));
}

/* Handle the bridge's final EXIT frame. */
static void __attribute__((noreturn))
shim_on_exit(struct shim *s, const char *json, size_t len)
{
	long long code;
	char *sig = NULL;

	if (jr_get_str(json, len, "signal", &sig) == 1)
		shim_die_by(s, sig);
	if (jr_get_int(json, len, "code", &code) == 1 && code >= 0 && code <= 255)
		exit((int)code);
	shim_fail(s, EXIT_PROTOCOL, "malformed exit message from the bridge");
}

/* Process every complete frame in the input buffer. */
static void
shim_frames(struct shim *s)
{
	size_t off = 0;

	while (s->inlen - off >= FRAME_HDR) {
		const char *cause;
		uint8_t type;
		uint32_t len;
		unsigned char *p;

		if (frame_parse_header(s->in + off, &type, &len, &cause) != 0)
			shim_fail(s, EXIT_PROTOCOL, "protocol error from the bridge: %s", cause);
		if (s->inlen - off - FRAME_HDR < len)
			break;
		p = s->in + off + FRAME_HDR;
		off += FRAME_HDR + len;
		switch (type) {
		case FRAME_HELLO: {
			long long v;

			if (jr_get_int((char *)p, len, "proto", &v) != 1 || v != PROTO_VERSION)
				shim_fail(s, EXIT_PROTOCOL, "bridge speaks another protocol "
				    "version; reinstall the shim to match the bridge");
			break;
		}
		case FRAME_STDOUT:
			if (s->helper && !s->helper_ready) {
				/* The connection is up: tell git to start talking. */
				if (shim_write_all(STDOUT_FILENO, (const unsigned char *)"\n", 1) != 0)
					exit(EXIT_CONN_LOST);
				s->helper_ready = 1;
			}
			if (len == 0 || s->stdout_broken)
				break;
			if (shim_write_all(STDOUT_FILENO, p, len) != 0) {
				if (errno != EPIPE)
					exit(EXIT_CONN_LOST);
				/* Like a local program: the child gets SIGPIPE. */
				s->stdout_broken = 1;
				shim_queue(s, FRAME_SIGNAL, "{\"signal\":\"PIPE\"}", 17);
			}
			break;
		case FRAME_STDERR:
			if (len > 0)
				(void)shim_write_all(STDERR_FILENO, p, len);
			break;
		case FRAME_FILE_REQ:
			shim_send_file(s, p, len);
			break;
		case FRAME_ERROR:
			shim_on_error(s, (char *)p, len);
		case FRAME_EXIT:
			shim_on_exit(s, (char *)p, len);
		default:
			shim_fail(s, EXIT_PROTOCOL, "unexpected frame 0x%02x from the bridge", type);
		}
	}
	memmove(s->in, s->in + off, s->inlen - off);
	s->inlen -= off;
}

/* Queue one read of stdin: a STDIN frame, or its end (an empty one). */
static void
shim_read_stdin(struct shim *s)
{
	/* Straight into the queue, after room for the frame's header. */
	unsigned char *p = shim_reserve(s, FRAME_DATA_MAX);
	ssize_t n;

	n = read(STDIN_FILENO, p + FRAME_HDR, FRAME_DATA_MAX);
	if (n < 0 && errno != EINTR && errno != EAGAIN)
		n = 0;	/* treat a broken stdin as its end */
	if (n == 0) {
		s->stdin_open = 0;
		shim_queue(s, FRAME_STDIN, NULL, 0);
	} else if (n > 0) {
		frame_put_header(p, FRAME_STDIN, (uint32_t)n);
		s->outlen += FRAME_HDR + (size_t)n;
	}
}

/* Relay stdio and signals until the bridge sends EXIT or ERROR. */
static void __attribute__((noreturn))
shim_relay(struct shim *s)
{
	struct pollfd pfd[3];
	ssize_t n;
	int sz = SHIM_SOCK_BUF;

	s->incap = FRAME_HDR + FRAME_CTRL_MAX;
	s->in = xmalloc(s->incap);
	/* Fewer, larger transfers on a bulk stream (best effort: a capped kernel keeps its own). */
	(void)setsockopt(s->sock, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
	/*
	 * What stdin has at once (often just its end: /dev/null, a closed pipe, a
	 * file) goes out with the request, in the same send: one wake-up of the
	 * bridge instead of two.
	 */
	pfd[0].fd = STDIN_FILENO;
	pfd[0].events = POLLIN;
	if (s->stdin_open && poll(pfd, 1, 0) == 1 && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
		shim_read_stdin(s);
	for (;;) {
		int nfd = 0, si = -1, ii = -1, gi;

		shim_flush(s);
		pfd[nfd].fd = s->sock;
		pfd[nfd].events = POLLIN | (s->outlen > s->outoff ? POLLOUT : 0);
		nfd++;
		gi = nfd;
		pfd[nfd].fd = s->sigpipe[0];
		pfd[nfd].events = POLLIN;
		nfd++;
		if (s->stdin_open && s->outlen - s->outoff < SHIM_OUT_HIGH) {
			ii = nfd;
			pfd[nfd].fd = STDIN_FILENO;
			pfd[nfd].events = POLLIN;
			nfd++;
		}
		si = 0;
		if (poll(pfd, (nfds_t)nfd, -1) < 0) {
			if (errno == EINTR)
				continue;
			shim_fail(s, EXIT_PROTOCOL, "poll: %s", strerror(errno));
		}
		if (pfd[gi].revents & POLLIN) {
			unsigned char sig;

			while (read(s->sigpipe[0], &sig, 1) == 1) {
				const char *name = proto_signame(sig);
				char msg[64];
				int len;

				if (name == NULL)
					continue;
				len = snprintf(msg, sizeof msg, "{\"signal\":\"%s\"}", name);
				shim_queue(s, FRAME_SIGNAL, msg, (size_t)len);
			}
		}
		if (ii >= 0 && (pfd[ii].revents & (POLLIN | POLLHUP | POLLERR)))
			shim_read_stdin(s);
		if (pfd[si].revents & (POLLIN | POLLHUP | POLLERR)) {
			n = recv(s->sock, s->in + s->inlen, s->incap - s->inlen, MSG_DONTWAIT);
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0) {
				shim_fail(s, EXIT_CONN_LOST, "lost the connection to the shimbridge "
				    "bridge before %s finished; the command may or may not have "
				    "completed", s->tool);
			}
			s->inlen += (size_t)n;
			shim_frames(s);
		}
	}
}

/* Start the request header shared by both modes. */
static void
shim_request_start(struct jbuf *jb, const char *op)
{
	jw_init(jb);
	jw_obj_open(jb);
	jw_key(jb, "op");
	jw_cstr(jb, op);
}

/* Read one line (byte by byte: the pack stream follows on the same fd). */
static int
shim_readline(char *buf, size_t size)
{
	size_t len = 0;
	ssize_t n;
	char c;

	for (;;) {
		n = read(STDIN_FILENO, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return len == 0 ? -1 : 0;
		if (c == '\n')
			break;
		if (len + 1 >= size || c == '\0')
			return -1;
		buf[len++] = c;
	}
	buf[len] = '\0';
	return 0;
}

/* git remote helper mode: speak "connect", then relay the pack stream. */
static void __attribute__((noreturn))
shim_helper(struct shim *s, int argc, char **argv)
{
	char line[256];
	struct jbuf req;
	const char *url;
	int progress = 0;

	s->helper = 1;
	if (argc < 3)
		shim_fail(s, EXIT_PROTOCOL, "usage: %s REMOTE URL (run by git, not by hand)", argv[0]);
	url = argv[2];
	if (strncmp(url, "shimbridge://", 13) == 0)
		url += 13;
	for (;;) {
		if (shim_readline(line, sizeof line) != 0)
			exit(0);
		if (strcmp(line, "capabilities") == 0) {
			if (shim_write_all(STDOUT_FILENO,
			    (const unsigned char *)"option\nconnect\n\n", 16) != 0)
				exit(EXIT_CONN_LOST);
			continue;
		}
		/* git says whether it shows progress (a terminal, or --progress); pass it on. */
		if (strncmp(line, "option ", 7) == 0) {
			const char *ans = "unsupported\n";

			if (strcmp(line + 7, "progress true") == 0 ||
			    strcmp(line + 7, "progress false") == 0) {
				progress = line[16] == 't';
				ans = "ok\n";
			}
			if (shim_write_all(STDOUT_FILENO, (const unsigned char *)ans,
			    strlen(ans)) != 0)
				exit(EXIT_CONN_LOST);
			continue;
		}
		if (line[0] == '\0')
			exit(0);
		if (strcmp(line, "connect git-upload-pack") == 0 ||
		    strcmp(line, "connect git-receive-pack") == 0 ||
		    strcmp(line, "connect git-upload-archive") == 0)
			break;
		shim_fail(s, EXIT_PROTOCOL, "unsupported remote helper command: %.64s", line);
	}
	shim_request_start(&req, "git");
	jw_key(&req, "service");
	jw_cstr(&req, line + 8);
	jw_key(&req, "url");
	jw_cstr(&req, url);
	if (progress) {
		jw_key(&req, "progress");
		jw_bool(&req, 1);
	}
	shim_env(&req, 1);
	jw_obj_close(&req);
	shim_connect(s);
	shim_send_request(s, &req);
	jw_free(&req);
	s->stdin_open = 1;
	shim_relay(s);
}

/* Tool mode: forward argv, cwd and the env allowlist. */
static void __attribute__((noreturn))
shim_tool(struct shim *s, int argc, char **argv)
{
	char cwd[PATH_MAX];
	struct jbuf req;
	int i;

	if (argc - 1 > REQ_MAX_ARGS)
		shim_fail(s, EXIT_PROTOCOL, "too many arguments (%d; at most %d)", argc - 1, REQ_MAX_ARGS);
	shim_request_start(&req, "run");
	jw_key(&req, "tool");
	jw_cstr(&req, s->tool);
	jw_key(&req, "argv");
	jw_arr_open(&req);
	for (i = 1; i < argc; i++)
		jw_cstr(&req, argv[i]);
	jw_arr_close(&req);
	if (getcwd(cwd, sizeof cwd) != NULL) {
		struct context ctx;

		jw_key(&req, "cwd");
		jw_cstr(&req, cwd);
		context_read_repo(cwd, &ctx);
		if (ctx.remote_url != NULL || ctx.branch != NULL) {
			jw_key(&req, "context");
			jw_obj_open(&req);
			if (ctx.remote_url != NULL) {
				jw_key(&req, "remote_url");
				jw_cstr(&req, ctx.remote_url);
			}
			if (ctx.branch != NULL) {
				jw_key(&req, "branch");
				jw_cstr(&req, ctx.branch);
			}
			jw_obj_close(&req);
		}
		context_free(&ctx);
	}
	shim_env(&req, 0);
	jw_obj_close(&req);
	shim_connect(s);
	shim_send_request(s, &req);
	jw_free(&req);
	s->stdin_open = 1;
	shim_relay(s);
}

/* Help for the shim installed as "shimbridge" (the sandbox's view of the bridge). */
static void
shim_self_usage(FILE *f)
{
	fprintf(f,
	    "usage: shimbridge list [--json]\n"
	    "       shimbridge --help | --version\n"
	    "\n"
	    "In this sandbox, some commands (gh, git's push and fetch, ...) run on the host\n"
	    "through the shimbridge bridge, which checks every call against a policy.\n"
	    "shimbridge list prints what this session may run, one line per tool, and the\n"
	    "repositories it may reach.\n"
	    "\n"
	    "A call the policy asks the operator about prints\n"
	    "  shimbridge: waiting for the operator to approve request N: COMMAND\n"
	    "and waits; a refused call prints\n"
	    "  shimbridge: refused: WHAT: WHY; WHAT TO DO INSTEAD\n"
	    "and exits 126. Other exit codes: 118 output limit, 119 tool or secret\n"
	    "unavailable, 120 no session, 121 busy, 122 bridge unreachable, 123 connection\n"
	    "lost, 124 timed out, 125 protocol error, 127 unknown tool.\n");
}

/* Invoked as "shimbridge": list, --help, --version. */
static void __attribute__((noreturn))
shim_self(struct shim *s, int argc, char **argv)
{
	struct jbuf req;
	int json = 0;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		shim_self_usage(argc < 2 ? stderr : stdout);
		exit(argc < 2 ? 64 : 0);
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("shimbridge (sandbox shim) %s (protocol %d)\n", SHIMBRIDGE_VERSION,
		    PROTO_VERSION);
		exit(0);
	}
	if (strcmp(argv[1], "list") != 0 || argc > 3 ||
	    (argc == 3 && strcmp(argv[2], "--json") != 0)) {
		shim_self_usage(stderr);
		exit(64);
	}
	json = argc == 3;
	shim_request_start(&req, "list");
	if (json) {
		jw_key(&req, "json");
		jw_bool(&req, 1);
	}
	jw_obj_close(&req);
	shim_connect(s);
	shim_send_request(s, &req);
	jw_free(&req);
	s->stdin_open = 0;
	shim_relay(s);
}

/* Help for the shim binary itself. */
static void
shim_usage(FILE *f)
{
	fprintf(f,
	    "usage: shimbridge-shim TOOL [ARG...]\n"
	    "       shimbridge-shim --help | --version\n"
	    "\n"
	    "Installed in a sandbox's PATH as links named after tools (gh, ...), as the\n"
	    "git remote helper git-remote-shimbridge, and as shimbridge (shimbridge list:\n"
	    "what this session may run). Each tool invocation forwards its\n"
	    "arguments, working directory, a few environment variables (TERM, LANG,\n"
	    "LC_*, NO_COLOR, COLUMNS, ...) and stdio to the shimbridge bridge, which runs\n"
	    "the real tool on the host, and exits with the tool's status.\n"
	    "\n"
	    "Environment: SHIMBRIDGE_SOCKET  bridge socket (default " SHIM_DEFAULT_SOCKET ")\n"
	    "\n"
	    "Exit codes: the tool's own status; if the tool died of a signal, the shim\n"
	    "dies of the same signal. The shim's own failures:\n"
	    "  118 output limit exceeded     119 tool or secret unavailable\n"
	    "  120 this account has no session 121 bridge busy, try again later\n"
	    "  122 bridge unreachable         123 connection to the bridge lost\n"
	    "  124 timed out                  125 protocol or internal error\n"
	    "  126 denied by policy           127 unknown tool\n");
}

int
main(int argc, char **argv)
{
	struct shim s;
	const char *name;

	memset(&s, 0, sizeof s);
	s.sock = -1;
	name = strrchr(argv[0], '/');
	name = name != NULL ? name + 1 : argv[0];
	if (*name == '\0')
		name = "shim";
	util_progname = name;
	s.tool = name;
	shim_signals(&s);

	if (strcmp(name, SHIM_HELPER_NAME) == 0)
		shim_helper(&s, argc, argv);
	if (strcmp(name, "shimbridge") == 0)
		shim_self(&s, argc, argv);
	if (strcmp(name, "shim") == 0 || strcmp(name, "shimbridge-shim") == 0) {
		if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
			shim_usage(argc < 2 ? stderr : stdout);
			exit(argc < 2 ? 64 : 0);
		}
		if (strcmp(argv[1], "--version") == 0) {
			printf("shimbridge-shim %s (protocol %d)\n", SHIMBRIDGE_VERSION, PROTO_VERSION);
			exit(0);
		}
		if (argv[1][0] == '-' || strlen(argv[1]) > REQ_MAX_NAME)
			die(64, "unknown option %s (see --help)", argv[1]);
		s.tool = argv[1];
		util_progname = argv[1];
		shim_tool(&s, argc - 1, argv + 1);
	}
	shim_tool(&s, argc, argv);
}
