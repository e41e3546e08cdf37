/*
 * shimbridge: the administrator's command line. One file per command family
 * (secrets.c, sessions.c, ctl.c, check.c, auditview.c, mirrors.c), helpers for
 * users and privilege dropping (users.c), a terminal relay (ptyrun.c) and small
 * file-system and output helpers (adm.c).
 */
#ifndef SHIMBRIDGE_ADMIN_H
#define SHIMBRIDGE_ADMIN_H

#include <sys/types.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include <jansson.h>

/* Exit codes, documented in --help. */
#define ADM_OK		0	/* success */
#define ADM_FAIL	1	/* the operation failed (system error, daemon refused, ...) */
#define ADM_INVALID	2	/* not found or invalid (unknown name, invalid config, check found problems) */
#define ADM_USAGE	64	/* bad command line */

#define ADM_CONFIG	"/etc/shimbridge/config.json"
#define ADM_STORE	"/etc/shimbridge/secrets.store"
#define ADM_KEY		"/etc/shimbridge/store.key"
#define ADM_SHIM_DIR	"/usr/local/libexec/shimbridge/shims"
#define ADM_SOCKET	"/run/shimbridge/bridge.sock"	/* the daemon's default */
#define ADM_AUDIT	"/var/log/shimbridge/audit.log"
#define ADM_STATE	"/var/lib/shimbridge"
#define ADM_AUDIT_GROUP	"shimbridge-audit"	/* may read the audit log (installer makes it) */

/*
 * Global options: accepted before the command word and after it (every command's
 * option table starts with ADM_GLOBAL_LONGOPTS and hands what it does not know
 * to adm_global_opt).
 */
#define ADM_OPT_STORE		0x100
#define ADM_OPT_KEY		0x101
#define ADM_OPT_SHIM_DIR	0x102
#define ADM_OPT_NO_RELOAD	0x103
#define ADM_GLOBAL_LONGOPTS \
	{ "config", required_argument, NULL, 'c' }, \
	{ "store", required_argument, NULL, ADM_OPT_STORE }, \
	{ "key", required_argument, NULL, ADM_OPT_KEY }, \
	{ "shim-dir", required_argument, NULL, ADM_OPT_SHIM_DIR }, \
	{ "no-reload", no_argument, NULL, ADM_OPT_NO_RELOAD }

/* Global options, shared by every command. */
struct admin {
	const char	*config;	/* -c: main config file */
	const char	*store;		/* --store, else the config's store.path, else ADM_STORE */
	const char	*key;		/* --key, else the config's store.key, else ADM_KEY */
	const char	*shim_dir;	/* --shim-dir */
	int		 no_reload;	/* --no-reload: changes do not reload the daemon */
	char		*owned[2];	/* copies adm_store_paths made; freed by adm_free */
};

/* Paths read from a config file without validating it (so they work on a broken one). */
struct adm_paths {
	char	*socket;
	char	*audit;
	char	*state;
	char	*sessions_dir;
	char	*group;		/* socket group, or NULL */
	char	*store;		/* store.path */
	char	*key;		/* store.key, NULL when the key is a systemd credential */
};

/* adm.c: options, output and file-system helpers. */
/* Handle a global option seen inside a command; 1 if it was one. */
int	 adm_global_opt(struct admin *, int ch, const char *arg);
/* Reset getopt so a command can parse its own arguments from argv[0] = command word. */
void	 adm_getopt_reset(void);
/*
 * Read main-config paths leniently: defaults for what is missing, and for a file
 * that cannot be read or parsed what its text still names. Always fills p;
 * returns 0, or 1 and *cause ("FILE:LINE:COLUMN: what") when the file is broken.
 */
int	 adm_paths_load(const char *config, struct adm_paths *, char **cause);
void	 adm_paths_free(struct adm_paths *);
/* Warn that the config is broken (cause from adm_paths_load) and a command goes on. */
void	 adm_paths_warn(const char *cause);
/* Print s with control characters and invalid bytes shown as \xNN (audit data is hostile). */
void	 adm_puts_safe(FILE *, const char *s);
/* The same into a new string. */
char	*adm_safe(const char *s);
/* Join argv as a shell-like quoted line, with adm_safe escaping. */
char	*adm_argv_join(json_t *argv);
/* Fill in a->store and a->key from the config where no option gave them. */
void	 adm_store_paths(struct admin *);
/* Free what the admin context owns. */
void	 adm_free(struct admin *);
/* Human-readable size: 1.2M. */
void	 adm_human_size(unsigned long long bytes, char *buf, size_t len);
/* Replace dir/name atomically with data (O_EXCL temp, fsync, rename, fsync dir). */
int	 adm_write_atomic(const char *dir, const char *name, const char *data, size_t len,
	    mode_t mode, char **cause);
/* Create dir (one level) as a root-owned directory with mode unless it exists. */
int	 adm_mkdir_root(const char *path, mode_t mode, char **cause);
/*
 * Run argv (absolute path) with a clean environment and wait: its exit status
 * (128+N for signal N), 127 when it could not start (said on stderr), or -1.
 */
int	 adm_run(char *const argv[], int quiet);
/* Whether a name is a valid config name: 1-64 of [A-Za-z0-9_.-], not starting with . or -. */
int	 adm_valid_name(const char *);
/* Whether s is OWNER/NAME with GitHub's characters. */
int	 adm_valid_repo(const char *);
/* Default shim directory: next to this binary's prefix when installed, else ADM_SHIM_DIR. */
const char *adm_default_shim_dir(void);

/* ctl.c: talking to the running daemon. */
/*
 * Send one request (a JSON object) to the daemon as root and collect its stdout
 * (*text, malloc'd) and exit code within timeout seconds of silence. 0, or -1 and
 * *cause (daemon down, impostor socket, ERROR frame).
 */
int	 ctl_call(const char *socket, const char *request, int timeout, char **text,
	    int *code, char **cause);
/* Ask the daemon for its status (root only). 0 and *out, or -1 and *cause. */
int	 ctl_status(const char *socket, json_t **out, char **cause);
/* SIGHUP the daemon and wait for its verdict; prints what happened. ADM_* code. */
int	 ctl_reload(const struct admin *, int quiet_if_down);
/*
 * The GitHub App tokens in a status: an array of {"name", "source": "github_app",
 * "session", "fingerprint", "repositories", "permissions", "expires_at",
 * "last_refresh", "last_result", "minting"} (never a token); and one line each.
 */
json_t	*ctl_app_tokens(json_t *status);
void	 ctl_print_app_tokens(json_t *status, const char *indent);
int	 ctl_cmd_status(struct admin *, int argc, char **argv);
int	 ctl_cmd_reload(struct admin *, int argc, char **argv);

/* approval.c: pending, approve, deny, explain (-1: not one of them). */
int	 approval_cmd(struct admin *, int argc, char **argv);
/* secrets.c */
int	 secrets_cmd(struct admin *, int argc, char **argv);
/* sessions.c */
int	 sessions_cmd(struct admin *, int argc, char **argv);
/* check.c */
int	 check_cmd(struct admin *, int argc, char **argv);
/* auditview.c */
int	 auditview_cmd(struct admin *, int argc, char **argv);
/* auditverify.c: audit verify|pubkey|keygen; -1 when argv[1] is none of them. */
int	 auditverify_cmd(struct admin *, int argc, char **argv);
/* mirrors.c */
int	 mirrors_cmd(struct admin *, int argc, char **argv);
/* Remove all mirrors of a session (those in use are kept and named). 0, or -1. */
int	 mirrors_remove_session(const char *state_dir, const char *session);

/* users.c: accounts and identity switching. */
struct users_id {
	char	*name;
	uid_t	 uid;
	gid_t	 gid;
	char	*home;
	char	*shell;
};
/* Look a user up by name; 0 and *id (users_id_free), -1 if there is no such user. */
int	 users_lookup(const char *name, struct users_id *id);
void	 users_id_free(struct users_id *);
/* Become id for good: supplementary groups, gid, uid, all verified. 0 or -1 and *cause. */
int	 users_become(const struct users_id *, char **cause);
/* Close every fd from lowfd up. */
void	 users_closefrom(int lowfd);
/* SIGKILL every process of uid until none is left; returns how many remain (0 = done). */
int	 users_kill_all(uid_t uid);
/* Run fn(arg) in a child that has become id; its return value is the child's exit status. */
int	 users_run_as(const struct users_id *, int (*fn)(void *), void *arg);
/*
 * Run file (searched in envp's PATH unless it holds a '/') with argv as id in dir: through a pseudo-terminal when stdin is a
 * terminal (the caller's terminal is never handed over), else directly in a new
 * session. Returns the command's wait status as an exit code (128 + signal).
 */
int	 users_exec(const struct users_id *, const char *dir, const char *file,
	    char *const argv[], char *const envp[]);

/* appcheck.c: shimbridge check of GitHub App sources (libcurl). */
struct config;
struct keyring;
typedef void (*appcheck_say_fn)(const char *level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/*
 * For every github_app source: sign the JWT, mint a throw-away token for the first
 * session using it and revoke it; one finding each through say ("ok", "warning",
 * "FAIL"). kr holds the loaded private keys.
 */
void	 appcheck_run(const struct config *, struct keyring *, appcheck_say_fn say);

/* probe.c: one authenticated GET for shimbridge check (libcurl). */
struct probe_result {
	int	 status;	/* HTTP status; 0 when there was no answer */
	char	*scopes;	/* X-OAuth-Scopes header, or NULL */
	char	*expires;	/* GitHub-Authentication-Token-Expiration header, or NULL */
	char	*error;		/* why there was no answer, or NULL */
	char	*body;		/* the first 4 KiB of the body (NUL-terminated), or NULL */
};
/*
 * GET url sending the header authorization ("Authorization: ..."), verifying TLS
 * against ca_file (NULL: the system CAs), within timeout seconds. 0 with
 * r->status, or -1 with r->error. Free r with probe_result_free either way.
 */
int	 probe_get(const char *url, const char *authorization, const char *ca_file,
	    long timeout, struct probe_result *r);
void	 probe_result_free(struct probe_result *);

/* probehdr.c: reading an upstream's answer (no libcurl; fuzzed by fuzz_probehdr). */
/* Keep a response header line's value if it is X-OAuth-Scopes or the token expiry. */
void	 probehdr_line(struct probe_result *, const char *buf, size_t len);
/* Keep the first 4 KiB of the body, NUL-terminated (cut at an embedded NUL). */
void	 probehdr_body(struct probe_result *, const char *buf, size_t len);
/* Seconds from now until an expiry date ("2026-01-31 12:00:00 UTC"), 0 if past, -1 unknown. */
long long probehdr_expiry(const char *v, time_t now);

/* ptyrun.c: the terminal relay used by users_exec. */
int	 ptyrun(const struct users_id *, const char *dir, const char *file,
	    char *const argv[], char *const envp[]);

#endif
