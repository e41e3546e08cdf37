/* Platform code: peer credentials, process hardening, orphans, service managers. */
#include <sys/types.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#if defined(__linux__)
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sched.h>
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "platform.h"
#include "util.h"

#if !defined(__linux__) && !defined(__APPLE__) && !defined(__FreeBSD__) && !defined(__OpenBSD__)
#error "shimbridge needs kernel peer credentials (SO_PEERCRED or getpeereid) on this platform"
#endif

/* Peer credentials: SO_PEERCRED on Linux, getpeereid (+ LOCAL_PEERPID) elsewhere. */
int
platform_peercred(int fd, uid_t *uid, gid_t *gid, pid_t *pid)
{
#if defined(__linux__)
	struct ucred uc;
	socklen_t len = sizeof uc;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0)
		return -1;
	if (len != sizeof uc) {
		errno = EINVAL;
		return -1;
	}
	*uid = uc.uid;
	*gid = uc.gid;
	*pid = uc.pid;
	return 0;
#else
	if (getpeereid(fd, uid, gid) != 0)
		return -1;
	*pid = -1;
#if defined(LOCAL_PEERPID)
	{
		pid_t p;
		socklen_t len = sizeof p;

		if (getsockopt(fd, SOL_LOCAL, LOCAL_PEERPID, &p, &len) == 0)
			*pid = p;
	}
#endif
	return 0;
#endif
}

/* Non-dumpable, no core files: a crash must not write secrets to disk. */
int
platform_harden_self(void)
{
	struct rlimit rl = { 0, 0 };

	if (setrlimit(RLIMIT_CORE, &rl) != 0)
		return -1;
#if defined(__linux__)
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		return -1;
#endif
	return 0;
}

/* Orphaned descendants are reparented to us, so none can outlive its request unseen. */
int
platform_subreaper(void)
{
#if defined(__linux__)
	return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#else
	return 0;	/* macOS: no subreaper; process groups are the only net */
#endif
}

/*
 * The per-call scratch directories in memory: the daemon takes a mount namespace
 * of its own (the host's mounts still reach it, its own reach nobody) and mounts a
 * tmpfs of at most mib MiB, mode 0711, on dir. Its children and jails inherit it;
 * it goes with the last of them. On ext4 a mkdir costs a scan of the inode bitmap
 * past every recently deleted inode, and the daemon makes and removes a directory
 * per call: this was a third of its CPU per call (bench/README.md).
 */
int
platform_private_tmpfs(const char *dir, int mib, char **cause)
{
#if defined(__linux__)
	char opts[64];

	if (unshare(CLONE_NEWNS) != 0) {
		xasprintf(cause, "cannot take a mount namespace of its own: %s", strerror(errno));
		return -1;
	}
	/* A propagation change ignores source and type ("none": valgrind checks them). */
	if (mount("none", "/", "none", MS_REC | MS_SLAVE, NULL) != 0) {
		xasprintf(cause, "cannot make its mounts private: %s", strerror(errno));
		return -1;
	}
	(void)snprintf(opts, sizeof opts, "mode=0711,uid=0,gid=0,size=%dm", mib);
	if (mount("shimbridge-scratch", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0) {
		xasprintf(cause, "cannot mount a tmpfs on %s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
#else
	(void)dir;
	(void)mib;
	xasprintf(cause, "a private tmpfs is Linux-only");
	return -1;
#endif
}

/*
 * Our children from /proc/self/task/TID/children, read whole however long (one
 * read per 64 KiB instead of a scan of every process); -1 when the kernel lacks it.
 */
static int
platform_kill_children(pid_t self, int (*keep)(pid_t))
{
#if defined(__linux__)
	char path[64], *buf = NULL, *p, *end;
	size_t len = 0, cap = 0;
	ssize_t n;
	int fd, killed = 0;

	snprintf(path, sizeof path, "/proc/self/task/%ld/children", (long)self);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	for (;;) {
		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 16384;
			buf = xreallocarray(buf, cap, 1);
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (n < 0) {
		free(buf);
		return -1;
	}
	buf[len] = '\0';
	for (p = buf; *p != '\0'; p = end) {
		long pid = strtol(p, &end, 10);

		if (end == p)
			break;
		if (pid > 0 && !keep((pid_t)pid) && kill((pid_t)pid, SIGKILL) == 0)
			killed++;
	}
	free(buf);
	return killed;
#else
	(void)self;
	(void)keep;
	return -1;
#endif
}

/* SIGKILL every child of ours that keep() does not claim. */
int
platform_kill_orphans(int (*keep)(pid_t))
{
#if defined(__linux__)
	char path[64], buf[512], *p;
	struct dirent *de;
	pid_t self = getpid();
	static int warned;
	int killed = 0;
	DIR *d;

	/* Single-threaded: the main thread's children are all of ours. */
	if ((killed = platform_kill_children(self, keep)) >= 0)
		return killed;
	/* A kernel without CONFIG_PROC_CHILDREN: every process must be looked at. */
	if (!warned) {
		warned = 1;
		log_warnx("this kernel has no /proc/PID/task/TID/children: the orphan scan "
		    "reads every process on the host");
	}
	killed = 0;
	if ((d = opendir("/proc")) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		long pid, ppid;
		FILE *f;
		size_t n;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid = strtol(de->d_name, NULL, 10);
		snprintf(path, sizeof path, "/proc/%ld/stat", pid);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[n] = '\0';
		/* comm may hold spaces and parentheses: parse after the last ')'. */
		if ((p = strrchr(buf, ')')) == NULL || sscanf(p + 1, " %*c %ld", &ppid) != 1)
			continue;
		if (ppid != self || keep((pid_t)pid))
			continue;
		if (kill((pid_t)pid, SIGKILL) == 0)
			killed++;
	}
	closedir(d);
	return killed;
#else
	(void)keep;
	return 0;
#endif
}

/* Kill every process of a uid: run at start, the runner owns nothing legitimately then. */
int
platform_kill_uid(uid_t uid)
{
#if defined(__linux__)
	char path[64], line[256];
	struct dirent *de;
	int killed = 0;
	DIR *d;

	if ((d = opendir("/proc")) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		unsigned long ruid, euid;
		long pid;
		FILE *f;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid = strtol(de->d_name, NULL, 10);
		snprintf(path, sizeof path, "/proc/%ld/status", pid);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		while (fgets(line, sizeof line, f) != NULL) {
			if (sscanf(line, "Uid: %lu %lu", &ruid, &euid) == 2) {
				if ((ruid == uid || euid == uid) && kill((pid_t)pid, SIGKILL) == 0)
					killed++;
				break;
			}
		}
		fclose(f);
	}
	closedir(d);
	return killed;
#else
	(void)uid;
	return 0;
#endif
}

/* Sockets from the service manager: launchd on macOS, systemd's LISTEN_FDS elsewhere. */
int
platform_listen_fds(int **fds, char **cause)
{
	const char *spid = getenv("LISTEN_PID"), *sfds = getenv("LISTEN_FDS");
	char *end;
	long pid, n, i;

	*fds = NULL;
#if defined(__APPLE__)
	return launchd_listen_fds(fds, cause);
#endif
	if (spid == NULL || sfds == NULL)
		return 0;
	pid = strtol(spid, &end, 10);
	if (*end != '\0' || pid != (long)getpid())
		return 0;
	n = strtol(sfds, &end, 10);
	if (*end != '\0' || n < 1 || n > 16) {
		xasprintf(cause, "LISTEN_FDS=%s is not a count from 1 to 16", sfds);
		return -1;
	}
	*fds = xcalloc((size_t)n, sizeof **fds);
	for (i = 0; i < n; i++) {
		int fd = 3 + (int)i, type;
		socklen_t len = sizeof type;
		struct sockaddr_un sun;
		socklen_t slen = sizeof sun;

		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
		    type != SOCK_STREAM ||
		    getsockname(fd, (struct sockaddr *)&sun, &slen) != 0 ||
		    sun.sun_family != AF_UNIX) {
			xasprintf(cause, "socket-activation fd %d is not a Unix stream socket", fd);
			free(*fds);
			*fds = NULL;
			return -1;
		}
		if (slen <= sizeof(sa_family_t) || sun.sun_path[0] == '\0') {
			xasprintf(cause, "socket-activation fd %d is an abstract or unnamed "
			    "socket; only pathname sockets are accepted", fd);
			free(*fds);
			*fds = NULL;
			return -1;
		}
		(*fds)[i] = fd;
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return (int)n;
}

/* sd_notify's datagram protocol, without linking libsystemd. */
void
platform_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun;
	socklen_t len;
	int fd;

	if (path == NULL || (path[0] != '/' && path[0] != '@'))
		return;
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path)
		return;
	memcpy(sun.sun_path, path, strlen(path));
	if (sun.sun_path[0] == '@')	/* systemd may hand us an abstract address */
		sun.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return;
	(void)sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sun, len);
	close(fd);
}

/* Open descriptors of this process. */
long
platform_fd_count(void)
{
	struct dirent *de;
	long n = 0;
	DIR *d;

	if ((d = opendir("/proc/self/fd")) == NULL && (d = opendir("/dev/fd")) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] != '.')
			n++;
	}
	closedir(d);
	return n - 1;	/* the directory stream itself */
}

/* Resident set size in KiB. */
long
platform_rss_kib(void)
{
#if defined(__linux__)
	char line[256];
	long kib = -1;
	FILE *f;

	if ((f = fopen("/proc/self/status", "re")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL) {
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	}
	fclose(f);
	return kib;
#else
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return ru.ru_maxrss / 1024;
#endif
}
