/* Starting a child process with pipes (see proc.h). */
#include <sys/types.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/sched.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "hygiene.h"
#include "proc.h"
#include "util.h"

/* What a child writes to the status pipe when a step fails. */
struct proc_msg {
	int	err;		/* errno */
	char	step[60];	/* NUL-terminated */
};

/* Report a failed step to the parent, then exit. */
void
proc_fail(const struct proc_child *pc, const char *step)
{
	struct proc_msg	m;
	size_t		i;

	memset(&m, 0, sizeof m);
	m.err = errno;
	for (i = 0; step[i] != '\0' && i < sizeof m.step - 1; i++)
		m.step[i] = step[i];
	(void)!write(pc->status, &m, sizeof m);
	_exit(127);
}

/* The child's side: put everything in place, then exec. */
void
proc_exec(const struct proc_req *r, struct proc_child *pc)
{
	struct proc_child	c = *pc;	/* ours: pc may be the parent's (vfork) */
	sigset_t		set;
	const char		*step;
	int			hi[3], xhi = -1, base, i;

	/* Default dispositions: an ignored SIGPIPE would otherwise survive exec. */
	hygiene_signals_default();
	sigemptyset(&set);
	(void)sigprocmask(SIG_SETMASK, &set, NULL);
	if ((r->flags & PROC_SETSID) && setsid() < 0)
		proc_fail(&c, "setsid");
	if (r->cwd_fd > 2 && fchdir(r->cwd_fd) != 0)
		proc_fail(&c, "fchdir");

	/*
	 * Copies above every target first (the status pipe's too), so no dup2
	 * below can clobber a source; the status pipe then sits at base, just
	 * above the child's fds, and everything beyond is closed.
	 */
	base = r->extra_fd >= 0 && r->extra_to >= 3 ? r->extra_to + 1 : 3;
	if ((i = fcntl(c.status, F_DUPFD_CLOEXEC, base)) < 0)
		_exit(127);
	c.status = i;
	for (i = 0; i < 3; i++) {
		if ((hi[i] = fcntl(c.fd[i], F_DUPFD_CLOEXEC, base)) < 0)
			proc_fail(&c, "dup");
	}
	if (r->extra_fd >= 0 && (xhi = fcntl(r->extra_fd, F_DUPFD_CLOEXEC, base)) < 0)
		proc_fail(&c, "dup");
	for (i = 0; i < 3; i++) {
		if (dup2(hi[i], i) < 0)
			proc_fail(&c, "dup2");
	}
	if (xhi >= 0 && dup2(xhi, r->extra_to) < 0)
		proc_fail(&c, "dup2");
	if (c.status != base) {
		if (util_dup_cloexec(c.status, base) < 0)
			proc_fail(&c, "dup3");
		c.status = base;
	}
	for (i = 3; i < base; i++) {
		if (i != r->extra_to)
			(void)close(i);
	}
	hygiene_closefrom(base + 1);

	if (r->setup != NULL && (step = r->setup(r, r->arg)) != NULL)
		proc_fail(&c, step);
	if (r->cwd != NULL && chdir(r->cwd) != 0)
		proc_fail(&c, "chdir");
	if ((r->flags & PROC_DROP) &&
	    (step = hygiene_drop_privileges(r->uid, r->gid, NULL)) != NULL)
		proc_fail(&c, step);
#ifdef __linux__
	if ((r->flags & PROC_NO_NEW_PRIVS) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		proc_fail(&c, "no_new_privs");
	/* After the uid change, which clears it; then the parent may already be gone. */
	if (r->flags & PROC_DIE_WITH_PARENT) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
			proc_fail(&c, "parent-death signal");
		if (getppid() != c.parent)
			_exit(127);
	}
#endif
	execve(r->path, r->argv, r->envp);
	proc_fail(&c, "exec");
}

/* Close the parent's ends that are open. */
void
proc_close(struct proc *p)
{
	int	i;

	for (i = 0; i < 3; i++) {
		if (p->fd[i] >= 0)
			close(p->fd[i]);
		p->fd[i] = -1;
	}
}

/* Set O_NONBLOCK on fd. */
static int
proc_nonblock(int fd)
{
	int	fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -1 : 0;
}

/* Create the child's fd i as r asks in theirs[i]; ours[i] gets the parent's end of a pipe. */
static int
proc_open_fd(const struct proc_req *r, int i, int theirs[3], int ours[3], char **cause)
{
	int	p[2];

	if (r->fd[i] == PROC_NULL) {
		if ((theirs[i] = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
			xasprintf(cause, "/dev/null: %s", strerror(errno));
			return -1;
		}
	} else if (r->fd[i] == PROC_PIPE) {
		if (util_pipe(p, 0) != 0) {
			xasprintf(cause, "pipe: %s", strerror(errno));
			return -1;
		}
		theirs[i] = i == 0 ? p[0] : p[1];
		ours[i] = i == 0 ? p[1] : p[0];
	} else if (r->fd[i] == PROC_STDOUT && i == 2) {
		if ((theirs[2] = fcntl(theirs[1], F_DUPFD_CLOEXEC, 0)) < 0) {
			xasprintf(cause, "dup: %s", strerror(errno));
			return -1;
		}
	} else if (r->fd[i] >= 0) {
		if ((theirs[i] = fcntl(r->fd[i], F_DUPFD_CLOEXEC, 0)) < 0) {
			xasprintf(cause, "fd %d for the child: %s", r->fd[i], strerror(errno));
			return -1;
		}
	} else {
		xasprintf(cause, "internal error: bad fd %d for the child's %d", r->fd[i], i);
		return -1;
	}
	return 0;
}

/*
 * vfork and exec, in a frame of its own so that nothing of proc_spawn's lives
 * across the vfork (the child borrows our stack until it execs).
 */
static pid_t __attribute__((noinline))
proc_vfork(const struct proc_req *r, struct proc_child *pc)
{
	pid_t	pid;

	if ((pid = vfork()) == 0)
		proc_exec(r, pc);
	return pid;
}

/*
 * clone3 into the cgroup of cgroup_fd, with CLONE_VFORK but a memory of its own
 * (like fork: a CLONE_VM child could not safely return through our frames); the
 * child execs. -1 with errno where the kernel or platform has no clone3.
 */
static pid_t
proc_clone_cgroup(const struct proc_req *r, struct proc_child *pc)
{
#if defined(__linux__) && defined(SYS_clone3) && defined(CLONE_INTO_CGROUP)
	struct clone_args	ca;
	pid_t			pid;

	memset(&ca, 0, sizeof ca);
	ca.flags = CLONE_VFORK | CLONE_INTO_CGROUP;
	ca.exit_signal = SIGCHLD;
	ca.cgroup = (unsigned long long)r->cgroup_fd;
	if ((pid = (pid_t)syscall(SYS_clone3, &ca, sizeof ca)) == 0)
		proc_exec(r, pc);
	return pid;
#else
	(void)r;
	(void)pc;
	errno = ENOSYS;
	return -1;
#endif
}

/* A request with nothing but the program (proc.h). */
void
proc_req_init(struct proc_req *r, const char *path, char *const *argv, char *const *envp)
{
	memset(r, 0, sizeof *r);
	r->path = path;
	r->argv = argv;
	r->envp = envp;
	r->fd[0] = r->fd[1] = r->fd[2] = PROC_NULL;
	r->extra_fd = -1;
	r->cwd_fd = -1;
	r->cgroup_fd = -1;
}

/* Fork (or vfork, or clone3 into a cgroup) and wait until the child has exec'd. */
int
proc_spawn(const struct proc_req *r, struct proc *p, char **cause)
{
	struct proc_child	pc;
	struct proc_msg		m;
	int			theirs[3] = { -1, -1, -1 }, ours[3] = { -1, -1, -1 };
	int			st[2] = { -1, -1 }, i, rc = -1;
	ssize_t			n;
	pid_t			pid;

	p->pid = -1;
	p->fd[0] = p->fd[1] = p->fd[2] = -1;
	if (r->path == NULL || r->argv == NULL || r->envp == NULL ||
	    (r->extra_fd >= 0 && r->extra_to < 3)) {
		xasprintf(cause, "internal error: bad request to start a child");
		return -1;
	}
	for (i = 0; i < 3; i++) {
		if (proc_open_fd(r, i, theirs, ours, cause) != 0)
			goto out;
	}
	if (util_pipe(st, 0) != 0) {
		xasprintf(cause, "pipe: %s", strerror(errno));
		goto out;
	}
	memcpy(pc.fd, theirs, sizeof pc.fd);
	pc.status = st[1];
	pc.parent = getpid();

	if (r->cgroup_fd > 2) {
		pid = proc_clone_cgroup(r, &pc);
	} else if (r->flags & PROC_VFORK) {
		pid = proc_vfork(r, &pc);
	} else {
		if ((pid = fork()) == 0)
			proc_exec(r, &pc);
	}
	if (pid < 0) {
		xasprintf(cause, "cannot start %s: %s", r->path, strerror(errno));
		goto out;
	}
	for (i = 0; i < 3; i++) {
		close(theirs[i]);
		theirs[i] = -1;
	}
	close(st[1]);
	st[1] = -1;
	/* The status pipe closes at exec; a message means the child failed first. */
	do {
		n = read(st[0], &m, sizeof m);
	} while (n < 0 && errno == EINTR);
	if (n != 0) {
		if (n == (ssize_t)sizeof m) {
			m.step[sizeof m.step - 1] = '\0';
			if (strcmp(m.step, "exec") == 0)
				xasprintf(cause, "cannot run %s: %s", r->path, strerror(m.err));
			else
				xasprintf(cause, "cannot start %s: %s: %s", r->path, m.step,
				    strerror(m.err));
		} else
			xasprintf(cause, "cannot start %s: %s", r->path, n < 0 ?
			    strerror(errno) : "short status from the child");
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		goto out;
	}
	if (r->flags & PROC_NONBLOCK) {
		for (i = 0; i < 3; i++) {
			if (ours[i] >= 0 && proc_nonblock(ours[i]) != 0) {
				/* Cannot happen on a valid fd; the child is ours to stop. */
				xasprintf(cause, "fcntl: %s", strerror(errno));
				(void)kill(pid, SIGKILL);
				while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
					;
				goto out;
			}
		}
	}
	p->pid = pid;
	for (i = 0; i < 3; i++) {
		p->fd[i] = ours[i];
		ours[i] = -1;	/* transferred */
	}
	rc = 0;
out:
	for (i = 0; i < 3; i++) {
		if (theirs[i] >= 0)
			close(theirs[i]);
		if (ours[i] >= 0)
			close(ours[i]);
	}
	for (i = 0; i < 2; i++) {
		if (st[i] >= 0)
			close(st[i]);
	}
	return rc;
}

/* Reap pid and translate its status. */
int
proc_wait(pid_t pid, char **cause)
{
	int	status;

	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			xasprintf(cause, "waitpid: %s", strerror(errno));
			return -1;
		}
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	xasprintf(cause, "child %ld ended oddly", (long)pid);
	return -1;
}
