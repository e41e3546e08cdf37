/*
 * Secret sources and loaded values. Values live only in libsodium guarded memory
 * and are wiped on release; a source that fails to load keeps an error message
 * (naming the secret, never the value) and requests needing it are refused.
 */
#ifndef SHIMBRIDGE_SECRET_H
#define SHIMBRIDGE_SECRET_H

#include <stddef.h>
#include <time.h>

#include <jansson.h>

enum secret_type {
	SECRET_FILE,		/* root-owned file, mode 0600 or stricter */
	SECRET_ENV,		/* the daemon's own environment */
	SECRET_SYSTEMD,		/* $CREDENTIALS_DIRECTORY/<name> */
	SECRET_COMMAND,		/* admin program run as the runner; cached for ttl */
	SECRET_STORE,		/* entry of the encrypted store */
	SECRET_GITHUB_APP,	/* GitHub App installation token, minted per session (ghapp.h) */
};

/* A github_app source's settings (docs/GITHUB-APP.md). */
struct secret_app {
	char		*app_id;	/* the JWT's "iss" */
	long long	 installation_id;	/* 0: look it up by owner */
	char		*owner;		/* or NULL */
	char		*private_key;	/* the NAME of the secret holding the PEM RSA key */
	json_t		*permissions;	/* object name -> "read"/"write"; NULL: the app's */
	char		*host;		/* github.com or a GHE host[:port] */
	char		*ca_file;	/* NULL: the system CAs */
	int		 refresh_before;	/* seconds */
};

/* A source as configured: part of the config, never changed after load. */
struct secret_src {
	char		 *name;
	enum secret_type  type;
	char		 *arg;		/* path, variable, credential or store entry */
	char		**argv;		/* command and its arguments (SECRET_COMMAND) */
	size_t		  nargv;
	int		  ttl;		/* seconds (SECRET_COMMAND) */
	int		  timeout;	/* seconds (SECRET_COMMAND) */
	struct secret_app app;		/* SECRET_GITHUB_APP */
};

struct ghapp_state;

#define SECRET_PREV_MAX	8	/* replaced values kept for redaction, per value */

/* A loaded value and its renewal state: runtime state, owned by a keyring. */
struct secret_val {
	unsigned char	 *value;	/* sodium_malloc'd, read-only, or NULL */
	size_t		  len;
	char		 *error;	/* why value is NULL (or why the last renewal failed) */
	time_t		  loaded_at;
	time_t		  retry_at;	/* after a failed command: no new run before this */
	int		  refreshing;	/* a background run is under way */
	/*
	 * Values renewals and reloads replaced, newest first, still redacted: a
	 * replaced token may be valid upstream for a while yet, and requests that
	 * got it may still be running. The oldest goes when a ninth comes.
	 */
	unsigned char	 *prev[SECRET_PREV_MAX];
	size_t		  prev_len[SECRET_PREV_MAX];
	size_t		  nprev;
	time_t		  expires_at;	/* SECRET_GITHUB_APP: the token's expiry, else 0 */
	struct ghapp_state *app;	/* SECRET_GITHUB_APP: mint state (ghapp.h), or NULL */
};

struct child;
struct config;
struct session;
struct store;

/* Parse a source object {"source": ..., ...}; where is the config location for errors. */
int	secret_parse(json_t *, const char *name, const char *where, struct secret_src *,
	    char **cause);
/*
 * Load (or reload) the value of a source into v; failures are kept in v->error.
 * store is the open secret store or NULL (then store_error says why); cfg gives
 * the runner for command sources.
 */
void	secret_load(const struct secret_src *, struct secret_val *, const struct config *,
	    const struct store *, const char *store_error);
/*
 * Whether a command source should be run again in the background: a fifth of its
 * ttl (at least 1 s) before it expires, so requests find a fresh value and never
 * wait for a command; or failed and past its back-off of min(ttl, 30 s). Never while
 * a run is under way.
 */
int	secret_due(const struct secret_src *, const struct secret_val *);
/*
 * Whether the value may be used now: loaded and, for command sources, within its
 * ttl; for github_app tokens, before their expiry.
 */
int	secret_usable(const struct secret_src *, const struct secret_val *);
/* Whether an unusable value is being fetched right now (a github_app mint): ask again. */
int	secret_pending(const struct secret_src *, const struct secret_val *);
/* Start a command source's program as the runner (stdin closed); see secret_command_done. */
int	secret_command_spawn(const struct secret_src *, const struct config *, struct child *,
	    char **cause);
/* Take a finished run's output (status 0) as the value, or record why it failed (why). */
void	secret_command_done(const struct secret_src *, struct secret_val *,
	    const unsigned char *buf, size_t len, int status, const char *why);
/* Release a definition. */
void	secret_clear(struct secret_src *);
/* Wipe and release a value and its state. */
void	secret_val_clear(struct secret_val *);
/*
 * Keep a replaced value (sodium_malloc'd; transferred) at the head of v's
 * replaced values, dropping the oldest beyond SECRET_PREV_MAX.
 */
void	secret_val_push_prev(struct secret_val *v, unsigned char *value, size_t len);
/* The definition that applies to a session: its override, else the host's. NULL if none. */
const struct secret_src *secret_resolve(const struct config *, const struct session *,
	    const char *name);
/* Name of a type, for status and errors. */
const char *secret_type_name(enum secret_type);

#endif
