/*
 * The git profile (bridge/profile-git.c; the table is profile_git in profile.h).
 * The git network leg: validate a remote helper's "connect" (service, URL) against
 * the session's repositories and the configured hosts, then describe the host-side
 * shimbridge-git run (mirror, upstream, credential) that serves it.
 */
#ifndef SHIMBRIDGE_PROFILE_GIT_H
#define SHIMBRIDGE_PROFILE_GIT_H

#include <stddef.h>

#include <jansson.h>

#include "gitcontract.h"

struct config;
struct session;
struct envbuild;
struct key;
struct profile_service;

struct profile_git_req {
	const struct profile_service *svc;	/* the profile's entry for the service */
	char			 *service;	/* upload-pack or receive-pack */
	char			 *host;		/* as configured, e.g. github.com */
	char			 *owner;
	char			 *name;		/* without .git */
	char			 *upstream;	/* full upstream URL of the repository */
	char			 *mirror;	/* absolute mirror path */
	char			 *protocol;	/* GIT_PROTOCOL from the client, validated */
	int			  progress;	/* the sandbox's git asked for progress */
	char			**argv;		/* helper argv, NULL-terminated */
	struct envbuild		 *env;
	json_t			 *audit_argv;
	char			 *rule;
	const char		 *code;		/* error code when refused */
	const char		 *secret_name;	/* the host's secret (in the config) */
	const struct key	 *secret;	/* its value: set by the caller before profile_git_env */
	const struct config	 *cfg;
	const struct session	 *session;
};

/* Parse a git URL into host, owner, name. Returns 0 or -1 with a static *why. */
int	profile_git_parse_url(const char *url, char **host, char **owner, char **name,
	    const char **why);
/*
 * Validate a "git" request. On refusal returns -1 with *msg (for the agent; NULL
 * for a malformed request) and *cause (for the audit log).
 */
int	profile_git_prepare(const struct config *, const struct session *, json_t *req,
	    struct profile_git_req *, char **msg, char **cause);
/*
 * Create the mirror's parent directories and build the helper's environment.
 * via NULL: the upstream is the configured host and shimbridge-git gets the token
 * (SHIMBRIDGE_USERNAME/TOKEN). via "http://127.0.0.1:PORT": the daemon's loopback
 * injector, which adds the credential; the helper then gets none at all.
 */
int	profile_git_env(struct profile_git_req *, const char *scratch, const char *via, char **cause);
void	profile_git_clear(struct profile_git_req *);
/*
 * Parse the text after "T " of a refusal-pipe record (common/gitcontract.h): one
 * of the GITC_PHASE_* names (*name points to it), a space, 1-19 decimal digits
 * (*ns). 0, or -1 for anything else.
 */
int	profile_git_phase(const char *rec, size_t len, const char **name,
	    unsigned long long *ns);
/*
 * From upstream's protocol v0 ref advertisement (info/refs?service=git-upload-pack,
 * pkt-lines), the SHIMBRIDGE_UPSTREAM_REFS message (common/gitcontract.h): "refs\n",
 * "<oid> <ref>\n" for each head and tag (peeled "^{}" entries left out), "end\n".
 * 0 and a malloc'd *out of at most GITC_REFS_MAX bytes, or -1 when the body is
 * not exactly such an advertisement or the list would be longer.
 */
int	profile_git_refs(const unsigned char *adv, size_t len, char **out, size_t *outlen);
/*
 * Upstream's default branch (without refs/heads/) from the start of the same
 * advertisement: its first ref's "symref=HEAD:refs/heads/NAME" capability. An
 * allocated string, or NULL when the text does not say.
 */
char	*profile_git_head(const unsigned char *adv, size_t len);

/* One ref update of an "A" record (common/gitcontract.h): a push that asks. */
struct profile_git_update {
	const char	*kind;			/* one of the GITC_ASK_* words */
	char		 old[65];		/* hex; all zeros: none */
	char		 new[65];
	char		 branch[GITC_ASK_LINE_MAX + 1];	/* without refs/heads/ */
};
/* Whether a branch (without refs/heads/) matches one of git.ask_branches. */
int	profile_git_asks(const struct config *, const char *branch);
/*
 * Parse the text after "A " of a refusal-channel record: "<kind> <old> <new>
 * refs/heads/<branch>", the kind agreeing with the object names, the branch
 * printable ASCII. 0, or -1 (and u zeroed) for anything else.
 */
int	profile_git_ask_parse(const char *rec, size_t len, struct profile_git_update *u);
/*
 * The one-line command shown to the operator and the agent, "git push
 * https://HOST/REPO BRANCH +FORCED :DELETED" (REPO: OWNER/NAME), and the --for key (identical
 * pushes: the same repository and the same list); both malloc'd.
 */
void	profile_git_ask_command(const char *host, const char *repo,
	    const struct profile_git_update *, size_t n, char **command, char **key);

#endif
