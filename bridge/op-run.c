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

#include "approve.h"
#include "audit.h"
#include "config.h"
#include "conn.h"
#include "filereq.h"
#include "ghinject.h"
#include "ghmint.h"
#include "keyring.h"
#include "ops.h"
#include "pending.h"
#include "policy.h"
#include "profile.h"
#include "proto.h"
#include "redact.h"
#include "request.h"
#include "secret.h"
#include "server.h"
#include "jail.h"
#include "spawn.h"
#include "util.h"
#include "zygote.h"

/*
 * A tool's GitHub App secret: ask for the session's token (ghmint_want); 0 if it
 * is usable or being minted, else -1 and *cause for the agent.
 */
static int
op_run_app_token(struct conn *c, const struct tool *t, const struct secret_ref *ref,
    struct key *k, char **cause)
{
	if (ghmint_want(c->srv->base, c->srv->keyring, c->srv->cfg, k))
		return 0;
	xasprintf(cause, "%s cannot run right now: %s. Nothing was run. Tell the operator "
	    "(`shimbridge status` shows the token's state, the daemon's log says more); "
	    "the bridge retries by itself, so a later call may work.", t->name,
	    ghmint_why(k));
	(void)ref;
	return -1;
}

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
		struct key *s = keyring_get(c->srv->keyring, c->session, t->secrets[i].secret);

		/* A GitHub App token: minted at the session's first need (ghmint.c). */
		if (s != NULL && s->src->type == SECRET_GITHUB_APP &&
		    op_run_app_token(c, t, &t->secrets[i], s, cause) != 0) {
			envbuild_free(e);
			return NULL;
		}
		if (s != NULL && s->src->type == SECRET_GITHUB_APP && t->profile->inject &&
		    ghinject_token_var(t->secrets[i].var))
			continue;	/* the injector waits for a mint under way */
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
		/* An injected tool's token goes to its injector (op_run_inject), never into it. */
		if (t->profile->inject && ghinject_token_var(t->secrets[i].var))
			continue;
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

/* The injector's secret callback: the gh token's current value (renewals apply). */
static int
op_run_gh_secret(void *arg, const unsigned char **val, size_t *len)
{
	struct conn *c = arg;
	const struct tool *t = config_tool(c->cfg, c->tool);
	const struct key *k;
	size_t i;

	for (i = 0; t != NULL && i < t->nsecrets; i++) {
		if (!ghinject_token_var(t->secrets[i].var))
			continue;
		k = keyring_get(c->srv->keyring, c->session, t->secrets[i].secret);
		if (k != NULL && !secret_usable(k->src, &k->val) &&
		    secret_pending(k->src, &k->val))
			return 1;	/* a GitHub App token being minted: the request waits */
		if (k == NULL || !secret_usable(k->src, &k->val))
			return -1;
		*val = k->val.value;
		*len = k->val.len;
		return 0;
	}
	return -1;
}

/* The injector's audit callback: one "http" record per API request, linked by id. */
static void
op_run_gh_audit(void *arg, const char *summary, int status, unsigned long long up,
    unsigned long long down, const char *refusal)
{
	struct conn *c = arg;
	json_t *a = conn_audit_base(c, "http");

	json_object_set_new(a, "request", json_string(summary));
	json_object_set_new(a, "status", json_integer(status));
	json_object_set_new(a, "bytes_up", json_integer((json_int_t)up));
	json_object_set_new(a, "bytes_down", json_integer((json_int_t)down));
	if (refusal != NULL)
		json_object_set_new(a, "refused", json_string(refusal));
	audit_write(a, conn_redact(c));
}

/* The conn's op_state for a gh call: its injector (freed first thing by conn_free). */
static void
op_run_gh_free(void *g)
{
	ghinject_free(g);
}

/*
 * gh gets a placeholder token and a per-call config pointing at a socket in its
 * scratch dir, served by an injector that adds the real token (docs/INJECTOR.md).
 * The injector trusts the tool's ca_file, else the SSL_CERT_FILE its env gives gh
 * (the CA the operator meant gh to trust), else the system store.
 */
static int
op_run_inject(struct conn *c, const struct tool *t, struct envbuild *env, char **cause)
{
	struct ghinject_params p;
	struct ghinject *g;
	size_t i;

	memset(&p, 0, sizeof p);
	/* From the tool's config only: the sandbox's request env must not pick the CA. */
	for (i = 0; i < t->nenv; i++)
		if (strcmp(t->env[i].name, "SSL_CERT_FILE") == 0)
			p.ca_file = t->env[i].value;
	if (t->ca_file != NULL)
		p.ca_file = t->ca_file;
	p.base = c->srv->base;
	p.scratch = c->scratch;
	p.uid = c->session->runner_uid;
	p.gid = c->session->runner_gid;
	p.host = profile_host(t);
	p.repos = (const char *const *)c->session->repos;
	p.nrepos = c->session->nrepos;
	p.secret = op_run_gh_secret;
	p.audit = op_run_gh_audit;
	p.arg = c;
	if ((g = ghinject_start(&p, env, cause)) == NULL)
		return -1;
	c->op_state = g;
	c->op_state_free = op_run_gh_free;
	return 0;
}

/* The call ended: stop gh's injector; tell the agent if the host rejected the token. */
void
op_run_done(struct conn *c)
{
	static const char msg[] = "shimbridge: the host's token was rejected (HTTP 401); "
	    "the operator can run `shimbridge check`.\n";
	struct ghinject *g = c->op_state;
	json_t *a;

	if (g == NULL || c->op_state_free != op_run_gh_free)
		return;
	if (ghinject_unauthorized(g) > 0) {
		conn_send(c, FRAME_STDERR, msg, sizeof msg - 1);
		a = conn_audit_base(c, "upstream_unauthorized");
		json_object_set_new(a, "count", json_integer(ghinject_unauthorized(g)));
		audit_write(a, conn_redact(c));
	}
	ghinject_free(g);
	c->op_state = NULL;
	c->op_state_free = NULL;
}

/* A run waiting for approval (pending_ask) or for its file arguments (conn_fetch_files). */
struct op_run_wait {
	const struct tool	 *t;		/* in c->cfg, which the conn holds */
	char			**argv;		/* argv[0] is the tool name; NULL-terminated */
	size_t			  argc;		/* the agent's arguments, before the additions */
	struct policy_ctx	  pc;		/* outputs only: repository, extra, files */
	json_t			 *env;		/* the request's env, or NULL */
	int			  cwd_fd;
	char			 *remote_url;	/* the request's context, for a reload's recheck */
	char			 *branch;
};

/* Free argv (NULL-terminated). */
static void
op_run_argv_free(char **argv)
{
	size_t i;

	if (argv == NULL)
		return;
	for (i = 0; argv[i] != NULL; i++)
		free(argv[i]);
	free(argv);
}

/* Free a waiting run (the request ended before its files arrived). */
static void
op_run_wait_free(void *arg)
{
	struct op_run_wait *w = arg;

	if (w->cwd_fd >= 0)
		close(w->cwd_fd);
	op_run_argv_free(w->argv);
	policy_ctx_free(&w->pc);
	json_decref(w->env);
	free(w->remote_url);
	free(w->branch);
	free(w);
}

/* Environment, redaction, audit and spawn: the part after policy and files. */
static void
op_run_start(struct conn *c, const struct tool *t, char **argv, const struct policy_ctx *pc,
    json_t *jenv, int cwd_fd)
{
	struct envbuild *env = NULL;
	struct jail_spec js;
	struct spawn_jail warm;
	char *cause = NULL;
	size_t i;

	if ((env = op_run_env(c, t, jenv, &cause)) == NULL) {
		conn_deny(c, ERR_UNAVAILABLE, "secret unavailable", cause);
		goto out;
	}
	profile_env(t, c->scratch, pc, env);
	if (t->profile->inject && op_run_inject(c, t, env, &cause) != 0) {
		conn_deny(c, ERR_INTERNAL, cause, "the bridge could not set up the tool's "
		    "connection to its host; nothing was run. Tell the operator.");
		goto out;
	}
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
		 * (the cwd is then the path checked by op_run, resolved inside the
		 * jail, where a symlink can reach nothing else; cwd_fd stays its
		 * owner's to close).
		 */
		jail_spec_init(&js, c->srv->jail_root, t->network == TOOL_NET_NONE ?
		    JAIL_NET_NEW : JAIL_NET_HOST, c->scratch);
		jail_spec_bind(&js, c->scratch, 1);
		jail_spec_bind(&js, t->path, 0);
		for (i = 0; i < t->nexpose; i++)
			jail_spec_bind(&js, t->expose[i], 0);
		if (t->cwd == CWD_WORKSPACE) {
			jail_spec_bind(&js, c->session->workspace, 1);
			cwd_fd = -1;
		}
		/* The jail reserved with c->scratch, if it is still of this shape. */
		if (zygote_claim(c->srv->zygote, c->session, t->name, &js.j, &warm))
			js.j.warm = &warm;
	}
	conn_start(c, t->path, argv, env, cwd_fd,
	    t->cwd == CWD_SCRATCH ? c->scratch : c->cwd, t->timeout,
	    c->srv->jail_root != NULL ? &js.j : NULL);
out:
	envbuild_free(env);
	free(cause);
}

/* Every file argument arrived: point argv at the copies and start. */
static void
op_run_files_done(struct conn *c, void *arg, char *const *copies)
{
	struct op_run_wait *w = arg;

	profile_files_apply(w->argv + 1, w->argc, &w->pc, copies);
	op_run_start(c, w->t, w->argv, &w->pc, w->env, w->cwd_fd);
	op_run_wait_free(w);
}

/* After the policy (and an approval): cwd, scratch, file arguments, then start. */
static void
op_run_go(struct conn *c, void *arg)
{
	struct op_run_wait *w = arg;
	struct filereq *fr;
	const struct tool *t = w->t;
	char *cause = NULL, *msg = NULL;

	if (conn_check_busy(c) != 0)
		goto out;
	if (t->cwd == CWD_WORKSPACE) {
		if (c->session->workspace == NULL || c->cwd == NULL ||
		    (w->cwd_fd = spawn_open_beneath(c->session->workspace, c->cwd)) < 0) {
			xasprintf(&msg, "%s runs only inside this session's workspace (%s), and "
			    "the current directory %s is not in it (or reaches it through a "
			    "symbolic link). Nothing was run; cd into the workspace and retry.",
			    t->name, c->session->workspace != NULL ? c->session->workspace :
			    "none configured", c->cwd != NULL ? c->cwd : "(unknown)");
			conn_deny(c, ERR_DENIED, "cwd outside the workspace", msg);
			goto out;
		}
	}
	/* A pre-built jail's directory when one waits (zygote.h). */
	c->scratch = zygote_scratch(c->srv->zygote, c->session, t->name, &cause);
	if (c->scratch == NULL) {
		conn_deny(c, ERR_INTERNAL, cause, "the bridge could not prepare a private "
		    "directory for the command; nothing was run. Tell the operator.");
		goto out;
	}
	if (w->pc.nfiles == 0) {
		op_run_start(c, t, w->argv, &w->pc, w->env, w->cwd_fd);
		goto out;
	}
	/* File arguments are the agent's: fetch them from the sandbox first. */
	if ((fr = filereq_new(c->scratch, &w->pc, &cause)) == NULL) {
		conn_deny(c, ERR_INTERNAL, cause, "the bridge could not prepare a directory "
		    "for the command's file arguments; nothing was run. Tell the operator.");
		goto out;
	}
	conn_fetch_files(c, fr, op_run_files_done, op_run_wait_free, w);
	w = NULL;	/* transferred (fr points at w->pc) */
out:
	if (w != NULL)
		op_run_wait_free(w);
	free(cause);
	free(msg);
}

/* A reload while a run waits for approval: does the new config still ask for it? */
static int
op_run_still_asks(struct conn *c, void *arg, const struct config *nc, char **why)
{
	struct op_run_wait *w = arg;
	const struct session *s = config_session_by_name(nc, c->session->name);
	const struct tool *t = config_tool(nc, w->t->name);
	struct policy_result pr;
	struct policy_ctx pc;
	int asks;

	if (s == NULL || t == NULL || !config_session_has_tool(s, w->t->name)) {
		xasprintf(why, "this session may no longer use %s", w->t->name);
		return 0;
	}
	memset(&pc, 0, sizeof pc);
	pc.remote_url = w->remote_url;
	pc.branch = w->branch;
	policy_check(nc, s, t, w->argv + 1, w->argc, &pc, &pr);
	asks = pr.ask;
	if (pr.allowed)
		xasprintf(why, "now allows it without approval (%s)", pr.rule);
	else if (!pr.ask)
		xasprintf(why, "now refuses it (%s)", pr.reason);
	policy_result_free(&pr);
	policy_ctx_free(&pc);
	return asks;
}

/* The command as one line for the operator and the agent: tool and arguments. */
static char *
op_run_line(const char *tool, json_t *argv)
{
	char *line = xstrdup(tool), *t;
	const char *a;
	json_t *v;
	size_t i;

	json_array_foreach(argv, i, v) {
		a = json_string_value(v);
		if (strlen(line) > APPROVE_COMMAND_MAX)
			break;
		if (*a == '\0' || strpbrk(a, " \t\n'\"\\$`") != NULL)
			xasprintf(&t, "%s '%s'", line, a);
		else
			xasprintf(&t, "%s %s", line, a);
		free(line);
		line = t;
	}
	return line;
}

/* An "ask" rule matched: wait for approval, then go on as an allowed run. */
static void
op_run_ask(struct conn *c, struct op_run_wait *w, const struct policy_result *pr)
{
	struct pending_ask ask;
	json_t *key = json_array(), *detail = json_object();
	char *keys, *line;

	/* Identical calls: the same tool, arguments (with the additions) and cwd. */
	json_array_append_new(key, json_string(w->t->name));
	json_array_append(key, c->argv);
	if (w->t->cwd == CWD_WORKSPACE && c->cwd != NULL)
		json_array_append_new(key, json_string(c->cwd));
	keys = json_dumps(key, JSON_COMPACT);
	line = op_run_line(w->t->name, c->argv);
	json_object_set_new(detail, "tool", json_string(w->t->name));
	json_object_set(detail, "argv", c->argv);
	if (c->cwd != NULL)
		json_object_set_new(detail, "cwd", json_string(c->cwd));
	memset(&ask, 0, sizeof ask);
	ask.command = line;
	ask.key = keys;
	ask.rule = pr->rule;
	ask.timeout = pr->ask_timeout;
	ask.detail = detail;
	ask.go = op_run_go;
	ask.free = op_run_wait_free;
	ask.still_asks = op_run_still_asks;
	ask.arg = w;		/* transferred */
	pending_ask(c, &ask);
	json_decref(key);
	json_decref(detail);
	free(keys);
	free(line);
}

/* op "run": policy [and approval], cwd, file arguments, then environment and spawn. */
void
op_run(struct conn *c, json_t *req)
{
	const char *why = NULL, *tname;
	const struct tool *t;
	struct policy_result pr;
	struct policy_ctx pc;
	struct op_run_wait *w;
	json_t *jt = json_object_get(req, "tool"), *jargv = json_object_get(req, "argv");
	json_t *jcwd = json_object_get(req, "cwd"), *jenv = json_object_get(req, "env");
	char **argv = NULL, *msg = NULL, *summary, *url = NULL, *branch = NULL;
	size_t argc, i;

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
		xasprintf(&msg, "shimbridge: refused: %s: it is not available in this sandbox "
		    "session (not granted by the shimbridge policy); this session may run: %s. "
		    "See `shimbridge list`, or ask the operator to grant it", tname, summary);
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
	/* The context's inputs point into req; from here on only the outputs are used. */
	if (pr.ask) {
		url = pc.remote_url != NULL ? xstrdup(pc.remote_url) : NULL;
		branch = pc.branch != NULL ? xstrdup(pc.branch) : NULL;
	}
	pc.remote_url = pc.branch = NULL;
	c->rule = xstrdup(pr.rule);
	if (!pr.allowed && !pr.ask) {
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
	w = xcalloc(1, sizeof *w);
	w->t = t;
	w->argv = argv;		/* transferred */
	w->argc = argc;
	w->pc = pc;		/* transferred */
	w->env = jenv != NULL ? json_incref(jenv) : NULL;
	w->cwd_fd = -1;
	w->remote_url = url;
	w->branch = branch;
	argv = NULL;
	url = branch = NULL;
	memset(&pc, 0, sizeof pc);
	if (pr.ask)
		op_run_ask(c, w, &pr);
	else
		op_run_go(c, w);
out:
	op_run_argv_free(argv);
	policy_result_free(&pr);
	policy_ctx_free(&pc);
	free(url);
	free(branch);
	free(msg);
}
