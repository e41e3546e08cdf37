/* op "git": the remote helper's network leg, served by shimbridge-git as the runner. */
#include <sys/stat.h>
#include <sys/types.h>

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
#include "gitop.h"
#include "keyring.h"
#include "ops.h"
#include "proto.h"
#include "redact.h"
#include "request.h"
#include "secret.h"
#include "server.h"
#include "spawn.h"
#include "util.h"

/* op "git": the remote helper's network leg, served from a bridge-owned mirror. */
void
op_git(struct conn *c, json_t *req)
{
	struct gitop g;
	char *cause = NULL, *msg = NULL;
	const char *why = NULL;

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
	c->scratch = spawn_scratch_create(c->srv->scratch_dir, c->cfg->runner_uid,
	    c->cfg->runner_gid, &cause);
	if (c->scratch == NULL) {
		conn_deny(c, ERR_INTERNAL, cause, "the bridge could not prepare a private "
		    "directory for git; nothing was sent. Tell the operator.");
		goto out;
	}
	if (gitop_env(&g, c->scratch, &cause) != 0) {
		conn_deny(c, ERR_UNAVAILABLE, "git preparation failed", cause);
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
	conn_start(c, c->cfg->git_helper, g.argv, g.env, -1, c->scratch, c->cfg->git_timeout);
out:
	gitop_clear(&g);
	free(cause);
	free(msg);
}

/*
 * A push the git policy refused inside shimbridge-git's pre-receive hook: git
 * exits 0 then, so the hook leaves its message in the private HOME for us.
 */
void
op_git_done(struct conn *c)
{
	char *path, buf[2049];
	struct stat st;
	ssize_t n;
	json_t *a;
	int fd;

	if (c->scratch == NULL)
		return;
	xasprintf(&path, "%s/.shimbridge-refused", c->scratch);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (n = read(fd, buf,
	    sizeof buf - 1)) <= 0) {
		close(fd);
		return;
	}
	close(fd);
	buf[n] = '\0';
	a = conn_audit_base(c, "denied");
	/* The runner wrote it: jansson escapes it; invalid UTF-8 is not logged raw. */
	if (json_object_set_new(a, "reason", json_string(buf)) != 0)
		json_object_set_new(a, "reason", json_string("git policy refused the push"));
	audit_write(a, conn_redact(c));
	c->srv->n_denied++;
}
