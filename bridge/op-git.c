/* op "git": the remote helper's network leg, served by shimbridge-git as the runner. */
#include <sys/stat.h>
#include <sys/types.h>

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
#include "gitop.h"
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
	int	refusal;	/* read end of the refusal pipe, or -1 */
};

/* Free a request's state (with its conn). */
static void
op_git_state_free(void *arg)
{
	struct op_git_state *st = arg;

	if (st == NULL)
		return;
	if (st->refusal != -1)
		close(st->refusal);
	free(st);
}

/*
 * The refusal pipe of the git contract (common/gitcontract.h): its write end goes
 * to shimbridge-git as fd 3, its read end stays with the conn for op_git_done.
 */
static int
op_git_refusal_pipe(struct conn *c, struct gitop *g, int *wfd, char **cause)
{
	struct op_git_state *st;
	char num[16];
	int p[2];

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
		xasprintf(cause, "pipe: %s", strerror(errno));
		return -1;
	}
	st = xcalloc(1, sizeof *st);
	st->refusal = p[0];
	c->op_state = st;
	c->op_state_free = op_git_state_free;
	*wfd = p[1];
	snprintf(num, sizeof num, "%d", GITC_REFUSAL_FD);
	envbuild_set(g->env, GITC_ENV_REFUSAL_FD, num, strlen(num), 0);
	return 0;
}

/* op "git": the remote helper's network leg, served from a bridge-owned mirror. */
void
op_git(struct conn *c, json_t *req)
{
	struct gitop g;
	struct jail_spec js;
	char *cause = NULL, *msg = NULL, *mdir = NULL;
	const char *why = NULL;
	int wfd = -1;

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
	g.secret = keyring_get(c->srv->keyring, c->session, g.secret_name);
	if (g.secret == NULL || !secret_usable(g.secret->src, &g.secret->val)) {
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
	if (gitop_env(&g, c->scratch, NULL, &cause) != 0) {
		conn_deny(c, ERR_UNAVAILABLE, "git preparation failed", cause);
		goto out;
	}
	if (op_git_refusal_pipe(c, &g, &wfd, &cause) != 0) {
		conn_deny(c, ERR_INTERNAL, cause, "the bridge could not prepare git (no pipe); "
		    "nothing was sent. Tell the operator.");
		goto out;
	}
	c->output_limit = (uint64_t)1 << 40;
	/*
	 * stdout is the pack protocol, written by upload-pack/receive-pack, which never
	 * hold the token (shimbridge-git gives it only to its upstream fetch and push,
	 * and redacts the messages it relays). Masking bytes there would corrupt
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
	if (c->srv->jail_root != NULL) {
		/*
		 * Jailed, with its own session's mirrors only. The upstream leg still
		 * talks to the real host itself, so it shares the host's network until
		 * the injector's listener inside a netns of its own takes over
		 * (jail_netns_listen).
		 */
		xasprintf(&mdir, "%s/%s", c->srv->mirror_dir, c->session->name);
		jail_spec_init(&js, c->srv->jail_root, JAIL_NET_HOST, c->scratch);
		jail_spec_bind(&js, c->scratch, 1);
		jail_spec_bind(&js, c->cfg->git_helper, 0);
		jail_spec_bind(&js, mdir, 1);
	}
	c->child_fd3 = wfd;
	conn_start(c, c->cfg->git_helper, g.argv, g.env, -1, c->scratch, c->cfg->git_timeout,
	    c->srv->jail_root != NULL ? &js.j : NULL);
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

/*
 * A push the git policy refused inside shimbridge-git's pre-receive hook: git
 * exits 0 then, so the hook writes what it said to the refusal pipe (at most
 * GITC_REFUSAL_MAX bytes, written at once, so it is all there once the child
 * is gone).
 */
void
op_git_done(struct conn *c)
{
	struct op_git_state *st = c->op_state;
	char buf[GITC_REFUSAL_MAX + 1];
	ssize_t n;
	json_t *a;

	if (st == NULL || st->refusal == -1)
		return;
	do {
		n = read(st->refusal, buf, sizeof buf - 1);
	} while (n < 0 && errno == EINTR);
	close(st->refusal);
	st->refusal = -1;
	if (n <= 0)
		return;
	buf[n] = '\0';
	a = conn_audit_base(c, "denied");
	/* The runner wrote it: jansson escapes it; invalid UTF-8 is not logged raw. */
	if (json_object_set_new(a, "reason", json_string(buf)) != 0)
		json_object_set_new(a, "reason", json_string("git policy refused the push"));
	audit_write(a, conn_redact(c));
	c->srv->n_denied++;
}
