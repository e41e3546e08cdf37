/* The gh profile. */
#include <sys/wait.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "gh.h"
#include "gitop.h"
#include "policy.h"
#include "spawn.h"
#include "util.h"

/* The built-in rules: what a coding agent needs, nothing that prints or manages secrets. */
static const struct {
	int		 allow;
	const char	*argv[4];
	const char	*reason;
} gh_rules[] = {
	{ 0, { "auth", "**" }, "authentication stays on the host; the token is never shown" },
	{ 0, { "config", "**" }, "gh configuration is managed by the operator" },
	{ 0, { "alias", "**" }, "aliases can run arbitrary commands" },
	{ 0, { "extension", "**" }, "extensions run arbitrary programs" },
	{ 0, { "extensions", "**" }, "extensions run arbitrary programs" },
	{ 0, { "codespace", "**" }, "codespaces are out of scope for the sandbox" },
	{ 0, { "cs", "**" }, "codespaces are out of scope for the sandbox" },
	{ 0, { "ssh-key", "**" }, "key management is for the operator" },
	{ 0, { "gpg-key", "**" }, "key management is for the operator" },
	{ 0, { "secret", "**" }, "secrets management is for the operator" },
	{ 0, { "variable", "**" }, "variables management is for the operator" },
	{ 0, { "browse", "**" }, "there is no browser on the bridge" },
	{ 0, { "gist", "**" }, "gists are out of scope for the session's repositories" },
	{ 0, { "pr", "checkout", "**" }, "checkout runs git; use your own git fetch + checkout" },
	{ 0, { "pr", "merge", "**" }, "merging is for a human reviewer" },
	{ 0, { "release", "download", "**" }, "downloads are not relayed" },
	{ 0, { "run", "download", "**" }, "downloads are not relayed" },
	{ 0, { "repo", "create", "**" }, "repository management is for the operator" },
	{ 0, { "repo", "delete", "**" }, "repository management is for the operator" },
	{ 0, { "repo", "fork", "**" }, "repository management is for the operator" },
	{ 0, { "repo", "clone", "**" }, "use git clone, which goes through the bridge" },
	{ 0, { "repo", "edit", "**" }, "repository management is for the operator" },
	{ 0, { "repo", "rename", "**" }, "repository management is for the operator" },
	{ 0, { "repo", "archive", "**" }, "repository management is for the operator" },
	{ 1, { "issue", "list", "**" }, NULL },
	{ 1, { "issue", "view", "**" }, NULL },
	{ 1, { "issue", "create", "**" }, NULL },
	{ 1, { "issue", "comment", "**" }, NULL },
	{ 1, { "issue", "edit", "**" }, NULL },
	{ 1, { "issue", "close", "**" }, NULL },
	{ 1, { "issue", "reopen", "**" }, NULL },
	{ 1, { "issue", "status", "**" }, NULL },
	{ 1, { "pr", "list", "**" }, NULL },
	{ 1, { "pr", "view", "**" }, NULL },
	{ 1, { "pr", "create", "**" }, NULL },
	{ 1, { "pr", "comment", "**" }, NULL },
	{ 1, { "pr", "edit", "**" }, NULL },
	{ 1, { "pr", "close", "**" }, NULL },
	{ 1, { "pr", "reopen", "**" }, NULL },
	{ 1, { "pr", "ready", "**" }, NULL },
	{ 1, { "pr", "diff", "**" }, NULL },
	{ 1, { "pr", "checks", "**" }, NULL },
	{ 1, { "pr", "review", "**" }, NULL },
	{ 1, { "pr", "status", "**" }, NULL },
	{ 1, { "repo", "view", "**" }, NULL },
	{ 1, { "run", "list", "**" }, NULL },
	{ 1, { "run", "view", "**" }, NULL },
	{ 1, { "workflow", "list", "**" }, NULL },
	{ 1, { "workflow", "view", "**" }, NULL },
	{ 1, { "release", "list", "**" }, NULL },
	{ 1, { "release", "view", "**" }, NULL },
	{ 1, { "label", "list", "**" }, NULL },
	{ 1, { "search", "**" }, NULL },
	{ 1, { "api", "**" }, NULL },
	{ 1, { "status", "**" }, NULL },
	{ 1, { "--version" }, NULL },
	{ 1, { "version" }, NULL },
	{ 1, { "help", "**" }, NULL },
	{ 1, { "--help" }, NULL },
};

/* Give a gh tool without rules the built-in set. */
void
gh_default_rules(struct tool *t)
{
	size_t n = sizeof gh_rules / sizeof gh_rules[0], i, k;

	t->rules = xcalloc(n, sizeof *t->rules);
	t->nrules = n;
	if (t->help == NULL)
		t->help = xstrdup("gh issue and pr list/view/create/comment/edit/close/reopen, "
		    "pr diff/checks/review/ready, repo view, run/workflow/release list/view, "
		    "search, and gh api GET on relative paths");
	for (i = 0; i < n; i++) {
		struct rule *r = &t->rules[i];

		r->allow = gh_rules[i].allow;
		for (k = 0; k < 4 && gh_rules[i].argv[k] != NULL; k++)
			;
		r->nargv = k;
		r->argv = xcalloc(k + 1, sizeof *r->argv);
		for (k = 0; k < r->nargv; k++)
			r->argv[k] = xstrdup(gh_rules[i].argv[k]);
		r->reason = gh_rules[i].reason != NULL ? xstrdup(gh_rules[i].reason) : NULL;
		xasprintf(&r->where, "profile gh default rule %zu (%s%s%s)", i,
		    gh_rules[i].argv[0], r->nargv > 1 ? " " : "", r->nargv > 1 ?
		    gh_rules[i].argv[1] : "");
	}
}

/* Whether arg is flag (--name), its --name=value form, or (short) -x / -xVALUE. */
static int
gh_flag(const char *arg, const char *lng, const char *shrt, const char **value)
{
	size_t n;

	*value = NULL;
	if (lng != NULL) {
		n = strlen(lng);
		if (strncmp(arg, lng, n) == 0 && (arg[n] == '\0' || arg[n] == '=')) {
			if (arg[n] == '=')
				*value = arg + n + 1;
			return 1;
		}
	}
	if (shrt != NULL && arg[0] == '-' && arg[1] == shrt[1] && arg[1] != '-') {
		if (arg[2] != '\0')
			*value = arg + 2;
		return 1;
	}
	return 0;
}

/* A repository argument: OWNER/NAME only (a host inside -R is refused). */
static int
gh_repo_arg(const struct session *s, const char *v, char **why)
{
	const char *slash = strchr(v, '/');
	size_t i;

	if (slash == NULL || strchr(slash + 1, '/') != NULL || slash == v || slash[1] == '\0') {
		xasprintf(why, "-R/--repo takes OWNER/REPO without a host; got %.100s", v);
		return -1;
	}
	for (i = 0; v[i] != '\0'; i++) {
		if (!isalnum((unsigned char)v[i]) && strchr("-_./", v[i]) == NULL) {
			xasprintf(why, "-R/--repo value %.100s has characters GitHub does not allow", v);
			return -1;
		}
	}
	if (!config_session_has_repo(s, v)) {
		xasprintf(why, "repository %.100s is not one this session may act on", v);
		return -1;
	}
	return 0;
}

/* Checks for gh api: GET only, relative endpoint, allowed repositories, Accept headers. */
static int
gh_api(const struct session *s, char *const *argv, size_t argc, size_t start, char **why)
{
	static const char *const valued[] = { "-X", "--method", "-H", "--header", "-q", "--jq",
	    "-t", "--template", "-p", "--preview", "--cache", NULL };
	const char *endpoint = NULL, *v;
	size_t i, k;

	for (i = start; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0) {
			if (i + 1 < argc && endpoint == NULL)
				endpoint = argv[i + 1];
			break;
		}
		if (gh_flag(a, "--field", "-F", &v) || gh_flag(a, "--raw-field", "-f", &v) ||
		    gh_flag(a, "--input", NULL, &v)) {
			xasprintf(why, "gh api may only read (GET): %s sends data", a);
			return -1;
		}
		if (gh_flag(a, "--method", "-X", &v)) {
			if (v == NULL && i + 1 < argc)
				v = argv[++i];
			if (v == NULL || strcasecmp(v, "GET") != 0) {
				xasprintf(why, "gh api may only read: method %.20s is refused",
				    v != NULL ? v : "(missing)");
				return -1;
			}
			continue;
		}
		if (gh_flag(a, "--header", "-H", &v)) {
			if (v == NULL && i + 1 < argc)
				v = argv[++i];
			if (v == NULL || strncasecmp(v, "Accept:", 7) != 0) {
				*why = xstrdup("gh api headers other than Accept: are refused");
				return -1;
			}
			continue;
		}
		if (a[0] == '-') {
			for (k = 0; valued[k] != NULL; k++) {
				if (strcmp(a, valued[k]) == 0) {
					i++;	/* skip the flag's value */
					break;
				}
			}
			continue;
		}
		if (endpoint == NULL)
			endpoint = a;
	}
	if (endpoint == NULL) {
		*why = xstrdup("gh api needs an endpoint");
		return -1;
	}
	if (strstr(endpoint, "://") != NULL || strncmp(endpoint, "//", 2) == 0 ||
	    strncasecmp(endpoint, "http:", 5) == 0 || strncasecmp(endpoint, "https:", 6) == 0) {
		*why = xstrdup("gh api takes relative paths only (absolute URLs could send the "
		    "token to another host)");
		return -1;
	}
	if (strcmp(endpoint, "graphql") == 0 || strcmp(endpoint, "/graphql") == 0) {
		*why = xstrdup("gh api graphql can write; use the gh subcommands instead");
		return -1;
	}
	{
		size_t plen = strcspn(endpoint, "?#");

		for (k = 0; k + 1 < plen; k++) {
			if (endpoint[k] == '.' && endpoint[k + 1] == '.') {
				*why = xstrdup("gh api paths may not contain ..");
				return -1;
			}
		}
		if (memchr(endpoint, '%', plen) != NULL || memchr(endpoint, '\\', plen) != NULL) {
			*why = xstrdup("gh api paths may not contain % escapes or backslashes");
			return -1;
		}
	}
	{
		const char *p = endpoint[0] == '/' ? endpoint + 1 : endpoint;

		if (strncmp(p, "repos/", 6) == 0 && p[6] != '{') {
			char repo[256];
			const char *o = p + 6, *sl = strchr(o, '/'), *end;

			if (sl == NULL) {
				*why = xstrdup("gh api repos/ paths must name OWNER/REPO");
				return -1;
			}
			end = sl + 1 + strcspn(sl + 1, "/?#");
			if ((size_t)(end - o) >= sizeof repo) {
				*why = xstrdup("gh api repository path too long");
				return -1;
			}
			memcpy(repo, o, (size_t)(end - o));
			repo[end - o] = '\0';
			if (!config_session_has_repo(s, repo)) {
				xasprintf(why, "repository %.100s is not one this session may act on", repo);
				return -1;
			}
		}
	}
	return 0;
}

/* A branch name safe to pass as --head. */
static int
gh_branch_ok(const char *b)
{
	size_t i;

	if (b == NULL || b[0] == '\0' || b[0] == '-' || strlen(b) > 255 || strstr(b, "..") != NULL)
		return 0;
	for (i = 0; b[i] != '\0'; i++) {
		if (!isalnum((unsigned char)b[i]) && strchr("-_./+", b[i]) == NULL)
			return 0;
	}
	return 1;
}

/*
 * Whether an argument names a host: a whole-argument URL (scheme://, git@, ssh:),
 * or HOST/OWNER/REPO whose first segment looks like a host name (has '.' or ':').
 * gh takes the host from such arguments and sends GH_ENTERPRISE_TOKEN to any host
 * but github.com, so they must name the tool's host and an allowed repository.
 * Returns 0 when the argument names no host or names an allowed one, else -1.
 */
static int
gh_host_arg(const struct session *s, const char *thost, const char *a, char **why)
{
	const char *p, *slash, *end;
	char host[256], repo[256];
	size_t hn;

	/*
	 * A URL is a URL even with spaces after it (Go's parser accepts them in the
	 * path), so only the HOST/OWNER/REPO guess below skips text with blanks.
	 */
	if ((p = strstr(a, "://")) != NULL && p > a && isalpha((unsigned char)a[0]) &&
	    strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-") ==
	    (size_t)(p - a))
		p += 3;	/* scheme://... */
	else if (strncasecmp(a, "git@", 4) == 0)
		p = a + 4;
	else if (strpbrk(a, " \t\n") != NULL)
		return 0;	/* text, not a locator */
	else {
		slash = strchr(a, '/');
		if (slash == NULL || memchr(a, '.', (size_t)(slash - a)) == NULL) {
			if (slash == NULL || memchr(a, ':', (size_t)(slash - a)) == NULL)
				return 0;
		}
		/* HOST/OWNER/REPO[...] needs at least two more segments. */
		if (strchr(slash + 1, '/') == NULL)
			return 0;
		p = a;
	}
	if ((end = strchr(p, '@')) != NULL && end < p + strcspn(p, "/"))
		p = end + 1;	/* user@host */
	hn = strcspn(p, a[0] == 'g' && p == a + 4 ? ":/" : "/");
	if (hn == 0 || hn >= sizeof host) {
		xasprintf(why, "argument %.100s names no usable host", a);
		return -1;
	}
	memcpy(host, p, hn);
	host[hn] = '\0';
	if (strcasecmp(host, thost) != 0) {
		xasprintf(why, "argument %.100s points gh at %s; this bridge only talks to %s",
		    a, host, thost);
		return -1;
	}
	/* The right host: the repository in the path must be allowed too. */
	p += hn + (p[hn] != '\0');
	slash = strchr(p, '/');
	if (slash == NULL) {
		xasprintf(why, "argument %.100s does not name OWNER/REPO", a);
		return -1;
	}
	end = slash + 1 + strcspn(slash + 1, "/?#");
	if ((size_t)(end - p) >= sizeof repo) {
		xasprintf(why, "argument %.100s is too long", a);
		return -1;
	}
	memcpy(repo, p, (size_t)(end - p));
	repo[end - p] = '\0';
	if (strlen(repo) > 4 && strcmp(repo + strlen(repo) - 4, ".git") == 0)
		repo[strlen(repo) - 4] = '\0';
	if (!config_session_has_repo(s, repo)) {
		xasprintf(why, "repository %.100s is not one this session may act on", repo);
		return -1;
	}
	return 0;
}

/* Profile checks and repository context. */
int
gh_policy(const struct config *c, const struct session *s, const struct tool *t,
    char *const *argv, size_t argc, struct policy_ctx *ctx, char **rule, char **why)
{
	static const struct { const char *lng, *shrt, *what; } denied[] = {
		{ "--hostname", NULL, "the host is fixed by the bridge" },
		{ "--web", "-w", "there is no browser on the bridge" },
		{ "--editor", "-e", "there is no editor on the bridge; pass --body or --body-file -" },
		{ "--browser", NULL, "there is no browser on the bridge" },
	};
	const char *words[2] = { NULL, NULL }, *v, *positional = NULL;
	const char *thost = t->host != NULL ? t->host : "github.com";
	size_t i, k, nwords = 0, api_at = 0;
	int have_repo = 0, have_head = 0;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];

		/* gh api endpoints get their own, clearer check (gh_api). */
		if (a[0] != '-' && !(nwords >= 1 && strcmp(words[0], "api") == 0) &&
		    gh_host_arg(s, thost, a, why) != 0) {
			*rule = xstrdup("profile gh: hosts");
			return -1;
		}
		/*
		 * Every argument is checked, "--" included: gh (pflag) takes "--" as the
		 * value of a flag before it and keeps parsing, and takes the word after a
		 * value flag as its value whatever it looks like, so a check that skips
		 * either can be walked around. Refusing a few odd values is the price.
		 */
		for (k = 0; k < sizeof denied / sizeof denied[0]; k++) {
			if (gh_flag(a, denied[k].lng, NULL, &v) ||
			    (denied[k].shrt != NULL && strcmp(a, denied[k].shrt) == 0)) {
				xasprintf(rule, "profile gh: %s", denied[k].lng);
				xasprintf(why, "%s is refused: %s", denied[k].lng, denied[k].what);
				return -1;
			}
		}
		/*
		 * Short flags must stand alone ("-L 10", not "-L10" or "-dw"): pflag reads
		 * "-abc" as a cluster whose letters may hide -w, -e, -X or -R, and which
		 * letters take values depends on the command. Only -R<OWNER/REPO> is
		 * accepted stuck (validated below); negative numbers pass.
		 */
		if (a[0] == '-' && a[1] != '-' && a[1] != '\0' && a[2] != '\0' && a[1] != 'R' &&
		    strspn(a + 1, "0123456789") != strlen(a + 1)) {
			*rule = xstrdup("profile gh: combined flags");
			xasprintf(why, "combined or stuck short flags (%.20s) are refused; write "
			    "each flag and its value separately (-L 10, not -L10)", a);
			return -1;
		}
		if (gh_flag(a, "--repo", "-R", &v)) {
			if (v == NULL && i + 1 < argc)
				v = argv[++i];
			if (v == NULL || gh_repo_arg(s, v, why) != 0) {
				if (*why == NULL)
					*why = xstrdup("-R/--repo needs OWNER/REPO");
				*rule = xstrdup("profile gh: -R/--repo");
				return -1;
			}
			have_repo = 1;
			continue;
		}
		if (nwords == 2 && strcmp(words[0], "pr") == 0 && strcmp(words[1], "create") == 0 &&
		    gh_flag(a, "--head", "-H", &v))
			have_head = 1;
		if (a[0] != '-' && nwords < 2 && (nwords == 0 || strcmp(words[0], "api") != 0)) {
			words[nwords++] = a;
			if (nwords == 1 && strcmp(a, "api") == 0)
				api_at = i + 1;
		} else if (a[0] != '-' && nwords == 2 && positional == NULL)
			positional = a;
	}
	/* gh repo view takes the repository as an argument (it has no -R). */
	if (nwords == 2 && strcmp(words[0], "repo") == 0 && strcmp(words[1], "view") == 0 &&
	    positional != NULL && gh_repo_arg(s, positional, why) != 0) {
		*rule = xstrdup("profile gh: repo view");
		return -1;
	}
	if (nwords >= 1 && strcmp(words[0], "api") == 0 &&
	    gh_api(s, argv, argc, api_at, why) != 0) {
		*rule = xstrdup("profile gh: api");
		return -1;
	}
	if (ctx == NULL)
		return 0;
	if (!have_repo) {
		char *host = NULL, *owner = NULL, *name = NULL;
		const char *uwhy;

		if (ctx->remote_url != NULL &&
		    gitop_parse_url(ctx->remote_url, &host, &owner, &name, &uwhy) == 0) {
			if (config_git_host(c, host) == NULL && strcasecmp(host, thost) != 0) {
				*rule = xstrdup("profile gh: repository context");
				xasprintf(why, "this directory's repository is on %s, which this "
				    "bridge does not serve; use -R OWNER/REPO", host);
				free(host);
				free(owner);
				free(name);
				return -1;
			}
			xasprintf(&ctx->repo, "%s/%s", owner, name);
			if (!config_session_has_repo(s, ctx->repo)) {
				*rule = xstrdup("profile gh: repository context");
				xasprintf(why, "this directory's repository (%s) is not one this "
				    "session may act on", ctx->repo);
				free(host);
				free(owner);
				free(name);
				return -1;
			}
		} else if (s->nrepos == 1)
			ctx->repo = xstrdup(s->repos[0]);
		free(host);
		free(owner);
		free(name);
	}
	if (nwords == 2 && strcmp(words[0], "pr") == 0 && strcmp(words[1], "create") == 0 &&
	    !have_head && gh_branch_ok(ctx->branch)) {
		ctx->head = xstrdup(ctx->branch);
		ctx->extra[ctx->nextra++] = xstrdup("--head");
		ctx->extra[ctx->nextra++] = xstrdup(ctx->branch);
	}
	/*
	 * gh resolves GH_REPO through git remotes for some commands (pr create), and
	 * it runs in an empty directory: pass the repository as -R where gh takes it.
	 */
	if (ctx->repo != NULL && nwords >= 1) {
		static const char *const takes_r[] = { "issue", "pr", "run", "workflow",
		    "release", "label", NULL };

		for (k = 0; takes_r[k] != NULL; k++) {
			if (strcmp(words[0], takes_r[k]) == 0 && nwords == 2) {
				ctx->extra[ctx->nextra++] = xstrdup("-R");
				ctx->extra[ctx->nextra++] = xstrdup(ctx->repo);
				break;
			}
		}
		if (nwords == 2 && strcmp(words[0], "repo") == 0 &&
		    strcmp(words[1], "view") == 0 && positional == NULL)
			ctx->extra[ctx->nextra++] = xstrdup(ctx->repo);
	}
	return 0;
}

/* Set one variable (helper for brevity). */
static void
gh_set(struct envbuild *e, const char *k, const char *v)
{
	envbuild_set(e, k, v, strlen(v), 0);
}

/* gh's environment: private config per call, no interaction of any kind. */
void
gh_env(const struct tool *t, const char *scratch, const struct policy_ctx *ctx,
    struct envbuild *e)
{
	static const struct { const char *var, *sub; } dirs[] = {
		{ "GH_CONFIG_DIR", ".config/gh" }, { "XDG_CONFIG_HOME", ".config" },
		{ "XDG_CACHE_HOME", ".cache" }, { "XDG_DATA_HOME", ".local/share" },
		{ "XDG_STATE_HOME", ".local/state" },
	};
	const char *host = t->host != NULL ? t->host : "github.com";
	size_t i;
	char *p;

	gh_set(e, "GH_HOST", host);
	for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		xasprintf(&p, "%s/%s", scratch, dirs[i].sub);
		gh_set(e, dirs[i].var, p);
		free(p);
	}
	gh_set(e, "GH_PROMPT_DISABLED", "1");
	gh_set(e, "GH_NO_UPDATE_NOTIFIER", "1");
	gh_set(e, "GH_NO_EXTENSION_UPDATE_NOTIFIER", "1");
	gh_set(e, "GH_SPINNER_DISABLED", "1");
	gh_set(e, "GH_PAGER", "cat");
	gh_set(e, "PAGER", "cat");
	gh_set(e, "GIT_PAGER", "cat");
	gh_set(e, "GH_EDITOR", "/bin/false");
	gh_set(e, "EDITOR", "/bin/false");
	gh_set(e, "VISUAL", "/bin/false");
	gh_set(e, "GH_BROWSER", "/bin/false");
	gh_set(e, "BROWSER", "/bin/false");
	gh_set(e, "GIT_TERMINAL_PROMPT", "0");
	gh_set(e, "GIT_CONFIG_NOSYSTEM", "1");
	gh_set(e, "GIT_CONFIG_GLOBAL", "/dev/null");
	/* gh api fills {owner}/{repo} from GH_REPO. */
	if (ctx != NULL && ctx->repo != NULL) {
		xasprintf(&p, "%s/%s", host, ctx->repo);
		gh_set(e, "GH_REPO", p);
		free(p);
	}
}

/* Compare dotted versions a.b.c; <0, 0, >0. */
static int
gh_vercmp(int a0, int a1, int a2, int b0, int b1, int b2)
{
	if (a0 != b0)
		return a0 - b0;
	if (a1 != b1)
		return a1 - b1;
	return a2 - b2;
}

/* Run "gh --version" (admin-driven --check only) and compare with 2.63.1. */
char *
gh_version_warning(const char *path)
{
	char buf[256], *w = NULL;
	int p[2], status, v0, v1, v2;
	ssize_t n;
	size_t off = 0;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0)
		return NULL;
	if ((pid = fork()) == 0) {
		char *argv[] = { (char *)path, "--version", NULL };
		char *envp[] = { "PATH=/usr/bin:/bin", "GH_NO_UPDATE_NOTIFIER=1", NULL };

		dup2(p[1], 1);
		execve(path, argv, envp);
		_exit(127);
	}
	close(p[1]);
	while (pid > 0 && off < sizeof buf - 1 &&
	    (n = read(p[0], buf + off, sizeof buf - 1 - off)) > 0)
		off += (size_t)n;
	buf[off] = '\0';
	close(p[0]);
	if (pid > 0)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	if (sscanf(buf, "gh version %d.%d.%d", &v0, &v1, &v2) != 3) {
		xasprintf(&w, "cannot tell the version of %s; gh before 2.63.1 has known "
		    "token-leak vulnerabilities", path);
		return w;
	}
	if (gh_vercmp(v0, v1, v2, 2, 63, 1) < 0)
		xasprintf(&w, "%s is gh %d.%d.%d, older than 2.63.1, the first release without "
		    "the known token-leak CVEs; upgrade gh", path, v0, v1, v2);
	return w;
}
