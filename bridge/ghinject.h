/*
 * One gh call's credential injector: gh gets a placeholder token and a private
 * config whose http_unix_socket names a socket in the call's scratch directory;
 * the daemon serves that socket with bridge/inject.c, which adds the real token.
 * The real secret never enters gh's environment. See docs/INJECTOR.md.
 */
#ifndef SHIMBRIDGE_GHINJECT_H
#define SHIMBRIDGE_GHINJECT_H

#include <sys/types.h>

#include <stddef.h>

struct envbuild;
struct event_base;

struct ghinject_params {
	struct event_base	*base;
	const char		*scratch;	/* the call's private directory (runner-owned) */
	uid_t			 uid;		/* the runner: owns the socket and gh's config */
	gid_t			 gid;
	const char		*host;		/* the tool's host; NULL: github.com */
	const char		*ca_file;	/* NULL: the system's CA store */
	const char *const	*repos;		/* the session's repositories */
	size_t			 nrepos;
	/* As in struct inject_target. */
	int			(*secret)(void *arg, const unsigned char **val, size_t *len);
	void			(*audit)(void *arg, const char *summary, int status,
				    unsigned long long bytes_up, unsigned long long bytes_down,
				    const char *refusal);
	void			*arg;
};

struct ghinject;

/*
 * Create the socket SCRATCH/gh.sock and SCRATCH/.config/gh/config.yml (owned by
 * the runner), start the injector, and set in env: GH_CONFIG_DIR and a random
 * placeholder in GH_TOKEN (github.com) or GH_ENTERPRISE_TOKEN (any other host).
 * NULL and *cause on failure (nothing is left running).
 */
struct ghinject	*ghinject_start(const struct ghinject_params *, struct envbuild *env,
		    char **cause);
/* Stop the injector (requests in flight are cut and audited); NULL is fine. */
void		 ghinject_free(struct ghinject *);
/* How many upstream answers were HTTP 401 (the host's token was rejected). */
unsigned int	 ghinject_unauthorized(const struct ghinject *);
/* Whether a tool secret's variable is gh's token (the injector's, never the env's). */
int		 ghinject_token_var(const char *var);

#endif
