/* The per-call jail: namespaces and a filesystem built from nothing (Linux). */
#include <sys/types.h>

#if defined(__linux__)
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jail.h"
#ifndef SHIMBRIDGE_JAIL_INIT
#include "log.h"
#include "util.h"
#endif

#ifndef SHIMBRIDGE_JAIL_INIT
/* An empty spec for one request. */
void
jail_spec_init(struct jail_spec *s, const char *root, int netns_fd, const char *tmp)
{
	memset(s, 0, sizeof *s);
	s->j.root = root;
	s->j.netns_fd = netns_fd;
	s->j.tmp = tmp;
	s->j.binds = s->b;
}

/* Add one bind unless the system directories already show it. */
int
jail_spec_bind(struct jail_spec *s, const char *path, int writable)
{
	if (!writable && jail_is_system_path(path))
		return 0;
	if (s->j.nbinds == JAIL_SPEC_BINDS)
		return -1;
	s->b[s->j.nbinds].path = path;
	s->b[s->j.nbinds++].writable = writable;
	return 0;
}

/* The read-only system directories of every jail (see jail_system). */
int
jail_is_system_path(const char *path)
{
	static const char *const dirs[] = { "/usr/", "/etc/", "/bin/", "/sbin/", "/lib/",
	    "/lib32/", "/lib64/", "/libx32/", NULL };
	size_t i;

	for (i = 0; dirs[i] != NULL; i++) {
		if (strncmp(path, dirs[i], strlen(dirs[i])) == 0 && strstr(path, "/../") == NULL)
			return 1;
	}
	return 0;
}

#endif /* !SHIMBRIDGE_JAIL_INIT */

#if defined(__linux__)

/*
 * What every tool needs from the host, read-only. On merged-/usr systems
 * (Debian 12) /bin, /sbin and /lib* are symlinks into /usr and are copied as
 * symlinks; where they are real directories they are bound like /usr.
 */
static const char *const jail_system[] = { "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32",
    "/lib64", "/libx32", NULL };

/*
 * Character devices a tool may need (major, minor): the host's nodes, checked
 * to be these devices, bound in (no mknod, so no CAP_MKNOD, which systemd's
 * PrivateDevices= takes away).
 */
static const struct {
	const char	*name;
	unsigned	 major, minor;
} jail_devs[] = {
	{ "/dev/null", 1, 3 }, { "/dev/zero", 1, 5 }, { "/dev/random", 1, 8 },
	{ "/dev/urandom", 1, 9 },
};

static const struct {
	const char	*path, *target;
} jail_links[] = {
	{ "/dev/fd", "/proc/self/fd" }, { "/dev/stdin", "/proc/self/fd/0" },
	{ "/dev/stdout", "/proc/self/fd/1" }, { "/dev/stderr", "/proc/self/fd/2" },
};

#ifndef SHIMBRIDGE_JAIL_INIT
/* The namespaces every jail gets; the netns only when none is given to join. */
int
jail_clone_flags(const struct jail *j)
{
	int f = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;

	if (j->netns_fd == JAIL_NET_NEW || j->netns_fd == JAIL_NET_NEW_LO)
		f |= CLONE_NEWNET;
	return f;
}
#endif

/* buf = root + path, without allocating; -1 (ENAMETOOLONG) if it does not fit. */
static int
jail_path(char *buf, size_t size, const char *root, const char *path)
{
	size_t r = strlen(root), p = strlen(path);

	while (r > 1 && root[r - 1] == '/')
		r--;
	if (r + p + 1 > size) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, root, r);
	memcpy(buf + r, path, p + 1);
	return 0;
}

/* Create every directory of full below the first rlen bytes (the jail root); last as a file if asked. */
static int
jail_mkdirs(char *full, size_t rlen, int last_is_file)
{
	struct stat st;
	char *p = full + rlen;
	int fd;

	for (;;) {
		while (*p == '/')
			p++;
		if (*p == '\0')
			return 0;
		p = strchr(p, '/');
		if (p != NULL)
			*p = '\0';
		if (p == NULL && last_is_file) {
			fd = open(full, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
			if (fd < 0 && (lstat(full, &st) != 0 || !S_ISREG(st.st_mode)))
				return -1;
			if (fd >= 0)
				close(fd);
		} else if (mkdir(full, 0755) != 0) {
			int e = errno;

			if (e == EEXIST && (lstat(full, &st) != 0 || !S_ISDIR(st.st_mode)))
				e = ENOTDIR;
			else if (e == EEXIST || (e == EROFS && lstat(full, &st) == 0 &&
			    S_ISDIR(st.st_mode)))
				e = 0;
			if (e != 0) {
				if (p != NULL)
					*p = '/';
				errno = e;
				return -1;
			}
		}
		if (p == NULL)
			return 0;
		*p = '/';
	}
}

/* Bind src (or the directory an fd names) at root+dst, then lock it down with a remount. */
static const char *
jail_bind_one(const char *root, const char *src, const char *dst, int writable)
{
	char target[PATH_MAX];
	struct stat st;
	unsigned long fl = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV;

	if (stat(src, &st) != 0)
		return "bind source";
	if (jail_path(target, sizeof target, root, dst) != 0)
		return "bind target";
	if (jail_mkdirs(target, strlen(root), !S_ISDIR(st.st_mode)) != 0)
		return "bind mount point";
	if (mount(src, target, NULL, MS_BIND | MS_REC, NULL) != 0)
		return "bind mount";
	if (!writable)
		fl |= MS_RDONLY;
	if (mount(NULL, target, NULL, fl, NULL) != 0)
		return "bind remount";
	return NULL;
}

/* Recreate a host symlink (merged /usr) inside the jail. */
static const char *
jail_symlink(const char *root, const char *path)
{
	char target[PATH_MAX], dst[PATH_MAX];
	ssize_t n;

	if ((n = readlink(path, target, sizeof target - 1)) < 0)
		return "readlink";
	target[n] = '\0';
	if (jail_path(dst, sizeof dst, root, path) != 0 || symlink(target, dst) != 0)
		return "symlink";
	return NULL;
}

/* Bind the host's device node path (major:minor, checked) at root+path. */
static const char *
jail_dev(const char *root, const char *path, unsigned major, unsigned minor)
{
	char target[PATH_MAX];
	struct stat st;
	int fd;

	if (stat(path, &st) != 0)
		return "device";
	if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(major, minor)) {
		errno = ENODEV;
		return "device";
	}
	if (jail_path(target, sizeof target, root, path) != 0)
		return "device path";
	if ((fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666)) < 0)
		return "device mount point";
	close(fd);
	if (mount(path, target, NULL, MS_BIND, NULL) != 0 ||
	    mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NOEXEC, NULL) != 0)
		return "bind device";
	return NULL;
}

/* The system directories, the devices, /proc, and /tmp as a link to tmp_link unless NULL. */
static const char *
jail_base_at(const char *root, const char *tmp_link)
{
	char p[PATH_MAX];
	struct stat st;
	const char *what;
	size_t i;

	for (i = 0; jail_system[i] != NULL; i++) {
		if (lstat(jail_system[i], &st) != 0)
			continue;
		if (S_ISLNK(st.st_mode))
			what = jail_symlink(root, jail_system[i]);
		else if (S_ISDIR(st.st_mode))
			what = jail_bind_one(root, jail_system[i], jail_system[i], 0);
		else
			continue;
		if (what != NULL)
			return what;
	}
	if (jail_path(p, sizeof p, root, "/dev") != 0 || mkdir(p, 0755) != 0)
		return "mkdir /dev";
	for (i = 0; i < sizeof jail_devs / sizeof jail_devs[0]; i++) {
		if ((what = jail_dev(root, jail_devs[i].name, jail_devs[i].major,
		    jail_devs[i].minor)) != NULL)
			return what;
	}
	for (i = 0; i < sizeof jail_links / sizeof jail_links[0]; i++) {
		if (jail_path(p, sizeof p, root, jail_links[i].path) != 0 ||
		    symlink(jail_links[i].target, p) != 0)
			return "symlink in /dev";
	}
	if (jail_path(p, sizeof p, root, "/proc") != 0 || mkdir(p, 0555) != 0)
		return "mkdir /proc";
	if (tmp_link == NULL)
		return NULL;
	if (jail_path(p, sizeof p, root, "/tmp") != 0 || symlink(tmp_link, p) != 0)
		return "symlink /tmp";
	return NULL;
}

/* The system directories, the devices, /proc and /tmp of a jail built from nothing. */
static const char *
jail_base(const struct jail *j)
{
	size_t i;

	/* A bind below /tmp (a test's state dir) gets a plain /tmp holding just that. */
	if (j->tmp == NULL)
		return jail_base_at(j->root, NULL);
	for (i = 0; i < j->nbinds; i++) {
		if (j->binds[i].path != NULL && strncmp(j->binds[i].path, "/tmp/", 5) == 0)
			return jail_base_at(j->root, NULL);
	}
	return jail_base_at(j->root, j->tmp);
}

/* Pivot into root and detach the host's tree. */
static const char *
jail_pivot(const char *root)
{
	/* pivot_root(".", "."): the old root ends up on top of the new one; detach it. */
	if (chdir(root) != 0)
		return "chdir jail root";
	if (syscall(SYS_pivot_root, ".", ".") != 0)
		return "pivot_root";
	if (umount2(".", MNT_DETACH) != 0)
		return "detach the host root";
	if (chdir("/") != 0)
		return "chdir /";
	return NULL;
}

/* Build the root, pivot into it and detach the host's tree. */
const char *
jail_enter(const struct jail *j)
{
	const char *what;
	size_t i;

	umask(022);
	if (j->netns_fd >= 0 && setns(j->netns_fd, CLONE_NEWNET) != 0)
		return "join network namespace";
	/* Nothing we mount may propagate back to the host, and nothing from it to us. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return "make mounts private";
	if (mount("shimbridge-jail", j->root, "tmpfs", MS_NOSUID,
	    "mode=0755,size=64k,nr_inodes=4096") != 0)
		return "mount jail root";
	if ((what = jail_base(j)) != NULL)
		return what;
	for (i = 0; i < j->nbinds; i++) {
		if (j->binds[i].path == NULL || j->binds[i].path[0] != '/') {
			errno = EINVAL;
			return "bind path";
		}
		if ((what = jail_bind_one(j->root, j->binds[i].path, j->binds[i].path,
		    j->binds[i].writable)) != NULL)
			return what;
	}
	if ((what = jail_pivot(j->root)) != NULL)
		return what;
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		return "mount /proc";
	if (mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID, NULL) != 0)
		return "make the jail root read-only";
	if (sethostname("shimbridge", 10) != 0)
		return "sethostname";
	return NULL;
}

#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH	0x00000004
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE		1
#endif
#ifndef SYS_open_tree
#define SYS_open_tree		428	/* the unified numbers of Linux 5.2 (alpha differs) */
#endif
#ifndef SYS_move_mount
#define SYS_move_mount		429
#endif

/*
 * The path in the template that /tmp links to when the scratch dirs are not
 * below /tmp: scratch_dir/tmp, which each jail's own tmpfs on scratch_dir makes
 * a link to its scratch dir (a scratch dir's name is hex, never "tmp").
 */
static int
jail_tmp_link(char *buf, size_t size, const char *scratch_dir)
{
	if (strncmp(scratch_dir, "/tmp/", 5) == 0) {
		buf[0] = '\0';
		return 0;
	}
	if ((size_t)snprintf(buf, size, "%s/tmp", scratch_dir) >= size) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 1;
}

/* Build the template in a fresh mount namespace of the caller and pivot into it. */
const char *
jail_template_build(const char *root, const char *scratch_dir)
{
	char p[PATH_MAX], link[PATH_MAX];
	const char *what;
	int l;

	umask(022);
	if ((l = jail_tmp_link(link, sizeof link, scratch_dir)) < 0)
		return "scratch dir path";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return "make mounts private";
	if (mount("shimbridge-jail", root, "tmpfs", MS_NOSUID,
	    "mode=0755,size=64k,nr_inodes=4096") != 0)
		return "mount jail root";
	if ((what = jail_base_at(root, l == 1 ? link : NULL)) != NULL)
		return what;
	if (jail_path(p, sizeof p, root, scratch_dir) != 0 ||
	    jail_mkdirs(p, strlen(root), 0) != 0)
		return "scratch dir mount point";
	if ((what = jail_pivot(root)) != NULL)
		return what;
	if (mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID, NULL) != 0)
		return "make the jail root read-only";
	return NULL;
}

/*
 * In a copy of the template: a tmpfs of this jail's own on the scratch dirs'
 * parent, holding only the mount point of this call's scratch dir (and the
 * /tmp link), read-only; the scratch dir (tree: its detached mount) on it,
 * read-write, nosuid, nodev; a /proc of the jail's PID namespace.
 */
const char *
jail_enter_template(const struct jail *j, int tree)
{
	char dir[PATH_MAX], link[PATH_MAX], *name;
	int l;

	umask(022);
	if (j->netns_fd >= 0 || j->tmp == NULL || j->tmp[0] != '/' ||
	    strlen(j->tmp) >= sizeof dir) {
		errno = EINVAL;
		return "template jail";
	}
	memcpy(dir, j->tmp, strlen(j->tmp) + 1);
	name = strrchr(dir, '/');
	if (name == dir || name[1] == '\0' || strcmp(name + 1, "tmp") == 0 ||
	    strcmp(name + 1, ".") == 0 || strcmp(name + 1, "..") == 0) {
		errno = EINVAL;
		return "scratch dir name";
	}
	*name++ = '\0';
	if ((l = jail_tmp_link(link, sizeof link, dir)) < 0)
		return "scratch dir path";
	if (chdir("/") != 0)
		return "chdir /";
	if (mount("shimbridge-jail", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "mode=0755,size=16k,nr_inodes=16") != 0)
		return "mount the scratch dirs' parent";
	if (chdir(dir) != 0 || mkdir(name, 0700) != 0)
		return "scratch dir mount point";
	if (l == 1 && symlink(name, "tmp") != 0)
		return "symlink /tmp";
	if (chdir("/") != 0)
		return "chdir /";
	if (mount(NULL, dir, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV |
	    MS_NOEXEC, NULL) != 0)
		return "make the scratch dirs' parent read-only";
	if (syscall(SYS_move_mount, tree, "", AT_FDCWD, j->tmp, MOVE_MOUNT_F_EMPTY_PATH) != 0)
		return "mount the scratch dir";
	if (mount(NULL, j->tmp, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) != 0)
		return "scratch dir remount";
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		return "mount /proc";
	if (sethostname("shimbridge", 10) != 0)
		return "sethostname";
	return NULL;
}

#ifndef SHIMBRIDGE_JAIL_INIT
/* A detached copy of the mount at path (a scratch dir), for a template jail; -1 and errno. */
int
jail_tree_open(const char *path)
{
	return (int)syscall(SYS_open_tree, AT_FDCWD, path, OPEN_TREE_CLONE | O_CLOEXEC);
}
#endif

/* Bring loopback up in the calling thread's network namespace. */
int
jail_lo_up(void)
{
	struct ifreq ifr;
	int s, rc = -1;

	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		rc = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
	return rc;
}

#ifndef SHIMBRIDGE_JAIL_INIT
/* A listener on 127.0.0.1:<ephemeral> in the calling thread's network namespace. */
static int
jail_listen_here(int *listen_fd, int *port, char **cause)
{
	struct sockaddr_in sin;
	socklen_t slen = sizeof sin;
	int s;

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0 ||
	    bind(s, (struct sockaddr *)&sin, sizeof sin) != 0 || listen(s, 64) != 0 ||
	    getsockname(s, (struct sockaddr *)&sin, &slen) != 0) {
		xasprintf(cause, "cannot listen in the new network namespace: %s", strerror(errno));
		if (s >= 0)
			close(s);
		return -1;
	}
	*port = ntohs(sin.sin_port);
	*listen_fd = s;
	return 0;
}

/*
 * Run in the network namespace ns (this thread only) and come back: a listener
 * there. A daemon thread left in the wrong namespace is a broken invariant.
 */
static int
jail_listen_in_ns(int ns, int *listen_fd, int *port, char **cause)
{
	int self, rc;

	if ((self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
		xasprintf(cause, "cannot open this thread's network namespace: %s", strerror(errno));
		return -1;
	}
	if (setns(ns, CLONE_NEWNET) != 0) {
		xasprintf(cause, "cannot enter the jail's network namespace: %s", strerror(errno));
		close(self);
		return -1;
	}
	rc = jail_listen_here(listen_fd, port, cause);
	if (setns(self, CLONE_NEWNET) != 0)
		fatalx("cannot return to the daemon's network namespace: %s", strerror(errno));
	close(self);
	return rc;
}

/*
 * A new network namespace with loopback up, made from this thread and left
 * again (unshare and setns change only the calling thread's namespace). The
 * daemon holds it by fd from the start, so it never has to open another
 * process's /proc/PID/ns (which would take CAP_SYS_PTRACE once that process is
 * a runner's).
 */
int
jail_netns_new(int *netns_fd, char **cause)
{
	int self, ns = -1, rc = -1;

	*netns_fd = -1;
	if ((self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
		xasprintf(cause, "cannot open this thread's network namespace: %s", strerror(errno));
		return -1;
	}
	if (unshare(CLONE_NEWNET) != 0) {
		xasprintf(cause, "cannot create a network namespace: %s", strerror(errno));
		close(self);
		return -1;
	}
	if (jail_lo_up() != 0)
		xasprintf(cause, "cannot bring loopback up in the new namespace: %s",
		    strerror(errno));
	else if ((ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
		xasprintf(cause, "cannot open the new network namespace: %s", strerror(errno));
	else {
		*netns_fd = ns;
		rc = 0;
	}
	if (setns(self, CLONE_NEWNET) != 0)
		fatalx("cannot return to the daemon's network namespace: %s", strerror(errno));
	close(self);
	return rc;
}

/* A new network namespace with loopback up and a listener inside it (jail.h). */
int
jail_netns_listen(int *netns_fd, int *listen_fd, int *port, char **cause)
{
	*listen_fd = -1;
	*port = 0;
	if (jail_netns_new(netns_fd, cause) != 0)
		return -1;
	if (jail_listen_in_ns(*netns_fd, listen_fd, port, cause) != 0) {
		close(*netns_fd);
		*netns_fd = -1;
		return -1;
	}
	return 0;
}

/* A listener inside the network namespace ns, which the daemon made (jail.h). */
int
jail_netns_listen_in(int ns, int *netns_fd, int *listen_fd, int *port, char **cause)
{
	*netns_fd = *listen_fd = -1;
	*port = 0;
	if (jail_listen_in_ns(ns, listen_fd, port, cause) != 0)
		return -1;
	if ((*netns_fd = fcntl(ns, F_DUPFD_CLOEXEC, 3)) < 0) {
		xasprintf(cause, "dup: %s", strerror(errno));
		close(*listen_fd);
		*listen_fd = -1;
		return -1;
	}
	return 0;
}
#endif /* !SHIMBRIDGE_JAIL_INIT */

#else /* !__linux__ */

/* No namespaces here: a jail cannot be built (see docs/JAIL.md for macOS). */
int
jail_clone_flags(const struct jail *j)
{
	(void)j;
	return 0;
}

/* No namespaces here. */
const char *
jail_enter(const struct jail *j)
{
	(void)j;
	errno = ENOSYS;
	return "jail";
}

/* No network namespaces here. */
int
jail_netns_listen(int *netns_fd, int *listen_fd, int *port, char **cause)
{
	*netns_fd = *listen_fd = -1;
	*port = 0;
	xasprintf(cause, "network namespaces need Linux");
	return -1;
}

/* No network namespaces here. */
int
jail_netns_listen_in(int ns, int *netns_fd, int *listen_fd, int *port, char **cause)
{
	(void)ns;
	return jail_netns_listen(netns_fd, listen_fd, port, cause);
}

/* No network namespaces here. */
int
jail_netns_new(int *netns_fd, char **cause)
{
	*netns_fd = -1;
	xasprintf(cause, "network namespaces need Linux");
	return -1;
}

#endif
