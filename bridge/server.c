/*
 * The daemon's event loop. One struct conn per peer, one state machine, one
 * child at most. A request is finished only when its child has been reaped AND
 * its output has been drained to the peer. Objects are never freed inside their
 * own callbacks: they are marked dead and freed from a zero-timeout event.
 */
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <jansson.h>
#include <sodium.h>

#include "audit.h"
#include "config.h"
#include "gh.h"
#include "gitop.h"
#include "log.h"
#include "platform.h"
#include "policy.h"
#include "proto.h"
#include "redact.h"
#include "request.h"
#include "secret.h"
#include "server.h"
#include "spawn.h"
#include "util.h"

#define PEER_IN_HIGH	(FRAME_HDR + FRAME_CTRL_MAX + 4096)	/* peer input cap */
#define PEER_OUT_HIGH	(256 * 1024)	/* stop reading the child above this */
#define PEER_OUT_LOW	(64 * 1024)	/* resume below this */
#define STDIN_HIGH	(256 * 1024)	/* stop reading the peer above this */
#define CLOSE_TIMEOUT	10		/* seconds to deliver the final frame */
#define MAX_LISTENERS	16

enum conn_state {
	CONN_HELLO,	/* accepted; waiting for the client's HELLO */
	CONN_REQUEST,	/* HELLO answered; waiting for the REQUEST */
	CONN_RUNNING,	/* child started; relaying stdio until reaped and drained */
	CONN_CLOSING,	/* final frame queued; close once written (or timed out) */
	CONN_DEAD,	/* freed from a zero-timeout event; touch nothing */
};

enum conn_kill {
	KILL_NONE,
	KILL_TIMEOUT,	/* wall-clock limit */
	KILL_OUTPUT,	/* output cap */
	KILL_PEER,	/* the shim went away */
	KILL_SHUTDOWN,	/* the daemon is stopping */
};

struct server;

/* Everything about one peer. */
struct conn {
	TAILQ_ENTRY(conn)	 entry;
	struct server		*srv;
	struct config		*cfg;		/* reference held for the request's life */
	uint64_t		 id;
	enum conn_state		 state;
	struct bufferevent	*bev;
	struct event		*timer;		/* handshake, wall clock, kill grace, close */
	struct event		*free_ev;
	uid_t			 uid;		/* from the kernel, at accept */
	gid_t			 gid;
	pid_t			 pid;
	const struct session	*session;	/* NULL for the admin (root) peer */
	int			 admin;
	char			*op;
	char			*tool;
	json_t			*argv;		/* for audit lines */
	char			*cwd;
	char			*rule;
	struct timespec		 start;

	pid_t			 child;		/* -1 when none */
	int			 reaped;
	int			 status;
	time_t			 reaped_at;
	enum conn_kill		 killed;
	int			 term_sent;
	int			 fd_in, fd_out, fd_err;
	struct event		*ev_in, *ev_out, *ev_err;
	struct evbuffer		*inbuf;		/* stdin bytes waiting for the child */
	int			 stdin_eof;	/* peer sent EOF: close once inbuf drains */
	int			 peer_paused;	/* not reading the peer: stdin backpressure */
	int			 out_paused;	/* not reading the child: peer backpressure */
	int			 peer_gone;
	struct redact		*red_out, *red_err;
	uint64_t		 bytes_in, bytes_out;
	uint64_t		 output_limit;
	char			*scratch;
	size_t			 close_left;	/* output still queued at the last close check */
};

TAILQ_HEAD(conn_list, conn);

/* A background run of a command secret source (see server_secrets). */
struct secret_job {
	TAILQ_ENTRY(secret_job)	 entry;
	struct server		*srv;
	struct config		*cfg;		/* reference: the source lives in it */
	struct secret_src	*src;
	pid_t			 pid;
	int			 reaped;
	int			 status;
	int			 fd_out, fd_err;
	struct event		*ev_out;
	unsigned char		*buf;		/* guarded memory */
	size_t			 len;
	char			*why;		/* set when the bridge stopped it */
	time_t			 started;
};

TAILQ_HEAD(secret_job_list, secret_job);

/* The daemon. */
struct server {
	struct event_base	*base;
	struct config		*cfg;
	const char		*config_path;
	struct evconnlistener	*lev[MAX_LISTENERS];
	int			 nlev;
	char			*own_socket;	/* unlinked at exit when we bound it */
	char			*scratch_dir;	/* state_dir/run: per-call private dirs */
	char			*mirror_dir;	/* state_dir/mirrors */
	struct event		*ev_sig[5];
	struct event		*ev_sweep;
	struct event		*ev_resume;
	struct event		*ev_orphans;	/* deferred orphan scan */
	struct conn_list	 conns;
	struct secret_job_list	 jobs;
	int			 nconns;
	int			 nrunning;
	uint64_t		 next_id;
	time_t			 started;
	uint64_t		 n_accepted, n_refused, n_allowed, n_denied, n_completed, n_errors;
};

static void	conn_read_frames(struct conn *);
static void	conn_check_done(struct conn *);
static void	conn_schedule_free(struct conn *);

/* Name of a state, for logs. */
static const char *
conn_state_name(enum conn_state s)
{
	static const char *names[] = { "hello", "request", "running", "closing", "dead" };

	return names[s];
}

/* The only way to change state: legal transitions are asserted and logged. */
static void
conn_set_state(struct conn *c, enum conn_state to)
{
	int ok;

	switch (c->state) {
	case CONN_HELLO:
		ok = to == CONN_REQUEST || to == CONN_CLOSING || to == CONN_DEAD;
		break;
	case CONN_REQUEST:
		ok = to == CONN_RUNNING || to == CONN_CLOSING || to == CONN_DEAD;
		break;
	case CONN_RUNNING:
		ok = to == CONN_CLOSING || to == CONN_DEAD;
		break;
	case CONN_CLOSING:
		ok = to == CONN_DEAD;
		break;
	default:
		ok = 0;
	}
	if (!ok)
		fatalx("conn %llu: illegal state change %s -> %s", (unsigned long long)c->id,
		    conn_state_name(c->state), conn_state_name(to));
	log_debug("conn %llu: %s -> %s", (unsigned long long)c->id, conn_state_name(c->state),
	    conn_state_name(to));
	if (c->state == CONN_RUNNING)
		c->srv->nrunning--;
	if (to == CONN_RUNNING)
		c->srv->nrunning++;
	if (to == CONN_CLOSING && c->bev != NULL)
		c->close_left = evbuffer_get_length(bufferevent_get_output(c->bev));
	c->state = to;
}

/* Seconds since the request started, with milliseconds. */
static double
conn_elapsed(const struct conn *c)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - c->start.tv_sec) +
	    (double)(now.tv_nsec - c->start.tv_nsec) / 1e9;
}

/* Start an audit record with the fields every line carries. */
static json_t *
conn_audit_base(const struct conn *c, const char *event)
{
	json_t *o = json_object();

	json_object_set_new(o, "event", json_string(event));
	json_object_set_new(o, "conn", json_integer((json_int_t)c->id));
	if (c->session != NULL)
		json_object_set_new(o, "session", json_string(c->session->name));
	json_object_set_new(o, "uid", json_integer((json_int_t)c->uid));
	json_object_set_new(o, "pid", json_integer((json_int_t)c->pid));
	if (c->op != NULL)
		json_object_set_new(o, "op", json_string(c->op));
	if (c->tool != NULL)
		json_object_set_new(o, "tool", json_string(c->tool));
	if (c->argv != NULL)
		json_object_set(o, "argv", c->argv);
	if (c->cwd != NULL)
		json_object_set_new(o, "cwd", json_string(c->cwd));
	if (c->rule != NULL)
		json_object_set_new(o, "rule", json_string(c->rule));
	return o;
}

/* Queue one frame to the peer (nothing once it is gone). */
static void
conn_send(struct conn *c, uint8_t type, const void *buf, size_t len)
{
	unsigned char hdr[FRAME_HDR];
	struct evbuffer *out;

	if (c->peer_gone || c->bev == NULL)
		return;
	out = bufferevent_get_output(c->bev);
	frame_put_header(hdr, type, (uint32_t)len);
	evbuffer_add(out, hdr, sizeof hdr);
	if (len > 0)
		evbuffer_add(out, buf, len);
}

/* Queue a JSON frame (obj consumed). */
static void
conn_send_json(struct conn *c, uint8_t type, json_t *obj)
{
	char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);

	json_decref(obj);
	if (s == NULL)
		fatalx("cannot encode a control message");
	conn_send(c, type, s, strlen(s));
	free(s);
}

/* Arm the connection's single timer. */
static void
conn_timer(struct conn *c, int seconds)
{
	struct timeval tv = { seconds, 0 };

	evtimer_add(c->timer, &tv);
}

/* End the connection with a final ERROR frame: code for the shim, message for the agent. */
static void
conn_error(struct conn *c, const char *code, const char *message)
{
	char *red = redact_string(c->cfg->redact, message);
	json_t *o = json_object();

	json_object_set_new(o, "code", json_string(code));
	json_object_set_new(o, "message", json_string(red != NULL ? red : "(redaction failed)"));
	free(red);
	conn_send_json(c, FRAME_ERROR, o);
	if (c->bev != NULL)
		bufferevent_disable(c->bev, EV_READ);
	conn_set_state(c, CONN_CLOSING);
	conn_timer(c, CLOSE_TIMEOUT);
	if (c->bev == NULL || c->peer_gone ||
	    evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		conn_schedule_free(c);
}

/* A malformed peer: audit it, tell it, close it. */
static void
conn_protocol_error(struct conn *c, const char *why)
{
	json_t *a = conn_audit_base(c, "protocol-error");

	json_object_set_new(a, "reason", json_string(why));
	audit_write(a, c->cfg->redact);
	c->srv->n_errors++;
	conn_error(c, ERR_PROTOCOL, why);
}

/* Signal the child's whole process group. */
static void
conn_kill(struct conn *c, int sig)
{
	if (c->child > 0)
		(void)kill(-c->child, sig);
}

/* Free a connection: from the zero-timeout event only. */
static void
conn_free_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)fd;
	(void)what;
	TAILQ_REMOVE(&c->srv->conns, c, entry);
	c->srv->nconns--;
	if (c->child > 0 && !c->reaped) {
		/* Still running: the reaper will find no conn and the group dies now. */
		conn_kill(c, SIGKILL);
	}
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	event_free(c->timer);
	event_free(c->free_ev);
	if (c->ev_in != NULL)
		event_free(c->ev_in);
	if (c->ev_out != NULL)
		event_free(c->ev_out);
	if (c->ev_err != NULL)
		event_free(c->ev_err);
	if (c->fd_in >= 0)
		close(c->fd_in);
	if (c->fd_out >= 0)
		close(c->fd_out);
	if (c->fd_err >= 0)
		close(c->fd_err);
	if (c->inbuf != NULL)
		evbuffer_free(c->inbuf);
	redact_free(c->red_out);
	redact_free(c->red_err);
	if (c->scratch != NULL) {
		if (spawn_rmtree(c->scratch) != 0)
			log_warnx("cannot remove scratch directory %s", c->scratch);
		free(c->scratch);
	}
	json_decref(c->argv);
	free(c->op);
	free(c->tool);
	free(c->cwd);
	free(c->rule);
	config_unref(c->cfg);
	free(c);
}

/* Mark dead and free from the loop, never from inside a callback of c. */
static void
conn_schedule_free(struct conn *c)
{
	if (c->state == CONN_DEAD)
		return;
	conn_set_state(c, CONN_DEAD);
	if (c->bev != NULL)
		bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	evtimer_del(c->timer);
	event_active(c->free_ev, EV_TIMEOUT, 0);
}

/* Sink for the redactor: frame redacted output to the peer. */
struct sink_ctx {
	struct conn	*c;
	uint8_t		 type;
};

static int
conn_sink(void *arg, const void *buf, size_t len)
{
	struct sink_ctx *sc = arg;
	const unsigned char *p = buf;

	while (len > 0) {
		size_t n = len > FRAME_DATA_MAX ? FRAME_DATA_MAX : len;

		conn_send(sc->c, sc->type, p, n);
		p += n;
		len -= n;
	}
	return 0;
}

/* Stop or resume reading the child's output, following the peer's backlog. */
static void
conn_output_flow(struct conn *c)
{
	size_t backlog;

	if (c->bev == NULL || c->peer_gone)
		return;
	backlog = evbuffer_get_length(bufferevent_get_output(c->bev));
	if (!c->out_paused && backlog > PEER_OUT_HIGH) {
		c->out_paused = 1;
		if (c->ev_out != NULL && c->fd_out >= 0)
			event_del(c->ev_out);
		if (c->ev_err != NULL && c->fd_err >= 0)
			event_del(c->ev_err);
	} else if (c->out_paused && backlog <= PEER_OUT_LOW) {
		c->out_paused = 0;
		if (c->fd_out >= 0)
			event_add(c->ev_out, NULL);
		if (c->fd_err >= 0)
			event_add(c->ev_err, NULL);
	}
}

/* One of the child's output pipes reached EOF: flush the redactor, mark the stream. */
static void
conn_stream_eof(struct conn *c, int stderr_stream)
{
	struct sink_ctx sc = { c, stderr_stream ? FRAME_STDERR : FRAME_STDOUT };
	struct redact *r = stderr_stream ? c->red_err : c->red_out;
	int *fd = stderr_stream ? &c->fd_err : &c->fd_out;
	struct event *ev = stderr_stream ? c->ev_err : c->ev_out;

	if (*fd < 0)
		return;
	event_del(ev);
	close(*fd);
	*fd = -1;
	if (r != NULL && c->killed != KILL_OUTPUT)
		redact_flush(r, conn_sink, &sc);
	conn_send(c, sc.type, NULL, 0);	/* EOF marker */
}

/* Child output is readable: read, count, redact, frame. */
static void
conn_child_read(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	int is_err = fd == c->fd_err;
	struct sink_ctx sc = { c, is_err ? FRAME_STDERR : FRAME_STDOUT };
	unsigned char buf[FRAME_DATA_MAX];
	ssize_t n;
	int i;

	(void)what;
	for (i = 0; i < 4; i++) {
		n = read(fd, buf, sizeof buf);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			conn_stream_eof(c, is_err);
			conn_check_done(c);
			return;
		}
		c->bytes_out += (uint64_t)n;
		if (c->killed == KILL_OUTPUT)
			continue;	/* draining what is left of a killed child */
		if (c->bytes_out > c->output_limit) {
			c->killed = KILL_OUTPUT;
			conn_kill(c, SIGKILL);
			continue;
		}
		if (c->peer_gone)
			continue;
		if ((is_err ? c->red_err : c->red_out) == NULL)
			conn_sink(&sc, buf, (size_t)n);	/* git's pack stream: see conn_op_git */
		else if (redact_feed(is_err ? c->red_err : c->red_out, buf, (size_t)n,
		    conn_sink, &sc) != 0)
			log_warnx("conn %llu: redaction sink failed", (unsigned long long)c->id);
	}
	conn_output_flow(c);
}

/* The child's stdin is writable: hand it what the peer sent. */
static void
conn_child_write(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	int n;

	(void)what;
	n = evbuffer_write(c->inbuf, fd);
	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		/* The child closed its stdin (EPIPE): what is left is dropped. */
		evbuffer_drain(c->inbuf, evbuffer_get_length(c->inbuf));
		event_del(c->ev_in);
		close(c->fd_in);
		c->fd_in = -1;
	} else if (evbuffer_get_length(c->inbuf) == 0) {
		event_del(c->ev_in);
		if (c->stdin_eof) {
			close(c->fd_in);
			c->fd_in = -1;
		}
	}
	if (c->peer_paused && evbuffer_get_length(c->inbuf) < STDIN_HIGH / 2) {
		c->peer_paused = 0;
		bufferevent_enable(c->bev, EV_READ);
		conn_read_frames(c);	/* frames may already be buffered */
	}
}

/* Build the child's environment from nothing. */
static struct envbuild *
conn_env(struct conn *c, const struct tool *t, json_t *env, char **cause)
{
	const struct config *cfg = c->cfg;
	struct envbuild *e = envbuild_new();
	const char *k;
	json_t *v;
	size_t i;

	envbuild_set(e, "PATH", "/usr/bin:/bin", 13, 0);
	envbuild_set(e, "HOME", c->scratch, strlen(c->scratch), 0);
	envbuild_set(e, "TMPDIR", c->scratch, strlen(c->scratch), 0);
	envbuild_set(e, "USER", cfg->runner, strlen(cfg->runner), 0);
	envbuild_set(e, "LOGNAME", cfg->runner, strlen(cfg->runner), 0);
	envbuild_set(e, "LANG", "C.UTF-8", 7, 0);
	if (env != NULL) {
		json_object_foreach(env, k, v) {
			/* Names were checked against the allowlist when the request was read. */
			envbuild_set(e, k, json_string_value(v), json_string_length(v), 0);
		}
	}
	for (i = 0; i < t->nenv; i++)
		envbuild_set(e, t->env[i].name, t->env[i].value, strlen(t->env[i].value), 0);
	for (i = 0; i < t->nsecrets; i++) {
		struct secret_src *s = secret_resolve(cfg, c->session, t->secrets[i].secret);

		/* Command sources are refreshed in the background (server_secrets). */
		if (s == NULL || !secret_usable(s)) {
			if (s != NULL && s->type == SECRET_COMMAND && s->refreshing)
				xasprintf(cause, "%s cannot run right now: the bridge is renewing "
				    "its credential (secret %s). Nothing was run; try again in a few "
				    "seconds.", t->name, t->secrets[i].secret);
			else
				xasprintf(cause, "%s cannot run right now: the bridge could not "
				    "load its credential (secret %s). Nothing was run. Ask the "
				    "operator to run `shimbridge check`.", t->name,
				    t->secrets[i].secret);
			envbuild_free(e);
			return NULL;
		}
		if (envbuild_set(e, t->secrets[i].var, (const char *)s->value, s->len, 1) != 0) {
			xasprintf(cause, "secret %s cannot be passed in an environment variable "
			    "(it contains a NUL byte)", t->secrets[i].secret);
			envbuild_free(e);
			return NULL;
		}
	}
	return e;
}

/* Collect the secret values a request injects, for its output redactors. */
static struct redact *
conn_redactor(struct conn *c, const struct tool *t, const struct secret_src *extra)
{
	struct redact_secret rs[32];
	size_t n = 0, i;

	for (i = 0; t != NULL && i < t->nsecrets && n < 31; i++) {
		struct secret_src *s = secret_resolve(c->cfg, c->session, t->secrets[i].secret);

		if (s != NULL && s->value != NULL) {
			rs[n].value = s->value;
			rs[n++].len = s->len;
		}
	}
	if (extra != NULL && extra->value != NULL) {
		rs[n].value = extra->value;
		rs[n++].len = extra->len;
	}
	return redact_new(rs, n);
}

/* Start the child and the relay; on failure send an error and return -1. */
static int
conn_start(struct conn *c, const char *path, char *const *argv, struct envbuild *env,
    int cwd_fd, const char *cwd, int timeout)
{
	struct spawn_req r;
	struct child ch;
	char *cause = NULL;

	memset(&r, 0, sizeof r);
	r.path = path;
	r.argv = argv;
	r.envp = envbuild_array(env);
	r.uid = c->cfg->runner_uid;
	r.gid = c->cfg->runner_gid;
	r.cwd_fd = cwd_fd;
	r.cwd = cwd;
	r.cpu_seconds = timeout + 5;
	if (spawn_child(&r, &ch, &cause) != 0) {
		json_t *a = conn_audit_base(c, "error");
		char *msg;

		if (ch.pid > 0) {
			kill(-ch.pid, SIGKILL);
			c->child = ch.pid;	/* reaped by the SIGCHLD handler */
		}
		json_object_set_new(a, "reason", json_string(cause));
		audit_write(a, c->cfg->redact);
		xasprintf(&msg, "%s could not be started on the host (%s). Nothing was run; "
		    "tell the operator.", c->tool, cause);
		conn_error(c, ERR_UNAVAILABLE, msg);
		free(msg);
		free(cause);
		c->srv->n_errors++;
		return -1;
	}
	c->child = ch.pid;
	c->fd_in = ch.in;
	c->fd_out = ch.out;
	c->fd_err = ch.err;
	c->inbuf = evbuffer_new();
	c->ev_in = event_new(c->srv->base, c->fd_in, EV_WRITE | EV_PERSIST, conn_child_write, c);
	c->ev_out = event_new(c->srv->base, c->fd_out, EV_READ | EV_PERSIST, conn_child_read, c);
	c->ev_err = event_new(c->srv->base, c->fd_err, EV_READ | EV_PERSIST, conn_child_read, c);
	if (c->inbuf == NULL || c->ev_in == NULL || c->ev_out == NULL || c->ev_err == NULL)
		fatalx("out of memory setting up a relay");
	event_add(c->ev_out, NULL);
	event_add(c->ev_err, NULL);
	conn_set_state(c, CONN_RUNNING);
	conn_timer(c, timeout);
	return 0;
}

/* Count a session's requests in flight. */
static int
conn_session_running(const struct server *srv, const struct session *s)
{
	const struct conn *o;
	int n = 0;

	TAILQ_FOREACH(o, &srv->conns, entry) {
		if (o->state == CONN_RUNNING && o->session != NULL &&
		    strcmp(o->session->name, s->name) == 0)
			n++;
	}
	return n;
}

/* Refuse a request politely: audit, count, final error frame. */
static void
conn_deny(struct conn *c, const char *code, const char *reason, const char *message)
{
	json_t *a = conn_audit_base(c, "denied");

	json_object_set_new(a, "reason", json_string(reason));
	audit_write(a, c->cfg->redact);
	c->srv->n_denied++;
	conn_error(c, code, message);
}

/* Limits shared by every op that runs something. */
static int
conn_check_busy(struct conn *c)
{
	int limit = c->session->max_concurrent > 0 ? c->session->max_concurrent :
	    c->cfg->max_per_session;
	char *msg;

	if (conn_session_running(c->srv, c->session) < limit)
		return 0;
	xasprintf(&msg, "the bridge is busy: this session already has %d commands running "
	    "(its limit). Nothing was run; wait for some to finish and try again.", limit);
	conn_deny(c, ERR_BUSY, "session concurrency limit", msg);
	free(msg);
	return -1;
}

/* op "run": policy, environment, cwd, spawn. */
static void
conn_op_run(struct conn *c, json_t *req)
{
	const char *why = NULL, *tname;
	const struct tool *t;
	struct policy_result pr;
	struct policy_ctx pc;
	struct envbuild *env = NULL;
	json_t *jt = json_object_get(req, "tool"), *jargv = json_object_get(req, "argv");
	json_t *jcwd = json_object_get(req, "cwd"), *jenv = json_object_get(req, "env");
	char **argv = NULL, *cause = NULL, *msg = NULL, *summary;
	size_t argc, i;
	int cwd_fd = -1;

	memset(&pr, 0, sizeof pr);
	memset(&pc, 0, sizeof pc);
	if (request_check_run(req, &pc, &why) != 0) {
		conn_protocol_error(c, why);
		return;
	}
	tname = json_string_value(jt);
	c->tool = xstrdup(tname);
	c->argv = json_incref(jargv);
	if (jcwd != NULL)
		c->cwd = xstrdup(json_string_value(jcwd));

	t = config_tool(c->cfg, tname);
	if (t == NULL || !config_session_has_tool(c->session, tname)) {
		summary = policy_allowed_summary(c->cfg, c->session);
		xasprintf(&msg, "%s is not available in this sandbox session (not granted by "
		    "the shimbridge policy). This session may run: %s.", tname, summary);
		free(summary);
		conn_deny(c, ERR_UNKNOWN_TOOL, "tool not granted to the session", msg);
		goto out;
	}
	argc = json_array_size(jargv);
	argv = xcalloc(argc + 2, sizeof *argv);
	{
		const char *base = strrchr(t->path, '/');

		argv[0] = xstrdup(base != NULL ? base + 1 : t->path);
	}
	for (i = 0; i < argc; i++)
		argv[i + 1] = xstrdup(json_string_value(json_array_get(jargv, i)));
	policy_check(c->cfg, c->session, t, argv + 1, argc, &pc, &pr);
	c->rule = xstrdup(pr.rule);
	if (!pr.allowed) {
		conn_deny(c, ERR_DENIED, pr.reason, pr.message);
		goto out;
	}
	if (pc.nextra > 0) {
		/* The profile completes argv (-R repo, --head branch): gh runs outside the repo. */
		argv = xreallocarray(argv, argc + pc.nextra + 2, sizeof *argv);
		json_decref(c->argv);
		c->argv = json_deep_copy(jargv);
		for (i = 0; i < pc.nextra; i++) {
			argv[argc + 1 + i] = xstrdup(pc.extra[i]);
			json_array_append_new(c->argv, json_string(pc.extra[i]));
		}
		argv[argc + 1 + pc.nextra] = NULL;
	}
	if (conn_check_busy(c) != 0)
		goto out;
	if (t->cwd == CWD_WORKSPACE) {
		if (c->session->workspace == NULL || c->cwd == NULL ||
		    (cwd_fd = spawn_open_beneath(c->session->workspace, c->cwd)) < 0) {
			xasprintf(&msg, "%s runs only inside this session's workspace (%s), and "
			    "the current directory %s is not in it (or reaches it through a "
			    "symbolic link). Nothing was run; cd into the workspace and retry.",
			    tname, c->session->workspace != NULL ? c->session->workspace :
			    "none configured", c->cwd != NULL ? c->cwd : "(unknown)");
			conn_deny(c, ERR_DENIED, "cwd outside the workspace", msg);
			goto out;
		}
	}
	c->scratch = spawn_scratch_create(c->srv->scratch_dir, c->cfg->runner_uid,
	    c->cfg->runner_gid, &cause);
	if (c->scratch == NULL) {
		conn_deny(c, ERR_INTERNAL, cause, "the bridge could not prepare a private "
		    "directory for the command; nothing was run. Tell the operator.");
		goto out;
	}
	if ((env = conn_env(c, t, jenv, &cause)) == NULL) {
		conn_deny(c, ERR_UNAVAILABLE, "secret unavailable", cause);
		goto out;
	}
	if (t->profile == PROFILE_GH)
		gh_env(t, c->scratch, &pc, env);
	c->output_limit = t->output_limit;
	/*
	 * A child given no secret has none to print (the runner can read no secret
	 * source), so its output is relayed as it is; otherwise both streams are
	 * redacted with every form of what it was given.
	 */
	if (t->nsecrets > 0) {
		c->red_out = conn_redactor(c, t, NULL);
		c->red_err = c->red_out != NULL ? redact_new_stream(c->red_out) : NULL;
	}
	if (t->nsecrets > 0 && (c->red_out == NULL || c->red_err == NULL)) {
		conn_deny(c, ERR_INTERNAL, "redactor", "the bridge could not set up output "
		    "redaction; nothing was run. Tell the operator.");
		goto out;
	}
	c->srv->n_allowed++;
	{
		json_t *a = conn_audit_base(c, "allowed");

		audit_write(a, c->cfg->redact);
	}
	conn_start(c, t->path, argv, env, cwd_fd,
	    t->cwd == CWD_SCRATCH ? c->scratch : NULL, t->timeout);
out:
	if (cwd_fd >= 0)
		close(cwd_fd);
	envbuild_free(env);
	if (argv != NULL) {
		for (i = 0; argv[i] != NULL; i++)
			free(argv[i]);
		free(argv);
	}
	policy_result_free(&pr);
	policy_ctx_free(&pc);
	free(cause);
	free(msg);
}

/* op "git": the remote helper's network leg, served from a bridge-owned mirror. */
static void
conn_op_git(struct conn *c, json_t *req)
{
	struct gitop g;
	char *cause = NULL, *msg = NULL;
	const char *why = NULL;

	memset(&g, 0, sizeof g);
	c->tool = xstrdup("git");
	if (request_check_env(json_object_get(req, "env"), &why) != 0) {
		conn_protocol_error(c, why);
		return;
	}
	if (gitop_prepare(c->cfg, c->session, req, &g, &msg, &cause) != 0) {
		c->argv = g.audit_argv != NULL ? json_incref(g.audit_argv) : NULL;
		if (msg == NULL) {
			conn_protocol_error(c, cause);
		} else
			conn_deny(c, g.code != NULL ? g.code : ERR_DENIED, cause, msg);
		goto out;
	}
	c->argv = json_incref(g.audit_argv);
	c->rule = xstrdup(g.rule);
	if (conn_check_busy(c) != 0)
		goto out;
	c->scratch = spawn_scratch_create(c->srv->scratch_dir, c->cfg->runner_uid,
	    c->cfg->runner_gid, &cause);
	if (c->scratch == NULL) {
		conn_deny(c, ERR_INTERNAL, cause, "the bridge could not prepare a private "
		    "directory for git; nothing was sent. Tell the operator.");
		goto out;
	}
	if (gitop_env(&g, c->scratch, &cause) != 0) {
		conn_deny(c, ERR_UNAVAILABLE, "git preparation failed", cause);
		goto out;
	}
	c->output_limit = (uint64_t)1 << 40;
	/*
	 * stdout is the pack protocol, written by upload-pack/receive-pack, which never
	 * hold the token (shimbridge-git gives it only to its upstream fetch and push,
	 * and redacts the messages it relays). Masking bytes there would corrupt
	 * pkt-line lengths, and holding back a trailing "0000" flush would deadlock
	 * the conversation, so only stderr goes through the redactor.
	 */
	c->red_out = NULL;
	c->red_err = conn_redactor(c, NULL, g.secret);
	if (c->red_err == NULL) {
		conn_deny(c, ERR_INTERNAL, "redactor", "the bridge could not set up output "
		    "redaction; nothing was sent. Tell the operator.");
		goto out;
	}
	c->srv->n_allowed++;
	audit_write(conn_audit_base(c, "allowed"), c->cfg->redact);
	conn_start(c, c->cfg->git_helper, g.argv, g.env, -1, c->scratch, c->cfg->git_timeout);
out:
	gitop_clear(&g);
	free(cause);
	free(msg);
}

/* op "status" (root only): counters as JSON on stdout, then exit 0. */
static void
conn_op_status(struct conn *c)
{
	struct server *srv = c->srv;
	json_t *o = json_object(), *sess = json_array(), *ex;
	size_t i;
	char *s;

	json_object_set_new(o, "version", json_string(SHIMBRIDGE_VERSION));
	json_object_set_new(o, "protocol", json_integer(PROTO_VERSION));
	json_object_set_new(o, "pid", json_integer(getpid()));
	json_object_set_new(o, "uptime", json_integer(time(NULL) - srv->started));
	json_object_set_new(o, "config", json_string(srv->cfg->path));
	json_object_set_new(o, "config_version", json_string(srv->cfg->version));
	json_object_set_new(o, "connections", json_integer(srv->nconns));
	json_object_set_new(o, "running", json_integer(srv->nrunning));
	json_object_set_new(o, "accepted", json_integer((json_int_t)srv->n_accepted));
	json_object_set_new(o, "refused", json_integer((json_int_t)srv->n_refused));
	json_object_set_new(o, "allowed", json_integer((json_int_t)srv->n_allowed));
	json_object_set_new(o, "denied", json_integer((json_int_t)srv->n_denied));
	json_object_set_new(o, "completed", json_integer((json_int_t)srv->n_completed));
	json_object_set_new(o, "errors", json_integer((json_int_t)srv->n_errors));
	json_object_set_new(o, "fds", json_integer(platform_fd_count()));
	json_object_set_new(o, "rss_kib", json_integer(platform_rss_kib()));
	for (i = 0; i < srv->cfg->nsessions; i++) {
		const struct session *se = &srv->cfg->sessions[i];
		json_t *j = json_object();

		json_object_set_new(j, "name", json_string(se->name));
		json_object_set_new(j, "uid", json_integer(se->uid));
		json_object_set_new(j, "running", json_integer(conn_session_running(srv, se)));
		json_array_append_new(sess, j);
	}
	json_object_set_new(o, "sessions", sess);
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	conn_send(c, FRAME_STDOUT, s, strlen(s));
	conn_send(c, FRAME_STDOUT, "\n", 1);
	free(s);
	ex = json_object();
	json_object_set_new(ex, "code", json_integer(0));
	conn_send_json(c, FRAME_EXIT, ex);
	conn_set_state(c, CONN_CLOSING);
	bufferevent_disable(c->bev, EV_READ);
	conn_timer(c, CLOSE_TIMEOUT);
}

/* A REQUEST frame arrived. */
static void
conn_on_request(struct conn *c, const char *buf, size_t len)
{
	json_error_t je;
	json_t *req, *op;

	req = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (req == NULL) {
		char msg[512];

		snprintf(msg, sizeof msg, "the request could not be read (%s). Arguments, "
		    "the working directory and environment values must be valid UTF-8 "
		    "without NUL bytes; pass other data through stdin or a file", je.text);
		conn_protocol_error(c, msg);
		return;
	}
	if (!json_is_object(req) || !json_is_string(op = json_object_get(req, "op"))) {
		json_decref(req);
		conn_protocol_error(c, "the request is not a JSON object with an \"op\"");
		return;
	}
	c->op = xstrdup(json_string_value(op));
	clock_gettime(CLOCK_MONOTONIC, &c->start);
	evtimer_del(c->timer);
	if (c->admin) {
		if (strcmp(c->op, "status") == 0)
			conn_op_status(c);
		else
			conn_protocol_error(c, "root may only ask for status; run tools as a "
			    "session user");
	} else if (strcmp(c->op, "run") == 0)
		conn_op_run(c, req);
	else if (strcmp(c->op, "git") == 0)
		conn_op_git(c, req);
	else
		conn_protocol_error(c, "unknown op");
	json_decref(req);
}

/* A HELLO frame arrived: check the version and answer. */
static void
conn_on_hello(struct conn *c, const char *buf, size_t len)
{
	json_t *h, *v, *o;
	char msg[160];

	h = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
	v = h != NULL ? json_object_get(h, "proto") : NULL;
	if (!json_is_integer(v) || json_integer_value(v) != PROTO_VERSION) {
		snprintf(msg, sizeof msg, "protocol version mismatch: this bridge speaks "
		    "version %d; reinstall the shim from the same release as the bridge",
		    PROTO_VERSION);
		json_decref(h);
		conn_protocol_error(c, msg);
		return;
	}
	json_decref(h);
	o = json_object();
	json_object_set_new(o, "proto", json_integer(PROTO_VERSION));
	json_object_set_new(o, "server", json_string("shimbridged " SHIMBRIDGE_VERSION));
	if (c->session != NULL)
		json_object_set_new(o, "session", json_string(c->session->name));
	conn_send_json(c, FRAME_HELLO, o);
	conn_set_state(c, CONN_REQUEST);
}

/* A frame for the running child. */
static int
conn_on_running_frame(struct conn *c, uint8_t type, struct evbuffer *in, uint32_t len)
{
	char tmp[FRAME_SMALL_MAX + 1];
	json_t *j, *v;
	int sig;

	switch (type) {
	case FRAME_STDIN:
		c->bytes_in += len;
		if (len == 0) {
			c->stdin_eof = 1;
			if (c->fd_in >= 0 && evbuffer_get_length(c->inbuf) == 0) {
				close(c->fd_in);
				c->fd_in = -1;
			}
			return 0;
		}
		if (c->fd_in < 0 || c->stdin_eof) {
			evbuffer_drain(in, len);	/* nobody reads it any more */
			return 0;
		}
		evbuffer_remove_buffer(in, c->inbuf, len);
		event_add(c->ev_in, NULL);
		if (evbuffer_get_length(c->inbuf) > STDIN_HIGH) {
			c->peer_paused = 1;
			bufferevent_disable(c->bev, EV_READ);
		}
		return 0;
	case FRAME_SIGNAL:
		evbuffer_remove(in, tmp, len);
		tmp[len] = '\0';
		j = json_loadb(tmp, len, JSON_REJECT_DUPLICATES, NULL);
		v = j != NULL ? json_object_get(j, "signal") : NULL;
		sig = json_is_string(v) ? proto_signum(json_string_value(v)) : -1;
		json_decref(j);
		/* Only what a terminal could send; never KILL, STOP or QUIT (core dumps). */
		if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP && sig != SIGPIPE &&
		    sig != SIGWINCH)
			return -1;
		if (!c->reaped)
			conn_kill(c, sig);
		return 0;
	case FRAME_WINSIZE:
		/* Defined for PTY support; validated and ignored until then. */
		evbuffer_remove(in, tmp, len);
		j = json_loadb(tmp, len, JSON_REJECT_DUPLICATES, NULL);
		v = j != NULL ? json_object_get(j, "rows") : NULL;
		sig = json_is_integer(v) && json_is_integer(json_object_get(j, "cols"));
		json_decref(j);
		return sig ? 0 : -1;
	default:
		return -1;
	}
}

/* Parse and dispatch every complete frame in the peer's input. */
static void
conn_read_frames(struct conn *c)
{
	struct evbuffer *in;
	unsigned char hdr[FRAME_HDR];
	const char *cause;
	uint8_t type;
	uint32_t len;

	if (c->bev == NULL)
		return;
	in = bufferevent_get_input(c->bev);
	while (!c->peer_paused && (c->state == CONN_HELLO || c->state == CONN_REQUEST ||
	    c->state == CONN_RUNNING)) {
		if (evbuffer_get_length(in) < FRAME_HDR)
			return;
		evbuffer_copyout(in, hdr, FRAME_HDR);
		if (frame_parse_header(hdr, &type, &len, &cause) != 0) {
			conn_protocol_error(c, cause);
			return;
		}
		if (evbuffer_get_length(in) < FRAME_HDR + (size_t)len)
			return;
		evbuffer_drain(in, FRAME_HDR);
		if (c->state == CONN_HELLO) {
			if (type != FRAME_HELLO) {
				conn_protocol_error(c, "expected a HELLO frame first");
				return;
			}
			conn_on_hello(c, (char *)evbuffer_pullup(in, len), len);
			evbuffer_drain(in, len);
		} else if (c->state == CONN_REQUEST) {
			if (type != FRAME_REQUEST) {
				conn_protocol_error(c, "expected a REQUEST frame");
				return;
			}
			conn_on_request(c, (char *)evbuffer_pullup(in, len), len);
			if (c->state != CONN_DEAD && c->bev != NULL)
				evbuffer_drain(in, len);
		} else if (conn_on_running_frame(c, type, in, len) != 0) {
			conn_protocol_error(c, "unexpected or malformed frame while running");
			return;
		}
	}
}

/* Peer readable. */
static void
conn_read_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	conn_read_frames(arg);
}

/* Peer output drained below the low watermark. */
static void
conn_write_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (c->state == CONN_CLOSING && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
		conn_schedule_free(c);
		return;
	}
	conn_output_flow(c);
}

/* Peer closed or failed. */
static void
conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	(void)bev;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	if (c->state == CONN_RUNNING && !c->reaped) {
		json_t *a = conn_audit_base(c, "peer-gone");

		audit_write(a, c->cfg->redact);
		c->killed = KILL_PEER;
		conn_kill(c, SIGKILL);
	}
	c->peer_gone = 1;
	bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	if (c->state == CONN_RUNNING) {
		/* Keep draining the child's pipes; freed once reaped and drained. */
		if (c->out_paused) {
			c->out_paused = 0;
			if (c->fd_out >= 0)
				event_add(c->ev_out, NULL);
			if (c->fd_err >= 0)
				event_add(c->ev_err, NULL);
		}
		conn_check_done(c);
		return;
	}
	conn_schedule_free(c);
}

/* The connection's timer: handshake, wall clock, kill grace or final delivery. */
static void
conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)fd;
	(void)what;
	switch (c->state) {
	case CONN_HELLO:
	case CONN_REQUEST:
		conn_protocol_error(c, "handshake timed out");
		break;
	case CONN_RUNNING:
		if (c->reaped)
			break;
		if (!c->term_sent) {
			if (c->killed == KILL_NONE)
				c->killed = KILL_TIMEOUT;
			c->term_sent = 1;
			conn_kill(c, SIGTERM);
			conn_timer(c, c->cfg->kill_grace);
		} else
			conn_kill(c, SIGKILL);
		break;
	case CONN_CLOSING:
		/* A slow peer that is still reading gets more time; a stalled one does not. */
		if (c->bev != NULL && !c->peer_gone) {
			size_t left = evbuffer_get_length(bufferevent_get_output(c->bev));

			if (left > 0 && left < c->close_left) {
				c->close_left = left;
				conn_timer(c, CLOSE_TIMEOUT);
				break;
			}
		}
		conn_schedule_free(c);
		break;
	case CONN_DEAD:
		break;
	}
}

/*
 * A push the git policy refused inside shimbridge-git's pre-receive hook: git
 * exits 0 then, so the hook leaves its message in the private HOME for us.
 */
static void
conn_audit_git_refusal(struct conn *c)
{
	char *path, buf[2049];
	struct stat st;
	ssize_t n;
	json_t *a;
	int fd;

	if (c->op == NULL || strcmp(c->op, "git") != 0 || c->scratch == NULL)
		return;
	xasprintf(&path, "%s/.shimbridge-refused", c->scratch);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (n = read(fd, buf,
	    sizeof buf - 1)) <= 0) {
		close(fd);
		return;
	}
	close(fd);
	buf[n] = '\0';
	a = conn_audit_base(c, "denied");
	/* The runner wrote it: jansson escapes it; invalid UTF-8 is not logged raw. */
	if (json_object_set_new(a, "reason", json_string(buf)) != 0)
		json_object_set_new(a, "reason", json_string("git policy refused the push"));
	audit_write(a, c->cfg->redact);
	c->srv->n_denied++;
}

/* Finish once the child is reaped and both output pipes are drained. */
static void
conn_check_done(struct conn *c)
{
	json_t *a, *o;
	char *msg;

	if (c->state != CONN_RUNNING || !c->reaped || c->fd_out >= 0 || c->fd_err >= 0)
		return;
	conn_audit_git_refusal(c);
	a = conn_audit_base(c, "done");
	json_object_set_new(a, "duration", json_real(conn_elapsed(c)));
	json_object_set_new(a, "bytes_in", json_integer((json_int_t)c->bytes_in));
	json_object_set_new(a, "bytes_out", json_integer((json_int_t)c->bytes_out));
	if (WIFEXITED(c->status))
		json_object_set_new(a, "exit", json_integer(WEXITSTATUS(c->status)));
	else if (WIFSIGNALED(c->status)) {
		const char *n = proto_signame(WTERMSIG(c->status));

		json_object_set_new(a, "signal", json_string(n != NULL ? n : "?"));
	}
	if (c->killed != KILL_NONE) {
		static const char *why[] = { "", "timeout", "output-limit", "peer-gone", "shutdown" };

		json_object_set_new(a, "killed", json_string(why[c->killed]));
	}
	audit_write(a, c->cfg->redact);
	c->srv->n_completed++;
	if (c->peer_gone) {
		conn_schedule_free(c);
		return;
	}
	if (c->killed == KILL_TIMEOUT) {
		xasprintf(&msg, "%s was stopped after %.0f seconds: it reached its time limit "
		    "on the bridge. Output so far was delivered. Try a narrower command.",
		    c->tool, conn_elapsed(c));
		conn_error(c, ERR_TIMEOUT, msg);
		free(msg);
		return;
	}
	if (c->killed == KILL_OUTPUT) {
		xasprintf(&msg, "%s was stopped: its output passed the limit of %llu bytes "
		    "set by the bridge. Narrow the command (filters, --limit) or write less.",
		    c->tool, (unsigned long long)c->output_limit);
		conn_error(c, ERR_OUTPUT_LIMIT, msg);
		free(msg);
		return;
	}
	o = json_object();
	if (WIFSIGNALED(c->status) && proto_signame(WTERMSIG(c->status)) != NULL)
		json_object_set_new(o, "signal", json_string(proto_signame(WTERMSIG(c->status))));
	else if (WIFSIGNALED(c->status))
		json_object_set_new(o, "code", json_integer(128 + WTERMSIG(c->status)));
	else
		json_object_set_new(o, "code", json_integer(WEXITSTATUS(c->status)));
	conn_send_json(c, FRAME_EXIT, o);
	conn_set_state(c, CONN_CLOSING);
	conn_timer(c, CLOSE_TIMEOUT);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		conn_schedule_free(c);
}

#define SECRET_JOB_MAX	(64 * 1024)

/* Finish a secret job once its program is reaped and its output read. */
static void
secret_job_check(struct secret_job *j)
{
	struct server *srv = j->srv;
	char err[256], *why = j->why;
	ssize_t n;

	if (!j->reaped || j->fd_out >= 0)
		return;
	err[0] = '\0';
	if (why == NULL && (!WIFEXITED(j->status) || WEXITSTATUS(j->status) != 0)) {
		n = read(j->fd_err, err, sizeof err - 1);
		err[n > 0 ? n : 0] = '\0';
		err[strcspn(err, "\n")] = '\0';
		xasprintf(&why, "failed (status %d)%s%.200s", WIFEXITED(j->status) ?
		    WEXITSTATUS(j->status) : 128 + WTERMSIG(j->status), err[0] ? ": " : "", err);
	}
	secret_command_done(j->src, j->buf, j->len, j->status, why);
	j->src->refreshing = 0;
	log_debug("secret %s: renewal done (%s)", j->src->name, j->src->error != NULL ?
	    j->src->error : "ok");
	if (j->src->error != NULL)
		log_warnx("%s", j->src->error);
	else
		config_secrets_changed(j->cfg);
	TAILQ_REMOVE(&srv->jobs, j, entry);
	event_free(j->ev_out);
	close(j->fd_err);
	sodium_free(j->buf);
	config_unref(j->cfg);
	free(why);
	free(j);
}

/* A secret job's program wrote or closed its stdout. */
static void
secret_job_read(evutil_socket_t fd, short what, void *arg)
{
	struct secret_job *j = arg;
	ssize_t n;

	(void)what;
	n = read(fd, j->buf + j->len, SECRET_JOB_MAX - j->len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0 && (j->len += (size_t)n) < SECRET_JOB_MAX)
		return;
	if (n > 0) {
		j->why = xstrdup("printed too much (64 KiB at most)");
		kill(-j->pid, SIGKILL);
	}
	event_del(j->ev_out);
	close(j->fd_out);
	j->fd_out = -1;
	secret_job_check(j);
}

/* Start a background run of a command source. */
static void
secret_job_start(struct server *srv, struct config *cfg, struct secret_src *src)
{
	struct secret_job *j;
	struct child ch;
	char *cause = NULL;

	if (secret_command_spawn(src, cfg, &ch, &cause) != 0) {
		secret_command_done(src, NULL, 0, 0, cause);
		log_warnx("%s", src->error != NULL ? src->error : cause);
		free(cause);
		return;
	}
	j = xcalloc(1, sizeof *j);
	j->srv = srv;
	j->cfg = config_ref(cfg);
	j->src = src;
	j->pid = ch.pid;
	j->fd_out = ch.out;
	j->fd_err = ch.err;
	j->started = time(NULL);
	if ((j->buf = sodium_malloc(SECRET_JOB_MAX)) == NULL ||
	    (j->ev_out = event_new(srv->base, j->fd_out, EV_READ | EV_PERSIST,
	    secret_job_read, j)) == NULL)
		fatalx("out of memory starting a secret refresh");
	event_add(j->ev_out, NULL);
	src->refreshing = 1;
	log_debug("secret %s: renewing in the background (pid %ld)", src->name, (long)j->pid);
	TAILQ_INSERT_TAIL(&srv->jobs, j, entry);
}

/* Start due refreshes of command sources; stop runs past their timeout. */
static void
server_secrets(struct server *srv)
{
	struct config *cfg = srv->cfg;
	struct secret_job *j;
	time_t now = time(NULL);
	size_t i, k;

	TAILQ_FOREACH(j, &srv->jobs, entry) {
		if (!j->reaped && j->why == NULL && now - j->started > j->src->timeout) {
			xasprintf(&j->why, "did not finish within %d seconds", j->src->timeout);
			kill(-j->pid, SIGKILL);
		}
	}
	for (i = 0; i < cfg->nsecrets; i++) {
		if (secret_due(&cfg->secrets[i]))
			secret_job_start(srv, cfg, &cfg->secrets[i]);
	}
	for (i = 0; i < cfg->nsessions; i++) {
		for (k = 0; k < cfg->sessions[i].nsecrets; k++) {
			if (secret_due(&cfg->sessions[i].secrets[k]))
				secret_job_start(srv, cfg, &cfg->sessions[i].secrets[k]);
		}
	}
}

/* A child of ours ended: find its connection. Returns 1 if it was a request's child. */
static int
server_reaped(struct server *srv, pid_t pid, int status)
{
	struct secret_job *j;
	struct conn *c;

	TAILQ_FOREACH(j, &srv->jobs, entry) {
		if (j->pid != pid || j->reaped)
			continue;
		j->reaped = 1;
		j->status = status;
		(void)kill(-pid, SIGKILL);
		secret_job_check(j);
		return 1;
	}
	TAILQ_FOREACH(c, &srv->conns, entry) {
		if (c->child != pid || c->reaped)
			continue;
		c->reaped = 1;
		c->status = status;
		c->reaped_at = time(NULL);
		/* Leftovers of the group die with the leader: nothing outlives a request. */
		(void)kill(-pid, SIGKILL);
		if (c->state == CONN_RUNNING)
			conn_check_done(c);
		else if (c->state == CONN_CLOSING && c->peer_gone)
			conn_schedule_free(c);
		return 1;
	}
	/* Not a request child: an escaped descendant, already dealt with. */
	return 0;
}

/* Kill descendants that escaped their process group (reparented to us). */
static void
server_kill_orphans(struct server *srv)
{
	pid_t keep[4096];
	struct conn *c;
	size_t n = 0;
	int killed;

	struct secret_job *j;

	TAILQ_FOREACH(c, &srv->conns, entry) {
		if (c->child > 0 && !c->reaped && n < sizeof keep / sizeof keep[0])
			keep[n++] = c->child;
	}
	TAILQ_FOREACH(j, &srv->jobs, entry) {
		if (!j->reaped && n < sizeof keep / sizeof keep[0])
			keep[n++] = j->pid;
	}
	killed = platform_kill_orphans(keep, n);
	if (killed > 0)
		log_info("killed %d escaped descendant process%s", killed, killed == 1 ? "" : "es");
}

/* SIGCHLD: reap everything that has ended. */
static void
server_sigchld(evutil_socket_t sig, short what, void *arg)
{
	struct server *srv = arg;
	int status, any = 0;
	pid_t pid;

	(void)sig;
	(void)what;
	/*
	 * Only a request child's end can leave orphans behind. The scan is deferred a
	 * little and coalesced: it reads every process on hosts whose kernel has no
	 * /proc/.../children, and must not sit on each request's path.
	 */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		any |= server_reaped(srv, pid, status);
	if (any && !evtimer_pending(srv->ev_orphans, NULL)) {
		struct timeval tv = { 0, 50000 };

		evtimer_add(srv->ev_orphans, &tv);
	}
}

/* Whether a child's output pipe still holds bytes the daemon has not read. */
static int
conn_output_pending(const struct conn *c)
{
	int n;

	if (c->fd_out >= 0 && ioctl(c->fd_out, FIONREAD, &n) == 0 && n > 0)
		return 1;
	if (c->fd_err >= 0 && ioctl(c->fd_err, FIONREAD, &n) == 0 && n > 0)
		return 1;
	return 0;
}

/* The deferred orphan scan. */
static void
server_orphans(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	server_kill_orphans(arg);
}

/* Every second: orphans, and requests whose pipes an escaped process holds open. */
static void
server_sweep(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	struct conn *c, *next;
	time_t now = time(NULL);
	int waiting = 0;

	(void)fd;
	(void)what;
	for (c = TAILQ_FIRST(&srv->conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->state != CONN_RUNNING || !c->reaped)
			continue;
		waiting = 1;
		/*
		 * Unread output, or a relay paused for a slow peer (its EOF is simply not
		 * read yet), means we are behind, not that an escaped process holds the
		 * pipes: closing them now could drop the tail of a finished child's output.
		 */
		if (now - c->reaped_at > c->cfg->kill_grace + 2 && !c->out_paused &&
		    !conn_output_pending(c)) {
			/* Someone outside our reach holds the pipes: stop waiting. */
			log_warnx("conn %llu: output pipes still open after the child exited; "
			    "closing them", (unsigned long long)c->id);
			conn_stream_eof(c, 0);
			conn_stream_eof(c, 1);
			conn_check_done(c);
		}
	}
	if (waiting)
		server_kill_orphans(srv);
	server_secrets(srv);
}

/* Refuse a connection before a conn exists: audit it, best-effort error frame, close. */
static void
server_refuse(struct server *srv, int fd, uid_t uid, pid_t pid, const struct session *s,
    const char *code, const char *reason, const char *message)
{
	unsigned char hdr[FRAME_HDR];
	json_t *o = json_object(), *a = json_object();
	char *str;

	json_object_set_new(a, "event", json_string("refused"));
	if (s != NULL)
		json_object_set_new(a, "session", json_string(s->name));
	json_object_set_new(a, "uid", json_integer(uid));
	json_object_set_new(a, "pid", json_integer(pid));
	json_object_set_new(a, "code", json_string(code));
	json_object_set_new(a, "reason", json_string(reason));
	audit_write(a, srv->cfg->redact);
	srv->n_refused++;
	json_object_set_new(o, "code", json_string(code));
	json_object_set_new(o, "message", json_string(message));
	str = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (str != NULL) {
		frame_put_header(hdr, FRAME_ERROR, (uint32_t)strlen(str));
		(void)send(fd, hdr, sizeof hdr, MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)send(fd, str, strlen(str), MSG_NOSIGNAL | MSG_DONTWAIT);
		free(str);
	}
	close(fd);
}

/* Open connections of a session, in any state. */
static int
server_session_conns(const struct server *srv, const struct session *s)
{
	const struct conn *c;
	int n = 0;

	TAILQ_FOREACH(c, &srv->conns, entry) {
		if (c->session != NULL && strcmp(c->session->name, s->name) == 0 &&
		    c->state != CONN_DEAD)
			n++;
	}
	return n;
}

/* A new peer: credentials from the kernel, session from the config. */
static void
server_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
    void *arg)
{
	struct server *srv = arg;
	const struct session *s = NULL;
	struct conn *c;
	uid_t uid;
	gid_t gid;
	pid_t pid;

	(void)l;
	(void)sa;
	(void)salen;
	if (platform_peercred(fd, &uid, &gid, &pid) != 0) {
		log_warnx("cannot read peer credentials: %s", strerror(errno));
		close(fd);
		return;
	}
	srv->n_accepted++;
	if (uid != 0 && (s = config_session_by_uid(srv->cfg, uid)) == NULL) {
		server_refuse(srv, fd, uid, pid, NULL, ERR_UNAUTHORIZED, uid == 65534 ?
		    "overflow uid" : "uid has no session", "this account is not a shimbridge "
		    "sandbox session, so the bridge runs nothing for it. Ask the operator to add "
		    "a session for this user (shimbridge session add).");
		return;
	}
	if (s != NULL && server_session_conns(srv, s) >= (s->max_concurrent > 0 ?
	    s->max_concurrent : srv->cfg->max_per_session)) {
		server_refuse(srv, fd, uid, pid, s, ERR_BUSY, "session connection limit",
		    "the bridge is busy: this session has as many connections open as it may. "
		    "Nothing was run; wait for some commands to finish and try again.");
		return;
	}
	if (srv->nconns >= srv->cfg->max_connections) {
		server_refuse(srv, fd, uid, pid, s, ERR_BUSY, "global connection limit",
		    "the bridge is busy (connection limit reached). Nothing was run; try again "
		    "in a moment.");
		return;
	}
	c = xcalloc(1, sizeof *c);
	c->srv = srv;
	c->cfg = config_ref(srv->cfg);
	c->id = ++srv->next_id;
	c->state = CONN_HELLO;
	c->uid = uid;
	c->gid = gid;
	c->pid = pid;
	c->session = s;
	c->admin = uid == 0;
	c->child = -1;
	c->fd_in = c->fd_out = c->fd_err = -1;
	clock_gettime(CLOCK_MONOTONIC, &c->start);
	c->bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->timer = evtimer_new(srv->base, conn_timer_cb, c);
	c->free_ev = event_new(srv->base, -1, 0, conn_free_cb, c);
	if (c->bev == NULL || c->timer == NULL || c->free_ev == NULL)
		fatalx("out of memory accepting a connection");
	bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb, c);
	bufferevent_setwatermark(c->bev, EV_READ, 0, PEER_IN_HIGH);
	bufferevent_setwatermark(c->bev, EV_WRITE, PEER_OUT_LOW, 0);
	bufferevent_enable(c->bev, EV_READ);
	TAILQ_INSERT_TAIL(&srv->conns, c, entry);
	srv->nconns++;
	conn_timer(c, srv->cfg->handshake_timeout);
}

/* Re-enable accepting after running out of descriptors. */
static void
server_resume(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	int i;

	(void)fd;
	(void)what;
	for (i = 0; i < srv->nlev; i++)
		evconnlistener_enable(srv->lev[i]);
}

/* accept() failed: on EMFILE/ENFILE pause for a moment instead of spinning. */
static void
server_accept_error(struct evconnlistener *l, void *arg)
{
	struct server *srv = arg;
	struct timeval tv = { 1, 0 };
	int e = EVUTIL_SOCKET_ERROR(), i;

	(void)l;
	log_warnx("accept: %s", strerror(e));
	if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
		for (i = 0; i < srv->nlev; i++)
			evconnlistener_disable(srv->lev[i]);
		evtimer_add(srv->ev_resume, &tv);
	}
}

/* SIGHUP: load the new config next to the old; swap only if it is valid. */
static void
server_reload(struct server *srv)
{
	struct config *nc;
	char *cause = NULL;
	json_t *a = json_object();

	platform_notify("RELOADING=1");
	nc = config_load(srv->config_path, 0, &cause);
	json_object_set_new(a, "event", json_string("reload"));
	if (nc == NULL) {
		log_warnx("reload failed, keeping the running config: %s", cause);
		json_object_set_new(a, "ok", json_false());
		json_object_set_new(a, "reason", json_string(cause));
		audit_write(a, srv->cfg->redact);
		free(cause);
		platform_notify("READY=1");
		return;
	}
	if (strcmp(nc->socket_path, srv->cfg->socket_path) != 0)
		log_warnx("socket path changes take effect at restart");
	if (audit_open(nc->audit_path, &cause) != 0) {
		log_warnx("%s; audit stays on the old file", cause);
		free(cause);
	}
	config_unref(srv->cfg);
	srv->cfg = nc;
	json_object_set_new(a, "ok", json_true());
	json_object_set_new(a, "config_version", json_string(nc->version));
	audit_write(a, nc->redact);
	log_info("configuration reloaded (version %s, %zu sessions)", nc->version,
	    nc->nsessions);
	platform_notify("READY=1");
}

/* Signals: HUP reloads, TERM/INT stop. Handled in the loop, never in signal context. */
static void
server_signal(evutil_socket_t sig, short what, void *arg)
{
	struct server *srv = arg;
	struct conn *c;

	(void)what;
	if (sig == SIGHUP) {
		server_reload(srv);
		return;
	}
	log_info("stopping on signal %d", (int)sig);
	platform_notify("STOPPING=1");
	TAILQ_FOREACH(c, &srv->conns, entry) {
		if (c->child > 0 && !c->reaped) {
			c->killed = KILL_SHUTDOWN;
			conn_kill(c, SIGKILL);
		}
	}
	event_base_loopbreak(srv->base);
}

/* Create, bind and listen on the configured pathname socket. */
static int
server_bind(struct server *srv, char **cause)
{
	const struct config *cfg = srv->cfg;
	struct sockaddr_un sun;
	struct stat st;
	char *dir, *slash;
	mode_t old;
	int fd;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strcpy_checked(sun.sun_path, sizeof sun.sun_path, cfg->socket_path) != 0) {
		xasprintf(cause, "socket path too long: %s", cfg->socket_path);
		return -1;
	}
	/* The directory must be root's: nobody else may swap the socket. */
	dir = xstrdup(cfg->socket_path);
	slash = strrchr(dir, '/');
	*slash = '\0';
	if (stat(*dir ? dir : "/", &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & (S_IWGRP | S_IWOTH))) {
		xasprintf(cause, "the socket directory %s must exist, be owned by root and "
		    "writable by nobody else", dir);
		free(dir);
		return -1;
	}
	free(dir);
	if (lstat(cfg->socket_path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			xasprintf(cause, "%s exists and is not a socket", cfg->socket_path);
			return -1;
		}
		unlink(cfg->socket_path);
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
		xasprintf(cause, "socket: %s", strerror(errno));
		return -1;
	}
	/* umask before bind: the socket never exists with looser permissions. */
	old = umask(0777 & ~(mode_t)cfg->socket_mode);
	if (bind(fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
		umask(old);
		xasprintf(cause, "bind %s: %s", cfg->socket_path, strerror(errno));
		close(fd);
		return -1;
	}
	umask(old);
	if (chown(cfg->socket_path, 0, cfg->socket_gid) != 0 ||
	    chmod(cfg->socket_path, (mode_t)cfg->socket_mode) != 0) {
		xasprintf(cause, "cannot set owner/mode of %s: %s", cfg->socket_path,
		    strerror(errno));
		close(fd);
		return -1;
	}
	if (listen(fd, 512) != 0) {
		xasprintf(cause, "listen: %s", strerror(errno));
		close(fd);
		return -1;
	}
	srv->own_socket = xstrdup(cfg->socket_path);
	return fd;
}

/* Make a root-owned directory with mode, creating it when missing. */
static int
server_mkdir(const char *path, mode_t mode, char **cause)
{
	struct stat st;

	if (mkdir(path, mode) != 0 && errno != EEXIST) {
		xasprintf(cause, "cannot create %s: %s", path, strerror(errno));
		return -1;
	}
	if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0) {
		xasprintf(cause, "%s must be a root-owned directory", path);
		return -1;
	}
	if (chmod(path, mode) != 0) {
		xasprintf(cause, "chmod %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Remove scratch directories a killed daemon left behind. */
static void
server_clean_scratch(const char *dir)
{
	struct dirent *de;
	char *path;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		xasprintf(&path, "%s/%s", dir, de->d_name);
		if (spawn_rmtree(path) != 0)
			log_warnx("cannot remove stale scratch directory %s", path);
		free(path);
	}
	closedir(d);
}

/* Run the daemon until asked to stop. */
int
server_run(struct config *cfg, const char *config_path, char **cause)
{
	static const int sigs[] = { SIGCHLD, SIGHUP, SIGTERM, SIGINT };
	struct server srv;
	struct timeval sec = { 1, 0 };
	struct conn *c;
	int *fds = NULL, n, i, rc = -1;

	memset(&srv, 0, sizeof srv);
	TAILQ_INIT(&srv.conns);
	TAILQ_INIT(&srv.jobs);
	srv.cfg = cfg;
	srv.config_path = config_path;
	srv.started = time(NULL);
	signal(SIGPIPE, SIG_IGN);
	if (platform_harden_self() != 0)
		log_warnx("cannot make the daemon non-dumpable: %s", strerror(errno));
	if (platform_subreaper() != 0)
		log_warnx("cannot become a subreaper: %s", strerror(errno));
	if (server_mkdir(cfg->state_dir, 0755, cause) != 0)
		return -1;
	/* A killed daemon's children may linger: the runner owns nothing else now. */
	if ((n = platform_kill_uid(cfg->runner_uid)) > 0)
		log_warnx("killed %d leftover process%s of the runner %s", n, n == 1 ? "" : "es",
		    cfg->runner);
	xasprintf(&srv.scratch_dir, "%s/run", cfg->state_dir);
	xasprintf(&srv.mirror_dir, "%s/mirrors", cfg->state_dir);
	/* run/: traversable, not listable; every call gets an unguessable 0700 dir. */
	if (server_mkdir(srv.scratch_dir, 0711, cause) != 0)
		goto out;
	server_clean_scratch(srv.scratch_dir);
	if (server_mkdir(srv.mirror_dir, 0711, cause) != 0)
		goto out;
	if (audit_open(cfg->audit_path, cause) != 0)
		goto out;
	if ((srv.base = event_base_new()) == NULL) {
		*cause = xstrdup("cannot create the event loop");
		goto out;
	}
	if ((n = platform_listen_fds(&fds, cause)) < 0)
		goto out;
	if (n == 0) {
		int fd = server_bind(&srv, cause);

		if (fd < 0)
			goto out;
		fds = xcalloc(1, sizeof *fds);
		fds[0] = fd;
		n = 1;
	}
	for (i = 0; i < n && i < MAX_LISTENERS; i++) {
		evutil_make_socket_nonblocking(fds[i]);
		evutil_make_socket_closeonexec(fds[i]);
		srv.lev[i] = evconnlistener_new(srv.base, server_accept, &srv,
		    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fds[i]);
		if (srv.lev[i] == NULL) {
			*cause = xstrdup("cannot listen");
			goto out;
		}
		evconnlistener_set_error_cb(srv.lev[i], server_accept_error);
		srv.nlev++;
	}
	for (i = 0; i < (int)(sizeof sigs / sizeof sigs[0]); i++) {
		srv.ev_sig[i] = evsignal_new(srv.base, sigs[i],
		    sigs[i] == SIGCHLD ? server_sigchld : server_signal, &srv);
		evsignal_add(srv.ev_sig[i], NULL);
	}
	srv.ev_sweep = event_new(srv.base, -1, EV_PERSIST, server_sweep, &srv);
	evtimer_add(srv.ev_sweep, &sec);
	srv.ev_resume = evtimer_new(srv.base, server_resume, &srv);
	srv.ev_orphans = evtimer_new(srv.base, server_orphans, &srv);
	log_info("listening (config version %s, %zu sessions, %zu tools)", cfg->version,
	    cfg->nsessions, cfg->ntools);
	platform_notify("READY=1");
	event_base_dispatch(srv.base);

	/* Stopping: children were killed by the signal handler; reap them briefly. */
	for (i = 0; i < 20; i++) {
		int status;
		pid_t pid;

		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			server_reaped(&srv, pid, status);
		if (srv.nrunning == 0)
			break;
		usleep(50000);
	}
	rc = 0;
out:
	while ((c = TAILQ_FIRST(&srv.conns)) != NULL) {
		if (c->state != CONN_DEAD)
			conn_set_state(c, CONN_DEAD);
		conn_free_cb(-1, 0, c);
	}
	{
		struct secret_job *j;

		while ((j = TAILQ_FIRST(&srv.jobs)) != NULL) {
			kill(-j->pid, SIGKILL);
			if (!j->reaped) {
				while (waitpid(j->pid, &j->status, 0) < 0 && errno == EINTR)
					;
				j->reaped = 1;
			}
			if (j->fd_out >= 0) {
				event_del(j->ev_out);
				close(j->fd_out);
				j->fd_out = -1;
			}
			j->why = xstrdup("stopped: the bridge is stopping");
			secret_job_check(j);
		}
	}
	for (i = 0; i < srv.nlev; i++)
		evconnlistener_free(srv.lev[i]);
	for (i = 0; i < 4; i++) {
		if (srv.ev_sig[i] != NULL)
			event_free(srv.ev_sig[i]);
	}
	if (srv.ev_sweep != NULL)
		event_free(srv.ev_sweep);
	if (srv.ev_resume != NULL)
		event_free(srv.ev_resume);
	if (srv.ev_orphans != NULL)
		event_free(srv.ev_orphans);
	if (srv.own_socket != NULL) {
		unlink(srv.own_socket);
		free(srv.own_socket);
	}
	if (srv.base != NULL)
		event_base_free(srv.base);
	audit_close();
	config_unref(srv.cfg);
	free(srv.scratch_dir);
	free(srv.mirror_dir);
	free(fds);
	return rc;
}
