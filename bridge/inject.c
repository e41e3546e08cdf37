/*
 * HTTP-layer credential injection (see inject.h and docs/INJECTOR.md).
 *
 * One struct exchange per request: the downstream request (the tool's, parsed by
 * evhttp's server), the policy verdict, and the upstream request (evhttp's client
 * over a bufferevent_openssl). Objects are never freed inside their own
 * callbacks: an exchange that is done is marked and freed from a zero-timeout
 * event. libevent frees the upstream request itself once its completion callback
 * has returned, and keeps a downstream request that we have not answered yet
 * (detached from its connection if the tool went away) until we answer it.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <sodium.h>

#include "inject.h"
#include "pushcmd.h"
#include "util.h"
#include "wipe.h"

#define INJECT_MAX_EXCHANGES	64		/* in flight per injector */
#define INJECT_HIGH_WATER	(256 * 1024)	/* downstream bytes before upstream pauses */
#define INJECT_MAX_UP_HEADERS	(256 * 1024)	/* upstream response head */
#define INJECT_SUMMARY_MAX	256
#define INJECT_PREFETCH_MAX	(8 * 1024 * 1024)	/* a prefetched answer's body */
#define INJECT_PREFETCH_AGE	30		/* seconds it may wait for the tool */
#define INJECT_PREFETCHES	2		/* per injector, each of its own target */
#define INJECT_IDLE_MAX		4		/* upstream connections kept open per injector */

/*
 * One upstream connection (TCP, and TLS on it for https): an exchange's while it
 * runs, then kept open in its injector's idle list for the next request to the
 * same upstream (HTTP/1.1 keep-alive), unless libevent closed it.
 */
struct upconn {
	TAILQ_ENTRY(upconn)		 entry;		/* in inj->idle while idle */
	struct evhttp_connection	*conn;
	SSL				*ssl;		/* owned by conn's bufferevent */
	int				 closed;	/* closed by either side: never reused */
	int				 nodelay;	/* TCP_NODELAY is set on its socket */
};
TAILQ_HEAD(upconns, upconn);

/* A GET made before the tool asks for it (inject_prefetch). */
enum prefetch_state {
	PF_PENDING,		/* upstream has not answered yet */
	PF_READY,		/* a 200 answer is held for the tool */
	PF_DONE,		/* used, failed or too old: the tool's requests go upstream */
};
struct prefetch {
	char			*uri;		/* the request target it answers */
	enum prefetch_state	 state;
	struct exchange		*ex;		/* the exchange fetching it, until freed */
	struct exchange		*waiter;	/* the tool's request waiting for it */
	struct evkeyvalq	 headers;	/* the answer's end-to-end headers */
	struct evbuffer		*body;
	int			 overflow;	/* the body passed INJECT_PREFETCH_MAX */
	int			 notify;	/* the first: its answer goes to prefetched */
	int			 told;		/* the prefetched callback ran */
	struct timeval		 ready;		/* when it was complete */
};

struct exchange {
	struct inject			*inj;
	TAILQ_ENTRY(exchange)		 entry;
	struct evhttp_request		*down;		/* until answered */
	int				 down_detached;	/* the tool's connection is gone */
	struct upconn			*uc;		/* ours, until freed or idle */
	struct evhttp_connection	*up_conn;	/* uc->conn */
	struct evhttp_request		*up;		/* libevent's, until its done cb */
	SSL				*ssl;		/* uc->ssl */
	int				 reusable;	/* uc may serve another request */
	int				 reused;	/* uc came from the idle list */
	int				 retried;	/* sent again once (inject_retry) */
	int				 safe;		/* sending it twice changes nothing (httppolicy) */
	int				 sent_body;	/* its body went upstream, not kept */
	struct event			*retry;		/* zero-timeout: send again */
	struct evdns_getaddrinfo_request *dns;
	struct event			*reap;		/* zero-timeout: finish and free */
	struct event			*wait;		/* the secret is being fetched: retry */
	char				 wait_addr[INET6_ADDRSTRLEN];
	unsigned int			 waits;
	struct prefetch			*pf;		/* this exchange fetches it (no down) */
	enum evhttp_cmd_type		 cmd;
	char				*summary;
	int				 started;	/* reply head sent downstream */
	int				 paused;	/* upstream reading disabled */
	int				 audited;
	int				 status;
	enum evhttp_request_error	 up_error;
	int				 up_error_set;
	unsigned long long		 bytes_up;
	unsigned long long		 bytes_down;
	unsigned char			*advert;	/* the start of an advertisement, or NULL */
	size_t				 nadvert;
};
TAILQ_HEAD(exchanges, exchange);

struct inject {
	struct event_base	*base;
	struct evhttp		*http;
	struct evdns_base	*dns;
	SSL_CTX			*ssl_ctx;	/* NULL for an http:// upstream */
	enum http_api		 api;
	char			*host;		/* required Host, or NULL */
	char			*up_host;	/* upstream host name (for SNI, verification) */
	char			*up_hosthdr;	/* Host header sent upstream */
	int			 up_port;
	int			 up_tls;
	enum inject_auth	 auth;
	char			*username;
	char			*placeholder;
	size_t			 max_body;
	const struct httppolicy_scope *scope;
	int			(*secret)(void *, const unsigned char **, size_t *);
	void			(*audit)(void *, const char *, int, unsigned long long,
				    unsigned long long, const char *);
	void			(*prefetched)(void *, const unsigned char *, size_t);
	int			(*push_check)(void *, const struct pushcmd *, size_t, char **);
	void			(*advertised)(void *, const unsigned char *, size_t);
	void			*arg;
	struct exchanges	 live;
	unsigned int		 nlive;
	struct upconns		 idle;		/* open upstream connections, unused */
	unsigned int		 nidle;
	unsigned int		 n401;
	unsigned int		 nrequests;
	struct prefetch		*pf[INJECT_PREFETCHES];	/* inject_prefetch's, or NULL */
	int			 closing;	/* inject_free runs */
};

static void	inject_request_cb(struct evhttp_request *, void *);
static void	inject_connect(struct exchange *, const char *addr);
static void	inject_close_cb(struct evhttp_connection *, void *);
static void	inject_resolve(struct exchange *);
static void	inject_reap(struct exchange *);
static void	inject_audit(struct exchange *, const char *);

/* libevent's allocator: every block wiped before it is freed (request heads hold the credential). */
void
inject_memory_init(void)
{
	static int	done;

	if (done)
		return;
	done = 1;
	event_set_mem_functions(malloc, wipe_realloc, wipe_free);
}

/*
 * TLS client contexts by CA file (NULL: the system store), kept across injectors:
 * loading the system store takes tens of milliseconds, and gh gets an injector per
 * call. An entry is reused while its file's identity, size and mtime are unchanged.
 */
#define INJECT_CTX_CACHE 8
static struct inject_ctx_entry {
	char		*path;		/* NULL: unused */
	dev_t		 dev;
	ino_t		 ino;
	off_t		 size;
	struct timespec	 mtime;
	SSL_CTX		*ctx;		/* one reference held here */
} inject_ctx_cache[INJECT_CTX_CACHE];

static void	inject_cause(char **, const char *, ...)
		    __attribute__((format(printf, 2, 3)));

/* A new client context trusting ca_file (NULL: the system store); NULL and *cause. */
static SSL_CTX *
inject_ssl_ctx_new(const char *ca_file, char **cause)
{
	SSL_CTX	*ctx;
	char	 s[256];

	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL ||
	    !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)) {
		SSL_CTX_free(ctx);
		inject_cause(cause, "cannot create a TLS context");
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/*
	 * Servers that end a close-delimited answer without close_notify: OpenSSL 3
	 * calls that an error, libevent 2.1 then drops the answer's end. Treat it as
	 * EOF (as allow_dirty_shutdown intends); length-delimited bodies are still
	 * checked for completeness by evhttp.
	 */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	if (ca_file != NULL ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1 :
	    SSL_CTX_set_default_verify_paths(ctx) != 1) {
		ERR_error_string_n(ERR_get_error(), s, sizeof s);
		ERR_clear_error();
		inject_cause(cause, "cannot load CA certificates from %s: %s",
		    ca_file != NULL ? ca_file : "the system store", s);
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

/* A client context for ca_file from the cache, or made and cached; a new reference. */
static SSL_CTX *
inject_ssl_ctx(const char *ca_file, char **cause)
{
	struct inject_ctx_entry	*e, *slot = NULL;
	const char		*path = ca_file != NULL ? ca_file : X509_get_default_cert_file();
	struct stat		 st;
	SSL_CTX			*ctx;
	size_t			 i;

	if (stat(path, &st) != 0)
		memset(&st, 0, sizeof st);	/* e.g. no bundle file: the hashed dir only */
	for (i = 0; i < INJECT_CTX_CACHE; i++) {
		e = &inject_ctx_cache[i];
		if (e->path == NULL) {
			if (slot == NULL)
				slot = e;
			continue;
		}
		if (strcmp(e->path, ca_file != NULL ? ca_file : "") != 0)
			continue;
		if (e->dev == st.st_dev && e->ino == st.st_ino && e->size == st.st_size &&
		    e->mtime.tv_sec == st.st_mtim.tv_sec &&
		    e->mtime.tv_nsec == st.st_mtim.tv_nsec) {
			SSL_CTX_up_ref(e->ctx);
			return e->ctx;
		}
		slot = e;	/* changed: replace it */
		break;
	}
	if ((ctx = inject_ssl_ctx_new(ca_file, cause)) == NULL)
		return NULL;
	if (slot == NULL)
		slot = &inject_ctx_cache[st.st_ino % INJECT_CTX_CACHE];
	if (slot->path != NULL) {
		free(slot->path);
		SSL_CTX_free(slot->ctx);
		slot->path = NULL;
	}
	if ((slot->path = strdup(ca_file != NULL ? ca_file : "")) == NULL)
		return ctx;	/* not cached */
	slot->dev = st.st_dev;
	slot->ino = st.st_ino;
	slot->size = st.st_size;
	slot->mtime = st.st_mtim;
	slot->ctx = ctx;
	SSL_CTX_up_ref(ctx);
	return ctx;
}

/* The injector's cached TLS client context for ca_file, for other upstream clients. */
SSL_CTX *
inject_client_ctx(const char *ca_file, char **cause)
{
	return inject_ssl_ctx(ca_file, cause);
}

/* Fill *cause with a formatted message (NULL if out of memory). */
static void
inject_cause(char **cause, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	if (vasprintf(cause, fmt, ap) == -1)
		*cause = NULL;
	va_end(ap);
}

/* Whether a header is one a proxy must not forward (hop-by-hop or ours to set). */
static int
inject_hop_header(const char *name, const char *connection)
{
	static const char *const drop[] = { "Host", "Authorization", "Connection",
	    "Keep-Alive", "TE", "Trailer", "Trailers", "Transfer-Encoding", "Upgrade",
	    "Cookie", "Set-Cookie", "Content-Length", "Expect", "HTTP2-Settings" };
	const char	*p;
	size_t		 i, n;

	for (i = 0; i < sizeof drop / sizeof drop[0]; i++)
		if (strcasecmp(name, drop[i]) == 0)
			return 1;
	if (strncasecmp(name, "Proxy-", 6) == 0)
		return 1;
	/* Headers the Connection header names are hop-by-hop too. */
	n = strlen(name);
	for (p = connection; p != NULL && *p != '\0';) {
		size_t	 len;

		p += strspn(p, " \t,");
		len = strcspn(p, " \t,");
		if (len == n && strncasecmp(p, name, n) == 0)
			return 1;
		p += len;
	}
	return 0;
}

/* Method name for a command, or NULL for one the injector never forwards. */
static const char *
inject_method(enum evhttp_cmd_type cmd)
{
	switch (cmd) {
	case EVHTTP_REQ_GET:	return "GET";
	case EVHTTP_REQ_POST:	return "POST";
	case EVHTTP_REQ_PATCH:	return "PATCH";
	case EVHTTP_REQ_PUT:	return "PUT";
	case EVHTTP_REQ_DELETE:	return "DELETE";
	case EVHTTP_REQ_HEAD:	return "HEAD";
	default:		return NULL;
	}
}

/* Report an exchange to the audit callback, once. */
static void
inject_audit(struct exchange *ex, const char *refusal)
{
	struct inject	*inj = ex->inj;

	if (ex->audited)
		return;
	ex->audited = 1;
	inj->nrequests++;
	if (inj->audit != NULL)
		inj->audit(inj->arg, ex->summary != NULL ? ex->summary : "(unparsed request)",
		    ex->status, ex->bytes_up, ex->bytes_down, refusal);
}

/* Answer the downstream request (if any) with status and {"message": msg}. */
static void
inject_answer(struct exchange *ex, int status, const char *msg)
{
	struct evbuffer	*body;
	size_t		 i;

	ex->status = status;
	if (ex->down == NULL)
		return;
	body = evbuffer_new();
	if (body == NULL) {
		struct evhttp_connection *c = evhttp_request_get_connection(ex->down);

		if (c != NULL)
			evhttp_connection_free(c);
		else
			evhttp_request_free(ex->down);
		ex->down = NULL;
		return;
	}
	evbuffer_add(body, "{\"message\":\"", 12);
	for (i = 0; msg[i] != '\0'; i++) {
		unsigned char	 c = (unsigned char)msg[i];

		if (c == '"' || c == '\\')
			evbuffer_add_printf(body, "\\%c", c);
		else if (c < 0x20)
			evbuffer_add_printf(body, "\\u%04x", c);
		else
			evbuffer_add(body, &msg[i], 1);
	}
	evbuffer_add(body, "\"}\n", 3);
	if (evhttp_request_get_connection(ex->down) != NULL) {
		struct evkeyvalq	*h = evhttp_request_get_output_headers(ex->down);

		evhttp_clear_headers(h);
		evhttp_add_header(h, "Content-Type", "application/json; charset=utf-8");
		evhttp_connection_set_closecb(evhttp_request_get_connection(ex->down), NULL,
		    NULL);
	}
	ex->bytes_down = evbuffer_get_length(body);
	evhttp_send_reply(ex->down, status, status == 403 ? "Forbidden" :
	    status == 502 ? "Bad Gateway" : status == 503 ? "Service Unavailable" :
	    "Error", body);		/* frees a detached request */
	ex->down = NULL;
	evbuffer_free(body);
}

/* Refuse: answer 403 (or status) with msg and audit it as refused. */
static void
inject_refuse(struct exchange *ex, int status, const char *msg)
{
	inject_answer(ex, status, msg);
	inject_audit(ex, msg);
}

/*
 * The prefetch will not answer the tool: a request waiting for it goes upstream
 * itself (unless the injector is being freed).
 */
static void
inject_prefetch_fail(struct prefetch *pf, struct inject *inj)
{
	struct exchange	*w = pf->waiter;

	pf->state = PF_DONE;
	pf->waiter = NULL;
	evhttp_clear_headers(&pf->headers);
	if (pf->body != NULL)
		evbuffer_free(pf->body);
	pf->body = NULL;
	if (pf->notify && !pf->told && inj->prefetched != NULL && !inj->closing) {
		pf->told = 1;
		inj->prefetched(inj->arg, NULL, 0);
	}
	if (w != NULL && !inj->closing)
		inject_resolve(w);
}

/* Answer the tool's request ex with the prefetched answer (used once). */
static void
inject_prefetch_serve(struct prefetch *pf, struct exchange *ex)
{
	struct evhttp_connection	*dc = evhttp_request_get_connection(ex->down);
	struct evkeyvalq		*out = evhttp_request_get_output_headers(ex->down);
	struct evkeyval			*kv;
	char				*sum = NULL;

	evhttp_clear_headers(out);
	TAILQ_FOREACH(kv, &pf->headers, next)
		evhttp_add_header(out, kv->key, kv->value);
	if (dc != NULL)
		evhttp_connection_set_closecb(dc, NULL, NULL);
	ex->status = 200;
	ex->started = 1;
	ex->bytes_down = evbuffer_get_length(pf->body);
	if (asprintf(&sum, "%s (prefetched)", ex->summary != NULL ? ex->summary : "GET") != -1) {
		free(ex->summary);
		ex->summary = sum;
	}
	evhttp_send_reply(ex->down, 200, "OK", pf->body);	/* frees a detached request */
	ex->down = NULL;
	pf->state = PF_DONE;
	evhttp_clear_headers(&pf->headers);
	evbuffer_free(pf->body);
	pf->body = NULL;
	inject_audit(ex, NULL);
	inject_reap(ex);
}

/*
 * If the tool's allowed request ex is the prefetched one (GET of the same target,
 * no Git-Protocol header, so the same answer), answer it from there, or let it
 * wait while the prefetch is under way. Returns 1 when ex is taken care of.
 */
static int
inject_prefetch_take(struct inject *inj, struct exchange *ex)
{
	struct prefetch	*pf = NULL;
	struct timeval	 now;
	size_t		 i;

	if (ex->cmd != EVHTTP_REQ_GET || evhttp_find_header(
	    evhttp_request_get_input_headers(ex->down), "Git-Protocol") != NULL)
		return 0;
	for (i = 0; pf == NULL && i < INJECT_PREFETCHES; i++) {
		if (inj->pf[i] != NULL && inj->pf[i]->state != PF_DONE &&
		    strcmp(evhttp_request_get_uri(ex->down), inj->pf[i]->uri) == 0)
			pf = inj->pf[i];
	}
	if (pf == NULL)
		return 0;
	if (pf->state == PF_PENDING) {
		if (pf->waiter != NULL)
			return 0;
		pf->waiter = ex;
		return 1;
	}
	event_base_gettimeofday_cached(inj->base, &now);
	if (now.tv_sec - pf->ready.tv_sec > INJECT_PREFETCH_AGE) {
		inject_prefetch_fail(pf, inj);
		return 0;
	}
	inject_prefetch_serve(pf, ex);
	return 1;
}

/*
 * No Nagle on an upstream socket (once it exists: libevent makes it on connect).
 * libevent writes a request's head and body as two TLS records; on a connection
 * kept open, the body then waited for the ACK of the head, which upstream delays
 * (up to 40 ms on Linux) while it waits for the body.
 */
static void
inject_nodelay(struct upconn *uc)
{
	int	fd, one = 1;

	if (uc->nodelay || (fd = bufferevent_getfd(evhttp_connection_get_bufferevent(
	    uc->conn))) < 0)
		return;
	uc->nodelay = setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
}

/* libevent closed an upstream connection (upstream did, or an error): not for reuse. */
static void
inject_up_close_cb(struct evhttp_connection *c, void *arg)
{
	struct upconn	*uc = arg;

	(void)c;
	uc->closed = 1;
}

/*
 * An exchange is done with its upstream connection: kept for the next request if
 * it read a whole answer and is still open (and there is room), else freed.
 */
static void
inject_upconn_release(struct inject *inj, struct upconn *uc, int reusable)
{
	if (reusable && !uc->closed && !inj->closing && inj->nidle < INJECT_IDLE_MAX) {
		TAILQ_INSERT_TAIL(&inj->idle, uc, entry);
		inj->nidle++;
		return;
	}
	evhttp_connection_set_closecb(uc->conn, NULL, NULL);
	evhttp_connection_free(uc->conn);	/* frees a pending up request too */
	free(uc);
}

/* An idle upstream connection that is still open, or NULL; closed ones are freed. */
static struct upconn *
inject_upconn_take(struct inject *inj)
{
	struct upconn	*uc;

	while ((uc = TAILQ_FIRST(&inj->idle)) != NULL) {
		TAILQ_REMOVE(&inj->idle, uc, entry);
		inj->nidle--;
		if (!uc->closed)
			return uc;
		inject_upconn_release(inj, uc, 0);
	}
	return NULL;
}

/* Free an exchange and everything it still holds; no callbacks run. */
static void
inject_exchange_free(struct exchange *ex)
{
	struct inject	*inj = ex->inj;
	size_t		 i;

	if (ex->dns != NULL) {
		evdns_getaddrinfo_cancel(ex->dns);	/* its callback sees EVUTIL_EAI_CANCEL */
		ex->dns = NULL;
	}
	if (ex->uc != NULL)
		inject_upconn_release(inj, ex->uc, ex->reusable);
	if (ex->down != NULL) {
		struct evhttp_connection *c = evhttp_request_get_connection(ex->down);

		if (c != NULL) {
			evhttp_connection_set_closecb(c, NULL, NULL);
			evhttp_connection_free(c);	/* frees the request */
		} else
			evhttp_request_free(ex->down);
	}
	if (ex->reap != NULL)
		event_free(ex->reap);
	if (ex->wait != NULL)
		event_free(ex->wait);
	if (ex->retry != NULL)
		event_free(ex->retry);
	for (i = 0; i < INJECT_PREFETCHES; i++) {
		if (inj->pf[i] != NULL && inj->pf[i]->waiter == ex)
			inj->pf[i]->waiter = NULL;
	}
	if (ex->pf != NULL) {
		ex->pf->ex = NULL;
		if (ex->pf->state == PF_PENDING)
			inject_prefetch_fail(ex->pf, inj);	/* never connected */
	}
	free(ex->advert);
	TAILQ_REMOVE(&inj->live, ex, entry);
	inj->nlive--;
	free(ex->summary);
	free(ex);
}

/* Zero-timeout event: finish what is left of an exchange and free it. */
static void
inject_reap_cb(evutil_socket_t fd, short what, void *arg)
{
	struct exchange	*ex = arg;

	(void)fd;
	(void)what;
	if (!ex->audited) {
		if (ex->started) {
			ex->status = ex->status == 0 ? 502 : ex->status;
			inject_audit(ex, "the answer was cut short (tool or upstream went away)");
		} else
			inject_refuse(ex, 502, "shimbridge: the request was abandoned");
	}
	inject_exchange_free(ex);
}

/* Schedule an exchange to be finished and freed outside any of its callbacks. */
static void
inject_reap(struct exchange *ex)
{
	event_active(ex->reap, EV_TIMEOUT, 1);
}

/* The tool's connection closed: stop the exchange (its request is detached). */
static void
inject_close_cb(struct evhttp_connection *c, void *arg)
{
	struct exchange	*ex = arg;

	(void)c;
	if (ex == NULL)
		return;
	ex->down_detached = 1;
	inject_reap(ex);
}

/* Why the upstream request failed, for the tool (a static or thread-local string). */
static const char *
inject_up_reason(struct exchange *ex, char *buf, size_t len)
{
	struct inject	*inj = ex->inj;
	unsigned long	 e = 0;
	long		 v;

	if (ex->ssl != NULL && (v = SSL_get_verify_result(ex->ssl)) != X509_V_OK) {
		snprintf(buf, len, "shimbridge: the TLS certificate of %s was not accepted (%s); "
		    "the request was not sent. The operator must fix the host's CA setting.",
		    inj->up_hosthdr, X509_verify_cert_error_string(v));
		return buf;
	}
	if (ex->up_conn != NULL)
		e = bufferevent_get_openssl_error(evhttp_connection_get_bufferevent(ex->up_conn));
	if (e != 0) {
		char	 s[256];

		ERR_error_string_n(e, s, sizeof s);
		snprintf(buf, len, "shimbridge: TLS with %s failed (%s); the request was not "
		    "answered", inj->up_hosthdr, s);
		return buf;
	}
	if (ex->up_error_set && ex->up_error == EVREQ_HTTP_TIMEOUT)
		snprintf(buf, len, "shimbridge: %s did not answer within %d s", inj->up_hosthdr,
		    INJECT_TIMEOUT);
	else if (ex->up_error_set && (ex->up_error == EVREQ_HTTP_INVALID_HEADER ||
	    ex->up_error == EVREQ_HTTP_DATA_TOO_LONG))
		snprintf(buf, len, "shimbridge: %s sent an answer that could not be parsed "
		    "or was too large", inj->up_hosthdr);
	else
		snprintf(buf, len, "shimbridge: could not reach %s (connection failed or "
		    "closed); try again later", inj->up_hosthdr);
	return buf;
}

/* Upstream answer head: start the reply downstream with its status and headers. */
static int
inject_up_header_cb(struct evhttp_request *up, void *arg)
{
	struct exchange		*ex = arg;
	struct evkeyvalq	*in = evhttp_request_get_input_headers(up);
	struct evkeyvalq	*out;
	struct evkeyval		*kv;
	const char		*conn, *te;
	int			 code = evhttp_request_get_response_code(up);

	if (ex->uc != NULL)
		inject_nodelay(ex->uc);	/* if its socket did not exist yet when sent */
	ex->status = code;
	if (code == 401)
		ex->inj->n401++;
	if (ex->pf != NULL) {
		/* Kept for the tool: end-to-end headers, the length set again when served. */
		conn = evhttp_find_header(in, "Connection");
		TAILQ_FOREACH(kv, in, next) {
			if (!inject_hop_header(kv->key, conn) &&
			    strcasecmp(kv->key, "Content-Length") != 0)
				evhttp_add_header(&ex->pf->headers, kv->key, kv->value);
		}
		ex->started = 1;
		return 0;
	}
	if (ex->down == NULL || evhttp_request_get_connection(ex->down) == NULL) {
		/* libevent fails the request: the done callback runs with NULL, then frees it. */
		inject_reap(ex);
		return -1;
	}
	out = evhttp_request_get_output_headers(ex->down);
	evhttp_clear_headers(out);
	conn = evhttp_find_header(in, "Connection");
	te = evhttp_find_header(in, "Transfer-Encoding");
	TAILQ_FOREACH(kv, in, next) {
		if (inject_hop_header(kv->key, conn) && !(strcasecmp(kv->key,
		    "Content-Length") == 0 && te == NULL))
			continue;
		evhttp_add_header(out, kv->key, kv->value);
	}
	ex->started = 1;
	evhttp_send_reply_start(ex->down, code, evhttp_request_get_response_code_line(up));
	return 0;
}

/* The tool's side drained its output: read from upstream again. */
static void
inject_drained_cb(struct evhttp_connection *c, void *arg)
{
	struct exchange	*ex = arg;

	(void)c;
	if (ex->paused && ex->up_conn != NULL) {
		ex->paused = 0;
		bufferevent_enable(evhttp_connection_get_bufferevent(ex->up_conn), EV_READ);
	}
}

/* A piece of the upstream body: pass it on, pausing upstream above the high mark. */
static void
inject_up_chunk_cb(struct evhttp_request *up, void *arg)
{
	struct exchange			*ex = arg;
	struct evbuffer			*buf = evhttp_request_get_input_buffer(up);
	struct evhttp_connection	*dc;

	if (ex->pf != NULL) {
		ex->bytes_down += evbuffer_get_length(buf);
		if (ex->pf->body == NULL || ex->pf->overflow ||
		    evbuffer_get_length(ex->pf->body) + evbuffer_get_length(buf) >
		    INJECT_PREFETCH_MAX) {
			ex->pf->overflow = 1;
			evbuffer_drain(buf, evbuffer_get_length(buf));
		} else
			evbuffer_add_buffer(ex->pf->body, buf);
		return;
	}
	if (ex->down == NULL || (dc = evhttp_request_get_connection(ex->down)) == NULL) {
		inject_reap(ex);
		return;
	}
	ex->bytes_down += evbuffer_get_length(buf);
	if (ex->advert != NULL && ex->status == 200 && ex->nadvert < INJECT_ADVERT_MAX)
		ex->nadvert += (size_t)evbuffer_copyout(buf, ex->advert + ex->nadvert,
		    INJECT_ADVERT_MAX - ex->nadvert);
	evhttp_send_reply_chunk_with_cb(ex->down, buf, inject_drained_cb, ex);
	if (evbuffer_get_length(bufferevent_get_output(evhttp_connection_get_bufferevent(dc)))
	    > INJECT_HIGH_WATER && ex->up_conn != NULL) {
		ex->paused = 1;
		bufferevent_disable(evhttp_connection_get_bufferevent(ex->up_conn), EV_READ);
	}
}

/* Upstream error kind, kept for the message. */
static void
inject_up_error_cb(enum evhttp_request_error e, void *arg)
{
	struct exchange	*ex = arg;

	ex->up_error = e;
	ex->up_error_set = 1;
}

/* Zero-timeout event: drop the connection that failed, and the idle ones, and send again. */
static void
inject_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct exchange	*ex = arg;
	struct upconn	*uc;

	(void)fd;
	(void)what;
	if (ex->uc != NULL)
		inject_upconn_release(ex->inj, ex->uc, 0);
	ex->uc = NULL;
	ex->up_conn = NULL;
	ex->ssl = NULL;
	ex->up_error_set = 0;
	/* Kept as long as the one that failed: likely closed by upstream too. */
	while ((uc = TAILQ_FIRST(&ex->inj->idle)) != NULL) {
		TAILQ_REMOVE(&ex->inj->idle, uc, entry);
		ex->inj->nidle--;
		inject_upconn_release(ex->inj, uc, 0);
	}
	inject_connect(ex, NULL);	/* none idle: a new connection */
}

/*
 * A request sent on a kept connection that upstream had closed (servers close idle
 * connections when they like, and may do so as the request goes out) failed with
 * no answer at all: send it once more on a new connection, as HTTP/1.1 clients do
 * (RFC 9112, 9.3.1), when that cannot do anything twice: the policy found it safe
 * (GET, HEAD, a GraphQL query, a fetch's upload-pack POST; not a mutation or a
 * push), no byte of an answer seen, not a timeout. Returns whether it will be sent
 * again (from an event: the failed connection cannot be freed inside its own
 * callback).
 */
static int
inject_retry(struct exchange *ex)
{
	if (!ex->reused || ex->retried || ex->started || !ex->safe || ex->sent_body ||
	    ex->pf != NULL || ex->bytes_down != 0 || ex->down == NULL || ex->down_detached ||
	    ex->inj->closing || (ex->up_error_set && ex->up_error == EVREQ_HTTP_TIMEOUT))
		return 0;
	if (ex->retry == NULL &&
	    (ex->retry = event_new(ex->inj->base, -1, 0, inject_retry_cb, ex)) == NULL)
		return 0;
	ex->retried = 1;
	event_active(ex->retry, EV_TIMEOUT, 1);
	return 1;
}

/* Upstream request finished (up has a status) or failed (NULL or status 0). */
static void
inject_up_done_cb(struct evhttp_request *up, void *arg)
{
	struct exchange	*ex = arg;
	char		 why[512];

	ex->up = NULL;		/* libevent frees it when we return */
	if (ex->pf != NULL) {
		struct prefetch	*pf = ex->pf;
		struct exchange	*w;

		if (pf->state == PF_DONE) {
			/* Dropped while under way (inject_prefetch_drop). */
			inject_audit(ex, "prefetch dropped: the tool's own request goes upstream");
		} else if (up != NULL && evhttp_request_get_response_code(up) == 200 &&
		    !pf->overflow && pf->body != NULL) {
			evbuffer_add_buffer(pf->body, evhttp_request_get_input_buffer(up));
			pf->state = PF_READY;
			ex->reusable = 1;
			event_base_gettimeofday_cached(ex->inj->base, &pf->ready);
			inject_audit(ex, NULL);
			if (pf->notify && ex->inj->prefetched != NULL && !pf->told) {
				pf->told = 1;
				size_t		 blen = evbuffer_get_length(pf->body);
				unsigned char	*b = evbuffer_pullup(pf->body, -1);

				ex->inj->prefetched(ex->inj->arg, b, b != NULL ? blen : 0);
			}
			if ((w = pf->waiter) != NULL) {
				pf->waiter = NULL;
				inject_prefetch_serve(pf, w);
			}
		} else {
			if (ex->status == 0)
				ex->status = 502;
			inject_audit(ex, pf->overflow ? "prefetched answer too large; not kept" :
			    "prefetch failed; the tool's own request goes upstream");
			inject_prefetch_fail(pf, ex->inj);
		}
		inject_reap(ex);
		return;
	}
	if (up == NULL || evhttp_request_get_response_code(up) == 0) {
		if (inject_retry(ex))
			return;
		if (!ex->started) {
			inject_refuse(ex, 502, inject_up_reason(ex, why, sizeof why));
		} else {
			/* Cut short: the tool must not take a truncated body for a whole one. */
			ex->status = ex->status == 0 ? 502 : ex->status;
			inject_audit(ex, "the upstream answer was cut short");
		}
		inject_reap(ex);
		return;
	}
	if (!ex->started && inject_up_header_cb(up, ex) != 0) {
		inject_reap(ex);
		return;
	}
	if (ex->advert != NULL && ex->status == 200 && ex->inj->advertised != NULL)
		ex->inj->advertised(ex->inj->arg, ex->advert, ex->nadvert);
	if (ex->down != NULL) {
		struct evhttp_connection *dc = evhttp_request_get_connection(ex->down);

		if (dc != NULL)
			evhttp_connection_set_closecb(dc, NULL, NULL);
		evhttp_send_reply_end(ex->down);	/* frees a detached request */
		ex->down = NULL;
	}
	/* The whole answer was read: the connection can carry the next request. */
	ex->reusable = !ex->paused;
	inject_audit(ex, NULL);
	inject_reap(ex);
}

/* Build the credential header value in guarded memory; NULL if unavailable. */
static char *
inject_credential(struct inject *inj, size_t *lenp)
{
	const unsigned char	*val;
	size_t			 len, i, n, ulen, b64;
	char			*out, *raw;

	if (inj->secret == NULL || inj->secret(inj->arg, &val, &len) != 0 || len == 0 ||
	    len > 16384)
		return NULL;
	if (inj->auth == INJECT_AUTH_TOKEN) {
		for (i = 0; i < len; i++)
			if (val[i] <= 0x20 || val[i] >= 0x7f)
				return NULL;	/* would break the header */
		n = 6 + len + 1;
		if ((out = sodium_malloc(n)) == NULL)
			return NULL;
		memcpy(out, "token ", 6);
		memcpy(out + 6, val, len);
		out[n - 1] = '\0';
		*lenp = n;
		return out;
	}
	ulen = strlen(inj->username);
	if ((raw = sodium_malloc(ulen + 1 + len)) == NULL)
		return NULL;
	memcpy(raw, inj->username, ulen);
	raw[ulen] = ':';
	memcpy(raw + ulen + 1, val, len);
	b64 = sodium_base64_ENCODED_LEN(ulen + 1 + len, sodium_base64_VARIANT_ORIGINAL);
	n = 6 + b64;
	if ((out = sodium_malloc(n)) == NULL) {
		sodium_free(raw);
		return NULL;
	}
	memcpy(out, "Basic ", 6);
	sodium_bin2base64(out + 6, b64, (unsigned char *)raw, ulen + 1 + len,
	    sodium_base64_VARIANT_ORIGINAL);
	sodium_free(raw);
	*lenp = n;
	return out;
}

/* Timer: ask for the secret again. */
static void
inject_wait_cb(evutil_socket_t fd, short what, void *arg)
{
	struct exchange	*ex = arg;

	(void)fd;
	(void)what;
	inject_connect(ex, ex->wait_addr[0] != '\0' ? ex->wait_addr : NULL);
}

/*
 * Whether the secret is being fetched (the callback returned 1: a session's first
 * GitHub App token): then ask again every 100 ms, for at most INJECT_TIMEOUT.
 */
static int
inject_secret_wait(struct exchange *ex, const char *addr)
{
	struct inject		*inj = ex->inj;
	struct timeval		 tv = { 0, 100000 };
	const unsigned char	*val;
	size_t			 len;

	if (inj->secret(inj->arg, &val, &len) != 1 || ex->waits >= INJECT_TIMEOUT * 10)
		return 0;
	if (ex->wait == NULL && (ex->wait = evtimer_new(inj->base, inject_wait_cb, ex)) == NULL)
		return 0;
	if (addr != ex->wait_addr)
		snprintf(ex->wait_addr, sizeof ex->wait_addr, "%s", addr != NULL ? addr : "");
	ex->waits++;
	evtimer_add(ex->wait, &tv);
	return 1;
}

/*
 * Send the request upstream: on an idle connection (addr NULL; none left: resolve
 * the host first), or on a new one to addr (numeric).
 */
static void
inject_connect(struct exchange *ex, const char *addr)
{
	struct inject		*inj = ex->inj;
	struct bufferevent	*bev = NULL;
	struct evkeyvalq	*in, *out;
	struct evkeyval		*kv;
	struct evbuffer		*body;
	struct timeval		 tv = { INJECT_TIMEOUT, 0 };
	const char		*conn;
	char			*cred = NULL, num[32];
	size_t			 credlen = 0, blen;
	struct in6_addr		 a6;

	if (ex->pf == NULL && (ex->down == NULL || ex->down_detached)) {
		inject_reap(ex);
		return;
	}
	if (inject_secret_wait(ex, addr))
		return;
	if ((cred = inject_credential(inj, &credlen)) == NULL) {
		inject_refuse(ex, 503, "shimbridge: the host's token is not available right now; "
		    "the operator can run `shimbridge check`.");
		goto fail;
	}
	if (addr == NULL) {
		if ((ex->uc = inject_upconn_take(inj)) == NULL) {
			sodium_free(cred);
			inject_resolve(ex);
			return;
		}
		ex->up_conn = ex->uc->conn;
		ex->ssl = ex->uc->ssl;
		ex->reused = 1;
		goto request;
	}
	if (inj->up_tls) {
		if ((ex->ssl = SSL_new(inj->ssl_ctx)) == NULL)
			goto nomem;
		/* Name checks: SNI and verification against the configured host name. */
		if (inet_pton(AF_INET, inj->up_host, &a6) == 1 ||
		    inet_pton(AF_INET6, inj->up_host, &a6) == 1) {
			if (!X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ex->ssl), inj->up_host))
				goto nomem;
		} else if (!SSL_set_tlsext_host_name(ex->ssl, inj->up_host) ||
		    !SSL_set1_host(ex->ssl, inj->up_host))
			goto nomem;
		SSL_set_verify(ex->ssl, SSL_VERIFY_PEER, NULL);
		bev = bufferevent_openssl_socket_new(inj->base, -1, ex->ssl,
		    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
		if (bev == NULL) {
			SSL_free(ex->ssl);
			ex->ssl = NULL;
			goto nomem;
		}
		bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	} else if ((bev = bufferevent_socket_new(inj->base, -1, BEV_OPT_CLOSE_ON_FREE |
	    BEV_OPT_DEFER_CALLBACKS)) == NULL)
		goto nomem;
	ex->up_conn = evhttp_connection_base_bufferevent_new(inj->base, NULL, bev, addr,
	    (unsigned short)inj->up_port);
	if (ex->up_conn == NULL) {
		bufferevent_free(bev);
		ex->ssl = NULL;
		goto nomem;
	}
	ex->uc = xcalloc(1, sizeof *ex->uc);
	ex->reused = 0;
	ex->uc->conn = ex->up_conn;
	ex->uc->ssl = ex->ssl;
	evhttp_connection_set_closecb(ex->up_conn, inject_up_close_cb, ex->uc);
	evhttp_connection_set_timeout_tv(ex->up_conn, &tv);
	evhttp_connection_set_retries(ex->up_conn, 0);
	evhttp_connection_set_max_headers_size(ex->up_conn, INJECT_MAX_UP_HEADERS);
request:
	if ((ex->up = evhttp_request_new(inject_up_done_cb, ex)) == NULL)
		goto nomem;
	evhttp_request_set_header_cb(ex->up, inject_up_header_cb);
	evhttp_request_set_chunked_cb(ex->up, inject_up_chunk_cb);
	evhttp_request_set_error_cb(ex->up, inject_up_error_cb);

	out = evhttp_request_get_output_headers(ex->up);
	if (ex->pf != NULL) {
		/* What git itself sends for a protocol v0 ref advertisement. */
		evhttp_add_header(out, "User-Agent", "git/shimbridge-prefetch");
		evhttp_add_header(out, "Accept", "*/*");
		evhttp_add_header(out, "Pragma", "no-cache");
	} else {
		in = evhttp_request_get_input_headers(ex->down);
		conn = evhttp_find_header(in, "Connection");
		TAILQ_FOREACH(kv, in, next) {
			if (!inject_hop_header(kv->key, conn))
				evhttp_add_header(out, kv->key, kv->value);
		}
	}
	evhttp_add_header(out, "Host", inj->up_hosthdr);
	evhttp_add_header(out, "Authorization", cred);
	if (ex->pf == NULL) {
		body = evhttp_request_get_input_buffer(ex->down);
		blen = evbuffer_get_length(body);
		if (blen > 0 || ex->cmd == EVHTTP_REQ_POST || ex->cmd == EVHTTP_REQ_PUT ||
		    ex->cmd == EVHTTP_REQ_PATCH) {
			snprintf(num, sizeof num, "%zu", blen);
			evhttp_add_header(out, "Content-Length", num);
		}
		if (ex->safe && ex->reused && blen > 0) {
			/* Copied: kept in case it must go again (inject_retry). */
			unsigned char *b = evbuffer_pullup(body, -1);

			if (b == NULL || evbuffer_add(evhttp_request_get_output_buffer(ex->up),
			    b, blen) != 0)
				goto nomem;
		} else {
			ex->sent_body = blen > 0;
			evbuffer_add_buffer(evhttp_request_get_output_buffer(ex->up), body);
		}
	}
	sodium_free(cred);
	cred = NULL;
	if (evhttp_make_request(ex->up_conn, ex->up, ex->cmd, ex->pf != NULL ? ex->pf->uri :
	    evhttp_request_get_uri(ex->down)) != 0) {
		ex->up = NULL;		/* freed by libevent */
		goto nomem;
	}
	inject_nodelay(ex->uc);
	return;
nomem:
	inject_refuse(ex, 502, "shimbridge: could not set up the upstream request "
	    "(out of memory or bad TLS setup)");
fail:
	if (cred != NULL)
		sodium_free(cred);
	if (ex->up != NULL) {
		evhttp_request_free(ex->up);
		ex->up = NULL;
	}
	inject_reap(ex);
}

/* evdns answer: connect to the first IPv4 address, else the first IPv6 one. */
static void
inject_dns_cb(int result, struct evutil_addrinfo *res, void *arg)
{
	struct exchange		*ex = arg;
	struct evutil_addrinfo	*ai, *pick = NULL;
	char			 addr[INET6_ADDRSTRLEN];
	const void		*src;

	/* Cancelled by inject_exchange_free: ex may be gone already. */
	if (result == EVUTIL_EAI_CANCEL) {
		if (res != NULL)
			evutil_freeaddrinfo(res);
		return;
	}
	ex->dns = NULL;
	for (ai = res; result == 0 && ai != NULL; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET) {
			pick = ai;
			break;
		}
		if (ai->ai_family == AF_INET6 && pick == NULL)
			pick = ai;
	}
	if (pick == NULL) {
		char	 why[512];

		snprintf(why, sizeof why, "shimbridge: cannot resolve %s (%s)", ex->inj->up_host,
		    result != 0 ? evutil_gai_strerror(result) : "no address");
		if (res != NULL)
			evutil_freeaddrinfo(res);
		inject_refuse(ex, 502, why);
		inject_reap(ex);
		return;
	}
	if (pick->ai_family == AF_INET)
		src = &((struct sockaddr_in *)(void *)pick->ai_addr)->sin_addr;
	else
		src = &((struct sockaddr_in6 *)(void *)pick->ai_addr)->sin6_addr;
	inet_ntop(pick->ai_family, src, addr, sizeof addr);
	evutil_freeaddrinfo(res);
	inject_connect(ex, addr);
}

/* Start name resolution (or connect at once for a numeric host). */
static void
inject_resolve(struct exchange *ex)
{
	struct inject			*inj = ex->inj;
	struct evutil_addrinfo		 hints;
	struct evdns_getaddrinfo_request *r;
	struct in6_addr			 a;

	if (inj->nidle > 0) {
		inject_connect(ex, NULL);	/* an open connection: no lookup, no handshake */
		return;
	}
	if (inet_pton(AF_INET, inj->up_host, &a) == 1 ||
	    inet_pton(AF_INET6, inj->up_host, &a) == 1) {
		inject_connect(ex, inj->up_host);
		return;
	}
	if (inj->dns == NULL && (inj->dns = evdns_base_new(inj->base,
	    EVDNS_BASE_INITIALIZE_NAMESERVERS | EVDNS_BASE_DISABLE_WHEN_INACTIVE)) == NULL) {
		inject_refuse(ex, 502, "shimbridge: no DNS resolver available");
		inject_reap(ex);
		return;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	/*
	 * The callback may run before this returns (hosts file), and then r is NULL;
	 * the callback clears ex->dns, so only a pending request is kept.
	 */
	r = evdns_getaddrinfo(inj->dns, inj->up_host, NULL, &hints, inject_dns_cb, ex);
	ex->dns = r;
}

/* The tool's Authorization header is this call's placeholder (or absent). */
static int
inject_placeholder_ok(struct inject *inj, const char *auth)
{
	const char	*p;

	if (auth == NULL)
		return 1;
	if (inj->placeholder == NULL)
		return 0;
	if (strncasecmp(auth, "token ", 6) != 0 && strncasecmp(auth, "bearer ", 7) != 0)
		return 0;
	p = auth + strcspn(auth, " ");
	p += strspn(p, " ");
	return strcmp(p, inj->placeholder) == 0;
}

/* Count the headers named name. */
static int
inject_header_count(struct evkeyvalq *h, const char *name)
{
	struct evkeyval	*kv;
	int		 n = 0;

	TAILQ_FOREACH(kv, h, next)
		if (strcasecmp(kv->key, name) == 0)
			n++;
	return n;
}

/* Whether the request target uri ends with tail. */
static int
inject_path_ends(const char *uri, const char *tail)
{
	size_t n = strlen(uri), t = strlen(tail);

	return n >= t && strcmp(uri + n - t, tail) == 0;
}

/*
 * A push (POST .../git-receive-pack) goes upstream only if the daemon's own
 * reading of its ref updates passes the push_check callback: 0 to go on, -1 when
 * it was refused (answered and audited here).
 */
static int
inject_push_checked(struct inject *inj, struct exchange *ex, const char *uri,
    const struct httppolicy_req *preq)
{
	struct pushcmd *u = NULL;
	const char *bad;
	char *why = NULL, msg[600];
	size_t n;
	int rc;

	if (inj->push_check == NULL || ex->cmd != EVHTTP_REQ_POST ||
	    !inject_path_ends(uri, "/git-receive-pack"))
		return 0;
	if (pushcmd_parse(preq->body, preq->body_len, &u, &n, &bad) != 0) {
		snprintf(msg, sizeof msg, "shimbridge: the push was not sent: %s", bad);
		inject_refuse(ex, 403, msg);
		return -1;
	}
	rc = inj->push_check(inj->arg, u, n, &why);
	free(u);
	if (rc != 0) {
		snprintf(msg, sizeof msg, "shimbridge: the push was not sent: %s",
		    why != NULL ? why : "refused by the push policy");
		free(why);
		inject_refuse(ex, 403, msg);
		return -1;
	}
	return 0;
}

/* A request from the tool: check it, then resolve and forward, or refuse. */
static void
inject_request_cb(struct evhttp_request *req, void *arg)
{
	struct inject			*inj = arg;
	struct exchange			*ex;
	struct evkeyvalq		*h = evhttp_request_get_input_headers(req);
	struct evbuffer			*body = evhttp_request_get_input_buffer(req);
	struct httppolicy_req		 preq;
	struct httppolicy_verdict	 v;
	const char			*method, *uri = evhttp_request_get_uri(req);
	const char			*host, *ce;
	char				 why[512];
	size_t				 n;

	if ((ex = calloc(1, sizeof *ex)) == NULL ||
	    (ex->reap = event_new(inj->base, -1, 0, inject_reap_cb, ex)) == NULL) {
		free(ex);
		evhttp_send_error(req, 503, "out of memory");
		return;
	}
	ex->inj = inj;
	ex->down = req;
	ex->cmd = evhttp_request_get_command(req);
	TAILQ_INSERT_TAIL(&inj->live, ex, entry);
	inj->nlive++;
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), inject_close_cb, ex);
	ex->bytes_up = evbuffer_get_length(body);

	method = inject_method(ex->cmd);
	n = uri != NULL ? strcspn(uri, "?") : 0;
	if (n > INJECT_SUMMARY_MAX)
		n = INJECT_SUMMARY_MAX;
	if (asprintf(&ex->summary, "%s %.*s", method != NULL ? method : "(other method)",
	    (int)n, uri != NULL ? uri : "") == -1)
		ex->summary = NULL;
	if (inj->nlive > INJECT_MAX_EXCHANGES) {
		inject_refuse(ex, 503, "shimbridge: too many requests at once; try again");
		goto reap;
	}
	if (method == NULL) {
		inject_refuse(ex, 403, "shimbridge: only GET, POST, PATCH, PUT, DELETE and HEAD "
		    "requests are forwarded");
		goto reap;
	}
	if (uri == NULL || uri[0] != '/') {
		inject_refuse(ex, 403, "shimbridge: the request target must be a path "
		    "(origin form)");
		goto reap;
	}
	if (inject_header_count(h, "Host") != 1 || inject_header_count(h,
	    "Authorization") > 1) {
		inject_refuse(ex, 403, "shimbridge: the request must carry one Host and at most "
		    "one Authorization header");
		goto reap;
	}
	host = evhttp_find_header(h, "Host");
	if (inj->host != NULL && strcasecmp(host, inj->host) != 0) {
		snprintf(why, sizeof why, "shimbridge: this call may only talk to %s, not %.200s",
		    inj->host, host);
		inject_refuse(ex, 403, why);
		goto reap;
	}
	if (!inject_placeholder_ok(inj, evhttp_find_header(h, "Authorization"))) {
		inject_refuse(ex, 403, "shimbridge: the request carried credentials of its own; "
		    "only this call's placeholder is accepted (the bridge adds the real token)");
		goto reap;
	}
	/* evhttp reads no body for GET/HEAD/DELETE: one there would be read as a request. */
	if (evhttp_find_header(h, "Content-Length") != NULL && ex->cmd != EVHTTP_REQ_POST &&
	    ex->cmd != EVHTTP_REQ_PUT && ex->cmd != EVHTTP_REQ_PATCH &&
	    strcmp(evhttp_find_header(h, "Content-Length"), "0") != 0) {
		inject_refuse(ex, 403, "shimbridge: a body is only accepted with POST, PATCH or "
		    "PUT");
		goto reap;
	}
	if (evhttp_find_header(h, "Transfer-Encoding") != NULL && ex->cmd != EVHTTP_REQ_POST &&
	    ex->cmd != EVHTTP_REQ_PUT && ex->cmd != EVHTTP_REQ_PATCH) {
		inject_refuse(ex, 403, "shimbridge: a body is only accepted with POST, PATCH or "
		    "PUT");
		goto reap;
	}
	/* The policy must be able to read the body: no compressed API requests. */
	ce = evhttp_find_header(h, "Content-Encoding");
	if (ce != NULL && strcasecmp(ce, "identity") != 0 && (inj->api != HTTP_API_GIT ||
	    n < 16 || strstr(uri, "/git-upload-pack") == NULL)) {
		inject_refuse(ex, 403, "shimbridge: compressed request bodies are not accepted "
		    "here");
		goto reap;
	}

	memset(&preq, 0, sizeof preq);
	memset(&v, 0, sizeof v);
	preq.method = method;
	preq.target = uri;
	preq.content_type = evhttp_find_header(h, "Content-Type");
	preq.body_len = evbuffer_get_length(body);
	preq.body = preq.body_len > 0 ? evbuffer_pullup(body, -1) : NULL;
	if (preq.body_len > 0 && preq.body == NULL) {
		inject_refuse(ex, 503, "shimbridge: out of memory");
		goto reap;
	}
	if (httppolicy_check(inj->scope, &preq, &v) != 0) {
		httppolicy_verdict_free(&v);
		inject_refuse(ex, 403, "shimbridge: the request could not be checked against the "
		    "policy, so it was not sent");
		goto reap;
	}
	if (v.summary != NULL) {
		free(ex->summary);
		ex->summary = v.summary;	/* transferred */
		v.summary = NULL;
	}
	if (!v.allowed) {
		snprintf(why, sizeof why, "shimbridge: %s", v.reason != NULL ? v.reason :
		    "refused by the HTTP policy");
		httppolicy_verdict_free(&v);
		inject_refuse(ex, 403, why);
		goto reap;
	}
	ex->safe = v.safe;
	httppolicy_verdict_free(&v);
	if (inj->api == HTTP_API_GIT && inject_push_checked(inj, ex, uri, &preq) != 0)
		goto reap;
	if (inj->api == HTTP_API_GIT && inj->advertised != NULL && ex->cmd == EVHTTP_REQ_GET &&
	    inject_path_ends(uri, "/info/refs?service=git-upload-pack"))
		ex->advert = malloc(INJECT_ADVERT_MAX);	/* NULL: not looked at */
	if (inject_prefetch_take(inj, ex))
		return;
	inject_resolve(ex);
	return;
reap:
	inject_reap(ex);
}

/* Forget the prefetched answers; a request waiting for one goes upstream. */
void
inject_prefetch_drop(struct inject *inj)
{
	size_t	i;

	for (i = 0; inj != NULL && i < INJECT_PREFETCHES; i++) {
		if (inj->pf[i] != NULL && inj->pf[i]->state != PF_DONE)
			inject_prefetch_fail(inj->pf[i], inj);
	}
}

/* Start a GET of uri upstream for the tool's first request of it (see inject.h). */
int
inject_prefetch(struct inject *inj, const char *uri, char **cause)
{
	struct httppolicy_req		 preq;
	struct httppolicy_verdict	 v;
	struct prefetch			*pf = NULL;
	struct exchange			*ex = NULL;
	size_t				 slot;

	*cause = NULL;
	if (uri[0] != '/') {
		inject_cause(cause, "prefetch of %.200s: not a path", uri);
		return -1;
	}
	/* The slots fill in order; the first one's answer goes to the prefetched callback. */
	for (slot = 0; slot < INJECT_PREFETCHES && inj->pf[slot] != NULL; slot++) {
		if (strcmp(inj->pf[slot]->uri, uri) == 0) {
			inject_cause(cause, "%.200s is prefetched already", uri);
			return -1;
		}
	}
	if (slot == INJECT_PREFETCHES) {
		inject_cause(cause, "at most %d prefetches per injector", INJECT_PREFETCHES);
		return -1;
	}
	memset(&preq, 0, sizeof preq);
	memset(&v, 0, sizeof v);
	preq.method = "GET";
	preq.target = uri;
	if (httppolicy_check(inj->scope, &preq, &v) != 0 || !v.allowed) {
		inject_cause(cause, "prefetch of %s refused: %s", uri, v.reason != NULL ?
		    v.reason : "the policy could not check it");
		httppolicy_verdict_free(&v);
		return -1;
	}
	if ((pf = calloc(1, sizeof *pf)) == NULL || (pf->uri = strdup(uri)) == NULL ||
	    (pf->body = evbuffer_new()) == NULL || (ex = calloc(1, sizeof *ex)) == NULL ||
	    (ex->reap = event_new(inj->base, -1, 0, inject_reap_cb, ex)) == NULL) {
		if (pf != NULL) {
			free(pf->uri);
			if (pf->body != NULL)
				evbuffer_free(pf->body);
		}
		free(pf);
		free(ex);
		httppolicy_verdict_free(&v);
		inject_cause(cause, "out of memory");
		return -1;
	}
	TAILQ_INIT(&pf->headers);
	pf->state = PF_PENDING;
	pf->ex = ex;
	pf->notify = slot == 0;
	inj->pf[slot] = pf;
	ex->inj = inj;
	ex->pf = pf;
	ex->cmd = EVHTTP_REQ_GET;
	if (asprintf(&ex->summary, "prefetch %s", v.summary != NULL ? v.summary : "GET") == -1)
		ex->summary = NULL;
	httppolicy_verdict_free(&v);
	TAILQ_INSERT_TAIL(&inj->live, ex, entry);
	inj->nlive++;
	inject_resolve(ex);
	return 0;
}

/* Split "http(s)://HOST[:PORT][/]" into the injector's upstream fields. */
static int
inject_parse_upstream(struct inject *inj, const char *url, char **cause)
{
	struct evhttp_uri	*u;
	const char		*scheme, *host, *path;
	int			 port, rc = -1;

	if (url == NULL || (u = evhttp_uri_parse_with_flags(url, 0)) == NULL) {
		inject_cause(cause, "upstream %s is not a URL", url != NULL ? url : "(none)");
		return -1;
	}
	scheme = evhttp_uri_get_scheme(u);
	host = evhttp_uri_get_host(u);
	path = evhttp_uri_get_path(u);
	port = evhttp_uri_get_port(u);
	if (scheme == NULL || (strcmp(scheme, "https") != 0 && strcmp(scheme, "http") != 0)) {
		inject_cause(cause, "upstream %s: the scheme must be https (or http)", url);
		goto out;
	}
	if (host == NULL || *host == '\0' || evhttp_uri_get_userinfo(u) != NULL ||
	    evhttp_uri_get_query(u) != NULL || evhttp_uri_get_fragment(u) != NULL ||
	    (path != NULL && *path != '\0' && strcmp(path, "/") != 0)) {
		inject_cause(cause, "upstream %s: only scheme://host[:port] is accepted", url);
		goto out;
	}
	inj->up_tls = strcmp(scheme, "https") == 0;
	inj->up_port = port > 0 ? port : inj->up_tls ? 443 : 80;
	inj->up_host = strdup(host);
	if (port > 0 && port != (inj->up_tls ? 443 : 80) && strchr(host, ':') != NULL)
		rc = asprintf(&inj->up_hosthdr, "[%s]:%d", host, port);
	else if (port > 0 && port != (inj->up_tls ? 443 : 80))
		rc = asprintf(&inj->up_hosthdr, "%s:%d", host, port);
	else
		rc = (inj->up_hosthdr = strdup(host)) == NULL ? -1 : 0;
	if (rc == -1 || inj->up_host == NULL) {
		inj->up_hosthdr = NULL;
		inject_cause(cause, "out of memory");
		rc = -1;
		goto out;
	}
	rc = 0;
out:
	evhttp_uri_free(u);
	return rc;
}

/* Strdup that keeps NULL; sets *bad on failure. */
static char *
inject_strdup(const char *s, int *bad)
{
	char	*d;

	if (s == NULL)
		return NULL;
	if ((d = strdup(s)) == NULL)
		*bad = 1;
	return d;
}

struct inject *
inject_new(struct event_base *base, int listen_fd, const struct inject_target *t,
    char **cause)
{
	struct inject	*inj = NULL;
	struct timeval	 tv = { INJECT_TIMEOUT, 0 };
	const char	*p;
	int		 bad = 0;

	*cause = NULL;
	inject_memory_init();
	if ((inj = calloc(1, sizeof *inj)) == NULL) {
		inject_cause(cause, "out of memory");
		goto fail;
	}
	TAILQ_INIT(&inj->live);
	TAILQ_INIT(&inj->idle);
	inj->base = base;
	inj->api = t->api;
	inj->auth = t->auth;
	inj->scope = t->scope;
	inj->secret = t->secret;
	inj->audit = t->audit;
	inj->prefetched = t->prefetched;
	inj->push_check = t->push_check;
	inj->advertised = t->advertised;
	inj->arg = t->arg;
	inj->max_body = t->max_body != 0 ? t->max_body : t->api == HTTP_API_GIT ?
	    INJECT_MAX_BODY_GIT : INJECT_MAX_BODY_API;
	inj->host = inject_strdup(t->host, &bad);
	inj->username = inject_strdup(t->username, &bad);
	inj->placeholder = inject_strdup(t->placeholder, &bad);
	if (bad) {
		inject_cause(cause, "out of memory");
		goto fail;
	}
	if (t->scope == NULL || t->secret == NULL) {
		inject_cause(cause, "injector needs a policy scope and a secret");
		goto fail;
	}
	if (t->auth == INJECT_AUTH_BASIC) {
		if (t->username == NULL || *t->username == '\0') {
			inject_cause(cause, "injector: Basic authentication needs a username");
			goto fail;
		}
		for (p = t->username; *p != '\0'; p++)
			if (*p == ':' || (unsigned char)*p < 0x20 || *p == 0x7f) {
				inject_cause(cause, "injector: bad username");
				goto fail;
			}
	}
	if (t->placeholder != NULL)
		for (p = t->placeholder; *p != '\0'; p++)
			if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
				inject_cause(cause, "injector: bad placeholder");
				goto fail;
			}
	if (inject_parse_upstream(inj, t->upstream, cause) != 0)
		goto fail;
	if (inj->up_tls && (inj->ssl_ctx = inject_ssl_ctx(t->ca_file, cause)) == NULL)
		goto fail;
	if ((inj->http = evhttp_new(base)) == NULL) {
		inject_cause(cause, "cannot create the HTTP server");
		goto fail;
	}
	evhttp_set_max_headers_size(inj->http, INJECT_MAX_HEADERS);
	evhttp_set_max_body_size(inj->http, (ev_ssize_t)inj->max_body);
	evhttp_set_timeout_tv(inj->http, &tv);
	/* Every method evhttp knows reaches us, so that refusals are ours and audited. */
	evhttp_set_allowed_methods(inj->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
	    EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_default_content_type(inj->http, "application/json; charset=utf-8");
	evhttp_set_gencb(inj->http, inject_request_cb, inj);
	/* evconnlistener accepts until EAGAIN: a blocking listener would stall the loop. */
	if (evutil_make_socket_nonblocking(listen_fd) != 0 ||
	    evhttp_accept_socket(inj->http, listen_fd) != 0) {
		inject_cause(cause, "cannot listen on the injector socket");
		goto fail;
	}
	listen_fd = -1;		/* transferred */
	return inj;
fail:
	if (listen_fd != -1)
		evutil_closesocket(listen_fd);
	if (*cause == NULL)
		inject_cause(cause, "out of memory");
	inject_free(inj);
	return NULL;
}

void
inject_free(struct inject *inj)
{
	struct exchange	*ex;
	struct upconn	*uc;
	size_t		 i;

	if (inj == NULL)
		return;
	inj->closing = 1;
	while ((ex = TAILQ_FIRST(&inj->live)) != NULL) {
		if (!ex->audited) {
			ex->status = 0;
			inject_audit(ex, "the call ended before the answer was complete");
		}
		inject_exchange_free(ex);
	}
	while ((uc = TAILQ_FIRST(&inj->idle)) != NULL) {
		TAILQ_REMOVE(&inj->idle, uc, entry);
		inj->nidle--;
		inject_upconn_release(inj, uc, 0);
	}
	if (inj->http != NULL)
		evhttp_free(inj->http);
	if (inj->dns != NULL)
		evdns_base_free(inj->dns, 0);
	if (inj->ssl_ctx != NULL)
		SSL_CTX_free(inj->ssl_ctx);
	free(inj->host);
	free(inj->up_host);
	free(inj->up_hosthdr);
	free(inj->username);
	free(inj->placeholder);
	for (i = 0; i < INJECT_PREFETCHES; i++) {
		if (inj->pf[i] == NULL)
			continue;
		evhttp_clear_headers(&inj->pf[i]->headers);
		if (inj->pf[i]->body != NULL)
			evbuffer_free(inj->pf[i]->body);
		free(inj->pf[i]->uri);
		free(inj->pf[i]);
	}
	free(inj);
}

unsigned int
inject_unauthorized(const struct inject *inj)
{
	return inj->n401;
}

unsigned int
inject_requests(const struct inject *inj)
{
	return inj->nrequests;
}
