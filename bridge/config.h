/*
 * Configuration: a main JSON file plus sessions.d/NAME.json drop-ins, validated as a
 * whole. A loaded config is immutable and reference-counted: a reload builds a new
 * one and in-flight requests keep the one they started with.
 */
#ifndef SHIMBRIDGE_CONFIG_H
#define SHIMBRIDGE_CONFIG_H

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

struct profile;
struct secret_src;

enum cwd_mode {
	CWD_SCRATCH,		/* fresh private empty directory per run */
	CWD_WORKSPACE,		/* the shim's cwd, only inside the session workspace */
};

enum tool_network {
	TOOL_NET_HOST,		/* the host's network (the jail shares it) */
	TOOL_NET_NONE,		/* a new network namespace: loopback only, down */
};

struct rule {
	int		  allow;	/* 1 allow, 0 deny or ask */
	int		  ask;		/* 1: allowed once the operator approves ("ask") */
	int		  timeout;	/* ask: seconds to wait for a decision; 0: approval.timeout */
	char		**argv;		/* fnmatch patterns; "**" (last only) = any rest */
	size_t		  nargv;
	char		 *reason;	/* shown to the agent when this rule denies */
	char		 *where;	/* "tools.gh.rules[3]" for audit lines */
};

struct envvar {
	char		*name;
	char		*value;
};

struct secret_ref {
	char		*var;		/* environment variable the child gets */
	char		*secret;	/* secret name */
};

struct tool {
	char		 *name;
	char		 *path;		/* absolute */
	const struct profile *profile;	/* profile.h; never NULL once loaded */
	enum cwd_mode	  cwd;
	struct rule	 *rules;
	size_t		  nrules;
	char		**deny_args;	/* refused anywhere in argv (fnmatch) */
	size_t		  ndeny_args;
	struct envvar	 *env;
	size_t		  nenv;
	struct secret_ref *secrets;
	size_t		  nsecrets;
	int		  timeout;	/* seconds, wall clock */
	uint64_t	  output_limit;	/* bytes of stdout+stderr */
	char		 *help;		/* one line for "what you may run" */
	char		 *host;		/* gh profile: the GitHub host gh talks to (NULL: github.com) */
	/*
	 * CA bundle (PEM) to verify the host's TLS certificate with, instead of the
	 * system CAs (GitHub Enterprise Server with a private CA, tests). Used by the
	 * tool itself (gh: SSL_CERT_FILE) and by the bridge's HTTP injector. NULL: system CAs.
	 */
	char		 *ca_file;
	enum tool_network network;	/* what the jailed child can reach */
	char		**expose;	/* host paths the jailed child may read */
	size_t		  nexpose;
};

#define TOOL_EXPOSE_MAX	8

/*
 * "approval": how "ask" rules are decided (docs/CONFIG.md). Without a command only
 * the operator decides (shimbridge approve/deny).
 */
struct approval {
	int		  timeout;	/* seconds a call waits by default; no answer = deny */
	char		**command;	/* approver argv (absolute path first), or NULL */
	char		 *user;		/* the dedicated user it runs as */
	uid_t		  uid;
	gid_t		  gid;
	int		  command_timeout;	/* seconds; past it = deny */
};

struct git_host {
	char		*name;		/* host as the sandbox writes it: github.com */
	char		*upstream;	/* base URL the bridge talks to */
	char		*secret;
	char		*username;
	char		*ca_file;	/* CA bundle for upstream TLS (git and the injector); NULL: system CAs */
};

struct session {
	char		 *name;
	char		 *user;		/* may be NULL when given by uid */
	uid_t		  uid;
	char		 *workspace;	/* realpath, or NULL */
	char		**tools;
	size_t		  ntools;
	char		**repos;	/* owner/name allowlist for gh and git */
	size_t		  nrepos;
	struct secret_src *secrets;	/* per-session overrides of host secrets */
	size_t		  nsecrets;
	int		  max_concurrent;
	char		 *file;
	/*
	 * The user its host-side children run as: "runner" in the drop-in, else
	 * the global runner (shared, warned about by --check). Never root, the
	 * overflow uid, a session user or another session's own runner.
	 */
	char		 *runner;
	uid_t		  runner_uid;
	gid_t		  runner_gid;
	int		  runner_own;	/* set in the session, not the fallback */
};

struct config {
	int		  refs;
	char		 *path;
	char		 *sessions_dir;
	char		 *version;	/* short hash of everything loaded */
	char		 *socket_path;
	char		 *socket_group;
	gid_t		  socket_gid;
	int		  socket_mode;
	char		 *audit_path;
	int		  audit_syslog;	/* "audit": {"syslog": true} */
	char		 *audit_sign_key;	/* audit.sign_key: checkpoint signing key file, or NULL */
	char		 *audit_sign_key_credential; /* audit.sign_key_credential, or NULL */
	int		  audit_checkpoint_interval; /* seconds between checkpoints; 0: only at open/stop */
	char		 *state_dir;
	char		 *runner;
	uid_t		  runner_uid;
	gid_t		  runner_gid;
	int		  max_connections;
	int		  max_per_session;
	int		  handshake_timeout;
	int		  kill_grace;
	int		  jail_pool;	/* pre-built jails per session and tool (zygote.h) */
	int		  scratch_tmpfs; /* MiB of tmpfs for state_dir/run; 0: on disk */
	struct tool	 *tools;
	size_t		  ntools;
	struct secret_src *secrets;
	size_t		  nsecrets;
	struct session	 *sessions;
	size_t		  nsessions;
	char		 *git_path;	/* host git binary */
	char		 *git_helper;	/* shimbridge-git */
	struct git_host	 *git_hosts;
	size_t		  ngit_hosts;
	char		**protected_branches;	/* git.ff_only_branches (alias protected_branches) */
	size_t		  nprotected_branches;
	char		**no_push_branches;	/* git.no_push_branches; "HEAD" = the default branch */
	size_t		  nno_push_branches;
	char		**protected_tags;	/* git.protected_tags: names or fnmatch patterns */
	size_t		  nprotected_tags;
	char		**deny_paths;
	size_t		  ndeny_paths;
	char		**ask_branches;	/* git.ask_branches: a push to one waits for approval */
	size_t		  nask_branches;
	int		  git_ask_timeout;	/* git.ask_timeout; 0: approval.timeout */
	struct approval	  approval;
	int		  git_timeout;
	char		 *store_path;	/* encrypted secret store */
	char		 *store_key;	/* its key file, or NULL with store_key_credential */
	char		 *store_key_credential;	/* systemd credential holding the key */
	char		**warnings;	/* non-fatal findings for --check */
	size_t		  nwarnings;
};

/*
 * Load and validate a config (main file + drop-ins). The result is read-only:
 * secret values live in a keyring (keyring.h), never in the config. Unless
 * no_secrets is set, every secret is loaded once as a trial and wiped again,
 * its failures added to warnings (--check, shimbridge check); the daemon loads
 * with no_secrets and fills its own keyring. On error returns NULL and *cause
 * names the file and the location.
 */
struct config	*config_load(const char *path, int no_secrets, char **cause);
struct config	*config_ref(struct config *);
void		 config_unref(struct config *);

const struct session	*config_session_by_uid(const struct config *, uid_t);
const struct session	*config_session_by_name(const struct config *, const char *);
const struct tool	*config_tool(const struct config *, const char *);
/* Whether a session may use a tool. */
int			 config_session_has_tool(const struct session *, const char *);
/* Whether an owner/name is allowlisted for a session (case-insensitive, like GitHub). */
int			 config_session_has_repo(const struct session *, const char *);
const struct git_host	*config_git_host(const struct config *, const char *);
/* Every distinct runner uid (global first); returns how many, at most max. */
size_t			 config_runner_uids(const struct config *, uid_t *uids, size_t max);

#endif
