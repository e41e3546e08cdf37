/*
 * shimbridge-jail: the init of one per-call jail (docs/JAIL.md). The jail
 * server (below) forks it in fresh PID, mount, IPC, UTS (and network)
 * namespaces, with an empty environment and the control socket as fd 0
 * (common/jailmsg.h). It builds the jail's filesystem from the SETUP message,
 * becomes the runner, reports READY (with a descriptor of its mount namespace,
 * which the daemon holds until the call is answered), then waits (possibly
 * long: pre-built jails wait in a pool) for one RUN: it starts that one tool as
 * PID 2, reports EXEC once the tool has exec'd, and from then on only reaps and
 * forwards SIGTERM, SIGINT and SIGHUP to the tool's process group. It exits with
 * the tool's status (128+N for a death by signal N), which ends the namespace.
 * Any error ends it too: one jail serves one call, and nothing is retried here.
 *
 * With --server it is the daemon's jail server instead: one long-lived process,
 * exec'd once, that forks every jail's init in its fresh namespaces on the
 * daemon's FORK (common/jailmsg.h) with CLONE_PARENT, so that each init is the
 * daemon's child as before, and runs the init's code in the child without an
 * exec of its own. The server holds nothing but the descriptors of the request
 * at hand and the finished jails' mount namespaces it is to close (DROP), which
 * it closes when idle; it exits when the daemon closes its socket. On TMPL it
 * starts the template server, another such server (the daemon's child too) that
 * lives in a mount namespace holding what every jail shares, built once, and
 * forks the inits of jails of that shape, which mount only their own scratch
 * dir and /proc (docs/JAIL.md, "The template").
 */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hygiene.h"
#include "jail.h"
#include "jailmsg.h"

#define CTL	0	/* the control socket */

/* Send one message on the control socket (best effort: the daemon may be gone). */
static void
jailinit_send(enum jailmsg_type type, const char *body)
{
	unsigned char hdr[JAILMSG_HDR];
	size_t len = body != NULL ? strlen(body) + 1 : 0;
	struct iovec iov[2] = { { hdr, sizeof hdr }, { (void *)body, len } };

	jailmsg_put_header(hdr, type, (uint32_t)len);
	(void)!writev(CTL, iov, body != NULL ? 2 : 1);
}

/* Report a failed step with errno to the daemon, then end the jail. */
static void __attribute__((noreturn))
jailinit_fail(const char *what)
{
	char msg[256];

	snprintf(msg, sizeof msg, "jail: %s: %s", what, strerror(errno));
	jailinit_send(JAILMSG_ERROR, msg);
	_exit(127);
}

/*
 * Read one whole message: the header (with up to maxfds descriptors, received
 * close-on-exec) and the body into a fresh buffer. EOF before a header means the
 * daemon let go of us (pool teardown, or it died): exit quietly.
 */
static unsigned char *
jailinit_recv3(enum jailmsg_type want, enum jailmsg_type alt, enum jailmsg_type alt2,
    enum jailmsg_type *got_type, uint32_t *len, int *fds, int nfds)
{
	unsigned char hdr[JAILMSG_HDR], *body;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * 4)];
	} cm;
	struct iovec iov = { hdr, sizeof hdr };
	struct msghdr mh;
	struct cmsghdr *c;
	enum jailmsg_type type;
	size_t got = 0, i, n;
	ssize_t r;
	int k;

	for (k = 0; k < nfds; k++)
		fds[k] = -1;
	memset(&mh, 0, sizeof mh);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof cm.buf;
	do {
		r = recvmsg(CTL, &mh, MSG_CMSG_CLOEXEC);
	} while (r < 0 && errno == EINTR);
	if (r == 0)
		_exit(0);
	if (r < 0)
		jailinit_fail("read from the daemon");
	if (mh.msg_flags & MSG_CTRUNC) {
		errno = EMSGSIZE;
		jailinit_fail("too many descriptors from the daemon");
	}
	/* Every descriptor that came is either expected and kept, or an error. */
	k = 0;
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			if (k == nfds) {
				errno = EPROTO;
				jailinit_fail("unexpected descriptors from the daemon");
			}
			fds[k++] = fd;
		}
	}
	got = (size_t)r;
	while (got < sizeof hdr) {
		r = read(CTL, hdr + got, sizeof hdr - got);
		if (r <= 0) {
			errno = r == 0 ? EPROTO : errno;
			jailinit_fail("short header from the daemon");
		}
		got += (size_t)r;
	}
	if (jailmsg_get_header(hdr, &type, len) != 0 ||
	    (type != want && type != alt && type != alt2)) {
		errno = EPROTO;
		jailinit_fail("unexpected message from the daemon");
	}
	*got_type = type;
	if ((body = malloc(*len + 1)) == NULL)
		jailinit_fail("memory");
	for (got = 0; got < *len; got += (size_t)r) {
		r = read(CTL, body + got, *len - got);
		if (r < 0 && errno == EINTR) {
			r = 0;
			continue;
		}
		if (r <= 0) {
			errno = r == 0 ? EPROTO : errno;
			jailinit_fail("short message from the daemon");
		}
	}
	return body;
}

/* Read one whole message of type want (see jailinit_recv3). */
static unsigned char *
jailinit_recv(enum jailmsg_type want, uint32_t *len, int *fds, int nfds)
{
	enum jailmsg_type type;

	return jailinit_recv3(want, want, want, &type, len, fds, nfds);
}

/* In the tool's process: report a failure to the init through the status pipe. */
static void __attribute__((noreturn))
jailinit_tool_fail(int status, const char *what)
{
	char msg[200];
	int e = errno;

	snprintf(msg, sizeof msg, "%s: %s", what, strerror(e));
	(void)!write(status, msg, strlen(msg));
	_exit(127);
}

/*
 * In the tool's process (a vfork child of the init, already the runner): the
 * descriptors in place, nothing else open, limits, cwd, then exec.
 */
static void __attribute__((noreturn))
jailinit_tool(const struct jailmsg_run *m, const int *fds, int status)
{
	sigset_t set;
	const char *step;
	int hi[5], i, n = (int)m->nfds;

	/* Every disposition is the default already (main): only the mask is ours. */
	sigemptyset(&set);
	sigprocmask(SIG_SETMASK, &set, NULL);
	if (setsid() < 0)
		jailinit_tool_fail(status, "setsid");
	/* Move everything above the target range first, so no dup2 clobbers a source. */
	for (i = 0; i < n; i++) {
		if ((hi[i] = fcntl(fds[i], F_DUPFD, 16)) < 0)
			jailinit_tool_fail(status, "dup");
	}
	if ((hi[n] = fcntl(status, F_DUPFD_CLOEXEC, 16)) < 0)
		_exit(127);
	for (i = 0; i < n; i++) {
		if (dup2(hi[i], i) < 0)
			jailinit_tool_fail(hi[n], "dup2");
	}
	if (dup3(hi[n], n, O_CLOEXEC) < 0)
		_exit(127);
	status = n;
	hygiene_closefrom(status + 1);

	if ((step = hygiene_tool_limits(m->cpu_seconds)) != NULL)
		jailinit_tool_fail(status, step);
	if (chdir(m->cwd) != 0)
		jailinit_tool_fail(status, "chdir");
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		jailinit_tool_fail(status, "parent-death signal");
	umask(077);
	execve(m->path, m->argv, m->envp);
	jailinit_tool_fail(status, m->path);
}

/*
 * Build the jail from a SETUP, then become the runner. tmpl: the server cloned
 * us from its template, so the filesystem is there but for the call's scratch
 * dir, whose detached mount comes with the SETUP (its one bind). Returns a
 * descriptor of the jail's mount namespace for READY, or -1.
 */
static int
jailinit_setup(int tmpl)
{
	struct jailmsg_setup s;
	struct jail_bind binds[JAILMSG_BINDS_MAX];
	struct jail j;
	const char *why, *what;
	unsigned char *body;
	uint32_t len;
	size_t i;
	int nsfd, mnt;

	body = jailinit_recv(JAILMSG_SETUP, &len, &nsfd, 1);
	if (jailmsg_setup_decode(body, len, &s, &why) != 0) {
		errno = EPROTO;
		jailinit_fail(why);
	}
	if (tmpl && (s.net == JAILMSG_NET_JOIN || s.net == JAILMSG_NET_NEW_LO || nsfd < 0 ||
	    s.scratch[0] == '\0' || s.nbinds != 1 || !s.binds[0].writable ||
	    strcmp(s.binds[0].path, s.scratch) != 0)) {
		errno = EPROTO;
		jailinit_fail("a template jail's SETUP");
	}
	if (!tmpl && (s.net == JAILMSG_NET_JOIN) != (nsfd >= 0)) {
		errno = EPROTO;
		jailinit_fail("network namespace descriptor");
	}
	memset(&j, 0, sizeof j);
	j.root = s.root;
	j.netns_fd = s.net == JAILMSG_NET_JOIN ? nsfd : JAIL_NET_HOST;	/* tmpl: the tree */
	j.tmp = s.scratch[0] != '\0' ? s.scratch : NULL;
	for (i = 0; i < s.nbinds; i++) {
		binds[i].path = s.binds[i].path;
		binds[i].writable = s.binds[i].writable;
	}
	j.binds = binds;
	j.nbinds = s.nbinds;
	if (s.net == JAILMSG_NET_NEW_LO && jail_lo_up() != 0)
		jailinit_fail("bring loopback up");
	if ((what = tmpl ? jail_enter_template(&j, nsfd) : jail_enter(&j)) != NULL)
		jailinit_fail(what);
	if (nsfd >= 0)
		close(nsfd);
	/*
	 * For the daemon, which holds it until the call is answered: the jail's
	 * mounts are then torn down after, not on, the call's path (docs/JAIL.md).
	 * Without it (no /proc?) they are torn down with us, as before.
	 */
	mnt = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if ((what = hygiene_drop_privileges((uid_t)s.uid, (gid_t)s.gid, NULL)) != NULL)
		jailinit_fail(what);
	/* The uid change reset these: no ptrace by the tool, die with the daemon. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		jailinit_fail("no_new_privs");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		jailinit_fail("non-dumpable");
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		jailinit_fail("parent-death signal");
	free(body);
	return mnt;
}

/* Start the one tool; returns its pid once it has exec'd (else the jail ends). */
static pid_t
jailinit_run(void)
{
	struct jailmsg_run m;
	unsigned char *body;
	const char *why;
	char msg[200];
	uint32_t len;
	ssize_t n;
	pid_t tool;
	int fds[4], st[2], i;

	body = jailinit_recv(JAILMSG_RUN, &len, fds, 4);
	if (jailmsg_run_decode(body, len, &m, &why) != 0) {
		errno = EPROTO;
		jailinit_fail(why);
	}
	for (i = 0; i < 4; i++) {
		if ((i < (int)m.nfds) != (fds[i] >= 0)) {
			errno = EPROTO;
			jailinit_fail("descriptors of the tool");
		}
	}
	if (pipe2(st, O_CLOEXEC) != 0)
		jailinit_fail("pipe");
	/* vfork: we are suspended until the tool has exec'd or failed (and said why). */
	if ((tool = vfork()) < 0)
		jailinit_fail("vfork");
	if (tool == 0)
		jailinit_tool(&m, fds, st[1]);
	close(st[1]);
	/* The tool's environment (its secrets) leaves our memory now that it has its own. */
	explicit_bzero(body, len);
	free(body);
	jailmsg_run_free(&m);
	for (i = 0; i < 4; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
	}
	do {
		n = read(st[0], msg, sizeof msg - 1);
	} while (n < 0 && errno == EINTR);
	close(st[0]);
	if (n > 0) {
		msg[n] = '\0';
		jailinit_send(JAILMSG_ERROR, msg);
		_exit(127);	/* the tool is gone: it wrote, then _exit */
	}
	jailinit_send(JAILMSG_EXEC, NULL);
	return tool;
}

/*
 * PID 1 of the jail, with its control socket as fd 0; tmpl: see jailinit_setup.
 * forked: a server's child, whose signal dispositions are the server's, reset
 * at its start (64 system calls fewer per jail).
 */
static int __attribute__((noreturn))
jailinit(int tmpl, int forked)
{
	sigset_t set;
	pid_t tool, p;
	int sig, st, mnt;

	if (!forked)
		hygiene_signals_default();
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_SETMASK, &set, NULL);
	/* Its own process group, so the daemon's kill(-pid) reaches it. */
	if (setsid() < 0)
		jailinit_fail("setsid");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		jailinit_fail("non-dumpable");
	/*
	 * The daemon is outside our PID namespace, so getppid() says nothing: a
	 * daemon that died before this shows as EOF on the control socket instead.
	 */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		jailinit_fail("parent-death signal");
	mnt = jailinit_setup(tmpl);
	(void)jailmsg_send_empty(CTL, JAILMSG_READY, mnt, 0);
	if (mnt >= 0)
		close(mnt);
	tool = jailinit_run();
	hygiene_closefrom(0);
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

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP	0x200000000ULL
#endif

/* struct clone_args of <linux/sched.h> (up to cgroup), which musl does not ship. */
struct jailsrv_clone_args {
	uint64_t	flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size,
			tls, set_tid, set_tid_size, cgroup;
};

/* The namespaces a FORK may ask for, and those every jail gets. */
#define JAILSRV_NS_ALLOWED	(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET)
#define JAILSRV_NS_REQUIRED	(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID)

/* Answer a FORK: the new init's pid, or -errno. */
static void
jailsrv_reply(int32_t v)
{
	unsigned char msg[JAILMSG_HDR + JAILMSG_PID_LEN];

	jailmsg_put_header(msg, JAILMSG_PID, JAILMSG_PID_LEN);
	jailmsg_pid_encode(msg + JAILMSG_HDR, v);
	if (write(CTL, msg, sizeof msg) != (ssize_t)sizeof msg)
		_exit(1);	/* the daemon is gone or broken: so are we */
}

/*
 * Fork one init: fresh namespaces, the daemon as its parent (CLONE_PARENT: its
 * exit signal is ours, SIGCHLD), in the session's cgroup when one came along.
 * The child puts its control socket at fd 0, closes the rest, and is the init.
 * args, argslen: the server's arguments after argv[0], NUL included.
 */
static pid_t
jailsrv_fork(uint32_t ns, int ctl, int cgroup, int tmpl, char *args, size_t argslen)
{
	struct jailsrv_clone_args ca;
	pid_t pid;

	memset(&ca, 0, sizeof ca);
	ca.flags = (uint64_t)ns | CLONE_PARENT;
	if (cgroup >= 0) {
		ca.flags |= CLONE_INTO_CGROUP;
		ca.cgroup = (uint64_t)cgroup;
	}
	pid = (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
	if (pid < 0 && errno == ENOSYS && cgroup < 0)	/* before Linux 5.3 */
		pid = (pid_t)syscall(SYS_clone, (unsigned long)ns | CLONE_PARENT, 0, 0, 0, 0);
	if (pid != 0)
		return pid;
	if (dup2(ctl, CTL) != CTL)
		_exit(127);
	hygiene_closefrom(CTL + 1);
	/*
	 * An init's name and command line are "shimbridge-jail", not the server's:
	 * the server's own arguments are blanked, and with the last byte of the
	 * argument area no longer NUL, /proc/PID/cmdline shows the area up to its
	 * first NUL (the kernel's setproctitle convention), that is argv[0].
	 */
	(void)prctl(PR_SET_NAME, "shimbridge-jail", 0, 0, 0);
	memset(args, ' ', argslen);
	jailinit(tmpl, 1);
}

/*
 * The mount namespaces of finished jails (DROP), closed when no FORK waits: the
 * last close unmounts the jail's tree, which takes a lock that any mount or
 * pivot_root on the host also takes (and waits for an RCU grace period), so it
 * is done here, not in the daemon's one thread, and after the FORKs, whose
 * answer the daemon waits for. The last close: the daemon closes its own copy
 * just after sending it, so the server waits until its socket has been quiet
 * for JAILSRV_DROP_QUIET ms; closing at once made the daemon's close the last
 * one about every other call, and the teardown its own again.
 */
#define JAILSRV_DROPS		64
#define JAILSRV_DROP_QUIET	5	/* ms */
static int	jailsrv_drops[JAILSRV_DROPS];
static int	jailsrv_ndrops;

/* Close the deferred namespaces once the socket is quiet, until a message waits. */
static void
jailsrv_drop_idle(void)
{
	struct pollfd pfd = { CTL, POLLIN, 0 };
	int wait = JAILSRV_DROP_QUIET;

	while (jailsrv_ndrops > 0) {
		if (poll(&pfd, 1, wait) != 0)
			return;
		wait = 0;
		close(jailsrv_drops[--jailsrv_ndrops]);
	}
}

/*
 * Whether this server lives in the template: a mount namespace that holds what
 * every jail shares (jail_template_build), from which CLONE_NEWNS copies each
 * jail's filesystem; its inits only mount the call's scratch dir and /proc.
 */
static int	jailsrv_in_tmpl;

static int __attribute__((noreturn)) jailsrv(char *, size_t);

/*
 * TMPL: start the template server, the daemon's child like the inits
 * (CLONE_PARENT), with sock as its control socket: it unshares its mount
 * namespace, builds the template in it, says READY (or ERROR, and exits) on
 * sock, and serves FORKs of template jails. Its pid, or -1 and errno.
 */
static pid_t
jailsrv_template(const char *root, const char *sdir, int sock, char *args, size_t argslen)
{
	struct jailsrv_clone_args ca;
	const char *what;
	pid_t pid;

	memset(&ca, 0, sizeof ca);
	ca.flags = CLONE_PARENT;
	if ((pid = (pid_t)syscall(SYS_clone3, &ca, sizeof ca)) != 0)
		return pid;
	if (dup2(sock, CTL) != CTL)
		_exit(127);
	hygiene_closefrom(CTL + 1);
	jailsrv_ndrops = 0;	/* the server's, closed above */
	jailsrv_in_tmpl = 1;
	if (unshare(CLONE_NEWNS) != 0)
		jailinit_fail("template: unshare");
	if ((what = jail_template_build(root, sdir)) != NULL) {
		char msg[300];

		snprintf(msg, sizeof msg, "template: %s", what);
		jailinit_fail(msg);
	}
	jailinit_send(JAILMSG_READY, NULL);
	jailsrv(args, argslen);
}

/* The jail server: one FORK at a time, until the daemon closes the socket. */
static int __attribute__((noreturn))
jailsrv(char *args, size_t argslen)
{
	sigset_t set;

	hygiene_signals_default();
	sigemptyset(&set);
	sigprocmask(SIG_SETMASK, &set, NULL);
	if (prctl(PR_SET_NAME, jailsrv_in_tmpl ? "sb-jail-tmpl" : "sb-jail-server", 0, 0, 0) != 0 ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		jailinit_fail("prctl");
	for (;;) {
		unsigned char *body;
		const char *why = "FORK";
		enum jailmsg_type type;
		uint32_t len, ns = 0;
		int fds[2], cg = 0, tm = 0;
		pid_t pid;

		jailsrv_drop_idle();
		body = jailinit_recv3(JAILMSG_FORK, JAILMSG_DROP, JAILMSG_TMPL, &type, &len, fds, 2);
		if (type == JAILMSG_TMPL) {
			const char *root, *sdir;

			if (jailsrv_in_tmpl || fds[0] < 0 || fds[1] >= 0 ||
			    jailmsg_tmpl_decode(body, len, &root, &sdir, &why) != 0) {
				errno = EPROTO;
				jailinit_fail(jailsrv_in_tmpl ? "TMPL to the template server" :
				    fds[0] < 0 || fds[1] >= 0 ? "TMPL: one descriptor" : why);
			}
			pid = jailsrv_template(root, sdir, fds[0], args, argslen);
			jailsrv_reply(pid > 0 ? (int32_t)pid : -(int32_t)errno);
			close(fds[0]);
			free(body);
			continue;
		}
		if (type == JAILMSG_DROP) {
			if (len != 0 || fds[0] < 0 || fds[1] >= 0) {
				errno = EPROTO;
				jailinit_fail("DROP: one descriptor and no body");
			}
			free(body);
			if (jailsrv_ndrops == JAILSRV_DROPS)
				close(fds[0]);
			else
				jailsrv_drops[jailsrv_ndrops++] = fds[0];
			continue;
		}
		if (jailmsg_fork_decode(body, len, JAILSRV_NS_ALLOWED, JAILSRV_NS_REQUIRED, &ns,
		    &cg, &tm, &why) != 0 || fds[0] < 0 || (fds[1] >= 0) != (cg == 1)) {
			errno = EPROTO;
			jailinit_fail(fds[0] < 0 ? "FORK without a control socket" :
			    (fds[1] >= 0) != (cg == 1) ? "FORK: cgroup descriptor" : why);
		}
		free(body);
		if (tm != jailsrv_in_tmpl) {	/* a template jail from this server, or the reverse */
			jailsrv_reply(-EINVAL);
			close(fds[0]);
			if (fds[1] >= 0)
				close(fds[1]);
			continue;
		}
		pid = jailsrv_fork(ns, fds[0], fds[1], tm, args, argslen);
		jailsrv_reply(pid > 0 ? (int32_t)pid : -(int32_t)errno);
		close(fds[0]);
		if (fds[1] >= 0)
			close(fds[1]);
	}
}

int
main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--server") == 0)
		jailsrv(argv[1], strlen(argv[1]) + 1);	/* what follows argv[0] */
	jailinit(0, 0);
}
