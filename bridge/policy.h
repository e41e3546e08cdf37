/*
 * Policy decisions for one request. Match order for a tool (docs/CONFIG.md):
 *   1. the session must list the tool;
 *   2. any argument matching the tool's deny_args is refused;
 *   3. the tool's profile checks (profile.h; gh: hosts, repositories, --jq/--template,
 *      file arguments);
 *   4. the tool's rules in order, first match wins (allow, deny or ask);
 *   5. nothing matched: refused (deny by default).
 */
#ifndef SHIMBRIDGE_POLICY_H
#define SHIMBRIDGE_POLICY_H

#include <stddef.h>

#include "proto.h"

#define POLICY_FILES_MAX	PROTO_FILES_MAX	/* file arguments per request */

struct config;
struct session;
struct tool;

/*
 * A file argument a profile wants from the sandbox (gh --body-file PR.md): the
 * bridge asks the shim for it (FRAME_FILE_REQ), stores the bytes in the call's
 * scratch directory and rewrites argv[argi] from byte off on to the copy's path.
 */
struct policy_file {
	size_t		 argi;		/* index in argv (without the tool name) */
	size_t		 off;		/* where the path starts in argv[argi] */
	char		*path;		/* the path as the agent wrote it (malloc'd) */
	const char	*flag;		/* the flag that reads it, for messages */
};

/* Request context for profiles (gh); inputs come from the shim and are untrusted. */
struct policy_ctx {
	const char	*remote_url;	/* in: origin URL of the shim's repository */
	const char	*branch;	/* in: its current branch */
	char		*repo;		/* out: owner/name the run acts on, or NULL */
	char		*head;		/* out: branch to add as --head (gh pr create), or NULL */
	char		*extra[4];	/* out: arguments to append (-R repo, --head branch) */
	size_t		 nextra;
	struct policy_file files[POLICY_FILES_MAX];	/* out: files to fetch from the sandbox */
	size_t		 nfiles;
};

/*
 * The verdict: allowed (run now), ask (run once approved: bridge/approve.h; the
 * rule's timeout in ask_timeout, 0 for the config's default) or neither (denied,
 * message set). A caller that does not handle ask refuses it like a denial.
 */
struct policy_result {
	int	 allowed;
	int	 ask;
	int	 ask_timeout;
	char	*rule;		/* location of the deciding rule ("default" if none) */
	char	*reason;	/* short why, for the audit log */
	char	*message;	/* paragraph for the agent when denied */
};

/* Decide on argv (without the tool name). Always fills res; returns res->allowed. */
int	policy_check(const struct config *, const struct session *, const struct tool *,
	    char *const *argv, size_t argc, struct policy_ctx *ctx, struct policy_result *res);
void	policy_ctx_free(struct policy_ctx *);
/* Whether a rule's patterns match argv exactly ("**" last matches any rest). */
int	policy_rule_matches(char *const *pat, size_t npat, char *const *argv, size_t argc);
/*
 * What the session may run, one short line, its tools joined by " | " and no
 * ';' in it, so it can end a structured refusal line ("gh pr list ... | git ...").
 */
char	*policy_allowed_summary(const struct config *, const struct session *);
/* What one tool of the session allows, one line (git: the remote helper's leg). */
char	*policy_tool_summary(const struct config *, const char *tool);
void	policy_result_free(struct policy_result *);

#endif
