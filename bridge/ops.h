/*
 * The ops a peer may ask for, as a table: { name, admin_only, handler }. One
 * file per op (op-run.c, op-git.c, op-status.c, op-approve.c for pending/approve/deny,
 * op-explain.c, op-list.c). A handler gets the conn in
 * CONN_REQUEST with c->op set and the parsed request; it ends by starting a
 * child (conn_start), answering (conn_exit) or refusing (conn_deny,
 * conn_protocol_error). To add an op: write op-NAME.c, declare its handler
 * here and add a row to ops_table in ops.c.
 */
#ifndef SHIMBRIDGE_OPS_H
#define SHIMBRIDGE_OPS_H

#include <jansson.h>

struct conn;

struct op {
	const char	*name;
	int		 admin_only;	/* 1: root only; 0: session users only */
	void		(*handler)(struct conn *, json_t *req);
	/* Optional: called once the child is reaped and drained, before the "done" audit. */
	void		(*done)(struct conn *);
};

/* The op of that name, or NULL. */
const struct op	*ops_find(const char *name);

void	op_run(struct conn *, json_t *);
void	op_run_done(struct conn *);
void	op_git(struct conn *, json_t *);
void	op_git_done(struct conn *);
void	op_status(struct conn *, json_t *);
void	op_pending(struct conn *, json_t *);
void	op_approve(struct conn *, json_t *);
void	op_deny(struct conn *, json_t *);
void	op_explain(struct conn *, json_t *);
void	op_list(struct conn *, json_t *);

#endif
