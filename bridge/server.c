/*
 * The daemon's event loop: listeners, signals, the SIGCHLD reaper, the
 * one-second sweep and the orphan scan; reload.c swaps configs, listen.c
 * makes the pathname socket. One struct conn
 * per peer (conn.c), one job per child (job.c), one file per op (op-*.c).
 */
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>
#include <jansson.h>

#include "approve.h"
#include "audit.h"
#include "cgroup.h"
#include "config.h"
#include "conn.h"
#include "hygiene.h"
#include "job.h"
#include "ghmint.h"
#include "keyring.h"
#include "listen.h"
#include "log.h"
#include "platform.h"
#include "proto.h"
#include "reload.h"
#include "renew.h"
#include "server.h"
#include "spawn.h"
#include "util.h"
#include "zygote.h"

/* Requests of a session in flight. */
int
server_session_running(const struct server *srv, const struct session *s)
{
	const struct conn *o;
	int n = 0;

	TAILQ_FOREACH(o, &srv->conns, entry) {
		/* A call whose client has its answer (conn_answer) runs for the bridge alone. */
		if ((o->state == CONN_RUNNING || o->state == CONN_FILES) && !o->answered &&
		    o->session != NULL && strcmp(o->session->name, s->name) == 0)
			n++;
	}
	return n;
}

static struct zygote	*server_zygote;	/* for server_keep */

/* The orphan scan's test: a job's live process, a jail waiting in the pool, the jail server. */
static int
server_keep(pid_t pid)
{
	return job_is_live(pid) || zygote_is_waiting(server_zygote, pid) ||
	    spawn_jail_server_is(pid);
}

/* Kill descendants that escaped their process group (reparented to us). */
static void
server_kill_orphans(struct server *srv)
{
	int killed;

	(void)srv;
	killed = platform_kill_orphans(server_keep);
	if (killed > 0)
		log_info("killed %d escaped descendant process%s", killed, killed == 1 ? "" : "es");
}

/* SIGCHLD: reap everything that has ended and hand each pid to its job. */
static void
server_sigchld(evutil_socket_t sig, short what, void *arg)
{
	struct server *srv = arg;
	int status, any = 0, k;
	pid_t pid;

	(void)sig;
	(void)what;
	/*
	 * Only a job's end can leave orphans behind. The scan is deferred a little
	 * and coalesced: it reads every process on hosts whose kernel has no
	 * /proc/.../children, and must not sit on each request's path.
	 */
	/*
	 * A jailed job's tree died with its PID namespace: nothing to look for.
	 * A pid that was no job's was an orphan we killed: its own children have
	 * just become ours, so look again. A waiting jail's init (zygote.h) had
	 * no children: nothing to look for either.
	 */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if ((k = spawn_jail_server_reaped(pid)) != 0) {
			log_warnx("the jail %sserver (pid %ld) ended (%s): the next jail starts "
			    "another", k == 2 ? "template " : "", (long)pid,
			    WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exited");
			continue;
		}
		if (job_reaped(pid, status) == 0 && !zygote_reaped(srv->zygote, pid))
			any = 1;
	}
	any |= job_orphans_possible();
	if (any && !evtimer_pending(srv->ev_orphans, NULL)) {
		struct timeval tv = { 0, 50000 };

		evtimer_add(srv->ev_orphans, &tv);
	}
}

/* The deferred orphan scan. */
static void
server_orphans(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	server_kill_orphans(arg);
}

/* Every second: orphans, requests whose pipes an escaped process holds open, renewals. */
static void
server_sweep(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	struct conn *c, *next;
	time_t now = time(NULL);
	int waiting = 0;

	(void)fd;
	(void)what;
	for (c = TAILQ_FIRST(&srv->conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		waiting |= conn_sweep(c, now);
	}
	if (waiting)
		server_kill_orphans(srv);
	cgroup_sweep();
	renew_sweep(srv->base, srv->keyring, srv->cfg);
	audit_tick(now);
}

/* Refuse a connection before a conn exists: audit it, best-effort error frame, close. */
static void
server_refuse(struct server *srv, int fd, uid_t uid, pid_t pid, const struct session *s,
    const char *code, const char *reason, const char *message)
{
	unsigned char hdr[FRAME_HDR];
	json_t *o = json_object(), *a = json_object();
	char *str;

	json_object_set_new(a, "event", json_string("refused"));
	if (s != NULL)
		json_object_set_new(a, "session", json_string(s->name));
	json_object_set_new(a, "uid", json_integer(uid));
	json_object_set_new(a, "pid", json_integer(pid));
	json_object_set_new(a, "code", json_string(code));
	json_object_set_new(a, "reason", json_string(reason));
	audit_write(a, keyring_redactor(srv->keyring));
	srv->n_refused++;
	json_object_set_new(o, "code", json_string(code));
	json_object_set_new(o, "message", json_string(message));
	str = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (str != NULL) {
		frame_put_header(hdr, FRAME_ERROR, (uint32_t)strlen(str));
		(void)send(fd, hdr, sizeof hdr, MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)send(fd, str, strlen(str), MSG_NOSIGNAL | MSG_DONTWAIT);
		free(str);
	}
	close(fd);
}

/* Open connections of a session, in any state, but those whose client has its answer. */
static int
server_session_conns(const struct server *srv, const struct session *s)
{
	const struct conn *c;
	int n = 0;

	TAILQ_FOREACH(c, &srv->conns, entry) {
		if (c->session != NULL && strcmp(c->session->name, s->name) == 0 &&
		    c->state != CONN_DEAD && !c->answered)
			n++;
	}
	return n;
}

/* A new peer: credentials from the kernel, session from the config. */
static void
server_accept_one(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct server *srv = arg;
	const struct session *s = NULL;
	uid_t uid;
	gid_t gid;
	pid_t pid;

	(void)l;
	(void)sa;
	(void)salen;
	if (platform_peercred(fd, &uid, &gid, &pid) != 0) {
		log_warnx("cannot read peer credentials: %s", strerror(errno));
		close(fd);
		return;
	}
	srv->n_accepted++;
	if (uid != 0 && (s = config_session_by_uid(srv->cfg, uid)) == NULL) {
		server_refuse(srv, fd, uid, pid, NULL, ERR_UNAUTHORIZED, uid == 65534 ?
		    "overflow uid" : "uid has no session", "this account is not a shimbridge "
		    "sandbox session, so the bridge runs nothing for it. Ask the operator to add "
		    "a session for this user (shimbridge session add).");
		return;
	}
	if (s != NULL && server_session_conns(srv, s) >= (s->max_concurrent > 0 ?
	    s->max_concurrent : srv->cfg->max_per_session)) {
		server_refuse(srv, fd, uid, pid, s, ERR_BUSY, "session connection limit",
		    "the bridge is busy: this session has as many connections open as it may. "
		    "Nothing was run; wait for some commands to finish and try again.");
		return;
	}
	if (srv->nconns >= srv->cfg->max_connections) {
		server_refuse(srv, fd, uid, pid, s, ERR_BUSY, "global connection limit",
		    "the bridge is busy (connection limit reached). Nothing was run; try again "
		    "in a moment.");
		return;
	}
	(void)conn_new(srv, fd, uid, gid, pid, s);
}

/* Descriptors that must be free before accepting resumes after EMFILE (see below). */
#define SERVER_FD_HEADROOM	24
/* Seconds after EMFILE during which the headroom is checked after every accept. */
#define SERVER_FD_LOW_SECS	10

/*
 * Whether SERVER_FD_HEADROOM more descriptors (a quarter of the limit at most) can
 * be opened now: one call takes about a dozen at its peak (its socket, pipes, the
 * jail's socketpair and namespaces, the scratch directory, the cgroup). Probed by
 * opening them.
 */
static int
server_fd_headroom(int probe)
{
	int fds[SERVER_FD_HEADROOM], n, ok, want = SERVER_FD_HEADROOM;
	struct rlimit rl;

	/* A daemon started with very few descriptors must still resume at all. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur / 4 < (rlim_t)want)
		want = (int)(rl.rlim_cur / 4);
	for (n = 0; n < want; n++) {
		if ((fds[n] = fcntl(probe, F_DUPFD_CLOEXEC, 0)) == -1)
			break;
	}
	ok = n == want;
	while (n > 0)
		close(fds[--n]);
	return ok;
}

/*
 * Re-enable accepting after running out of descriptors, once a call accepted now
 * would have the descriptors it needs: resuming as soon as one was free would take
 * a waiting peer's connection only to fail its call ("pipe: Too many open files")
 * while the others are still being let go.
 */
static void
server_resume(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	struct timeval tv = { 0, 100000 };
	int i;

	(void)fd;
	(void)what;
	if (srv->nlev > 0 && !server_fd_headroom(evconnlistener_get_fd(srv->lev[0]))) {
		evtimer_add(srv->ev_resume, &tv);
		return;
	}
	srv->fd_low_until = time(NULL) + SERVER_FD_LOW_SECS;	/* what waits comes in one by one */
	for (i = 0; i < srv->nlev; i++)
		evconnlistener_enable(srv->lev[i]);
}

/*
 * The listener's callback. For a few seconds after running out of descriptors,
 * each accepted peer is followed by the headroom check: libevent accepts all that
 * waits in the backlog in one go, and connections its peers gave up meanwhile
 * (each a descriptor until its EOF is read) would leave a waiting peer's call none
 * for its pipes. Short of headroom, accepting pauses again (server_resume).
 */
static void
server_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
    void *arg)
{
	struct server *srv = arg;
	struct timeval tv = { 0, 100000 };
	int i;

	server_accept_one(l, fd, sa, salen, arg);
	if (srv->fd_low_until == 0 || time(NULL) > srv->fd_low_until) {
		srv->fd_low_until = 0;
		return;
	}
	if (srv->nlev > 0 && !server_fd_headroom(evconnlistener_get_fd(srv->lev[0]))) {
		for (i = 0; i < srv->nlev; i++)
			evconnlistener_disable(srv->lev[i]);
		evtimer_add(srv->ev_resume, &tv);
	}
}

/* accept() failed: on EMFILE/ENFILE pause for a moment instead of spinning. */
static void
server_accept_error(struct evconnlistener *l, void *arg)
{
	struct server *srv = arg;
	struct timeval tv = { 1, 0 };
	int e = EVUTIL_SOCKET_ERROR(), i;

	(void)l;
	log_warnx("accept: %s", strerror(e));
	if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
		srv->fd_low_until = time(NULL) + SERVER_FD_LOW_SECS;
		for (i = 0; i < srv->nlev; i++)
			evconnlistener_disable(srv->lev[i]);
		evtimer_add(srv->ev_resume, &tv);
	}
}

/* Signals: HUP reloads, USR1 reopens the audit log (rotation), TERM/INT stop. Handled in the loop. */
static void
server_signal(evutil_socket_t sig, short what, void *arg)
{
	struct server *srv = arg;
	struct conn *c;

	(void)what;
	if (sig == SIGHUP) {
		reload_config(srv);
		return;
	}
	if (sig == SIGUSR1) {
		audit_reopen(srv->cfg->audit_path);
		return;
	}
	log_info("stopping on signal %d", (int)sig);
	platform_notify("STOPPING=1");
	TAILQ_FOREACH(c, &srv->conns, entry)
		conn_shutdown(c);
	event_base_loopbreak(srv->base);
}

/* Remove scratch directories a killed daemon left behind. */
static void
server_clean_scratch(const char *dir)
{
	struct dirent *de;
	char *path;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		xasprintf(&path, "%s/%s", dir, de->d_name);
		if (spawn_rmtree(path) != 0)
			log_warnx("cannot remove stale scratch directory %s", path);
		free(path);
	}
	closedir(d);
}

/*
 * Every connection is a descriptor and every running call three more: take the
 * whole hard limit (systemd's default soft limit is 1024, LimitNOFILE= sets the
 * hard one). Children get their own limit back (spawn.c).
 */
static void
server_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		log_warnx("cannot raise the open-file limit to %llu: %s",
		    (unsigned long long)rl.rlim_max, strerror(errno));
}

static int	server_jail = 1;	/* cleared by --no-jail */

/* Run tools without the per-call jail (measurements only). */
void
server_no_jail(void)
{
	server_jail = 0;
}

/* A killed daemon's children may linger: every runner owns nothing else now. */
static void
server_kill_runners(const struct config *cfg)
{
	const char *name;
	uid_t uids[1024];
	size_t n = config_runner_uids(cfg, uids, 1024), i, k;
	int killed;

	for (i = 0; i < n; i++) {
		if ((killed = platform_kill_uid(uids[i])) <= 0)
			continue;
		name = cfg->runner;
		for (k = 0; k < cfg->nsessions; k++) {
			if (cfg->sessions[k].runner_uid == uids[i])
				name = cfg->sessions[k].runner;
		}
		log_warnx("killed %d leftover process%s of the runner %s", killed,
		    killed == 1 ? "" : "es", name);
	}
}

/* Run the daemon until asked to stop. */
int
server_run(struct config *cfg, struct keyring *kr, const char *config_path, char **cause)
{
	static const int sigs[] = { SIGCHLD, SIGHUP, SIGTERM, SIGINT, SIGUSR1 };
	_Static_assert(sizeof sigs / sizeof sigs[0] == sizeof ((struct server *)0)->ev_sig /
	    sizeof ((struct server *)0)->ev_sig[0], "one event per signal");
	struct server srv;
	struct timeval sec = { 1, 0 };
	struct conn *c;
	int *fds = NULL, n, i, rc = -1;

	memset(&srv, 0, sizeof srv);
	TAILQ_INIT(&srv.conns);
	srv.cfg = cfg;
	srv.keyring = kr;
	srv.approve = approve_new();
	srv.config_path = config_path;
	srv.started = time(NULL);
	signal(SIGPIPE, SIG_IGN);
	/*
	 * The relay allocates and frees buffers of up to a few hundred KiB at a high
	 * rate: without these, glibc hands them back to the kernel (brk shrink or
	 * munmap) after each use and every byte relayed pays a page fault.
	 */
#if defined(__linux__) && defined(__GLIBC__)
	(void)mallopt(M_MMAP_THRESHOLD, 4 * 1024 * 1024);
	(void)mallopt(M_TRIM_THRESHOLD, 16 * 1024 * 1024);
#endif
	if (platform_harden_self() != 0)
		log_warnx("cannot make the daemon non-dumpable: %s", strerror(errno));
	if (platform_subreaper() != 0)
		log_warnx("cannot become a subreaper: %s", strerror(errno));
	server_nofile();
	if (hygiene_mkdir_root(cfg->state_dir, 0755, 1, cause) != 0)
		return -1;
	server_kill_runners(cfg);
	xasprintf(&srv.scratch_dir, "%s/run", cfg->state_dir);
	xasprintf(&srv.mirror_dir, "%s/mirrors", cfg->state_dir);
	/* run/: traversable, not listable; every call gets an unguessable 0700 dir. */
	if (hygiene_mkdir_root(srv.scratch_dir, 0711, 1, cause) != 0)
		goto out;
	server_clean_scratch(srv.scratch_dir);
	if (cfg->scratch_tmpfs > 0) {
		char *why = NULL;

		if (platform_private_tmpfs(srv.scratch_dir, cfg->scratch_tmpfs, &why) == 0)
			log_info("scratch directories in memory (tmpfs of %d MiB on %s)",
			    cfg->scratch_tmpfs, srv.scratch_dir);
		else
			log_warnx("scratch directories on disk in %s: %s", srv.scratch_dir, why);
		free(why);
	}
	if (hygiene_mkdir_root(srv.mirror_dir, 0711, 1, cause) != 0)
		goto out;
	audit_syslog(cfg->audit_syslog);
	if (server_jail) {
		/* Only a mount point for the jails' roots, each in its own mount namespace. */
		xasprintf(&srv.jail_root, "%s/jail", cfg->state_dir);
		if (hygiene_mkdir_root(srv.jail_root, 0700, 1, cause) != 0 ||
		    spawn_jail_find(NULL, cause) != 0 || spawn_jail_server_start(cause) != 0)
			goto out;
		{
			char *why = NULL;

			if (spawn_jail_template(srv.jail_root, srv.scratch_dir, &why) == 0)
				log_info("jail template built: jails with no bind but their "
				    "scratch dir are copies of it");
			else
				log_warnx("%s: every jail is built from nothing", why);
			free(why);
		}
	} else
		log_warnx("tools run without the per-call jail (--no-jail): for measurements only");
	audit_checkpoint_every(cfg->audit_checkpoint_interval);
	if (audit_sign_key_config(cfg->audit_sign_key, cfg->audit_sign_key_credential,
	    cause) != 0 || audit_open(cfg->audit_path, cause) != 0)
		goto out;
	/* Before the socket exists: whoever can connect finds the containment decided. */
	{
		char *msg;

		if (cgroup_init(&msg))
			log_info("%s", msg);
		else
			log_warnx("%s", msg);
		free(msg);
	}
	if ((srv.base = event_base_new()) == NULL) {
		*cause = xstrdup("cannot create the event loop");
		goto out;
	}
	if ((n = platform_listen_fds(&fds, cause)) < 0)
		goto out;
	if (n == 0) {
		int fd = listen_bind(cfg, cause);

		if (fd < 0)
			goto out;
		srv.own_socket = xstrdup(cfg->socket_path);
		fds = xcalloc(1, sizeof *fds);
		fds[0] = fd;
		n = 1;
	}
	if (n > SERVER_MAX_LISTENERS) {
		/* Never serve some of them silently: refuse the whole set. */
		xasprintf(cause, "the service manager passed %d sockets; at most %d are "
		    "supported", n, SERVER_MAX_LISTENERS);
		goto out;
	}
	for (i = 0; i < n; i++) {
		evutil_make_socket_nonblocking(fds[i]);
		evutil_make_socket_closeonexec(fds[i]);
		srv.lev[i] = evconnlistener_new(srv.base, server_accept, &srv,
		    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fds[i]);
		if (srv.lev[i] == NULL) {
			*cause = xstrdup("cannot listen");
			goto out;
		}
		evconnlistener_set_error_cb(srv.lev[i], server_accept_error);
		srv.nlev++;
	}
	for (i = 0; i < (int)(sizeof sigs / sizeof sigs[0]); i++) {
		srv.ev_sig[i] = evsignal_new(srv.base, sigs[i],
		    sigs[i] == SIGCHLD ? server_sigchld : server_signal, &srv);
		evsignal_add(srv.ev_sig[i], NULL);
	}
	srv.ev_sweep = event_new(srv.base, -1, EV_PERSIST, server_sweep, &srv);
	evtimer_add(srv.ev_sweep, &sec);
	srv.ev_resume = evtimer_new(srv.base, server_resume, &srv);
	srv.ev_orphans = evtimer_new(srv.base, server_orphans, &srv);
	srv.zygote = zygote_new(srv.base, srv.scratch_dir);
	server_zygote = srv.zygote;
	zygote_set_size(srv.zygote, srv.jail_root != NULL ? cfg->jail_pool : 0);
	log_info("listening (config version %s, %zu sessions, %zu tools)", cfg->version,
	    cfg->nsessions, cfg->ntools);
	platform_notify("READY=1");
	event_base_dispatch(srv.base);
	/* GitHub App tokens die with the daemon: revoked, a few seconds at most. */
	event_del(srv.ev_sweep);
	ghmint_stop(srv.base, srv.keyring, 3);

	/* Stopping: children were killed by the signal handler; reap them briefly. */
	for (i = 0; i < 20; i++) {
		int status;
		pid_t pid;

		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			(void)job_reaped(pid, status);
		if (srv.nrunning == 0)
			break;
		usleep(50000);
	}
	rc = 0;
out:
	while ((c = TAILQ_FIRST(&srv.conns)) != NULL)
		conn_free(c);
	approve_free(srv.approve);
	zygote_free(srv.zygote);
	cgroup_shutdown();
	renew_stop_all();
	for (i = 0; i < srv.nlev; i++)
		evconnlistener_free(srv.lev[i]);
	for (i = 0; i < (int)(sizeof srv.ev_sig / sizeof srv.ev_sig[0]); i++) {
		if (srv.ev_sig[i] != NULL)
			event_free(srv.ev_sig[i]);
	}
	if (srv.ev_sweep != NULL)
		event_free(srv.ev_sweep);
	if (srv.ev_resume != NULL)
		event_free(srv.ev_resume);
	if (srv.ev_orphans != NULL)
		event_free(srv.ev_orphans);
	if (srv.own_socket != NULL) {
		unlink(srv.own_socket);
		free(srv.own_socket);
	}
	if (srv.base != NULL)
		event_base_free(srv.base);
	audit_close();
	config_unref(srv.cfg);
	free(srv.scratch_dir);
	free(srv.mirror_dir);
	free(srv.jail_root);
	free(fds);
	return rc;
}
