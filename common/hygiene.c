/* Process hygiene (see hygiene.h). */
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "hygiene.h"
#include "util.h"

#define HYGIENE_MAX_FD	1048576		/* the loop's bound when the limit is unknown */

/* Set a limit, or the hard limit we have where that is lower (we can only lower it). */
static int
hygiene_limit(int resource, rlim_t cur, rlim_t max)
{
	struct rlimit	rl;

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

const char *
hygiene_tool_limits(rlim_t cpu_seconds)
{
	if (hygiene_limit(RLIMIT_CORE, 0, 0) != 0)
		return "setrlimit core";
	if (hygiene_limit(RLIMIT_CPU, cpu_seconds, cpu_seconds + 5) != 0)
		return "setrlimit cpu";
	if (hygiene_limit(RLIMIT_AS, (rlim_t)8 << 30, (rlim_t)8 << 30) != 0)	/* 8 GiB */
		return "setrlimit as";
	if (hygiene_limit(RLIMIT_FSIZE, (rlim_t)4 << 30, (rlim_t)4 << 30) != 0)	/* 4 GiB */
		return "setrlimit fsize";
	if (hygiene_limit(RLIMIT_NOFILE, 1024, 1024) != 0)		/* open files */
		return "setrlimit nofile";
	if (hygiene_limit(RLIMIT_NPROC, 8192, 8192) != 0)	/* processes of the uid */
		return "setrlimit nproc";
	return NULL;
}

/* Close every descriptor from lowfd up. */
void
hygiene_closefrom(int lowfd)
{
	long max, fd;

#if defined(__linux__) && defined(SYS_close_range)
	if (syscall(SYS_close_range, (unsigned)lowfd, ~0U, 0) == 0)
		return;
#endif
	max = sysconf(_SC_OPEN_MAX);
	if (max < 0 || max > HYGIENE_MAX_FD)
		max = HYGIENE_MAX_FD;
	for (fd = lowfd; fd < max; fd++)
		(void)close((int)fd);
}

/* fds 0-2 open (on /dev/null when they were not). */
int
hygiene_stdio(void)
{
	int fd, i;

	for (i = 0; i < 3; i++) {
		if (fcntl(i, F_GETFD) != -1 || errno != EBADF)
			continue;
		/* 0..i-1 are open, so the lowest free slot is i. */
		if ((fd = open("/dev/null", O_RDWR)) != i) {
			if (fd >= 0)
				(void)close(fd);
			return -1;
		}
	}
	return 0;
}

/* fds 0-2 onto /dev/null. */
int
hygiene_stdio_null(void)
{
	int fd, i, rc = 0;

	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) == -1)
		return -1;
	for (i = 0; i < 3; i++) {
		if (dup2(fd, i) != i)
			rc = -1;
	}
	if (fd > 2)
		(void)close(fd);
	return rc;
}

/* Drop privileges for good and check that they are gone. */
const char *
hygiene_drop_privileges(uid_t uid, gid_t gid, const char *name)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (uid == 0) {
		errno = EPERM;
		return "refusing uid 0";
	}
	if (name != NULL ? initgroups(name, gid) != 0 : setgroups(0, NULL) != 0)
		return name != NULL ? "initgroups" : "setgroups";
#if defined(__linux__)
	if (setresgid(gid, gid, gid) != 0)
		return "setresgid";
	if (setresuid(uid, uid, uid) != 0)
		return "setresuid";
	if (getresuid(&ru, &eu, &su) != 0 || getresgid(&rg, &eg, &sg) != 0 ||
	    ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid ||
	    (name == NULL && getgroups(0, NULL) != 0)) {
		errno = EPERM;
		return "privilege drop verification";
	}
#else
	/*
	 * No setresuid here (macOS): as root, setgid and setuid set the real, effective
	 * and saved ids alike; the saved ones cannot be read back, so the check below
	 * that none of them can be regained is what proves them.
	 */
	(void)ru, (void)eu, (void)su, (void)rg, (void)eg, (void)sg;
	if (setgid(gid) != 0)
		return "setgid";
	if (setuid(uid) != 0)
		return "setuid";
	if (getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid ||
	    (name == NULL && getgroups(0, NULL) != 0)) {
		errno = EPERM;
		return "privilege drop verification";
	}
#endif
	if (setuid(0) == 0 || seteuid(0) == 0 || (gid != 0 && setgid(0) == 0)) {
		errno = EPERM;
		return "privileges could be regained";
	}
	return NULL;
}

/* Create or accept a root-owned directory. */
int
hygiene_mkdir_root(const char *path, mode_t mode, int enforce_mode, char **cause)
{
	struct stat st;
	int created;

	created = mkdir(path, mode) == 0;
	if (!created && errno != EEXIST) {
		xasprintf(cause, "cannot create %s: %s", path, strerror(errno));
		return -1;
	}
	if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    (!created && !enforce_mode && (st.st_mode & (S_IWGRP | S_IWOTH)))) {
		xasprintf(cause, "%s must be a root-owned directory nobody else may write", path);
		return -1;
	}
	/* The umask applied to mkdir; an existing directory is set right if asked. */
	if ((created || enforce_mode) && chmod(path, mode) != 0) {
		xasprintf(cause, "chmod %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Set signal sig to its default action. The C libraries refuse their internal
 * signals (glibc 32-33, musl 32-34) in sigaction(); a parent that ignored them
 * (GNU make does) would pass that on through exec, so on Linux those go to the
 * kernel directly (the generic rt_sigaction layout; SIG_DFL needs no restorer).
 */
static void
hygiene_signal_default(int sig)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	if (sigaction(sig, &sa, NULL) == 0 || errno != EINVAL)
		return;
#if defined(__linux__) && defined(SYS_rt_sigaction) && (defined(__x86_64__) || defined(__aarch64__))
	{
		struct {
			void		*handler;
			unsigned long	 flags;
			void		*restorer;
			unsigned long	 mask;
		} ksa;

		memset(&ksa, 0, sizeof ksa);	/* handler NULL is SIG_DFL */
		(void)syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof ksa.mask);
	}
#endif
}

/* Every signal to its default action (async-signal-safe; see hygiene.h). */
void
hygiene_signals_default(void)
{
	int sig;

	for (sig = 1; sig < NSIG; sig++)
		hygiene_signal_default(sig);
}
