/* Child processes: building their environment and running them as the runner. */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#if defined(__linux__)
#include <sys/prctl.h>
#include <linux/sched.h>
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "jail.h"
#include "log.h"
#include "proc.h"
#include "jailmsg.h"
#include "platform.h"
#include "cgroup.h"
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

/* Close every descriptor from lowfd up (the one copy in common/). */
static void
spawn_closefrom(int lowfd)
{
	hygiene_closefrom(lowfd);
}

/*
 * In the child (proc.h setup hook), with its fds in place and before the drop:
 * the tool's rlimits, and a private umask. System calls only (vfork-safe).
 */
static const char *
spawn_setup(const struct proc_req *pr, void *arg)
{
	const struct spawn_req *r = arg;
	const char		*step;

	(void)pr;
	if ((step = hygiene_tool_limits((rlim_t)r->cpu_seconds)) != NULL)
		return step;
	umask(077);
	return NULL;
}

#if defined(__linux__)
/* The jail's init program (shimbridge-jail), opened once (spawn_jail_find). */
static int	spawn_init_fd = -1;

/* Open the init at path if it is a root-owned regular file nobody else can write. */
static int
spawn_jail_open(const char *path)
{
	struct stat st;
	int fd;

	if ((fd = open(path, O_PATH | O_CLOEXEC)) < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || (st.st_mode & S_IXUSR) == 0) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

/* Find shimbridge-jail next to the daemon, or in ../libexec/shimbridge (installed). */
int
spawn_jail_find(const char *path_given, char **cause)
{
	static const char *const rel[] = { "shimbridge-jail",
	    "../libexec/shimbridge/shimbridge-jail", NULL };
	char exe[PATH_MAX], *slash, *path = NULL;
	ssize_t n;
	size_t i;
	int e = ENOENT;

	if (spawn_init_fd >= 0)
		close(spawn_init_fd);
	if (path_given != NULL) {
		if ((spawn_init_fd = spawn_jail_open(path_given)) >= 0)
			return 0;
		xasprintf(cause, "cannot use the jail's init program %s: %s", path_given,
		    strerror(errno));
		return -1;
	}
	if ((n = readlink("/proc/self/exe", exe, sizeof exe - 1)) < 0) {
		xasprintf(cause, "cannot find the daemon's own path: %s", strerror(errno));
		return -1;
	}
	exe[n] = '\0';
	if ((slash = strrchr(exe, '/')) != NULL)
		*slash = '\0';
	for (i = 0; rel[i] != NULL; i++) {
		xasprintf(&path, "%s/%s", exe, rel[i]);
		if ((spawn_init_fd = spawn_jail_open(path)) >= 0) {
			free(path);
			return 0;
		}
		if (errno != ENOENT)
			e = errno;
		free(path);
	}
	xasprintf(cause, "cannot use the jail's init program shimbridge-jail next to the "
	    "daemon (%s/) or in %s/../libexec/shimbridge/: %s (it must be a root-owned "
	    "executable nobody else can write; reinstall, or run with --no-jail for "
	    "measurements only)", exe, exe, strerror(e));
	return -1;
}

/* What the clone child needs until it execs the init. */
struct spawn_jailarg {
	int	ctl;		/* its end of the control socket */
	int	server;		/* exec it as the jail server (--server) */
};

/*
 * The stack of the clone children (CLONE_VM|CLONE_VFORK: the daemon is
 * suspended until they exec, and it is single-threaded, so one serves all).
 */
static char	spawn_clone_stack[16384] __attribute__((aligned(16)));

/*
 * The clone child (CLONE_VM|CLONE_VFORK, on its own small stack): it shares
 * the daemon's memory until the execve a few system calls later, and only moves
 * the control socket to fd 0, closes everything else and execs the init. No
 * copy of the daemon's memory is ever made. Not instrumented: the sanitizers'
 * bookkeeping would run on a stack they do not know.
 */
__attribute__((no_sanitize("address", "undefined")))
static int
spawn_jail_exec(void *arg)
{
	static char *const argv[] = { "shimbridge-jail", NULL };
	static char *const sargv[] = { "shimbridge-jail", "--server", NULL };
	static char *const envp[] = { NULL };
	const struct spawn_jailarg *a = arg;

	if (dup2(a->ctl, 0) < 0 || dup3(spawn_init_fd, 1, O_CLOEXEC) < 0)
		_exit(127);
	spawn_closefrom(2);
	syscall(SYS_execveat, 1, "", a->server ? sargv : argv, envp, AT_EMPTY_PATH);
	_exit(127);
}

/* Send one message with descriptors on the header; 0, or -1 and errno. */
static int
spawn_jail_send(int ctl, enum jailmsg_type type, const unsigned char *body, size_t len,
    const int *fds, int nfds)
{
	unsigned char hdr[JAILMSG_HDR];
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * 4)];
	} cm;
	struct iovec iov[2] = { { hdr, sizeof hdr }, { (void *)body, len } };
	struct msghdr mh;
	struct cmsghdr *c;
	size_t sent = 0, total = sizeof hdr + len;
	ssize_t n;

	jailmsg_put_header(hdr, type, (uint32_t)len);
	memset(&mh, 0, sizeof mh);
	mh.msg_iov = iov;
	mh.msg_iovlen = len > 0 ? 2 : 1;
	if (nfds > 0) {
		memset(&cm, 0, sizeof cm);
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	do {
		n = sendmsg(ctl, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	/* The rest of a long body (the socket buffer was full), without descriptors. */
	for (sent = (size_t)n; sent < total; sent += (size_t)n) {
		const unsigned char *p = sent < sizeof hdr ? hdr + sent : body + (sent - sizeof hdr);
		size_t left = sent < sizeof hdr ? sizeof hdr - sent : total - sent;

		do {
			n = send(ctl, p, left, MSG_NOSIGNAL);
		} while (n < 0 && errno == EINTR);
		if (n <= 0)
			return -1;
	}
	return 0;
}

static int	spawn_jail_reply_rest(int, const unsigned char *, int32_t *, char **);

/*
 * Wait up to 30 s for the next message of an init (or, with pid, of the jail
 * server: PID is accepted then, *pid its value); returns its type, or -1 with
 * *cause (an ERROR's text, EOF, a timeout). With fd, a READY's descriptor (the
 * jail's mount namespace) goes to *fd (-1: none came); any other is closed.
 */
static int
spawn_jail_reply_fd(int ctl, int32_t *pid, int *fd, char **cause)
{
	unsigned char hdr[JAILMSG_HDR];
	struct pollfd pfd = { ctl, POLLIN, 0 };
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov;
	struct msghdr mh;
	struct cmsghdr *c;
	size_t got = 0;
	ssize_t n;
	int rfd = -1, t;

	if (fd != NULL)
		*fd = -1;
	while (got < sizeof hdr + 0) {
		if (poll(&pfd, 1, 30000) == 0) {
			xasprintf(cause, "jail: the %s did not answer", pid != NULL ?
			    "jail server" : "init");
			goto fail;
		}
		/* A descriptor rides on a header (READY: the jail's mount namespace). */
		iov.iov_base = hdr + got;
		iov.iov_len = sizeof hdr - got;
		memset(&mh, 0, sizeof mh);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof cm.buf;
		n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			xasprintf(cause, pid != NULL ? "jail: the jail server ended" :
			    "jail: the init ended before the tool started");
			goto fail;
		}
		for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
			    c->cmsg_len == CMSG_LEN(sizeof(int)) && rfd < 0)
				memcpy(&rfd, CMSG_DATA(c), sizeof rfd);
		}
		got += (size_t)n;
	}
	if ((t = spawn_jail_reply_rest(ctl, hdr, pid, cause)) < 0)
		goto fail;
	if (fd != NULL && t == JAILMSG_READY) {
		*fd = rfd;
		rfd = -1;
	}
	if (rfd >= 0)
		close(rfd);	/* not asked for, or not on a READY */
	return t;
fail:
	if (rfd >= 0)
		close(rfd);
	return -1;
}

/* The rest of a message whose header is in hdr (see spawn_jail_reply_fd). */
static int
spawn_jail_reply_rest(int ctl, const unsigned char *hdr, int32_t *pid, char **cause)
{
	char msg[512];
	const char *why;
	enum jailmsg_type type;
	struct pollfd pfd = { ctl, POLLIN, 0 };
	uint32_t len;
	size_t got;
	ssize_t n;

	if (jailmsg_get_header(hdr, &type, &len) != 0 ||
	    (type != JAILMSG_READY && type != JAILMSG_EXEC && type != JAILMSG_ERROR &&
	    (type != JAILMSG_PID || pid == NULL)) || len >= sizeof msg) {
		xasprintf(cause, "jail: a bad message from the %s", pid != NULL ?
		    "jail server" : "init");
		return -1;
	}
	for (got = 0; got < len; got += (size_t)n) {
		if (poll(&pfd, 1, 30000) == 0 || (n = read(ctl, msg + got, len - got)) <= 0) {
			xasprintf(cause, "jail: a short message from the %s", pid != NULL ?
			    "jail server" : "init");
			return -1;
		}
	}
	if (type == JAILMSG_ERROR) {
		msg[len] = '\0';
		msg[strcspn(msg, "\n")] = '\0';
		xasprintf(cause, "%s", len > 0 ? msg : "jail: failed");
		return -1;
	}
	if (type == JAILMSG_PID && jailmsg_pid_decode((unsigned char *)msg, len, pid, &why) != 0) {
		xasprintf(cause, "jail: %s", why);
		return -1;
	}
	return (int)type;
}

/* The next message from an init: READY, EXEC, or -1 with *cause. */
static int
spawn_jail_reply(int ctl, char **cause)
{
	return spawn_jail_reply_fd(ctl, NULL, NULL, cause);
}

/* The same, from the jail server: PID is accepted too (*pid its value). */
static int
spawn_jail_reply_pid(int ctl, int32_t *pid, char **cause)
{
	return spawn_jail_reply_fd(ctl, pid, NULL, cause);
}

/*
 * The jail server (shimbridge-jail --server): exec'd once, it forks every
 * jail's init with CLONE_PARENT, so the inits stay the daemon's children and
 * are not exec'd one by one (docs/JAIL.md, "The jail server"). Started with the
 * first jail, again after it died.
 */
static pid_t	spawn_srv_pid = -1;
static int	spawn_srv_fd = -1;
static pid_t	spawn_srv_owner = -1;	/* the process that started it */

/* Let go of the server: it exits on EOF; the reaper collects it. */
static void
spawn_jail_server_stop(void)
{
	if (spawn_srv_fd >= 0)
		close(spawn_srv_fd);
	spawn_srv_fd = -1;
	spawn_srv_pid = -1;
}

/* Exec the server, in the daemon's own namespaces and cgroup. 0, or -1 and *cause. */
int
spawn_jail_server_start(char **cause)
{
	struct spawn_jailarg a;
	int sv[2];
	pid_t pid;

	if (spawn_init_fd < 0) {
		xasprintf(cause, "jail: no init program (shimbridge-jail)");
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		xasprintf(cause, "jail: socketpair: %s", strerror(errno));
		return -1;
	}
	a.ctl = sv[1];
	a.server = 1;
	pid = clone(spawn_jail_exec, spawn_clone_stack + sizeof spawn_clone_stack,
	    CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
	close(sv[1]);
	if (pid < 0) {
		xasprintf(cause, "jail: cannot start the jail server: %s", strerror(errno));
		close(sv[0]);
		return -1;
	}
	spawn_srv_pid = pid;
	spawn_srv_fd = sv[0];
	spawn_srv_owner = getpid();
	return 0;
}

/*
 * The template server: a jail server (same program, comm sb-jail-tmpl) that the
 * jail server clones as the daemon's child on TMPL and that lives in the
 * template's mount namespace, so that CLONE_NEWNS copies the template for each
 * of its inits. Started with the first template jail after it ended; after a
 * failed start, template jails are built from nothing for a minute.
 */
static char	*spawn_tmpl_root, *spawn_tmpl_dir;	/* NULL: no template */
static pid_t	 spawn_tsrv_pid = -1;
static int	 spawn_tsrv_fd = -1;
static pid_t	 spawn_tsrv_owner = -1;
static time_t	 spawn_tsrv_failed;		/* when a start last failed */
#define SPAWN_TSRV_RETRY	60		/* seconds */

/* Let go of the template server: it exits on EOF; the reaper collects it. */
static void
spawn_tsrv_stop(void)
{
	if (spawn_tsrv_fd >= 0)
		close(spawn_tsrv_fd);
	spawn_tsrv_fd = -1;
	spawn_tsrv_pid = -1;
}

/* Wait up to a second for a child that said it is ending, then kill it; reap it. */
static void
spawn_reap_now(pid_t pid)
{
	int i, st;

	for (i = 0; i < 100; i++) {
		if (waitpid(pid, &st, WNOHANG) != 0)
			return;
		usleep(10000);
	}
	(void)kill(pid, SIGKILL);
	(void)waitpid(pid, &st, 0);
}

/*
 * Have the jail server start a template server and wait until it has built the
 * template (READY). 0, or -1 and *cause.
 */
static int
spawn_tsrv_start(char **cause)
{
	unsigned char *body;
	size_t len;
	int sv[2] = { -1, -1 }, t;
	int32_t pid = 0;

	if (spawn_srv_fd >= 0 && spawn_srv_owner != getpid())
		spawn_jail_server_stop();
	if (spawn_srv_fd < 0 && spawn_jail_server_start(cause) != 0)
		return -1;
	len = jailmsg_tmpl_encode(NULL, SIZE_MAX, spawn_tmpl_root, spawn_tmpl_dir);
	body = xmalloc(len);
	(void)jailmsg_tmpl_encode(body, len, spawn_tmpl_root, spawn_tmpl_dir);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		xasprintf(cause, "jail template: socketpair: %s", strerror(errno));
		free(body);
		return -1;
	}
	t = spawn_jail_send(spawn_srv_fd, JAILMSG_TMPL, body, len, &sv[1], 1);
	free(body);
	close(sv[1]);
	if (t != 0 || spawn_jail_reply_pid(spawn_srv_fd, &pid, cause) != JAILMSG_PID) {
		if (t != 0)
			xasprintf(cause, "jail template: the jail server is gone: %s",
			    strerror(errno));
		spawn_jail_server_stop();	/* gone or confused: the next jail starts another */
		close(sv[0]);
		return -1;
	}
	if (pid < 0) {
		xasprintf(cause, "jail template: clone: %s", strerror(-pid));
		close(sv[0]);
		return -1;
	}
	/* The template is built before READY: a failure is its ERROR, and it exits. */
	if (spawn_jail_reply_pid(sv[0], NULL, cause) != JAILMSG_READY) {
		close(sv[0]);
		spawn_reap_now(pid);
		return -1;
	}
	spawn_tsrv_pid = pid;
	spawn_tsrv_fd = sv[0];
	spawn_tsrv_owner = getpid();
	return 0;
}

/* Set what the template holds and start its server (see spawn.h). */
int
spawn_jail_template(const char *root, const char *scratch_dir, char **cause)
{
	free(spawn_tmpl_root);
	free(spawn_tmpl_dir);
	spawn_tmpl_root = xstrdup(root);
	spawn_tmpl_dir = xstrdup(scratch_dir);
	spawn_tsrv_stop();
	if (spawn_tsrv_start(cause) != 0) {
		spawn_tsrv_failed = time(NULL);
		return -1;
	}
	spawn_tsrv_failed = 0;
	return 0;
}

/*
 * Whether the jail j is of the template's shape: its one bind is its scratch
 * dir, read-write, directly in the template's scratch_dir, and it joins no
 * network namespace (a new one, or the host's).
 */
static int
spawn_tmpl_fits(const struct jail *j)
{
	size_t n;

	if (spawn_tmpl_dir == NULL || j->tmp == NULL || j->nbinds != 1 ||
	    !j->binds[0].writable || strcmp(j->binds[0].path, j->tmp) != 0 ||
	    (j->netns_fd != JAIL_NET_NEW && j->netns_fd != JAIL_NET_HOST))
		return 0;
	n = strlen(spawn_tmpl_dir);
	return strncmp(j->tmp, spawn_tmpl_dir, n) == 0 && j->tmp[n] == '/' &&
	    j->tmp[n + 1] != '\0' && strchr(j->tmp + n + 1, '/') == NULL;
}

/*
 * The template server to fork a template jail's init, started when there is
 * none (at most once a minute after a failure): 0, or -1 (build the jail from
 * nothing; the failure is logged).
 */
static int
spawn_tsrv_ready(void)
{
	char *why = NULL;

	if (spawn_tsrv_fd >= 0 && spawn_tsrv_owner != getpid())
		spawn_tsrv_stop();
	if (spawn_tsrv_fd >= 0)
		return 0;
	if (spawn_tsrv_failed != 0 && time(NULL) - spawn_tsrv_failed < SPAWN_TSRV_RETRY)
		return -1;
	if (spawn_tsrv_start(&why) != 0) {
		log_warnx("%s: jails are built from nothing for a minute", why);
		free(why);
		spawn_tsrv_failed = time(NULL);
		return -1;
	}
	spawn_tsrv_failed = 0;
	return 0;
}

/* Whether pid is the jail server or the template server (the orphan scan leaves them alone). */
int
spawn_jail_server_is(pid_t pid)
{
	return pid > 0 && (pid == spawn_srv_pid || pid == spawn_tsrv_pid);
}

/* The reaper collected pid: 1 if it was the jail server, 2 the template server. */
int
spawn_jail_server_reaped(pid_t pid)
{
	if (pid <= 0)
		return 0;
	if (pid == spawn_srv_pid) {
		spawn_jail_server_stop();
		return 1;
	}
	if (pid == spawn_tsrv_pid) {
		spawn_tsrv_stop();
		return 2;
	}
	return 0;
}

/*
 * A finished jail's mount namespace (struct child mntns): handed to the server,
 * whose last close tears the jail's mounts down off the daemon's thread (see
 * JAILMSG_DROP); closed here when there is no server of ours or it is gone.
 */
void
spawn_jail_drop(int mntns)
{
	int tsrv = 0, fd = -1;
	long n;

	if (mntns < 0)
		return;
	if (spawn_srv_fd >= 0 && spawn_srv_owner == getpid())
		fd = spawn_srv_fd;
	else if (spawn_tsrv_fd >= 0 && spawn_tsrv_owner == getpid()) {
		fd = spawn_tsrv_fd;
		tsrv = 1;
	}
	if (fd >= 0) {
		/* Never waits: with the server's queue full, the close below does it all. */
		do {
			n = jailmsg_send_empty(fd, JAILMSG_DROP, mntns, MSG_DONTWAIT);
		} while (n < 0 && errno == EINTR);
		/* A torn message, or gone: let go of it; the next jail starts another. */
		if ((n >= 0 && n != JAILMSG_HDR) ||
		    (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			if (tsrv)
				spawn_tsrv_stop();
			else
				spawn_jail_server_stop();
		}
	}
	close(mntns);
}

/*
 * Have the server fork an init in the namespaces ns, with ctl as its control
 * socket, in the cgroup of cgroup_fd when > 2. The daemon waits for the pid: no
 * SIGCHLD of that init is reaped before the daemon knows it. A server that is
 * gone is started again, once. The pid, or -1 and *cause.
 */
static pid_t
spawn_jail_server_fork(int ns, int ctl, int cgroup_fd, char **cause)
{
	unsigned char body[JAILMSG_FORK_LEN];
	int fds[2] = { ctl, cgroup_fd }, nfds = cgroup_fd > 2 ? 2 : 1, try;
	int32_t pid = 0;
	char *why = NULL;

	jailmsg_fork_encode(body, (uint32_t)ns, nfds == 2, 0);
	/*
	 * A forked copy of the daemon (tests do this) must not use its parent's
	 * server: the inits would be its parent's children, not its own.
	 */
	if (spawn_srv_fd >= 0 && spawn_srv_owner != getpid())
		spawn_jail_server_stop();
	for (try = 0; try < 2; try++) {
		free(why);
		why = NULL;
		if (spawn_srv_fd < 0 && spawn_jail_server_start(&why) != 0)
			break;
		if (spawn_jail_send(spawn_srv_fd, JAILMSG_FORK, body, sizeof body, fds, nfds) != 0)
			xasprintf(&why, "jail: the jail server is gone: %s", strerror(errno));
		else if (spawn_jail_reply_pid(spawn_srv_fd, &pid, &why) == JAILMSG_PID)
			break;
		/* Gone (killed: EOF), or it said why it stopped: a new one, once. */
		spawn_jail_server_stop();
		pid = 0;
	}
	if (pid == 0) {
		*cause = why != NULL ? why : xstrdup("jail: the jail server did not answer");
		return -1;
	}
	free(why);
	if (pid < 0) {
		xasprintf(cause, "jail: clone: %s", strerror(-pid));
		return -1;
	}
	return (pid_t)pid;
}

/*
 * Have the template server fork a template jail's init (as spawn_jail_server_fork).
 * The pid, or -1 (it is gone or could not: the caller builds the jail from
 * nothing, with a new control socket).
 */
static pid_t
spawn_tsrv_fork(int ns, int ctl, int cgroup_fd)
{
	unsigned char body[JAILMSG_FORK_LEN];
	int fds[2] = { ctl, cgroup_fd }, nfds = cgroup_fd > 2 ? 2 : 1;
	int32_t pid = 0;
	char *why = NULL;

	jailmsg_fork_encode(body, (uint32_t)ns, nfds == 2, 1);
	if (spawn_jail_send(spawn_tsrv_fd, JAILMSG_FORK, body, sizeof body, fds, nfds) != 0)
		xasprintf(&why, "the jail template server is gone: %s", strerror(errno));
	else if (spawn_jail_reply_pid(spawn_tsrv_fd, &pid, &why) == JAILMSG_PID && pid > 0)
		return (pid_t)pid;
	else if (why == NULL)
		xasprintf(&why, "the jail template server: clone: %s", strerror(-pid));
	log_warnx("%s: this jail is built from nothing", why);
	free(why);
	if (pid == 0)
		spawn_tsrv_stop();	/* gone or confused: the next template jail starts another */
	return -1;
}

/* The SETUP message's network mode for a jail, and the fd to send (or -1). */
static enum jailmsg_net
spawn_jail_net(const struct jail *j, int *fd)
{
	*fd = -1;
	switch (j->netns_fd) {
	case JAIL_NET_NEW:
		return JAILMSG_NET_NEW;
	case JAIL_NET_NEW_LO:
		return JAILMSG_NET_NEW_LO;
	case JAIL_NET_HOST:
		return JAILMSG_NET_HOST;
	default:
		*fd = j->netns_fd;
		return JAILMSG_NET_JOIN;
	}
}

/* Start a jail's init in fresh namespaces and send it the jail to build. */
int
spawn_jail_start(const struct jail *j, uid_t uid, gid_t gid, int cgroup_fd,
    struct spawn_jail *sj, char **cause)
{
	struct jailmsg_setup s;
	unsigned char *body = NULL;
	size_t len, i;
	int sv[2] = { -1, -1 }, nsfd, tree = -1;
	struct jail jn;

	sj->pid = -1;
	sj->ctl = -1;
	sj->netns = -1;
	if (spawn_init_fd < 0) {
		xasprintf(cause, "jail: no init program (shimbridge-jail)");
		return -1;
	}
	/*
	 * A new netns with loopback up is made here and joined by the init: the
	 * daemon holds it from the start, to listen inside it when the jail is
	 * claimed (op-git), without opening the init's /proc/PID/ns later.
	 */
	if (j->netns_fd == JAIL_NET_NEW_LO) {
		if (jail_netns_new(&sj->netns, cause) != 0)
			return -1;
		jn = *j;
		jn.netns_fd = sj->netns;
		j = &jn;
	}
	memset(&s, 0, sizeof s);
	s.uid = (uint32_t)uid;
	s.gid = (uint32_t)gid;
	s.net = spawn_jail_net(j, &nsfd);
	s.root = j->root;
	s.scratch = j->tmp != NULL ? j->tmp : "";
	if (j->nbinds > JAILMSG_BINDS_MAX) {
		xasprintf(cause, "jail: too many binds");
		goto fail;
	}
	for (i = 0; i < j->nbinds; i++) {
		s.binds[i].path = j->binds[i].path;
		s.binds[i].writable = j->binds[i].writable;
	}
	s.nbinds = j->nbinds;
	if ((len = jailmsg_setup_size(&s)) == 0) {
		xasprintf(cause, "jail: the jail's paths are too long");
		goto fail;
	}
	body = xmalloc(len);
	(void)jailmsg_setup_encode(body, len, &s);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		xasprintf(cause, "jail: socketpair: %s", strerror(errno));
		goto fail;
	}
	/*
	 * The jail server forks the init in the jail's namespaces, as our child,
	 * in its session's cgroup when there are cgroups (bridge/cgroup.h). A jail
	 * of the template's shape is a copy of the template instead: the template
	 * server forks its init, which mounts only the scratch dir (its detached
	 * mount rides on the SETUP) and /proc.
	 */
	if (spawn_tmpl_fits(j) && spawn_tsrv_ready() == 0) {
		if ((tree = jail_tree_open(j->tmp)) < 0) {
			log_warnx("jail template: open_tree %s: %s: jails are built from "
			    "nothing for a minute", j->tmp, strerror(errno));
			spawn_tsrv_failed = time(NULL);
		} else if ((sj->pid = spawn_tsrv_fork(jail_clone_flags(j), sv[1], cgroup_fd)) < 0) {
			close(tree);
			tree = -1;
			close(sv[0]);
			close(sv[1]);
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
				sv[0] = sv[1] = -1;
				xasprintf(cause, "jail: socketpair: %s", strerror(errno));
				goto fail;
			}
		}
	}
	if (tree < 0 &&
	    (sj->pid = spawn_jail_server_fork(jail_clone_flags(j), sv[1], cgroup_fd, cause)) < 0)
		goto fail;
	close(sv[1]);
	sv[1] = -1;
	sj->ctl = sv[0];
	sv[0] = -1;
	if (tree >= 0)
		nsfd = tree;
	if (spawn_jail_send(sj->ctl, JAILMSG_SETUP, body, len, &nsfd, nsfd >= 0 ? 1 : 0) != 0) {
		xasprintf(cause, "jail: cannot reach the init: %s", strerror(errno));
		spawn_jail_discard(sj);
		goto fail;
	}
	if (tree >= 0)
		close(tree);
	free(body);
	return 0;
fail:
	if (tree >= 0)
		close(tree);
	free(body);
	if (sj->netns >= 0)
		close(sj->netns);
	sj->netns = -1;
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return -1;
}

/* Kill an init that will not run a tool and let go of it (the reaper collects it). */
void
spawn_jail_discard(struct spawn_jail *sj)
{
	if (sj->pid > 0)
		(void)kill(sj->pid, SIGKILL);
	if (sj->ctl >= 0)
		close(sj->ctl);
	if (sj->netns >= 0)
		close(sj->netns);
	sj->pid = -1;
	sj->ctl = -1;
	sj->netns = -1;
}

/*
 * The RUN message's buffer: secure memory (it holds the tool's environment, its
 * secrets), made once and grown when a message needs more, wiped after every
 * use. Making and unmaking secure memory per call cost a dozen system calls and
 * page-table changes on the call's path. The daemon is single-threaded.
 */
static unsigned char	*spawn_run_buf;
static size_t		 spawn_run_cap;

/* The RUN buffer with room for len bytes, or NULL. */
static unsigned char *
spawn_run_body(size_t len)
{
	size_t cap;

	if (len <= spawn_run_cap)
		return spawn_run_buf;
	if (spawn_run_buf != NULL)
		sodium_free(spawn_run_buf);
	cap = (len + 4095) & ~(size_t)4095;
	if ((spawn_run_buf = sodium_malloc(cap)) == NULL) {
		spawn_run_cap = 0;
		return NULL;
	}
	spawn_run_cap = cap;
	return spawn_run_buf;
}

/*
 * Hand a started init the tool to run and the child's ends of its pipes; wait
 * for READY and EXEC. The init is consumed: on success its pid stays in sj->pid,
 * on failure it is killed and reaped. -1: it failed before READY (the jail was
 * never built: nothing ran); -2: after (the tool could not be started).
 */
static int
spawn_jail_run(struct spawn_jail *sj, const struct spawn_req *r, int pin, int pout,
    int perr, int *mntns, char **cause)
{
	unsigned char *body = NULL;
	size_t len;
	int fds[4] = { pin, pout, perr, r->extra_fd }, nfds = r->extra_fd > 2 ? 4 : 3, rc = -1;
	int step;

	len = jailmsg_run_size(r->path, r->cwd != NULL ? r->cwd : "/", r->argv, r->envp);
	if (len == 0) {
		xasprintf(cause, "jail: the command is too large");
		goto out;
	}
	/* The environment may hold secrets: guarded memory, wiped after use. */
	if ((body = spawn_run_body(len)) == NULL) {
		xasprintf(cause, "jail: out of memory");
		goto out;
	}
	(void)jailmsg_run_encode(body, len, (uint32_t)r->cpu_seconds, (uint32_t)nfds, r->path,
	    r->cwd != NULL ? r->cwd : "/", r->argv, r->envp);
	if (spawn_jail_send(sj->ctl, JAILMSG_RUN, body, len, fds, nfds) != 0) {
		/*
		 * An init whose set-up failed said why and exited, maybe before RUN
		 * went out: its ERROR is still queued here, and names the step.
		 */
		int err = errno;

		if (spawn_jail_reply(sj->ctl, cause) >= 0)	/* < 0 filled *cause */
			xasprintf(cause, "jail: cannot reach the init: %s", strerror(err));
		goto out;
	}
	if ((step = spawn_jail_reply_fd(sj->ctl, NULL, mntns, cause)) != JAILMSG_READY)
		goto out;
	rc = -2;
	if ((step = spawn_jail_reply(sj->ctl, cause)) != JAILMSG_EXEC)
		goto out;
	rc = 0;
out:
	if (body != NULL)
		sodium_memzero(body, len);
	close(sj->ctl);
	sj->ctl = -1;
	if (rc != 0) {
		(void)kill(sj->pid, SIGKILL);
		while (waitpid(sj->pid, NULL, 0) < 0 && errno == EINTR)
			;
		sj->pid = -1;
	}
	return rc;
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

/* Run a request in a jail: a pre-built one if the spec brings it, else a fresh one. */
static int
spawn_child_jailed(const struct spawn_req *r, struct child *c, char **cause)
{
	struct spawn_jail fresh = SPAWN_JAIL_NONE, *sj = r->jail->warm;
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 }, i, rc = -1;
	int mntns = -1;
	char *wcause = NULL;

	if (r->cwd_fd >= 0) {
		/* An fd from outside the jail would be a way out of it. */
		xasprintf(cause, "a jailed child needs its cwd as a path");
		goto out;
	}
	if (util_pipe(pin, 0) != 0 || util_pipe(pout, 0) != 0 || util_pipe(perr, 0) != 0) {
		xasprintf(cause, "pipe: %s", strerror(errno));
		goto out;
	}
	if (sj != NULL && sj->pid > 0) {
		rc = spawn_jail_run(sj, r, pin[0], pout[1], perr[1], &mntns, &wcause);
		if (rc == -2) {
			xasprintf(cause, "cannot start the tool (%s)", wcause);
			goto out;
		}
		/* A pre-built jail that broke before the tool: a fresh one decides. */
	}
	if (rc != 0) {
		sj = &fresh;
		if (mntns >= 0)
			close(mntns);
		mntns = -1;
		(void)spawn_jail_start(r->jail, r->uid, r->gid, r->cgroup_fd, sj, &wcause);
		if (sj->pid < 0 ||
		    spawn_jail_run(sj, r, pin[0], pout[1], perr[1], &mntns, &wcause) != 0) {
			xasprintf(cause, "cannot start the tool (%s)", wcause);
			rc = -1;
			goto out;
		}
		rc = 0;
	}
	c->pid = sj->pid;
	c->jailed = 1;
	c->mntns = mntns;
	mntns = -1;	/* transferred */
	sj->pid = -1;
	c->in = pin[1];
	c->out = pout[0];
	c->err = perr[0];
	pin[1] = pout[0] = perr[0] = -1;
	if (spawn_nonblock(c->in) != 0 || spawn_nonblock(c->out) != 0 ||
	    spawn_nonblock(c->err) != 0) {
		/* Cannot happen on a valid fd; the caller still owns and kills the child. */
		xasprintf(cause, "fcntl: %s", strerror(errno));
		rc = -1;
	}
out:
	if (r->jail->warm != NULL)
		spawn_jail_discard(r->jail->warm);
	if (fresh.netns >= 0)
		close(fresh.netns);
	if (mntns >= 0)
		close(mntns);
	free(wcause);
	for (i = 0; i < 2; i++) {
		if (pin[i] >= 0)
			close(pin[i]);
		if (pout[i] >= 0)
			close(pout[i]);
		if (perr[i] >= 0)
			close(perr[i]);
	}
	return rc;
}

#else /* !__linux__ */

/*
 * No namespaces here, so no jail: every jail call fails with the same line, and
 * the daemon does not start with jails on (the line names --no-jail, which runs
 * the tools unconfined as their session's runner; docs/JAIL.md, "macOS").
 */
#define SPAWN_NO_JAIL	"per-call jails need Linux namespaces, which this platform " \
			"does not have (docs/JAIL.md, \"macOS\"); start shimbridged with " \
			"--no-jail to run tools unconfined as their session's runner"

int
spawn_jail_find(const char *path, char **cause)
{
	(void)path;
	xasprintf(cause, "%s", SPAWN_NO_JAIL);
	return -1;
}

int
spawn_jail_start(const struct jail *j, uid_t uid, gid_t gid, int cgroup_fd,
    struct spawn_jail *sj, char **cause)
{
	(void)j, (void)uid, (void)gid, (void)cgroup_fd;
	sj->pid = -1;
	sj->ctl = sj->netns = -1;
	xasprintf(cause, "%s", SPAWN_NO_JAIL);
	return -1;
}

void
spawn_jail_discard(struct spawn_jail *sj)
{
	(void)sj;
}

int
spawn_jail_server_start(char **cause)
{
	xasprintf(cause, "%s", SPAWN_NO_JAIL);
	return -1;
}

void
spawn_jail_drop(int mntns)
{
	if (mntns >= 0)
		close(mntns);
}

int
spawn_jail_server_is(pid_t pid)
{
	(void)pid;
	return 0;
}

int
spawn_jail_server_reaped(pid_t pid)
{
	(void)pid;
	return 0;
}

int
spawn_jail_template(const char *root, const char *scratch_dir, char **cause)
{
	(void)root, (void)scratch_dir;
	xasprintf(cause, "%s", SPAWN_NO_JAIL);
	return -1;
}

static int
spawn_child_jailed(const struct spawn_req *r, struct child *c, char **cause)
{
	(void)r, (void)c;
	xasprintf(cause, "%s", SPAWN_NO_JAIL);
	return -1;
}

#endif /* __linux__ */

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

/* Fork and exec; wait only for the exec to succeed or fail. */
int
spawn_child(const struct spawn_req *r, struct child *c, char **cause)
{
	struct proc_req pr;
	struct spawn_req lim;
	struct proc p;
	char *pcause = NULL;

	memset(c, 0, sizeof *c);
	c->pid = -1;
	c->in = c->out = c->err = c->mntns = -1;
	if (r->jail != NULL)
		return spawn_child_jailed(r, c, cause);
	/*
	 * vfork (or clone3 into the session's cgroup): the cost does not grow with
	 * the daemon's size. The child calls setsid() before exec, so once exec is
	 * reported killpg works.
	 */
	proc_req_init(&pr, r->path, r->argv, r->envp);
	pr.fd[0] = pr.fd[1] = pr.fd[2] = PROC_PIPE;
	pr.extra_fd = r->extra_fd > 2 ? r->extra_fd : -1;
	pr.extra_to = 3;
	pr.flags = PROC_VFORK | PROC_SETSID | PROC_DROP | PROC_NO_NEW_PRIVS |
	    PROC_DIE_WITH_PARENT | PROC_NONBLOCK;
	pr.uid = r->uid;
	pr.gid = r->gid;
	pr.cwd_fd = r->cwd_fd > 2 ? r->cwd_fd : -1;
	pr.cwd = r->cwd_fd > 2 ? NULL : (r->cwd != NULL ? r->cwd : "/");
	pr.cgroup_fd = r->cgroup_fd;
	pr.setup = spawn_setup;
	lim = *r;
	pr.arg = &lim;		/* read by spawn_setup in the child */
	if (proc_spawn(&pr, &p, &pcause) != 0) {
		xasprintf(cause, "cannot start the tool (%s)", pcause);
		free(pcause);
		return -1;
	}
	c->pid = p.pid;
	c->in = p.fd[0];
	c->out = p.fd[1];
	c->err = p.fd[2];
	return 0;
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
