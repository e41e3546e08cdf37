/* op "run": a configured tool, checked by the policy, run as the runner. */
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
#include "gh.h"
#include "keyring.h"
#include "ops.h"
#include "policy.h"
#include "proto.h"
#include "redact.h"
#include "request.h"
#include "secret.h"
#include "server.h"
#include "jail.h"
#include "spawn.h"
#include "util.h"

/* Build the child's environment from nothing. */
static struct envbuild *
op_run_env(struct conn *c, const struct tool *t, json_t *env, char **cause)
{
	struct envbuild *e = envbuild_new();
	const char *k;
	json_t *v;
	size_t i;

	envbuild_set(e, "PATH", "/usr/bin:/bin", 13, 0);
	envbuild_set(e, "HOME", c->scratch, strlen(c->scratch), 0);
	envbuild_set(e, "TMPDIR", c->scratch, strlen(c->scratch), 0);
	envbuild_set(e, "USER", c->session->runner, strlen(c->session->runner), 0);
	envbuild_set(e, "LOGNAME", c->session->runner, strlen(c->session->runner), 0);
	envbuild_set(e, "LANG", "C.UTF-8", 7, 0);
	if (env != NULL) {
		json_object_foreach(env, k, v) {
			/* Names were checked against the allowlist when the request was read. */
			envbuild_set(e, k, json_string_value(v), json_string_length(v), 0);
		}
	}
	for (i = 0; i < t->nenv; i++)
		envbuild_set(e, t->env[i].name, t->env[i].value, strlen(t->env[i].value), 0);
	for (i = 0; i < t->nsecrets; i++) {
		const struct key *s = keyring_get(c->srv->keyring, c->session,
		    t->secrets[i].secret);

		/* Command sources are renewed in the background (renew.c). */
		if (s == NULL || !secret_usable(s->src, &s->val)) {
			if (s != NULL && s->src->type == SECRET_COMMAND && s->val.refreshing)
				xasprintf(cause, "%s cannot run right now: the bridge is renewing "
				    "its credential (secret %s). Nothing was run; try again in a few "
				    "seconds.", t->name, t->secrets[i].secret);
			else
				xasprintf(cause, "%s cannot run right now: the bridge could not "
				    "load its credential (secret %s). Nothing was run. Ask the "
				    "operator to run `shimbridge check`.", t->name,
				    t->secrets[i].secret);
			envbuild_free(e);
			return NULL;
		}
		if (envbuild_set(e, t->secrets[i].var, (const char *)s->val.value,
		    s->val.len, 1) != 0) {
			xasprintf(cause, "secret %s cannot be passed in an environment variable "
			    "(it contains a NUL byte)", t->secrets[i].secret);
			envbuild_free(e);
			return NULL;
		}
	}
	return e;
}

/* op "run": policy, environment, cwd, spawn. */
void
op_run(struct conn *c, json_t *req)
{
	const char *why = NULL, *tname;
	const struct tool *t;
	struct policy_result pr;
	struct policy_ctx pc;
	struct envbuild *env = NULL;
	json_t *jt = json_object_get(req, "tool"), *jargv = json_object_get(req, "argv");
	json_t *jcwd = json_object_get(req, "cwd"), *jenv = json_object_get(req, "env");
	char **argv = NULL, *cause = NULL, *msg = NULL, *summary;
	size_t argc, i;
	int cwd_fd = -1;
	struct jail_spec js;

	memset(&pr, 0, sizeof pr);
	memset(&pc, 0, sizeof pc);
	if (request_check_run(req, &pc, &why) != 0) {
		conn_protocol_error(c, why);
		return;
	}
	tname = json_string_value(jt);
	c->tool = xstrdup(tname);
	c->argv = json_incref(jargv);
	if (jcwd != NULL)
		c->cwd = xstrdup(json_string_value(jcwd));

	t = config_tool(c->cfg, tname);
	if (t == NULL || !config_session_has_tool(c->session, tname)) {
		summary = policy_allowed_summary(c->cfg, c->session);
		xasprintf(&msg, "%s is not available in this sandbox session (not granted by "
		    "the shimbridge policy). This session may run: %s.", tname, summary);
		free(summary);
		conn_deny(c, ERR_UNKNOWN_TOOL, "tool not granted to the session", msg);
		goto out;
	}
	argc = json_array_size(jargv);
	argv = xcalloc(argc + 2, sizeof *argv);
	{
		const char *base = strrchr(t->path, '/');

		argv[0] = xstrdup(base != NULL ? base + 1 : t->path);
	}
	for (i = 0; i < argc; i++)
		argv[i + 1] = xstrdup(json_string_value(json_array_get(jargv, i)));
	policy_check(c->cfg, c->session, t, argv + 1, argc, &pc, &pr);
	c->rule = xstrdup(pr.rule);
	if (!pr.allowed) {
		conn_deny(c, ERR_DENIED, pr.reason, pr.message);
		goto out;
	}
	if (pc.nextra > 0) {
		/* The profile completes argv (-R repo, --head branch): gh runs outside the repo. */
		argv = xreallocarray(argv, argc + pc.nextra + 2, sizeof *argv);
		json_decref(c->argv);
		c->argv = json_deep_copy(jargv);
		for (i = 0; i < pc.nextra; i++) {
			argv[argc + 1 + i] = xstrdup(pc.extra[i]);
			json_array_append_new(c->argv, json_string(pc.extra[i]));
		}
		argv[argc + 1 + pc.nextra] = NULL;
	}
	if (conn_check_busy(c) != 0)
		goto out;
	if (t->cwd == CWD_WORKSPACE) {
		if (c->session->workspace == NULL || c->cwd == NULL ||
		    (cwd_fd = spawn_open_beneath(c->session->workspace, c->cwd)) < 0) {
			xasprintf(&msg, "%s runs only inside this session's workspace (%s), and "
			    "the current directory %s is not in it (or reaches it through a "
			    "symbolic link). Nothing was run; cd into the workspace and retry.",
			    tname, c->session->workspace != NULL ? c->session->workspace :
			    "none configured", c->cwd != NULL ? c->cwd : "(unknown)");
			conn_deny(c, ERR_DENIED, "cwd outside the workspace", msg);
			goto out;
		}
	}
	c->scratch = spawn_scratch_create(c->srv->scratch_dir, c->session->runner_uid,
	    c->session->runner_gid, &cause);
	if (c->scratch == NULL) {
		conn_deny(c, ERR_INTERNAL, cause, "the bridge could not prepare a private "
		    "directory for the command; nothing was run. Tell the operator.");
		goto out;
	}
	if ((env = op_run_env(c, t, jenv, &cause)) == NULL) {
		conn_deny(c, ERR_UNAVAILABLE, "secret unavailable", cause);
		goto out;
	}
	if (t->profile == PROFILE_GH)
		gh_env(t, c->scratch, &pc, env);
	c->output_limit = t->output_limit;
	/*
	 * Both streams go through the redactor of every live secret of every session.
	 * A tool given no secret is no exception: it runs as the same runner as
	 * children that hold one and could read theirs (/proc/PID/environ).
	 */
	c->red_out = conn_redactor(c);
	c->red_err = conn_redactor(c);
	if (c->red_out == NULL || c->red_err == NULL) {
		conn_deny(c, ERR_INTERNAL, "redactor", "the bridge could not set up output "
		    "redaction; nothing was run. Tell the operator.");
		goto out;
	}
	c->srv->n_allowed++;
	{
		json_t *a = conn_audit_base(c, "allowed");

		audit_write(a, conn_redact(c));
	}
	if (c->srv->jail_root != NULL) {
		/*
		 * Jailed: the scratch dir, the tool if it lives outside the system
		 * dirs, what the config exposes, and for cwd=workspace the workspace
		 * (the cwd is then the path checked above, resolved inside the jail,
		 * where a symlink can reach nothing else).
		 */
		jail_spec_init(&js, c->srv->jail_root, t->network == TOOL_NET_NONE ?
		    JAIL_NET_NEW : JAIL_NET_HOST, c->scratch);
		jail_spec_bind(&js, c->scratch, 1);
		jail_spec_bind(&js, t->path, 0);
		for (i = 0; i < t->nexpose; i++)
			jail_spec_bind(&js, t->expose[i], 0);
		if (t->cwd == CWD_WORKSPACE) {
			jail_spec_bind(&js, c->session->workspace, 1);
			close(cwd_fd);
			cwd_fd = -1;
		}
	}
	conn_start(c, t->path, argv, env, cwd_fd,
	    t->cwd == CWD_SCRATCH ? c->scratch : c->cwd, t->timeout,
	    c->srv->jail_root != NULL ? &js.j : NULL);
out:
	if (cwd_fd >= 0)
		close(cwd_fd);
	envbuild_free(env);
	if (argv != NULL) {
		for (i = 0; argv[i] != NULL; i++)
			free(argv[i]);
		free(argv);
	}
	policy_result_free(&pr);
	policy_ctx_free(&pc);
	free(cause);
	free(msg);
}
