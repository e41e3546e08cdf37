/* op "git": the remote helper's network leg, served by shimbridge-git as the runner. */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "audit.h"
#include "config.h"
#include "conn.h"
#include "gitcontract.h"
#include "ghmint.h"
#include "gitop.h"
#include "httppolicy.h"
#include "inject.h"
#include "keyring.h"
#include "ops.h"
#include "proto.h"
#include "redact.h"
#include "request.h"
#include "secret.h"
#include "server.h"
#include "jail.h"
#include "spawn.h"
#include "util.h"

/* What op "git" keeps for one request. */
struct op_git_state {
	struct conn		*c;
	int			 refusal;	/* read end of the refusal pipe, or -1 */
	int			 netns;		/* the child's network namespace, or -1 */
	struct inject		*inj;		/* its upstream leg's injector, or NULL */
	char			*secret_name;
	char			*repo;		/* OWNER/NAME, the injector's scope */
	const char		*repos[1];
	struct httppolicy_scope	 scope;
};

/* Free a request's state (with its conn). */
static void
op_git_state_free(void *arg)
{
	struct op_git_state *st = arg;

	if (st == NULL)
		return;
	inject_free(st->inj);
	if (st->netns != -1)
		close(st->netns);
	if (st->refusal != -1)
		close(st->refusal);
	free(st->secret_name);
	free(st->repo);
	free(st);
}

/*
 * The refusal pipe of the git contract (common/gitcontract.h): its write end goes
 * to shimbridge-git as fd 3, its read end stays with the conn for op_git_done.
 */
static int
op_git_refusal_pipe(struct op_git_state *st, struct gitop *g, int *wfd, char **cause)
{
	char num[16];
	int p[2];

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
		xasprintf(cause, "pipe: %s", strerror(errno));
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

/*
 * The upstream leg without the token (issue 10.8): a network namespace for the
 * child with only loopback, the daemon's listener inside it, and an injector on
 * that listener that checks each smart-HTTP request against this repository (push
 * only for receive-pack), adds Basic auth and forwards to the configured upstream.
 * Fills via with the URL base shimbridge-git gets instead of the host's.
 */
static int
op_git_inject(struct conn *c, struct op_git_state *st, const struct gitop *g, char *via,
    size_t vialen, char **cause)
{
	const struct git_host *gh = config_git_host(c->cfg, g->host);
	struct inject_target t;
	char *upstream;
	int lfd, port, one = 1;

	if (jail_netns_listen(&st->netns, &lfd, &port, cause) != 0)
		return -1;
	/*
	 * git's requests are small and answered at once: without this, Nagle's
	 * algorithm against delayed ACKs stalls each exchange (accepted sockets
	 * inherit it on Linux).
	 */
	(void)setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	xasprintf(&st->repo, "%s/%s", g->owner, g->name);
	st->repos[0] = st->repo;
	st->scope.api = HTTP_API_GIT;
	st->scope.repos = st->repos;
	st->scope.nrepos = 1;
	st->scope.allow_push = strcmp(g->service, "receive-pack") == 0;
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
	t.arg = st;
	st->inj = inject_new(c->srv->base, lfd, &t, cause);	/* lfd transferred */
	free(upstream);
	if (st->inj == NULL)
		return -1;
	snprintf(via, vialen, "http://127.0.0.1:%d", port);
	return 0;
}

/* op "git": the remote helper's network leg, served from a bridge-owned mirror. */
void
op_git(struct conn *c, json_t *req)
{
	struct gitop g;
	struct jail_spec js;
	struct op_git_state *st;
	struct key *gk;
	char *cause = NULL, *msg = NULL, *mdir = NULL, via[64];
	const char *why = NULL;
	int wfd = -1, jailed = c->srv->jail_root != NULL;

	memset(&g, 0, sizeof g);
	c->tool = xstrdup("git");
	if (request_check_env(json_object_get(req, "env"), &why) != 0) {
		conn_protocol_error(c, why);
		return;
	}
	if (gitop_prepare(c->cfg, c->session, req, &g, &msg, &cause) != 0) {
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
	c->scratch = spawn_scratch_create(c->srv->scratch_dir, c->session->runner_uid,
	    c->session->runner_gid, &cause);
	if (c->scratch == NULL) {
		conn_deny(c, ERR_INTERNAL, cause, "the bridge could not prepare a private "
		    "directory for git; nothing was sent. Tell the operator.");
		goto out;
	}
	st = xcalloc(1, sizeof *st);
	st->c = c;
	st->refusal = st->netns = -1;
	c->op_state = st;
	c->op_state_free = op_git_state_free;
	/*
	 * Jailed, host git gets no credential: its upstream is the injector inside its
	 * own network namespace. Unjailed (--no-jail, for measurements only) there is
	 * no namespace to hide a listener in, so shimbridge-git gets the token.
	 */
	if (jailed && op_git_inject(c, st, &g, via, sizeof via, &cause) != 0) {
		conn_deny(c, ERR_INTERNAL, cause, "the bridge could not prepare git's upstream "
		    "connection; nothing was sent. Tell the operator.");
		goto out;
	}
	if (gitop_env(&g, c->scratch, jailed ? via : NULL, &cause) != 0) {
		conn_deny(c, ERR_UNAVAILABLE, "git preparation failed", cause);
		goto out;
	}
	if (op_git_refusal_pipe(st, &g, &wfd, &cause) != 0) {
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
	c->red_out = NULL;
	c->red_err = conn_redactor(c);
	if (c->red_err == NULL) {
		conn_deny(c, ERR_INTERNAL, "redactor", "the bridge could not set up output "
		    "redaction; nothing was sent. Tell the operator.");
		goto out;
	}
	c->srv->n_allowed++;
	audit_write(conn_audit_base(c, "allowed"), conn_redact(c));
	if (jailed) {
		/* Its own session's mirrors only, and no network but the injector. */
		xasprintf(&mdir, "%s/%s", c->srv->mirror_dir, c->session->name);
		jail_spec_init(&js, c->srv->jail_root, st->netns, c->scratch);
		jail_spec_bind(&js, c->scratch, 1);
		jail_spec_bind(&js, c->cfg->git_helper, 0);
		jail_spec_bind(&js, mdir, 1);
	}
	c->child_fd3 = wfd;
	conn_start(c, c->cfg->git_helper, g.argv, g.env, -1, c->scratch, c->cfg->git_timeout,
	    jailed ? &js.j : NULL);
	c->child_fd3 = 0;
out:
	/* Only the child's processes may hold the write end. */
	if (wfd != -1)
		close(wfd);
	gitop_clear(&g);
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
	size_t len = 0, cap = GITC_REFUSAL_MAX + GITC_PIPE_MAX + 64, i, n;
	ssize_t r;
	json_t *a;

	if (st == NULL)
		return;
	op_git_unauthorized(c, st);
	if (st->refusal == -1)
		return;
	in = xmalloc(cap + 1);
	while (len < cap) {
		r = read(st->refusal, in + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(st->refusal);
	st->refusal = -1;
	in[len] = '\0';
	for (i = 0; i < 2; i++)
		rec[i].buf = xcalloc(1, rec[i].max + 1);
	for (p = in; p < in + len; p = eol + 1) {
		if ((eol = memchr(p, '\n', (size_t)(in + len - p))) == NULL)
			eol = in + len;
		if (eol - p < 2 || p[1] != ' ' || (p[0] != 'R' && p[0] != 'M'))
			continue;	/* not a record: ignored */
		i = p[0] == 'M';
		n = (size_t)(eol - p) - 2 + 1;
		if (rec[i].len + n > rec[i].max)
			continue;
		memcpy(rec[i].buf + rec[i].len, p + 2, n - 1);
		rec[i].buf[rec[i].len + n - 1] = '\n';
		rec[i].len += n;
	}
	op_git_messages(c, rec[1].buf, rec[1].len);
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
	free(in);
}
