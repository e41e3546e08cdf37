/*
 * Calls that wait for approval ("ask" rules, docs/CONFIG.md) and timed approvals
 * of identical calls (shimbridge approve ID --for 10m). Pure bookkeeping: no
 * events, no I/O; bridge/op-approve.c holds the waiting conns, the ops and the
 * approver command. The server owns one table; it outlives reloads.
 */
#ifndef SHIMBRIDGE_APPROVE_H
#define SHIMBRIDGE_APPROVE_H

#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define APPROVE_PENDING_MAX	256	/* calls waiting at once, every session */
#define APPROVE_SESSION_MAX	16	/* calls of one session waiting at once */
#define APPROVE_GRANTS_MAX	1024	/* live "--for" approvals */
#define APPROVE_FOR_MAX		(7 * 86400)	/* longest --for: a week */
#define APPROVE_COMMAND_MAX	300	/* bytes of the one-line command shown */

/* One waiting call. */
struct approve_entry {
	TAILQ_ENTRY(approve_entry) entry;
	uint64_t	 id;		/* shown to the agent and the operator; never reused */
	char		*session;
	char		*command;	/* one line, e.g. "git push origin release/2.0" */
	char		*key;		/* what "identical call" means (approve_grant) */
	char		*rule;		/* the ask rule's location */
	time_t		 created;
	time_t		 deadline;	/* no decision by then: denied */
	void		*owner;		/* the waiting request (op-approve.c), not owned */
};

struct approve;

struct approve	*approve_new(void);
/* Free the table, its entries and grants (owners are not touched). */
void		 approve_free(struct approve *);
/*
 * Add a waiting call (strings copied; command cut to APPROVE_COMMAND_MAX). NULL when
 * APPROVE_PENDING_MAX calls, or APPROVE_SESSION_MAX of that session, already wait.
 */
struct approve_entry *approve_add(struct approve *, const char *session,
		    const char *command, const char *key, const char *rule, time_t now,
		    int timeout, void *owner);
/* The entry with that id, or NULL. */
struct approve_entry *approve_find(struct approve *, uint64_t id);
/* Entries in id order: approve_first, then approve_next; NULL at the end. */
struct approve_entry *approve_first(struct approve *);
struct approve_entry *approve_next(struct approve_entry *);
/* Take an entry out of the table and free it. */
void		 approve_remove(struct approve *, struct approve_entry *);
size_t		 approve_count(const struct approve *);

/*
 * Approve identical calls (same session and key) until until. 0, or -1 when
 * APPROVE_GRANTS_MAX grants are live. A later grant for the same call replaces it.
 */
int		 approve_grant(struct approve *, const char *session, const char *key,
		    time_t now, time_t until);
/* Whether a live grant covers the call; expired grants are dropped on the way. */
int		 approve_granted(struct approve *, const char *session, const char *key,
		    time_t now);
/* Live grants (after dropping expired ones). */
size_t		 approve_grants(struct approve *, time_t now);

/*
 * A duration for --for: digits with an optional unit s, m, h or d ("90", "10m",
 * "2h"), from 1 second to APPROVE_FOR_MAX. 0 and *secs, or -1 and *why.
 */
int		 approve_parse_duration(const char *, long *secs, const char **why);

#endif
