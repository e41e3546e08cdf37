/*
 * Running host git. Every child gets an absolute binary, an argv we built, an
 * environment built from nothing (gitenv_child()), fds 0-2 only, default signal
 * dispositions, and is always reaped.
 */
#include <sys/resource.h>
#include <sys/types.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __APPLE__
#include <mach-o/dyld.h>
#endif

#include "util.h"
#include "gitserve.h"
#include "proc.h"

/* Quote s for /bin/sh. */
char *
gitrun_shquote(const char *s)
{
	struct gitbuf	 b;
	char		*out;

	gitbuf_init(&b, (size_t)-1);
	gitbuf_add(&b, "'", 1);
	for (; *s != '\0'; s++) {
		if (*s == '\'')
			gitbuf_add(&b, "'\\''", 4);
		else
			gitbuf_add(&b, s, 1);
	}
	gitbuf_add(&b, "'", 1);
	out = xstrdup(gitbuf_str(&b));
	gitbuf_free(&b);
	return out;
}

/* The absolute path of the running executable. */
char *
gitrun_self_path(char **cause)
{
#if defined(__linux__)
	char	buf[PATH_MAX];
	ssize_t	n;

	n = readlink("/proc/self/exe", buf, sizeof buf);
	if (n < 0) {
		xasprintf(cause, "cannot find own path: %s", strerror(errno));
		return NULL;
	}
	if ((size_t)n >= sizeof buf) {
		xasprintf(cause, "cannot find own path: %s", strerror(ENAMETOOLONG));
		return NULL;
	}
	buf[n] = '\0';
	if (buf[0] != '/' || strstr(buf, " (deleted)") != NULL) {
		xasprintf(cause, "cannot find own path: program was replaced or removed");
		return NULL;
	}
	return xstrdup(buf);
#elif defined(__APPLE__)
	char		buf[PATH_MAX], real[PATH_MAX];
	uint32_t	size = sizeof buf;

	if (_NSGetExecutablePath(buf, &size) != 0 || realpath(buf, real) == NULL) {
		xasprintf(cause, "cannot find own path");
		return NULL;
	}
	return xstrdup(real);
#else
	xasprintf(cause, "cannot find own path on this platform");
	return NULL;
#endif
}

/* Build git's argv: binary, hardening -c options, then args. */
static char **
gitrun_argv(const struct gitctx *ctx, int runflags, const char *const *args)
{
	char		**argv;
	size_t		  n = 0, nargs = 0, i;
	char		 *quoted;

	while (args[nargs] != NULL)
		nargs++;
	argv = xcalloc(nargs + 16, sizeof *argv);
	argv[n++] = xstrdup(ctx->git);
	if (runflags & GITRUN_CRED) {
		/* The empty value resets any helper list; ours answers for the upstream only. */
		argv[n++] = xstrdup("-c");
		argv[n++] = xstrdup("credential.helper=");
		/* Without a token (the loopback injector adds it) git gets no helper at all. */
		if (ctx->token != NULL) {
			argv[n++] = xstrdup("-c");
			quoted = gitrun_shquote(ctx->self);
			xasprintf(&argv[n++], "credential.helper=!%s credential", quoted);
			free(quoted);
			argv[n++] = xstrdup("-c");
			argv[n++] = xstrdup("credential.useHttpPath=true");
		}
		/* A redirect could move us to a URL our helper does not answer for anyway. */
		argv[n++] = xstrdup("-c");
		argv[n++] = xstrdup("http.followRedirects=false");
	}
	for (i = 0; i < nargs; i++)
		argv[n++] = xstrdup(args[i]);
	argv[n] = NULL;
	return argv;
}

/* Free a NULL-terminated vector. */
static void
gitrun_free_argv(char **argv)
{
	char	**p;

	if (argv == NULL)
		return;
	for (p = argv; *p != NULL; p++)
		free(*p);
	free(argv);
}

/* proc_req setup for GITRUN_NICE: the lowest CPU priority. Async-signal-safe. */
static const char *
gitrun_nice(const struct proc_req *r, void *arg)
{
	(void)r;
	(void)arg;
	return setpriority(PRIO_PROCESS, 0, 19) == 0 ? NULL : "setpriority";
}

/* Start a git child (common/proc.c does the fork, fds, signals and exec). */
int
gitrun_start(const struct gitctx *ctx, int runflags, const char *const *args, int in, int out,
    int err, struct gitproc *gp, char **cause)
{
	struct proc_req	  r;
	struct proc	  p;
	char		**argv = NULL, **envp = NULL;
	int		  want[3] = { in, out, err }, i, rc = -1;

	gp->pid = -1;
	gp->out = gp->err = -1;
	proc_req_init(&r, NULL, NULL, NULL);	/* the program below, once the fds are checked */
	for (i = 0; i < 3; i++) {
		if (want[i] == GITRUN_NULL)
			r.fd[i] = PROC_NULL;
		else if (want[i] == GITRUN_PIPE && i > 0)
			r.fd[i] = PROC_PIPE;
		else if (want[i] >= 0)
			r.fd[i] = want[i];
		else {
			xasprintf(cause, "internal error: bad fd for git child");
			goto out;
		}
	}
	/* Background work yields the CPUs to the call's own (the push it runs beside). */
	if (runflags & GITRUN_NICE)
		r.setup = gitrun_nice;
	/* Only receive-pack, for its hook, gets the bridge's refusal pipe. */
	if ((runflags & GITRUN_REFUSAL) && ctx->refusal_fd != -1) {
		r.extra_fd = ctx->refusal_fd;
		r.extra_to = GITC_REFUSAL_FD;
	}

	argv = gitrun_argv(ctx, runflags, args);
	envp = gitenv_child(ctx, runflags);
	r.path = argv[0];
	r.argv = argv;
	r.envp = envp;

	fflush(stderr);
	if (proc_spawn(&r, &p, cause) != 0)
		goto out;
	gp->pid = p.pid;
	gp->out = p.fd[1];
	gp->err = p.fd[2];	/* transferred */
	rc = 0;

out:
	gitrun_free_argv(argv);
	gitenv_free_child(envp);
	return rc;
}

/* Deliver complete records from rec, keeping a trailing partial one. */
static int
gitrun_records(struct gitbuf *rec, int sep, gitrun_cb cb, void *arg)
{
	char	*start, *end;
	size_t	 left;

	start = rec->data;
	left = rec->len;
	while (left > 0 && (end = memchr(start, sep, left)) != NULL) {
		*end = '\0';
		if (cb(start, end - start, arg) != 0)
			return 1;
		left -= end - start + 1;
		start = end + 1;
	}
	memmove(rec->data, start, left);
	rec->len = left;
	if (rec->data != NULL)
		rec->data[left] = '\0';
	return 0;
}

/* Keep a chunk of stderr in the caller's buffer (excess counted, not an error). */
static int
gitrun_err_cb(const char *data, size_t len, void *arg)
{
	gitbuf_add(arg, data, len);
	return 0;
}

/* Read a child's stdout and stderr pipes to EOF, stderr into errbuf. */
int
gitrun_read(struct gitproc *gp, int sep, gitrun_cb cb, void *arg, struct gitbuf *errbuf,
    char **cause)
{
	return gitrun_read_err(gp, sep, cb, arg, errbuf != NULL ? gitrun_err_cb : NULL, errbuf,
	    cause);
}

/* Read a child's stdout and stderr pipes to EOF. Returns 0, 1 if cb stopped, -1 on error. */
int
gitrun_read_err(struct gitproc *gp, int sep, gitrun_cb cb, void *arg, gitrun_cb ecb,
    void *earg, char **cause)
{
	struct pollfd	pfd[2];
	struct gitbuf	rec;
	char		buf[16384];
	ssize_t		n;
	int		rc = -1, nfds, i;

	gitbuf_init(&rec, GITRUN_REC_MAX);
	for (;;) {
		nfds = 0;
		if (gp->out != -1) {
			pfd[nfds].fd = gp->out;
			pfd[nfds++].events = POLLIN;
		}
		if (gp->err != -1) {
			pfd[nfds].fd = gp->err;
			pfd[nfds++].events = POLLIN;
		}
		if (nfds == 0)
			break;
		if (poll(pfd, nfds, -1) == -1) {
			if (errno == EINTR)
				continue;
			xasprintf(cause, "poll: %s", strerror(errno));
			goto out;
		}
		for (i = 0; i < nfds; i++) {
			if (pfd[i].revents == 0)
				continue;
			n = read(pfd[i].fd, buf, sizeof buf);
			if (n == -1 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n == -1) {
				xasprintf(cause, "read from git: %s", strerror(errno));
				goto out;
			}
			if (pfd[i].fd == gp->err) {
				if (n == 0) {
					close(gp->err);
					gp->err = -1;
				} else if (ecb != NULL)
					(void)ecb(buf, n, earg);
				continue;
			}
			if (n == 0) {
				close(gp->out);
				gp->out = -1;
				if (cb != NULL && sep >= 0 && rec.len > 0 &&
				    cb(rec.data, rec.len, arg) != 0) {
					rc = 1;
					goto out;
				}
				continue;
			}
			if (cb == NULL)
				continue;
			if (sep < 0) {
				if (cb(buf, n, arg) != 0) {
					rc = 1;
					goto out;
				}
				continue;
			}
			if (gitbuf_add(&rec, buf, n) != 0) {
				xasprintf(cause, "git printed a record longer than %d bytes",
				    GITRUN_REC_MAX);
				goto out;
			}
			if (gitrun_records(&rec, sep, cb, arg) != 0) {
				rc = 1;
				goto out;
			}
		}
	}
	rc = 0;

out:
	if (gp->out != -1)
		close(gp->out);
	if (gp->err != -1)
		close(gp->err);
	gp->out = gp->err = -1;
	gitbuf_free(&rec);
	return rc;
}

/* Reap a child and translate its status. */
int
gitrun_wait(pid_t pid, char **cause)
{
	int	status;

	while (waitpid(pid, &status, 0) == -1) {
		if (errno != EINTR) {
			xasprintf(cause, "waitpid: %s", strerror(errno));
			return -1;
		}
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	xasprintf(cause, "git ended oddly");
	return -1;
}

/* Reap our descendants' orphans (gitserve.h). */
int
gitrun_adopt_orphans(void)
{
#ifdef PR_SET_CHILD_SUBREAPER
	return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : -1;
#else
	return -1;	/* the hook then waits for its fetch itself */
#endif
}

/* Wait for a child at most ms milliseconds, then kill it (gitserve.h). */
int
gitrun_wait_ms(pid_t pid, int ms)
{
	struct timespec	 tick = { 0, 5 * 1000 * 1000 };
	int		 status, waited = 0;
	pid_t		 r;

	for (;;) {
		r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
		if (r == -1 && errno != EINTR)
			return -1;
		if (waited >= ms)
			break;
		nanosleep(&tick, NULL);
		waited += 5;
	}
	(void)kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) == -1 && errno == EINTR)
		;
	return -1;
}

/* Kill and reap a child we no longer want. */
void
gitrun_abort(struct gitproc *gp)
{
	if (gp->out != -1)
		close(gp->out);
	if (gp->err != -1)
		close(gp->err);
	gp->out = gp->err = -1;
	if (gp->pid > 0) {
		(void)kill(gp->pid, SIGKILL);
		while (waitpid(gp->pid, NULL, 0) == -1 && errno == EINTR)
			;
	}
	gp->pid = -1;
}

/* Append a chunk of stdout to the caller's buffer; over the cap stops the child. */
static int
gitrun_cmd_cb(const char *data, size_t len, void *arg)
{
	return gitbuf_add(arg, data, len) == 0 ? 0 : -1;
}

/* Run git to completion, capturing its output. */
int
gitrun_cmd(const struct gitctx *ctx, int runflags, const char *const *args, struct gitbuf *out,
    struct gitbuf *err, char **cause)
{
	return gitrun_cmd_err(ctx, runflags, args, out, err != NULL ? gitrun_err_cb : NULL, err,
	    cause);
}

/* Run git to completion, capturing stdout and giving stderr to ecb as it comes. */
int
gitrun_cmd_err(const struct gitctx *ctx, int runflags, const char *const *args,
    struct gitbuf *out, gitrun_cb ecb, void *earg, char **cause)
{
	struct gitproc	gp;
	int		rc;

	if (gitrun_start(ctx, runflags, args, GITRUN_NULL, GITRUN_PIPE, GITRUN_PIPE, &gp,
	    cause) != 0)
		return -1;
	rc = gitrun_read_err(&gp, -1, out != NULL ? gitrun_cmd_cb : NULL, out, ecb, earg, cause);
	if (rc != 0) {
		if (rc == 1)
			xasprintf(cause, "git printed more than %zu bytes", out->max);
		gitrun_abort(&gp);
		return -1;
	}
	return gitrun_wait(gp.pid, cause);
}
