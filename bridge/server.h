/*
 * The daemon's event loop: listeners, signals, the SIGCHLD reaper, the sweep,
 * reload. struct server is shared with conn.c and the op handlers (counters,
 * directories, the keyring, the list of peers; conn.c adds and removes itself).
 */
#ifndef SHIMBRIDGE_SERVER_H
#define SHIMBRIDGE_SERVER_H

#include <sys/queue.h>

#include <stdint.h>
#include <time.h>

struct approve;
struct config;
struct conn;
struct event;
struct event_base;
struct evconnlistener;
struct keyring;
struct session;
struct zygote;

#define SERVER_MAX_LISTENERS	16

TAILQ_HEAD(conn_list, conn);

/* The daemon. */
struct server {
	struct event_base	*base;
	struct config		*cfg;		/* the running config (swapped on reload) */
	struct keyring		*keyring;	/* secret values, synced to cfg */
	const char		*config_path;
	struct evconnlistener	*lev[SERVER_MAX_LISTENERS];
	int			 nlev;
	char			*own_socket;	/* unlinked at exit when we bound it */
	char			*scratch_dir;	/* state_dir/run: per-call private dirs */
	char			*mirror_dir;	/* state_dir/mirrors */
	char			*jail_root;	/* state_dir/jail; NULL: no jail (--no-jail) */
	struct zygote		*zygote;	/* pre-built jails; every call's scratch dir */
	struct event		*ev_sig[5];
	struct event		*ev_sweep;
	struct event		*ev_resume;
	time_t			 fd_low_until;	/* after EMFILE: headroom checked per accept */
	struct event		*ev_orphans;	/* deferred orphan scan */
	struct approve		*approve;	/* requests waiting for approval (pending.h) */
	struct conn_list	 conns;
	int			 nconns;
	int			 nrunning;
	uint64_t		 next_id;
	time_t			 started;
	uint64_t		 n_accepted, n_refused, n_allowed, n_denied, n_completed, n_errors;
};

/*
 * Set up listeners (own socket or service-manager fds) and run until SIGTERM/SIGINT.
 * The keyring was loaded for cfg by the caller; reloads keep it in sync.
 */
int	server_run(struct config *, struct keyring *, const char *config_path, char **cause);
/* Run tools without the per-call jail (shimbridged --no-jail, for measurements); before server_run. */
void	server_no_jail(void);
/* Requests of a session in flight (its conns in CONN_RUNNING). */
int	server_session_running(const struct server *, const struct session *);

#endif
