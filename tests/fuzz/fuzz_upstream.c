/*
 * libFuzzer target for the injector's upstream side (bridge/inject.c): kept
 * connections, the retry of a request on a kept connection that upstream closed,
 * prefetches, answers cut short or malformed. fuzz_inject feeds the injector any
 * bytes from the tool with no upstream at all; here the tool's requests are valid
 * ones from a fixed list, and the input scripts a real upstream on 127.0.0.1 (plain
 * HTTP): for each request it receives, answer, drop the connection unanswered,
 * answer and close, send raw bytes, cut the answer short, answer chunked, answer
 * late, answer and then close the idle connection a moment later, or send a big
 * answer (up to 1 MiB: the tool's side fills and the injector pauses upstream).
 *
 * Input: byte 0 picks the target (bit 0: git, else GHE), how many tool
 * connections run at once (bits 1-2: 1-4), for git a prefetch of the ref list
 * (bit 3), and slow tools, which start reading 20 ms after their request (bit 4);
 * byte 1 the number of tool requests (1-8); then one byte per request (its
 * kind, from the list below); the rest is upstream's script, one action (and its
 * operands) per request upstream receives, then "answer" for every later one.
 *
 * FUZZ_UPSTREAM_VERBOSE=1 prints each audit record (what the injector did).
 *
 * Checked for every input:
 *   - no crash, no leak, no hang (every tool connection gets its answer and EOF
 *     within 5 s);
 *   - each tool request is audited exactly once (refused, failed or forwarded; a
 *     prefetch has a record of its own);
 *   - upstream receives a request that is not safe to send twice (a mutation, a REST
 *     write, a push) at most once, and a safe one at most twice (one retry);
 *   - every request upstream receives carries the real credential and the tool's
 *     end-to-end headers, and never the tool's placeholder;
 *   - the tool never reads the secret back (unless the input itself holds it).
 */
#include <sys/socket.h>

#include <netinet/in.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <sodium.h>

#include "inject.h"

#include "fuzzsock.h"

#define SECRET		"fuzz-secret-7f3a9c"
#define MAX_REQS	8

/* The tool's requests: the target's path and body, and whether it may go twice. */
struct kind {
	const char	*method;
	const char	*target;
	const char	*body;
	int		 safe;
};

static const struct kind ghe_kinds[] = {
	{ "GET", "/api/v3/repos/o/r", NULL, 1 },
	{ "HEAD", "/api/v3/repos/o/r/issues", NULL, 1 },
	{ "POST", "/api/graphql",
	    "{\"query\":\"query{repository(owner:\\\"o\\\",name:\\\"r\\\"){id}}\"}", 1 },
	{ "POST", "/api/graphql", "{\"query\":\"mutation{addComment(input:{subjectId:"
	    "\\\"I_1\\\",body:\\\"b\\\"}){commentEdge{node{url}}}}\"}", 0 },
	{ "POST", "/api/v3/repos/o/r/issues", "{\"title\":\"t\"}", 0 },
};

static const struct kind git_kinds[] = {
	{ "GET", "/o/r.git/info/refs?service=git-upload-pack", NULL, 1 },
	{ "POST", "/o/r.git/git-upload-pack", "0009done\n", 1 },
	{ "GET", "/o/r.git/info/refs?service=git-receive-pack", NULL, 1 },
	{ "POST", "/o/r.git/git-receive-pack", "0000", 0 },
};

/* One tool connection: one request, read to EOF. */
struct tool {
	int		 fd;
	char		 req[1024];
	size_t		 len, off;
	int		 started, eof;
	struct fuzzsock_tail tail;
	struct event	*ev;
	struct event	*slow;		/* a slow reader: starts reading later */
};

/* One connection upstream accepted. */
struct upc {
	struct bufferevent	*bev;
	struct event		*timer;
	int			 timer_close;	/* the timer closes (else it answers) */
	int			 close_when_sent;
	int			 head;		/* the request being answered is a HEAD */
	struct upc		*next;
};

static struct event_base	*base;
static struct evconnlistener	*up_listener;
static int			 up_port;
static char			 sockpath[108];
static struct upc		*upcs;
static char			 big[16384];	/* a big answer's body, in pieces */
static const struct timeval	 slow_tv = { 0, 20000 };	/* a slow reader's delay */

/* Per input. */
static const uint8_t	*script;
static size_t		 script_len, script_off;
static int		 seen[MAX_REQS];	/* requests upstream received, by id */
static int		 safe_of[MAX_REQS];
static int		 audits, tools_done, echo_ok, prefetching, slow;
static char		 want_auth[128];	/* the Authorization header upstream must see */

static int	secret_cb(void *, const unsigned char **, size_t *);
static void	audit_cb(void *, const char *, int, unsigned long long, unsigned long long,
		    const char *);

static int
secret_cb(void *arg, const unsigned char **val, size_t *len)
{
	(void)arg;
	*val = (const unsigned char *)SECRET;
	*len = strlen(SECRET);
	return 0;
}

static void
audit_cb(void *arg, const char *summary, int status, unsigned long long up,
    unsigned long long down, const char *refusal)
{
	(void)arg;
	if (getenv("FUZZ_UPSTREAM_VERBOSE") != NULL)
		fprintf(stderr, "audit: %s -> %d (%llu up, %llu down)%s%s\n", summary, status,
		    up, down, refusal != NULL ? ": " : "", refusal != NULL ? refusal : "");
	if (summary == NULL)
		abort();
	if (!echo_ok && (strstr(summary, SECRET) != NULL ||
	    (refusal != NULL && strstr(refusal, SECRET) != NULL)))
		abort();
	audits++;
}

/* The next script byte, or -1 when it is used up. */
static int
next_byte(void)
{
	return script_off < script_len ? script[script_off++] : -1;
}

static void
upc_free(struct upc *u)
{
	struct upc **pp;

	for (pp = &upcs; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == u) {
			*pp = u->next;
			break;
		}
	}
	if (u->timer != NULL)
		event_free(u->timer);
	bufferevent_free(u->bev);	/* closes the socket */
	free(u);
}

/* A plain answer: 200 with a short body, kept open unless told. */
static void
upc_answer(struct upc *u, int close)
{
	evbuffer_add_printf(bufferevent_get_output(u->bev), "HTTP/1.1 200 OK\r\n"
	    "Content-Type: text/plain\r\nContent-Length: 3\r\n%s\r\n%s",
	    close ? "Connection: close\r\n" : "", u->head ? "" : "ok\n");
	u->close_when_sent = close;
}

static void
upc_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct upc *u = arg;

	(void)fd;
	(void)what;
	if (u->timer_close)
		upc_free(u);
	else
		upc_answer(u, 0);
}

static void
upc_later(struct upc *u, int close, int ms)
{
	struct timeval tv = { 0, ms * 1000 };

	if (u->timer == NULL && (u->timer = evtimer_new(base, upc_timer_cb, u)) == NULL)
		abort();
	u->timer_close = close;
	evtimer_add(u->timer, &tv);
}

/* What upstream does with one request it received; returns -1 if u is gone. */
static int
upc_act(struct upc *u)
{
	struct evbuffer *out = bufferevent_get_output(u->bev);
	int a = next_byte(), n, i, c;
	char ch;

	switch (a < 0 ? 0 : a % 9) {
	case 0:		/* answer, keep open */
		upc_answer(u, 0);
		return 0;
	case 1:		/* drop it unanswered (an idle connection's close, racing) */
		upc_free(u);
		return -1;
	case 2:		/* answer and close */
		upc_answer(u, 1);
		return 0;
	case 3:		/* raw bytes, then close */
	case 4:		/* a status line, raw header bytes, then close */
		if (a % 9 == 4)
			evbuffer_add_printf(out, "HTTP/1.1 200 OK\r\n");
		n = next_byte();
		for (i = 0; i < n && (c = next_byte()) >= 0; i++) {
			ch = (char)c;
			evbuffer_add(out, &ch, 1);
		}
		u->close_when_sent = 1;
		if (evbuffer_get_length(out) == 0) {
			upc_free(u);
			return -1;
		}
		return 0;
	case 5:		/* a length it does not keep: cut short */
		evbuffer_add_printf(out, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial");
		u->close_when_sent = 1;
		return 0;
	case 6:		/* chunked, kept open */
		evbuffer_add_printf(out, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
		return 0;
	case 7:		/* late, or answered then closed a moment later (idle timeout) */
		n = next_byte();
		if (n >= 0 && (n & 0x80)) {
			upc_answer(u, 0);
			upc_later(u, 1, n & 7);
		} else
			upc_later(u, 0, n < 0 ? 0 : n & 7);
		return 0;
	default:	/* 8: a big answer (16 KiB to 1 MiB), kept open: the injector pauses */
		n = next_byte();
		n = n < 0 ? 1 : (n & 63) + 1;
		evbuffer_add_printf(out, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n",
		    n * (int)sizeof big);
		for (i = 0; i < n && !u->head; i++)
			evbuffer_add_reference(out, big, sizeof big, NULL, NULL);
		return 0;
	}
}

/* Requests in: each whole one (head, and the body its length says) is acted on. */
static void
upc_read_cb(struct bufferevent *bev, void *arg)
{
	struct upc *u = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr p;
	char *head, *cl, *id;
	size_t hlen, blen;
	unsigned long k;

	for (;;) {
		p = evbuffer_search(in, "\r\n\r\n", 4, NULL);
		if (p.pos < 0) {
			if (evbuffer_get_length(in) > INJECT_MAX_HEADERS + 4096)
				abort();	/* the injector sends heads it bounded */
			return;
		}
		hlen = (size_t)p.pos + 4;
		if ((head = malloc(hlen + 1)) == NULL)
			abort();
		evbuffer_copyout(in, head, hlen);
		head[hlen] = '\0';
		blen = 0;
		if ((cl = strcasestr(head, "\r\nContent-Length:")) != NULL)
			blen = strtoul(cl + 17, NULL, 10);
		if (evbuffer_get_length(in) < hlen + blen) {
			free(head);
			return;
		}
		evbuffer_drain(in, hlen + blen);
		/* The real credential on every request, the tool's placeholder never. */
		if (strstr(head, want_auth) == NULL || strstr(head, "placeholder") != NULL)
			abort();
		u->head = strncmp(head, "HEAD ", 5) == 0;
		if ((id = strcasestr(head, "\r\nX-Fuzz-Id: ")) == NULL) {
			/* Only the injector's own prefetch has none. */
			if (strncmp(head, "GET /o/r.git/info/refs?service=git-upload-pack "
			    "HTTP/1.1\r\n", 57) != 0 || !prefetching)
				abort();	/* end-to-end headers are forwarded */
		}
		k = id != NULL ? strtoul(id + 13, NULL, 10) : MAX_REQS;
		free(head);
		if (k < MAX_REQS) {
			seen[k]++;
			if (seen[k] > (safe_of[k] ? 2 : 1)) {
				fprintf(stderr, "fuzz_upstream: request %lu (%s) reached upstream "
				    "%d times\n", k, safe_of[k] ? "safe" : "not safe", seen[k]);
				abort();
			}
		}
		if (upc_act(u) != 0)
			return;
	}
}

static void
upc_write_cb(struct bufferevent *bev, void *arg)
{
	struct upc *u = arg;

	if (u->close_when_sent && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		upc_free(u);
}

static void
upc_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		upc_free(arg);
}

static void
up_accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
    void *arg)
{
	struct upc *u = calloc(1, sizeof *u);

	(void)l;
	(void)sa;
	(void)salen;
	(void)arg;
	if (u == NULL || (u->bev = bufferevent_socket_new(base, fd,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL)
		abort();
	bufferevent_setcb(u->bev, upc_read_cb, upc_write_cb, upc_event_cb, u);
	bufferevent_enable(u->bev, EV_READ | EV_WRITE);
	u->next = upcs;
	upcs = u;
}

/* A slow reader's timer: now it reads. */
static void
tool_slow_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tool *t = arg;

	(void)fd;
	(void)what;
	event_add(t->ev, NULL);
}

/* Tool side: write the request, read everything until EOF. */
static void
tool_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tool *t = arg;
	ssize_t n;

	if ((what & EV_WRITE) && t->off < t->len) {
		n = write(fd, t->req + t->off, t->len - t->off);
		if (n > 0)
			t->off += (size_t)n;
		else if (n == -1 && errno != EAGAIN && errno != EINTR)
			t->off = t->len;
		if (t->off >= t->len) {
			event_del(t->ev);
			event_assign(t->ev, base, fd, EV_READ | EV_PERSIST, tool_cb, t);
			if (t->slow != NULL)
				evtimer_add(t->slow, &slow_tv);
			else
				event_add(t->ev, NULL);
		}
	}
	if ((what & EV_READ) && fuzzsock_ended(fuzzsock_read(fd, &t->tail, SECRET, echo_ok))) {
		event_del(t->ev);
		t->eof = 1;
		tools_done++;
		event_base_loopbreak(base);
	}
}

static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	*(int *)arg = 1;
	event_base_loopbreak(base);
}

/* Connect a tool and start its request. */
static void
tool_start(struct tool *t)
{
	t->fd = fuzzsock_connect(sockpath);
	if ((t->ev = event_new(base, t->fd, EV_READ | EV_WRITE | EV_PERSIST, tool_cb, t)) ==
	    NULL)
		abort();
	if (slow && (t->slow = evtimer_new(base, tool_slow_cb, t)) == NULL)
		abort();
	t->started = 1;
	event_add(t->ev, NULL);
}

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct sockaddr_in sin;
	socklen_t slen = sizeof sin;

	(void)argc;
	(void)argv;
	if (sodium_init() == -1)
		abort();
	inject_memory_init();
	if ((base = event_base_new()) == NULL)
		abort();
	memset(big, 'x', sizeof big);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	up_listener = evconnlistener_new_bind(base, up_accept_cb, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 64, (struct sockaddr *)&sin, sizeof sin);
	if (up_listener == NULL || getsockname(evconnlistener_get_fd(up_listener),
	    (struct sockaddr *)&sin, &slen) != 0)
		abort();
	up_port = ntohs(sin.sin_port);
	snprintf(sockpath, sizeof sockpath, "/tmp/fuzz_upstream.%d.sock", (int)getpid());
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static const char *const repos[] = { "o/r" };
	struct httppolicy_scope scope;
	struct inject_target t;
	struct inject *inj;
	struct tool tools[MAX_REQS];
	struct event *deadline;
	struct timeval tv = { 5, 0 };
	const struct kind *kinds, *k;
	size_t nkinds;
	char url[64], *cause = NULL;
	int git, at_once, nreq, i, next, timeout = 0;

	if (len < 2 || len > 4096)
		return 0;
	git = data[0] & 1;
	at_once = ((data[0] >> 1) & 3) + 1;
	slow = data[0] & 0x10;
	nreq = data[1] % MAX_REQS + 1;
	if (len < 2 + (size_t)nreq)
		return 0;
	kinds = git ? git_kinds : ghe_kinds;
	nkinds = git ? sizeof git_kinds / sizeof *git_kinds : sizeof ghe_kinds / sizeof *ghe_kinds;
	script = data + 2 + nreq;
	script_len = len - 2 - (size_t)nreq;
	script_off = 0;
	audits = tools_done = 0;
	prefetching = git && (data[0] & 8);
	memset(seen, 0, sizeof seen);
	echo_ok = memmem(data, len, SECRET, strlen(SECRET)) != NULL;

	if (git) {
		static const char basic[] = "x-access-token:" SECRET;
		char b64[sodium_base64_ENCODED_LEN(sizeof basic - 1,
		    sodium_base64_VARIANT_ORIGINAL)];

		sodium_bin2base64(b64, sizeof b64, (const unsigned char *)basic, sizeof basic - 1,
		    sodium_base64_VARIANT_ORIGINAL);
		snprintf(want_auth, sizeof want_auth, "\r\nAuthorization: Basic %s\r\n", b64);
	} else
		snprintf(want_auth, sizeof want_auth, "\r\nAuthorization: token %s\r\n", SECRET);

	memset(&scope, 0, sizeof scope);
	memset(&t, 0, sizeof t);
	scope.api = git ? HTTP_API_GIT : HTTP_API_GHE;
	scope.repos = repos;
	scope.nrepos = 1;
	scope.allow_push = 1;
	snprintf(url, sizeof url, "http://127.0.0.1:%d", up_port);
	t.api = scope.api;
	t.host = git ? NULL : "localhost:8443";
	t.upstream = url;
	t.auth = git ? INJECT_AUTH_BASIC : INJECT_AUTH_TOKEN;
	t.username = "x-access-token";
	t.placeholder = git ? NULL : "placeholder";
	t.scope = &scope;
	t.secret = secret_cb;
	t.audit = audit_cb;
	if ((inj = inject_new(base, fuzzsock_listen(sockpath), &t, &cause)) == NULL)
		abort();
	if (prefetching &&
	    inject_prefetch(inj, "/o/r.git/info/refs?service=git-upload-pack", &cause) != 0)
		abort();

	memset(tools, 0, sizeof tools);
	for (i = 0; i < nreq; i++) {
		k = &kinds[data[2 + i] % nkinds];
		safe_of[i] = k->safe;
		tools[i].fd = -1;
		tools[i].len = (size_t)snprintf(tools[i].req, sizeof tools[i].req,
		    "%s %s HTTP/1.1\r\nHost: %s\r\n%s%sX-Fuzz-Id: %d\r\n"
		    "Connection: close\r\nContent-Length: %zu\r\n\r\n%s", k->method, k->target,
		    git ? "127.0.0.1" : "localhost:8443",
		    git ? "" : "Authorization: token placeholder\r\n",
		    k->body != NULL && k->body[0] == '{' ? "Content-Type: application/json\r\n" :
		    "", i,
		    k->body != NULL ? strlen(k->body) : 0, k->body != NULL ? k->body : "");
	}
	deadline = evtimer_new(base, deadline_cb, &timeout);
	evtimer_add(deadline, &tv);
	/* at_once tools at a time; each one that ends starts the next. */
	for (next = 0; next < nreq && next < at_once; next++)
		tool_start(&tools[next]);
	while (tools_done < nreq && !timeout) {
		event_base_loop(base, EVLOOP_ONCE);
		while (next < nreq && next - tools_done < at_once)
			tool_start(&tools[next++]);
	}
	if (timeout) {
		fprintf(stderr, "fuzz_upstream: %d of %d tool requests unanswered after 5 s\n",
		    nreq - tools_done, nreq);
		abort();
	}
	/* A prefetch has a record of its own, if it ended by now. */
	if (audits < nreq || audits > nreq + prefetching) {
		fprintf(stderr, "fuzz_upstream: %d requests, %d audit records\n", nreq, audits);
		abort();
	}
	event_free(deadline);
	for (i = 0; i < nreq; i++) {
		if (tools[i].started) {
			if (tools[i].slow != NULL)
				event_free(tools[i].slow);
			event_free(tools[i].ev);
			close(tools[i].fd);
		}
	}
	inject_free(inj);
	while (upcs != NULL)
		upc_free(upcs);
	event_base_loop(base, EVLOOP_NONBLOCK);
	unlink(sockpath);
	free(cause);
	return 0;
}
