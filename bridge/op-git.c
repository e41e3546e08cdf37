/* op "git": the remote helper's network leg, served by shimbridge-git as the runner. */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "audit.h"
#include "config.h"
#include "conn.h"
#include "gitcontract.h"
#include "ghmint.h"
#include "profile.h"
#include "profile-git.h"
#include "pending.h"
#include "httppolicy.h"
#include "inject.h"
#include "keyring.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "pushcmd.h"
#include "redact.h"
#include "request.h"
#include "secret.h"
#include "server.h"
#include "jail.h"
#include "spawn.h"
#include "util.h"
#include "zygote.h"

/* What op "git" keeps for one request. */
struct op_git_state {
	struct conn		*c;
	TAILQ_ENTRY(op_git_state) entry;	/* in op_git_live while it has a mirror */
	char			*mirror;	/* the mirror it works on, or NULL */
	char			*refs_path;	/* the SHIMBRIDGE_UPSTREAM_REFS FIFO, or NULL */
	int			 refs_fd;	/* its end (O_RDWR), or -1 */
	int			 refs_said;	/* the message is written */
	int			 refusal;	/* our end of the refusal channel, or -1 */
	struct event		*chan_ev;	/* reading it while the child runs */
	char			*in;		/* what the child said on it so far */
	size_t			 inlen;
	size_t			 scanned;	/* complete lines looked at for "W" and "D" */
	size_t			 told;		/* "M" records before this offset were shown */
	int			 asked;		/* a question came ("W"): only one per call */
	int			 waiting;	/* ...and waits for the operator (pending.c) */
	int			 netns;		/* the child's network namespace, or -1 */
	struct inject		*inj;		/* its upstream leg's injector, or NULL */
	struct profile_git_update *asks;	/* the question's updates, or NULL */
	size_t			 nasks;
	int			 approved;	/* ...and the answer was yes */
	char			*head;		/* upstream's default branch, or NULL */
	char			*secret_name;
	char			*host;		/* as configured */
	char			*repo;		/* OWNER/NAME, the injector's scope */
	const char		*repos[1];
	struct httppolicy_scope	 scope;
	struct timespec		 spawned;	/* when the child was started */
};

static void	op_git_advertised(void *, const unsigned char *, size_t);

/* Every request that has a mirror (for op_git_claim). */
static TAILQ_HEAD(, op_git_state) op_git_live = TAILQ_HEAD_INITIALIZER(op_git_live);

/* Free a request's state (with its conn). */
static void
op_git_state_free(void *arg)
{
	struct op_git_state *st = arg;

	if (st == NULL)
		return;
	if (st->mirror != NULL) {
		TAILQ_REMOVE(&op_git_live, st, entry);
		free(st->mirror);
	}
	if (st->refs_fd != -1)
		close(st->refs_fd);
	free(st->refs_path);
	inject_free(st->inj);
	if (st->netns != -1)
		close(st->netns);
	if (st->chan_ev != NULL)
		event_free(st->chan_ev);
	if (st->refusal != -1)
		close(st->refusal);
	free(st->in);
	free(st->asks);
	free(st->head);
	free(st->host);
	free(st->secret_name);
	free(st->repo);
	free(st);
}

/*
 * The refusal channel of the git contract (common/gitcontract.h): a socket pair,
 * one end for shimbridge-git as fd 3 (blocking: its hook waits there for an
 * answer), the other ours, non-blocking, read while the child runs
 * (op_git_chan_cb) and once it is gone (op_git_done).
 */
static int
op_git_refusal_channel(struct op_git_state *st, struct profile_git_req *g, int *wfd, char **cause)
{
	char num[16];
	int p[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0) {
		xasprintf(cause, "socketpair: %s", strerror(errno));
		return -1;
	}
	if (fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK) == -1) {
		xasprintf(cause, "fcntl: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	st->refusal = p[0];
	*wfd = p[1];
	snprintf(num, sizeof num, "%d", GITC_REFUSAL_FD);
	envbuild_set(g->env, GITC_ENV_REFUSAL_FD, num, strlen(num), 0);
	return 0;
}

/* The injector's secret callback: the host's credential now (renewals apply). */
static int
op_git_secret(void *arg, const unsigned char **val, size_t *len)
{
	struct op_git_state *st = arg;
	const struct key *k;

	k = keyring_get(st->c->srv->keyring, st->c->session, st->secret_name);
	if (k != NULL && !secret_usable(k->src, &k->val) && secret_pending(k->src, &k->val))
		return 1;	/* a GitHub App token being minted: the request waits */
	if (k == NULL || !secret_usable(k->src, &k->val))
		return -1;
	*val = k->val.value;
	*len = k->val.len;
	return 0;
}

/* The injector's audit callback: one "http" record per request of the upstream leg. */
static void
op_git_audit(void *arg, const char *summary, int status, unsigned long long up,
    unsigned long long down, const char *refusal)
{
	struct op_git_state *st = arg;
	json_t *a = conn_audit_base(st->c, "http");

	json_object_set_new(a, "request", json_string(summary));
	json_object_set_new(a, "status", json_integer(status));
	json_object_set_new(a, "bytes_up", json_integer((json_int_t)up));
	json_object_set_new(a, "bytes_down", json_integer((json_int_t)down));
	if (refusal != NULL)
		json_object_set_new(a, "refused", json_string(refusal));
	audit_write(a, conn_redact(st->c));
}

/* Write the upstream-refs message (or "none") to the FIFO, once. */
static void
op_git_refs_say(struct op_git_state *st, const char *msg, size_t len)
{
	ssize_t n;

	if (st->refs_fd == -1 || st->refs_said)
		return;
	st->refs_said = 1;
	/* At most GITC_REFS_MAX bytes into an empty pipe: never blocks, never short. */
	n = write(st->refs_fd, msg, len);
	if (n != (ssize_t)len && msg[0] != 'n')
		(void)!write(st->refs_fd, "none\n", 5);	/* shimbridge-git fetches */
}

/*
 * The prefetched ref list arrived (body NULL: it will not): tell shimbridge-git
 * upstream's heads and tags, or that it must fetch to know.
 */
static void
op_git_prefetched(void *arg, const unsigned char *body, size_t len)
{
	struct op_git_state *st = arg;
	char *msg;
	size_t mlen;

	op_git_advertised(st, body, len);
	if (body == NULL || profile_git_refs(body, len, &msg, &mlen) != 0) {
		op_git_refs_say(st, "none\n", 5);
		return;
	}
	op_git_refs_say(st, msg, mlen);
	free(msg);
}

/*
 * The push's ref updates as the injector read them from the request it is about
 * to send upstream (inject.h): the policy the mirror's hook applied in the jail,
 * applied again by the daemon to what actually leaves, so that a shimbridge-git
 * that was made to skip its hook still cannot move what the policy protects.
 * What needs the objects (fast-forward, denied paths) stays with the hook.
 */
static int
op_git_push_check(void *arg, const struct pushcmd *u, size_t n, char **why)
{
	struct op_git_state *st = arg;
	const struct config *cfg = st->c->cfg;
	const char *name;
	size_t i, j;
	int create, del, head_rule = 0, ok;

	for (i = 0; i < cfg->nno_push_branches; i++)
		head_rule |= strcmp(cfg->no_push_branches[i], "HEAD") == 0;
	for (i = 0; i < n; i++) {
		create = pushcmd_zero(u[i].old);
		del = pushcmd_zero(u[i].new);
		if (create && del) {
			xasprintf(why, "%.200s: nothing to create or delete", u[i].ref);
			return -1;
		}
		if (strncmp(u[i].ref, "refs/tags/", 10) == 0 && u[i].ref[10] != '\0') {
			name = u[i].ref + 10;
			for (j = 0; !create && j < cfg->nprotected_tags; j++) {
				if (fnmatch(cfg->protected_tags[j], name, 0) == 0) {
					xasprintf(why, "tag %.200s is protected: it may be created, "
					    "never moved or deleted", name);
					return -1;
				}
			}
			continue;
		}
		if (strncmp(u[i].ref, "refs/heads/", 11) != 0 || u[i].ref[11] == '\0') {
			xasprintf(why, "%.200s is neither a branch nor a tag", u[i].ref);
			return -1;
		}
		name = u[i].ref + 11;
		if (strcmp(name, "HEAD") == 0) {
			xasprintf(why, "a branch named HEAD is refused");
			return -1;
		}
		for (j = 0; j < cfg->nno_push_branches; j++) {
			if (strcmp(cfg->no_push_branches[j], name) == 0) {
				xasprintf(why, "branch %.200s takes no direct push", name);
				return -1;
			}
		}
		if (head_rule && st->head == NULL) {
			xasprintf(why, "upstream's default branch, which takes no direct push, "
			    "is not known to the bridge (no ref advertisement came through it)");
			return -1;
		}
		if (head_rule && strcmp(st->head, name) == 0) {
			xasprintf(why, "branch %.200s is upstream's default branch and takes no "
			    "direct push", name);
			return -1;
		}
		for (j = 0; del && j < cfg->nprotected_branches; j++) {
			if (strcmp(cfg->protected_branches[j], name) == 0) {
				xasprintf(why, "branch %.200s may not be deleted", name);
				return -1;
			}
		}
		if (!profile_git_asks(cfg, name))
			continue;
		/* Approved in this call: that branch, to that commit (upstream may have moved). */
		for (j = 0, ok = 0; st->approved && j < st->nasks; j++)
			ok |= strcmp(st->asks[j].branch, name) == 0 &&
			    strcmp(st->asks[j].new, u[i].new) == 0;
		if (!ok) {
			xasprintf(why, "a push to branch %.200s needs approval, and this update "
			    "was not approved", name);
			return -1;
		}
	}
	return 0;
}

/* Upstream's ref advertisement passed through the injector: learn its default branch. */
static void
op_git_advertised(void *arg, const unsigned char *body, size_t len)
{
	struct op_git_state *st = arg;
	char *head;

	if (body == NULL || (head = profile_git_head(body, len)) == NULL)
		return;
	free(st->head);
	st->head = head;
}

/*
 * The FIFO of SHIMBRIDGE_UPSTREAM_REFS in the call's scratch directory: made by
 * the daemon before the child exists, kept open (read-write, so it never blocks
 * and its contents live until the call ends) for op_git_prefetched to write to.
 */
static int
op_git_refs_fifo(struct op_git_state *st, const char *scratch)
{
	char *path;
	int fd = -1;

	xasprintf(&path, "%s/upstream-refs", scratch);
	if (mkfifo(path, 0600) != 0 || (fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC |
	    O_NOFOLLOW)) == -1 || fchmod(fd, 0644) != 0) {
		if (fd != -1)
			close(fd);
		log_warnx("git: %s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	st->refs_fd = fd;
	st->refs_path = path;
	return 0;
}

/*
 * Register st as working on mirror. A ref list prefetched before the mirror's lock
 * is held is good only while no other call works on that mirror: another call's
 * push or fetch moves its refs, and a refresh from an older list would prune or
 * rewind them. So any other live call on it loses its prefetch, and this one may
 * prefetch (returns 1) only if there is none.
 */
static int
op_git_claim(struct op_git_state *st, const char *mirror)
{
	struct op_git_state *o;
	int alone = 1;

	TAILQ_FOREACH(o, &op_git_live, entry) {
		if (strcmp(o->mirror, mirror) == 0) {
			inject_prefetch_drop(o->inj);
			op_git_refs_say(o, "none\n", 5);
			alone = 0;
		}
	}
	st->mirror = xstrdup(mirror);
	TAILQ_INSERT_TAIL(&op_git_live, st, entry);
	return alone;
}

/*
 * The upstream leg without the token (issue 10.8): a network namespace for the
 * child with only loopback, the daemon's listener inside it, and an injector on
 * that listener that checks each smart-HTTP request against this repository (push
 * only for receive-pack), adds Basic auth and forwards to the configured upstream.
 * Fills via with the URL base shimbridge-git gets instead of the host's.
 */
static int
op_git_inject(struct conn *c, struct op_git_state *st, const struct profile_git_req *g,
    int warm_netns, char *via, size_t vialen, char **cause)
{
	const struct git_host *gh = config_git_host(c->cfg, g->host);
	struct inject_target t;
	char *upstream, *pf = NULL, *pfwhy = NULL;
	int lfd, port, one = 1;

	/* A pre-built jail has its namespace, with loopback up, already (the daemon's). */
	if ((warm_netns >= 0 ? jail_netns_listen_in(warm_netns, &st->netns, &lfd, &port, cause) :
	    jail_netns_listen(&st->netns, &lfd, &port, cause)) != 0)
		return -1;
	/*
	 * git's requests are small and answered at once: without this, Nagle's
	 * algorithm against delayed ACKs stalls each exchange (accepted sockets
	 * inherit it on Linux).
	 */
	(void)setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	st->repos[0] = st->repo;
	st->scope.api = HTTP_API_GIT;
	st->scope.repos = st->repos;
	st->scope.nrepos = 1;
	st->scope.allow_push = g->svc->push;
	st->secret_name = xstrdup(g->secret_name);
	upstream = xstrdup(gh->upstream);
	if (upstream[0] != '\0' && upstream[strlen(upstream) - 1] == '/')
		upstream[strlen(upstream) - 1] = '\0';
	memset(&t, 0, sizeof t);
	t.api = HTTP_API_GIT;
	t.upstream = upstream;
	t.auth = INJECT_AUTH_BASIC;
	t.username = gh->username;
	t.ca_file = gh->ca_file;	/* NULL: the system CAs */
	t.scope = &st->scope;
	t.secret = op_git_secret;
	t.audit = op_git_audit;
	t.prefetched = op_git_prefetched;
	t.push_check = op_git_push_check;
	t.advertised = op_git_advertised;
	t.arg = st;
	st->inj = inject_new(c->srv->base, lfd, &t, cause);	/* lfd transferred */
	free(upstream);
	if (st->inj == NULL)
		return -1;
	/*
	 * Upstream's ref list (a protocol v0 upload-pack advertisement) is the first
	 * thing a call asks upstream: a fetch refreshes (or creates) the mirror with
	 * it (gitserve/gitmirror.c); a push's hook checks each update against it and
	 * warms the mirror from it (githook.c). Ask for it now, while the jail and
	 * shimbridge-git start. A push's hook then pushes upstream, and its git's
	 * first request is receive-pack's advertisement: ask for that too, so that
	 * it is there when the hook gets that far (a stale one only costs a refused
	 * push: upstream takes an update only from the old value the push names).
	 * A failure here only means git's own request goes upstream.
	 */
	xasprintf(&pf, "/%s/%s.git/info/refs?service=git-upload-pack", g->owner, g->name);
	if (op_git_claim(st, g->mirror)) {
		if (inject_prefetch(st->inj, pf, &pfwhy) != 0)
			log_warnx("git: %s", pfwhy);
		else
			(void)op_git_refs_fifo(st, c->scratch);
		if (g->svc->push) {
			free(pf);
			free(pfwhy);
			pfwhy = NULL;
			xasprintf(&pf, "/%s/%s.git/info/refs?service=git-receive-pack",
			    g->owner, g->name);
			if (inject_prefetch(st->inj, pf, &pfwhy) != 0)
				log_warnx("git: %s", pfwhy);
		}
	}
	free(pf);
	free(pfwhy);
	snprintf(via, vialen, "http://127.0.0.1:%d", port);
	return 0;
}

/* What the refusal channel keeps at most: every kind of record, each within its cap. */
#define OP_GIT_CHAN_MAX	(GITC_REFUSAL_MAX + GITC_PIPE_MAX + 4096 + \
	GITC_ASK_REFS_MAX * (GITC_ASK_LINE_MAX + 3) + 16)

/*
 * Read what is there on the refusal channel into st->in; bytes past
 * OP_GIT_CHAN_MAX are read and dropped (a flood must not block the hook's own
 * records forever, nor grow our memory). 1 at EOF or on an error, else 0.
 */
static int
op_git_chan_read(struct op_git_state *st)
{
	char drop[4096];
	ssize_t r;
	int rounds;

	if (st->refusal == -1)
		return 1;
	if (st->in == NULL)
		st->in = xmalloc(OP_GIT_CHAN_MAX + 1);
	for (rounds = 0; rounds < 64; rounds++) {
		if (st->inlen < OP_GIT_CHAN_MAX)
			r = read(st->refusal, st->in + st->inlen, OP_GIT_CHAN_MAX - st->inlen);
		else
			r = read(st->refusal, drop, sizeof drop);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (r <= 0)
			return 1;
		if (st->inlen < OP_GIT_CHAN_MAX)
			st->inlen += (size_t)r;
	}
	return 0;	/* more later: the event fires again */
}

/* Answer the hook's question: one line (common/gitcontract.h); it may be gone. */
static void
op_git_answer(struct op_git_state *st, int yes, const char *reason)
{
	char line[GITC_ANSWER_MAX + 4];
	size_t i, len;

	st->waiting = 0;
	st->approved = yes;
	if (st->refusal == -1)
		return;
	if (yes)
		len = (size_t)snprintf(line, sizeof line, "Y\n");
	else {
		len = (size_t)snprintf(line, sizeof line, "N %.*s", GITC_ANSWER_MAX, reason);
		for (i = 2; i < len; i++) {
			if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
				line[i] = ' ';
		}
		line[len++] = '\n';
	}
	/* One short line into an empty socket buffer: it never blocks. */
	if (send(st->refusal, line, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len)
		log_debug("git: conn %llu: the hook is gone before its answer",
		    (unsigned long long)st->c->id);
}

/* pending.c: approved (by the operator, the approver command or a --for grant). */
static void
op_git_approved(struct conn *c, void *arg)
{
	(void)c;
	op_git_answer(arg, 1, NULL);
}

/* pending.c: refused; the agent gets the structured line, the hook the reason. */
static void
op_git_refused(struct conn *c, void *arg, const char *line, const char *reason)
{
	char *msg, *red;

	xasprintf(&msg, "%s\n", line);
	red = redact_string(conn_redact(c), msg);
	if (red != NULL)
		conn_send(c, FRAME_STDERR, red, strlen(red));
	free(red);
	free(msg);
	op_git_answer(arg, 0, reason);
}

/* pending.c: the wait ended without a decision (the agent or the child went away). */
static void
op_git_ask_free(void *arg)
{
	struct op_git_state *st = arg;

	if (st->waiting)
		op_git_answer(st, 0, "the request ended while waiting for approval");
}

/* pending.c, after a reload: whether git.ask_branches still names every branch. */
static int
op_git_still_asks(struct conn *c, void *arg, const struct config *nc, char **why)
{
	struct op_git_state *st = arg;
	size_t i;

	(void)c;
	for (i = 0; i < st->nasks; i++) {
		if (!profile_git_asks(nc, st->asks[i].branch)) {
			xasprintf(why, "git.ask_branches no longer names branch %s",
			    st->asks[i].branch);
			return 0;
		}
	}
	return 1;
}

/*
 * The hook asks ("A" records, then "W" at buf + len): check every record (the
 * runner wrote them) and each branch against this call's git.ask_branches, then
 * hand the push to the approval gate, which tells the agent it waits. Anything
 * malformed is refused at once.
 */
static void
op_git_ask(struct op_git_state *st, const char *buf, size_t len)
{
	struct conn *c = st->c;
	struct profile_git_update *u = NULL;
	struct pending_ask ask;
	const char *p, *eol, *end = buf + len;
	char *command = NULL, *key = NULL;
	json_t *detail = NULL, *ups, *a;
	size_t n = 0, i;

	for (p = buf; p < end; p = eol + 1) {
		if ((eol = memchr(p, '\n', (size_t)(end - p))) == NULL)
			eol = end;
		if (eol - p < 2 || p[0] != 'A' || p[1] != ' ')
			continue;
		if (n == GITC_ASK_REFS_MAX)
			goto bad;
		u = xreallocarray(u, n + 1, sizeof *u);
		if (profile_git_ask_parse(p + 2, (size_t)(eol - p) - 2, &u[n]) != 0 ||
		    !profile_git_asks(c->cfg, u[n].branch))
			goto bad;
		n++;
	}
	if (n == 0)
		goto bad;
	if (c->killed != KILL_NONE || c->peer_gone) {
		op_git_answer(st, 0, "the call is ending");
		goto out;
	}
	profile_git_ask_command(st->host, st->repo, u, n, &command, &key);
	detail = json_object();
	ups = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(ups, json_pack("{s:s, s:s, s:s, s:s}", "branch",
		    u[i].branch, "kind", u[i].kind, "old", u[i].old, "new", u[i].new));
	json_object_set_new(detail, "tool", json_string("git"));
	json_object_set_new(detail, "repository", json_string(st->repo));
	json_object_set_new(detail, "host", json_string(st->host));
	json_object_set_new(detail, "updates", ups);
	st->asks = u;
	st->nasks = n;
	u = NULL;	/* transferred */
	memset(&ask, 0, sizeof ask);
	ask.command = command;
	ask.key = key;
	ask.rule = "git.ask_branches";
	ask.timeout = c->cfg->git_ask_timeout;
	ask.detail = detail;
	ask.go = op_git_approved;
	ask.free = op_git_ask_free;
	ask.still_asks = op_git_still_asks;
	ask.refused = op_git_refused;
	ask.arg = st;
	st->waiting = 1;
	pending_ask(c, &ask);
	goto out;
bad:
	a = conn_audit_base(c, "error");
	json_object_set_new(a, "reason", json_string("shimbridge-git sent a malformed "
	    "approval request; the push is refused"));
	audit_write(a, conn_redact(c));
	op_git_answer(st, 0, "the bridge could not read the approval request");
out:
	free(u);
	free(command);
	free(key);
	json_decref(detail);
}

static void	op_git_tell(struct conn *, const char *, size_t);

/* The code of a "D <code>" record (common/gitcontract.h), or -1. */
static int
op_git_code(const char *p, size_t len)
{
	int code = 0;
	size_t i;

	if (len < 3 || len > 5 || p[1] != ' ')
		return -1;
	for (i = 2; i < len; i++) {
		if (p[i] < '0' || p[i] > '9' || (i == 2 && p[i] == '0' && len > 3))
			return -1;
		code = code * 10 + (p[i] - '0');
	}
	return code <= 255 ? code : -1;
}

/*
 * The refusal channel has something while the child runs: keep it for
 * op_git_done, and when a question is complete ("W"), ask. At EOF the event
 * stops; op_git_done reads what is left.
 */
static void
op_git_chan_cb(evutil_socket_t fd, short what, void *arg)
{
	struct op_git_state *st = arg;
	char *p, *eol;
	int code;

	(void)fd;
	(void)what;
	if (op_git_chan_read(st) != 0)
		event_del(st->chan_ev);
	while (st->scanned < st->inlen && (eol = memchr(st->in + st->scanned, '\n',
	    st->inlen - st->scanned)) != NULL) {
		p = st->in + st->scanned;
		st->scanned = (size_t)(eol - st->in) + 1;
		if (eol - p == 1 && p[0] == 'W' && !st->asked) {
			st->asked = 1;
			op_git_ask(st, st->in, (size_t)(p - st->in));
		} else if (p[0] == 'D' && st->told == 0 && st->c->answer < 0 && !st->waiting &&
		    (code = op_git_code(p, (size_t)(eol - p))) >= 0) {
			/* The agent's messages so far go before its answer. */
			op_git_tell(st->c, st->in, (size_t)(p - st->in));
			st->told = st->scanned;
			conn_answer(st->c, code);
		}
	}
}

/* op "git": the remote helper's network leg, served from a bridge-owned mirror. */
void
op_git(struct conn *c, json_t *req)
{
	struct profile_git_req g;
	struct jail_spec js;
	struct spawn_jail warm = SPAWN_JAIL_NONE;
	struct op_git_state *st;
	struct key *gk;
	char *cause = NULL, *msg = NULL, *mdir = NULL, via[64];
	const char *why = NULL;
	int wfd = -1, jailed = c->srv->jail_root != NULL;

	memset(&g, 0, sizeof g);
	c->tool = xstrdup(profile_git.name);
	if (request_check_env(json_object_get(req, "env"), &why) != 0) {
		conn_protocol_error(c, why);
		return;
	}
	if (profile_git_prepare(c->cfg, c->session, req, &g, &msg, &cause) != 0) {
		c->argv = g.audit_argv != NULL ? json_incref(g.audit_argv) : NULL;
		if (msg == NULL) {
			conn_protocol_error(c, cause);
		} else
			conn_deny(c, g.code != NULL ? g.code : ERR_DENIED, cause, msg);
		goto out;
	}
	/* Command sources are renewed in the background, never on a request's path. */
	gk = keyring_get(c->srv->keyring, c->session, g.secret_name);
	g.secret = gk;
	/* A GitHub App token: minted at the session's first need; the injector waits. */
	if (g.secret != NULL && g.secret->src->type == SECRET_GITHUB_APP &&
	    !ghmint_want(c->srv->base, c->srv->keyring, c->srv->cfg, gk)) {
		c->argv = g.audit_argv != NULL ? json_incref(g.audit_argv) : NULL;
		xasprintf(&cause, "secret %s: no GitHub App token", g.secret_name);
		xasprintf(&msg, "git cannot reach %s right now: %s. Nothing was sent. Tell the "
		    "operator (`shimbridge status` shows the token's state); the bridge retries "
		    "by itself, so a later push or fetch may work.", g.host,
		    ghmint_why(g.secret));
		conn_deny(c, ERR_UNAVAILABLE, cause, msg);
		goto out;
	}
	if (g.secret == NULL || (!secret_usable(g.secret->src, &g.secret->val) &&
	    !(jailed && secret_pending(g.secret->src, &g.secret->val)))) {
		c->argv = g.audit_argv != NULL ? json_incref(g.audit_argv) : NULL;
		xasprintf(&cause, "secret %s unavailable", g.secret_name);
		xasprintf(&msg, "git cannot reach %s right now: the bridge could not load its "
		    "credential (secret %s). Nothing was sent; tell the operator.", g.host,
		    g.secret_name);
		conn_deny(c, ERR_UNAVAILABLE, cause, msg);
		goto out;
	}
	c->argv = json_incref(g.audit_argv);
	c->rule = xstrdup(g.rule);
	if (conn_check_busy(c) != 0)
		goto out;
	/* A pre-built jail's directory when one waits (zygote.h). */
	c->scratch = zygote_scratch(c->srv->zygote, c->session, "git", &cause);
	if (c->scratch == NULL) {
		conn_deny(c, ERR_INTERNAL, cause, "the bridge could not prepare a private "
		    "directory for git; nothing was sent. Tell the operator.");
		goto out;
	}
	st = xcalloc(1, sizeof *st);
	st->c = c;
	st->refusal = st->netns = st->refs_fd = -1;
	st->host = xstrdup(g.host);
	xasprintf(&st->repo, "%s/%s", g.owner, g.name);
	c->op_state = st;
	c->op_state_free = op_git_state_free;
	if (jailed) {
		/* Its own session's mirrors only, and no network but the injector. */
		xasprintf(&mdir, "%s/%s", c->srv->mirror_dir, c->session->name);
		jail_spec_init(&js, c->srv->jail_root, JAIL_NET_NEW_LO, c->scratch);
		jail_spec_bind(&js, c->scratch, 1);
		jail_spec_bind(&js, c->cfg->git_helper, 0);
		jail_spec_bind(&js, mdir, 1);
		/* The jail reserved with c->scratch, if it is still of this shape. */
		(void)zygote_claim(c->srv->zygote, c->session, "git", &js.j, &warm);
	}
	/*
	 * Jailed, host git gets no credential: its upstream is the injector inside its
	 * own network namespace. Unjailed (--no-jail, for measurements only) there is
	 * no namespace to hide a listener in, so shimbridge-git gets the token.
	 */
	if (jailed && op_git_inject(c, st, &g, warm.pid > 0 ? warm.netns : -1, via,
	    sizeof via, &cause) != 0) {
		conn_deny(c, ERR_INTERNAL, cause, "the bridge could not prepare git's upstream "
		    "connection; nothing was sent. Tell the operator.");
		goto out;
	}
	if (profile_git_env(&g, c->scratch, jailed ? via : NULL, &cause) != 0) {
		conn_deny(c, ERR_UNAVAILABLE, "git preparation failed", cause);
		goto out;
	}
	if (st->refs_path != NULL)
		envbuild_set(g.env, GITC_ENV_UPSTREAM_REFS, st->refs_path,
		    strlen(st->refs_path), 0);
	if (op_git_refusal_channel(st, &g, &wfd, &cause) != 0) {
		conn_deny(c, ERR_INTERNAL, cause, "the bridge could not prepare git (no pipe); "
		    "nothing was sent. Tell the operator.");
		goto out;
	}
	c->output_limit = (uint64_t)1 << 40;
	/*
	 * stdout is the pack protocol, written by upload-pack/receive-pack, which never
	 * hold the token (jailed, nothing of shimbridge-git's holds it; unjailed it
	 * goes only to the upstream fetch and push, and the messages it relays are
	 * redacted). Upstream's words from the hook come to us as "M" records on the
	 * refusal pipe instead (op_git_done). Masking bytes on stdout would corrupt
	 * pkt-line lengths, and holding back a trailing "0000" flush would deadlock
	 * the conversation, so only stderr goes through the redactor.
	 */
	c->red_out = profile_git.raw_stdout ? NULL : conn_redactor(c);
	c->red_err = conn_redactor(c);
	if (c->red_err == NULL || (!profile_git.raw_stdout && c->red_out == NULL)) {
		conn_deny(c, ERR_INTERNAL, "redactor", "the bridge could not set up output "
		    "redaction; nothing was sent. Tell the operator.");
		goto out;
	}
	c->srv->n_allowed++;
	audit_write(conn_audit_base(c, "allowed"), conn_redact(c));
	if (jailed) {
		/*
		 * The namespace with the listener: the pre-built jail's own, or, for a
		 * fresh jail (none was ready, or it died meanwhile), one to join.
		 */
		js.j.netns_fd = st->netns;
		if (warm.pid > 0)
			js.j.warm = &warm;
	}
	c->child_fd3 = wfd;
	clock_gettime(CLOCK_MONOTONIC, &st->spawned);
	if (conn_start(c, c->cfg->git_helper, g.argv, g.env, -1, c->scratch,
	    c->cfg->git_timeout, jailed ? &js.j : NULL) == 0) {
		/* The hook may ask for approval while the child runs: listen now. */
		st->chan_ev = event_new(c->srv->base, st->refusal, EV_READ | EV_PERSIST,
		    op_git_chan_cb, st);
		if (st->chan_ev == NULL || event_add(st->chan_ev, NULL) != 0)
			fatalx("out of memory starting git");
	}
	c->child_fd3 = 0;
out:
	/* A pre-built jail that did not run (a refusal on the way): it goes. */
	spawn_jail_discard(&warm);
	/* Only the child's processes may hold the write end. */
	if (wfd != -1)
		close(wfd);
	profile_git_clear(&g);
	free(mdir);
	free(cause);
	free(msg);
}

/* The host rejected the credential: tell the agent (as git cannot) and audit it. */
static void
op_git_unauthorized(struct conn *c, const struct op_git_state *st)
{
	static const char msg[] = "shimbridge: the host's token was rejected (HTTP 401); "
	    "the operator can run `shimbridge check`.\n";
	json_t *a;

	if (st->inj == NULL || inject_unauthorized(st->inj) == 0)
		return;
	conn_send(c, FRAME_STDERR, msg, sizeof msg - 1);
	a = conn_audit_base(c, "upstream_unauthorized");
	json_object_set_new(a, "count", json_integer(inject_unauthorized(st->inj)));
	audit_write(a, conn_redact(c));
}

/*
 * Show the agent the "M" records (upstream's words the hook could not redact),
 * redacted with every live secret; if joining them finds a secret that no single
 * line holds (split across lines), they are replaced by one mask.
 */
static void
op_git_messages(struct conn *c, const char *text, size_t len)
{
	const struct redact *r = conn_redact(c);
	char *joined, *nosep, *red, *redns, *redparts;
	size_t i, k = 0;

	if (len == 0)
		return;
	joined = xstrndup(text, len);
	nosep = xcalloc(1, len + 1);
	for (i = 0; i < len; i++) {
		if (text[i] != '\n')
			nosep[k++] = text[i];
	}
	red = redact_string(r, joined);
	redns = redact_string(r, nosep);
	/* Per line, as red; without the newlines, as redns would be if nothing spans lines. */
	redparts = red != NULL ? xcalloc(1, strlen(red) + 1) : NULL;
	if (redparts != NULL) {
		for (i = 0, k = 0; red[i] != '\0'; i++) {
			if (red[i] != '\n')
				redparts[k++] = red[i];
		}
	}
	if (red == NULL || redns == NULL || strcmp(redns, redparts) != 0) {
		static const char mask[] = "shimbridge: upstream: " REDACT_MASK "\n";

		conn_send(c, FRAME_STDERR, mask, sizeof mask - 1);
	} else
		conn_send(c, FRAME_STDERR, red, strlen(red));
	free(joined);
	free(nosep);
	free(red);
	free(redns);
	free(redparts);
}

/* Show the agent the "M" records in in[0..len) (an early answer comes next). */
static void
op_git_tell(struct conn *c, const char *in, size_t len)
{
	const char *p, *eol;
	char *buf = xcalloc(1, GITC_PIPE_MAX + 1);
	size_t n, blen = 0;

	for (p = in; p < in + len; p = eol + 1) {
		if ((eol = memchr(p, '\n', (size_t)(in + len - p))) == NULL)
			break;
		if (eol - p < 2 || p[0] != 'M' || p[1] != ' ')
			continue;
		n = (size_t)(eol - p) - 2 + 1;
		if (blen + n > GITC_PIPE_MAX)
			continue;
		memcpy(buf + blen, p + 2, n - 1);
		buf[blen + n - 1] = '\n';
		blen += n;
	}
	op_git_messages(c, buf, blen);
	free(buf);
}

/* Milliseconds from the request's start to t. */
static double
op_git_ms(const struct conn *c, const struct timespec *t)
{
	return (double)(t->tv_sec - c->start.tv_sec) * 1e3 +
	    (double)(t->tv_nsec - c->start.tv_nsec) / 1e6;
}

/*
 * One "T <phase> <ns>" record from shimbridge-git into the phases object, as
 * milliseconds since the request started; a malformed or repeated one is ignored
 * (the runner wrote it; it only ever moves a timing).
 */
static void
op_git_phase(const struct conn *c, json_t *ph, const char *p, size_t len)
{
	struct timespec t;
	const char *name;
	unsigned long long ns;

	if (profile_git_phase(p, len, &name, &ns) != 0 || json_object_get(ph, name) != NULL)
		return;
	t.tv_sec = (time_t)(ns / 1000000000ULL);
	t.tv_nsec = (long)(ns % 1000000000ULL);
	json_object_set_new(ph, name, json_real(op_git_ms(c, &t)));
}

/*
 * The call's phases as one audit record, in milliseconds since the request started:
 * "spawn" (the bridge starts the jailed child), shimbridge-git's marks (see
 * GITC_PHASE_*) and "done" (the child is gone and its output drained).
 */
static void
op_git_phases(struct conn *c, const struct op_git_state *st, json_t *ph)
{
	struct timespec now;
	json_t *a;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (st->spawned.tv_sec != 0 || st->spawned.tv_nsec != 0)
		json_object_set_new(ph, "spawn", json_real(op_git_ms(c, &st->spawned)));
	json_object_set_new(ph, "done", json_real(op_git_ms(c, &now)));
	a = conn_audit_base(c, "git-phases");
	json_object_set_new(a, "ms", ph);	/* transferred */
	audit_write(a, conn_redact(c));
}

/*
 * The call is over. A push the git policy refused inside shimbridge-git's
 * pre-receive hook ends with git's exit 0, so the hook writes what it said to the
 * refusal pipe as "R" records; that becomes a "denied" record. "M" records are
 * messages for the agent (see common/gitcontract.h).
 */
void
op_git_done(struct conn *c)
{
	struct op_git_state *st = c->op_state;
	struct { char *buf; size_t len, max; } rec[2] = {
		{ NULL, 0, GITC_REFUSAL_MAX }, { NULL, 0, GITC_PIPE_MAX } };
	char *in, *p, *eol;
	size_t len, i, n;
	json_t *a, *ph;
	struct timespec *t;

	if (st == NULL)
		return;
	op_git_unauthorized(c, st);
	if (st->refusal == -1)
		return;
	if (st->chan_ev != NULL) {
		event_free(st->chan_ev);
		st->chan_ev = NULL;
	}
	(void)op_git_chan_read(st);	/* what is left */
	close(st->refusal);
	st->refusal = -1;
	in = st->in;
	len = st->inlen;
	in[len] = '\0';
	ph = json_object();
	for (i = 0; i < 2; i++)
		rec[i].buf = xcalloc(1, rec[i].max + 1);
	for (p = in; p < in + len; p = eol + 1) {
		if ((eol = memchr(p, '\n', (size_t)(in + len - p))) == NULL)
			eol = in + len;
		if (eol - p > 2 && p[0] == 'T' && p[1] == ' ') {
			op_git_phase(c, ph, p + 2, (size_t)(eol - p) - 2);
			continue;
		}
		if (eol - p < 2 || p[1] != ' ' || (p[0] != 'R' && p[0] != 'M'))
			continue;	/* not a record: ignored */
		if (p[0] == 'M' && (size_t)(p - in) < st->told)
			continue;	/* shown before the early answer */
		i = p[0] == 'M';
		n = (size_t)(eol - p) - 2 + 1;
		if (rec[i].len + n > rec[i].max)
			continue;
		memcpy(rec[i].buf + rec[i].len, p + 2, n - 1);
		rec[i].buf[rec[i].len + n - 1] = '\n';
		rec[i].len += n;
	}
	op_git_messages(c, rec[1].buf, rec[1].len);
	if (c->answered) {
		t = &c->answered_at;
		json_object_set_new(ph, "answered", json_real(op_git_ms(c, t)));
	}
	op_git_phases(c, st, ph);
	if (rec[0].len > 0) {
		a = conn_audit_base(c, "denied");
		/* The runner wrote it: jansson escapes it; invalid UTF-8 is not logged raw. */
		if (json_object_set_new(a, "reason", json_stringn(rec[0].buf, rec[0].len)) != 0)
			json_object_set_new(a, "reason", json_string("git policy refused the push"));
		audit_write(a, conn_redact(c));
		c->srv->n_denied++;
	}
	for (i = 0; i < 2; i++)
		free(rec[i].buf);
}
