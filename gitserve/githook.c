/*
 * The mirror's pre-receive hook: receive-pack runs it (as "exec shimbridge-git hook
 * pre-receive") after the sandbox's objects are in the quarantine and before any ref
 * moves. It applies the push policy to every ref update and, if all pass, pushes them
 * upstream in one atomic push. Only if upstream accepts do we exit 0 and let
 * receive-pack update the mirror; otherwise the whole push fails and the quarantine
 * is thrown away. It runs under the exclusive mirror lock held by the serving
 * process (our grandparent), so it never takes the lock itself.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util.h"
#include "valid.h"
#include "gitserve.h"

#define GITHOOK_SHOW_MAX	10	/* offending paths listed before we stop looking */

/* One ref update and what we decided about it. */
struct githook_item {
	struct githook_update	 u;
	int			 create;	/* old is zero */
	int			 delete;	/* new is zero */
	int			 branch;	/* refs/heads/ (else refs/tags/) */
	int			 force;		/* "+": a tag move, or not a fast-forward (known
						   only for ff-only and ask branches) */
};

/* Upstream's heads and tags, for the checks before the push and the warming fetch. */
struct githook_upstream {
	struct gitbuf	  msg;		/* the lines point into it */
	char		**lines;	/* sorted "<oid> <ref>" */
	size_t		  n;
	int		  bridge;	/* the bridge's prefetched list (not asked by us) */
};

/* State for scanning changed paths. */
struct githook_scan {
	const struct gitctx	*ctx;
	char			 commit[65];	/* last commit id seen */
	size_t			 found;
	int			 refused;
};

/* State for collecting upstream's porcelain report. */
struct githook_report {
	struct gitbuf		 rejected;	/* rendered "!" lines, '\n'-separated */
};

/* Whether an object name is all zeros (no object). */
static int
githook_is_zero(const char *oid)
{
	return oid[strspn(oid, "0")] == '\0';
}

/* Parse "old new ref". */
int
githook_parse_line(const char *line, size_t len, struct githook_update *u, char **cause)
{
	const char	*sp1, *sp2;
	size_t		 hexlen, i;

	memset(u, 0, sizeof *u);
	if (len > GITHOOK_LINE_MAX) {
		xasprintf(cause, "ref update line longer than %d bytes", GITHOOK_LINE_MAX);
		return -1;
	}
	for (i = 0; i < len; i++) {
		if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f) {
			xasprintf(cause, "ref update line contains a control character");
			return -1;
		}
	}
	sp1 = memchr(line, ' ', len);
	if (sp1 == NULL) {
		xasprintf(cause, "malformed ref update line");
		return -1;
	}
	hexlen = sp1 - line;
	if ((hexlen != 40 && hexlen != 64) || len < 2 * hexlen + 3 ||
	    line[2 * hexlen + 1] != ' ') {
		xasprintf(cause, "malformed ref update line");
		return -1;
	}
	sp2 = line + 2 * hexlen + 1;
	if (!valid_hex_lower(line, hexlen) || !valid_hex_lower(sp1 + 1, hexlen) ||
	    memchr(sp2 + 1, ' ', len - (sp2 + 1 - line)) != NULL) {
		xasprintf(cause, "malformed ref update line");
		return -1;
	}
	u->old = xstrndup(line, hexlen);
	u->new = xstrndup(sp1 + 1, hexlen);
	u->ref = xstrndup(sp2 + 1, len - (sp2 + 1 - line));
	return 0;
}

/* Release a parsed update. */
void
githook_free_update(struct githook_update *u)
{
	free(u->old);
	free(u->new);
	free(u->ref);
	memset(u, 0, sizeof *u);
}

/* The ref name without refs/heads/ or refs/tags/, for messages. */
static const char *
githook_short(const char *ref)
{
	if (strncmp(ref, "refs/heads/", 11) == 0)
		return ref + 11;
	if (strncmp(ref, "refs/tags/", 10) == 0)
		return ref + 10;
	return ref;
}

/* Whether old is an ancestor of new: 1 yes, 0 no, -1 cannot tell. */
static int
githook_is_ff(const struct gitctx *ctx, const char *gitdir, const struct githook_item *it)
{
	const char	*args[] = { gitdir, "merge-base", "--is-ancestor", it->u.old, it->u.new,
			    NULL };
	char		*cause = NULL;
	int		 status;

	status = gitrun_cmd(ctx, GITRUN_QUARANTINE | GITRUN_READONLY, args, NULL, NULL, &cause);
	free(cause);
	if (status == 0)
		return 1;
	if (status == 1)
		return 0;
	return -1;
}

/*
 * The branch upstream's HEAD names, from the mirror (without refs/heads/), or NULL.
 * The mirror's HEAD is a symbolic ref we set ("ref: refs/heads/NAME"), read as git
 * reads it, without starting git for it.
 */
static char *
githook_default_branch(const struct gitctx *ctx)
{
	char	*path, buf[512];
	ssize_t	 n;
	size_t	 len;
	int	 fd;

	xasprintf(&path, "%s/HEAD", ctx->mirror);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(path);
	if (fd == -1)
		return NULL;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 16 || strncmp(buf, "ref: refs/heads/", 16) != 0)
		return NULL;
	buf[n] = '\0';
	len = strcspn(buf + 16, "\n");
	if (len == 0 || buf[16 + len] != '\n')
		return NULL;
	return xstrndup(buf + 16, len);
}

/* Whether a branch takes no direct push ("HEAD" in the list stands for the default). */
static int
githook_no_push(const struct gitctx *ctx, const char *branch)
{
	char	*def;
	int	 yes;

	if (gitenv_in_list(&ctx->no_push, branch))
		return 1;
	if (!gitenv_in_list(&ctx->no_push, "HEAD"))
		return 0;
	def = githook_default_branch(ctx);
	yes = def != NULL && strcmp(def, branch) == 0;
	free(def);
	return yes;
}

/* Decide about a tag update: protected tags may be created, never moved or deleted. */
static int
githook_check_tag(const struct gitctx *ctx, struct githook_item *it)
{
	const char	*name = githook_short(it->u.ref);

	if (it->create)
		return 0;
	if (gitenv_tag_protected(ctx, name)) {
		gitmsg_say("refusing to %s tag '%s': it is protected by the shimbridge policy "
		    "(a protected tag can be created, but never moved or deleted once it "
		    "exists). Leave it as it is and create a new tag instead, for example "
		    "'%s.1'.", it->delete ? "delete" : "move", name, name);
		return -1;
	}
	if (!it->delete)
		it->force = 1;	/* moving an existing tag always needs force */
	return 0;
}

/*
 * Decide about one update without looking at its contents. Returns 0 if allowed,
 * -1 after printing why not.
 */
static int
githook_check_ref(const struct gitctx *ctx, const char *gitdir, struct githook_item *it)
{
	const char	*name;
	int		 ff;

	if (strncmp(it->u.ref, "refs/heads/", 11) == 0 && it->u.ref[11] != '\0')
		it->branch = 1;
	else if (strncmp(it->u.ref, "refs/tags/", 10) != 0 || it->u.ref[10] == '\0') {
		gitmsg_say("refusing to update %s: only branches (refs/heads/...) and tags "
		    "(refs/tags/...) can be pushed upstream. Push to a branch instead.",
		    it->u.ref);
		return -1;
	}
	name = githook_short(it->u.ref);
	it->create = githook_is_zero(it->u.old);
	it->delete = githook_is_zero(it->u.new);
	if (it->create && it->delete) {
		gitmsg_say("refusing to update %s: nothing to create or delete", it->u.ref);
		return -1;
	}
	if (!it->branch)
		return githook_check_tag(ctx, it);
	if (strcmp(name, "HEAD") == 0) {
		gitmsg_say("refusing to update refs/heads/HEAD: a branch named HEAD would be "
		    "confused with git's HEAD (the current or default branch). Push to a "
		    "branch with another name, for example git push origin HEAD:my-change.");
		return -1;
	}
	if (githook_no_push(ctx, name)) {
		gitmsg_say("refusing to %s branch '%s': the shimbridge policy takes no direct "
		    "pushes to it; work reaches it through pull requests. Push to a new branch "
		    "(git push origin HEAD:my-change) and open a pull request with gh pr "
		    "create.", it->delete ? "delete" : "push to", name);
		return -1;
	}
	if (it->delete) {
		if (gitenv_in_list(&ctx->ff_only, name)) {
			gitmsg_say("refusing to delete branch '%s': it is protected by the "
			    "shimbridge policy (fast-forward pushes only: no force, no delete). "
			    "Leave it in place; a maintainer can delete it upstream if it really "
			    "must go.", name);
			return -1;
		}
		return 0;
	}
	if (it->create)
		return 0;
	/*
	 * Whether the update is a fast-forward matters only to a branch that takes
	 * fast-forwards only, and to an approver (an ask says "force"): only then is
	 * git started to tell. Elsewhere the push upstream needs no "+" either: its
	 * lease (--force-with-lease=REF:OLD) lets a rewrite through, and only from
	 * the value the sandbox saw.
	 */
	if (!gitenv_in_list(&ctx->ff_only, name) && !gitenv_branch_asks(ctx, name))
		return 0;
	ff = githook_is_ff(ctx, gitdir, it);
	if (ff == 1)
		return 0;
	if (gitenv_in_list(&ctx->ff_only, name)) {
		gitmsg_say("refusing to force-push branch '%s': it is protected by the "
		    "shimbridge policy (fast-forward pushes only) and this update is not a "
		    "fast-forward (it would drop upstream commits). Rebase onto upstream's "
		    "'%s' (git pull --rebase) and push again, or push to a new branch and "
		    "open a pull request with gh pr create.", name, name);
		return -1;
	}
	it->force = 1;
	return 0;
}

/* Whether path is under prefix, or is an ancestor of it (a file or link in its place). */
static int
githook_path_denied(const char *path, size_t len, const char *prefix)
{
	size_t	plen = strlen(prefix);

	/* Case-insensitive: a case-folding checkout must not open a way round the rule. */
	if (len >= plen && strncasecmp(path, prefix, plen) == 0)
		return 1;
	if (len < plen && strncasecmp(path, prefix, len) == 0 && prefix[len] == '/')
		return 1;
	return 0;
}

/* Look at one record of diff-tree's output: a commit id or a changed path. */
static int
githook_scan_cb(const char *rec, size_t len, void *arg)
{
	struct githook_scan	*s = arg;
	size_t			 i;

	if ((len == 40 || len == 64) && valid_hex_lower(rec, len))
		memcpy(s->commit, rec, len + 1);	/* probably a commit: remember it */
	for (i = 0; i < s->ctx->deny.n; i++) {
		if (!githook_path_denied(rec, len, s->ctx->deny.v[i]))
			continue;
		s->refused = 1;
		gitmsg_say("refusing push: commit %.12s changes '%s', and changes under "
		    "'%s' may not be pushed through shimbridge (policy). Remove that change "
		    "from your commits (for example with git rebase -i) and push again; "
		    "a person has to make such changes.", s->commit, rec, s->ctx->deny.v[i]);
		if (++s->found == GITHOOK_SHOW_MAX) {
			gitmsg_say("(not looking for more such changes)");
			return -1;
		}
		break;
	}
	return 0;
}

/*
 * Refuse changes to denied paths in the commits this push adds: every commit
 * reachable from a new tip but from no existing ref (the mirror's refs: upstream's
 * as of the mirror's last fetch, plus what was pushed through it since, all of it
 * checked or made upstream). Each is compared with its parent; a merge
 * with all its parents (diff-tree -c), so merging upstream work that touched a
 * denied path is fine while a merge that edits one itself is not.
 */
static int
githook_check_paths(const struct gitctx *ctx, const char *gitdir, struct githook_item *items,
    size_t n)
{
	const char		**revlist;
	const char		 *difftree[] = { gitdir, "diff-tree", "--stdin", "-r", "-z", "-c",
				     "--root", "--name-only", "--no-renames", "--no-ext-diff",
				     "--no-textconv", NULL };
	struct gitproc		  rl = { -1, -1, -1 }, dt = { -1, -1, -1 };
	struct githook_scan	  scan;
	struct gitbuf		  err;
	char			 *cause = NULL;
	size_t			  i, k = 0;
	char			 *summary;
	int			  p[2] = { -1, -1 }, e[2] = { -1, -1 }, rc = -1, st1, st2, r;

	memset(&scan, 0, sizeof scan);
	scan.ctx = ctx;
	strcpy_checked(scan.commit, sizeof scan.commit, "(unknown)");
	gitbuf_init(&err, GITRUN_ERR_MAX);

	revlist = xcalloc(n + 8, sizeof *revlist);
	revlist[k++] = gitdir;
	revlist[k++] = "rev-list";
	for (i = 0; i < n; i++) {
		if (!items[i].delete)
			revlist[k++] = items[i].u.new;
	}
	if (k == 2) {
		rc = 0;		/* only deletions */
		goto out;
	}
	revlist[k++] = "--not";
	revlist[k++] = "--all";
	revlist[k++] = "--";
	revlist[k] = NULL;

	/* rev-list | diff-tree; both write errors into one pipe we read with the output. */
	if (util_pipe(p, 0) == -1 || util_pipe(e, 0) == -1) {
		xasprintf(&cause, "pipe: %s", strerror(errno));
		goto out;
	}
	if (gitrun_start(ctx, GITRUN_QUARANTINE | GITRUN_READONLY, revlist, GITRUN_NULL, p[1],
	    e[1], &rl, &cause) != 0)
		goto out;
	close(p[1]);
	p[1] = -1;
	if (gitrun_start(ctx, GITRUN_QUARANTINE | GITRUN_READONLY, difftree, p[0], GITRUN_PIPE,
	    e[1], &dt, &cause) != 0)
		goto out;
	close(p[0]);
	p[0] = -1;
	close(e[1]);
	e[1] = -1;
	dt.err = e[0];
	e[0] = -1;	/* transferred: gitrun_read() and gitrun_abort() close it */

	r = gitrun_read(&dt, '\0', githook_scan_cb, &scan, &err, &cause);
	if (r != 0)
		goto out;	/* stopped after GITHOOK_SHOW_MAX findings, or failed */
	st2 = gitrun_wait(dt.pid, &cause);
	dt.pid = -1;
	st1 = gitrun_wait(rl.pid, &cause);
	rl.pid = -1;
	if (st1 != 0 || st2 != 0) {
		if (cause == NULL) {
			summary = gitmsg_summary(gitbuf_str(&err), 300);
			xasprintf(&cause, "git rev-list/diff-tree failed: %s", summary);
			free(summary);
		}
		goto out;
	}
	rc = scan.refused ? -1 : 0;

out:
	if (cause != NULL) {
		gitmsg_say("refusing push: cannot inspect the pushed commits (%s)", cause);
		free(cause);
	}
	for (i = 0; i < 2; i++) {
		if (p[i] != -1)
			close(p[i]);
		if (e[i] != -1)
			close(e[i]);
	}
	gitrun_abort(&dt);
	gitrun_abort(&rl);
	gitbuf_free(&err);
	free(revlist);
	return rc;
}

/*
 * Upstream's heads and tags asked of upstream itself, as "<oid> <ref>" lines in out
 * (a protocol v0 ls-remote: its one request also tells the bridge upstream's default
 * branch, which the bridge's own push check needs). For when the bridge has no list.
 */
static int
githook_ls_remote(const struct gitctx *ctx, const char *gitdir, struct gitbuf *out)
{
	const char	*args[] = { gitdir, "-c", "protocol.version=0", "ls-remote", "--refs",
			    ctx->upstream, NULL };
	struct gitbuf	 raw;
	char		*cause = NULL, *line, *next, *tab;
	int		 rc = -1;

	gitbuf_init(&raw, GITC_REFS_MAX);
	if (gitrun_cmd(ctx, GITRUN_CRED, args, &raw, NULL, &cause) != 0 || raw.dropped > 0)
		goto out;
	for (line = raw.data; line != NULL && *line != '\0'; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if ((tab = strchr(line, '\t')) == NULL)
			continue;
		*tab = ' ';
		if (strncmp(tab + 1, "refs/heads/", 11) != 0 &&
		    strncmp(tab + 1, "refs/tags/", 10) != 0)
			continue;
		if (gitbuf_add(out, line, strlen(line)) != 0 || gitbuf_add(out, "\n", 1) != 0)
			goto out;
	}
	rc = 0;
out:
	free(cause);
	gitbuf_free(&raw);
	return rc;
}

/* strcmp for bsearch(3) over an array of strings. */
static int
githook_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The oid upstream's list gives ref ("<oid> <ref>" lines), or NULL if it has none. */
static char *
githook_upstream_oid(char **lines, size_t n, const char *ref)
{
	const char	*sp;
	size_t		 i;

	for (i = 0; i < n; i++) {
		if ((sp = strchr(lines[i], ' ')) != NULL && strcmp(sp + 1, ref) == 0)
			return xstrndup(lines[i], sp - lines[i]);
	}
	return NULL;
}

/*
 * Whether every update starts from upstream's value of its ref. A push does not
 * refresh the mirror first (gitserve/main.c), so the sandbox may have pushed on top
 * of a value upstream has since left: someone else pushed, created or deleted the
 * ref. Upstream would refuse such an update anyway (githook_push leases each ref at
 * the value the sandbox saw); this says why, in the sandbox's terms, before
 * anything is sent. Upstream's refs come from the bridge's list, taken as the call
 * began, or, when it has none, from upstream itself. 0 if all start right (or
 * upstream cannot be asked: its own check decides), else -1 after saying why.
 */
static int
githook_check_upstream(const struct gitctx *ctx, const char *gitdir,
    const struct githook_item *items, size_t n, struct githook_upstream *up)
{
	struct gitbuf	*msg = &up->msg;
	char		**lines = NULL, *have;
	const char	 *what;
	size_t		  nlines = 0, i;
	int		  rc = 0;

	if (gitmirror_upstream_refs(ctx, msg, &lines, &nlines) == 0)
		up->bridge = 1;
	else {
		gitbuf_free(msg);
		gitbuf_init(msg, GITC_REFS_MAX);
		if (githook_ls_remote(ctx, gitdir, msg) != 0)
			goto out;
		nlines = gitmirror_split_lines(msg->data != NULL ? msg->data : (char *)"", &lines);
	}
	for (i = 0; i < n; i++) {
		have = githook_upstream_oid(lines, nlines, items[i].u.ref);
		what = items[i].branch ? "branch" : "tag";
		if (have == NULL && items[i].delete) {
			gitmsg_say("refusing push: %s '%s' is already gone upstream (it was "
			    "deleted after this repository last fetched). Run git fetch --prune.",
			    what, githook_short(items[i].u.ref));
			rc = -1;
		} else if (have == NULL && !items[i].create) {
			gitmsg_say("refusing push: %s '%s' no longer exists upstream (it was "
			    "deleted after this repository last fetched). Run git fetch --prune, "
			    "then push it as a new %s if it should exist.", what,
			    githook_short(items[i].u.ref), what);
			rc = -1;
		} else if (have != NULL && items[i].create) {
			gitmsg_say("refusing push: %s '%s' already exists upstream (it was "
			    "created after this repository last fetched). Run git fetch and look "
			    "at origin's %s before pushing to it, or push under another name.",
			    what, githook_short(items[i].u.ref), what);
			rc = -1;
		} else if (have != NULL && strcmp(have, items[i].u.old) != 0) {
			gitmsg_say("refusing push: upstream's %s '%s' has moved since this "
			    "repository last fetched (someone else pushed to it). Run git fetch, "
			    "integrate upstream's changes (git pull --rebase) and push again, or "
			    "push to a new branch and open a pull request.", what,
			    githook_short(items[i].u.ref));
			rc = -1;
		}
		free(have);
	}
out:
	up->lines = lines;
	up->n = nlines;
	return rc;
}

/*
 * Keep the mirror warm: while the push goes upstream, fetch into the mirror the
 * heads and tags upstream moved since its last fetch (the bridge's list against
 * the mirror's refs), except those this push updates, so that the sandbox's next
 * fetch finds the mirror fresh instead of paying for the refresh the push skipped.
 * Its ref list is the bridge's prefetched one (the injector hands it over), so
 * only the pack, if any, is asked of upstream. The fetch never writes a ref this
 * push updates; when the push is done it is left to serve() (main.c), which waits
 * for it after the sandbox has its answer, or else waited for here. Best effort: a
 * fetch that fails, or takes longer than GS_WARM_MS after the push,
 * changes nothing (git fetch --atomic), and the next fetch refreshes the mirror.
 * Returns 0 with *gp running, or -1 when there is nothing to fetch.
 */
static int
githook_warm_start(const struct gitctx *ctx, const char *gitdir,
    const struct githook_item *items, size_t n, const struct githook_upstream *up,
    char **have, size_t nhave, struct gitproc *gp)
{
	const char	**args = NULL;
	char		**owned = NULL, **want = NULL, *cause = NULL;
	const char	 *ref;
	size_t		  i, j, k = 0, o = 0;
	int		  rc = -1, pushed;

	gp->pid = -1;
	if (!up->bridge || up->n == 0 || have == NULL)
		return -1;
	want = xcalloc(up->n + 1, sizeof *want);
	args = xcalloc(up->n + 16, sizeof *args);
	owned = xcalloc(up->n + 1, sizeof *owned);
	args[k++] = gitdir;
	args[k++] = "-c";
	args[k++] = "protocol.version=0";
	args[k++] = "fetch";
	args[k++] = "--quiet";
	args[k++] = "--no-progress";
	args[k++] = "--atomic";
	args[k++] = "--no-tags";
	args[k++] = "--no-write-fetch-head";
	args[k++] = "--no-auto-gc";
	args[k++] = "--no-recurse-submodules";
	args[k++] = "--no-show-forced-updates";
	args[k++] = ctx->upstream;
	for (i = 0; i < up->n; i++) {
		/* Both lists are sorted "<oid> <ref>" lines: a line the mirror has is current. */
		if (bsearch(&up->lines[i], have, nhave, sizeof *have, githook_cmp) != NULL ||
		    (ref = strchr(up->lines[i], ' ')) == NULL)
			continue;
		ref++;
		for (pushed = 0, j = 0; !pushed && j < n; j++)
			pushed = strcmp(items[j].u.ref, ref) == 0;
		if (pushed)
			continue;
		want[o] = up->lines[i];
		xasprintf(&owned[o], "+%s:%s", ref, ref);
		args[k++] = owned[o++];
	}
	args[k] = NULL;
	if (o == 0)
		goto out;
	/* One request of our own where it can be (gitpush.c), else git fetch. */
	if (gitpush_warm(ctx, gitdir, want, o, have, nhave, &gp->pid) == 0) {
		rc = 0;
		goto out;
	}
	if (gitrun_start(ctx, GITRUN_CRED | GITRUN_NICE, args, GITRUN_NULL, GITRUN_NULL, GITRUN_NULL, gp,
	    &cause) != 0) {
		gp->pid = -1;
		goto out;
	}
	rc = 0;
out:
	for (i = 0; i < o; i++)
		free(owned[i]);
	free(owned);
	free(want);
	free(args);
	free(cause);
	return rc;
}

/* Wait for the warming fetch at most ms milliseconds, then stop it. */
static void
githook_warm_finish(struct gitproc *gp, int ms)
{
	if (gp->pid <= 0)
		return;
	(void)gitrun_wait_ms(gp->pid, ms);
	gp->pid = -1;
}

/* Keep a rendered copy of each rejected ref in upstream's porcelain report. */
static int
githook_report_cb(const char *rec, size_t len, void *arg)
{
	struct githook_report	*r = arg;
	const char		*colon, *tab2, *summary, *rb;
	char			*dst, *line;

	(void)len;
	/* "<flag>\t<from>:<to>\t<summary>" where summary is "[what] (why)" or "a..b". */
	if (rec[0] != '!' || rec[1] != '\t')
		return 0;
	tab2 = strchr(rec + 2, '\t');
	if (tab2 == NULL)
		return 0;
	colon = memchr(rec + 2, ':', tab2 - (rec + 2));
	if (colon == NULL)
		return 0;
	dst = xstrndup(colon + 1, tab2 - (colon + 1));
	summary = tab2 + 1;
	rb = summary[0] == '[' ? strchr(summary, ']') : NULL;
	if (rb != NULL)
		xasprintf(&line, "! %.*s %s%s\n", (int)(rb + 1 - summary), summary,
		    githook_short(dst), rb + 1);
	else
		xasprintf(&line, "! %s %s\n", githook_short(dst), summary);
	gitbuf_add(&r->rejected, line, strlen(line));
	free(line);
	free(dst);
	return 0;
}

/* Relay upstream's "remote:" lines (its hook output, hints) after a push. */
static void
githook_relay_remote(const char *err, int all)
{
	struct gitmsg_lines	 l;
	char			*copy, *line, *next;
	const char		*text;

	gitmsg_lines_init(&l);
	copy = xstrdup(err);
	for (line = copy; line != NULL; line = next) {
		if ((next = strpbrk(line, "\r\n")) != NULL)
			*next++ = '\0';
		if (strncmp(line, "remote:", 7) == 0) {
			text = line + 7 + strspn(line + 7, " ");
			if (*text != '\0')
				gitmsg_lines_add(&l, "upstream: ", text, strlen(text));
		} else if (all && *line != '\0' && strncmp(line, "To ", 3) != 0 &&
		    strncmp(line, "hint:", 5) != 0 &&
		    strncmp(line, "error: failed to push some refs", 31) != 0)
			gitmsg_lines_add(&l, "  ", line, strlen(line));
	}
	gitmsg_lines_say(&l);
	gitcred_wipe(copy, strlen(err));
	free(copy);
}

/* Upstream's band-2 words as git push shows them ("remote: " before each line). */
static void
githook_relay_band2(const struct gitbuf *remote, int all)
{
	struct gitbuf	 out;
	const char	*p = gitbuf_str(remote), *end = p + remote->len, *eol;

	gitbuf_init(&out, 2 * GITPUSH_RESULT_MAX);
	for (; p < end; p = eol + 1) {
		for (eol = p; eol < end && *eol != '\n' && *eol != '\r'; eol++)
			;
		if (eol > p && (gitbuf_add(&out, "remote: ", 8) != 0 ||
		    gitbuf_add(&out, p, eol - p) != 0 || gitbuf_add(&out, "\n", 1) != 0))
			break;
	}
	githook_relay_remote(gitbuf_str(&out), all);
	gitcred_wipe(out.data, out.len);
	gitbuf_free(&out);
}

/*
 * Say what came of our own push request (gitpush_http returned r; failed: it set a
 * cause, said by the caller): upstream's words, and on a refusal each refused ref
 * as git push's porcelain would show it. Returns 0 if upstream took every update.
 */
static int
githook_http_said(const struct gitpush_result *res, int r, int failed)
{
	struct gitbuf	 rej;
	char		*copy, *line, *next, *sp, *s;

	if (r == 0) {
		githook_relay_band2(&res->remote, 0);
		return 0;
	}
	if (failed && !res->unpack_seen && res->fatal.len == 0)
		return -1;
	gitbuf_init(&rej, GITRUN_OUT_MAX);
	if (res->fatal.len > 0) {
		s = gitmsg_clean(res->fatal.data, res->fatal.len);
		gitbuf_add(&rej, "! upstream gave up: ", 20);
		gitbuf_add(&rej, s, strlen(s));
		gitbuf_add(&rej, "\n", 1);
		free(s);
	} else if (!res->unpack_ok) {
		gitbuf_add(&rej, "! upstream could not take the pack: ", 36);
		gitbuf_add(&rej, gitbuf_str(&res->unpack), res->unpack.len);
		gitbuf_add(&rej, "\n", 1);
	}
	copy = xstrdup(gitbuf_str(&res->ngs));
	for (line = copy; *line != '\0'; line = next) {
		next = strchr(line, '\n');
		*next++ = '\0';
		if ((sp = strchr(line, ' ')) != NULL)
			*sp++ = '\0';
		xasprintf(&s, "! [remote rejected] %s (%s)\n", githook_short(line),
		    sp != NULL ? sp : "refused");
		gitbuf_add(&rej, s, strlen(s));
		free(s);
	}
	free(copy);
	gitmsg_say("upstream refused the push, so nothing was changed (not here either). "
	    "Upstream said:");
	gitmsg_relay("  ", gitbuf_str(&rej), rej.len);
	githook_relay_band2(&res->remote, 1);
	gitmsg_say("Fetch, integrate upstream's changes and push again, or push to a new "
	    "branch and open a pull request.");
	gitbuf_free(&rej);
	return -1;
}

/* Push every update upstream in one atomic push; 0 if upstream took them all. */
static int
githook_push(const struct gitctx *ctx, const char *gitdir, struct githook_item *items, size_t n,
    char **have, size_t nhave)
{
	const char		**args;
	char			**owned;
	struct gitproc		  gp;
	struct gitpush_update	 *gu;
	struct gitpush_result	  res;
	struct githook_report	  rep;
	struct gitbuf		  err;
	struct gitmsg_progress	  prog;
	char			 *cause = NULL;
	size_t			  i, k = 0, o = 0;
	int			  status = -1, r;

	/* Without a credential to redact with, upstream's words go to the bridge. */
	if (ctx->token == NULL && ctx->refusal_fd != -1)
		gitmsg_divert(ctx->refusal_fd);
	args = xcalloc(2 * n + 16, sizeof *args);
	owned = xcalloc(2 * n + 1, sizeof *owned);
	gitbuf_init(&rep.rejected, GITRUN_OUT_MAX);
	gitbuf_init(&err, GITRUN_ERR_MAX);

	/* One request of our own where it can be (gitpush.c), else git push. */
	gu = xcalloc(n, sizeof *gu);
	for (i = 0; i < n; i++) {
		gu[i].old = items[i].u.old;
		gu[i].new = items[i].u.new;
		gu[i].ref = items[i].u.ref;
	}
	gitpush_result_init(&res);
	r = gitpush_http(ctx, gitdir, gu, n, have, nhave, &res, &err, &cause);
	free(gu);
	if (r != GITPUSH_FALLBACK) {
		status = githook_http_said(&res, r, cause != NULL);
		gitpush_result_free(&res);
		goto out;
	}
	gitpush_result_free(&res);
	gitbuf_free(&err);
	gitbuf_init(&err, GITRUN_ERR_MAX);

	args[k++] = gitdir;
	args[k++] = "push";
	args[k++] = "--atomic";
	args[k++] = "--porcelain";
	args[k++] = "--no-verify";
	args[k++] = "--recurse-submodules=no";
	args[k++] = ctx->progress ? "--progress" : "--no-progress";
	/* Each ref must still be what the sandbox saw, or upstream moved under us. */
	for (i = 0; i < n; i++) {
		xasprintf(&owned[o], "--force-with-lease=%s:%s", items[i].u.ref,
		    items[i].create ? "" : items[i].u.old);
		args[k++] = owned[o++];
	}
	args[k++] = ctx->upstream;
	for (i = 0; i < n; i++) {
		if (items[i].delete)
			xasprintf(&owned[o], ":%s", items[i].u.ref);
		else
			xasprintf(&owned[o], "%s%s:%s", items[i].force ? "+" : "",
			    items[i].u.new, items[i].u.ref);
		args[k++] = owned[o++];
	}
	args[k] = NULL;

	if (gitrun_start(ctx, GITRUN_CRED | GITRUN_QUARANTINE, args, GITRUN_NULL, GITRUN_PIPE,
	    GITRUN_PIPE, &gp, &cause) != 0)
		goto out;
	gitmsg_progress_init(&prog, ctx->progress, &err);
	r = gitrun_read_err(&gp, '\n', githook_report_cb, &rep, gitmsg_progress_feed, &prog,
	    &cause);
	gitmsg_progress_done(&prog);
	if (r != 0) {
		gitrun_abort(&gp);
		goto out;
	}
	status = gitrun_wait(gp.pid, &cause);
	if (status == 0) {
		githook_relay_remote(gitbuf_str(&err), 0);
		goto out;
	}
	if (status > 0) {
		gitmsg_say("upstream refused the push, so nothing was changed (not here "
		    "either). Upstream said:");
		gitmsg_relay("  ", rep.rejected.data == NULL ? "" : rep.rejected.data,
		    rep.rejected.len);
		githook_relay_remote(gitbuf_str(&err), 1);
		gitmsg_say("Fetch, integrate upstream's changes and push again, or push to "
		    "a new branch and open a pull request.");
	}

out:
	if (cause != NULL) {
		gitmsg_say("push to upstream failed: %s", cause);
		free(cause);
	}
	gitmsg_divert(-1);
	for (i = 0; i < o; i++)
		free(owned[i]);
	free(owned);
	free(args);
	gitbuf_free(&rep.rejected);
	gitbuf_free(&err);
	return status == 0 ? 0 : -1;
}

/* The word of an "A" record for an update (common/gitcontract.h). */
static const char *
githook_ask_kind(const struct githook_item *it)
{
	if (it->delete)
		return GITC_ASK_DELETE;
	if (it->create)
		return GITC_ASK_CREATE;
	return it->force ? GITC_ASK_FORCE : GITC_ASK_UPDATE;
}

/* Write all of buf to fd; 0 or -1. */
static int
githook_write_all(int fd, const char *buf, size_t len)
{
	ssize_t	n;
	size_t	off = 0;

	while (off < len) {
		n = write(fd, buf + off, len - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

/*
 * Read the bridge's one-line answer to a question into ans (at most max bytes
 * with the newline, which is removed); 0, or -1 on EOF, an error or no newline.
 */
static int
githook_read_answer(int fd, char *ans, size_t max)
{
	size_t	len = 0;
	ssize_t	n;
	char	c;

	/* One byte at a time: nothing after the line is ours to take. */
	while (len < max) {
		n = read(fd, &c, 1);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		if (c == '\n') {
			ans[len] = '\0';
			return 0;
		}
		ans[len++] = c;
	}
	return -1;
}

/*
 * The updates the policy allows that name a branch of the ask list wait for the
 * operator (GITC_ENV_ASK): "A" records and "W" on the refusal channel, then the
 * bridge's answer. 0 when nothing asks or the push is approved; -1 after saying
 * why not. The bridge holds the call's time limit meanwhile; we wait as long as it
 * takes (EOF, when the bridge or the call is gone, is a refusal).
 */
static int
githook_ask(const struct gitctx *ctx, const struct githook_item *items, size_t n)
{
	struct gitbuf	 q;
	struct stat	 sb;
	char		*rec, ans[GITC_ANSWER_MAX + 3];
	size_t		 i, asks = 0;
	int		 rc = -1, len;

	gitbuf_init(&q, (size_t)GITC_ASK_REFS_MAX * GITC_ASK_LINE_MAX + 8);
	for (i = 0; i < n; i++) {
		if (!items[i].branch || !gitenv_branch_asks(ctx, githook_short(items[i].u.ref)))
			continue;
		if (++asks > GITC_ASK_REFS_MAX) {
			gitmsg_say("refusing push: it updates more than %d branches that need the "
			    "operator's approval; push them in smaller groups.", GITC_ASK_REFS_MAX);
			goto out;
		}
		len = xasprintf(&rec, "A %s %s %s %s\n", githook_ask_kind(&items[i]),
		    items[i].u.old, items[i].u.new, items[i].u.ref);
		if (len > GITC_ASK_LINE_MAX) {
			gitmsg_say("refusing push: the branch name %.80s... is too long to ask the "
			    "operator about; use a shorter one.", githook_short(items[i].u.ref));
			free(rec);
			goto out;
		}
		gitbuf_add(&q, rec, (size_t)len);
		free(rec);
	}
	if (asks == 0) {
		rc = 0;
		goto out;
	}
	if (ctx->refusal_fd == -1 || fstat(ctx->refusal_fd, &sb) != 0 || !S_ISSOCK(sb.st_mode)) {
		gitmsg_say("refusing push: it updates a branch that needs the operator's "
		    "approval (git.ask_branches), and there is no bridge here to ask.");
		goto out;
	}
	gitbuf_add(&q, "W\n", 2);
	if (githook_write_all(ctx->refusal_fd, gitbuf_str(&q), q.len) != 0 ||
	    githook_read_answer(ctx->refusal_fd, ans, sizeof ans - 1) != 0) {
		gitmsg_say("refusing push: the bridge gave no answer about the operator's "
		    "approval, which counts as a refusal.");
		goto out;
	}
	if (strcmp(ans, "Y") == 0) {
		gitmsg_phase(ctx, GITC_PHASE_APPROVED);
		rc = 0;
	} else if (strncmp(ans, "N ", 2) == 0)
		gitmsg_say("refusing push: %s.", ans + 2);
	else
		gitmsg_say("refusing push: the bridge's answer about approval was not "
		    "understood, which counts as a refusal.");

out:
	gitbuf_free(&q);
	return rc;
}

/* Read and parse the hook's stdin. */
static int
githook_read_updates(struct githook_item **itemsp, size_t *np, char **cause)
{
	struct gitbuf		 in;
	struct githook_item	*items = NULL;
	size_t			 n = 0, i;
	char			*p, *end, *eol;
	int			 rc = -1;

	gitbuf_init(&in, (size_t)GITHOOK_REFS_MAX * (GITHOOK_LINE_MAX + 1));
	if (gitbuf_read_fd(&in, STDIN_FILENO, cause) != 0)
		goto out;
	p = in.data;
	end = p + in.len;
	while (p != NULL && p < end) {
		if ((eol = memchr(p, '\n', end - p)) == NULL)
			eol = end;
		if (eol == p) {
			p = eol + 1;
			continue;
		}
		if (n == GITHOOK_REFS_MAX) {
			xasprintf(cause, "more than %d ref updates in one push; push fewer "
			    "refs at a time", GITHOOK_REFS_MAX);
			goto out;
		}
		items = xreallocarray(items, n + 1, sizeof *items);
		memset(&items[n], 0, sizeof items[n]);
		if (githook_parse_line(p, eol - p, &items[n].u, cause) != 0)
			goto out;
		n++;
		p = eol + 1;
	}
	if (n == 0) {
		xasprintf(cause, "no ref updates");
		goto out;
	}
	*itemsp = items;
	*np = n;
	items = NULL;	/* transferred */
	n = 0;
	rc = 0;

out:
	for (i = 0; i < n; i++)
		githook_free_update(&items[i].u);
	free(items);
	gitbuf_free(&in);
	return rc;
}

/* The "hook pre-receive" mode. */
int
githook_pre_receive(int argc, char **argv)
{
	struct gitctx		 ctx;
	struct githook_item	*items = NULL;
	struct githook_upstream	 up;
	struct gitproc		 warm = { -1, -1, -1 };
	struct gitbuf		 own;
	char			*cause = NULL, *gitdir = NULL, **have = NULL;
	size_t			 n = 0, i, nhave = 0;
	int			 rc = GS_EXIT_REFUSED, bad = 0;

	memset(&ctx, 0, sizeof ctx);
	memset(&up, 0, sizeof up);
	gitbuf_init(&up.msg, GITC_REFS_MAX);
	gitbuf_init(&own, GITRUN_OUT_MAX);
	if (argc != 3 || strcmp(argv[2], "pre-receive") != 0) {
		fprintf(stderr, "usage: shimbridge-git hook pre-receive\n");
		return GS_EXIT_USAGE;
	}
	if (gitenv_load(&ctx, GITENV_MIRROR | GITENV_UPSTREAM | GITENV_CRED | GITENV_POLICY |
	    GITENV_GIT | GITENV_RELAY, &cause) != 0)
		goto out;
	gitmsg_phase(&ctx, GITC_PHASE_HOOK);
	if (chdir("/") != 0) {
		xasprintf(&cause, "chdir /: %s", strerror(errno));
		goto out;
	}
	if (githook_read_updates(&items, &n, &cause) != 0)
		goto out;
	xasprintf(&gitdir, "--git-dir=%s", ctx.mirror);

	for (i = 0; i < n; i++) {
		if (githook_check_ref(&ctx, gitdir, &items[i]) != 0)
			bad = 1;
	}
	if (!bad && ctx.deny.n > 0 && githook_check_paths(&ctx, gitdir, items, n) != 0)
		bad = 1;
	if (bad) {
		gitmsg_say("nothing was pushed upstream.");
		gitmsg_record_refusal(&ctx);
		goto out;
	}
	gitmsg_phase(&ctx, GITC_PHASE_POLICY);
	if (githook_check_upstream(&ctx, gitdir, items, n, &up) != 0) {
		gitmsg_say("nothing was pushed upstream.");
		goto out;
	}
	if (githook_ask(&ctx, items, n) != 0) {
		gitmsg_say("nothing was pushed upstream.");
		gitmsg_record_refusal(&ctx);
		goto out;
	}
	/* The mirror's refs: what the warming fetch and the push's pack can leave out. */
	if ((up.bridge || ctx.token == NULL) &&
	    gitmirror_own_refs(&ctx, &own, &have, &nhave) != 0) {
		free(have);
		have = NULL;
		nhave = 0;
	}
	(void)githook_warm_start(&ctx, gitdir, items, n, &up, have, nhave, &warm);
	if (githook_push(&ctx, gitdir, items, n, have, nhave) != 0)
		goto out;
	gitmsg_phase(&ctx, GITC_PHASE_UPSTREAM);
	/*
	 * The push is done. When serve() adopts our orphans (gitrun_adopt_orphans), the
	 * warming fetch is left to it: it answers the sandbox first, then waits for the
	 * fetch, still under the mirror's lock. Else we wait here, as before the answer.
	 */
	if (warm.pid > 0 && ctx.adopts && gitmirror_warm_save(&ctx, warm.pid) == 0) {
		warm.pid = -1;
	} else
		githook_warm_finish(&warm, GS_WARM_MS);
	rc = GS_EXIT_OK;

out:
	githook_warm_finish(&warm, 0);
	free(have);
	gitbuf_free(&own);
	free(up.lines);
	gitbuf_free(&up.msg);
	if (cause != NULL) {
		gitmsg_say("refusing push: %s", cause);
		free(cause);
	}
	for (i = 0; i < n; i++)
		githook_free_update(&items[i].u);
	free(items);
	free(gitdir);
	gitenv_free(&ctx);
	return rc;
}
