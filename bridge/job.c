/*
 * One child process and its pipes (see job.h). Every job is on one list so the
 * SIGCHLD handler can dispatch a reaped pid to it and the orphan scan knows
 * which processes are legitimate.
 */
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "job.h"
#include "log.h"
#include "proto.h"
#include "spawn.h"
#include "util.h"

struct job {
	TAILQ_ENTRY(job)	 entry;
	struct job		*hnext;		/* in job_hash while not reaped */
	enum job_state		 state;
	pid_t			 pid;		/* also the process group */
	int			 status;
	int			 jailed;	/* pid is a jail's init (spawn_wait_status) */
	int			 mntns;		/* the jail's mount namespace, or -1 (spawn.h) */
	time_t			 reaped_at;
	int			 term_sent;
	int			 fd_in, fd_out, fd_err;
	struct event		*ev_in, *ev_out, *ev_err;
	struct evbuffer		*inbuf;		/* stdin bytes waiting for the child */
	int			 stdin_eof;	/* close stdin once inbuf drains */
	int			 paused;	/* not reading the output pipes */
	struct job_cb		 cb;
	void			*arg;
	int			 busy;		/* callbacks under way */
	int			 freed;		/* job_free called: release when not busy */
};

/*
 * Pipe capacity asked for the child's stdin (the kernel default is 64 KiB): fewer
 * wake-ups per byte spliced into it. stdout keeps the default: with a deep pipe
 * the reads that feed the redactor and the output cap would cut the tool's writes
 * at arbitrary points instead of where it wrote them. A refusal (pipe-max-size,
 * per-user pipe quota) leaves the default.
 */
#define JOB_PIPE_SIZE	(1024 * 1024)
/* One read from an output pipe: a frame's worth (an output cap drops the read that crosses it). */
#define JOB_READ_MAX	FRAME_DATA_MAX

static void	job_stdin_broken(struct job *);

static TAILQ_HEAD(job_list, job) job_all = TAILQ_HEAD_INITIALIZER(job_all);

/*
 * Jobs not yet reaped, by pid: the reaper and the orphan scan look a pid up in
 * constant time, whatever the number of calls in flight (a list walk per pid
 * made the scan quadratic in them).
 */
static struct job	**job_hash;
static size_t		  job_hsize, job_hcount;
static int		  job_unjailed_ended;	/* see job_orphans_possible */

/* The bucket of a pid. */
static size_t
job_bucket(pid_t pid, size_t size)
{
	return ((size_t)pid * 2654435761u) & (size - 1);
}

/* Add a running job to the hash, growing it to keep chains short. */
static void
job_hash_add(struct job *j)
{
	size_t i;

	if (job_hcount + 1 > job_hsize) {
		size_t nsize = job_hsize ? job_hsize * 2 : 64;
		struct job **nh = xcalloc(nsize, sizeof *nh), *k, *next;

		for (i = 0; i < job_hsize; i++) {
			for (k = job_hash[i]; k != NULL; k = next) {
				next = k->hnext;
				k->hnext = nh[job_bucket(k->pid, nsize)];
				nh[job_bucket(k->pid, nsize)] = k;
			}
		}
		free(job_hash);
		job_hash = nh;
		job_hsize = nsize;
	}
	i = job_bucket(j->pid, job_hsize);
	j->hnext = job_hash[i];
	job_hash[i] = j;
	job_hcount++;
}

/* Remove a job from the hash (reaped or freed); nothing if it is not there. */
static void
job_hash_del(struct job *j)
{
	struct job **p;

	if (job_hsize == 0)
		return;
	for (p = &job_hash[job_bucket(j->pid, job_hsize)]; *p != NULL; p = &(*p)->hnext) {
		if (*p == j) {
			*p = j->hnext;
			j->hnext = NULL;
			job_hcount--;
			return;
		}
	}
}

/* The running job of a pid, or NULL. */
static struct job *
job_find(pid_t pid)
{
	struct job *j;

	if (job_hsize == 0)
		return NULL;
	for (j = job_hash[job_bucket(pid, job_hsize)]; j != NULL; j = j->hnext) {
		if (j->pid == pid)
			return j;
	}
	return NULL;
}

/* Whether pid is a job's process not yet reaped (the orphan scan keeps it). */
int
job_is_live(pid_t pid)
{
	return job_find(pid) != NULL;
}

/* Whether a job ran outside a jail since the last call (see job.h); clears it. */
int
job_orphans_possible(void)
{
	int r = job_unjailed_ended;

	job_unjailed_ended = 0;
	return r;
}

/* Name of a state, for logs and assertions. */
const char *
job_state_name(enum job_state s)
{
	static const char *names[] = { "running", "dead", "closed" };

	return names[s];
}

/* The only way to change state: legal transitions are asserted. */
static void
job_set_state(struct job *j, enum job_state to)
{
	if (!((j->state == JOB_RUNNING && to == JOB_DEAD) ||
	    (j->state == JOB_DEAD && to == JOB_CLOSED)))
		fatalx("job %ld: illegal state change %s -> %s", (long)j->pid,
		    job_state_name(j->state), job_state_name(to));
	log_debug("job %ld: %s -> %s", (long)j->pid, job_state_name(j->state),
	    job_state_name(to));
	j->state = to;
}

/* After a callback: 1 if the job was freed meanwhile (and is released now). */
static int
job_unbusy(struct job *j)
{
	j->busy--;
	if (!j->freed)
		return 0;
	if (j->busy == 0)
		free(j);
	return 1;
}

/* Tell the owner about a state change; 1 if the job is gone. */
static int
job_notify(struct job *j)
{
	if (j->cb.state == NULL)
		return 0;
	j->busy++;
	j->cb.state(j, j->arg);
	return job_unbusy(j);
}

/* Reaped and drained: the job is closed. 1 if the owner freed it meanwhile (gone). */
static int
job_check_closed(struct job *j)
{
	if (j->state != JOB_DEAD || j->fd_out >= 0 || j->fd_err >= 0)
		return 0;
	job_set_state(j, JOB_CLOSED);
	return job_notify(j);
}

/* Close one output stream and tell the owner; 1 if the job is gone. */
static int
job_close_stream(struct job *j, enum job_stream s)
{
	int *fd = s == JOB_ERR ? &j->fd_err : &j->fd_out;
	struct event *ev = s == JOB_ERR ? j->ev_err : j->ev_out;

	if (*fd < 0)
		return 0;
	event_del(ev);
	close(*fd);
	*fd = -1;
	if (j->cb.eof != NULL) {
		j->busy++;
		j->cb.eof(j, s, j->arg);
		if (job_unbusy(j))
			return 1;
	}
	/* The owner may free the job when told it is closed: j is not read after. */
	if (job_check_closed(j))
		return 1;
	return j->freed;
}

/* An output pipe is readable: read a few chunks and hand them over. */
static void
job_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	enum job_stream s = fd == j->fd_err ? JOB_ERR : JOB_OUT;
	static unsigned char buf[JOB_READ_MAX];	/* one loop, one buffer */
	ssize_t n;
	int i;

	(void)what;
	for (i = 0; i < 4 && !j->paused; i++) {
		n = read(fd, buf, sizeof buf);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			(void)job_close_stream(j, s);
			return;
		}
		j->busy++;
		j->cb.output(j, s, buf, (size_t)n, j->arg);
		if (job_unbusy(j))
			return;
		if ((s == JOB_ERR ? j->fd_err : j->fd_out) < 0)
			return;	/* the owner closed it */
	}
}

/* The child's stdin is writable: hand it what is buffered. */
static void
job_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	int n;

	(void)what;
	n = evbuffer_get_length(j->inbuf) > 0 ? evbuffer_write(j->inbuf, fd) : 0;
	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		/* The child closed its stdin (EPIPE): what is left is dropped. */
		job_stdin_broken(j);
	} else if (evbuffer_get_length(j->inbuf) == 0) {
		event_del(j->ev_in);
		if (j->stdin_eof) {
			close(j->fd_in);
			j->fd_in = -1;
		}
	}
	if (j->cb.written != NULL) {
		j->busy++;
		j->cb.written(j, j->arg);
		(void)job_unbusy(j);
	}
}

/* Take over a started child. */
struct job *
job_new(struct event_base *base, struct child *ch, const struct job_cb *cb, void *arg)
{
	struct job *j = xcalloc(1, sizeof *j);

	j->state = JOB_RUNNING;
	j->pid = ch->pid;
	j->jailed = ch->jailed;
	j->mntns = ch->mntns;
	ch->mntns = -1;				/* transferred */
	j->fd_in = ch->in;
	j->fd_out = ch->out;
	j->fd_err = ch->err;
	ch->in = ch->out = ch->err = -1;	/* transferred */
	j->cb = *cb;
	j->arg = arg;
	j->inbuf = evbuffer_new();
	if (j->inbuf == NULL)
		fatalx("out of memory setting up a job");
	if (j->fd_in >= 0 && (j->ev_in = event_new(base, j->fd_in, EV_WRITE | EV_PERSIST,
	    job_write_cb, j)) == NULL)
		fatalx("out of memory setting up a job");
	if (j->fd_out >= 0) {
		if ((j->ev_out = event_new(base, j->fd_out, EV_READ | EV_PERSIST, job_read_cb,
		    j)) == NULL)
			fatalx("out of memory setting up a job");
		event_add(j->ev_out, NULL);
	}
	if (j->fd_err >= 0) {
		if ((j->ev_err = event_new(base, j->fd_err, EV_READ | EV_PERSIST, job_read_cb,
		    j)) == NULL)
			fatalx("out of memory setting up a job");
		event_add(j->ev_err, NULL);
	}
#if defined(F_SETPIPE_SZ)
	if (j->fd_in >= 0)
		(void)fcntl(j->fd_in, F_SETPIPE_SZ, JOB_PIPE_SIZE);
#endif
	TAILQ_INSERT_TAIL(&job_all, j, entry);
	job_hash_add(j);
	return j;
}

/* Release a job (see job.h). */
void
job_free(struct job *j)
{
	if (j == NULL || j->freed)
		return;
	j->freed = 1;
	if (j->state == JOB_RUNNING) {
		(void)kill(-j->pid, SIGKILL);	/* the reaper will find no job */
		job_hash_del(j);
		if (!j->jailed)
			job_unjailed_ended = 1;
	}
	TAILQ_REMOVE(&job_all, j, entry);
	if (j->ev_in != NULL)
		event_free(j->ev_in);
	if (j->ev_out != NULL)
		event_free(j->ev_out);
	if (j->ev_err != NULL)
		event_free(j->ev_err);
	if (j->fd_in >= 0)
		close(j->fd_in);
	if (j->fd_out >= 0)
		close(j->fd_out);
	if (j->fd_err >= 0)
		close(j->fd_err);
	/* The jail's mounts go now, after the call was answered (spawn.h). */
	spawn_jail_drop(j->mntns);
	evbuffer_free(j->inbuf);
	if (j->busy == 0)
		free(j);
}

/* The job's state. */
enum job_state
job_state(const struct job *j)
{
	return j->state;
}

/* The process (and group) id. */
pid_t
job_pid(const struct job *j)
{
	return j->pid;
}

/* The wait status (from JOB_DEAD on). */
int
job_status(const struct job *j)
{
	return j->status;
}

/* When the process was reaped, 0 before. */
time_t
job_reaped_at(const struct job *j)
{
	return j->reaped_at;
}

/* Signal the whole process group while it may be alive. */
void
job_kill(struct job *j, int sig)
{
	if (j->state == JOB_RUNNING && j->pid > 0)
		(void)kill(-j->pid, sig);
}

/* SIGTERM first, SIGKILL after. */
int
job_stop(struct job *j)
{
	if (!j->term_sent) {
		j->term_sent = 1;
		job_kill(j, SIGTERM);
		return 0;
	}
	job_kill(j, SIGKILL);
	return 1;
}

/* Queue bytes for the child's stdin. */
void
job_stdin(struct job *j, struct evbuffer *src, size_t len)
{
	evbuffer_remove_buffer(src, j->inbuf, len);
	if (j->ev_in != NULL && j->fd_in >= 0)
		event_add(j->ev_in, NULL);
}

/* Close stdin after the child refused more (EPIPE): what is buffered is dropped. */
static void
job_stdin_broken(struct job *j)
{
	evbuffer_drain(j->inbuf, evbuffer_get_length(j->inbuf));
	event_del(j->ev_in);
	close(j->fd_in);
	j->fd_in = -1;
}

/* Move up to len bytes from fd straight into the child's stdin pipe (see job.h). */
ssize_t
job_stdin_splice(struct job *j, int fd, size_t len)
{
#if defined(__linux__) && defined(SPLICE_F_MOVE)
	struct pollfd p;
	ssize_t n;

	if (j->fd_in < 0 || j->stdin_eof || evbuffer_get_length(j->inbuf) > 0) {
		errno = EPIPE;
		return -1;
	}
	n = splice(fd, NULL, j->fd_in, NULL, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n >= 0 || errno != EAGAIN) {
		if (n < 0 && errno == EPIPE)
			job_stdin_broken(j);
		return n;
	}
	/* Either side may be the one that is not ready: ask the pipe. */
	p.fd = j->fd_in;
	p.events = POLLOUT;
	p.revents = 0;
	if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT))
		return -1;	/* EAGAIN: the socket is empty */
	event_add(j->ev_in, NULL);	/* "written" follows once the child has read */
	errno = ENOBUFS;
	return -1;
#else
	(void)j;
	(void)fd;
	(void)len;
	errno = ENOSYS;
	return -1;
#endif
}

/* End of stdin: close now if nothing is waiting. */
void
job_stdin_eof(struct job *j)
{
	j->stdin_eof = 1;
	if (j->fd_in >= 0 && evbuffer_get_length(j->inbuf) == 0) {
		event_del(j->ev_in);
		close(j->fd_in);
		j->fd_in = -1;
	}
}

/* Whether stdin still takes bytes. */
int
job_stdin_open(const struct job *j)
{
	return j->fd_in >= 0 && !j->stdin_eof;
}

/* Bytes waiting for the child's stdin. */
size_t
job_stdin_buffered(const struct job *j)
{
	return evbuffer_get_length(j->inbuf);
}

/* Stop or resume reading the output pipes. */
void
job_pause_output(struct job *j, int paused)
{
	if (paused && !j->paused) {
		j->paused = 1;
		if (j->fd_out >= 0)
			event_del(j->ev_out);
		if (j->fd_err >= 0)
			event_del(j->ev_err);
	} else if (!paused && j->paused) {
		j->paused = 0;
		if (j->fd_out >= 0)
			event_add(j->ev_out, NULL);
		if (j->fd_err >= 0)
			event_add(j->ev_err, NULL);
	}
}

/* Whether output reading is paused. */
int
job_output_paused(const struct job *j)
{
	return j->paused;
}

/* Whether a pipe still holds bytes not yet read. */
int
job_output_pending(const struct job *j)
{
	int n;

	if (j->fd_out >= 0 && ioctl(j->fd_out, FIONREAD, &n) == 0 && n > 0)
		return 1;
	if (j->fd_err >= 0 && ioctl(j->fd_err, FIONREAD, &n) == 0 && n > 0)
		return 1;
	return 0;
}

/* Close output streams now (someone outside our reach holds them, or the owner is done). */
void
job_close_output(struct job *j, int stream)
{
	if (stream != JOB_ERR && job_close_stream(j, JOB_OUT))
		return;
	if (stream != JOB_OUT)
		(void)job_close_stream(j, JOB_ERR);
}

/* A pid was reaped: dispatch it to its job. */
int
job_reaped(pid_t pid, int status)
{
	struct job *j;

	if ((j = job_find(pid)) != NULL) {
		job_hash_del(j);
		/*
		 * A jail's init takes its whole PID namespace with it; anything else
		 * may have left a daemonised descendant to us (the subreaper).
		 */
		if (!j->jailed)
			job_unjailed_ended = 1;
		j->status = spawn_wait_status(j->jailed, status);
		j->reaped_at = time(NULL);
		job_set_state(j, JOB_DEAD);
		/* Leftovers of the group die with the leader: nothing outlives a job. */
		(void)kill(-pid, SIGKILL);
		if (job_notify(j))
			return 1;
		(void)job_check_closed(j);
		return 1;
	}
	return 0;
}

/* Every live job's pid (growable: no bound on how many children are legitimate). */
pid_t *
job_live_pids(size_t *n)
{
	struct job *j;
	pid_t *p;
	size_t k = 0;

	TAILQ_FOREACH(j, &job_all, entry)
		k++;
	p = xcalloc(k + 1, sizeof *p);
	*n = 0;
	TAILQ_FOREACH(j, &job_all, entry) {
		if (j->state == JOB_RUNNING)
			p[(*n)++] = j->pid;
	}
	return p;
}

/* Block until the job's process ends, then dispatch it. */
void
job_wait(struct job *j)
{
	int status = 0;

	if (j->state != JOB_RUNNING)
		return;
	while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
		;
	(void)job_reaped(j->pid, status);
}
