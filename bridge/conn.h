/*
 * One peer: its frames, its state machine and the relay between it and its
 * child (a job). The op handlers (op-*.c) fill in a request and call
 * conn_start; every refusal goes through conn_deny or conn_protocol_error.
 *
 *   CONN_HELLO -> CONN_REQUEST [-> CONN_PENDING] [-> CONN_FILES] -> CONN_RUNNING
 *     -> CONN_CLOSING -> CONN_DEAD
 *   (any live state may go to CONN_CLOSING or CONN_DEAD; transitions asserted)
 *
 * A request is finished only when its job is JOB_CLOSED (reaped AND drained).
 * A conn is never freed inside its own callbacks: conn_schedule_free marks it
 * dead and frees it from a zero-timeout event.
 */
#ifndef SHIMBRIDGE_CONN_H
#define SHIMBRIDGE_CONN_H

#include <sys/queue.h>
#include <sys/types.h>

#include <stdint.h>
#include <time.h>

#include <jansson.h>

struct bufferevent;
struct config;
struct envbuild;
struct jail;
struct event;
struct evbuffer;
struct filereq;
struct job;
struct op;
struct redact;
struct server;
struct session;

enum conn_state {
	CONN_HELLO,	/* accepted; waiting for the client's HELLO */
	CONN_REQUEST,	/* HELLO answered; waiting for the REQUEST */
	CONN_PENDING,	/* an "ask" rule matched: waiting for approval (pending.c) */
	CONN_FILES,	/* allowed; fetching its file arguments from the peer (FILE_REQ) */
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
	KILL_SESSION,	/* its session was removed by a reload */
};

/* Everything about one peer. */
struct conn {
	TAILQ_ENTRY(conn)	 entry;
	struct server		*srv;
	struct config		*cfg;		/* reference held for the request's life */
	uint64_t		 id;
	enum conn_state		 state;
	struct bufferevent	*bev;		/* writes to the peer */
	struct event		*ev_read;	/* reads from the peer (conn_rx_cb) */
	struct evbuffer		*rx;		/* bytes read, not yet parsed */
	int			 rx_on;		/* reading wanted (not paused/closing) */
	int			 rx_armed;	/* ev_read is added */
	size_t			 splice_left;	/* STDIN payload still to splice from the socket */
	int			 no_splice;	/* splice failed here: always read */
	struct event		*timer;		/* handshake, wall clock, kill grace, close */
	struct event		*free_ev;
	uid_t			 uid;		/* from the kernel, at accept */
	gid_t			 gid;
	pid_t			 pid;
	const struct session	*session;	/* NULL for the admin (root) peer */
	int			 admin;
	const struct op		*opdef;		/* the op being served, or NULL */
	char			*op;
	char			*tool;
	json_t			*argv;		/* for audit lines */
	char			*cwd;
	char			*rule;
	struct timespec		 start;

	struct job		*job;		/* the child, or NULL */
	enum conn_kill		 killed;
	int			 peer_paused;	/* not reading the peer: stdin backpressure */
	int			 peer_gone;
	struct redact		*red_out, *red_err;	/* NULL: relayed as it is */
	uint64_t		 bytes_in, bytes_out;
	uint64_t		 output_limit;
	char			*scratch;	/* the call's private directory, removed at free */
	int			 child_fd3;	/* > 2: conn_start gives it to the child as fd 3 */
	void			*op_state;	/* the op's own state for this request, or NULL */
	void			(*op_state_free)(void *);	/* ...freed with the conn */
	/* CONN_FILES: the file exchange and the op waiting for it (conn_fetch_files). */
	struct filereq		*files;
	void			(*files_done)(struct conn *, void *, char *const *);
	void			(*files_abandon)(void *);
	void			*files_arg;
	/* CONN_PENDING: the waiter (conn_pending). */
	void			(*pending_expired)(struct conn *, void *);
	void			(*pending_cancel)(struct conn *, void *);
	void			(*pending_abandon)(void *);
	void			*pending_arg;
	int64_t			 run_until;	/* CONN_RUNNING: the wall-clock limit (monotonic ms) */
	int64_t			 held_since;	/* ...held while pending since then (monotonic ms) */
	struct evbuffer		*early_in;	/* stdin that came before the child */
	int			 early_eof;
	int			 early_sig;	/* a signal that came before the child */
	size_t			 close_left;	/* output still queued at the last close check */
	/* An answer before the end (conn_answer): the peer has its EXIT, the child runs on. */
	int			 answer;	/* the code to send, or -1 */
	int			 answered;	/* EXIT sent: the peer's going is no kill */
	struct timespec		 answered_at;
	int			 out_ended, err_ended;	/* the child's stdout / stderr ended */
};

/* A new peer on fd (transferred) with kernel credentials; session NULL for root. */
struct conn	*conn_new(struct server *, int fd, uid_t, gid_t, pid_t,
		    const struct session *);
/* Free at once (the daemon is stopping; never from a callback of c). */
void		 conn_free(struct conn *);
/* Mark dead and free from the loop. */
void		 conn_schedule_free(struct conn *);
/* The daemon is stopping: kill the child. */
void		 conn_shutdown(struct conn *);
/* A reload removed c's session: kill its child (its whole group). */
void		 conn_session_removed(struct conn *);
/*
 * The sweep: a reaped child whose pipes are held open by an escaped process
 * for longer than the kill grace has them closed. Returns 1 if c waits for a
 * reaped child's pipes.
 */
int		 conn_sweep(struct conn *, time_t now);

/* Start an audit record with the fields every line carries. */
json_t		*conn_audit_base(const struct conn *, const char *event);
/* Queue one frame to the peer (nothing once it is gone). */
void		 conn_send(struct conn *, uint8_t type, const void *, size_t);
/* Queue a JSON frame (obj consumed). */
void		 conn_send_json(struct conn *, uint8_t type, json_t *obj);
/* End with a final ERROR frame: code for the shim, message for the agent (redacted). */
void		 conn_error(struct conn *, const char *code, const char *message);
/* A malformed peer: audit it, tell it, close it. */
void		 conn_protocol_error(struct conn *, const char *why);
/* Refuse a request politely: audit ("denied", reason), count, final error frame. */
void		 conn_deny(struct conn *, const char *code, const char *reason,
		    const char *message);
/* The session's concurrency limit: 0 if one more may run, else denied and -1. */
int		 conn_check_busy(struct conn *);
/*
 * The running child says the peer's answer is known (op "git": shimbridge-git's "D"
 * record): once its stdout and stderr have ended and been relayed, the peer gets
 * EXIT with code while the child finishes on its own time, still under the call's
 * limits; its end is audited as ever, and it no longer counts toward its session's
 * connection and running limits (server.c). Once per request; ignored after a kill.
 */
void		 conn_answer(struct conn *, int code);
/* Finish a request without a child: EXIT code frame, then close. */
void		 conn_exit(struct conn *, int code);
/*
 * A new output stream redactor that masks every live secret of every session
 * (the keyring's one automaton, shared by reference); NULL on failure.
 */
struct redact	*conn_redactor(struct conn *);
/* The redactor for audit lines and messages to the peer: every live secret. */
const struct redact *conn_redact(const struct conn *);
/*
 * Start the child and the relay as the runner (c->scratch, c->output_limit,
 * c->red_* set by the op). On failure an error is sent and -1 returned.
 */
/* jail: NULL, or the call's jail (bridge/jail.h); the child runs as the session's runner. */
int		 conn_start(struct conn *, const char *path, char *const *argv,
		    struct envbuild *, int cwd_fd, const char *cwd, int timeout,
		    const struct jail *jail);
/*
 * Fetch an allowed request's file arguments from the peer before its child starts
 * (docs/PROTOCOL.md "File arguments"): fr (transferred) names them; one FILE_REQ
 * each goes out and the conn enters CONN_FILES, bounded by the handshake timeout.
 * Once every file is stored, done(c, arg, copies) runs: it owns arg from then on
 * and must start the child (conn_start) or end the request. If the request ends
 * first (a file refused, a protocol error, a timeout, the peer gone), abandon(arg)
 * frees the op's state instead. Stdin and signals that arrive meanwhile are held
 * and handed to the child.
 */
void		 conn_fetch_files(struct conn *, struct filereq *,
		    void (*done)(struct conn *, void *, char *const *),
		    void (*abandon)(void *), void *arg);
/*
 * Hold a request until it is decided (CONN_PENDING, bridge/pending.c). Stdin,
 * WINSIZE and signals that arrive are held as in CONN_FILES, except that an INT,
 * TERM or HUP from the peer (the agent pressed Ctrl-C) runs cancel(c, arg). After
 * timeout seconds expired(c, arg) runs. Whoever decides calls conn_pending_resume.
 * If the conn ends first (peer gone, shutdown), abandon(arg) runs instead.
 * A conn in CONN_RUNNING (its child asks, as a git push's hook does) stays there:
 * stdin and WINSIZE still go to the child, INT, TERM and HUP run cancel, and the
 * call's wall-clock limit is held until the decision (then extended by the wait);
 * abandon also runs when the child ends first.
 */
void		 conn_pending(struct conn *, int timeout,
		    void (*expired)(struct conn *, void *),
		    void (*cancel)(struct conn *, void *), void (*abandon)(void *), void *arg);
/*
 * End the wait: go(c, arg) runs and owns arg from then on; it starts the request
 * (conn_fetch_files, conn_start) or refuses it (conn_deny). Stdin and a signal held
 * meanwhile go to the child once it runs.
 */
void		 conn_pending_resume(struct conn *, void (*go)(struct conn *, void *),
		    void *arg);
/* Seconds since the request started. */
double		 conn_elapsed(const struct conn *);

#endif
