/*
 * The gh profile: checks that no rule can switch off (hosts, -R, gh api shape,
 * --web/--editor), repository context from the shim, the built-in default rules,
 * and the per-call hardened environment gh runs with.
 */
#ifndef SHIMBRIDGE_GH_H
#define SHIMBRIDGE_GH_H

#include <stddef.h>

struct config;
struct session;
struct tool;
struct envbuild;
struct policy_ctx;

/*
 * Profile checks for argv. Returns 0 when nothing objects (rules decide next),
 * or -1 with *rule and *why (malloc'd) describing the refusal. Fills ctx->repo
 * and ctx->head from argv and the shim's context.
 */
int	gh_policy(const struct config *, const struct session *, const struct tool *,
	    char *const *argv, size_t argc, struct policy_ctx *ctx, char **rule, char **why);
/* Add gh's environment: host, private config dirs, no prompts/pagers/editors/browsers. */
void	gh_env(const struct tool *, const char *scratch, const struct policy_ctx *,
	    struct envbuild *);
/* Install the built-in rule set on a gh tool that has none. */
void	gh_default_rules(struct tool *);
/* A warning when the installed gh predates the token-leak fixes (2.63.1), else NULL. */
char	*gh_version_warning(const char *path);

#endif
