/*
 * The push upstream as one request of our own. The mirror's hook used to run
 * `git push`, which is four programs (git, git-remote-http with libcurl and its
 * thirty libraries, send-pack, pack-objects) and two requests; the bridge's injector
 * already holds receive-pack's ref advertisement, so what is left is one POST. Here:
 * read the advertisement (capabilities, and the objects upstream has), build the
 * pack with pack-objects from the quarantine, send "<old> <new> <ref>" commands and
 * the pack in one POST (libevent's evhttp, as the daemon), and read receive-pack's
 * report. The old value of each command is the value the hook checked: upstream's
 * receive-pack moves a ref only from it, as `--force-with-lease` did.
 *
 * Only for an upstream the bridge's injector serves (plain http, no credential of
 * ours: the injector adds it and checks the updates itself) and a small pack (what
 * git would send in one buffer); anything else, or an advertisement that lacks what
 * an atomic, reported push needs, is left to git push (GITPUSH_FALLBACK), before
 * anything has gone upstream.
 */
#include <sys/resource.h>
#include <sys/socket.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "hygiene.h"
#include "util.h"
#include "valid.h"
#include "gitserve.h"

#define GITPUSH_AGENT	"git/shimbridge-" SHIMBRIDGE_VERSION

/*
 * The pkt-line of buf at offset *off: 0 with it in line and len (a flush: len 0 and
 * flush set), 1 at the end of buf, -1 if what is there is no pkt-line.
 */
static int
gitpush_pkt(const char *buf, size_t size, size_t *off, const char **line, size_t *len,
    int *flush)
{
	unsigned int	 n = 0;
	size_t		 i;
	int		 c;

	if (*off == size)
		return 1;
	if (size - *off < 4)
		return -1;
	for (i = 0; i < 4; i++) {
		c = (unsigned char)buf[*off + i];
		/* Either case, as git's own reader: a push upstream took must read as taken. */
		if (c >= '0' && c <= '9')
			n = n * 16 + (c - '0');
		else if (c >= 'a' && c <= 'f')
			n = n * 16 + (c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			n = n * 16 + (c - 'A' + 10);
		else
			return -1;
	}
	*flush = n == 0;
	if (n == 0) {
		*off += 4;
		*line = buf + *off;
		*len = 0;
		return 0;
	}
	if (n < 5 || n - 4 > size - *off - 4)
		return -1;
	*line = buf + *off + 4;
	*len = n - 4;
	*off += n;
	return 0;
}

/* Add one pkt-line holding buf[0..len); -1 if it cannot be one, or body is full. */
static int
gitpush_add_pkt(struct gitbuf *body, const char *buf, size_t len)
{
	char	hdr[5];

	if (len == 0 || len > 65516)
		return -1;
	snprintf(hdr, sizeof hdr, "%04zx", len + 4);
	return gitbuf_add(body, hdr, 4) == 0 && gitbuf_add(body, buf, len) == 0 ? 0 : -1;
}

/* Add one pkt-line formatted as printf does (no NUL in it); -1 as gitpush_add_pkt. */
static int __attribute__((format(printf, 2, 3)))
gitpush_add_pktf(struct gitbuf *body, const char *fmt, ...)
{
	va_list	 ap;
	char	*line;
	int	 rc;

	va_start(ap, fmt);
	rc = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -1;
	rc = gitpush_add_pkt(body, line, strlen(line));
	free(line);
	return rc;
}

/* Whether caps (space-separated) has word. */
static int
gitpush_has_cap(const char *caps, const char *word)
{
	size_t		 wl = strlen(word), l;
	const char	*p = caps;

	while (*p != '\0') {
		l = strcspn(p, " ");
		if (l == wl && strncmp(p, word, wl) == 0)
			return 1;
		p += l;
		p += strspn(p, " ");
	}
	return 0;
}

int
gitpush_parse_adv(const char *buf, size_t size, struct gitpush_adv *adv, char **cause)
{
	const char	*line, *nul;
	size_t		 off = 0, len, hexlen, i;
	int		 flush, r, first = 1;

	memset(adv, 0, sizeof *adv);
	/* "# service=git-receive-pack\n", flush (smart HTTP's preamble). */
	if (gitpush_pkt(buf, size, &off, &line, &len, &flush) != 0 || flush ||
	    len < 26 || memcmp(line, "# service=git-receive-pack", 26) != 0 ||
	    (len != 26 && !(len == 27 && line[26] == '\n')))
		goto bad;
	if (gitpush_pkt(buf, size, &off, &line, &len, &flush) != 0 || !flush)
		goto bad;
	for (;;) {
		if ((r = gitpush_pkt(buf, size, &off, &line, &len, &flush)) != 0)
			goto bad;		/* the list ends with a flush */
		if (flush)
			break;
		if (len > 0 && line[len - 1] == '\n')
			len--;
		nul = memchr(line, '\0', len);
		if (first != (nul != NULL))
			goto bad;
		if (first) {
			if (len - (nul + 1 - line) >= sizeof adv->caps)
				goto bad;
			memcpy(adv->caps, nul + 1, len - (nul + 1 - line));
			adv->caps[len - (nul + 1 - line)] = '\0';
			if (memchr(adv->caps, '\0', len - (nul + 1 - line)) != NULL)
				goto bad;
			len = nul - line;
			first = 0;
		}
		hexlen = memchr(line, ' ', len) != NULL ?
		    (size_t)((const char *)memchr(line, ' ', len) - line) : 0;
		if ((hexlen != 40 && hexlen != 64) || !valid_hex_lower(line, hexlen) ||
		    hexlen + 1 == len)
			goto bad;
		if (adv->hexlen != 0 && adv->hexlen != hexlen)
			goto bad;
		adv->hexlen = hexlen;
		for (i = hexlen + 1; i < len; i++) {
			if ((unsigned char)line[i] <= 0x20 || line[i] == 0x7f)
				goto bad;
		}
		/* An empty repository's "capabilities^{}" line names no object. */
		if (line[strspn(line, "0")] == ' ')
			continue;
		if (adv->n == GITPUSH_ADV_MAX)
			goto bad;
		memcpy(adv->oids[adv->n], line, hexlen);
		adv->oids[adv->n][hexlen] = '\0';
		adv->n++;
	}
	if (first || off != size)
		goto bad;
	return 0;
bad:
	xasprintf(cause, "upstream's ref advertisement for the push is not one git sends");
	return -1;
}

/* Add the pkt-lines of a report (a flush ends it) to res. */
static int
gitpush_report(const char *buf, size_t size, struct gitpush_result *res)
{
	const char	*line;
	size_t		 off = 0, len, i;
	int		 flush, r;

	while ((r = gitpush_pkt(buf, size, &off, &line, &len, &flush)) == 0) {
		if (flush) {
			res->ended = 1;
			return off == size ? 0 : -1;
		}
		if (res->ended)
			return -1;
		if (len > 0 && line[len - 1] == '\n')
			len--;
		for (i = 0; i < len; i++) {
			if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
				return -1;
		}
		if (len >= 7 && memcmp(line, "unpack ", 7) == 0) {
			if (res->unpack_seen)
				return -1;
			res->unpack_seen = 1;
			res->unpack_ok = len == 9 && memcmp(line + 7, "ok", 2) == 0;
			gitbuf_add(&res->unpack, line + 7, len - 7);
		} else if (len > 3 && memcmp(line, "ok ", 3) == 0) {
			res->ok++;
			gitbuf_add(&res->oks, line + 3, len - 3);
			gitbuf_add(&res->oks, "\n", 1);
		} else if (len > 3 && memcmp(line, "ng ", 3) == 0) {
			res->ng++;
			gitbuf_add(&res->ngs, line + 3, len - 3);
			gitbuf_add(&res->ngs, "\n", 1);
		} else
			return -1;
	}
	return r == 1 ? 0 : -1;
}

int
gitpush_parse_result(const char *buf, size_t size, int sideband, struct gitpush_result *res)
{
	struct gitbuf	 band1;
	const char	*line;
	size_t		 off = 0, len;
	int		 flush, r, rc = -1;

	if (!sideband)
		return gitpush_report(buf, size, res) == 0 && res->ended ? 0 : -1;
	gitbuf_init(&band1, GITPUSH_RESULT_MAX);
	while ((r = gitpush_pkt(buf, size, &off, &line, &len, &flush)) == 0) {
		if (flush)
			break;			/* the end of the multiplexed answer */
		if (len < 1)
			goto out;
		switch (line[0]) {
		case 1:
			if (gitbuf_add(&band1, line + 1, len - 1) != 0)
				goto out;
			break;
		case 2:
			gitbuf_add(&res->remote, line + 1, len - 1);
			break;
		case 3:
			gitbuf_add(&res->fatal, line + 1, len - 1);
			break;
		default:
			goto out;
		}
	}
	if (r < 0 || off != size)
		goto out;
	if (band1.len == 0 && res->fatal.len > 0) {
		rc = 0;			/* upstream gave up before its report: said in fatal */
		goto out;
	}
	rc = gitpush_report(band1.data == NULL ? "" : band1.data, band1.len, res) == 0 &&
	    res->ended ? 0 : -1;
out:
	gitbuf_free(&band1);
	return rc;
}

void
gitpush_result_init(struct gitpush_result *res)
{
	memset(res, 0, sizeof *res);
	gitbuf_init(&res->unpack, 1024);
	gitbuf_init(&res->oks, GITPUSH_RESULT_MAX);
	gitbuf_init(&res->ngs, GITPUSH_RESULT_MAX);
	gitbuf_init(&res->remote, GITPUSH_RESULT_MAX);
	gitbuf_init(&res->fatal, 4096);
}

void
gitpush_result_free(struct gitpush_result *res)
{
	gitbuf_free(&res->unpack);
	gitbuf_free(&res->oks);
	gitbuf_free(&res->ngs);
	gitbuf_free(&res->remote);
	gitbuf_free(&res->fatal);
}

/* One request's outcome, filled by gitpush_done(). */
struct gitpush_http {
	struct event_base	*base;
	int			 status;	/* HTTP status, 0 for none */
	int			 error;		/* an evhttp error came first */
	struct gitbuf		 body;
};

static void
gitpush_done(struct evhttp_request *req, void *arg)
{
	struct gitpush_http	*h = arg;
	struct evbuffer		*in;
	size_t			 len;

	if (req != NULL && !h->error) {
		h->status = evhttp_request_get_response_code(req);
		in = evhttp_request_get_input_buffer(req);
		len = evbuffer_get_length(in);
		if (len > 0 && gitbuf_add(&h->body, evbuffer_pullup(in, len), len) != 0)
			h->error = 1;
	}
	event_base_loopexit(h->base, NULL);
}

static void
gitpush_error(enum evhttp_request_error err, void *arg)
{
	struct gitpush_http	*h = arg;

	(void)err;
	h->error = 1;
}

/*
 * One request on conn, run to its end: 0 with h->status and h->body, -1 when no
 * answer came (the connection failed, timed out, or the answer was too large).
 */
static int
gitpush_request(struct event_base *base, struct evhttp_connection *conn, const char *host,
    enum evhttp_cmd_type cmd, const char *uri, const char *ctype, const char *accept,
    const void *body, size_t len, struct gitpush_http *h, size_t max)
{
	struct evhttp_request	*req;
	struct evkeyvalq	*out;

	h->base = base;
	h->status = 0;
	h->error = 0;
	gitbuf_init(&h->body, max);
	if ((req = evhttp_request_new(gitpush_done, h)) == NULL)
		return -1;
	evhttp_request_set_error_cb(req, gitpush_error);
	out = evhttp_request_get_output_headers(req);
	evhttp_add_header(out, "Host", host);
	evhttp_add_header(out, "User-Agent", GITPUSH_AGENT);
	evhttp_add_header(out, "Accept", accept);
	evhttp_add_header(out, "Pragma", "no-cache");
	if (ctype != NULL) {
		evhttp_add_header(out, "Content-Type", ctype);
		if (evbuffer_add(evhttp_request_get_output_buffer(req), body, len) != 0) {
			evhttp_request_free(req);
			return -1;
		}
	}
	if (evhttp_make_request(conn, req, cmd, uri) != 0)
		return -1;		/* libevent freed req */
	event_base_dispatch(base);
	return h->error || h->status == 0 ? -1 : 0;
}

/*
 * Why a push was answered other than 200: the bridge's injector says why in
 * {"message": "..."} (a refusal by the daemon's push policy); anything else is
 * named by its status alone. Cleaned (redacted, no control bytes) for the agent.
 */
static void
gitpush_http_cause(const struct gitpush_http *h, char **cause)
{
	json_t		*o;
	const char	*msg = NULL;
	char		*clean;

	o = h->body.len > 0 ? json_loadb(h->body.data, h->body.len, 0, NULL) : NULL;
	if (o != NULL)
		msg = json_string_value(json_object_get(o, "message"));
	if (msg != NULL && *msg != '\0') {
		clean = gitmsg_clean(msg, strnlen(msg, 500));
		xasprintf(cause, "upstream answered the push with HTTP %d: %s", h->status, clean);
		free(clean);
	} else
		xasprintf(cause, "upstream answered the push with HTTP %d", h->status);
	json_decref(o);
}

/*
 * No Nagle on the connection the GET opened: evhttp writes a request's head and body
 * apart, and the body would wait for the ACK of the head, which the server delays
 * (up to 40 ms on Linux) while it waits for the body.
 */
static void
gitpush_nodelay(struct evhttp_connection *conn)
{
	int	fd, one = 1;

	fd = bufferevent_getfd(evhttp_connection_get_bufferevent(conn));
	if (fd >= 0)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/*
 * A connection to the http:// upstream (host[:port], which giturl checked) for
 * answers of at most max bytes; 0, or -1 with nothing made.
 */
static int
gitpush_connect(const struct gitctx *ctx, size_t max, struct event_base **base,
    struct evhttp_connection **conn)
{
	const char	*colon;
	char		*host;
	unsigned long	 port = 80;

	colon = strrchr(ctx->url.host, ':');
	if (colon != NULL && strchr(colon, ']') == NULL) {
		port = strtoul(colon + 1, NULL, 10);
		host = xstrndup(ctx->url.host, colon - ctx->url.host);
	} else
		host = xstrdup(ctx->url.host);
	*base = NULL;
	*conn = NULL;
	if (port == 0 || port > 65535 || host[0] == '[' || (*base = event_base_new()) == NULL ||
	    (*conn = evhttp_connection_base_new(*base, NULL, host, (unsigned short)port)) ==
	    NULL) {
		if (*base != NULL)
			event_base_free(*base);
		*base = NULL;
		free(host);
		return -1;
	}
	free(host);
	evhttp_connection_set_timeout(*conn, GITPUSH_TIMEOUT);
	evhttp_connection_set_retries(*conn, 0);
	evhttp_connection_set_max_headers_size(*conn, 64 * 1024);
	evhttp_connection_set_max_body_size(*conn, max);
	return 0;
}

/* Write all of data to fd (a pipe to a git child); 0, or -1 (it went away). */
static int
gitpush_write_all(int fd, const char *data, size_t len)
{
	size_t	off;
	ssize_t	w;

	for (off = 0; off < len; off += (size_t)w) {
		if ((w = write(fd, data + off, len - off)) < 0) {
			if (errno == EINTR) {
				w = 0;
				continue;
			}
			return -1;
		}
	}
	return 0;
}

/* A gitrun_cb taking pack-objects' stdout into a gitbuf; -1 (stop) when full. */
static int
gitpush_take_pack(const char *rec, size_t len, void *arg)
{
	return gitbuf_add(arg, rec, len) == 0 ? 0 : -1;
}

/* bsearch(3) of an object name among "<oid> <ref>" lines sorted by strcmp. */
static int
gitpush_oid_cmp(const void *key, const void *elem)
{
	const char	*oid = key, *line = *(char *const *)elem;
	size_t		 l = strlen(oid);
	int		 r;

	if ((r = strncmp(oid, line, l)) != 0)
		return r;
	return line[l] == ' ' ? 0 : -1;	/* a longer name sorts after */
}

/* Whether oid is the object of one of the mirror's sorted "<oid> <ref>" lines. */
static int
gitpush_local(char **have, size_t nhave, const char *oid)
{
	return nhave > 0 && bsearch(oid, have, nhave, sizeof *have, gitpush_oid_cmp) != NULL;
}

/*
 * The pack for the updates into pack: what their new commits reach and upstream lacks,
 * thin against upstream's objects the mirror has too. 0, 1 when it would not fit
 * (git push then), or -1 with *cause.
 */
static int
gitpush_pack(const struct gitctx *ctx, const char *gitdir, const struct gitpush_update *u,
    size_t n, const struct gitpush_adv *adv, char **have, size_t nhave, struct gitbuf *pack,
    struct gitbuf *err, char **cause)
{
	const char		*args[12];
	struct gitbuf		 revs;
	struct gitproc		 gp;
	struct gitmsg_progress	 prog;
	char			*why;
	size_t			 i, k = 0;
	int			 fds[2], r, status;

	gitbuf_init(&revs, GITC_REFS_MAX);
	for (i = 0; i < n; i++) {
		if (u[i].new[strspn(u[i].new, "0")] != '\0' &&
		    (gitbuf_add(&revs, u[i].new, strlen(u[i].new)) != 0 ||
		    gitbuf_add(&revs, "\n", 1) != 0))
			goto toobig;
		if (u[i].old[strspn(u[i].old, "0")] != '\0' &&
		    (gitbuf_add(&revs, "^", 1) != 0 ||
		    gitbuf_add(&revs, u[i].old, strlen(u[i].old)) != 0 ||
		    gitbuf_add(&revs, "\n", 1) != 0))
			goto toobig;
	}
	/* Upstream has what its refs reach; of those, only objects here can be named. */
	for (i = 0; i < adv->n; i++) {
		if (!gitpush_local(have, nhave, adv->oids[i]))
			continue;
		if (gitbuf_add(&revs, "^", 1) != 0 ||
		    gitbuf_add(&revs, adv->oids[i], strlen(adv->oids[i])) != 0 ||
		    gitbuf_add(&revs, "\n", 1) != 0)
			goto toobig;
	}

	args[k++] = gitdir;
	args[k++] = "pack-objects";
	args[k++] = "--all-progress-implied";
	args[k++] = "--revs";
	args[k++] = "--stdout";
	args[k++] = "--thin";
	if (gitpush_has_cap(adv->caps, "ofs-delta"))
		args[k++] = "--delta-base-offset";
	args[k++] = ctx->progress ? "--progress" : "-q";
	args[k] = NULL;
	if (pipe(fds) != 0) {
		xasprintf(cause, "pipe: %s", strerror(errno));
		gitbuf_free(&revs);
		return -1;
	}
	r = gitrun_start(ctx, GITRUN_QUARANTINE | GITRUN_READONLY, args, fds[0], GITRUN_PIPE,
	    GITRUN_PIPE, &gp, cause);
	close(fds[0]);
	if (r != 0) {
		close(fds[1]);
		gitbuf_free(&revs);
		return -1;
	}
	/* pack-objects reads all its revisions before it writes a byte of the pack. */
	(void)gitpush_write_all(fds[1], revs.data, revs.len);	/* its exit says the rest */
	close(fds[1]);
	gitbuf_free(&revs);
	gitmsg_progress_init(&prog, ctx->progress, err);
	r = gitrun_read_err(&gp, -1, gitpush_take_pack, pack, gitmsg_progress_feed, &prog,
	    cause);
	gitmsg_progress_done(&prog);
	if (r != 0) {
		gitrun_abort(&gp);
		if (r == 1) {
			free(*cause);
			*cause = NULL;
			return 1;	/* more than fits in one request of ours */
		}
		return -1;
	}
	if ((status = gitrun_wait(gp.pid, cause)) != 0) {
		if (status > 0) {
			why = gitmsg_summary(gitbuf_str(err), 200);
			xasprintf(cause, "git pack-objects failed: %s", why);
			free(why);
		}
		return -1;
	}
	return 0;
toobig:
	gitbuf_free(&revs);
	return 1;
}

int
gitpush_http(const struct gitctx *ctx, const char *gitdir, const struct gitpush_update *u,
    size_t n, char **have, size_t nhave, struct gitpush_result *res, struct gitbuf *err,
    char **cause)
{
	struct event_base	*base = NULL;
	struct evhttp_connection *conn = NULL;
	struct gitpush_adv	*adv;
	struct gitpush_http	 h;
	struct gitbuf		 body, pack;
	char			*uri = NULL, *line = NULL;
	size_t			 i, len;
	int			 rc = GITPUSH_FALLBACK, sideband, deletes = 0, packs = 0;

	if (ctx->token != NULL || strcmp(ctx->url.scheme, "http") != 0 || n == 0 ||
	    have == NULL)
		return GITPUSH_FALLBACK;
	adv = xcalloc(1, sizeof *adv);
	gitbuf_init(&body, GITPUSH_PACK_MAX + GITC_REFS_MAX);
	gitbuf_init(&pack, GITPUSH_PACK_MAX);
	memset(&h, 0, sizeof h);
	gitbuf_init(&h.body, 0);

	if (gitpush_connect(ctx, GITPUSH_RESULT_MAX, &base, &conn) != 0)
		goto out;

	/* The advertisement: the bridge's injector asked for it as the call began. */
	xasprintf(&uri, "/%s/info/refs?service=git-receive-pack", ctx->url.path);
	if (gitpush_request(base, conn, ctx->url.host, EVHTTP_REQ_GET, uri, NULL, "*/*", NULL, 0,
	    &h, GITC_REFS_MAX + 4096) != 0 || h.status != 200 ||
	    gitpush_parse_adv(gitbuf_str(&h.body), h.body.len, adv, cause) != 0) {
		free(*cause);
		*cause = NULL;
		goto out;		/* git push says what is wrong, in git's words */
	}
	for (i = 0; i < n; i++) {
		if (strlen(u[i].old) != 40 || (adv->hexlen != 0 && adv->hexlen != 40))
			goto out;	/* SHA-256 repositories: git push */
		if (u[i].new[strspn(u[i].new, "0")] == '\0')
			deletes = 1;
		else
			packs = 1;
	}
	sideband = gitpush_has_cap(adv->caps, "side-band-64k");
	if (!gitpush_has_cap(adv->caps, "report-status") ||
	    (n > 1 && !gitpush_has_cap(adv->caps, "atomic")) ||
	    (deletes && !gitpush_has_cap(adv->caps, "delete-refs")) ||
	    (strstr(adv->caps, "object-format=") != NULL &&
	    !gitpush_has_cap(adv->caps, "object-format=sha1")))
		goto out;

	/* The commands, then the pack. */
	for (i = 0; i < n; i++) {
		if (i == 0)
			xasprintf(&line, "%s %s %s%creport-status%s%s%s agent=%s\n",
			    u[i].old, u[i].new, u[i].ref, '\0',
			    sideband ? " side-band-64k" : "",
			    gitpush_has_cap(adv->caps, "atomic") ? " atomic" : "",
			    /* as send-pack: no meters from upstream unless asked for */
			    !ctx->progress && gitpush_has_cap(adv->caps, "quiet") ? " quiet" : "",
			    GITPUSH_AGENT);
		else if (gitpush_add_pktf(&body, "%s %s %s\n", u[i].old, u[i].new, u[i].ref) != 0)
			goto out;
		if (i > 0)
			continue;
		/* The first carries the capabilities after a NUL. */
		len = strlen(line);
		len += 1 + strlen(line + len + 1);
		if (gitpush_add_pkt(&body, line, len) != 0)
			goto out;
		free(line);
		line = NULL;
	}
	gitbuf_add(&body, "0000", 4);
	if (packs) {
		rc = gitpush_pack(ctx, gitdir, u, n, adv, have, nhave, &pack, err, cause);
		if (rc != 0)
			goto out;
		rc = GITPUSH_FALLBACK;
		if (gitbuf_add(&body, pack.data, pack.len) != 0)
			goto out;
	}
	if (body.dropped > 0)
		goto out;

	/* From here on, what upstream says is the outcome: no second try. */
	rc = -1;
	gitpush_nodelay(conn);
	gitbuf_free(&h.body);
	free(uri);
	xasprintf(&uri, "/%s/git-receive-pack", ctx->url.path);
	if (gitpush_request(base, conn, ctx->url.host, EVHTTP_REQ_POST, uri,
	    "application/x-git-receive-pack-request", "application/x-git-receive-pack-result",
	    body.data, body.len, &h, GITPUSH_RESULT_MAX) != 0) {
		xasprintf(cause, "no answer from upstream to the push (the connection failed, "
		    "timed out, or the answer was too large)");
		goto out;
	}
	if (h.status != 200) {
		gitpush_http_cause(&h, cause);
		goto out;
	}
	if (gitpush_parse_result(gitbuf_str(&h.body), h.body.len, sideband, res) != 0) {
		xasprintf(cause, "upstream's answer to the push is not one git sends");
		goto out;
	}
	rc = res->unpack_ok && res->ng == 0 && res->ok == n && res->fatal.len == 0 ? 0 : -1;
out:
	free(line);
	free(uri);
	free(adv);
	gitbuf_free(&h.body);
	gitbuf_free(&body);
	gitbuf_free(&pack);
	if (conn != NULL)
		evhttp_connection_free(conn);
	if (base != NULL)
		event_base_free(base);
	return rc;
}

/*
 * The warming fetch as a request of our own (githook.c keeps the mirror warm while a
 * push goes upstream): one POST .../git-upload-pack asking for the objects of want
 * (upstream's "<oid> <ref>" lines the mirror lacks), with the mirror's own ref values
 * as haves; the pack (side-band-64k) goes to `git index-pack --stdin --fix-thin
 * --strict` (--strict: every object the pack's objects name is in the pack or the
 * mirror, so the mirror stays connected, as git fetch's check makes sure), then one
 * `git update-ref --stdin` moves the refs from the mirror's values, all or none (as
 * git fetch --atomic). It saves git fetch, git-remote-http (libcurl) and fetch-pack,
 * and fetch's connectivity walk. Best effort, as the git fetch it replaces.
 */

/* Run git with data on its stdin and nothing else; its exit status, or -1. */
static int
gitpush_feed(const struct gitctx *ctx, int runflags, const char *const *args,
    const char *data, size_t len)
{
	struct gitproc	 gp;
	char		*cause = NULL;
	int		 fds[2], r, w;

	if (pipe(fds) != 0)
		return -1;
	r = gitrun_start(ctx, runflags, args, fds[0], GITRUN_NULL, GITRUN_NULL, &gp, &cause);
	close(fds[0]);
	if (r != 0) {
		close(fds[1]);
		free(cause);
		return -1;
	}
	w = gitpush_write_all(fds[1], data, len);
	close(fds[1]);
	r = gitrun_wait(gp.pid, &cause);
	free(cause);
	return w == 0 ? r : -1;
}

/* The mirror's value of ref in the "<oid> <ref>" lines, or NULL. */
static const char *
gitpush_have_ref(char **have, size_t nhave, const char *ref, size_t *hexlen)
{
	const char	*sp;
	size_t		 i;

	for (i = 0; i < nhave; i++) {
		if ((sp = strchr(have[i], ' ')) != NULL && strcmp(sp + 1, ref) == 0) {
			*hexlen = sp - have[i];
			return have[i];
		}
	}
	return NULL;
}

/*
 * Split upload-pack's answer: ACK/NAK lines, then the side-band-64k pack up to a flush.
 * Band 1 goes to pack; 0, or -1 if malformed, too large, or upstream gave up (band 3).
 */
int
gitpush_parse_fetch(const char *buf, size_t size, struct gitbuf *pack)
{
	const char	*line;
	size_t		 off = 0, len;
	int		 flush, r, acks = 1;

	while ((r = gitpush_pkt(buf, size, &off, &line, &len, &flush)) == 0) {
		if (flush)
			return off == size && !acks ? 0 : -1;
		if (acks && ((len >= 3 && memcmp(line, "NAK", 3) == 0) ||
		    (len >= 4 && memcmp(line, "ACK ", 4) == 0)))
			continue;
		acks = 0;
		if (len < 1)
			return -1;
		switch (line[0]) {
		case 1:
			if (gitbuf_add(pack, line + 1, len - 1) != 0)
				return -1;
			break;
		case 2:
			break;
		default:
			return -1;
		}
	}
	return -1;
}

/* The child's part of gitpush_warm(): 0 if the mirror took what was fetched. */
static int
gitpush_warm_run(const struct gitctx *ctx, const char *gitdir, char **want, size_t nwant,
    char **have, size_t nhave)
{
	const char		*ip[] = { gitdir, "index-pack", "--stdin", "--fix-thin", "--strict",
				    NULL };
	const char		*ur[] = { gitdir, "update-ref", "--stdin", NULL };
	struct event_base	*base = NULL;
	struct evhttp_connection *conn = NULL;
	struct gitpush_http	 h;
	struct gitbuf		 body, pack, cmds;
	const char		*sp, *old;
	char			*uri = NULL, *line = NULL, zero[65];
	size_t			 i, j, k, hexlen;
	int			 rc = -1, dup;

	memset(&h, 0, sizeof h);
	gitbuf_init(&h.body, 0);
	gitbuf_init(&body, GITC_REFS_MAX * 2);	/* wants: at most the ref list's lines */
	gitbuf_init(&pack, GITPUSH_WARM_MAX);
	gitbuf_init(&cmds, GITC_REFS_MAX * 2);
	for (i = 0, j = 0; i < nwant; i++) {
		sp = strchr(want[i], ' ');
		for (dup = 0, k = 0; !dup && k < i; k++)
			dup = strncmp(want[k], want[i], sp - want[i] + 1) == 0;
		if (dup)
			continue;
		if (gitpush_add_pktf(&body, j++ == 0 ? "want %.*s side-band-64k thin-pack "
		    "ofs-delta no-progress agent=" GITPUSH_AGENT "\n" : "want %.*s\n",
		    (int)(sp - want[i]), want[i]) != 0)
			goto out;
	}
	if (gitbuf_add(&body, "0000", 4) != 0)
		goto out;
	/* As fetch-pack's first round: up to 256 haves; fewer only means a larger pack. */
	for (i = 0; i < nhave && i < 256; i++) {
		sp = strchr(have[i], ' ');
		if (gitpush_add_pktf(&body, "have %.*s\n", (int)(sp - have[i]), have[i]) != 0)
			goto out;
	}
	if (gitpush_add_pkt(&body, "done\n", 5) != 0)
		goto out;

	if (gitpush_connect(ctx, GITPUSH_WARM_MAX + 1024 * 1024, &base, &conn) != 0)
		goto out;
	xasprintf(&uri, "/%s/git-upload-pack", ctx->url.path);
	if (gitpush_request(base, conn, ctx->url.host, EVHTTP_REQ_POST, uri,
	    "application/x-git-upload-pack-request", "application/x-git-upload-pack-result",
	    body.data, body.len, &h, GITPUSH_WARM_MAX + 1024 * 1024) != 0 || h.status != 200 ||
	    gitpush_parse_fetch(gitbuf_str(&h.body), h.body.len, &pack) != 0)
		goto out;
	if (gitpush_feed(ctx, 0, ip, pack.data, pack.len) != 0)
		goto out;
	for (i = 0; i < nwant; i++) {
		sp = strchr(want[i], ' ');
		if ((old = gitpush_have_ref(have, nhave, sp + 1, &hexlen)) == NULL) {
			hexlen = sp - want[i];
			memset(zero, '0', hexlen);
			zero[hexlen] = '\0';
			old = zero;
		}
		xasprintf(&line, "update %s %.*s %.*s\n", sp + 1, (int)(sp - want[i]), want[i],
		    (int)hexlen, old);
		if (gitbuf_add(&cmds, line, strlen(line)) != 0)
			goto out;
		free(line);
		line = NULL;
	}
	rc = gitpush_feed(ctx, 0, ur, cmds.data, cmds.len) == 0 ? 0 : -1;
out:
	free(line);
	free(uri);
	gitbuf_free(&h.body);
	gitbuf_free(&body);
	gitbuf_free(&pack);
	gitbuf_free(&cmds);
	if (conn != NULL)
		evhttp_connection_free(conn);
	if (base != NULL)
		event_base_free(base);
	return rc;
}

int
gitpush_warm(const struct gitctx *ctx, const char *gitdir, char **want, size_t nwant,
    char **have, size_t nhave, pid_t *pid)
{
	pid_t	p;
	int	null;

	*pid = -1;
	if (ctx->token != NULL || strcmp(ctx->url.scheme, "http") != 0 || nwant == 0 ||
	    have == NULL)
		return GITPUSH_FALLBACK;
	fflush(stdout);
	fflush(stderr);
	if ((p = fork()) < 0)
		return GITPUSH_FALLBACK;
	if (p > 0) {
		*pid = p;
		return 0;
	}
	/* The child: nothing of the hook's but what it was given; the lowest priority. */
	if ((null = open("/dev/null", O_RDWR)) < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
	    dup2(null, 2) < 0)
		_exit(1);
	hygiene_closefrom(3);
	(void)setpriority(PRIO_PROCESS, 0, 19);
	_exit(gitpush_warm_run(ctx, gitdir, want, nwant, have, nhave) == 0 ? 0 : 1);
}
