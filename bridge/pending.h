/*
 * Requests that wait for approval: the gate an op calls when its policy says "ask"
 * (bridge/policy.h), the operator's and the approver command's decisions, and what
 * a reload does to waiting requests. The table itself is bridge/approve.c.
 *
 * A waiting request's conn is in CONN_PENDING (conn_pending), or stays in
 * CONN_RUNNING when its child asks (a git push's pre-receive hook, op-git.c), with
 * the call's time limit held. The agent sees one line on stderr, "shimbridge:
 * waiting for the operator to approve request N: CMD".
 * Decisions: the operator (ops approve/deny, root), the approver command
 * (config "approval"), the timeout (deny), a "--for" approval of an identical call
 * (approve at once), the agent giving up (Ctrl-C, closing), a reload that no longer
 * asks (deny), the daemon stopping. Each is one "approval" audit record naming who
 * decided.
 */
#ifndef SHIMBRIDGE_PENDING_H
#define SHIMBRIDGE_PENDING_H

#include <sys/types.h>
#include <stdint.h>

#include <jansson.h>

struct config;
struct conn;
struct server;

/* What an op hands the gate. Strings are copied; arg is the op's state. */
struct pending_ask {
	const char	*command;	/* one line: "gh pr merge 3 -R octo/repo" */
	const char	*key;		/* identical calls share session and key (--for) */
	const char	*rule;		/* the ask rule's location */
	int		 timeout;	/* seconds; 0: the config's approval.timeout */
	json_t		*detail;	/* optional, borrowed: extra fields for the approver */
	/* Approved: start the call (conn_fetch_files, conn_start, ...); owns arg. */
	void		(*go)(struct conn *, void *arg);
	/* Free arg: the call was refused or ended. */
	void		(*free)(void *arg);
	/*
	 * After a reload: 1 if the new config still asks for this call, else 0 with
	 * *why (allocated) saying what it does now.
	 */
	int		(*still_asks)(struct conn *, void *arg, const struct config *,
			    char **why);
	/*
	 * Only for a request whose child runs already (a git push whose hook asks,
	 * c in CONN_RUNNING): refused, line is the agent's one-line refusal
	 * ("shimbridge: refused: ...", no newline) and reason the audit's; the op
	 * tells its child and frees arg (conn_deny cannot end a running request).
	 * go then means "let the child go on". NULL: c is in CONN_REQUEST.
	 */
	void		(*refused)(struct conn *, void *arg, const char *line,
			    const char *reason);
	void		*arg;
};

/*
 * Wait for a decision on c's request (c in CONN_REQUEST; or in CONN_RUNNING with
 * ask->refused set, whose wall-clock limit is held meanwhile, conn_pending), or go
 * on at once when a "--for" approval covers it. ask->arg is the gate's from here on.
 */
void	pending_ask(struct conn *, const struct pending_ask *);
/*
 * Decide request id as the operator (peer uid and pid from the kernel); for_secs > 0
 * approves identical calls of that session for as long. 0, or -1 and *why.
 */
int	pending_decide(struct server *, uint64_t id, int approve, long for_secs,
	    const char *reason, uid_t, pid_t, char **why);
/* The waiting requests as a JSON array (consumed by the caller). */
json_t	*pending_list(struct server *);
/* After a reload: deny, with the reason, each request the new config no longer asks for. */
void	pending_reload(struct server *);

#endif
