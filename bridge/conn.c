/*
 * One peer (see conn.h): frames in, the state machine, the relay between the
 * peer and its job, redaction of what the child prints, frames out.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <errno.h>
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
#include <jansson.h>

#include "audit.h"
#include "cgroup.h"
#include "config.h"
#include "conn.h"
#include "filereq.h"
#include "job.h"
#include "keyring.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "redact.h"
#include "secret.h"
#include "server.h"
#include "spawn.h"
#include "util.h"
#include "zygote.h"

#define PEER_IN_HIGH	(FRAME_HDR + FRAME_CTRL_MAX + 4096)	/* peer input cap */
#define PEER_OUT_HIGH	(256 * 1024)	/* stop reading the child above this */
#define PEER_OUT_LOW	(64 * 1024)	/* resume below this */
#define STDIN_HIGH	(256 * 1024)	/* stop reading the peer above this */
#define PEER_SOCK_BUF	(1024 * 1024)	/* socket send buffer asked for */
#define CLOSE_TIMEOUT	10		/* seconds to deliver the final frame */
#define FILES_STDIN_MAX	(1024 * 1024)	/* stdin held while file arguments arrive */
#define RX_CHUNK	(16 * 1024)	/* one read from the peer before the child runs */
#define RX_CHUNK_RUNNING (256 * 1024)	/* ... and while relaying its stdin */

static void	conn_read_frames(struct conn *);
static void	conn_check_done(struct conn *);
static void	conn_peer_closed(struct conn *);
static void	conn_try_answer(struct conn *);

/*
 * Reading from the peer is ours, not the bufferevent's: libevent 2.1 reads a
 * socket 4 KiB per system call (and asks FIONREAD first), which made stdin
 * relaying cost three system calls and a loop turn per 4 KiB. The bufferevent
 * only writes. rx_on says whether the conn's logic wants input; the event is
 * also off while rx holds PEER_IN_HIGH bytes (a whole frame is then waiting).
 */
static void
conn_rx_update(struct conn *c)
{
	int want = c->rx_on && !c->peer_gone && c->ev_read != NULL &&
	    evbuffer_get_length(c->rx) < PEER_IN_HIGH;

	if (want && !c->rx_armed)
		event_add(c->ev_read, NULL);
	else if (!want && c->rx_armed)
		event_del(c->ev_read);
	c->rx_armed = want;
}

/* Read the peer or not (what bufferevent_enable/disable(EV_READ) did). */
static void
conn_reading(struct conn *c, int on)
{
	c->rx_on = on;
	conn_rx_update(c);
}

/* Give up splicing the rest of a STDIN frame: its header goes back in front of rx. */
static void
conn_splice_stop(struct conn *c)
{
	unsigned char hdr[FRAME_HDR];

	if (c->splice_left > 0) {
		frame_put_header(hdr, FRAME_STDIN, (uint32_t)c->splice_left);
		evbuffer_prepend(c->rx, hdr, sizeof hdr);
		c->splice_left = 0;
	}
}

/*
 * While a child runs and nothing is buffered toward it, STDIN payloads go from
 * the socket to its stdin pipe with splice(2): the bytes never enter the daemon
 * (stdin needs no redaction). Only the 5-byte frame headers are read. Returns 1
 * if the event was handled here, 0 to read into rx as usual.
 */
static int
conn_rx_splice(struct conn *c, int fd)
{
	unsigned char hdr[FRAME_HDR];
	const char *cause;
	uint8_t type;
	uint32_t len;
	ssize_t n;

	if (c->no_splice || c->state != CONN_RUNNING || c->job == NULL || c->peer_gone) {
		conn_splice_stop(c);
		return 0;
	}
	if (c->splice_left == 0) {
		if (evbuffer_get_length(c->rx) > 0 || !job_stdin_open(c->job) ||
		    job_stdin_buffered(c->job) > 0)
			return 0;
		/* At a frame boundary with nothing buffered: read just the header. */
		n = recv(fd, hdr, sizeof hdr, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 1;
		if (n <= 0)
			return 0;	/* the usual read sees the end or the error */
		if (n < (ssize_t)sizeof hdr ||
		    frame_parse_header(hdr, &type, &len, &cause) != 0 ||
		    type != FRAME_STDIN || len == 0) {
			evbuffer_add(c->rx, hdr, (size_t)n);	/* not a payload to splice */
			return 0;
		}
		c->splice_left = len;
	}
	if (!job_stdin_open(c->job)) {
		conn_splice_stop(c);	/* the usual path drops what nobody reads */
		return 0;
	}
	n = job_stdin_splice(c->job, fd, c->splice_left);
	if (n > 0) {
		c->splice_left -= (size_t)n;
		c->bytes_in += (uint64_t)n;
		return 1;
	}
	if (n == 0) {
		conn_peer_closed(c);
		return 1;
	}
	switch (errno) {
	case EAGAIN:
	case EINTR:
		return 1;
	case ENOBUFS:
		/* The pipe is full: wait for the child ("written" resumes us). */
		c->peer_paused = 1;
		conn_reading(c, 0);
		return 1;
	case EPIPE:
		conn_splice_stop(c);
		return 0;
	default:
		log_debug("conn %llu: no splice here (%s); reading stdin instead",
		    (unsigned long long)c->id, strerror(errno));
		c->no_splice = 1;
		conn_splice_stop(c);
		return 0;
	}
}

/* The peer is readable: one large read straight into rx, then the frames. */
static void
conn_rx_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	struct evbuffer_iovec v[2];
	size_t room, chunk = c->state == CONN_RUNNING ? RX_CHUNK_RUNNING : RX_CHUNK;
	ssize_t n;
	int nv, i;

	(void)what;
	if (conn_rx_splice(c, fd))
		return;
	if (evbuffer_get_length(c->rx) >= PEER_IN_HIGH) {
		conn_rx_update(c);
		return;
	}
	room = PEER_IN_HIGH - evbuffer_get_length(c->rx);
	if (room > chunk)
		room = chunk;
	if ((nv = evbuffer_reserve_space(c->rx, (ev_ssize_t)room, v, 2)) < 0)
		fatalx("out of memory reading from a peer");
	{
		struct iovec iov[2];
		size_t want = room, got;

		for (i = 0; i < nv; i++) {
			iov[i].iov_base = v[i].iov_base;
			iov[i].iov_len = v[i].iov_len < want ? v[i].iov_len : want;
			want -= iov[i].iov_len;
		}
		n = readv(fd, iov, nv);
		got = n > 0 ? (size_t)n : 0;
		for (i = 0; i < nv; i++) {
			v[i].iov_len = got < iov[i].iov_len ? got : iov[i].iov_len;
			got -= v[i].iov_len;
		}
	}
	if (n <= 0) {
		int again = n < 0 && (errno == EAGAIN || errno == EINTR);

		evbuffer_commit_space(c->rx, v, 0);
		/* A header conn_rx_splice put back may be all there is: parse it first. */
		if (evbuffer_get_length(c->rx) > 0)
			conn_read_frames(c);
		if (c->state == CONN_DEAD)
			return;
		if (!again)
			conn_peer_closed(c);
		else
			conn_rx_update(c);
		return;
	}
	evbuffer_commit_space(c->rx, v, nv);
	conn_read_frames(c);
	if (c->state != CONN_DEAD)
		conn_rx_update(c);
}

/* Name of a state, for logs. */
static const char *
conn_state_name(enum conn_state s)
{
	static const char *names[] = { "hello", "request", "pending", "files", "running",
	    "closing", "dead" };

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
		ok = to == CONN_PENDING || to == CONN_FILES || to == CONN_RUNNING ||
		    to == CONN_CLOSING || to == CONN_DEAD;
		break;
	case CONN_PENDING:
		ok = to == CONN_FILES || to == CONN_RUNNING || to == CONN_CLOSING ||
		    to == CONN_DEAD;
		break;
	case CONN_FILES:
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
double
conn_elapsed(const struct conn *c)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - c->start.tv_sec) +
	    (double)(now.tv_nsec - c->start.tv_nsec) / 1e9;
}

/* Start an audit record with the fields every line carries. */
json_t *
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
void
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
void
conn_send_json(struct conn *c, uint8_t type, json_t *obj)
{
	char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);

	json_decref(obj);
	if (s == NULL)
		fatalx("cannot encode a control message");
	conn_send(c, type, s, strlen(s));
	free(s);
}

/* Milliseconds on the monotonic clock. */
static int64_t
conn_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * A running request's wait for a decision ends without one (the peer or the
 * child went away): abandon runs (it audits), and nothing waits any more.
 */
static void
conn_pending_drop(struct conn *c)
{
	void (*abandon)(void *) = c->pending_abandon;
	void *arg = c->pending_arg;

	if (abandon == NULL)
		return;
	c->pending_expired = NULL;
	c->pending_cancel = NULL;
	c->pending_abandon = NULL;
	c->pending_arg = NULL;
	abandon(arg);
}

/* Arm the connection's single timer, ms milliseconds from now. */
static void
conn_timer_ms(struct conn *c, int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(c->timer, &tv);
}

/* The same in seconds. */
static void
conn_timer(struct conn *c, int seconds)
{
	conn_timer_ms(c, (int64_t)seconds * 1000);
}

/* End the connection with a final ERROR frame: code for the shim, message for the agent. */
void
conn_error(struct conn *c, const char *code, const char *message)
{
	char *red = redact_string(conn_redact(c), message);
	json_t *o = json_object();

	json_object_set_new(o, "code", json_string(code));
	json_object_set_new(o, "message", json_string(red != NULL ? red : "(redaction failed)"));
	free(red);
	conn_send_json(c, FRAME_ERROR, o);
	conn_reading(c, 0);
	conn_set_state(c, CONN_CLOSING);
	conn_timer(c, CLOSE_TIMEOUT);
	if (c->bev == NULL || c->peer_gone ||
	    evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		conn_schedule_free(c);
}

/* Finish without a child: an EXIT frame with code, then close once written. */
void
conn_exit(struct conn *c, int code)
{
	json_t *ex = json_object();

	json_object_set_new(ex, "code", json_integer(code));
	conn_send_json(c, FRAME_EXIT, ex);
	conn_set_state(c, CONN_CLOSING);
	conn_reading(c, 0);
	conn_timer(c, CLOSE_TIMEOUT);
}

/* A malformed peer: audit it, tell it, close it. */
void
conn_protocol_error(struct conn *c, const char *why)
{
	json_t *a = conn_audit_base(c, "protocol-error");

	json_object_set_new(a, "reason", json_string(why));
	audit_write(a, conn_redact(c));
	c->srv->n_errors++;
	conn_error(c, ERR_PROTOCOL, why);
}

/* Refuse a request politely: audit, count, final error frame. */
void
conn_deny(struct conn *c, const char *code, const char *reason, const char *message)
{
	json_t *a = conn_audit_base(c, "denied");

	json_object_set_new(a, "reason", json_string(reason));
	audit_write(a, conn_redact(c));
	c->srv->n_denied++;
	conn_error(c, code, message);
}

/* Limits shared by every op that runs something. */
int
conn_check_busy(struct conn *c)
{
	int limit = c->session->max_concurrent > 0 ? c->session->max_concurrent :
	    c->cfg->max_per_session;
	char *msg;

	if (server_session_running(c->srv, c->session) < limit)
		return 0;
	xasprintf(&msg, "the bridge is busy: this session already has %d commands running "
	    "(its limit). Nothing was run; wait for some to finish and try again.", limit);
	conn_deny(c, ERR_BUSY, "session concurrency limit", msg);
	free(msg);
	return -1;
}

/* Free a connection now; never from inside a callback of c. */
void
conn_free(struct conn *c)
{
	if (c->state != CONN_DEAD)
		conn_set_state(c, CONN_DEAD);
	TAILQ_REMOVE(&c->srv->conns, c, entry);
	c->srv->nconns--;
	/* A child still running has its whole group killed; the reaper finds no job. */
	job_free(c->job);
	if (c->files != NULL) {
		filereq_free(c->files);
		if (c->files_abandon != NULL)
			c->files_abandon(c->files_arg);
	}
	if (c->pending_abandon != NULL)
		c->pending_abandon(c->pending_arg);
	if (c->early_in != NULL)
		evbuffer_free(c->early_in);
	if (c->ev_read != NULL)
		event_free(c->ev_read);
	if (c->rx != NULL)
		evbuffer_free(c->rx);
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	event_free(c->timer);
	event_free(c->free_ev);
	redact_free(c->red_out);
	redact_free(c->red_err);
	if (c->op_state_free != NULL)
		c->op_state_free(c->op_state);
	if (c->scratch != NULL) {
		zygote_scratch_done(c->srv->zygote, c->scratch);
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

/* The zero-timeout event that frees a dead connection. */
static void
conn_free_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_free(arg);
}

/* Mark dead and free from the loop, never from inside a callback of c. */
void
conn_schedule_free(struct conn *c)
{
	if (c->state == CONN_DEAD)
		return;
	conn_set_state(c, CONN_DEAD);
	conn_reading(c, 0);
	if (c->bev != NULL)
		bufferevent_disable(c->bev, EV_WRITE);
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

	if (c->bev == NULL || c->peer_gone || c->job == NULL)
		return;
	backlog = evbuffer_get_length(bufferevent_get_output(c->bev));
	if (!job_output_paused(c->job) && backlog > PEER_OUT_HIGH)
		job_pause_output(c->job, 1);
	else if (job_output_paused(c->job) && backlog <= PEER_OUT_LOW)
		job_pause_output(c->job, 0);
}

/* Job callback: child output was read: count, cap, redact, frame. */
static void
conn_job_output(struct job *j, enum job_stream s, const unsigned char *buf, size_t n,
    void *arg)
{
	struct conn *c = arg;
	struct sink_ctx sc = { c, s == JOB_ERR ? FRAME_STDERR : FRAME_STDOUT };
	struct redact *r = s == JOB_ERR ? c->red_err : c->red_out;

	c->bytes_out += (uint64_t)n;
	if (c->killed == KILL_OUTPUT)
		return;		/* draining what is left of a killed child */
	if (c->bytes_out > c->output_limit) {
		c->killed = KILL_OUTPUT;
		job_kill(j, SIGKILL);
		return;
	}
	if (c->peer_gone)
		return;
	if (r == NULL)
		conn_sink(&sc, buf, n);	/* git's pack stream: see op_git */
	else if (redact_feed(r, buf, n, conn_sink, &sc) != 0)
		log_warnx("conn %llu: redaction sink failed", (unsigned long long)c->id);
	conn_output_flow(c);
}

/* Job callback: one of the child's output pipes ended: flush the redactor, mark the stream. */
static void
conn_job_eof(struct job *j, enum job_stream s, void *arg)
{
	struct conn *c = arg;
	struct sink_ctx sc = { c, s == JOB_ERR ? FRAME_STDERR : FRAME_STDOUT };
	struct redact *r = s == JOB_ERR ? c->red_err : c->red_out;

	(void)j;
	if (r != NULL && c->killed != KILL_OUTPUT)
		redact_flush(r, conn_sink, &sc);
	conn_send(c, sc.type, NULL, 0);	/* EOF marker */
	if (s == JOB_ERR)
		c->err_ended = 1;
	else
		c->out_ended = 1;
	conn_try_answer(c);
}

/* Send the early answer once it is due (see conn_answer). */
static void
conn_try_answer(struct conn *c)
{
	json_t *o;

	if (c->answer < 0 || c->answered || c->state != CONN_RUNNING || c->peer_gone ||
	    c->killed != KILL_NONE || c->pending_expired != NULL || !c->out_ended ||
	    !c->err_ended || job_state(c->job) != JOB_RUNNING)
		return;
	c->answered = 1;
	clock_gettime(CLOCK_MONOTONIC, &c->answered_at);
	o = json_object();
	json_object_set_new(o, "code", json_integer(c->answer));
	conn_send_json(c, FRAME_EXIT, o);
	conn_reading(c, 0);
}

/* The child's answer is known before its end (conn.h). */
void
conn_answer(struct conn *c, int code)
{
	if (c->answer >= 0 || code < 0 || code > 255)
		return;
	c->answer = code;
	conn_try_answer(c);
}

/* Job callback: stdin was written; resume reading the peer below half the cap. */
static void
conn_job_written(struct job *j, void *arg)
{
	struct conn *c = arg;

	if (c->peer_paused && job_stdin_buffered(j) < STDIN_HIGH / 2) {
		c->peer_paused = 0;
		conn_reading(c, 1);
		conn_read_frames(c);	/* frames may already be buffered */
	}
}

/* Job callback: reaped or drained. */
static void
conn_job_state(struct job *j, void *arg)
{
	struct conn *c = arg;

	if (c->state == CONN_RUNNING)
		conn_check_done(c);
	else if (c->state == CONN_CLOSING && c->peer_gone && job_state(j) == JOB_DEAD)
		conn_schedule_free(c);
}

static const struct job_cb conn_job_cb = {
	conn_job_output, conn_job_eof, conn_job_written, conn_job_state
};

/* The redactor for audit lines and messages: every live secret. */
const struct redact *
conn_redact(const struct conn *c)
{
	return keyring_redactor(c->srv->keyring);
}

/*
 * An output stream redactor for a request: a stream on the keyring's one
 * automaton of every live secret of every session (and the values renewals and
 * reloads replaced), not just the request's own. NULL on failure.
 */
struct redact *
conn_redactor(struct conn *c)
{
	const struct redact *r = keyring_redactor(c->srv->keyring);

	return r != NULL ? redact_new_stream(r) : NULL;
}

/* Start the child and the relay; on failure send an error and return -1. */
int
conn_start(struct conn *c, const char *path, char *const *argv, struct envbuild *env,
    int cwd_fd, const char *cwd, int timeout, const struct jail *jail)
{
	struct spawn_req r;
	struct child ch;
	char *cause = NULL;

	memset(&r, 0, sizeof r);
	r.path = path;
	r.argv = argv;
	r.envp = envbuild_array(env);
	r.uid = c->session->runner_uid;
	r.gid = c->session->runner_gid;
	r.cwd_fd = cwd_fd;
	r.cwd = cwd;
	r.cpu_seconds = timeout + 5;
	r.extra_fd = c->child_fd3;
	r.jail = jail;
	ch.pid = -1;
	if ((r.cgroup_fd = cgroup_session_fd(c->session->name, &cause)) < 0 ||
	    spawn_child(&r, &ch, &cause) != 0) {
		if (r.cgroup_fd > 2)
			close(r.cgroup_fd);
		json_t *a = conn_audit_base(c, "error");
		char *msg;

		if (ch.pid > 0) {
			/* Started but unusable: reaped by the SIGCHLD handler. */
			c->job = job_new(c->srv->base, &ch, &conn_job_cb, c);
			job_kill(c->job, SIGKILL);
		}
		json_object_set_new(a, "reason", json_string(cause));
		audit_write(a, conn_redact(c));
		xasprintf(&msg, "%s could not be started on the host (%s). Nothing was run; "
		    "tell the operator.", c->tool, cause);
		conn_error(c, ERR_UNAVAILABLE, msg);
		free(msg);
		free(cause);
		c->srv->n_errors++;
		return -1;
	}
	if (r.cgroup_fd > 2)
		close(r.cgroup_fd);
	c->job = job_new(c->srv->base, &ch, &conn_job_cb, c);
	conn_set_state(c, CONN_RUNNING);
	c->run_until = conn_now_ms() + (int64_t)timeout * 1000;
	conn_timer(c, timeout);
	return 0;
}

/* Ask the peer for the request's file arguments, then wait in CONN_FILES. */
void
conn_fetch_files(struct conn *c, struct filereq *fr,
    void (*done)(struct conn *, void *, char *const *), void (*abandon)(void *), void *arg)
{
	size_t i;

	c->files = fr;
	c->files_done = done;
	c->files_abandon = abandon;
	c->files_arg = arg;
	if (c->early_in == NULL && (c->early_in = evbuffer_new()) == NULL)
		fatalx("evbuffer_new");
	for (i = 0; i < filereq_count(fr); i++) {
		const char *p = filereq_path(fr, i);

		conn_send(c, FRAME_FILE_REQ, p, strlen(p));
	}
	conn_set_state(c, CONN_FILES);
	conn_timer(c, c->cfg->handshake_timeout);
}

/* Hand the child what was held while the request waited, once it runs. */
static void
conn_flush_early(struct conn *c)
{
	size_t n;

	if (c->state == CONN_RUNNING && c->job != NULL) {
		if ((n = evbuffer_get_length(c->early_in)) > 0)
			job_stdin(c->job, c->early_in, n);
		if (c->early_eof)
			job_stdin_eof(c->job);
		if (c->early_sig != 0)
			job_kill(c->job, c->early_sig);
	}
	evbuffer_free(c->early_in);
	c->early_in = NULL;
}

/* Every file arrived: let the op start its child, then hand it what was held. */
static void
conn_files_finish(struct conn *c)
{
	struct filereq *fr = c->files;
	void *arg = c->files_arg;

	evtimer_del(c->timer);
	c->files = NULL;
	c->files_arg = NULL;
	c->files_done(c, arg, filereq_copies(fr));	/* arg transferred */
	filereq_free(fr);
	conn_flush_early(c);
}

/* Wait for a decision in CONN_PENDING, or held in CONN_RUNNING (see conn.h). */
void
conn_pending(struct conn *c, int timeout, void (*expired)(struct conn *, void *),
    void (*cancel)(struct conn *, void *), void (*abandon)(void *), void *arg)
{
	if (c->pending_expired != NULL)
		fatalx("conn %llu: already pending", (unsigned long long)c->id);
	c->pending_expired = expired;
	c->pending_cancel = cancel;
	c->pending_abandon = abandon;
	c->pending_arg = arg;
	if (c->state == CONN_RUNNING) {
		/* The child waits for the operator: its time limit waits with it. */
		c->held_since = conn_now_ms();
		conn_timer(c, timeout);
		return;
	}
	if (c->early_in == NULL && (c->early_in = evbuffer_new()) == NULL)
		fatalx("evbuffer_new");
	conn_set_state(c, CONN_PENDING);
	conn_timer(c, timeout);
}

/* The wait is over: let go decide what happens next. */
void
conn_pending_resume(struct conn *c, void (*go)(struct conn *, void *), void *arg)
{
	int64_t now = conn_now_ms(), left;

	if (c->pending_expired == NULL || (c->state != CONN_PENDING &&
	    c->state != CONN_RUNNING))
		fatalx("conn %llu: resumed while not pending", (unsigned long long)c->id);
	evtimer_del(c->timer);
	c->pending_expired = NULL;
	c->pending_cancel = NULL;
	c->pending_abandon = NULL;
	c->pending_arg = NULL;
	if (c->state == CONN_RUNNING) {
		/*
		 * The wall clock again, with the time spent waiting added (in
		 * milliseconds: whole seconds could take up to a second off the
		 * limit, or add one).
		 */
		c->run_until += now - c->held_since;
		left = c->run_until - now;
		conn_timer_ms(c, left > 0 ? left : 1);
	}
	go(c, arg);	/* arg transferred */
	if (c->state == CONN_FILES)
		return;	/* held input stays held until the files arrived */
	if (c->early_in != NULL)
		conn_flush_early(c);
}

/* The signal a SIGNAL frame names, if a terminal could send it; else -1. */
static int
conn_frame_signal(struct evbuffer *in, uint32_t len)
{
	char tmp[FRAME_SMALL_MAX + 1];
	json_t *j, *v;
	int sig;

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
	return sig;
}

/* A frame while file arguments arrive or a decision is awaited; -1 for a protocol error. */
static int
conn_on_files_frame(struct conn *c, uint8_t type, struct evbuffer *in, uint32_t len)
{
	char *msg = NULL;
	json_t *j;
	int sig;

	switch (type) {
	case FRAME_FILE_DATA:
	case FRAME_FILE_END:
		if (c->state != CONN_FILES)
			return -1;
		switch (filereq_frame(c->files, type, evbuffer_pullup(in, len), len, &msg)) {
		case FILEREQ_MORE:
			evbuffer_drain(in, len);
			break;
		case FILEREQ_DONE:
			evbuffer_drain(in, len);
			conn_files_finish(c);
			break;
		case FILEREQ_REFUSED:
			evbuffer_drain(in, len);
			conn_deny(c, ERR_DENIED, "file argument unavailable", msg);
			break;
		case FILEREQ_BAD:
			evbuffer_drain(in, len);
			conn_protocol_error(c, msg);
			break;
		}
		free(msg);
		return 0;
	case FRAME_STDIN:
		c->bytes_in += len;
		if (len == 0)
			c->early_eof = 1;
		else if (c->early_eof)
			evbuffer_drain(in, len);
		else if (evbuffer_get_length(c->early_in) + len > FILES_STDIN_MAX) {
			evbuffer_drain(in, len);
			if (c->state == CONN_PENDING)
				conn_deny(c, ERR_DENIED, "stdin while waiting for approval",
				    "shimbridge: refused: more than 1 MiB of stdin: the command "
				    "waits for approval and stdin is held until then; pass the "
				    "data in a file instead.");
			else
				conn_deny(c, ERR_DENIED, "stdin before the file arguments", "more "
				    "than 1 MiB of stdin arrived before the command's file "
				    "arguments were read. Nothing was run; pass the data in a file "
				    "instead.");
		} else
			evbuffer_remove_buffer(in, c->early_in, len);
		return 0;
	case FRAME_SIGNAL:
		if ((sig = conn_frame_signal(in, len)) < 0)
			return -1;
		if (sig == SIGWINCH || sig == SIGPIPE)
			return 0;
		if (c->state == CONN_PENDING)
			c->pending_cancel(c, c->pending_arg);	/* the agent gave up */
		else
			c->early_sig = sig;
		return 0;
	case FRAME_WINSIZE:
		j = json_loadb((char *)evbuffer_pullup(in, len), len, JSON_REJECT_DUPLICATES, NULL);
		sig = j != NULL && json_is_integer(json_object_get(j, "rows")) &&
		    json_is_integer(json_object_get(j, "cols"));
		json_decref(j);
		evbuffer_drain(in, len);
		return sig ? 0 : -1;
	default:
		return -1;
	}
}

/* A REQUEST frame arrived: parse it and hand it to its op. */
static void
conn_on_request(struct conn *c, const char *buf, size_t len)
{
	const struct op *op;
	json_error_t je;
	json_t *req, *jop;

	req = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (req == NULL) {
		char msg[512];

		snprintf(msg, sizeof msg, "the request could not be read (%s). Arguments, "
		    "the working directory and environment values must be valid UTF-8 "
		    "without NUL bytes; pass other data through stdin or a file", je.text);
		conn_protocol_error(c, msg);
		return;
	}
	if (!json_is_object(req) || !json_is_string(jop = json_object_get(req, "op"))) {
		json_decref(req);
		conn_protocol_error(c, "the request is not a JSON object with an \"op\"");
		return;
	}
	c->op = xstrdup(json_string_value(jop));
	clock_gettime(CLOCK_MONOTONIC, &c->start);
	evtimer_del(c->timer);
	op = ops_find(c->op);
	if (c->admin && (op == NULL || !op->admin_only))
		conn_protocol_error(c, "root may only ask for status; run tools as a "
		    "session user");
	else if (!c->admin && (op == NULL || op->admin_only))
		conn_protocol_error(c, "unknown op");
	else {
		c->opdef = op;
		op->handler(c, req);
	}
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
			job_stdin_eof(c->job);
			return 0;
		}
		if (!job_stdin_open(c->job)) {
			evbuffer_drain(in, len);	/* nobody reads it any more */
			return 0;
		}
		job_stdin(c->job, in, len);
		if (job_stdin_buffered(c->job) > STDIN_HIGH) {
			c->peer_paused = 1;
			conn_reading(c, 0);
		}
		return 0;
	case FRAME_SIGNAL:
		if ((sig = conn_frame_signal(in, len)) < 0)
			return -1;
		if (c->pending_cancel != NULL && (sig == SIGINT || sig == SIGTERM ||
		    sig == SIGHUP)) {
			/* The agent gave up waiting: refused, and the child says so. */
			c->pending_cancel(c, c->pending_arg);
			return 0;
		}
		job_kill(c->job, sig);
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
	in = c->rx;
	while (!c->peer_paused && (c->state == CONN_HELLO || c->state == CONN_REQUEST ||
	    c->state == CONN_PENDING || c->state == CONN_FILES || c->state == CONN_RUNNING)) {
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
		} else if (c->state == CONN_FILES || c->state == CONN_PENDING) {
			if (conn_on_files_frame(c, type, in, len) != 0) {
				conn_protocol_error(c, c->state == CONN_PENDING ? "unexpected or "
				    "malformed frame while the request waits for approval" :
				    "unexpected or malformed frame while the file arguments arrive");
				return;
			}
		} else if (conn_on_running_frame(c, type, in, len) != 0) {
			conn_protocol_error(c, "unexpected or malformed frame while running");
			return;
		}
	}
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

/* Writing to the peer failed. */
static void
conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		conn_peer_closed(arg);
}

/* Peer closed or failed. */
static void
conn_peer_closed(struct conn *c)
{
	if (c->peer_gone)
		return;
	if (c->state == CONN_RUNNING)
		conn_pending_drop(c);
	if (c->state == CONN_RUNNING && job_state(c->job) == JOB_RUNNING && !c->answered) {
		json_t *a = conn_audit_base(c, "peer-gone");

		audit_write(a, conn_redact(c));
		c->killed = KILL_PEER;
		job_kill(c->job, SIGKILL);
	}
	c->peer_gone = 1;
	conn_reading(c, 0);
	bufferevent_disable(c->bev, EV_WRITE);
	if (c->state == CONN_RUNNING) {
		/* Keep draining the child's pipes; freed once reaped and drained. */
		job_pause_output(c->job, 0);
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
	case CONN_PENDING:
		c->pending_expired(c, c->pending_arg);
		break;
	case CONN_FILES:
		conn_protocol_error(c, "the file arguments did not arrive in time");
		break;
	case CONN_RUNNING:
		if (c->pending_expired != NULL) {
			c->pending_expired(c, c->pending_arg);
			break;
		}
		if (job_state(c->job) != JOB_RUNNING)
			break;
		if (c->killed == KILL_NONE)
			c->killed = KILL_TIMEOUT;
		if (job_stop(c->job) == 0)
			conn_timer(c, c->cfg->kill_grace);
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

/* Finish once the child is reaped and both output pipes are drained. */
static void
conn_check_done(struct conn *c)
{
	int status;
	json_t *a, *o;
	char *msg;

	if (c->state != CONN_RUNNING || job_state(c->job) != JOB_CLOSED)
		return;
	conn_pending_drop(c);	/* the child ended while it waited for a decision */
	status = job_status(c->job);
	if (c->opdef != NULL && c->opdef->done != NULL)
		c->opdef->done(c);
	a = conn_audit_base(c, "done");
	json_object_set_new(a, "duration", json_real(conn_elapsed(c)));
	json_object_set_new(a, "bytes_in", json_integer((json_int_t)c->bytes_in));
	json_object_set_new(a, "bytes_out", json_integer((json_int_t)c->bytes_out));
	if (WIFEXITED(status))
		json_object_set_new(a, "exit", json_integer(WEXITSTATUS(status)));
	else if (WIFSIGNALED(status)) {
		const char *n = proto_signame(WTERMSIG(status));

		json_object_set_new(a, "signal", json_string(n != NULL ? n : "?"));
	}
	if (c->killed != KILL_NONE) {
		static const char *why[] = { "", "timeout", "output-limit", "peer-gone", "shutdown",
		    "session-removed" };

		json_object_set_new(a, "killed", json_string(why[c->killed]));
	}
	if (c->answered) {
		struct timespec *t = &c->answered_at;

		json_object_set_new(a, "answered", json_real((double)(t->tv_sec - c->start.tv_sec) +
		    (double)(t->tv_nsec - c->start.tv_nsec) / 1e9));
	}
	audit_write(a, conn_redact(c));
	c->srv->n_completed++;
	if (c->peer_gone) {
		conn_schedule_free(c);
		return;
	}
	if (c->answered) {
		/* The peer has its EXIT; what the child did after it is in the audit alone. */
		conn_set_state(c, CONN_CLOSING);
		conn_timer(c, CLOSE_TIMEOUT);
		if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
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
	if (c->killed == KILL_SESSION) {
		xasprintf(&msg, "%s was stopped: this account's shimbridge session was "
		    "removed from the bridge's configuration while it ran. Output so far was "
		    "delivered; nothing more runs for this account. Ask the operator.", c->tool);
		conn_error(c, ERR_UNAUTHORIZED, msg);
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
	if (WIFSIGNALED(status) && proto_signame(WTERMSIG(status)) != NULL)
		json_object_set_new(o, "signal", json_string(proto_signame(WTERMSIG(status))));
	else if (WIFSIGNALED(status))
		json_object_set_new(o, "code", json_integer(128 + WTERMSIG(status)));
	else
		json_object_set_new(o, "code", json_integer(WEXITSTATUS(status)));
	conn_send_json(c, FRAME_EXIT, o);
	conn_set_state(c, CONN_CLOSING);
	conn_timer(c, CLOSE_TIMEOUT);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		conn_schedule_free(c);
}

/* The daemon is stopping: kill a running child. */
void
conn_shutdown(struct conn *c)
{
	if (c->job != NULL && job_state(c->job) == JOB_RUNNING) {
		c->killed = KILL_SHUTDOWN;
		job_kill(c->job, SIGKILL);
	}
}

/* Its session is gone: kill a running child (the session's cgroup, if any, is killed too). */
void
conn_session_removed(struct conn *c)
{
	if (c->job != NULL && job_state(c->job) == JOB_RUNNING) {
		c->killed = KILL_SESSION;
		job_kill(c->job, SIGKILL);
	}
}

/* The sweep's look at one connection (see conn.h). */
int
conn_sweep(struct conn *c, time_t now)
{
	if (c->state != CONN_RUNNING || job_state(c->job) != JOB_DEAD)
		return 0;
	/*
	 * Unread output, or a relay paused for a slow peer (its EOF is simply not
	 * read yet), means we are behind, not that an escaped process holds the
	 * pipes: closing them now could drop the tail of a finished child's output.
	 */
	if (now - job_reaped_at(c->job) > c->cfg->kill_grace + 2 &&
	    !job_output_paused(c->job) && !job_output_pending(c->job)) {
		/* Someone outside our reach holds the pipes: stop waiting. */
		log_warnx("conn %llu: output pipes still open after the child exited; "
		    "closing them", (unsigned long long)c->id);
		job_close_output(c->job, -1);
	}
	return 1;
}

/* A new peer: set up its buffers and timers and wait for HELLO. */
struct conn *
conn_new(struct server *srv, int fd, uid_t uid, gid_t gid, pid_t pid,
    const struct session *s)
{
	struct conn *c = xcalloc(1, sizeof *c);

	c->srv = srv;
	c->cfg = config_ref(srv->cfg);
	c->id = ++srv->next_id;
	c->state = CONN_HELLO;
	c->uid = uid;
	c->gid = gid;
	c->pid = pid;
	c->session = s;
	c->admin = uid == 0;
	c->answer = -1;
	clock_gettime(CLOCK_MONOTONIC, &c->start);
	{
		/* Output moves in larger bursts (kernel memory is taken only when used). */
		int sz = PEER_SOCK_BUF;

		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
	}
	c->bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->timer = evtimer_new(srv->base, conn_timer_cb, c);
	c->free_ev = event_new(srv->base, -1, 0, conn_free_cb, c);
	if (c->bev == NULL || c->timer == NULL || c->free_ev == NULL)
		fatalx("out of memory accepting a connection");
	c->ev_read = event_new(srv->base, fd, EV_READ | EV_PERSIST, conn_rx_cb, c);
	c->rx = evbuffer_new();
	if (c->ev_read == NULL || c->rx == NULL)
		fatalx("out of memory accepting a connection");
	bufferevent_setcb(c->bev, NULL, conn_write_cb, conn_event_cb, c);
	bufferevent_setwatermark(c->bev, EV_WRITE, PEER_OUT_LOW, 0);
	/* libevent's default is 16 KiB per write; a relay wants fewer, larger ones. */
	bufferevent_set_max_single_write(c->bev, PEER_OUT_HIGH);
	bufferevent_enable(c->bev, EV_WRITE);
	conn_reading(c, 1);
	TAILQ_INSERT_TAIL(&srv->conns, c, entry);
	srv->nconns++;
	conn_timer(c, srv->cfg->handshake_timeout);
	return c;
}
