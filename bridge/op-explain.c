/*
 * op "explain" (root only): what the bridge would do with a call of a session,
 * without running anything: the verdict, the deciding rule, the environment
 * variable names and secrets (by name) the tool would get, and its jail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "config.h"
#include "conn.h"
#include "ghinject.h"
#include "gitcontract.h"
#include "profile-git.h"
#include "jail.h"
#include "log.h"
#include "ops.h"
#include "policy.h"
#include "profile.h"
#include "proto.h"
#include "request.h"
#include "server.h"
#include "spawn.h"
#include "util.h"

/* Add a name to an array unless it is there already. */
static void
op_explain_add(json_t *arr, const char *name)
{
	json_t *v;
	size_t i;

	json_array_foreach(arr, i, v) {
		if (strcmp(json_string_value(v), name) == 0)
			return;
	}
	json_array_append_new(arr, json_string(name));
}

/* A bind for the jail description. */
static void
op_explain_bind(json_t *binds, const char *path, const char *what, int writable)
{
	json_t *b;

	if (!writable && jail_is_system_path(path))
		return;		/* every jail has the system directories */
	b = json_object();
	json_object_set_new(b, "path", json_string(path));
	json_object_set_new(b, "what", json_string(what));
	json_object_set_new(b, "mode", json_string(writable ? "rw" : "ro"));
	json_array_append_new(binds, b);
}

/* The jail a call would run in. */
static json_t *
op_explain_jail(struct conn *c, const struct session *s, int net_new, json_t *binds)
{
	json_t *j = json_object(), *ns = json_array();

	json_object_set_new(j, "enabled", json_boolean(c->srv->jail_root != NULL));
	json_object_set_new(j, "runner", json_string(s->runner));
	json_object_set_new(j, "runner_uid", json_integer(s->runner_uid));
	if (c->srv->jail_root != NULL) {
		json_array_append_new(ns, json_string("pid"));
		json_array_append_new(ns, json_string("mount"));
		json_array_append_new(ns, json_string("ipc"));
		json_array_append_new(ns, json_string("uts"));
		if (net_new)
			json_array_append_new(ns, json_string("net"));
	}
	json_object_set_new(j, "namespaces", ns);
	json_object_set_new(j, "network", json_string(c->srv->jail_root == NULL ? "host" :
	    net_new == 2 ? "loopback only, reaching the bridge's injector" :
	    net_new ? "none" : "host"));
	json_object_set_new(j, "binds", binds);
	return j;
}

/* Explain a tool call (op "run"). */
static json_t *
op_explain_run(struct conn *c, const struct session *s, json_t *req)
{
	const char *tname = json_string_value(json_object_get(req, "tool"));
	json_t *jargv = json_object_get(req, "argv"), *o = json_object(), *env, *secrets;
	json_t *binds, *fin, *files;
	const struct tool *t = config_tool(c->cfg, tname);
	struct policy_result pr;
	struct policy_ctx pc;
	struct envbuild *eb;
	char *const *ea;
	const char *why = NULL, *verdict;
	char **argv = NULL, *n;
	size_t argc = json_array_size(jargv), i;

	memset(&pr, 0, sizeof pr);
	memset(&pc, 0, sizeof pc);
	(void)request_check_run(req, &pc, &why);	/* checked by the caller */
	if (t == NULL || !config_session_has_tool(s, tname)) {
		json_object_set_new(o, "verdict", json_string("deny"));
		json_object_set_new(o, "rule", json_string(t == NULL ? "tools" :
		    "sessions.tools"));
		json_object_set_new(o, "reason", json_string(t == NULL ? "no such tool is "
		    "configured" : "the session is not granted this tool"));
		return o;
	}
	argv = xcalloc(argc + 1, sizeof *argv);
	for (i = 0; i < argc; i++)
		argv[i] = xstrdup(json_string_value(json_array_get(jargv, i)));
	policy_check(c->cfg, s, t, argv, argc, &pc, &pr);
	verdict = pr.allowed ? "allow" : pr.ask ? "ask" : "deny";
	json_object_set_new(o, "verdict", json_string(verdict));
	json_object_set_new(o, "rule", json_string(pr.rule));
	json_object_set_new(o, "reason", json_string(pr.reason));
	if (pr.ask)
		json_object_set_new(o, "ask_timeout", json_integer(pr.ask_timeout > 0 ?
		    pr.ask_timeout : c->cfg->approval.timeout));
	if (!pr.allowed && !pr.ask) {
		json_object_set_new(o, "message", json_string(pr.message));
		goto out;
	}
	fin = json_deep_copy(jargv);
	for (i = 0; i < pc.nextra; i++)
		json_array_append_new(fin, json_string(pc.extra[i]));
	json_object_set_new(o, "argv_run", fin);
	json_object_set_new(o, "path", json_string(t->path));
	if (pc.repo != NULL)
		json_object_set_new(o, "repo", json_string(pc.repo));
	files = json_array();
	for (i = 0; i < pc.nfiles; i++)
		json_array_append_new(files, json_string(pc.files[i].path));
	json_object_set_new(o, "files_from_sandbox", files);
	/* Environment names: keep in step with op_run_env and ghinject_start. */
	env = json_array();
	secrets = json_array();
	op_explain_add(env, "PATH");
	op_explain_add(env, "HOME");
	op_explain_add(env, "TMPDIR");
	op_explain_add(env, "USER");
	op_explain_add(env, "LOGNAME");
	op_explain_add(env, "LANG");
	for (i = 0; i < t->nenv; i++)
		op_explain_add(env, t->env[i].name);
	eb = envbuild_new();
	profile_env(t, "/scratch", &pc, eb);
	for (ea = envbuild_array(eb); *ea != NULL; ea++) {
		n = xstrndup(*ea, strcspn(*ea, "="));
		op_explain_add(env, n);
		free(n);
	}
	envbuild_free(eb);
	for (i = 0; i < t->nsecrets; i++) {
		json_t *sj = json_object();
		int inj = t->profile->inject && ghinject_token_var(t->secrets[i].var);

		json_object_set_new(sj, "secret", json_string(t->secrets[i].secret));
		json_object_set_new(sj, "variable", json_string(t->secrets[i].var));
		json_object_set_new(sj, "delivery", json_string(inj ? "placeholder; the "
		    "bridge's HTTP injector adds the real value upstream" :
		    "the value, in the environment"));
		json_array_append_new(secrets, sj);
		op_explain_add(env, t->secrets[i].var);
	}
	if (t->profile->inject)
		op_explain_add(env, "GH_CONFIG_DIR");
	json_object_set_new(o, "env", env);
	json_object_set_new(o, "secrets", secrets);
	json_object_set_new(o, "cwd", json_string(t->cwd == CWD_WORKSPACE ?
	    "the shim's directory, inside the workspace" : "a fresh private directory"));
	json_object_set_new(o, "timeout", json_integer(t->timeout));
	json_object_set_new(o, "output_limit", json_integer((json_int_t)t->output_limit));
	binds = json_array();
	op_explain_bind(binds, "(a fresh per-call directory under the state dir)",
	    "scratch (HOME, TMPDIR)", 1);
	op_explain_bind(binds, t->path, "the tool", 0);
	for (i = 0; i < t->nexpose; i++)
		op_explain_bind(binds, t->expose[i], "exposed by the config", 0);
	if (t->cwd == CWD_WORKSPACE && s->workspace != NULL)
		op_explain_bind(binds, s->workspace, "the session's workspace", 1);
	json_object_set_new(o, "jail", op_explain_jail(c, s, t->network == TOOL_NET_NONE,
	    binds));
out:
	for (i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
	policy_result_free(&pr);
	policy_ctx_free(&pc);
	return o;
}

/* Explain a git network call: "git push URL [BRANCH...]" or "git fetch URL". */
static json_t *
op_explain_git(struct conn *c, const struct session *s, json_t *jargv)
{
	json_t *o = json_object(), *req, *env, *binds, *ask = json_array();
	const char *verb = json_string_value(json_array_get(jargv, 0));
	const char *url = json_string_value(json_array_get(jargv, 1));
	char *msg = NULL, *cause = NULL;
	struct profile_git_req g;
	int push;
	size_t i;

	if (verb == NULL || url == NULL) {
		json_object_set_new(o, "verdict", json_string("deny"));
		json_object_set_new(o, "reason", json_string("explain git as: git push|fetch "
		    "URL [BRANCH...]"));
		return o;
	}
	push = strcmp(verb, "push") == 0;
	req = json_pack("{s:s, s:s, s:s}", "op", "git", "service", push ? "git-receive-pack" :
	    "git-upload-pack", "url", url);
	if (profile_git_prepare(c->cfg, s, req, &g, &msg, &cause) != 0) {
		json_object_set_new(o, "verdict", json_string("deny"));
		json_object_set_new(o, "reason", json_string(cause));
		if (msg != NULL)
			json_object_set_new(o, "message", json_string(msg));
		goto out;
	}
	for (i = 2; push && i < json_array_size(jargv); i++) {
		const char *b = json_string_value(json_array_get(jargv, i));

		if (b == NULL)
			continue;
		if (strncmp(b, "refs/heads/", 11) == 0)
			b += 11;
		if (profile_git_asks(c->cfg, b))
			op_explain_add(ask, b);
	}
	json_object_set_new(o, "verdict", json_string(json_array_size(ask) > 0 ? "ask" :
	    "allow"));
	json_object_set_new(o, "rule", json_string(json_array_size(ask) > 0 ?
	    "git.ask_branches" : g.rule));
	json_object_set_new(o, "reason", json_string(push ? "the repository is allowed; "
	    "the push is checked ref by ref (git.no_push_branches, ff_only_branches, "
	    "protected_tags, deny_paths) when it arrives, and an allowed update of a branch "
	    "in git.ask_branches waits for the operator's approval" : "the repository is "
	    "allowed"));
	if (json_array_size(ask) > 0) {
		json_object_set(o, "ask_branches", ask);
		json_object_set_new(o, "ask_timeout", json_integer(c->cfg->git_ask_timeout > 0 ?
		    c->cfg->git_ask_timeout : c->cfg->approval.timeout));
	}
	json_object_set_new(o, "upstream", json_string(g.upstream));
	json_object_set_new(o, "mirror", json_string(g.mirror));
	env = json_array();
	op_explain_add(env, "PATH");
	op_explain_add(env, "HOME");
	op_explain_add(env, "LANG");
	op_explain_add(env, GITC_ENV_SERVICE);
	op_explain_add(env, GITC_ENV_MIRROR);
	op_explain_add(env, GITC_ENV_UPSTREAM);
	op_explain_add(env, GITC_ENV_GIT);
	op_explain_add(env, GITC_ENV_NO_PUSH);
	op_explain_add(env, GITC_ENV_FF_ONLY);
	op_explain_add(env, GITC_ENV_TAGS);
	op_explain_add(env, GITC_ENV_DENY_PATHS);
	if (c->cfg->nask_branches > 0)
		op_explain_add(env, GITC_ENV_ASK);
	json_object_set_new(o, "env", env);
	json_object_set_new(o, "secrets", json_pack("[{s:s, s:s}]", "secret", g.secret_name,
	    "delivery", c->srv->jail_root != NULL ? "never to git: the bridge's injector in "
	    "the child's network namespace adds it upstream" : "to shimbridge-git's own "
	    "credential helper (unjailed daemon: --no-jail)"));
	json_object_set_new(o, "timeout", json_integer(c->cfg->git_timeout));
	binds = json_array();
	op_explain_bind(binds, "(a fresh per-call directory under the state dir)",
	    "scratch (HOME)", 1);
	op_explain_bind(binds, g.mirror, "the session's mirror of the repository", 1);
	op_explain_bind(binds, c->cfg->git_helper, "shimbridge-git", 0);
	op_explain_bind(binds, c->cfg->git_path, "host git", 0);
	json_object_set_new(o, "jail", op_explain_jail(c, s, 2, binds));
out:
	profile_git_clear(&g);
	json_decref(req);
	json_decref(ask);
	free(msg);
	free(cause);
	return o;
}

/* op "explain": {"session", "tool", "argv"[, "cwd", "context"]}; nothing runs. */
void
op_explain(struct conn *c, json_t *req)
{
	json_t *jsess = json_object_get(req, "session"), *copy, *o, *res;
	const struct session *s;
	struct policy_ctx pc;
	const char *why = NULL, *tool;
	char *line;

	copy = json_deep_copy(req);
	json_object_del(copy, "session");
	json_object_set_new(copy, "op", json_string("run"));
	memset(&pc, 0, sizeof pc);
	if (!json_is_string(jsess) || request_check_run(copy, &pc, &why) != 0) {
		json_decref(copy);
		conn_protocol_error(c, why != NULL ? why : "explain needs a \"session\"");
		return;
	}
	o = json_object();
	json_object_set_new(o, "session", json_string(json_string_value(jsess)));
	json_object_set(o, "tool", json_object_get(copy, "tool"));
	json_object_set(o, "argv", json_object_get(copy, "argv"));
	if ((s = config_session_by_name(c->cfg, json_string_value(jsess))) == NULL) {
		json_object_set_new(o, "verdict", json_string("deny"));
		json_object_set_new(o, "reason", json_string("no such session"));
		json_object_set_new(o, "error", json_string("no such session"));
	} else {
		tool = json_string_value(json_object_get(copy, "tool"));
		if (strcmp(tool, "git") == 0 && config_tool(c->cfg, "git") == NULL)
			res = op_explain_git(c, s, json_object_get(copy, "argv"));
		else
			res = op_explain_run(c, s, copy);
		json_object_update(o, res);
		json_decref(res);
	}
	json_decref(copy);
	line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (line == NULL)
		fatalx("cannot encode an explanation");
	conn_send(c, FRAME_STDOUT, line, strlen(line));
	conn_send(c, FRAME_STDOUT, "\n", 1);
	free(line);
	conn_exit(c, 0);
}
