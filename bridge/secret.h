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
};

struct secret_src {
	char		 *name;
	enum secret_type  type;
	char		 *arg;		/* path, variable, credential or store entry */
	char		**argv;		/* command and its arguments (SECRET_COMMAND) */
	size_t		  nargv;
	int		  ttl;		/* seconds (SECRET_COMMAND) */
	int		  timeout;	/* seconds (SECRET_COMMAND) */
	unsigned char	 *value;	/* sodium_malloc'd, or NULL */
	size_t		  len;
	char		 *error;	/* why value is NULL */
	time_t		  loaded_at;
	time_t		  retry_at;	/* after a failed command: no new run before this */
};

struct config;

/* Parse a source object {"source": ..., ...}; where is the config location for errors. */
int	secret_parse(json_t *, const char *name, const char *where, struct secret_src *,
	    char **cause);
/* Load (or reload) the value of a source; failures are kept in src->error. */
void	secret_load(struct secret_src *, const struct config *);
/*
 * Whether a command source should run again: its value is past its ttl, or it
 * failed and its back-off (min(ttl, 30 s)) has passed. A command runs while the
 * bridge waits, so the back-off bounds how often a failing one can stall it.
 */
int	secret_stale(const struct secret_src *);
/* Release the value and everything else. */
void	secret_clear(struct secret_src *);
/* The source that applies to a session: its override, else the host's. NULL if none. */
struct secret_src *secret_resolve(const struct config *, const void *session, const char *name);
/* Name of a type, for status and errors. */
const char *secret_type_name(enum secret_type);

#endif
