/*
 * Starting a child process with pipes, written once for every program (daemon,
 * admin CLI, shimbridge-git): the pipes, fork, fds 0-2 put in place and the
 * rest closed, default signal dispositions and an empty mask, an optional
 * privilege drop, execve; a failure before or at exec comes back to the parent
 * as *cause (the child is reaped then), never as a child that exits 127.
 */
#ifndef SHIMBRIDGE_PROC_H
#define SHIMBRIDGE_PROC_H

#include <sys/types.h>

/* What a child's fd 0, 1 or 2 becomes, besides an fd of the caller (>= 0). */
#define PROC_NULL	(-1)	/* /dev/null */
#define PROC_PIPE	(-2)	/* a new pipe: the parent gets the other end */
#define PROC_STDOUT	(-3)	/* fd 2 only: the same file as fd 1 (2>&1) */

/* proc_req.flags */
#define PROC_SETSID		0x01	/* new session and process group (pid == pgid) */
#define PROC_DROP		0x02	/* become uid:gid, no supplementary groups */
#define PROC_NO_NEW_PRIVS	0x04	/* Linux: no_new_privs before exec */
#define PROC_DIE_WITH_PARENT	0x08	/* Linux: SIGKILL when the parent dies */
#define PROC_NONBLOCK		0x10	/* the parent's pipe ends are non-blocking */
#define PROC_VFORK		0x20	/* vfork, not fork: cost independent of the
					   parent's size; setup must then only make
					   system calls (it shares our memory) */

struct proc_req;

/* The child's side of a start: what proc_exec puts in place. */
struct proc_child {
	int	 fd[3];		/* become the child's 0, 1, 2 */
	int	 status;	/* close-on-exec: a failure is written here */
	pid_t	 parent;	/* for PROC_DIE_WITH_PARENT: the process we watch */
};

struct proc_req {
	const char	 *path;		/* absolute program path */
	char *const	 *argv;
	char *const	 *envp;
	int		  fd[3];	/* caller's fd, PROC_NULL, PROC_PIPE, PROC_STDOUT */
	int		  extra_fd;	/* -1, or an fd the child gets as extra_to */
	int		  extra_to;	/* > 2, when extra_fd >= 0 */
	int		  flags;	/* PROC_* */
	uid_t		  uid;		/* with PROC_DROP */
	gid_t		  gid;
	const char	 *cwd;		/* NULL: inherited; else chdir before the drop */
	int		  cwd_fd;	/* > 2: fchdir into it first (before fds are
					   closed and before the drop); else unused */
	int		  cgroup_fd;	/* > 2 (Linux): the child starts inside this
					   cgroup (clone3 CLONE_INTO_CGROUP), so it and
					   all it forks are there from its first
					   instruction; else the caller's cgroup */
	/*
	 * NULL, or called in the child once its fds are in place and the rest
	 * closed, before cwd and the privilege drop: rlimits, umask...
	 * Returns NULL or the name of the step that failed, a static string, with
	 * errno set. Async-signal-safe only (and vfork-safe with PROC_VFORK).
	 */
	const char	*(*setup)(const struct proc_req *, void *arg);
	void		 *arg;
};

struct proc {
	pid_t	pid;		/* with PROC_SETSID also the process group */
	int	fd[3];		/* for each PROC_PIPE: [0] the write end of the
				   child's stdin, [1] [2] read ends; else -1 */
};

/*
 * A request for path with argv and envp and nothing else: fds 0-2 on /dev/null,
 * no extra fd, no flags, cwd, setup or cgroup. The caller fills in the rest.
 */
void	proc_req_init(struct proc_req *, const char *path, char *const *argv,
	    char *const *envp);
/*
 * Start a child. Returns 0 once it has exec'd (the parent's ends are
 * close-on-exec), or -1 with *cause when anything failed: then no fd is left
 * open and the child, if there was one, is reaped.
 */
int	proc_spawn(const struct proc_req *, struct proc *, char **cause);
/*
 * The child's side: signals to default and mask empty, PROC_SETSID, fds in
 * place and every other fd closed, setup, cwd, the privilege drop, execve.
 * Never returns: a failure is written to pc->status and the child exits 127.
 * Async-signal-safe: for a child of fork or vfork.
 */
void	proc_exec(const struct proc_req *, struct proc_child *pc)
	    __attribute__((noreturn));
/* In a child: report that step failed (errno) to the parent, then _exit(127). */
void	proc_fail(const struct proc_child *pc, const char *step)
	    __attribute__((noreturn));
/*
 * Reap pid (retrying on EINTR). Returns its exit code, 128+N when signal N
 * killed it, or -1 with *cause.
 */
int	proc_wait(pid_t pid, char **cause);
/* Close the parent's ends of p that are still open. */
void	proc_close(struct proc *p);

#endif
