/*
 * Tool profiles: everything the bridge knows about one kind of tool, as one
 * table per tool (profile-gh.c, ...) registered in profile.c. The config names a
 * profile ("profile": "gh"); policy.c runs its argv checks, the run op its
 * environment and file requests. A profile sees only what it is handed here: it
 * calls neither the config nor other tools' modules.
 */
#ifndef SHIMBRIDGE_PROFILE_H
#define SHIMBRIDGE_PROFILE_H

#include <stddef.h>

struct envbuild;
struct policy_ctx;
struct tool;

/* One built-in argv rule (see struct rule): up to four patterns, "**" last = any rest. */
struct profile_rule {
	int		 allow;
	const char	*argv[4];
	const char	*reason;	/* shown to the agent when it denies */
};

/* What a profile's argv check is handed. */
struct profile_args {
	const char	 *host;		/* the tool's host (the profile's default if unset) */
	char *const	 *argv;		/* without the tool name */
	size_t		  argc;
	/* The shim's repository context, parsed by policy.c; all untrusted, NULL if absent. */
	const char	 *ctx_host;	/* host of the directory's origin remote */
	const char	 *ctx_repo;	/* its OWNER/NAME */
	int		  ctx_host_served;	/* ctx_host is the tool's host or a git host */
	const char	 *branch;	/* the directory's current branch */
	const char	 *only_repo;	/* the session's only repository, or NULL */
	/* Whether OWNER/NAME is one the session may act on. */
	int		(*repo_allowed)(const void *arg, const char *repo);
	const void	 *arg;
};

/* A network service a profile served by an op of its own offers (git's two). */
struct profile_service {
	const char	*name;		/* as the request names it: "git-upload-pack" */
	const char	*helper;	/* as the helper's contract names it: "upload-pack" */
	int		 push;		/* it writes upstream (the injector allows a push) */
};

/* Keys a profile accepts in its tool's config entry, besides the common ones. */
#define PROFILE_KEY_HOST	0x1	/* "host" */
#define PROFILE_KEY_CA_FILE	0x2	/* "ca_file" */

struct profile {
	const char		 *name;		/* as written in the config */
	unsigned		  keys;		/* PROFILE_KEY_* */
	const char		 *default_host;
	/*
	 * The tool speaks HTTP to its host and never holds the secret: it gets a
	 * placeholder and a per-call socket served by the bridge's injector.
	 */
	int			  inject;
	/* Rules installed on a tool of this profile that has none. */
	const struct profile_rule *rules;
	size_t			  nrules;
	const char		 *help;		/* "what you may run" line for those rules */
	/*
	 * The only variable a secret may be passed in for this host, or NULL when
	 * any name will do. The config is refused when it names another.
	 */
	const char		*(*secret_var)(const char *host);
	/*
	 * Checks no rule can switch off. Returns 0 when nothing objects (rules decide
	 * next) and fills ctx's outputs (repository, arguments to append, files to
	 * fetch from the sandbox), or -1 with malloc'd *rule and *why.
	 */
	int			(*check)(const struct profile_args *, struct policy_ctx *ctx,
				    char **rule, char **why);
	/* Add the tool's variables to a call's environment (scratch: its private dir). */
	void			(*env)(const char *host, const char *ca_file, const char *scratch,
				    const struct policy_ctx *, struct envbuild *);
	/* A warning about the installed binary (admin-driven --check only), or NULL. */
	char			*(*version_warning)(const char *path);

	/*
	 * A profile served by an op of its own (git: op "git", bridge/op-git.c),
	 * never a "tools" entry: the op name, then what that op reads from here.
	 */
	const char		 *op;
	const struct profile_service *services;	/* the services it may serve */
	size_t			  nservices;
	const char *const	 *fixed_env;	/* name, value, ..., NULL: every call's base */
	const char		 *default_username;	/* HTTP Basic user for the secret */
	int			  raw_stdout;	/* stdout is a protocol stream: not redacted */
};

/* The profile with this name, or NULL. */
const struct profile	*profile_find(const char *name);
/* The profile for tools that name none: argv rules only. */
const struct profile	*profile_generic(void);
/* Names of the profiles a tool may name, for messages: "generic", "gh". */
const char		*profile_names(void);
/* Install a profile's built-in rules (and help) on a tool that has no rules. */
void			 profile_default_rules(struct tool *);
/* The tool's host: its own, else its profile's default (NULL if neither). */
const char		*profile_host(const struct tool *);
/* Add the tool's profile environment to a call's environment. */
void			 profile_env(const struct tool *, const char *scratch,
			    const struct policy_ctx *, struct envbuild *);
/*
 * Rewrite argv (without the tool name) so that each file the profile asked for
 * names its copy: copies[i] is the path of ctx->files[i]'s copy. argv entries are
 * malloc'd and replaced in place.
 */
void			 profile_files_apply(char **argv, size_t argc,
			    const struct policy_ctx *, char *const *copies);

extern const struct profile profile_gh;
extern const struct profile profile_git;

#endif
