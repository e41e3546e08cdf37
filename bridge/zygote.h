/*
 * Pre-built jails (docs/JAIL.md, "The pool"). For each session and tool that
 * ran jailed, the daemon keeps up to limits.jail_pool jails ready: an exec'd
 * init (shimbridge-jail) already in fresh namespaces, its filesystem built with
 * its own fresh scratch directory bound in, already the session's runner,
 * waiting for one tool. A request takes one (its scratch dir is the call's),
 * hands it the tool at spawn time, and a deferred event builds replacements as
 * soon as the loop is free after a call's end, so namespace creation and mounting
 * are off the request's path. Every jail serves
 * one call only: no two calls share a namespace or a scratch directory.
 *
 * A pool learns a (session, tool) shape from the first call (fresh jail), and is
 * emptied on reload and stop. With a size of 0 every call gets a fresh jail.
 */
#ifndef SHIMBRIDGE_ZYGOTE_H
#define SHIMBRIDGE_ZYGOTE_H

#include <sys/types.h>
#include <stddef.h>

struct event_base;
struct jail;
struct session;
struct spawn_jail;
struct zygote;

/* The pools of a daemon; scratch_dir is where every call's directory is made. */
struct zygote	*zygote_new(struct event_base *, const char *scratch_dir);
/* Kill every waiting jail and remove its scratch directory. */
void		 zygote_free(struct zygote *);
/* Empty every pool and forget every shape (reload: runners and binds may change). */
void		 zygote_flush(struct zygote *);
/* How many jails to keep ready per session and tool (0: none). */
void		 zygote_set_size(struct zygote *, int);

/*
 * The scratch directory of a call of session s with tool key: a waiting jail's
 * (reserved for this call), or a fresh one. Owned by the caller; hand it back to
 * zygote_scratch_done. NULL and *cause on failure.
 */
char		*zygote_scratch(struct zygote *, const struct session *s, const char *key,
		    char **cause);
/*
 * At spawn: the jail reserved with j->tmp as its scratch dir, if it has j's
 * shape (then 1 and *out is the caller's, for j->warm; else 0). Learns j's shape
 * for key and schedules refills.
 */
int		 zygote_claim(struct zygote *, const struct session *s, const char *key,
		    const struct jail *j, struct spawn_jail *out);
/* The call is over: kill a reserved jail it never used, and remove the directory. */
void		 zygote_scratch_done(struct zygote *, const char *scratch);
/* A reaped pid: 1 if it was a waiting init (now forgotten), else 0. */
int		 zygote_reaped(struct zygote *, pid_t);
/* Whether pid is a waiting init (the orphan scan keeps it). */
int		 zygote_is_waiting(const struct zygote *, pid_t);
/* Waiting (idle + reserved) jails, for status and tests. */
size_t		 zygote_count(const struct zygote *);

#endif
