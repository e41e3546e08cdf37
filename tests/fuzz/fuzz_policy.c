/*
 * libFuzzer target for the policy engine (bridge/policy.c) and the gh profile
 * (bridge/profile-gh.c), against a fixed config loaded once: a generic tool with argv
 * rules and deny_args, and two gh tools (github.com with GH_TOKEN, an enterprise
 * host with GH_ENTERPRISE_TOKEN) with the built-in default rules.
 *
 * Input: byte 0 picks the session (bit 0: "one" with one repository, "multi" with
 * two), the tool (bits 1-2) and whether the shim sent a repository context (bit 3).
 * The rest is split at NUL bytes: with a context, the first two pieces are its
 * remote_url and branch (empty = absent); the remaining pieces are argv.
 *
 * When a gh run is allowed, what gh itself would do with argv (plus the arguments
 * the profile appends, as the bridge appends them) must respect the profile's intent. gh
 * parses flags with spf13/pflag, so this file models pflag with gh 2.23's flag
 * tables for the commands the default rules allow (fuzz_gh_cmds): short flag
 * clusters (-dRx: bool -d, then -R x), "-f=v", "--long=v", values taking the next
 * argument, "--" ending flags, last value wins. Asserted for allowed gh runs:
 *   - no --hostname / --web (or their =value forms) before "--", and the model
 *     sees no web, editor or hostname flag set;
 *   - the repository gh acts on (-R/--repo, else GH_REPO from the context) is one
 *     of the session's;
 *   - no --jq / --template (-q, and -t where gh means --template) at all;
 *   - every value gh would open as a file (--body-file/-F, --recover, gh api --input
 *     and -F KEY=@PATH) is one the profile listed for fetching from the sandbox, at
 *     the same argument and offset, so no host path reaches gh;
 *   - gh api: the endpoint contains no "://", the method is GET, request fields
 *     (-f/-F/--input) only with an explicit -X GET, and only Accept: headers.
 * With FUZZ_POLICY_STRICT=1 in the environment, positional repository selectors
 * are checked too: an issue/pr argument that is a URL (gh takes the repository and
 * the host from it, and sends the host's token there) and repo view OWNER/REPO.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <fnmatch.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "policy.h"
#include "profile.h"

#define FUZZ_MAX_ARGS	64

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static struct config	*cfg;
static int		 strict;

static const char fuzz_config_text[] =
"{\n"
"  \"socket\": {\"path\": \"@DIR@/bridge.sock\"},\n"
"  \"runner\": \"daemon\",\n"
"  \"audit_log\": \"@DIR@/audit.log\",\n"
"  \"state_dir\": \"@DIR@/state\",\n"
"  \"secrets\": {\n"
"    \"ghtok\": {\"source\": \"file\", \"path\": \"/nonexistent/ghtok\"},\n"
"    \"ghetok\": {\"source\": \"file\", \"path\": \"/nonexistent/ghetok\"}\n"
"  },\n"
"  \"tools\": {\n"
"    \"tool\": {\"path\": \"/bin/echo\", \"deny_args\": [\"--exec*\", \"-c\", \"--upload-pack*\"],\n"
"      \"rules\": [\n"
"        {\"allow\": [\"status\"]},\n"
"        {\"allow\": [\"log\", \"**\"]},\n"
"        {\"deny\": [\"push\", \"--force\", \"**\"], \"reason\": \"no force pushes\"},\n"
"        {\"allow\": [\"push\", \"*\"]},\n"
"        {\"allow\": [\"x*\", \"-?\"]}\n"
"      ]},\n"
"    \"gh\": {\"path\": \"/bin/true\", \"profile\": \"gh\", \"secrets\": {\"GH_TOKEN\": \"ghtok\"}},\n"
"    \"ghe\": {\"path\": \"/bin/true\", \"profile\": \"gh\", \"host\": \"ghe.example.com\",\n"
"      \"secrets\": {\"GH_ENTERPRISE_TOKEN\": \"ghetok\"}}\n"
"  },\n"
"  \"git\": {\"path\": \"/usr/bin/git\", \"helper\": \"/bin/true\", \"hosts\": {\n"
"    \"github.com\": {\"upstream\": \"https://github.com\", \"secret\": \"ghtok\"},\n"
"    \"ghe.example.com\": {\"upstream\": \"https://ghe.example.com\", \"secret\": \"ghetok\"}\n"
"  }},\n"
"  \"sessions\": [\n"
"    {\"name\": \"one\", \"uid\": 1001, \"tools\": [\"tool\", \"gh\", \"ghe\", \"git\"],\n"
"      \"repos\": [\"octo/one\"]},\n"
"    {\"name\": \"multi\", \"uid\": 1002, \"tools\": [\"tool\", \"gh\", \"ghe\"],\n"
"      \"repos\": [\"octo/one\", \"Octo/Two\"]}\n"
"  ]\n"
"}\n";

/*
 * gh 2.23 flags of the commands the default rules allow (from `gh CMD --help`):
 * boolean and valued shorthands, numeric shorthands, valued long flags, boolean
 * long flags, numeric (int or duration) long flags. Every command also has -h/--help
 * and, except api, -R/--repo.
 */
static const struct fuzz_gh_cmd {
	const char	*cmd;		/* one or two words */
	const char	*bools;		/* boolean shorthands */
	const char	*valued;	/* shorthands taking a value */
	const char	*numeric;	/* ...of which numeric */
	const char	*longs;		/* long flags taking a value, space-separated */
	const char	*blongs;	/* boolean long flags */
	const char	*nlongs;	/* numeric long flags */
} fuzz_gh_cmds[] = {
	{ "api", "i", "FHqXpft", "",
	    "cache field header hostname input jq method preview raw-field template",
	    "include paginate silent",
	    "cache" },
	{ "issue list", "w", "aAqlLmSst", "L",
	    "app assignee author jq json label limit mention milestone search state template",
	    "web",
	    "limit" },
	{ "issue view", "cw", "qt", "",
	    "jq json template",
	    "comments web",
	    "" },
	{ "issue create", "w", "abFlmpt", "",
	    "assignee body body-file label milestone project recover title",
	    "web",
	    "" },
	{ "issue comment", "ew", "bF", "",
	    "body body-file",
	    "edit-last editor web",
	    "" },
	{ "issue edit", "", "bFmt", "",
	    "add-assignee add-label add-project body body-file milestone remove-assignee remove-label remove-project title",
	    "",
	    "" },
	{ "issue close", "", "cr", "",
	    "comment reason",
	    "",
	    "" },
	{ "issue reopen", "", "c", "",
	    "comment",
	    "",
	    "" },
	{ "issue status", "", "qt", "",
	    "jq json template",
	    "",
	    "" },
	{ "pr list", "dw", "aABHqlLSst", "L",
	    "app assignee author base head jq json label limit search state template",
	    "draft web",
	    "limit" },
	{ "pr view", "cw", "qt", "",
	    "jq json template",
	    "comments web",
	    "" },
	{ "pr create", "dfw", "aBbFHlmprt", "",
	    "assignee base body body-file head label milestone project recover reviewer title",
	    "draft fill no-maintainer-edit web",
	    "" },
	{ "pr comment", "ew", "bF", "",
	    "body body-file",
	    "edit-last editor web",
	    "" },
	{ "pr edit", "", "BbFmt", "",
	    "add-assignee add-label add-project add-reviewer base body body-file milestone remove-assignee remove-label remove-project remove-reviewer title",
	    "",
	    "" },
	{ "pr close", "d", "c", "",
	    "comment",
	    "delete-branch",
	    "" },
	{ "pr reopen", "", "c", "",
	    "comment",
	    "",
	    "" },
	{ "pr ready", "", "", "",
	    "",
	    "undo",
	    "" },
	{ "pr diff", "w", "", "",
	    "color",
	    "name-only patch web",
	    "" },
	{ "pr checks", "w", "i", "i",
	    "interval",
	    "required watch web",
	    "interval" },
	{ "pr review", "acr", "bF", "",
	    "body body-file",
	    "approve comment request-changes",
	    "" },
	{ "pr status", "c", "qt", "",
	    "jq json template",
	    "conflict-status",
	    "" },
	{ "repo view", "w", "bqt", "",
	    "branch jq json template",
	    "web",
	    "" },
	{ "run list", "", "bqLtuw", "L",
	    "branch jq json limit template user workflow",
	    "",
	    "limit" },
	{ "run view", "vw", "jqt", "",
	    "job jq json template",
	    "exit-status log log-failed verbose web",
	    "" },
	{ "workflow list", "a", "L", "L",
	    "limit",
	    "all",
	    "limit" },
	{ "workflow view", "wy", "r", "",
	    "ref",
	    "web yaml",
	    "" },
	{ "release list", "", "L", "L",
	    "limit",
	    "exclude-drafts exclude-pre-releases",
	    "limit" },
	{ "release view", "w", "qt", "",
	    "jq json template",
	    "web",
	    "" },
	{ "label list", "w", "qLSt", "L",
	    "jq json limit order search sort template",
	    "web",
	    "limit" },
	{ NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};

/* What gh would do with an argv, as far as the checks need. */
struct fuzz_gh {
	const struct fuzz_gh_cmd *cmd;
	int		 error;		/* pflag would refuse the command line */
	int		 help;		/* -h/--help: gh prints help and does nothing else */
	const char	*repo;		/* last -R/--repo value */
	int		 web, editor, hostname;
	const char	*method;	/* gh api: last -X value */
	int		 sends;		/* gh api: -f/-F/--input/--field/--raw-field */
	int		 bad_header;	/* gh api: a header other than Accept: */
	int		 format;	/* --jq / --template (-q, and -t where it is --template) */
	const char	*files[FUZZ_MAX_ARGS + 8];	/* values gh would open as files */
	size_t		 nfiles;
	const char	*pos[FUZZ_MAX_ARGS + 8];	/* positional arguments */
	size_t		 npos;
};

/* Write the fixed config to a private root-owned directory and load it. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char dir[] = "/tmp/fuzz_policy.XXXXXX", path[64], *text, *cause = NULL, *p;
	const char *s;
	size_t n = 0;
	FILE *f;

	(void)argc;
	(void)argv;
	strict = getenv("FUZZ_POLICY_STRICT") != NULL &&
	    strcmp(getenv("FUZZ_POLICY_STRICT"), "1") == 0;
	if (mkdtemp(dir) == NULL)
		abort();
	snprintf(path, sizeof path, "%s/config.json", dir);
	text = malloc(sizeof fuzz_config_text + 256);
	for (s = fuzz_config_text, p = text; *s != '\0'; ) {
		if (strncmp(s, "@DIR@", 5) == 0) {
			n = strlen(dir);
			memcpy(p, dir, n);
			p += n;
			s += 5;
		} else
			*p++ = *s++;
	}
	*p = '\0';
	umask(077);
	if ((f = fopen(path, "w")) == NULL || fputs(text, f) == EOF || fclose(f) != 0)
		abort();
	free(text);
	if ((cfg = config_load(path, 1, &cause)) == NULL) {
		fprintf(stderr, "fuzz_policy: cannot load the fixed config (run as root): %s\n",
		    cause);
		abort();
	}
	unlink(path);
	rmdir(dir);
	return 0;
}

/* Whether word is in a space-separated list. */
static int
fuzz_in_list(const char *list, const char *word, size_t n)
{
	const char *p = list;

	while (*p != '\0') {
		size_t k = strcspn(p, " ");

		if (k == n && strncmp(p, word, n) == 0)
			return 1;
		p += k;
		while (*p == ' ')
			p++;
	}
	return 0;
}

/* strconv.ParseBool: 1 true, 0 false, -1 not a boolean (pflag refuses the line). */
static int
fuzz_bool(const char *v)
{
	static const char *const t[] = { "1", "t", "T", "true", "TRUE", "True", NULL };
	static const char *const f[] = { "0", "f", "F", "false", "FALSE", "False", NULL };
	size_t i;

	for (i = 0; t[i] != NULL; i++) {
		if (strcmp(v, t[i]) == 0)
			return 1;
		if (strcmp(v, f[i]) == 0)
			return 0;
	}
	return -1;
}

/* Whether a value would parse as an int or a duration (enough to refuse "--"). */
static int
fuzz_numeric(const char *v)
{
	if (*v == '-' || *v == '+')
		v++;
	return *v >= '0' && *v <= '9';
}

/*
 * Record one flag: shrt is its shorthand, or lng[0..lnglen) its long name; v its
 * value (NULL for a boolean given without one).
 */
static void
fuzz_gh_flag(struct fuzz_gh *m, char shrt, const char *lng, size_t lnglen, const char *v)
{
	const struct fuzz_gh_cmd *c = m->cmd;
	int api = strcmp(c->cmd, "api") == 0, on = 1;

#define IS(l)	(lng != NULL && lnglen == strlen(l) && strncmp(lng, l, lnglen) == 0)
	if (v != NULL && (shrt != 0 ? strchr(c->bools, shrt) != NULL || shrt == 'h' :
	    fuzz_in_list(c->blongs, lng, lnglen) || IS("help"))) {
		if ((on = fuzz_bool(v)) < 0) {
			m->error = 1;
			return;
		}
	}
	if ((shrt != 0 && strchr(c->numeric, shrt) != NULL) ||
	    (lng != NULL && fuzz_in_list(c->nlongs, lng, lnglen))) {
		if (!fuzz_numeric(v)) {
			m->error = 1;
			return;
		}
	}
	if (shrt == 'h' || IS("help"))
		m->help |= on;
	if (!api && (shrt == 'R' || IS("repo")))
		m->repo = v;
	if (api && IS("hostname"))
		m->hostname = 1;
	if ((shrt == 'w' && strchr(c->bools, 'w') != NULL) ||
	    (IS("web") && fuzz_in_list(c->blongs, "web", 3)))
		m->web |= on;
	if ((shrt == 'e' && strchr(c->bools, 'e') != NULL) ||
	    (IS("editor") && fuzz_in_list(c->blongs, "editor", 6)))
		m->editor |= on;
	/* Values gh 2.23 opens as files: each must be one the bridge fetches instead. */
	if (v != NULL && ((fuzz_in_list(c->longs, "body-file", 9) && (shrt == 'F' ||
	    IS("body-file"))) || IS("recover") || (api && IS("input"))))
		m->files[m->nfiles++] = v;
	if (v != NULL && api && (shrt == 'F' || IS("field"))) {
		const char *eq = strchr(v, '=');

		if (eq != NULL && eq[1] == '@')
			m->files[m->nfiles++] = eq + 2;
	}
	if (shrt == 'q' || IS("jq") || IS("template") ||
	    (shrt == 't' && fuzz_in_list(c->longs, "template", 8)))
		m->format = 1;
	if (api) {
		if (shrt == 'X' || IS("method"))
			m->method = v;
		if (shrt == 'f' || shrt == 'F' || IS("field") || IS("raw-field") || IS("input"))
			m->sends = 1;
		if ((shrt == 'H' || IS("header")) && strncasecmp(v, "Accept:", 7) != 0)
			m->bad_header = 1;
	}
#undef IS
}

/* Model pflag on args[0..n) for the command named by the first words. */
static void
fuzz_gh_model(char *const *args, size_t n, struct fuzz_gh *m)
{
	const struct fuzz_gh_cmd *c;
	size_t i, w = 1;
	char cmd[64];
	int api;

	memset(m, 0, sizeof *m);
	if (n == 0)
		return;
	for (c = fuzz_gh_cmds; c->cmd != NULL; c++) {
		w = strchr(c->cmd, ' ') != NULL ? 2 : 1;
		if (n < w)
			continue;
		if (w == 1)
			snprintf(cmd, sizeof cmd, "%.60s", args[0]);
		else
			snprintf(cmd, sizeof cmd, "%.30s %.30s", args[0], args[1]);
		if (strcmp(cmd, c->cmd) == 0)
			break;
	}
	if (c->cmd == NULL)
		return;
	m->cmd = c;
	api = strcmp(c->cmd, "api") == 0;
	for (i = w; i < n && !m->error; i++) {
		const char *a = args[i], *p;

		if (a[0] != '-' || a[1] == '\0') {
			m->pos[m->npos++] = a;
			continue;
		}
		if (strcmp(a, "--") == 0) {
			for (i++; i < n; i++)
				m->pos[m->npos++] = args[i];
			break;
		}
		if (a[1] == '-') {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
			const char *v = eq != NULL ? eq + 1 : NULL;

			if ((!api && len == 4 && strncmp(name, "repo", 4) == 0) ||
			    fuzz_in_list(c->longs, name, len)) {
				if (v == NULL) {
					if (i + 1 >= n) {
						m->error = 1;	/* flag needs an argument */
						break;
					}
					v = args[++i];	/* even "--": pflag takes it */
				}
			} else if (!fuzz_in_list(c->blongs, name, len) &&
			    !(len == 4 && strncmp(name, "help", 4) == 0)) {
				m->error = 1;	/* unknown flag */
				break;
			}
			fuzz_gh_flag(m, 0, name, len, v);
			continue;
		}
		/* A shorthand cluster: booleans, until one that takes the rest as value. */
		for (p = a + 1; *p != '\0' && !m->error; p++) {
			if ((!api && *p == 'R') || strchr(c->valued, *p) != NULL) {
				const char *v;

				if (p[1] == '=' && p[2] != '\0')
					v = p + 2;
				else if (p[1] != '\0')
					v = p + 1;
				else if (i + 1 < n)
					v = args[++i];
				else {
					m->error = 1;
					break;
				}
				fuzz_gh_flag(m, *p, NULL, 0, v);
				break;
			}
			if (strchr(c->bools, *p) != NULL || *p == 'h') {
				if (p[1] == '=' && p[2] != '\0') {
					fuzz_gh_flag(m, *p, NULL, 0, p + 2);
					break;
				}
				fuzz_gh_flag(m, *p, NULL, 0, NULL);
				continue;
			}
			m->error = 1;	/* unknown shorthand flag */
		}
	}
}

/* The checks on an allowed gh run. */
static void
fuzz_check_gh(const struct session *s, char *const *argv, size_t argc,
    const struct policy_ctx *ctx)
{
	char *full[FUZZ_MAX_ARGS + 8];
	struct fuzz_gh m;
	size_t i, n = 0;

	for (i = 0; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--hostname") == 0 || strncmp(a, "--hostname=", 11) == 0 ||
		    strcmp(a, "--web") == 0 || strncmp(a, "--web=", 6) == 0)
			abort();
	}
	if (ctx->nextra > 4)
		abort();
	if (ctx->head != NULL && (ctx->head[0] == '-' || ctx->head[0] == '\0'))
		abort();
	if (ctx->repo != NULL && !config_session_has_repo(s, ctx->repo))
		abort();
	/* What gh receives: argv, then the profile's additions. */
	for (i = 0; i < argc; i++)
		full[n++] = argv[i];
	for (i = 0; i < ctx->nextra; i++)
		full[n++] = ctx->extra[i];
	fuzz_gh_model(full, n, &m);
	if (m.cmd == NULL || m.error || m.help)
		return;	/* gh would refuse the line or only print help */
	if (m.web || m.editor || m.hostname || m.format)
		abort();
	/* Every file gh would open is one the bridge fetches from the sandbox ("-" is stdin). */
	for (i = 0; i < m.nfiles; i++) {
		size_t k;
		int found = strcmp(m.files[i], "-") == 0;

		for (k = 0; k < ctx->nfiles && !found; k++)
			found = argv[ctx->files[k].argi] + ctx->files[k].off == m.files[i];
		if (!found)
			abort();
	}
	if (m.repo != NULL && !config_session_has_repo(s, m.repo))
		abort();
	if (strcmp(m.cmd->cmd, "api") == 0 && m.npos == 1) {
		if (strstr(m.pos[0], "://") != NULL)
			abort();
		if ((m.method != NULL && strcasecmp(m.method, "GET") != 0) ||
		    (m.sends && m.method == NULL) || m.bad_header)
			abort();
	}
	if (!strict)
		return;
	/*
	 * Positional selectors: an issue/pr URL names its own repository and host (the
	 * list and status commands take no argument: gh refuses one).
	 */
	if ((strncmp(m.cmd->cmd, "issue ", 6) == 0 || strncmp(m.cmd->cmd, "pr ", 3) == 0) &&
	    strstr(m.cmd->cmd, " list") == NULL && strstr(m.cmd->cmd, " status") == NULL &&
	    strcmp(m.cmd->cmd, "issue create") != 0 && strcmp(m.cmd->cmd, "pr create") != 0) {
		for (i = 0; i < m.npos; i++) {
			if (strncasecmp(m.pos[i], "https://", 8) == 0 ||
			    strncasecmp(m.pos[i], "http://", 7) == 0)
				abort();
		}
	}
	if (strcmp(m.cmd->cmd, "repo view") == 0 && m.npos > 0 &&
	    !config_session_has_repo(s, m.pos[0]))
		abort();
}

/* The checks on an allowed generic run: no deny_args match, an allow rule matches. */
static void
fuzz_check_generic(const struct tool *t, char *const *argv, size_t argc)
{
	size_t i, j;

	for (i = 0; i < argc; i++) {
		for (j = 0; j < t->ndeny_args; j++) {
			if (fnmatch(t->deny_args[j], argv[i], 0) == 0)
				abort();
		}
	}
	for (i = 0; i < t->nrules; i++) {
		if (policy_rule_matches(t->rules[i].argv, t->rules[i].nargv, argv, argc)) {
			if (!t->rules[i].allow)
				abort();	/* first match must be the deciding one */
			return;
		}
	}
	abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const tools[] = { "tool", "gh", "ghe", "gh" };
	const struct session *s;
	const struct tool *t;
	struct policy_result res;
	struct policy_ctx ctx;
	char *buf, *pieces[FUZZ_MAX_ARGS + 2], **argv;
	size_t npieces = 0, argc, i, start;
	int with_ctx, allowed;

	if (size < 1)
		return 0;
	s = &cfg->sessions[data[0] & 1];
	t = config_tool(cfg, tools[(data[0] >> 1) & 3]);
	with_ctx = (data[0] >> 3) & 1;
	buf = malloc(size);
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';
	for (i = 0, start = 0; i < size && npieces < FUZZ_MAX_ARGS + 2; i++) {
		if (buf[i] == '\0') {
			pieces[npieces++] = buf + start;
			start = i + 1;
		}
	}
	memset(&ctx, 0, sizeof ctx);
	argv = pieces;
	argc = npieces;
	if (with_ctx) {
		if (argc < 2) {
			free(buf);
			return 0;
		}
		ctx.remote_url = pieces[0][0] != '\0' ? pieces[0] : NULL;
		ctx.branch = pieces[1][0] != '\0' ? pieces[1] : NULL;
		argv += 2;
		argc -= 2;
	}
	allowed = policy_check(cfg, s, t, argv, argc, &ctx, &res);
	if (allowed != res.allowed || res.rule == NULL || res.reason == NULL ||
	    (allowed == (res.message != NULL)))
		abort();
	if (allowed) {
		if (t->profile == profile_find("gh"))
			fuzz_check_gh(s, argv, argc, &ctx);
		else {
			if (ctx.nextra != 0)
				abort();
			fuzz_check_generic(t, argv, argc);
		}
	}
	policy_result_free(&res);
	policy_ctx_free(&ctx);
	free(buf);
	return 0;
}
