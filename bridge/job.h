/*
 * One child process and its pipes, written once for everything that spawns
 * (request children, command-secret renewals). A job is finished only when its
 * process has been reaped AND its output pipes have been drained:
 *
 *   JOB_RUNNING --(reaped by the SIGCHLD handler)--> JOB_DEAD
 *   JOB_DEAD    --(stdout and stderr at EOF or closed)--> JOB_CLOSED
 *
 * Every transition is asserted. Output is read on events and handed to the
 * owner's callbacks; stdin is fed from a buffer. Callbacks may call job_free on
 * their own job: the memory is released once the callback has returned.
 */
#ifndef SHIMBRIDGE_JOB_H
#define SHIMBRIDGE_JOB_H

#include <sys/types.h>
#include <stddef.h>
#include <time.h>

struct child;
struct event_base;
struct evbuffer;
struct job;

enum job_state {
	JOB_RUNNING,	/* the process may be alive; pipes open */
	JOB_DEAD,	/* reaped; output pipes may still hold bytes */
	JOB_CLOSED,	/* reaped and both output pipes drained and closed */
};

enum job_stream {
	JOB_OUT,	/* the child's stdout */
	JOB_ERR,	/* the child's stderr */
};

struct job_cb {
	/* Bytes read from a stream (never 0 bytes). */
	void	(*output)(struct job *, enum job_stream, const unsigned char *, size_t,
		    void *arg);
	/* A stream reached EOF or was closed by job_close_output. */
	void	(*eof)(struct job *, enum job_stream, void *arg);
	/* stdin bytes were written to the child (job_stdin_buffered shrank). */
	void	(*written)(struct job *, void *arg);
	/* The state changed (to JOB_DEAD or JOB_CLOSED); see job_state. */
	void	(*state)(struct job *, void *arg);
};

/*
 * Take over a started child (its pid and pipe ends are transferred; in may be
 * -1). Output is read from the start; stdin is written as job_stdin feeds it.
 */
struct job	*job_new(struct event_base *, struct child *, const struct job_cb *,
		    void *arg);
/*
 * Release a job. A process not yet reaped has its whole group killed (SIGKILL);
 * it is reaped later by the SIGCHLD handler, which no longer finds a job for it.
 * Safe to call from the job's own callbacks.
 */
void		 job_free(struct job *);

enum job_state	 job_state(const struct job *);
const char	*job_state_name(enum job_state);
pid_t		 job_pid(const struct job *);
/* The wait status; meaningful from JOB_DEAD on. */
int		 job_status(const struct job *);
/* When the process was reaped (0 while JOB_RUNNING). */
time_t		 job_reaped_at(const struct job *);

/* Signal the job's whole process group (nothing once reaped). */
void		 job_kill(struct job *, int sig);
/* Stop it: SIGTERM the first time (returns 0: arm a grace timer), then SIGKILL (1). */
int		 job_stop(struct job *);

/* Move len bytes from src to the child's stdin buffer. */
void		 job_stdin(struct job *, struct evbuffer *src, size_t len);
/*
 * Move up to len bytes from fd (a socket) straight into the child's stdin pipe
 * with splice(2), no copy through the daemon, when nothing is buffered ahead of
 * them. Returns the bytes moved, 0 at the socket's end, or -1 with errno: EAGAIN
 * (the socket is empty), ENOBUFS (the pipe is full: the "written" callback
 * follows once it takes more), EPIPE (stdin is closed or bytes are buffered;
 * the child's refusal closes it), EINVAL/ENOSYS (no splice here).
 */
ssize_t		 job_stdin_splice(struct job *, int fd, size_t len);
/* No more stdin: close it once the buffer is written. */
void		 job_stdin_eof(struct job *);
/* Whether stdin still takes bytes (open and not at EOF). */
int		 job_stdin_open(const struct job *);
size_t		 job_stdin_buffered(const struct job *);

/* Stop or resume reading the output pipes (backpressure). */
void		 job_pause_output(struct job *, int paused);
int		 job_output_paused(const struct job *);
/* Whether an output pipe holds bytes not yet read. */
int		 job_output_pending(const struct job *);
/* Close an output stream now (EOF callback follows); both if stream is -1. */
void		 job_close_output(struct job *, int stream);

/*
 * The SIGCHLD handler's dispatch: a reaped pid. Returns 1 if it belonged to a
 * job (its group is killed: nothing outlives it), 0 if not.
 */
int		 job_reaped(pid_t, int status);
/* pids of every job not yet reaped: *n set, array owned by caller. */
pid_t		*job_live_pids(size_t *n);
/* Whether pid is a job's process not yet reaped (constant time: the orphan scan's test). */
int		 job_is_live(pid_t);
/*
 * Whether a job that ran outside a jail has ended (reaped or freed) since the
 * last call, which clears it. Only such a job can leave an escaped descendant
 * to the daemon: a jailed one's whole PID namespace dies with its init.
 */
int		 job_orphans_possible(void);
/* Wait (blocking) for a job's process and dispatch it as job_reaped would. */
void		 job_wait(struct job *);

#endif
