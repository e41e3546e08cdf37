/*
 * libFuzzer target for the injector's server side (bridge/inject.c): the input,
 * after one selector byte, is sent as raw bytes (one or more HTTP requests, any
 * garbage) over a real Unix socket to a fresh injector, whose evhttp parser, header
 * checks and HTTP policy (bridge/httppolicy.c) see it as they would a tool's. The
 * selector picks the target: GitHub (Host api.github.com), GHE (Host localhost:8443)
 * or git (with bit 0x40 of the selector, a prefetch of the git ref list is under way
 * too, inject_prefetch). The upstream is http://127.0.0.1:1, which refuses every
 * connection, so:
 *   - every request the injector reports must be refused or failed (a refusal reason
 *     always, never a forwarded answer), with a status of 4xx/5xx;
 *   - nothing the client reads back contains the secret (unless the input did);
 *   - no crash, no leak (the injector is freed after each input), no hang (the
 *     client's half-close ends every exchange; a 5 s deadline is a finding).
 */
#include <sys/socket.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <sodium.h>

#include "inject.h"

#include "fuzzsock.h"

#define SECRET	"fuzz-secret-7f3a9c"

static struct event_base	*base;
static char			 sockpath[108];

struct client {
	int		 fd;
	const uint8_t	*data;
	size_t		 len, off;
	int		 shut;
	int		 eof;
	int		 timeout;
	int		 echo_ok;	/* the input holds the secret: an echo is no leak */
	struct fuzzsock_tail tail;	/* to find the secret across reads */
	struct event	*ev;
};

/* The secret callback: a fixed value. */
static int
fuzz_secret(void *arg, const unsigned char **val, size_t *len)
{
	(void)arg;
	*val = (const unsigned char *)SECRET;
	*len = strlen(SECRET);
	return 0;
}

static int	input_has_secret;	/* the current input holds the secret itself */

/* The audit callback: with no reachable upstream, every request is refused or failed. */
static void
fuzz_audit(void *arg, const char *summary, int status, unsigned long long up,
    unsigned long long down, const char *refusal)
{
	(void)arg;
	(void)up;
	(void)down;
	if (summary == NULL || refusal == NULL || *refusal == '\0')
		abort();
	if (status != 0 && (status < 400 || status > 599))
		abort();
	if (!input_has_secret && (strstr(summary, SECRET) != NULL ||
	    strstr(refusal, SECRET) != NULL))
		abort();
}

/* Client side: write the input, half-close, read everything until EOF. */
static void
fuzz_client_cb(evutil_socket_t fd, short what, void *arg)
{
	struct client	*c = arg;
	ssize_t		 n;

	if (what & EV_WRITE) {
		if (c->off < c->len) {
			n = write(fd, c->data + c->off, c->len - c->off);
			if (n > 0)
				c->off += (size_t)n;
			else if (n == -1 && errno != EAGAIN && errno != EINTR)
				c->off = c->len;	/* the injector closed: stop writing */
		}
		if (c->off >= c->len && !c->shut) {
			shutdown(fd, SHUT_WR);
			c->shut = 1;
			event_del(c->ev);
			event_assign(c->ev, base, fd, EV_READ | EV_PERSIST, fuzz_client_cb, c);
			event_add(c->ev, NULL);
		}
	}
	if ((what & EV_READ) &&
	    fuzzsock_ended(fuzzsock_read(fd, &c->tail, SECRET, c->echo_ok))) {
		c->eof = 1;
		event_base_loopbreak(base);
	}
}

/* Deadline: a hang is a finding. */
static void
fuzz_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct client	*c = arg;

	(void)fd;
	(void)what;
	c->timeout = 1;
	event_base_loopbreak(base);
}

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (sodium_init() == -1)
		abort();
	inject_memory_init();
	if ((base = event_base_new()) == NULL)
		abort();
	snprintf(sockpath, sizeof sockpath, "/tmp/fuzz_inject.%d.sock", (int)getpid());
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static const char *const repos[] = { "o/r", "octo-org/widgets" };
	struct httppolicy_scope	 scope;
	struct inject_target	 t;
	struct inject		*inj;
	struct client		 c;
	struct event		*deadline;
	struct timeval		 tv = { 5, 0 };
	char			*cause;
	int			 sel;

	if (len < 1 || len > 256 * 1024)
		return 0;
	sel = data[0] % 3;
	memset(&scope, 0, sizeof scope);
	memset(&t, 0, sizeof t);
	scope.api = sel == 0 ? HTTP_API_GITHUB : sel == 1 ? HTTP_API_GHE : HTTP_API_GIT;
	scope.repos = repos;
	scope.nrepos = 2;
	scope.allow_push = data[0] & 0x80;
	t.api = scope.api;
	t.host = sel == 0 ? "api.github.com" : sel == 1 ? "localhost:8443" : NULL;
	t.upstream = "http://127.0.0.1:1";
	t.auth = sel == 2 ? INJECT_AUTH_BASIC : INJECT_AUTH_TOKEN;
	t.username = "x-access-token";
	t.placeholder = sel == 2 ? NULL : "placeholder";
	t.max_body = 1024 * 1024;
	t.scope = &scope;
	t.secret = fuzz_secret;
	t.audit = fuzz_audit;
	if ((inj = inject_new(base, fuzzsock_listen(sockpath), &t, &cause)) == NULL)
		abort();
	/*
	 * git with bit 0x40: a prefetch under way (it fails; a request waiting is sent
	 * on); with 0x80 (a push) as well, receive-pack's advertisement too, as a push's.
	 */
	if (sel == 2 && (data[0] & 0x40) &&
	    inject_prefetch(inj, "/o/r.git/info/refs?service=git-upload-pack", &cause) != 0)
		abort();
	if (sel == 2 && (data[0] & 0xc0) == 0xc0 &&
	    inject_prefetch(inj, "/o/r.git/info/refs?service=git-receive-pack", &cause) != 0)
		abort();

	memset(&c, 0, sizeof c);
	c.data = data + 1;
	c.len = len - 1;
	c.echo_ok = input_has_secret = memmem(data, len, SECRET, strlen(SECRET)) != NULL;
	c.fd = fuzzsock_connect(sockpath);
	c.ev = event_new(base, c.fd, EV_READ | EV_WRITE | EV_PERSIST, fuzz_client_cb, &c);
	deadline = evtimer_new(base, fuzz_deadline_cb, &c);
	event_add(c.ev, NULL);
	evtimer_add(deadline, &tv);
	event_base_dispatch(base);
	if (c.timeout) {
		fprintf(stderr, "fuzz_inject: no answer within 5 s\n");
		abort();
	}
	event_free(c.ev);
	event_free(deadline);
	close(c.fd);
	inject_free(inj);
	event_base_loop(base, EVLOOP_NONBLOCK);
	unlink(sockpath);
	return 0;
}
