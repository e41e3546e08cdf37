/*
 * The gh profile as one table (profile_gh, at the end): built-in rules, checks no
 * rule can switch off (hosts, -R, gh api shape, --web/--editor, --jq/--template),
 * the file arguments gh reads (fetched from the sandbox instead), the arguments
 * added for repository context, the secret variable gh reads for the host, and
 * the per-call hardened environment gh runs with.
 */
#include <sys/wait.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "policy.h"
#include "proc.h"
#include "profile.h"
#include "spawn.h"
#include "util.h"

#define GH_DEFAULT_HOST	"github.com"

/* The built-in rules: what a coding agent needs, nothing that prints or manages secrets. */
static const struct profile_rule gh_rules[] = {
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
gh_repo_arg(const struct profile_args *pa, const char *v, char **why)
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
	if (!pa->repo_allowed(pa->arg, v)) {
		xasprintf(why, "repository %.100s is not one this session may act on", v);
		return -1;
	}
	return 0;
}

/*
 * Checks for gh api: GET only, relative endpoint, allowed repositories, Accept
 * headers. Fields (-f/-F) and --input make gh default to POST, so they are taken
 * only with an explicit -X GET (fields then become query parameters).
 */
static int
gh_api(const struct profile_args *pa, char *const *argv, size_t argc, size_t start, char **why)
{
	static const char *const valued[] = { "-X", "--method", "-H", "--header", "-q", "--jq",
	    "-t", "--template", "-p", "--preview", "--cache", NULL };
	const char *endpoint = NULL, *v, *sends = NULL;
	size_t i, k;
	int get = 0;

	for (i = start; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0) {
			if (i + 1 < argc && endpoint == NULL)
				endpoint = argv[i + 1];
			break;
		}
		if (gh_flag(a, "--field", "-F", &v) || gh_flag(a, "--raw-field", "-f", &v) ||
		    gh_flag(a, "--input", NULL, &v)) {
			if (sends == NULL)
				sends = a;
			if (v == NULL)
				i++;	/* its value */
			continue;
		}
		if (gh_flag(a, "--method", "-X", &v)) {
			if (v == NULL && i + 1 < argc)
				v = argv[++i];
			if (v == NULL || strcasecmp(v, "GET") != 0) {
				xasprintf(why, "gh api may only read: method %.20s is refused",
				    v != NULL ? v : "(missing)");
				return -1;
			}
			get = 1;
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
	if (sends != NULL && !get) {
		xasprintf(why, "gh api may only read (GET): %.40s sends data, since gh then "
		    "defaults to POST; add -X GET to pass fields as query parameters", sends);
		return -1;
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
			if (!pa->repo_allowed(pa->arg, repo)) {
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
gh_host_arg(const struct profile_args *pa, const char *thost, const char *a, char **why)
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
	if (!pa->repo_allowed(pa->arg, repo)) {
		xasprintf(why, "repository %.100s is not one this session may act on", repo);
		return -1;
	}
	return 0;
}

/*
 * Flags that run an expression or template inside gh, on the host: jq and Go
 * templates can read gh's environment ($ENV, env) and transform what they read,
 * so no redactor could recognise it. Refused on every subcommand, in every form.
 * gh 2.23 spells --template -t except where -t is --title (title_cmds).
 */
static const struct {
	const char	*lng, *shrt, *what;
} gh_format_flags[] = {
	{ "--jq", "-q", "jq expressions" },
	{ "--template", "-t", "Go templates" },
};
static const char *const gh_title_cmds[][2] = {
	{ "issue", "create" }, { "issue", "edit" }, { "pr", "create" }, { "pr", "edit" },
};

/*
 * Flags whose value gh reads as a file (gh 2.23, the allowed subcommands). The
 * file is the agent's: fetched from the sandbox, stored in the call's scratch
 * directory, and the argument rewritten to the copy. "-" (stdin) stays as it is.
 * GH_FILE_AT: the value is KEY=@PATH (gh api -F), other values are not files.
 */
#define GH_FILE_AT	0x1
static const struct {
	const char	*cmd, *sub;	/* sub NULL: any (gh api) */
	const char	*lng, *shrt;
	unsigned	 flags;
} gh_file_flags[] = {
	{ "issue", "create", "--body-file", "-F", 0 },
	{ "issue", "create", "--recover", NULL, 0 },
	{ "issue", "comment", "--body-file", "-F", 0 },
	{ "issue", "edit", "--body-file", "-F", 0 },
	{ "pr", "create", "--body-file", "-F", 0 },
	{ "pr", "create", "--recover", NULL, 0 },
	{ "pr", "comment", "--body-file", "-F", 0 },
	{ "pr", "edit", "--body-file", "-F", 0 },
	{ "pr", "review", "--body-file", "-F", 0 },
	{ "api", NULL, "--field", "-F", GH_FILE_AT },
	{ "api", NULL, "--input", NULL, 0 },
};

/* Flags refused on every subcommand, with what to do instead. */
static const struct {
	const char	*lng, *shrt, *what;
} gh_denied_flags[] = {
	{ "--hostname", NULL, "the host is fixed by the bridge" },
	{ "--web", "-w", "there is no browser on the bridge" },
	{ "--editor", "-e", "there is no editor on the bridge; pass --body or --body-file FILE" },
	{ "--browser", NULL, "there is no browser on the bridge" },
};

/* Subcommands gh takes -R on; the profile adds -R for the context's repository. */
static const char *const gh_takes_r[] = { "issue", "pr", "run", "workflow", "release",
    "label" };

/* The command words (gh ISSUE CREATE ...) the way the checks below find them. */
static size_t
gh_words(char *const *argv, size_t argc, const char *words[2])
{
	const char *v;
	size_t i, n = 0;

	for (i = 0; i < argc && n < 2; i++) {
		if (gh_flag(argv[i], "--repo", "-R", &v)) {
			if (v == NULL)
				i++;
			continue;
		}
		if (argv[i][0] != '-' && (n == 0 || strcmp(words[0], "api") != 0))
			words[n++] = argv[i];
		else if (n == 1 && strcmp(words[0], "api") == 0)
			break;
	}
	return n;
}

/* Whether words are cmd [sub]. */
static int
gh_is(const char *const words[2], size_t nwords, const char *cmd, const char *sub)
{
	if (nwords < 1 || strcmp(words[0], cmd) != 0)
		return 0;
	return sub == NULL || (nwords == 2 && strcmp(words[1], sub) == 0);
}

/* Refuse --jq/-q/--template/-t (in any form) with the hint for the agent. */
static int
gh_format(const char *const words[2], size_t nwords, const char *a, char **rule, char **why)
{
	const char *v;
	size_t k;
	int title = 0;

	for (k = 0; k < sizeof gh_title_cmds / sizeof gh_title_cmds[0]; k++)
		title |= gh_is(words, nwords, gh_title_cmds[k][0], gh_title_cmds[k][1]);
	for (k = 0; k < sizeof gh_format_flags / sizeof gh_format_flags[0]; k++) {
		const char *shrt = gh_format_flags[k].shrt;

		/* -q / -t stuck to a value (-q.x) counts too; -t is --title where gh says so. */
		if (!gh_flag(a, gh_format_flags[k].lng, NULL, &v) &&
		    !(a[0] == '-' && a[1] == shrt[1] && !(title && shrt[1] == 't')))
			continue;
		xasprintf(rule, "profile gh: %s", gh_format_flags[k].lng);
		xasprintf(why, "%s/%s is refused on every gh command: %s run inside gh on the "
		    "host, where they can read gh's environment. Use --json FIELDS (gh api "
		    "prints JSON already) and pipe the output to jq in the sandbox, e.g. gh pr "
		    "list --json number,title | jq -r '.[].title'", gh_format_flags[k].lng, shrt, gh_format_flags[k].what);
		return -1;
	}
	return 0;
}

/*
 * Record a file argument: argv[argi] from byte off on is a path gh would open.
 * "-" is stdin and stays. Returns -1 with *why when it cannot be fetched.
 */
static int
gh_file(struct policy_ctx *ctx, char *const *argv, size_t argi, size_t off, const char *flag,
    char **why)
{
	const char *path = argv[argi] + off;
	struct policy_file *f;

	if (strcmp(path, "-") == 0)
		return 0;
	if (*path == '\0' || strlen(path) > REQ_MAX_PATH) {
		xasprintf(why, "%s needs a file name of 1 to %d bytes", flag, REQ_MAX_PATH);
		return -1;
	}
	if (ctx->nfiles >= POLICY_FILES_MAX) {
		xasprintf(why, "at most %d file arguments per command; put the text in fewer "
		    "files", POLICY_FILES_MAX);
		return -1;
	}
	f = &ctx->files[ctx->nfiles++];
	f->argi = argi;
	f->off = off;
	f->path = xstrdup(path);
	f->flag = flag;
	return 0;
}

/* Find the file arguments of this command (gh_file_flags) and record them in ctx. */
static int
gh_files(const char *const words[2], size_t nwords, char *const *argv, size_t argc,
    struct policy_ctx *ctx, char **why)
{
	const char *v;
	size_t i, k;

	for (i = 0; i < argc; i++) {
		for (k = 0; k < sizeof gh_file_flags / sizeof gh_file_flags[0]; k++) {
			size_t argi = i, off;
			const char *at;

			if (!gh_is(words, nwords, gh_file_flags[k].cmd, gh_file_flags[k].sub) ||
			    !gh_flag(argv[i], gh_file_flags[k].lng, gh_file_flags[k].shrt, &v))
				continue;
			if (v == NULL) {
				/* Last: it would take an argument the profile appends (--head). */
				if (i + 1 >= argc) {
					xasprintf(why, "%s needs a file name", gh_file_flags[k].lng);
					return -1;
				}
				argi = ++i;
				off = 0;
			} else
				off = (size_t)(v - argv[i]);
			if (gh_file_flags[k].flags & GH_FILE_AT) {
				/* KEY=@PATH reads PATH; other values are plain strings. */
				at = strchr(argv[argi] + off, '=');
				if (at == NULL || at[1] != '@')
					break;
				off = (size_t)(at + 2 - argv[argi]);
			}
			if (gh_file(ctx, argv, argi, off, gh_file_flags[k].lng, why) != 0)
				return -1;
			break;
		}
	}
	return 0;
}

/* Whether argv[i] is the value of a file argument (recorded from index first on). */
static int
gh_is_file(const struct policy_ctx *ctx, size_t first, size_t i)
{
	size_t k;

	for (k = first; k < ctx->nfiles; k++) {
		if (ctx->files[k].argi == i)
			return 1;
	}
	return 0;
}

/* Free the file list of a scratch context. */
static void
gh_files_free(struct policy_ctx *ctx)
{
	while (ctx->nfiles > 0)
		free(ctx->files[--ctx->nfiles].path);
}

/* Profile checks, file arguments and repository context. */
static int
gh_check(const struct profile_args *pa, struct policy_ctx *ctx, char **rule, char **why)
{
	char *const *argv = pa->argv;
	size_t argc = pa->argc;
	const char *words[2] = { NULL, NULL }, *cmd[2] = { NULL, NULL }, *v, *positional = NULL;
	const char *thost = pa->host != NULL ? pa->host : GH_DEFAULT_HOST;
	size_t i, k, nwords = 0, ncmd, api_at = 0, first;
	int have_repo = 0, have_head = 0;
	struct policy_ctx tmp;

	ncmd = gh_words(argv, argc, cmd);
	memset(&tmp, 0, sizeof tmp);
	if (ctx == NULL)
		ctx = &tmp;	/* a check without outputs (--check, fuzzers) */
	first = ctx->nfiles;
	if (gh_files(cmd, ncmd, argv, argc, ctx, why) != 0) {
		*rule = xstrdup("profile gh: file arguments");
		goto bad;
	}
	for (i = 0; i < argc; i++) {
		const char *a = argv[i];

		/*
		 * gh api endpoints get their own, clearer check (gh_api); file names are
		 * opened in the sandbox, never taken as locators.
		 */
		if (a[0] != '-' && !(nwords >= 1 && strcmp(words[0], "api") == 0) &&
		    !gh_is_file(ctx, first, i) && gh_host_arg(pa, thost, a, why) != 0) {
			*rule = xstrdup("profile gh: hosts");
			goto bad;
		}
		/*
		 * Every argument is checked, "--" included: gh (pflag) takes "--" as the
		 * value of a flag before it and keeps parsing, and takes the word after a
		 * value flag as its value whatever it looks like, so a check that skips
		 * either can be walked around. Refusing a few odd values is the price.
		 */
		for (k = 0; k < sizeof gh_denied_flags / sizeof gh_denied_flags[0]; k++) {
			if (gh_flag(a, gh_denied_flags[k].lng, NULL, &v) ||
			    (gh_denied_flags[k].shrt != NULL &&
			    strcmp(a, gh_denied_flags[k].shrt) == 0)) {
				xasprintf(rule, "profile gh: %s", gh_denied_flags[k].lng);
				xasprintf(why, "%s is refused: %s", gh_denied_flags[k].lng,
				    gh_denied_flags[k].what);
				goto bad;
			}
		}
		if (gh_format(cmd, ncmd, a, rule, why) != 0)
			goto bad;
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
			goto bad;
		}
		if (gh_flag(a, "--repo", "-R", &v)) {
			if (v == NULL && i + 1 < argc)
				v = argv[++i];
			if (v == NULL || gh_repo_arg(pa, v, why) != 0) {
				if (*why == NULL)
					*why = xstrdup("-R/--repo needs OWNER/REPO");
				*rule = xstrdup("profile gh: -R/--repo");
				goto bad;
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
	    positional != NULL && gh_repo_arg(pa, positional, why) != 0) {
		*rule = xstrdup("profile gh: repo view");
		goto bad;
	}
	if (nwords >= 1 && strcmp(words[0], "api") == 0 &&
	    gh_api(pa, argv, argc, api_at, why) != 0) {
		*rule = xstrdup("profile gh: api");
		goto bad;
	}
	if (ctx == &tmp) {
		gh_files_free(&tmp);
		return 0;
	}
	if (!have_repo) {
		if (pa->ctx_repo != NULL && pa->ctx_host != NULL) {
			if (!pa->ctx_host_served) {
				*rule = xstrdup("profile gh: repository context");
				xasprintf(why, "this directory's repository is on %s, which this "
				    "bridge does not serve; use -R OWNER/REPO", pa->ctx_host);
				goto bad;
			}
			ctx->repo = xstrdup(pa->ctx_repo);
			if (!pa->repo_allowed(pa->arg, ctx->repo)) {
				*rule = xstrdup("profile gh: repository context");
				xasprintf(why, "this directory's repository (%s) is not one this "
				    "session may act on", ctx->repo);
				goto bad;
			}
		} else if (pa->only_repo != NULL)
			ctx->repo = xstrdup(pa->only_repo);
	}
	if (nwords == 2 && strcmp(words[0], "pr") == 0 && strcmp(words[1], "create") == 0 &&
	    !have_head && gh_branch_ok(pa->branch)) {
		ctx->head = xstrdup(pa->branch);
		ctx->extra[ctx->nextra++] = xstrdup("--head");
		ctx->extra[ctx->nextra++] = xstrdup(pa->branch);
	}
	/*
	 * gh resolves GH_REPO through git remotes for some commands (pr create), and
	 * it runs in an empty directory: pass the repository as -R where gh takes it.
	 */
	if (ctx->repo != NULL && nwords >= 1) {
		for (k = 0; k < sizeof gh_takes_r / sizeof gh_takes_r[0]; k++) {
			if (strcmp(words[0], gh_takes_r[k]) == 0 && nwords == 2) {
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

bad:
	gh_files_free(&tmp);
	return -1;
}

/*
 * The variable gh 2.23 reads its token from for a host: GH_TOKEN for github.com
 * (and its subdomains, and github.localhost), GH_ENTERPRISE_TOKEN for any other
 * host (ghinstance.IsEnterprise). With only GH_TOKEN set, gh sends an enterprise
 * host no token at all.
 */
static const char *
gh_secret_var(const char *host)
{
	size_t n;

	if (host == NULL)
		host = GH_DEFAULT_HOST;
	n = strlen(host);
	if (strcasecmp(host, "github.com") == 0 || strcasecmp(host, "github.localhost") == 0 ||
	    (n > 11 && strcasecmp(host + n - 11, ".github.com") == 0) ||
	    (n > 17 && strcasecmp(host + n - 17, ".github.localhost") == 0))
		return "GH_TOKEN";
	return "GH_ENTERPRISE_TOKEN";
}

/* gh's fixed variables: no prompts, pagers, editors, browsers or update checks. */
static const struct {
	const char	*var, *value;
} gh_env_fixed[] = {
	{ "GH_PROMPT_DISABLED", "1" }, { "GH_NO_UPDATE_NOTIFIER", "1" },
	{ "GH_NO_EXTENSION_UPDATE_NOTIFIER", "1" }, { "GH_SPINNER_DISABLED", "1" },
	{ "GH_PAGER", "cat" }, { "PAGER", "cat" }, { "GIT_PAGER", "cat" },
	{ "GH_EDITOR", "/bin/false" }, { "EDITOR", "/bin/false" }, { "VISUAL", "/bin/false" },
	{ "GH_BROWSER", "/bin/false" }, { "BROWSER", "/bin/false" },
	{ "GIT_TERMINAL_PROMPT", "0" }, { "GIT_CONFIG_NOSYSTEM", "1" },
	{ "GIT_CONFIG_GLOBAL", "/dev/null" },
};

/* gh's per-call directories, all inside the call's scratch directory. */
static const struct {
	const char	*var, *sub;
} gh_env_dirs[] = {
	{ "GH_CONFIG_DIR", ".config/gh" }, { "XDG_CONFIG_HOME", ".config" },
	{ "XDG_CACHE_HOME", ".cache" }, { "XDG_DATA_HOME", ".local/share" },
	{ "XDG_STATE_HOME", ".local/state" },
};

/* Set one variable (helper for brevity). */
static void
gh_set(struct envbuild *e, const char *k, const char *v)
{
	envbuild_set(e, k, v, strlen(v), 0);
}

/* gh's environment: private config per call, no interaction of any kind. */
static void
gh_env(const char *host, const char *ca_file, const char *scratch,
    const struct policy_ctx *ctx, struct envbuild *e)
{
	size_t i;
	char *p;

	if (host == NULL)
		host = GH_DEFAULT_HOST;
	gh_set(e, "GH_HOST", host);
	for (i = 0; i < sizeof gh_env_dirs / sizeof gh_env_dirs[0]; i++) {
		xasprintf(&p, "%s/%s", scratch, gh_env_dirs[i].sub);
		gh_set(e, gh_env_dirs[i].var, p);
		free(p);
	}
	for (i = 0; i < sizeof gh_env_fixed / sizeof gh_env_fixed[0]; i++)
		gh_set(e, gh_env_fixed[i].var, gh_env_fixed[i].value);
	/* The host's own CA (GitHub Enterprise Server, tests): gh's Go TLS reads it. */
	if (ca_file != NULL)
		gh_set(e, "SSL_CERT_FILE", ca_file);
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
static char *
gh_version_warning(const char *path)
{
	char *argv[] = { (char *)path, "--version", NULL };
	char *envp[] = { "PATH=/usr/bin:/bin", "GH_NO_UPDATE_NOTIFIER=1", NULL };
	char buf[256], *w = NULL, *cause = NULL;
	struct proc_req r;
	struct proc p;
	int v0, v1, v2;
	ssize_t n;
	size_t off = 0;

	proc_req_init(&r, path, argv, envp);
	r.fd[1] = PROC_PIPE;
	buf[0] = '\0';
	if (proc_spawn(&r, &p, &cause) == 0) {
		while (off < sizeof buf - 1 &&
		    ((n = read(p.fd[1], buf + off, sizeof buf - 1 - off)) > 0 ||
		    (n < 0 && errno == EINTR)))
			off += n > 0 ? (size_t)n : 0;
		buf[off] = '\0';
		proc_close(&p);
		(void)proc_wait(p.pid, &cause);
	}
	free(cause);
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

/* The gh profile. */
const struct profile profile_gh = {
	.name = "gh",
	.keys = PROFILE_KEY_HOST | PROFILE_KEY_CA_FILE,
	.default_host = GH_DEFAULT_HOST,
	.inject = 1,
	.rules = gh_rules,
	.nrules = sizeof gh_rules / sizeof gh_rules[0],
	.help = "gh issue and pr list/view/create/comment/edit/close/reopen, "
	    "pr diff/checks/review/ready, repo view, run/workflow/release list/view, "
	    "search, and gh api GET on relative paths",
	.secret_var = gh_secret_var,
	.check = gh_check,
	.env = gh_env,
	.version_warning = gh_version_warning,
};
