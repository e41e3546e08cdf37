/* Argument policy: deny by default, first matching rule wins. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "profile-git.h"
#include "policy.h"
#include "profile.h"
#include "util.h"

#define SUMMARY_MAX	1024

/* Whether one argument matches a pattern (also its --opt part of --opt=value). */
static int
policy_arg_matches(const char *pat, const char *arg)
{
	const char *eq;
	char *opt;
	int m;

	if (fnmatch(pat, arg, 0) == 0)
		return 1;
	if (strncmp(arg, "--", 2) != 0 || (eq = strchr(arg, '=')) == NULL)
		return 0;
	opt = xstrndup(arg, (size_t)(eq - arg));
	m = fnmatch(pat, opt, 0) == 0;
	free(opt);
	return m;
}

/* Positional match; "**" as the last pattern matches zero or more arguments. */
int
policy_rule_matches(char *const *pat, size_t npat, char *const *argv, size_t argc)
{
	size_t i;

	for (i = 0; i < npat; i++) {
		if (strcmp(pat[i], "**") == 0)
			return 1;
		if (i >= argc || fnmatch(pat[i], argv[i], 0) != 0)
			return 0;
	}
	return i == argc;
}

/* Append to a bounded summary, marking where it was cut. */
static void
summary_add(char *buf, size_t *len, const char *s)
{
	size_t n = strlen(s);

	if (*len + n + 8 >= SUMMARY_MAX) {
		if (*len + 4 < SUMMARY_MAX && strcmp(buf + (*len > 3 ? *len - 3 : 0), "...") != 0) {
			memcpy(buf + *len, "...", 4);
			*len += 3;
		}
		return;
	}
	memcpy(buf + *len, s, n + 1);
	*len += n;
}

/* Append one tool's line: its help, else its allow and ask rules. */
static void
summary_tool(const struct config *c, const char *name, char *buf, size_t *len)
{
	const struct tool *t = config_tool(c, name);
	size_t j, k, shown;

	if (t == NULL) {	/* git through the remote helper */
		summary_add(buf, len, name);
		summary_add(buf, len, " (push/fetch of allowed repositories");
		if (c->nask_branches > 0) {
			summary_add(buf, len, "; a push to ");
			for (j = 0; j < c->nask_branches; j++) {
				summary_add(buf, len, j > 0 ? ", " : "");
				summary_add(buf, len, c->ask_branches[j]);
			}
			summary_add(buf, len, " waits for the operator's approval");
		}
		summary_add(buf, len, ")");
		return;
	}
	if (t->help != NULL) {
		summary_add(buf, len, t->help);
		return;
	}
	shown = 0;
	for (j = 0; j < t->nrules && shown < 12; j++) {
		if (!t->rules[j].allow && !t->rules[j].ask)
			continue;
		summary_add(buf, len, shown++ ? ", " : "");
		summary_add(buf, len, t->name);
		for (k = 0; k < t->rules[j].nargv; k++) {
			summary_add(buf, len, " ");
			summary_add(buf, len, strcmp(t->rules[j].argv[k], "**") == 0 ?
			    "[ARGS]" : t->rules[j].argv[k]);
		}
		if (t->rules[j].ask)
			summary_add(buf, len, " (after the operator approves)");
	}
	if (shown == 0) {
		summary_add(buf, len, t->name);
		summary_add(buf, len, " (no allowed commands)");
	}
}

/*
 * A readable list of what a session may run, built from its tools' allow
 * rules, joined by " | ". It holds no ';' (one from a rule or help text of the
 * config becomes ','), so it can end a structured refusal line.
 */
char *
policy_allowed_summary(const struct config *c, const struct session *s)
{
	char buf[SUMMARY_MAX], *p;
	size_t len = 0, i;

	buf[0] = '\0';
	for (i = 0; i < s->ntools; i++) {
		if (len > 0)
			summary_add(buf, &len, " | ");
		summary_tool(c, s->tools[i], buf, &len);
	}
	if (len == 0)
		summary_add(buf, &len, "nothing");
	for (p = buf; (p = strchr(p, ';')) != NULL; p++)
		*p = ',';
	return xstrdup(buf);
}

/* What one tool allows, one line (policy_allowed_summary's part for it). */
char *
policy_tool_summary(const struct config *c, const char *tool)
{
	char buf[SUMMARY_MAX];
	size_t len = 0;

	buf[0] = '\0';
	summary_tool(c, tool, buf, &len);
	return xstrdup(buf);
}

/* Quote argv for a message, bounded. */
static char *
policy_quote(const char *tool, char *const *argv, size_t argc)
{
	char buf[SUMMARY_MAX];	/* summary_add bounds by SUMMARY_MAX; the text stays < 300 */
	size_t len = 0, i;

	buf[0] = '\0';
	summary_add(buf, &len, tool);
	for (i = 0; i < argc && len < 200; i++) {
		summary_add(buf, &len, " ");
		if (strlen(argv[i]) > 60) {
			char tmp[64];

			snprintf(tmp, sizeof tmp, "%.57s...", argv[i]);
			summary_add(buf, &len, tmp);
		} else
			summary_add(buf, &len, argv[i]);
	}
	if (i < argc)
		summary_add(buf, &len, " ...");
	return xstrdup(buf);
}

/*
 * Fill a denial with the structured refusal line the agent reads (PROTOCOL.md,
 * "The structured refusal line"): what, why with the rule, and what to do
 * instead, which holds no "; " (policy_allowed_summary).
 */
static int
policy_deny(const struct config *c, const struct session *s, const struct tool *t,
    char *const *argv, size_t argc, const char *rule, const char *why,
    struct policy_result *res)
{
	char *quoted = policy_quote(t->name, argv, argc);
	char *allowed = policy_allowed_summary(c, s);

	res->allowed = 0;
	res->rule = xstrdup(rule);
	res->reason = xstrdup(why);
	xasprintf(&res->message, "shimbridge: refused: %s: not allowed for this session "
	    "(%s; rule %s); this session may run: %s. See `shimbridge list`, or ask the "
	    "operator to allow it", quoted, why, rule, allowed);
	free(quoted);
	free(allowed);
	return 0;
}

/* Whether a session may act on OWNER/NAME (for profiles). */
static int
policy_repo_allowed(const void *arg, const char *repo)
{
	return config_session_has_repo(arg, repo);
}

/*
 * Run the tool's profile checks, handing it the shim's repository context parsed
 * (an unparsable remote URL counts as none) and the session's repositories.
 */
static int
policy_profile(const struct config *c, const struct session *s, const struct tool *t,
    char *const *argv, size_t argc, struct policy_ctx *ctx, char **rule, char **why)
{
	struct profile_args pa;
	char *host = NULL, *owner = NULL, *name = NULL, *repo = NULL;
	const char *uwhy;
	int rc;

	memset(&pa, 0, sizeof pa);
	pa.host = profile_host(t);
	pa.argv = argv;
	pa.argc = argc;
	pa.repo_allowed = policy_repo_allowed;
	pa.arg = s;
	pa.only_repo = s->nrepos == 1 ? s->repos[0] : NULL;
	if (ctx != NULL) {
		pa.branch = ctx->branch;
		if (ctx->remote_url != NULL &&
		    profile_git_parse_url(ctx->remote_url, &host, &owner, &name, &uwhy) == 0) {
			xasprintf(&repo, "%s/%s", owner, name);
			pa.ctx_host = host;
			pa.ctx_repo = repo;
			pa.ctx_host_served = config_git_host(c, host) != NULL ||
			    (pa.host != NULL && strcasecmp(host, pa.host) == 0);
		}
	}
	rc = t->profile->check(&pa, ctx, rule, why);
	free(host);
	free(owner);
	free(name);
	free(repo);
	return rc;
}

/* Decide a request. */
int
policy_check(const struct config *c, const struct session *s, const struct tool *t,
    char *const *argv, size_t argc, struct policy_ctx *ctx, struct policy_result *res)
{
	char where[128], why[256];
	size_t i, j;

	memset(res, 0, sizeof *res);
	for (i = 0; i < argc; i++) {
		for (j = 0; j < t->ndeny_args; j++) {
			if (!policy_arg_matches(t->deny_args[j], argv[i]))
				continue;
			snprintf(where, sizeof where, "tools.%s.deny_args[%zu]", t->name, j);
			snprintf(why, sizeof why, "the argument %.64s is never allowed",
			    argv[i]);
			return policy_deny(c, s, t, argv, argc, where, why, res);
		}
	}
	if (t->profile != NULL && t->profile->check != NULL) {
		char *rule = NULL, *pwhy = NULL;

		if (policy_profile(c, s, t, argv, argc, ctx, &rule, &pwhy) != 0) {
			policy_deny(c, s, t, argv, argc, rule, pwhy, res);
			free(rule);
			free(pwhy);
			return 0;
		}
	}
	for (i = 0; i < t->nrules; i++) {
		const struct rule *r = &t->rules[i];

		if (!policy_rule_matches(r->argv, r->nargv, argv, argc))
			continue;
		if (r->allow) {
			res->allowed = 1;
			res->rule = xstrdup(r->where);
			res->reason = xstrdup("allowed by rule");
			return 1;
		}
		if (r->ask) {
			res->ask = 1;
			res->ask_timeout = r->timeout;
			res->rule = xstrdup(r->where);
			res->reason = xstrdup(r->reason != NULL ? r->reason :
			    "the rule asks the operator");
			return 0;
		}
		return policy_deny(c, s, t, argv, argc, r->where,
		    r->reason != NULL ? r->reason : "denied by rule", res);
	}
	return policy_deny(c, s, t, argv, argc, "default",
	    "no rule allows it; everything not allowed is refused", res);
}

/* Free the outputs of a context. */
void
policy_ctx_free(struct policy_ctx *ctx)
{
	size_t i;

	free(ctx->repo);
	free(ctx->head);
	ctx->repo = ctx->head = NULL;
	for (i = 0; i < ctx->nextra; i++)
		free(ctx->extra[i]);
	ctx->nextra = 0;
	for (i = 0; i < ctx->nfiles; i++)
		free(ctx->files[i].path);
	ctx->nfiles = 0;
}

/* Free a result's strings. */
void
policy_result_free(struct policy_result *res)
{
	free(res->rule);
	free(res->reason);
	free(res->message);
	memset(res, 0, sizeof *res);
}
