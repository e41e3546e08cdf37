/* Child processes: building their environment and running them as the runner. */
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#if defined(__linux__)
#include <linux/sched.h>
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "jail.h"
#include "platform.h"
#include "hygiene.h"
#include "spawn.h"
#include "util.h"

#define ENV_MAX		256

struct envbuild {
	char	*vars[ENV_MAX + 1];	/* "NAME=value", NULL-terminated */
	int	 secret[ENV_MAX];	/* vars[i] is in guarded memory */
	size_t	 n;
};

/* An empty environment. */
struct envbuild *
envbuild_new(void)
{
	return xcalloc(1, sizeof(struct envbuild));
}

/* Release one entry, wiping it if it holds a secret. */
static void
envbuild_drop(struct envbuild *e, size_t i)
{
	if (e->secret[i])
		sodium_free(e->vars[i]);
	else
		free(e->vars[i]);
}

/* Set NAME=value, replacing an earlier NAME. Values may not contain NUL. */
int
envbuild_set(struct envbuild *e, const char *name, const char *value, size_t vlen, int secret)
{
	size_t nlen = strlen(name), i;
	char *s;

	if (nlen == 0 || strchr(name, '=') != NULL || memchr(value, '\0', vlen) != NULL)
		return -1;
	if (secret) {
		if ((s = sodium_malloc(nlen + vlen + 2)) == NULL)
			return -1;
	} else
		s = xmalloc(nlen + vlen + 2);
	memcpy(s, name, nlen);
	s[nlen] = '=';
	memcpy(s + nlen + 1, value, vlen);
	s[nlen + 1 + vlen] = '\0';
	for (i = 0; i < e->n; i++) {
		if (strncmp(e->vars[i], name, nlen) == 0 && e->vars[i][nlen] == '=') {
			envbuild_drop(e, i);
			e->vars[i] = s;
			e->secret[i] = secret;
			return 0;
		}
	}
	if (e->n == ENV_MAX) {
		if (secret)
			sodium_free(s);
		else
			free(s);
		return -1;
	}
	e->vars[e->n] = s;
	e->secret[e->n++] = secret;
	e->vars[e->n] = NULL;
	return 0;
}

/* The value of NAME, or NULL. */
const char *
envbuild_get(const struct envbuild *e, const char *name)
{
	size_t nlen = strlen(name), i;

	for (i = 0; i < e->n; i++) {
		if (strncmp(e->vars[i], name, nlen) == 0 && e->vars[i][nlen] == '=')
			return e->vars[i] + nlen + 1;
	}
	return NULL;
}

/* The NULL-terminated array for execve. */
char *const *
envbuild_array(struct envbuild *e)
{
	e->vars[e->n] = NULL;
	return e->vars;
}

/* Number of variables. */
size_t
envbuild_count(const struct envbuild *e)
{
	return e->n;
}

/* Free everything, wiping secrets. */
void
envbuild_free(struct envbuild *e)
{
	size_t i;

	if (e == NULL)
		return;
	for (i = 0; i < e->n; i++)
		envbuild_drop(e, i);
	free(e);
}

/* Report a failure from the child to the parent through the status pipe, then exit. */
static void __attribute__((noreturn))
spawn_child_fail(int fd, const char *what)
{
	char msg[160];
	int saved = errno;
	size_t n;

	snprintf(msg, sizeof msg, "%s: %s", what, strerror(saved));
	n = strlen(msg);
	(void)!write(fd, msg, n);
	_exit(127);
}

/* Close every descriptor from lowfd up (the one copy in common/). */
static void
spawn_closefrom(int lowfd)
{
	hygiene_closefrom(lowfd);
}

/* Set a limit to want, or to the hard limit if that is lower (no CAP_SYS_RESOURCE). */
static int
spawn_limit(int resource, rlim_t cur, rlim_t max)
{
	struct rlimit rl;

	if (getrlimit(resource, &rl) == 0 && rl.rlim_max != RLIM_INFINITY) {
		if (max > rl.rlim_max)
			max = rl.rlim_max;
		if (cur > max)
			cur = max;
	}
	rl.rlim_cur = cur;
	rl.rlim_max = max;
	return setrlimit(resource, &rl);
}

/* In the child: become the runner with nothing inherited, then exec. */
static void __attribute__((noreturn))
spawn_exec(const struct spawn_req *r, int pin, int pout, int perr, int status, pid_t parent)
{
	struct sigaction sa;
	sigset_t set;
	const char *step;
	int sig;

	/* Default dispositions: an ignored SIGPIPE would otherwise survive exec. */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		(void)sigaction(sig, &sa, NULL);
	sigemptyset(&set);
	sigprocmask(SIG_SETMASK, &set, NULL);

	if (setsid() < 0)
		spawn_child_fail(status, "setsid");
	if (dup2(pin, 0) < 0 || dup2(pout, 1) < 0 || dup2(perr, 2) < 0)
		spawn_child_fail(status, "dup2");
	if (status < 3) {
		/* Keep the status pipe above the stdio range. */
		int fd = fcntl(status, F_DUPFD_CLOEXEC, 3);

		if (fd < 0)
			_exit(127);
		status = fd;
	}
	if (r->extra_fd > 2) {
		/* The extra fd becomes 3, the status pipe 4; both moved up first. */
		int xfd = fcntl(r->extra_fd, F_DUPFD, 5), sfd = fcntl(status, F_DUPFD_CLOEXEC, 5);

		if (xfd < 0 || sfd < 0 || dup2(xfd, 3) < 0 || dup3(sfd, 4, O_CLOEXEC) < 0)
			_exit(127);
		status = 4;
	} else if (status != 3) {
		if (dup3(status, 3, O_CLOEXEC) < 0)
			_exit(127);
		status = 3;
	}
	spawn_closefrom(status + 1);

	if (spawn_limit(RLIMIT_CORE, 0, 0) != 0)
		spawn_child_fail(status, "setrlimit core");
	if (spawn_limit(RLIMIT_CPU, (rlim_t)r->cpu_seconds, (rlim_t)r->cpu_seconds + 5) != 0)
		spawn_child_fail(status, "setrlimit cpu");
	if (spawn_limit(RLIMIT_AS, (rlim_t)8 << 30, (rlim_t)8 << 30) != 0)	/* 8 GiB */
		spawn_child_fail(status, "setrlimit as");
	if (spawn_limit(RLIMIT_FSIZE, (rlim_t)4 << 30, (rlim_t)4 << 30) != 0)	/* 4 GiB */
		spawn_child_fail(status, "setrlimit fsize");
	if (spawn_limit(RLIMIT_NOFILE, 1024, 1024) != 0)			/* open files */
		spawn_child_fail(status, "setrlimit nofile");
	if (spawn_limit(RLIMIT_NPROC, 8192, 8192) != 0)	/* processes of the runner uid */
		spawn_child_fail(status, "setrlimit nproc");

	if (r->cwd_fd >= 0) {
		if (fchdir(r->cwd_fd) != 0)
			spawn_child_fail(status, "fchdir");
	} else if (chdir(r->cwd != NULL ? r->cwd : "/") != 0)
		spawn_child_fail(status, "chdir");

	/* Drop privileges, groups first, and verify that they cannot come back. */
	if ((step = hygiene_drop_privileges(r->uid, r->gid, NULL)) != NULL)
		spawn_child_fail(status, step);
	if (platform_no_new_privs() != 0)
		spawn_child_fail(status, "no_new_privs");
	if (platform_die_with_parent(parent) != 0)
		spawn_child_fail(status, "parent-death signal");
	umask(077);
	execve(r->path, r->argv, r->envp);
	spawn_child_fail(status, r->path);
}

static char	*spawn_env_lo;		/* the daemon's original environment area */
static size_t	 spawn_env_len;

/* Record the extent of the strings envp points at (contiguous, from the kernel). */
void
spawn_env_area(char **envp)
{
	char *lo = NULL, *hi = NULL, *end;
	size_t i;

	for (i = 0; envp != NULL && envp[i] != NULL; i++) {
		end = envp[i] + strlen(envp[i]) + 1;
		if (lo == NULL || envp[i] < lo)
			lo = envp[i];
		if (hi == NULL || end > hi)
			hi = end;
	}
	spawn_env_lo = lo;
	spawn_env_len = lo != NULL ? (size_t)(hi - lo) : 0;
}

/* What the jail's init needs: the request and the child's ends of the pipes. */
struct spawn_jailarg {
	const struct spawn_req	*r;
	int			 pin, pout, perr, status;
};

/*
 * PID 1 of the jail: build the filesystem, start the tool, then only reap and
 * forward signals. It runs on a private copy of the daemon's memory (clone
 * without CLONE_VM), is non-dumpable and drops to the runner once the tool runs,
 * so the tool (same uid, no CAP_SYS_PTRACE) cannot read it.
 */
static int
spawn_jail_init(void *arg)
{
	const struct spawn_jailarg *a = arg;
	const struct spawn_req *r = a->r;
	struct sigaction sa;
	sigset_t set;
	const char *what;
	pid_t tool, p, self;
	int sig, st;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		(void)sigaction(sig, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_SETMASK, &set, NULL);
	/* Its own process group, so the daemon's kill(-pid) reaches it. */
	if (setsid() < 0)
		spawn_child_fail(a->status, "jail: setsid");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		spawn_child_fail(a->status, "jail: non-dumpable");
	/*
	 * The daemon is outside our PID namespace (getppid() is 0 here), so the
	 * race with its death is closed through the status pipe instead: once the
	 * death signal is armed, a daemon already gone shows as no reader left.
	 */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		spawn_child_fail(a->status, "jail: parent-death signal");
	{
		struct pollfd pfd = { a->status, POLLOUT, 0 };

		if (poll(&pfd, 1, 0) < 0 || (pfd.revents & POLLERR) != 0)
			_exit(127);
	}
	if ((what = jail_enter(r->jail)) != NULL) {
		char msg[96];

		snprintf(msg, sizeof msg, "jail: %s", what);
		spawn_child_fail(a->status, msg);
	}
	/* vfork: we are suspended until the tool has exec'd or failed (and said why). */
	self = getpid();	/* 1 */
	if ((tool = vfork()) < 0)
		spawn_child_fail(a->status, "jail: vfork");
	if (tool == 0)
		spawn_exec(r, a->pin, a->pout, a->perr, a->status, self);
	/* The tool has exec'd: our copy of the daemon's environment goes first. */
	if (spawn_env_lo != NULL)
		explicit_bzero(spawn_env_lo, spawn_env_len);
	if (setgroups(0, NULL) != 0 || setresgid(r->gid, r->gid, r->gid) != 0 ||
	    setresuid(r->uid, r->uid, r->uid) != 0)
		_exit(127);	/* takes the namespace, and the tool, with it */
	/*
	 * The uid change cleared the parent-death signal: arm it again, and check
	 * once more (the daemon still holds the status pipe's read end) that the
	 * daemon did not die in between.
	 */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		_exit(127);
	{
		struct pollfd pfd = { a->status, POLLOUT, 0 };

		if (poll(&pfd, 1, 0) < 0 || (pfd.revents & POLLERR) != 0)
			_exit(127);
	}
	spawn_closefrom(0);
	for (;;) {
		if ((sig = sigwaitinfo(&set, NULL)) < 0)
			continue;
		if (sig != SIGCHLD) {
			(void)kill(-tool, sig);
			continue;
		}
		while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
			if (p != tool)
				continue;
			if (WIFSIGNALED(st))
				_exit(128 + WTERMSIG(st));
			_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 127);
		}
	}
}

/* Map a jail init's 128+N exit back to "killed by N". */
int
spawn_wait_status(int jailed, int wstatus)
{
	int code;

	if (!jailed || !WIFEXITED(wstatus))
		return wstatus;
	code = WEXITSTATUS(wstatus);
	if (code > 128 && code < 128 + 32)
		return code - 128;	/* the wait status of a death by signal, no core */
	return wstatus;
}

/* Make an fd non-blocking and close-on-exec. */
static int
spawn_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/*
 * clone3 with flags (no new stack: the child goes on like a fork) into the cgroup
 * of cgroup_fd; -1 with errno.
 */
static pid_t
spawn_clone3(unsigned long long flags, int cgroup_fd)
{
#if defined(__linux__) && defined(SYS_clone3) && defined(CLONE_INTO_CGROUP)
	struct clone_args ca;

	memset(&ca, 0, sizeof ca);
	ca.flags = flags | CLONE_INTO_CGROUP;
	ca.exit_signal = SIGCHLD;
	ca.cgroup = (unsigned long long)cgroup_fd;
	return (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
#else
	(void)flags;
	(void)cgroup_fd;
	errno = ENOSYS;
	return -1;
#endif
}

/* Fork and exec; wait only for the exec to succeed or fail. */
int
spawn_child(const struct spawn_req *r, struct child *c, char **cause)
{
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	int st[2] = { -1, -1 }, i;
	char msg[160];
	ssize_t n;
	pid_t pid, parent = getpid();

	memset(c, 0, sizeof *c);
	c->pid = -1;
	c->in = c->out = c->err = -1;
	if (pipe2(pin, O_CLOEXEC) != 0 || pipe2(pout, O_CLOEXEC) != 0 ||
	    pipe2(perr, O_CLOEXEC) != 0 || pipe2(st, O_CLOEXEC) != 0) {
		xasprintf(cause, "pipe: %s", strerror(errno));
		goto fail;
	}
	if (r->jail != NULL) {
		struct spawn_jailarg ja = { r, pin[0], pout[1], perr[1], st[1] };

		if (r->cwd_fd >= 0) {
			/* An fd from outside the jail would be a way out of it. */
			xasprintf(cause, "a jailed child needs its cwd as a path");
			goto fail;
		}
		/*
		 * clone without CLONE_VM: the init lives as long as the tool, so it
		 * cannot borrow our memory the way a vfork child does until exec.
		 */
		/*
		 * The raw system call with no new stack: the child goes on, like a
		 * fork, on its copy of this stack (a separate static stack confuses
		 * sanitizers' stack bookkeeping). It never returns from here.
		 */
		if (r->cgroup_fd > 2)
			pid = spawn_clone3((unsigned long long)jail_clone_flags(r->jail),
			    r->cgroup_fd);
		else
			pid = (pid_t)syscall(SYS_clone, (unsigned long)(jail_clone_flags(r->jail) |
			    SIGCHLD), NULL, NULL, NULL, 0UL);
		if (pid == 0)
			_exit(spawn_jail_init(&ja));
		if (pid < 0) {
			xasprintf(cause, "clone: %s", strerror(errno));
			goto fail;
		}
		c->jailed = 1;
	} else {
		/*
		 * vfork: the child shares our memory until it execs, so the cost does
		 * not grow with the daemon's size and we are suspended only until the
		 * exec (which we wait for anyway). The child only makes system calls on
		 * its own stack frames and never returns from here.
		 */
		/*
		 * Into a cgroup: clone3 with CLONE_VFORK but its own memory (a raw
		 * CLONE_VM child cannot safely return through our stack frames).
		 */
		if (r->cgroup_fd > 2)
			pid = spawn_clone3(CLONE_VFORK, r->cgroup_fd);
		else
			pid = vfork();
		if (pid < 0) {
			xasprintf(cause, "%s: %s", r->cgroup_fd > 2 ? "clone3" : "vfork",
			    strerror(errno));
			goto fail;
		}
		if (pid == 0)
			spawn_exec(r, pin[0], pout[1], perr[1], st[1], parent);
	}
	close(st[1]);
	st[1] = -1;
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	pin[0] = pout[1] = perr[1] = -1;
	/* The child calls setsid() before exec: once exec is reported, killpg works. */
	do {
		n = read(st[0], msg, sizeof msg - 1);
	} while (n < 0 && errno == EINTR);
	close(st[0]);
	st[0] = -1;
	if (n > 0) {
		msg[n] = '\0';
		xasprintf(cause, "cannot start the tool (%s)", msg);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		goto fail;
	}
	c->pid = pid;
	c->in = pin[1];
	c->out = pout[0];
	c->err = perr[0];
	if (spawn_nonblock(c->in) != 0 || spawn_nonblock(c->out) != 0 ||
	    spawn_nonblock(c->err) != 0) {
		/* Cannot happen on a valid fd; the caller still owns and kills the child. */
		xasprintf(cause, "fcntl: %s", strerror(errno));
		return -1;
	}
	return 0;
fail:
	for (i = 0; i < 2; i++) {
		if (pin[i] >= 0)
			close(pin[i]);
		if (pout[i] >= 0)
			close(pout[i]);
		if (perr[i] >= 0)
			close(perr[i]);
		if (st[i] >= 0)
			close(st[i]);
	}
	return -1;
}

/* Create a private scratch directory with an unguessable name. */
char *
spawn_scratch_create(const char *parent, uid_t uid, gid_t gid, char **cause)
{
	unsigned char rnd[12];
	char *path;
	size_t i;

	randombytes_buf(rnd, sizeof rnd);
	xasprintf(&path, "%s/XXXXXXXXXXXXXXXXXXXXXXXX", parent);
	for (i = 0; i < sizeof rnd; i++)
		snprintf(path + strlen(parent) + 1 + 2 * i, 3, "%02x", rnd[i]);
	if (mkdir(path, 0700) != 0) {
		xasprintf(cause, "cannot create scratch directory in %s: %s", parent,
		    strerror(errno));
		free(path);
		return NULL;
	}
	if (chown(path, uid, gid) != 0) {
		xasprintf(cause, "chown %s: %s", path, strerror(errno));
		rmdir(path);
		free(path);
		return NULL;
	}
	return path;
}

/* Remove everything below dirfd (which is consumed), never following symlinks. */
static int
spawn_rmtree_fd(int dirfd, int depth)
{
	struct dirent *de;
	int rc = 0;
	DIR *d;

	if (depth > 256 || (d = fdopendir(dirfd)) == NULL) {
		close(dirfd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		int fd;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd, de->d_name, 0) == 0)
			continue;
		if (errno != EISDIR && errno != EPERM) {
			rc = -1;
			continue;
		}
		fd = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || spawn_rmtree_fd(fd, depth + 1) != 0 ||
		    unlinkat(dirfd, de->d_name, AT_REMOVEDIR) != 0)
			rc = -1;
	}
	closedir(d);
	return rc;
}

/* Remove a scratch tree the runner may have filled with anything. */
int
spawn_rmtree(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	if (spawn_rmtree_fd(fd, 0) != 0)
		return -1;
	return rmdir(path);
}

/* Walk dir's components below root with O_NOFOLLOW, so no symlink can lead outside. */
int
spawn_open_beneath(const char *root, const char *dir)
{
	size_t rlen = strlen(root);
	char *copy, *p, *comp;
	int fd, next;

	if (strncmp(dir, root, rlen) != 0 || (dir[rlen] != '\0' && dir[rlen] != '/' &&
	    strcmp(root, "/") != 0)) {
		errno = EXDEV;
		return -1;
	}
	if ((fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	copy = xstrdup(dir + rlen);
	for (p = copy; (comp = strsep(&p, "/")) != NULL;) {
		if (*comp == '\0' || strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) {
			close(fd);
			free(copy);
			errno = EXDEV;
			return -1;
		}
		next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (next < 0) {
			free(copy);
			return -1;
		}
		fd = next;
	}
	free(copy);
	return fd;
}
