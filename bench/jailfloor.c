/*
 * jailfloor: the least a fresh jail per call can cost. bench/run runs it as root, as a
 * server that bench/noop calls (a static exec and one Unix-socket round trip, the
 * floor of any shim), to measure the floor of any design that runs each call's tool
 * in a jail of its own (docs/JAIL.md): new PID, mount, IPC, UTS and network
 * namespaces, a read-only root that holds the system's /usr and /etc and nothing of
 * the host's state, a writable directory of the call's own and /proc of its own PID
 * namespace, the tool as the runner user. It does less than any such design must:
 * the tool is the namespace's PID 1 (no init), the call's directory is a fresh tmpfs
 * (nothing to create or remove), there is no /dev, no host name, no limits, no
 * descriptors to pass, no protocol, policy, audit or relay.
 *
 *	jailfloor --serve SOCKET UID GID TOOL [--ahead] [--no-net] [--init]
 *		listen on SOCKET (mode 0666); for each connection, one after the other:
 *		read a byte, run TOOL in a fresh jail as UID:GID, wait for it, write
 *		its exit status as a byte, close. With --ahead, the next call's jail is
 *		built as soon as a call is answered (a pool of one, as limits.jail_pool
 *		does), and a call only starts the tool in it; without, a call builds
 *		its jail itself. --no-net leaves the network namespace out (a tool with
 *		"network": "host"). --init makes PID 1 a process that vforks the tool
 *		and waits for it, as the bridge's jail does (a PID 1 without handlers
 *		never gets the SIGINT of a Ctrl-C). Runs until killed (or until accept
 *		fails for another reason than a signal or an aborted connection).
 *
 * The root is built once, in a mount namespace of the server's own: a tmpfs (over
 * /tmp there, so nothing of it shows on the host) with read-only binds of /usr and
 * /etc, the merged-/usr links, and mount points for /proc and the call's directory,
 * made read-only; each jail is a copy of it.
 * Any failure exits 1, with one line on stderr.
 */
#ifdef __linux__
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int	 jf_flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET;
static int	 jf_init;
static uid_t	 jf_uid;
static gid_t	 jf_gid;
static char	*jf_tool;

static int
jf_fail(const char *what)
{
	fprintf(stderr, "jailfloor: %s: %s\n", what, strerror(errno));
	return 1;
}

/* The jails' root, once: a read-only tmpfs with /usr and /etc, entered by pivot_root. */
static int
jf_root(void)
{
	static const char *dirs[] = { "usr", "etc", "proc", "call", "old" };
	static const char *links[][2] = { { "usr/bin", "bin" }, { "usr/sbin", "sbin" },
	    { "usr/lib", "lib" }, { "usr/lib64", "lib64" } };
	const char *root = "/tmp";	/* covered in our namespace only: no trace on the host */
	char p[64];
	size_t i;

	if (unshare(CLONE_NEWNS) != 0)
		return jf_fail("unshare mount namespace");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return jf_fail("make / private");
	if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755") != 0)
		return jf_fail("mount the root tmpfs");
	for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
		if (mkdir(p, 0755) != 0)
			return jf_fail("mkdir");
	}
	for (i = 0; i < sizeof links / sizeof links[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", root, links[i][1]);
		if (symlink(links[i][0], p) != 0)
			return jf_fail("symlink");
	}
	for (i = 0; i < 2; i++) {
		snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
		if (mount(i == 0 ? "/usr" : "/etc", p, NULL, MS_BIND | MS_REC, NULL) != 0 ||
		    mount(NULL, p, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
		    NULL) != 0)
			return jf_fail("bind a system directory");
	}
	snprintf(p, sizeof p, "%s/old", root);
	if (syscall(SYS_pivot_root, root, p) != 0)
		return jf_fail("pivot_root");
	if (chdir("/") != 0 || umount2("/old", MNT_DETACH) != 0 || rmdir("/old") != 0)
		return jf_fail("detach the host's tree");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
	    NULL) != 0)
		return jf_fail("make the root read-only");
	return 0;
}

/*
 * In a new jail: the call's directory, /proc, the runner; then, once a byte comes on
 * go (or at once without), the tool. Never returns.
 */
static void
jf_child(int go)
{
	char *argv[] = { jf_tool, NULL }, *envp[] = { "PATH=/usr/bin:/bin", "HOME=/call", NULL };
	char b;

	if (mount("tmpfs", "/call", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=700") != 0 ||
	    chown("/call", jf_uid, jf_gid) != 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0 ||
	    setgroups(0, NULL) != 0 || setgid(jf_gid) != 0 || setuid(jf_uid) != 0 ||
	    chdir("/call") != 0)
		_exit(126);
	if (go >= 0 && read(go, &b, 1) != 1)
		_exit(126);
	if (jf_init) {
		pid_t pid = vfork();
		int st;

		if (pid == 0) {
			execve(jf_tool, argv, envp);
			_exit(127);
		}
		while (pid > 0 && waitpid(pid, &st, 0) < 0)
			if (errno != EINTR)
				_exit(126);
		_exit(pid < 0 ? 126 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
	execve(jf_tool, argv, envp);
	_exit(127);
}

/* Clone a jail (like fork); with go, it waits for a byte there before the tool. */
static pid_t
jf_start(int *go)
{
	int p[2] = { -1, -1 };
	pid_t pid;

	if (go != NULL && pipe2(p, O_CLOEXEC) != 0)
		return -1;
	pid = (pid_t)syscall(SYS_clone, jf_flags | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid == 0) {
		if (go != NULL)
			close(p[1]);
		jf_child(go != NULL ? p[0] : -1);
	}
	if (go != NULL) {
		close(p[0]);
		*go = pid > 0 ? p[1] : -1;
		if (pid < 0)
			close(p[1]);
	}
	return pid;
}

static int
jf_serve(const char *path, int ahead)
{
	struct sockaddr_un sun;
	pid_t pid = -1;
	int l, c, st, go = -1;
	char b;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path) {
		fprintf(stderr, "jailfloor: %s: path too long\n", path);
		return 1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if ((l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return jf_fail("socket");
	(void)unlink(path);
	if (bind(l, (struct sockaddr *)&sun, sizeof sun) != 0 || chmod(path, 0666) != 0 ||
	    listen(l, 64) != 0)
		return jf_fail(path);
	if (jf_root() != 0)
		return 1;
	for (;;) {
		if (ahead && pid < 0 && (pid = jf_start(&go)) < 0)
			return jf_fail("clone");
		if ((c = accept4(l, NULL, NULL, SOCK_CLOEXEC)) == -1) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return jf_fail("accept");
		}
		if (read(c, &b, 1) == 1) {
			if (ahead) {
				b = 'g';
				if (write(go, &b, 1) != 1)
					return jf_fail("start the tool");
				close(go);
				go = -1;
			} else if ((pid = jf_start(NULL)) < 0)
				return jf_fail("clone");
			while (waitpid(pid, &st, 0) < 0)
				if (errno != EINTR)
					return jf_fail("waitpid");
			pid = -1;
			b = WIFEXITED(st) ? (char)WEXITSTATUS(st) : (char)(128 + WTERMSIG(st));
			if (write(c, &b, 1) != 1 && errno != EPIPE)
				return jf_fail("answer");
		}
		close(c);
	}
}

int
main(int argc, char **argv)
{
	char *end;
	unsigned long u, g;
	int i, ahead = 0;

	for (i = 6; i < argc; i++) {
		if (strcmp(argv[i], "--ahead") == 0)
			ahead = 1;
		else if (strcmp(argv[i], "--no-net") == 0)
			jf_flags &= ~CLONE_NEWNET;
		else if (strcmp(argv[i], "--init") == 0)
			jf_init = 1;
		else
			break;
	}
	if (argc < 6 || i < argc || strcmp(argv[1], "--serve") != 0) {
		fprintf(stderr, "usage: jailfloor --serve SOCKET UID GID TOOL [--ahead] [--no-net] "
		    "[--init]\n");
		return 2;
	}
	errno = 0;
	u = strtoul(argv[3], &end, 10);
	if (errno != 0 || *end != '\0' || u == 0 || u > 0x7fffffff)
		return fprintf(stderr, "jailfloor: bad uid %s\n", argv[3]), 2;
	g = strtoul(argv[4], &end, 10);
	if (errno != 0 || *end != '\0' || g == 0 || g > 0x7fffffff)
		return fprintf(stderr, "jailfloor: bad gid %s\n", argv[4]), 2;
	jf_uid = (uid_t)u;
	jf_gid = (gid_t)g;
	jf_tool = argv[5];
	signal(SIGPIPE, SIG_IGN);
	return jf_serve(argv[2], ahead);
}
#else
#include <stdio.h>

int
main(void)
{
	fprintf(stderr, "jailfloor: needs Linux namespaces\n");
	return 2;
}
#endif
