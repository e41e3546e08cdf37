/*
 * The runner-owned bare mirror: one per session and upstream repository. It is made
 * atomically (built next to its final place, then renamed), configured by us alone,
 * refreshed from upstream before every fetch (a push goes from the refs the sandbox
 * saw: githook.c), and guarded by flock(2) on "NAME.git.lock":
 * exclusive while anything writes to it, shared while upload-pack reads it.
 */
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "valid.h"
#include "gitserve.h"

#define GITMIRROR_TMP		".tmp-"
#define GITMIRROR_SUFFIX_MAX	64	/* room for ".lock", ".tmp-XXXXXX", "/hooks/pre-receive..." */
#define GITMIRROR_STALE_SEC	300	/* an untouched quarantine older than this is dead */

/* Check the mirror path the bridge gave us. */
int
gitmirror_check_path(const char *path, char **cause)
{
	struct stat	 sb;
	size_t		 len = strlen(path);
	const char	*base;

	if (path[0] != '/' || len + GITMIRROR_SUFFIX_MAX >= PATH_MAX) {
		xasprintf(cause, "mirror path must be absolute and shorter than %d bytes",
		    PATH_MAX - GITMIRROR_SUFFIX_MAX);
		return -1;
	}
	/* No quoting characters either: git would quote such paths in its variables. */
	for (base = path; *base != '\0'; base++) {
		if ((unsigned char)*base < 0x20 || *base == 0x7f || *base == '"' ||
		    *base == '\\') {
			xasprintf(cause, "mirror path contains a control or quoting character");
			return -1;
		}
	}
	if (strstr(path, "//") != NULL || strstr(path, "/./") != NULL ||
	    strstr(path, "/../") != NULL) {
		xasprintf(cause, "mirror path is not canonical");
		return -1;
	}
	base = strrchr(path, '/') + 1;
	if (strlen(base) <= 4 || strcmp(base + strlen(base) - 4, ".git") != 0 ||
	    base[0] == '.') {
		xasprintf(cause, "mirror path must end in NAME.git");
		return -1;
	}
	if (lstat(path, &sb) == 0) {
		if (!S_ISDIR(sb.st_mode)) {
			xasprintf(cause, "mirror %s is not a directory", path);
			return -1;
		}
		if (sb.st_uid != geteuid()) {
			xasprintf(cause, "mirror %s is not owned by this user", path);
			return -1;
		}
	} else if (errno != ENOENT) {
		xasprintf(cause, "mirror %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Open NAME.git.lock and take the lock, saying so if we have to wait. */
int
gitmirror_lock(const char *path, int how, char **cause)
{
	char	*lockpath;
	int	 fd, rc;

	xasprintf(&lockpath, "%s.lock", path);
	fd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1) {
		xasprintf(cause, "%s: %s", lockpath, strerror(errno));
		free(lockpath);
		return -1;
	}
	free(lockpath);
	rc = flock(fd, how | LOCK_NB);
	if (rc == -1 && errno == EWOULDBLOCK) {
		gitmsg_say("waiting for another git operation on this repository to finish");
		while ((rc = flock(fd, how)) == -1 && errno == EINTR)
			;
	}
	if (rc == -1) {
		xasprintf(cause, "lock %s.lock: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* nftw callback removing everything under a stale temporary mirror. */
static int
gitmirror_rm_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (type == FTW_DP)
		return rmdir(path) == 0 || errno == ENOENT ? 0 : -1;
	return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
}

/*
 * Remove "NAME.git.tmp-XXXXXX" leftovers of a killed creation. Mirrors are only
 * created under the exclusive lock, which the caller holds, so any such directory
 * is dead.
 */
static void
gitmirror_clean_stale(const char *path)
{
	char		*parent, *prefix, *victim;
	const char	*base;
	DIR		*d;
	struct dirent	*de;

	base = strrchr(path, '/') + 1;
	parent = xstrndup(path, base - path);
	xasprintf(&prefix, "%s%s", base, GITMIRROR_TMP);
	if ((d = opendir(parent)) == NULL)
		goto out;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
		    strlen(de->d_name) != strlen(prefix) + 6)
			continue;
		xasprintf(&victim, "%s%s", parent, de->d_name);
		if (nftw(victim, gitmirror_rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0)
			gitmsg_say("warning: cannot remove stale %s", victim);
		free(victim);
	}
	closedir(d);
out:
	free(parent);
	free(prefix);
}

/* Whether path or any entry directly in it changed within the last GITMIRROR_STALE_SEC. */
static int
gitmirror_recent(const char *path, time_t now)
{
	struct stat	 sb;
	struct dirent	*de;
	DIR		*d;
	char		*p;
	int		 recent = 0;

	if (lstat(path, &sb) != 0 || sb.st_mtime > now - GITMIRROR_STALE_SEC ||
	    sb.st_mtime > now + 60)
		return 1;
	if ((d = opendir(path)) == NULL)
		return 1;
	while (!recent && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		xasprintf(&p, "%s/%s", path, de->d_name);
		if (lstat(p, &sb) != 0 || sb.st_mtime > now - GITMIRROR_STALE_SEC)
			recent = 1;
		free(p);
	}
	closedir(d);
	return recent;
}

/*
 * Remove receive-pack quarantines ("objects/tmp_objdir-incoming-XXXXXX") that a push
 * killed half-way (a Ctrl-C in the sandbox) left behind: they can hold tens of MB.
 * The caller holds the exclusive lock, under which every push runs, so none is in
 * use by a live push of ours; leaving ones touched in the last few minutes also
 * spares a straggler that outlived its serving process.
 */
static void
gitmirror_clean_quarantine(const char *mirror)
{
	char		*objects, *victim;
	DIR		*d;
	struct dirent	*de;
	time_t		 now = time(NULL);

	xasprintf(&objects, "%s/objects", mirror);
	if ((d = opendir(objects)) == NULL) {
		free(objects);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "tmp_objdir-", 11) != 0)
			continue;
		xasprintf(&victim, "%s/%s", objects, de->d_name);
		if (!gitmirror_recent(victim, now) &&
		    nftw(victim, gitmirror_rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0)
			gitmsg_say("warning: cannot remove stale %s", victim);
		free(victim);
	}
	closedir(d);
	free(objects);
}

/* The pre-receive hook script for a mirror. */
static char *
gitmirror_hook_text(const struct gitctx *ctx)
{
	char	*quoted, *text;

	quoted = gitrun_shquote(ctx->self);
	xasprintf(&text, "#!/bin/sh\n"
	    "# Written by shimbridge-git: push policy checks and the upstream push.\n"
	    "exec %s hook pre-receive\n", quoted);
	free(quoted);
	return text;
}

/* Write dir/hooks/pre-receive unless it already holds exactly our script. */
static int
gitmirror_write_hook(const struct gitctx *ctx, const char *dir, char **cause)
{
	char	*hooks = NULL, *hook = NULL, *tmp = NULL, *text, have[4096];
	int	 fd = -1, rc = -1;
	ssize_t	 n;
	size_t	 len;

	text = gitmirror_hook_text(ctx);
	len = strlen(text);
	xasprintf(&hooks, "%s/hooks", dir);
	xasprintf(&hook, "%s/pre-receive", hooks);
	xasprintf(&tmp, "%s/pre-receive.tmp", hooks);

	if ((fd = open(hook, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) != -1) {
		n = read(fd, have, sizeof have);
		close(fd);
		fd = -1;
		if (n >= 0 && (size_t)n == len && memcmp(have, text, len) == 0) {
			rc = 0;
			goto out;
		}
	}
	if (mkdir(hooks, 0700) == -1 && errno != EEXIST) {
		xasprintf(cause, "%s: %s", hooks, strerror(errno));
		goto out;
	}
	(void)unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0700);
	if (fd == -1 || write(fd, text, len) != (ssize_t)len || fsync(fd) != 0) {
		xasprintf(cause, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	if (close(fd) != 0) {
		fd = -1;
		xasprintf(cause, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, hook) != 0) {
		xasprintf(cause, "%s: %s", hook, strerror(errno));
		goto out;
	}
	rc = 0;

out:
	if (fd != -1)
		close(fd);
	free(text);
	free(hooks);
	free(hook);
	free(tmp);
	return rc;
}

/* Run one git command that must succeed, putting its message into *cause if not. */
static int
gitmirror_git(const struct gitctx *ctx, const char *what, const char *const *args,
    char **cause)
{
	struct gitbuf	 err;
	char		*summary;
	int		 status;

	gitbuf_init(&err, GITRUN_ERR_MAX);
	status = gitrun_cmd(ctx, 0, args, NULL, &err, cause);
	if (status > 0) {
		summary = gitmsg_summary(gitbuf_str(&err), 500);
		xasprintf(cause, "git %s failed: %s", what, summary);
		free(summary);
	}
	gitbuf_free(&err);
	return status == 0 ? 0 : -1;
}

/* Whether s can stand in a double-quoted git config value as it is. */
static int
gitmirror_config_safe(const char *s)
{
	for (; *s != '\0'; s++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f || *s == '"' || *s == '\\')
			return 0;
	}
	return 1;
}

/*
 * Build a new mirror in dir: git init, then our settings appended to its config
 * in one write (one `git config` per setting cost a process each: ~16 of them,
 * ~170 ms, on every first use of a repository). The two values that are not
 * constants, the upstream URL and the hooks path, are written double-quoted and
 * must need no escaping (checked: giturl_parse and gitmirror_check_path allow no
 * quote, backslash or control character; checked again here).
 */
static int
gitmirror_init(const struct gitctx *ctx, const char *dir, char **cause)
{
	const char	*init[] = { "init", "--bare", "--quiet", "--template=", "-b", "main",
			    dir, NULL };
	char		*path = NULL, *hookspath = NULL, *text = NULL;
	int		 fd = -1, rc = -1;
	size_t		 len;

	if (gitmirror_git(ctx, "init", init, cause) != 0)
		goto out;
	xasprintf(&hookspath, "%s/hooks", ctx->mirror);	/* the final place, not dir */
	if (!gitmirror_config_safe(ctx->upstream) || !gitmirror_config_safe(hookspath)) {
		xasprintf(cause, "cannot configure the mirror: a quote, backslash or control "
		    "character in its upstream URL or path");
		goto out;
	}
	xasprintf(&text,
	    "[transfer]\n\tfsckObjects = true\n"
	    "[receive]\n\tfsckObjects = true\n\tdenyDeletes = false\n"
	    "\tdenyNonFastForwards = false\n\tautogc = false\n\tadvertisePushOptions = false\n"
	    "[fetch]\n\tfsckObjects = true\n"
	    "[uploadpack]\n\tallowAnySHA1InWant = false\n"
	    "[gc]\n\tauto = 0\n"
	    "[maintenance]\n\tauto = false\n"
	    "[core]\n\tfsmonitor = false\n\tlogAllRefUpdates = false\n\thooksPath = \"%s\"\n"
	    "[remote \"upstream\"]\n\turl = \"%s\"\n"
	    "\tfetch = +refs/heads/*:refs/heads/*\n\tfetch = +refs/tags/*:refs/tags/*\n",
	    hookspath, ctx->upstream);
	xasprintf(&path, "%s/config", dir);
	len = strlen(text);
	if ((fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW)) == -1 ||
	    write(fd, text, len) != (ssize_t)len) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (close(fd) != 0) {
		fd = -1;
		xasprintf(cause, "%s: %s", path, strerror(errno));
		goto out;
	}
	fd = -1;
	if (gitmirror_write_hook(ctx, dir, cause) != 0)
		goto out;
	rc = 0;

out:
	if (fd != -1)
		close(fd);
	free(path);
	free(hookspath);
	free(text);
	return rc;
}

/*
 * Whether the mirror's HEAD names a branch that exists as a loose ref (what a fetch
 * writes): then it resolves, and no git needs to start to say so. 0 means "ask git".
 */
static int
gitmirror_head_loose(const char *mirror)
{
	char	*path, buf[512];
	ssize_t	 n;
	size_t	 len, i;
	int	 fd;

	xasprintf(&path, "%s/HEAD", mirror);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(path);
	if (fd == -1)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 16 || strncmp(buf, "ref: refs/heads/", 16) != 0 || buf[n - 1] != '\n')
		return 0;
	buf[n - 1] = '\0';
	/* A plain branch name: no path games, nothing git would quote. */
	if (strstr(buf + 16, "..") != NULL || strspn(buf + 16, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-") != strlen(buf + 16))
		return 0;
	xasprintf(&path, "%s/%s", mirror, buf + 5);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(path);
	if (fd == -1)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n != 41 && n != 65)
		return 0;
	len = (size_t)n - 1;
	for (i = 0; i < len; i++) {
		if (!((buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f')))
			return 0;
	}
	return buf[len] == '\n';
}

/*
 * Point the mirror's HEAD where upstream's points. Asking costs a round trip, so
 * only when the mirror is new or its HEAD does not resolve.
 */
static void
gitmirror_sync_head(const struct gitctx *ctx, const char *gitdir, int always)
{
	const char	*verify[] = { gitdir, "rev-parse", "-q", "--verify", "HEAD^{commit}",
			    NULL };
	const char	*lsremote[] = { gitdir, "ls-remote", "--symref", ctx->upstream, "HEAD",
			    NULL };
	const char	*setref[] = { gitdir, "symbolic-ref", "HEAD", NULL, NULL };
	struct gitbuf	 out, err;
	char		*cause = NULL, *line, *next, *target = NULL;
	const char	*p;
	int		 status;

	gitbuf_init(&out, GITRUN_OUT_MAX);
	gitbuf_init(&err, GITRUN_ERR_MAX);
	if (!always) {
		status = gitmirror_head_loose(ctx->mirror) ? 0 :
		    gitrun_cmd(ctx, GITRUN_READONLY, verify, NULL, NULL, &cause);
		if (status == 0)
			goto out;
	}
	status = gitrun_cmd(ctx, GITRUN_CRED, lsremote, &out, &err, &cause);
	if (status != 0)
		goto out;
	for (line = out.data; line != NULL; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if (strncmp(line, "ref: refs/heads/", 16) != 0)
			continue;
		p = strchr(line, '\t');
		if (p == NULL || strcmp(p, "\tHEAD") != 0)
			continue;
		target = xstrndup(line + 5, p - (line + 5));
		break;
	}
	if (target == NULL || strspn(target, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-") != strlen(target))
		goto out;	/* empty upstream, or a name we will not write */
	setref[3] = target;
	status = gitrun_cmd(ctx, 0, setref, NULL, NULL, &cause);

out:
	if (status != 0 && cause != NULL)
		gitmsg_say("warning: cannot set the default branch: %s", cause);
	free(cause);
	free(target);
	gitbuf_free(&out);
	gitbuf_free(&err);
}

/* Fetch upstream into the repository at dir, pruning what upstream no longer has. */
static int
gitmirror_fetch_into(const struct gitctx *ctx, const char *dir, int created, char **cause)
{
	struct gitbuf		 err;
	struct gitmsg_progress	 prog;
	char			*gitdir, *summary;
	int			 status, rc = -1;
	/*
	 * Progress, when the sandbox's git asked for it, is relayed as it comes.
	 * Protocol v0: its first request (info/refs) already lists upstream's refs, so
	 * a mirror that is up to date costs one request, a stale one two; v2 asks for
	 * the capabilities, then the refs, then the pack (two or three). The price is
	 * that v0's list holds every ref upstream advertises, not only heads and tags.
	 */
	const char		*args[] = { NULL, "-c", "protocol.version=0", "fetch", "--quiet",
				    ctx->progress ? "--progress" : "--no-progress", "--prune",
				    "--atomic", "--no-tags", "--no-write-fetch-head",
				    "--no-auto-gc", "--no-recurse-submodules",
				    "--no-show-forced-updates", ctx->upstream,
				    "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*",
				    NULL };

	xasprintf(&gitdir, "--git-dir=%s", dir);
	args[0] = gitdir;
	gitbuf_init(&err, GITRUN_ERR_MAX);
	gitmsg_progress_init(&prog, ctx->progress, &err);
	status = gitrun_cmd_err(ctx, GITRUN_CRED, args, NULL, gitmsg_progress_feed, &prog, cause);
	gitmsg_progress_done(&prog);
	if (status == -1)
		goto out;
	if (status != 0) {
		summary = gitmsg_summary(gitbuf_str(&err), 700);
		xasprintf(cause, "cannot fetch %s from upstream: %s", ctx->upstream, summary);
		free(summary);
		goto out;
	}
	gitmirror_sync_head(ctx, gitdir, created);
	rc = 0;

out:
	gitbuf_free(&err);
	free(gitdir);
	return rc;
}

/* qsort comparator for an array of strings. */
static int
gitmirror_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Split buf (modified) into its non-empty lines, sorted; returns how many. */
size_t
gitmirror_split_lines(char *buf, char ***v)
{
	char	*line, *next;
	size_t	 n = 0;

	*v = NULL;
	for (line = buf; line != NULL && *line != '\0'; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if (*line == '\0')
			continue;
		*v = xreallocarray(*v, n + 1, sizeof **v);
		(*v)[n++] = line;
	}
	if (n > 1)
		qsort(*v, n, sizeof **v, gitmirror_cmp);
	return n;
}

/* Read the bridge's whole upstream-refs message into msg: 0 for a ref list, else -1. */
static int
gitmirror_read_refs(const char *path, struct gitbuf *msg)
{
	struct stat	 sb;
	struct pollfd	 pfd;
	char		 buf[4096];
	ssize_t		 n;
	int		 fd, rc = -1, waited = 0;

	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return -1;
	if (fstat(fd, &sb) != 0 || !S_ISFIFO(sb.st_mode))
		goto out;
	/* The bridge keeps its end open: wait for a whole message, not for EOF. */
	for (;;) {
		const char *s = gitbuf_str(msg);

		if (strcmp(s, "none\n") == 0)
			goto out;
		if (strncmp(s, "refs\n", 5) == 0 && msg->len >= 9 &&
		    strcmp(s + msg->len - 4, "end\n") == 0 && s[msg->len - 5] == '\n') {
			rc = 0;
			goto out;
		}
		pfd.fd = fd;
		pfd.events = POLLIN;
		/* The bridge's prefetch has the injector's own time limit; this is a bound. */
		if (waited >= 60)
			goto out;
		if (poll(&pfd, 1, 1000) < 0) {
			if (errno == EINTR)
				continue;
			goto out;
		}
		if (!(pfd.revents & (POLLIN | POLLHUP))) {
			waited++;
			continue;
		}
		n = read(fd, buf, sizeof buf);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0 || gitbuf_add(msg, buf, (size_t)n) != 0)
			goto out;
	}
out:
	close(fd);
	return rc;
}

/*
 * Upstream's heads and tags as the bridge saw them when the call began: their
 * "<oid> <ref>" lines, sorted, in *lines (pointing into msg, which the caller
 * initialised and frees, as *lines). -1 when the bridge has no list to give.
 */
int
gitmirror_upstream_refs(const struct gitctx *ctx, struct gitbuf *msg, char ***lines,
    size_t *n)
{
	*lines = NULL;
	*n = 0;
	if (ctx->upstream_refs == NULL || gitmirror_read_refs(ctx->upstream_refs, msg) != 0)
		return -1;
	/* Between "refs\n" and "end\n". */
	msg->data[msg->len - 4] = '\0';
	*n = gitmirror_split_lines(msg->data + 5, lines);
	return 0;
}

/*
 * The mirror's own heads and tags: sorted "<oid> <ref>" lines in *lines (pointing
 * into out, which the caller initialised and frees, as *lines). -1 if git fails.
 */
int
gitmirror_own_refs(const struct gitctx *ctx, struct gitbuf *out, char ***lines, size_t *n)
{
	const char	*args[] = { NULL, "for-each-ref", "--format=%(objectname) %(refname)",
			    "refs/heads/", "refs/tags/", NULL };
	char		*gitdir, *cause = NULL;
	int		 rc;

	*lines = NULL;
	*n = 0;
	xasprintf(&gitdir, "--git-dir=%s", ctx->mirror);
	args[0] = gitdir;
	rc = gitrun_cmd(ctx, GITRUN_READONLY, args, out, NULL, &cause) == 0 ? 0 : -1;
	if (rc == 0)
		*n = gitmirror_split_lines(out->data != NULL ? out->data : (char *)"", lines);
	free(cause);
	free(gitdir);
	return rc;
}

/* Whether the bridge's list of upstream's heads and tags is exactly the mirror's. */
int
gitmirror_fresh(const struct gitctx *ctx)
{
	struct gitbuf	 msg, out;
	char		**up = NULL, **have = NULL;
	size_t		 nup, nhave, i;
	int		 fresh = 0;

	gitbuf_init(&msg, GITC_REFS_MAX);
	gitbuf_init(&out, GITRUN_OUT_MAX);
	if (gitmirror_upstream_refs(ctx, &msg, &up, &nup) != 0 ||
	    gitmirror_own_refs(ctx, &out, &have, &nhave) != 0 || nup != nhave)
		goto out;
	for (i = 0; i < nup; i++) {
		if (strcmp(up[i], have[i]) != 0)
			goto out;
	}
	fresh = 1;
out:
	free(up);
	free(have);
	gitbuf_free(&msg);
	gitbuf_free(&out);
	return fresh;
}

/*
 * A push's warming fetch (githook.c, "Keep the mirror warm"), left running by the
 * hook to serve(), which adopts it (gitrun_adopt_orphans): its pid, in a file in the
 * call's private HOME.
 */
#define GITMIRROR_WARM_FILE	"warm-pid"

/* The file's path, or NULL without a private HOME. */
static char *
gitmirror_warm_path(const struct gitctx *ctx)
{
	char *path;

	if (ctx->home == NULL)
		return NULL;
	xasprintf(&path, "%s/%s", ctx->home, GITMIRROR_WARM_FILE);
	return path;
}

/* Say that the warming fetch pid runs on (a new file); 0, or -1 if it cannot be said. */
int
gitmirror_warm_save(const struct gitctx *ctx, pid_t pid)
{
	char	*path, num[24];
	int	 fd, len, rc = -1;

	if (pid <= 1 || (path = gitmirror_warm_path(ctx)) == NULL)
		return -1;
	len = snprintf(num, sizeof num, "%ld\n", (long)pid);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) != -1) {
		if (write(fd, num, (size_t)len) == len)
			rc = 0;
		if (close(fd) != 0 || rc != 0) {
			(void)unlink(path);
			rc = -1;
		}
	}
	free(path);
	return rc;
}

/*
 * The warming fetch the hook left running, if it is our child (adopted) and still
 * running: its pid, else -1. The file is removed. A pid that is not a running child
 * of ours is ignored, so a forged file cannot point us at another process.
 */
pid_t
gitmirror_warm_take(const struct gitctx *ctx)
{
	char	*path, buf[24], *end;
	ssize_t	 r = -1;
	long	 v;
	int	 fd, status;
	pid_t	 pid = -1;

	if ((path = gitmirror_warm_path(ctx)) == NULL)
		return -1;
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) != -1) {
		r = read(fd, buf, sizeof buf - 1);
		close(fd);
		(void)unlink(path);
	}
	free(path);
	if (r <= 1 || buf[r - 1] != '\n')
		return -1;
	buf[r - 1] = '\0';
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno != 0 || *end != '\0' || buf[0] < '1' || buf[0] > '9' || v <= 1 ||
	    v > INT_MAX)
		return -1;
	pid = (pid_t)v;
	if (waitpid(pid, &status, WNOHANG) != 0)
		return -1;	/* done (now reaped), or not our child */
	return pid;
}

/* Bring the existing mirror up to date with upstream. */
int
gitmirror_fetch(const struct gitctx *ctx, char **cause)
{
	return gitmirror_fetch_into(ctx, ctx->mirror, 0, cause);
}

/*
 * Create the mirror if it does not exist, and make sure its hook is ours. A new
 * mirror is built, fetched and given upstream's HEAD in a temporary directory and
 * only then renamed into place, so an existing mirror is always a complete one.
 */
int
gitmirror_ensure(const struct gitctx *ctx, int *created, char **cause)
{
	struct stat	 sb;
	char		*tmp = NULL;
	int		 rc = -1;

	*created = 0;
	gitmirror_clean_stale(ctx->mirror);
	if (lstat(ctx->mirror, &sb) == 0) {
		gitmirror_clean_quarantine(ctx->mirror);
		return gitmirror_write_hook(ctx, ctx->mirror, cause);
	}
	if (errno != ENOENT) {
		xasprintf(cause, "mirror %s: %s", ctx->mirror, strerror(errno));
		return -1;
	}

	xasprintf(&tmp, "%s%sXXXXXX", ctx->mirror, GITMIRROR_TMP);
	if (mkdtemp(tmp) == NULL) {
		xasprintf(cause, "cannot create mirror next to %s: %s", ctx->mirror,
		    strerror(errno));
		free(tmp);
		return -1;
	}
	if (gitmirror_init(ctx, tmp, cause) != 0)
		goto out;
	if (gitmirror_fetch_into(ctx, tmp, 1, cause) != 0)
		goto out;
	if (rename(tmp, ctx->mirror) != 0) {
		xasprintf(cause, "cannot create mirror %s: %s", ctx->mirror, strerror(errno));
		goto out;
	}
	free(tmp);
	tmp = NULL;	/* it is the mirror now */
	*created = 1;
	rc = 0;

out:
	if (tmp != NULL) {
		(void)nftw(tmp, gitmirror_rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
		free(tmp);
	}
	return rc;
}

/*
 * git's thresholds (gc.auto, gc.autoPackLimit at their defaults). A mirror sets
 * gc.auto = 0 so that git never starts a gc of its own in the middle of a call
 * (detached, it would be killed with the call's jail); shimbridge-git looks
 * itself, at a call's start, and runs it in the foreground when due.
 */
#define GITMIRROR_GC_AUTO	6700
#define GITMIRROR_GC_PACKS	50

/* How many names in dir pass keep (stopping past limit); -1 if dir cannot be read. */
static int
gitmirror_count(const char *dir, int (*keep)(const char *, DIR *), int limit)
{
	struct dirent	*de;
	DIR		*d;
	int		 n = 0;

	if ((d = opendir(dir)) == NULL)
		return errno == ENOENT ? 0 : -1;
	while (n <= limit && (de = readdir(d)) != NULL) {
		if (keep(de->d_name, d))
			n++;
	}
	closedir(d);
	return n;
}

/* A loose object's file name under objects/XX: the rest of a SHA-1 or SHA-256 name. */
static int
gitmirror_is_loose(const char *name, DIR *d)
{
	size_t	len = strlen(name);

	(void)d;
	return (len == 38 || len == 62) && valid_hex_lower(name, len);
}

/* A pack of objects/pack without a .keep file (git's count for gc.autoPackLimit). */
static int
gitmirror_is_pack(const char *name, DIR *d)
{
	struct stat	 sb;
	char		 keep[NAME_MAX + 1];
	size_t		 len = strlen(name);

	if (len <= 5 || strcmp(name + len - 5, ".pack") != 0 || len - 5 + 6 > NAME_MAX)
		return 0;
	snprintf(keep, sizeof keep, "%.*s.keep", (int)(len - 5), name);
	return fstatat(dirfd(d), keep, &sb, AT_SYMLINK_NOFOLLOW) != 0;
}

int
gitmirror_needs_gc(const char *mirror)
{
	char	*dir;
	int	 loose, packs;

	xasprintf(&dir, "%s/objects/17", mirror);
	loose = gitmirror_count(dir, gitmirror_is_loose, (GITMIRROR_GC_AUTO + 255) / 256);
	free(dir);
	xasprintf(&dir, "%s/objects/pack", mirror);
	packs = gitmirror_count(dir, gitmirror_is_pack, GITMIRROR_GC_PACKS);
	free(dir);
	return loose > (GITMIRROR_GC_AUTO + 255) / 256 || packs > GITMIRROR_GC_PACKS;
}

int
gitmirror_gc(const struct gitctx *ctx, char **cause)
{
	char		*gitdir, *limit, *packs;
	const char	*args[] = { NULL, "-c", NULL, "-c", NULL, "-c", "gc.autoDetach=false",
			    "gc", "--auto", "--quiet", NULL };
	int		 rc;

	xasprintf(&gitdir, "--git-dir=%s", ctx->mirror);
	xasprintf(&limit, "gc.auto=%d", GITMIRROR_GC_AUTO);
	xasprintf(&packs, "gc.autoPackLimit=%d", GITMIRROR_GC_PACKS);
	args[0] = gitdir;
	args[2] = limit;
	args[4] = packs;
	rc = gitmirror_git(ctx, "gc", args, cause);
	free(gitdir);
	free(limit);
	free(packs);
	return rc;
}

/* The "maintain MIRROR" mode: garbage-collect a mirror under its exclusive lock. */
int
gitmirror_maintain(int argc, char **argv)
{
	struct gitctx	 ctx;
	struct stat	 sb;
	char		*cause = NULL, *gitdir = NULL, *hook = NULL;
	const char	*v, *gc[] = { NULL, "gc", "--quiet", "--prune=now", NULL };
	int		 fd = -1, rc = GS_EXIT_FATAL;

	memset(&ctx, 0, sizeof ctx);
	if (argc != 3) {
		fprintf(stderr, "usage: shimbridge-git maintain MIRROR\n");
		return GS_EXIT_USAGE;
	}
	if (gitmirror_check_path(argv[2], &cause) != 0)
		goto out;
	ctx.mirror = xstrdup(argv[2]);
	v = getenv(GITC_ENV_GIT);
	ctx.git = xstrdup(v != NULL && v[0] == '/' ? v : "/usr/bin/git");
	if ((v = getenv("HOME")) != NULL && v[0] == '/')
		ctx.home = xstrdup(v);

	xasprintf(&hook, "%s/hooks/pre-receive", ctx.mirror);
	if (lstat(ctx.mirror, &sb) != 0 || lstat(hook, &sb) != 0) {
		xasprintf(&cause, "%s is not a shimbridge mirror", ctx.mirror);
		goto out;
	}
	if ((fd = gitmirror_lock(ctx.mirror, LOCK_EX, &cause)) == -1)
		goto out;
	gitmirror_clean_stale(ctx.mirror);
	gitmirror_clean_quarantine(ctx.mirror);
	xasprintf(&gitdir, "--git-dir=%s", ctx.mirror);
	gc[0] = gitdir;
	if (gitmirror_git(&ctx, "gc", gc, &cause) != 0)
		goto out;
	rc = GS_EXIT_OK;

out:
	if (cause != NULL) {
		gitmsg_say("%s", cause);
		free(cause);
	}
	if (fd != -1)
		close(fd);
	free(gitdir);
	free(hook);
	gitenv_free(&ctx);
	return rc;
}
