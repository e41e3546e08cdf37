/* The list of tool profiles and the glue between a tool's config and its profile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "policy.h"
#include "profile.h"
#include "util.h"

/* Tools without a profile: their argv rules are all there is. */
static const struct profile profile_generic_def = {
	.name = "generic",
};

/* Every profile, looked up by the name the config gives. */
static const struct profile *const profiles[] = {
	&profile_generic_def,
	&profile_gh,
	&profile_git,
};

/* The profile with this name, or NULL. */
const struct profile *
profile_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof profiles / sizeof profiles[0]; i++) {
		if (strcmp(profiles[i]->name, name) == 0)
			return profiles[i];
	}
	return NULL;
}

/* The profile of tools that name none. */
const struct profile *
profile_generic(void)
{
	return &profile_generic_def;
}

/* "generic", "gh": the names a tool may use (not those served by an op). */
const char *
profile_names(void)
{
	static char buf[256];
	size_t i, len = 0;

	if (buf[0] != '\0')
		return buf;
	for (i = 0; i < sizeof profiles / sizeof profiles[0]; i++) {
		if (profiles[i]->op != NULL)
			continue;
		len += (size_t)snprintf(buf + len, sizeof buf - len, "%s\"%s\"",
		    len == 0 ? "" : ", ", profiles[i]->name);
		if (len >= sizeof buf)
			break;
	}
	return buf;
}

/* Give a tool without rules its profile's built-in set. */
void
profile_default_rules(struct tool *t)
{
	const struct profile *p = t->profile;
	size_t i, k;

	if (p == NULL || p->nrules == 0 || t->nrules > 0)
		return;
	t->rules = xcalloc(p->nrules, sizeof *t->rules);
	t->nrules = p->nrules;
	if (t->help == NULL && p->help != NULL)
		t->help = xstrdup(p->help);
	for (i = 0; i < p->nrules; i++) {
		const struct profile_rule *pr = &p->rules[i];
		struct rule *r = &t->rules[i];

		r->allow = pr->allow;
		for (k = 0; k < 4 && pr->argv[k] != NULL; k++)
			;
		r->nargv = k;
		r->argv = xcalloc(k + 1, sizeof *r->argv);
		for (k = 0; k < r->nargv; k++)
			r->argv[k] = xstrdup(pr->argv[k]);
		r->reason = pr->reason != NULL ? xstrdup(pr->reason) : NULL;
		xasprintf(&r->where, "profile %s default rule %zu (%s%s%s)", p->name, i,
		    pr->argv[0], r->nargv > 1 ? " " : "", r->nargv > 1 ? pr->argv[1] : "");
	}
}

/* The tool's host, else its profile's default. */
const char *
profile_host(const struct tool *t)
{
	if (t->host != NULL)
		return t->host;
	return t->profile != NULL ? t->profile->default_host : NULL;
}

/* Add the profile's variables to a call's environment. */
void
profile_env(const struct tool *t, const char *scratch, const struct policy_ctx *ctx,
    struct envbuild *e)
{
	if (t->profile != NULL && t->profile->env != NULL)
		t->profile->env(profile_host(t), t->ca_file, scratch, ctx, e);
}

/* Point each fetched file argument at its copy. */
void
profile_files_apply(char **argv, size_t argc, const struct policy_ctx *ctx,
    char *const *copies)
{
	size_t i;

	for (i = 0; i < ctx->nfiles; i++) {
		const struct policy_file *f = &ctx->files[i];
		char *a;

		if (f->argi >= argc || f->off > strlen(argv[f->argi]))
			fatalx("profile_files_apply: file %zu outside argv", i);
		xasprintf(&a, "%.*s%s", (int)f->off, argv[f->argi], copies[i]);
		free(argv[f->argi]);
		argv[f->argi] = a;
	}
}
