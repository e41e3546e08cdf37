/*
 * The environment contract. The bridge gives us only SHIMBRIDGE_* variables plus
 * HOME, PATH and LANG; we validate what a mode needs and build every host git's
 * environment from nothing, so nothing configures git behind our back.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "gitserve.h"

#define GITENV_MAX_ITEMS	256

/* Whether s contains a byte below 0x20 or DEL. */
static int
gitenv_has_control(const char *s)
{
	for (; *s != '\0'; s++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	}
	return 0;
}

/* Fetch a variable that must be present and non-empty. */
static int
gitenv_need(const char *name, const char **value, char **cause)
{
	*value = getenv(name);
	if (*value == NULL || **value == '\0') {
		xasprintf(cause, "%s is not set", name);
		return -1;
	}
	return 0;
}

/* Split a comma-separated list into trimmed, non-empty items. */
int
gitenv_split(const char *s, char ***items, size_t *n, char **cause)
{
	const char	*p = s, *end, *a, *b;
	char	       **v = NULL;
	size_t		 count = 0, i;

	*items = NULL;
	*n = 0;
	while (*p != '\0') {
		end = strchr(p, ',');
		if (end == NULL)
			end = p + strlen(p);
		for (a = p; a < end && (*a == ' ' || *a == '\t'); a++)
			;
		for (b = end; b > a && (b[-1] == ' ' || b[-1] == '\t'); b--)
			;
		if (b > a) {
			if (count == GITENV_MAX_ITEMS) {
				xasprintf(cause, "more than %d items in a list", GITENV_MAX_ITEMS);
				goto fail;
			}
			v = xreallocarray(v, count + 1, sizeof *v);
			v[count++] = xstrndup(a, b - a);
		}
		p = *end == ',' ? end + 1 : end;
	}
	*items = v;
	*n = count;
	return 0;

fail:
	for (i = 0; i < count; i++)
		free(v[i]);
	free(v);
	return -1;
}

/* Check a branch name (without refs/heads/): plain, nothing a glob could mean. */
static int
gitenv_check_branch(const char *b)
{
	if (*b == '\0' || *b == '-' || strncmp(b, "refs/", 5) == 0 || gitenv_has_control(b))
		return -1;
	if (strpbrk(b, " ~^:?*[\\") != NULL || strstr(b, "..") != NULL)
		return -1;
	return 0;
}

/* Check a tag name or fnmatch(3) pattern (without refs/tags/). */
static int
gitenv_check_tag(const char *t)
{
	if (*t == '\0' || *t == '-' || strncmp(t, "refs/", 5) == 0 || gitenv_has_control(t))
		return -1;
	if (strpbrk(t, " ~^:\\") != NULL || strstr(t, "..") != NULL)
		return -1;
	return 0;
}

/* Load one comma-separated list, dropping prefix from its items and checking each. */
static int
gitenv_load_list(const char *name, const char *prefix, int (*check)(const char *),
    struct gitlist *l, char **cause)
{
	const char	*v;
	char		*tmp;
	size_t		 i, plen = prefix != NULL ? strlen(prefix) : 0;

	v = getenv(name);
	l->raw = xstrdup(v == NULL ? "" : v);
	if (gitenv_split(l->raw, &l->v, &l->n, cause) != 0)
		return -1;
	for (i = 0; i < l->n; i++) {
		if (plen > 0 && strncmp(l->v[i], prefix, plen) == 0) {
			tmp = xstrdup(l->v[i] + plen);
			free(l->v[i]);
			l->v[i] = tmp;
		}
		if (check(l->v[i]) != 0) {
			xasprintf(cause, "%s has an invalid item", name);
			return -1;
		}
	}
	return 0;
}

/* A deny path: no control bytes; a leading '/' is dropped (tree paths have none). */
static int
gitenv_check_path(const char *p)
{
	return gitenv_has_control(p) || p[strspn(p, "/")] == '\0' ? -1 : 0;
}

/* Load the policy lists. */
static int
gitenv_load_policy(struct gitctx *ctx, char **cause)
{
	char	*tmp;
	size_t	 i;

	if (gitenv_load_list(GITC_ENV_NO_PUSH, "refs/heads/", gitenv_check_branch,
	    &ctx->no_push, cause) != 0 ||
	    gitenv_load_list(GITC_ENV_FF_ONLY, "refs/heads/", gitenv_check_branch,
	    &ctx->ff_only, cause) != 0 ||
	    gitenv_load_list(GITC_ENV_TAGS, "refs/tags/", gitenv_check_tag, &ctx->tags,
	    cause) != 0 ||
	    gitenv_load_list(GITC_ENV_DENY_PATHS, NULL, gitenv_check_path, &ctx->deny,
	    cause) != 0 ||
	    gitenv_load_list(GITC_ENV_ASK, "refs/heads/", gitenv_check_tag, &ctx->ask,
	    cause) != 0)
		return -1;
	for (i = 0; i < ctx->deny.n; i++) {
		if (ctx->deny.v[i][0] == '/') {
			tmp = xstrdup(ctx->deny.v[i] + strspn(ctx->deny.v[i], "/"));
			free(ctx->deny.v[i]);
			ctx->deny.v[i] = tmp;
		}
	}
	return 0;
}

/*
 * Take over the bridge's refusal channel: it must be a socket (or, from a bridge
 * that never asks, a pipe), and it is moved above the fds git children get,
 * close-on-exec, so only the hook's receive-pack inherits it.
 */
static int
gitenv_load_refusal(struct gitctx *ctx, char **cause)
{
	const char	*v = getenv(GITC_ENV_REFUSAL_FD);
	struct stat	 sb;
	char		 want[16];

	ctx->refusal_fd = -1;
	if (v == NULL)
		return 0;
	snprintf(want, sizeof want, "%d", GITC_REFUSAL_FD);
	if (strcmp(v, want) != 0) {
		xasprintf(cause, "%s must be %d", GITC_ENV_REFUSAL_FD, GITC_REFUSAL_FD);
		return -1;
	}
	if (fstat(GITC_REFUSAL_FD, &sb) != 0 || (!S_ISSOCK(sb.st_mode) &&
	    !S_ISFIFO(sb.st_mode))) {
		xasprintf(cause, "%s: fd %d is not a socket or pipe", GITC_ENV_REFUSAL_FD,
		    GITC_REFUSAL_FD);
		return -1;
	}
	if ((ctx->refusal_fd = fcntl(GITC_REFUSAL_FD, F_DUPFD_CLOEXEC, 10)) == -1) {
		xasprintf(cause, "refusal fd: %s", strerror(errno));
		return -1;
	}
	close(GITC_REFUSAL_FD);
	return 0;
}

/* Fill ctx from the environment; flags say which parts are required. */
int
gitenv_load(struct gitctx *ctx, int flags, char **cause)
{
	const char	*v;

	memset(ctx, 0, sizeof *ctx);
	ctx->refusal_fd = -1;
	/* A bridge of another contract version could misread what we say, or we it. */
	if ((v = getenv(GITC_ENV_VERSION)) != NULL && (strlen(v) > 9 ||
	    atoi(v) != GITC_VERSION || v[strspn(v, "0123456789")] != '\0')) {
		xasprintf(cause, "%s is %.10s; this shimbridge-git speaks version %d (install "
		    "the bridge and shimbridge-git from the same release)", GITC_ENV_VERSION, v,
		    GITC_VERSION);
		return -1;
	}

	if (flags & GITENV_SERVICE) {
		if (gitenv_need(GITC_ENV_SERVICE, &v, cause) != 0)
			return -1;
		if (strcmp(v, "upload-pack") == 0 || strcmp(v, "git-upload-pack") == 0)
			ctx->service = xstrdup("upload-pack");
		else if (strcmp(v, "receive-pack") == 0 || strcmp(v, "git-receive-pack") == 0)
			ctx->service = xstrdup("receive-pack");
		else {
			xasprintf(cause, "%s must be upload-pack or receive-pack",
			    GITC_ENV_SERVICE);
			return -1;
		}
		v = getenv(GITC_ENV_PROTOCOL);
		if (v != NULL && (strcmp(v, "version=0") == 0 || strcmp(v, "version=1") == 0 ||
		    strcmp(v, "version=2") == 0))
			ctx->protocol = xstrdup(v);
	}

	if (flags & GITENV_MIRROR) {
		if (gitenv_need(GITC_ENV_MIRROR, &v, cause) != 0)
			return -1;
		if (gitmirror_check_path(v, cause) != 0)
			return -1;
		ctx->mirror = xstrdup(v);
	}

	if (flags & GITENV_UPSTREAM) {
		if (gitenv_need(GITC_ENV_UPSTREAM, &v, cause) != 0)
			return -1;
		if (giturl_parse(v, &ctx->url, cause) != 0)
			return -1;
		ctx->upstream = xstrdup(v);
	}

	/*
	 * Both or neither: without them host git gets no credential at all, as when
	 * the upstream is the daemon's loopback injector, which adds it itself.
	 */
	if ((flags & GITENV_CRED) && (getenv(GITC_ENV_TOKEN) != NULL ||
	    getenv(GITC_ENV_USERNAME) != NULL)) {
		if (gitenv_need(GITC_ENV_USERNAME, &v, cause) != 0)
			return -1;
		if (strlen(v) > GITCRED_SECRET_MAX || gitenv_has_control(v)) {
			xasprintf(cause, "%s is invalid", GITC_ENV_USERNAME);
			return -1;
		}
		ctx->username = xstrdup(v);
		if (gitenv_need(GITC_ENV_TOKEN, &v, cause) != 0)
			return -1;
		if (strlen(v) > GITCRED_SECRET_MAX || gitenv_has_control(v)) {
			xasprintf(cause, "%s is invalid", GITC_ENV_TOKEN);
			return -1;
		}
		ctx->token = xstrdup(v);
		gitmsg_init(ctx->token);
	}

	if ((flags & GITENV_POLICY) && gitenv_load_policy(ctx, cause) != 0)
		return -1;

	if (flags & GITENV_RELAY) {
		v = getenv(GITC_ENV_PROGRESS);
		ctx->progress = v != NULL && strcmp(v, "1") == 0;
		v = getenv(GITC_ENV_PHASES);
		ctx->phases = v != NULL && strcmp(v, "1") == 0;
		v = getenv(GITC_ENV_UPSTREAM_REFS);
		if (v != NULL && v[0] == '/' && strlen(v) < 4096)
			ctx->upstream_refs = xstrdup(v);
		if (gitenv_load_refusal(ctx, cause) != 0)
			return -1;
	}

	if (flags & GITENV_GIT) {
		if (gitenv_need(GITC_ENV_GIT, &v, cause) != 0)
			return -1;
		if (v[0] != '/' || gitenv_has_control(v) || access(v, X_OK) != 0) {
			xasprintf(cause, "%s must be the absolute path of an executable",
			    GITC_ENV_GIT);
			return -1;
		}
		ctx->git = xstrdup(v);
		v = getenv("HOME");
		if (v != NULL && v[0] == '/' && !gitenv_has_control(v))
			ctx->home = xstrdup(v);
		v = getenv(GS_ENV_ADOPTS);
		ctx->adopts = v != NULL && strcmp(v, "1") == 0;
		if ((ctx->self = gitrun_self_path(cause)) == NULL)
			return -1;
	}
	return 0;
}

/* Free a list. */
static void
gitenv_free_list(struct gitlist *l)
{
	size_t	i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	free(l->raw);
	memset(l, 0, sizeof *l);
}

/* Release ctx, wiping the credential. */
void
gitenv_free(struct gitctx *ctx)
{
	gitmsg_init(NULL);
	if (ctx->token != NULL) {
		gitcred_wipe(ctx->token, strlen(ctx->token));
		free(ctx->token);
	}
	free(ctx->service);
	free(ctx->mirror);
	free(ctx->upstream);
	giturl_free(&ctx->url);
	free(ctx->username);
	gitenv_free_list(&ctx->no_push);
	gitenv_free_list(&ctx->ff_only);
	gitenv_free_list(&ctx->tags);
	gitenv_free_list(&ctx->ask);
	gitenv_free_list(&ctx->deny);
	if (ctx->refusal_fd != -1)
		close(ctx->refusal_fd);
	free(ctx->git);
	free(ctx->protocol);
	free(ctx->home);
	free(ctx->self);
	free(ctx->upstream_refs);
	memset(ctx, 0, sizeof *ctx);
}

/* Whether name is an item of l. */
int
gitenv_in_list(const struct gitlist *l, const char *name)
{
	size_t	i;

	for (i = 0; i < l->n; i++) {
		if (strcmp(l->v[i], name) == 0)
			return 1;
	}
	return 0;
}

/* Whether refs/tags/<tag> matches a protected tag pattern. */
int
gitenv_tag_protected(const struct gitctx *ctx, const char *tag)
{
	size_t	i;

	for (i = 0; i < ctx->tags.n; i++) {
		if (fnmatch(ctx->tags.v[i], tag, 0) == 0)
			return 1;
	}
	return 0;
}

/* Whether refs/heads/<branch> matches a pattern of the ask list (GITC_ENV_ASK). */
int
gitenv_branch_asks(const struct gitctx *ctx, const char *branch)
{
	size_t	i;

	for (i = 0; i < ctx->ask.n; i++) {
		if (fnmatch(ctx->ask.v[i], branch, 0) == 0)
			return 1;
	}
	return 0;
}

/* Append "name=value" to a NULL-terminated vector. */
static void
gitenv_push(char ***envp, size_t *n, const char *name, const char *value)
{
	*envp = xreallocarray(*envp, *n + 2, sizeof **envp);
	xasprintf(&(*envp)[*n], "%s=%s", name, value);
	(*envp)[++*n] = NULL;
}

/* Whether path (n bytes) names something strictly inside dir. */
static int
gitenv_inside_one(const char *p, size_t n, const char *dir)
{
	size_t	dlen = strlen(dir);

	if (n <= dlen + 1 || strncmp(p, dir, dlen) != 0 || p[dlen] != '/')
		return 0;
	if (memmem(p, n, "/../", 4) != NULL || (n >= 3 && memcmp(p + n - 3, "/..", 3) == 0))
		return 0;
	return 1;
}

/*
 * Whether every ':'-separated element of a path list is inside dir. git writes an element
 * that contains ':' (a host:port directory) in C quotes; mirror paths hold no '"'
 * or '\\' (gitmirror_check_path()), so such an element is "PATH" with nothing to
 * unescape, and it is the only element we accept in that form.
 */
static int
gitenv_inside(const char *list, const char *dir)
{
	size_t		 n = strlen(list);
	const char	*p = list, *end;

	if (n == 0)
		return 0;
	if (list[0] == '"') {
		if (n < 2 || list[n - 1] != '"' || memchr(list + 1, '"', n - 2) != NULL ||
		    strchr(list, '\\') != NULL)
			return 0;
		return gitenv_inside_one(list + 1, n - 2, dir);
	}
	for (;;) {
		end = strchr(p, ':');
		n = end == NULL ? strlen(p) : (size_t)(end - p);
		if (!gitenv_inside_one(p, n, dir))
			return 0;
		if (end == NULL)
			return 1;
		p = end + 1;
	}
}

/* Pass one of receive-pack's quarantine variables through if it points into the mirror. */
static void
gitenv_pass_quarantine(const struct gitctx *ctx, char ***envp, size_t *n, const char *name,
    int islist)
{
	const char	*v = getenv(name);
	int		 ok;

	if (v == NULL || ctx->mirror == NULL || gitenv_has_control(v))
		return;
	if (islist)
		ok = gitenv_inside(v, ctx->mirror);
	else
		ok = gitenv_inside_one(v, strlen(v), ctx->mirror);
	if (ok)
		gitenv_push(envp, n, name, v);
}

/* Build a hardened environment for one git child. */
char **
gitenv_child(const struct gitctx *ctx, int runflags)
{
	char	**envp = NULL;
	size_t	  n = 0;

	envp = xcalloc(1, sizeof *envp);
	gitenv_push(&envp, &n, "PATH", "/usr/bin:/bin");
	gitenv_push(&envp, &n, "HOME", ctx->home != NULL ? ctx->home : "/nonexistent");
	gitenv_push(&envp, &n, "LANG", "C.UTF-8");
	gitenv_push(&envp, &n, "LC_ALL", "C.UTF-8");
	gitenv_push(&envp, &n, "GIT_CONFIG_NOSYSTEM", "1");
	gitenv_push(&envp, &n, "GIT_CONFIG_GLOBAL", "/dev/null");
	gitenv_push(&envp, &n, "GIT_ATTR_NOSYSTEM", "1");
	gitenv_push(&envp, &n, "GIT_TERMINAL_PROMPT", "0");
	gitenv_push(&envp, &n, "GIT_PROTOCOL_FROM_USER", "0");
	gitenv_push(&envp, &n, "GIT_NO_REPLACE_OBJECTS", "1");
	/* A list naming no real protocol allows none: maintenance needs no transport. */
	gitenv_push(&envp, &n, "GIT_ALLOW_PROTOCOL",
	    ctx->url.scheme != NULL ? ctx->url.scheme : "none");
	if (runflags & GITRUN_READONLY)
		gitenv_push(&envp, &n, "GIT_OPTIONAL_LOCKS", "0");
	if ((runflags & GITRUN_PROTOCOL) && ctx->protocol != NULL)
		gitenv_push(&envp, &n, "GIT_PROTOCOL", ctx->protocol);
	if (runflags & (GITRUN_CRED | GITRUN_HOOK)) {
		gitenv_push(&envp, &n, GITC_ENV_UPSTREAM, ctx->upstream);
		if (ctx->token != NULL) {
			gitenv_push(&envp, &n, GITC_ENV_USERNAME, ctx->username);
			gitenv_push(&envp, &n, GITC_ENV_TOKEN, ctx->token);
		}
	}
	if (runflags & GITRUN_HOOK) {
		gitenv_push(&envp, &n, GITC_ENV_MIRROR, ctx->mirror);
		gitenv_push(&envp, &n, GITC_ENV_NO_PUSH, ctx->no_push.raw);
		gitenv_push(&envp, &n, GITC_ENV_FF_ONLY, ctx->ff_only.raw);
		gitenv_push(&envp, &n, GITC_ENV_TAGS, ctx->tags.raw);
		gitenv_push(&envp, &n, GITC_ENV_DENY_PATHS, ctx->deny.raw);
		if (ctx->ask.n > 0)
			gitenv_push(&envp, &n, GITC_ENV_ASK, ctx->ask.raw);
		gitenv_push(&envp, &n, GITC_ENV_GIT, ctx->git);
		if (ctx->progress)
			gitenv_push(&envp, &n, GITC_ENV_PROGRESS, "1");
		if (ctx->phases)
			gitenv_push(&envp, &n, GITC_ENV_PHASES, "1");
		if (ctx->adopts)
			gitenv_push(&envp, &n, GS_ENV_ADOPTS, "1");
		/* A push leaves the bridge's list of upstream's refs to the hook. */
		if (ctx->upstream_refs != NULL)
			gitenv_push(&envp, &n, GITC_ENV_UPSTREAM_REFS, ctx->upstream_refs);
	}
	if ((runflags & GITRUN_REFUSAL) && ctx->refusal_fd != -1) {
		char	num[16];

		snprintf(num, sizeof num, "%d", GITC_REFUSAL_FD);
		gitenv_push(&envp, &n, GITC_ENV_REFUSAL_FD, num);
	}
	if (runflags & GITRUN_QUARANTINE) {
		gitenv_pass_quarantine(ctx, &envp, &n, "GIT_QUARANTINE_PATH", 0);
		gitenv_pass_quarantine(ctx, &envp, &n, "GIT_OBJECT_DIRECTORY", 0);
		gitenv_pass_quarantine(ctx, &envp, &n, "GIT_ALTERNATE_OBJECT_DIRECTORIES", 1);
	}
	return envp;
}

/* Free a child environment, wiping it (it may hold the credential). */
void
gitenv_free_child(char **envp)
{
	char	**p;

	if (envp == NULL)
		return;
	for (p = envp; *p != NULL; p++) {
		gitcred_wipe(*p, strlen(*p));
		free(*p);
	}
	free(envp);
}
