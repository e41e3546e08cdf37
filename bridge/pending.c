/* Requests waiting for approval: the gate, the decisions, the approver command (see pending.h). */
#include <sys/types.h>
#include <sys/wait.h>

#include <ctype.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>

#include "approve.h"
#include "audit.h"
#include "config.h"
#include "conn.h"
#include "job.h"
#include "log.h"
#include "pending.h"
#include "proto.h"
#include "redact.h"
#include "server.h"
#include "spawn.h"
#include "util.h"

#define PENDING_REASON_MAX	200	/* bytes of a reason shown to the agent */

/* One waiting request. */
struct pending {
	struct server		*srv;
	struct conn		*c;
	struct approve_entry	*e;		/* in srv->approve until decided */
	void			(*go)(struct conn *, void *);
	void			(*free)(void *);
	int			(*still_asks)(struct conn *, void *, const struct config *,
				    char **);
	void			(*refused)(struct conn *, void *, const char *, const char *);
	void			*arg;
	char			*refusal;	/* the agent's line when refused */
	char			*audit_reason;
	struct job		*approver;	/* the approver command, or NULL */
	struct event		*approver_timer;
	char			 out[PENDING_REASON_MAX + 1];	/* its stdout's start */
	size_t			 outlen;
};

/* Keep printable ASCII of s (at most PENDING_REASON_MAX bytes, first line only). */
static char *
pending_clean(const char *s)
{
	char *o = xstrdup(s != NULL ? s : "");
	size_t i;

	o[strcspn(o, "\r\n")] = '\0';
	if (strlen(o) > PENDING_REASON_MAX)
		o[PENDING_REASON_MAX] = '\0';
	for (i = 0; o[i] != '\0'; i++) {
		if ((unsigned char)o[i] < 0x20 || o[i] == 0x7f)
			o[i] = ' ';
	}
	return o;
}

/* Stop the approver command (its whole group is killed) and its timer. */
static void
pending_stop_approver(struct pending *p)
{
	if (p->approver != NULL) {
		job_free(p->approver);
		p->approver = NULL;
	}
	if (p->approver_timer != NULL) {
		event_free(p->approver_timer);
		p->approver_timer = NULL;
	}
}

/* Free the gate's own state (not arg). */
static void
pending_free(struct pending *p)
{
	pending_stop_approver(p);
	if (p->e != NULL)
		approve_remove(p->srv->approve, p->e);
	free(p->refusal);
	free(p->audit_reason);
	free(p);
}

/* The "approval" audit record: what was decided, by whom, why (rule: the ask rule's). */
static void
pending_audit(struct conn *c, const char *rule, uint64_t id, int approve, const char *by,
    const char *reason, long for_secs, json_t *who)
{
	json_t *a = conn_audit_base(c, "approval");

	json_object_set_new(a, "rule", json_string(rule));
	json_object_set_new(a, "request", json_integer((json_int_t)id));
	json_object_set_new(a, "decision", json_string(approve ? "approve" : "deny"));
	json_object_set_new(a, "decided_by", json_string(by));
	if (reason != NULL)
		json_object_set_new(a, "reason", json_string(reason));
	if (for_secs > 0)
		json_object_set_new(a, "for", json_integer(for_secs));
	if (who != NULL)
		json_object_update(a, who);
	audit_write(a, conn_redact(c));
}

/* Resumed approved: hand the request back to its op. */
static void
pending_go(struct conn *c, void *arg)
{
	struct pending *p = arg;
	void (*go)(struct conn *, void *) = p->go;
	void *oparg = p->arg;

	pending_free(p);
	go(c, oparg);	/* transferred */
}

/*
 * Resumed refused: the structured line to the agent, then free the op's state; a
 * request whose child runs already hands both to its op instead.
 */
static void
pending_refuse(struct conn *c, void *arg)
{
	struct pending *p = arg;

	if (p->refused != NULL)
		p->refused(c, p->arg, p->refusal, p->audit_reason);	/* arg transferred */
	else {
		conn_deny(c, ERR_DENIED, p->audit_reason, p->refusal);
		p->free(p->arg);
	}
	pending_free(p);
}

/*
 * The decision: audit it, remember a --for approval, take the entry out of the
 * table and resume the conn. why is the reason the agent sees when refused.
 */
static void
pending_finish(struct pending *p, int approve, const char *by, const char *why,
    const char *instead, long for_secs, json_t *who)
{
	struct approve_entry *e = p->e;
	time_t now = time(NULL);

	pending_audit(p->c, e->rule, e->id, approve, by, why, for_secs, who);
	if (approve && for_secs > 0 &&
	    approve_grant(p->srv->approve, e->session, e->key, now, now + for_secs) != 0)
		log_warnx("request %llu: too many --for approvals live; approved once only",
		    (unsigned long long)e->id);
	if (!approve) {
		xasprintf(&p->refusal, "shimbridge: refused: %s (request %llu): %s; %s",
		    e->command, (unsigned long long)e->id, why, instead);
		xasprintf(&p->audit_reason, "not approved (%s)", by);
	}
	approve_remove(p->srv->approve, e);
	p->e = NULL;
	pending_stop_approver(p);
	conn_pending_resume(p->c, approve ? pending_go : pending_refuse, p);
}

/* The conn's timer: nobody decided in time. */
static void
pending_expired(struct conn *c, void *arg)
{
	struct pending *p = arg;
	char *why;

	(void)c;
	xasprintf(&why, "nobody approved it within %lld seconds",
	    (long long)(p->e->deadline - p->e->created));
	pending_finish(p, 0, "timeout", why, "run it again when the operator can answer, "
	    "or ask them to approve such calls ahead (shimbridge approve ID --for DURATION)",
	    0, NULL);
	free(why);
}

/* The agent pressed Ctrl-C (INT, TERM or HUP from the shim). */
static void
pending_cancel(struct conn *c, void *arg)
{
	(void)c;
	pending_finish(arg, 0, "cancelled", "interrupted while waiting for approval",
	    "run it again if it is still needed", 0, NULL);
}

/* The conn ended while waiting (the agent went away, or the daemon stops). */
static void
pending_abandon(void *arg)
{
	struct pending *p = arg;

	pending_audit(p->c, p->e->rule, p->e->id, 0, "cancelled", "the connection ended "
	    "while waiting", 0, NULL);
	p->free(p->arg);
	pending_free(p);
}

/* Approver callback: keep the start of its stdout (the reason). */
static void
pending_job_output(struct job *j, enum job_stream s, const unsigned char *buf, size_t n,
    void *arg)
{
	struct pending *p = arg;
	size_t take;

	(void)j;
	if (s != JOB_OUT)
		return;
	take = sizeof p->out - 1 - p->outlen;
	take = n < take ? n : take;
	memcpy(p->out + p->outlen, buf, take);
	p->outlen += take;
	p->out[p->outlen] = '\0';
}

/* Approver callback: once it is reaped and drained, its exit status decides. */
static void
pending_job_state(struct job *j, void *arg)
{
	struct pending *p = arg;
	int status = job_status(j);
	char *line, *why;

	if (job_state(j) != JOB_CLOSED)
		return;
	line = pending_clean(p->out);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		pending_finish(p, 1, "approver", line[0] != '\0' ? line : NULL, NULL, 0, NULL);
	} else if (WIFEXITED(status) && WEXITSTATUS(status) == 1) {
		xasprintf(&why, "the approver denied it (%s)", line[0] != '\0' ? line :
		    "no reason given");
		pending_finish(p, 0, "approver", why, "do not retry it unchanged; ask the "
		    "operator what to do instead", 0, NULL);
		free(why);
	} else {
		xasprintf(&why, "the approver failed (%s %d), which counts as a denial",
		    WIFEXITED(status) ? "status" : "signal", WIFEXITED(status) ?
		    WEXITSTATUS(status) : WTERMSIG(status));
		pending_finish(p, 0, "approver", why, "tell the operator", 0, NULL);
		free(why);
	}
	free(line);
}

static const struct job_cb pending_job_cb = {
	pending_job_output, NULL, NULL, pending_job_state
};

/* The approver's own timer: no answer in time is a denial. */
static void
pending_approver_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct pending *p = arg;
	char *why;

	(void)fd;
	(void)what;
	xasprintf(&why, "the approver did not decide within %d seconds, which counts as "
	    "a denial", p->c->cfg->approval.command_timeout);
	pending_finish(p, 0, "approver", why, "tell the operator", 0, NULL);
	free(why);
}

/*
 * Start the approver command as its dedicated user, built like every child (env
 * from nothing, fds 0-2, no-new-privs, rlimits, own session): the request as one
 * JSON line on its stdin. If it cannot start, the operator still can decide.
 */
static void
pending_approver_start(struct pending *p, json_t *detail)
{
	static char *envp[] = { "PATH=/usr/bin:/bin", "HOME=/", "LANG=C.UTF-8", NULL };
	const struct approval *ap = &p->c->cfg->approval;
	struct timeval tv = { ap->command_timeout, 0 };
	struct spawn_req r;
	struct child ch;
	struct evbuffer *in;
	json_t *o;
	char *cause = NULL, *s;

	memset(&r, 0, sizeof r);
	r.path = ap->command[0];
	r.argv = ap->command;
	r.envp = envp;
	r.uid = ap->uid;
	r.gid = ap->gid;
	r.cwd_fd = -1;
	r.cwd = "/";
	r.cpu_seconds = ap->command_timeout;
	if (spawn_child(&r, &ch, &cause) != 0) {
		json_t *a = conn_audit_base(p->c, "error");

		json_object_set_new(a, "reason", json_string(cause));
		audit_write(a, conn_redact(p->c));
		log_warnx("approver %s: %s; request %llu waits for the operator", r.path,
		    cause, (unsigned long long)p->e->id);
		free(cause);
		return;
	}
	p->approver = job_new(p->srv->base, &ch, &pending_job_cb, p);
	p->approver_timer = evtimer_new(p->srv->base, pending_approver_timeout, p);
	if (p->approver_timer == NULL)
		fatalx("out of memory starting the approver");
	evtimer_add(p->approver_timer, &tv);
	o = json_object();
	json_object_set_new(o, "id", json_integer((json_int_t)p->e->id));
	json_object_set_new(o, "session", json_string(p->e->session));
	json_object_set_new(o, "command", json_string(p->e->command));
	json_object_set_new(o, "rule", json_string(p->e->rule));
	json_object_set_new(o, "timeout", json_integer(p->e->deadline - p->e->created));
	if (detail != NULL)
		json_object_update_missing(o, detail);
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (s == NULL || (in = evbuffer_new()) == NULL)
		fatalx("out of memory starting the approver");
	evbuffer_add(in, s, strlen(s));
	evbuffer_add(in, "\n", 1);
	job_stdin(p->approver, in, evbuffer_get_length(in));
	job_stdin_eof(p->approver);
	evbuffer_free(in);
	free(s);
}

/* The gate: approved ahead (--for), refused when the table is full, or wait. */
void
pending_ask(struct conn *c, const struct pending_ask *ask)
{
	struct server *srv = c->srv;
	struct pending *p;
	time_t now = time(NULL);
	int timeout = ask->timeout > 0 ? ask->timeout : c->cfg->approval.timeout;
	char *line, *red;
	json_t *a;

	if (approve_granted(srv->approve, c->session->name, ask->key, now)) {
		pending_audit(c, ask->rule, 0, 1, "cache --for", "an identical call was "
		    "approved with --for", 0, NULL);
		ask->go(c, ask->arg);
		return;
	}
	p = xcalloc(1, sizeof *p);
	p->srv = srv;
	p->c = c;
	p->go = ask->go;
	p->free = ask->free;
	p->still_asks = ask->still_asks;
	p->refused = ask->refused;
	p->arg = ask->arg;
	p->e = approve_add(srv->approve, c->session->name, ask->command, ask->key, ask->rule,
	    now, timeout, p);
	if (p->e == NULL) {
		xasprintf(&line, "shimbridge: refused: %s: too many requests already wait "
		    "for approval (%d of this session, or %d in all, is the bridge's limit); "
		    "wait for some to be decided and run it again", ask->command,
		    APPROVE_SESSION_MAX, APPROVE_PENDING_MAX);
		if (ask->refused != NULL)
			ask->refused(c, ask->arg, line, "too many requests wait for approval");
		else {
			conn_deny(c, ERR_BUSY, "too many requests wait for approval", line);
			ask->free(ask->arg);
		}
		free(line);
		free(p);
		return;
	}
	a = conn_audit_base(c, "pending");
	json_object_set_new(a, "rule", json_string(ask->rule));
	json_object_set_new(a, "request", json_integer((json_int_t)p->e->id));
	json_object_set_new(a, "timeout", json_integer(timeout));
	audit_write(a, conn_redact(c));
	xasprintf(&line, "shimbridge: waiting for the operator to approve request %llu: %s\n",
	    (unsigned long long)p->e->id, p->e->command);
	red = redact_string(conn_redact(c), line);	/* the agent's own words, but still */
	if (red != NULL)
		conn_send(c, FRAME_STDERR, red, strlen(red));
	free(red);
	free(line);
	conn_pending(c, timeout, pending_expired, pending_cancel, pending_abandon, p);
	if (c->cfg->approval.command != NULL)
		pending_approver_start(p, ask->detail);
}

/* Read the login uid of a process (the human behind sudo), or -1. */
static long
pending_loginuid(pid_t pid)
{
	char path[64];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/loginuid", (long)pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	if (fscanf(f, "%ld", &v) != 1 || v == 4294967295L)
		v = -1;
	fclose(f);
	return v;
}

/* The operator decides (ops approve and deny). */
int
pending_decide(struct server *srv, uint64_t id, int approve, long for_secs,
    const char *reason, uid_t uid, pid_t pid, char **why)
{
	struct approve_entry *e = approve_find(srv->approve, id);
	json_t *who;
	char *clean = NULL, *text;
	long luid;

	if (e == NULL) {
		xasprintf(why, "no request %llu is waiting (decided, timed out or cancelled "
		    "already?); see shimbridge pending", (unsigned long long)id);
		return -1;
	}
	who = json_object();
	json_object_set_new(who, "operator_uid", json_integer(uid));
	json_object_set_new(who, "operator_pid", json_integer(pid));
	if ((luid = pending_loginuid(pid)) >= 0)
		json_object_set_new(who, "operator_loginuid", json_integer(luid));
	if (approve)
		pending_finish(e->owner, 1, "operator", reason, NULL, for_secs, who);
	else {
		clean = pending_clean(reason);
		xasprintf(&text, "the operator denied it (%s)", clean[0] != '\0' ? clean :
		    "no reason given");
		pending_finish(e->owner, 0, "operator", text, "do not retry it unchanged; "
		    "change the approach or ask the operator", 0, who);
		free(text);
		free(clean);
	}
	json_decref(who);
	return 0;
}

/* The waiting requests, oldest first. */
json_t *
pending_list(struct server *srv)
{
	json_t *arr = json_array(), *o;
	struct approve_entry *e;
	struct pending *p;
	time_t now = time(NULL);

	for (e = approve_first(srv->approve); e != NULL; e = approve_next(e)) {
		p = e->owner;
		o = json_object();
		json_object_set_new(o, "id", json_integer((json_int_t)e->id));
		json_object_set_new(o, "session", json_string(e->session));
		json_object_set_new(o, "age", json_integer(now - e->created));
		json_object_set_new(o, "expires_in", json_integer(e->deadline > now ?
		    e->deadline - now : 0));
		json_object_set_new(o, "command", json_string(e->command));
		json_object_set_new(o, "rule", json_string(e->rule));
		json_object_set_new(o, "approver", json_boolean(p->approver != NULL));
		json_array_append_new(arr, o);
	}
	return arr;
}

/* After a reload, each waiting request must still be one the policy asks for. */
void
pending_reload(struct server *srv)
{
	struct approve_entry *e, *next;
	struct pending *p;
	char *why = NULL, *text;

	for (e = approve_first(srv->approve); e != NULL; e = next) {
		next = approve_next(e);
		p = e->owner;
		if (p->still_asks(p->c, p->arg, srv->cfg, &why))
			continue;
		xasprintf(&text, "the bridge's configuration was reloaded and %s", why);
		pending_finish(p, 0, "reload", text, "run it again", 0, NULL);
		free(text);
		free(why);
		why = NULL;
	}
}
