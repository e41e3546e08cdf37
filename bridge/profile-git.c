/*
 * The git profile: git's network leg (op "git", bridge/op-git.c) as one table
 * (profile_git below: services, the helper's base environment, the secret's
 * HTTP Basic user, stdout left unredacted) and its request checks: URL and
 * repository, mirror location, the helper's environment (common/gitcontract.h).
 */
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "gitcontract.h"
#include "profile-git.h"
#include "profile.h"
#include "proto.h"
#include "keyring.h"
#include "spawn.h"
#include "util.h"
#include "valid.h"

/* What a sandbox's git may ask for: fetch/clone/ls-remote and push. */
static const struct profile_service profile_git_services[] = {
	{ "git-upload-pack", "upload-pack", 0 },
	{ "git-receive-pack", "receive-pack", 1 },
};

/* Every shimbridge-git call starts from these (and nothing inherited). */
static const char *const profile_git_env_base[] = {
	"PATH", "/usr/bin:/bin",
	"LANG", "C.UTF-8",
	NULL
};

/*
 * The git profile. Its secret is the git host's ("git.hosts.H.secret"), sent by
 * the injector as HTTP Basic (default user below); host git never holds it when
 * jailed. stdout is the pack protocol: masking bytes in it would corrupt
 * pkt-line lengths, so only stderr is redacted (see op-git.c).
 */
const struct profile profile_git = {
	.name = "git",
	.inject = 1,
	.help = "git fetch, clone, pull, ls-remote and push (the network leg; every "
	    "other git command runs in the sandbox)",
	.op = "git",
	.services = profile_git_services,
	.nservices = sizeof profile_git_services / sizeof profile_git_services[0],
	.fixed_env = profile_git_env_base,
	.default_username = "x-access-token",
	.raw_stdout = 1,
};

/* Characters GitHub allows in owner and repository names. */
static int
profile_git_name_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > 100 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return 0;
	for (i = 0; i < n; i++) {
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return 0;
	}
	return 1;
}

/* Host names: letters, digits, dots and dashes, optionally :port; starts alphanumeric. */
static int
profile_git_host_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > 253 || !isalnum((unsigned char)s[0]))
		return 0;
	for (i = 0; i < n; i++) {
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '.' && s[i] != ':')
			return 0;
		/* The host becomes a mirror path component: no "..", no empty labels. */
		if (s[i] == '.' && (i + 1 == n || s[i + 1] == '.' || s[i + 1] == ':'))
			return 0;
	}
	return 1;
}

/* https://HOST/OWNER/NAME[.git][/], http:// too, or git@HOST:OWNER/NAME[.git]. */
int
profile_git_parse_url(const char *url, char **host, char **owner, char **name, const char **why)
{
	const char *p, *h, *slash, *end;
	size_t hn, on, nn;

	*host = *owner = *name = NULL;
	if (strlen(url) > REQ_MAX_PATH) {
		*why = "URL too long";
		return -1;
	}
	if (strncmp(url, "https://", 8) == 0)
		p = url + 8;
	else if (strncmp(url, "http://", 7) == 0)
		p = url + 7;
	else if (strncmp(url, "git@", 4) == 0)
		p = url + 4;
	else if (strncmp(url, "ssh://git@", 10) == 0)
		p = url + 10;
	else {
		*why = "only https:// and git@ URLs are served";
		return -1;
	}
	h = p;
	hn = strcspn(h, url[0] == 'g' ? ":/" : "/");
	if (!profile_git_host_ok(h, hn) || h[hn] == '\0') {
		*why = "malformed host in URL (user names, passwords and odd characters are refused)";
		return -1;
	}
	p = h + hn + 1;
	if ((slash = strchr(p, '/')) == NULL) {
		*why = "the URL must name OWNER/REPOSITORY";
		return -1;
	}
	on = (size_t)(slash - p);
	end = slash + 1 + strlen(slash + 1);
	if (end > slash + 1 && end[-1] == '/')
		end--;
	nn = (size_t)(end - (slash + 1));
	if (nn > 4 && memcmp(end - 4, ".git", 4) == 0)
		nn -= 4;
	if (!profile_git_name_ok(p, on) || !profile_git_name_ok(slash + 1, nn) ||
	    memchr(slash + 1, '/', nn) != NULL) {
		*why = "the URL must be exactly OWNER/REPOSITORY, with GitHub's characters";
		return -1;
	}
	*host = xstrndup(h, hn);
	*owner = xstrndup(p, on);
	*name = xstrndup(slash + 1, nn);
	return 0;
}

/* Lower-case copy, so one repository has one mirror whatever the spelling. */
static char *
profile_git_lower(const char *s)
{
	char *l = xstrdup(s), *p;

	for (p = l; *p != '\0'; p++)
		*p = (char)tolower((unsigned char)*p);
	return l;
}

/* Validate the request and fill g. */
int
profile_git_prepare(const struct config *c, const struct session *s, json_t *req, struct profile_git_req *g,
    char **msg, char **cause)
{
	static const char *const keys[] = { "op", "service", "url", "env", "progress", NULL };
	json_t *jsvc = json_object_get(req, "service"), *jurl = json_object_get(req, "url");
	json_t *env = json_object_get(req, "env"), *jprog = json_object_get(req, "progress"), *v;
	const struct git_host *gh;
	const char *svc, *url, *why = NULL, *k;
	char *lo, *ln, *repo;
	size_t i;

	memset(g, 0, sizeof *g);
	g->cfg = c;
	g->session = s;
	*msg = *cause = NULL;
	json_object_foreach(req, k, v) {
		for (i = 0; keys[i] != NULL && strcmp(keys[i], k) != 0; i++)
			;
		if (keys[i] == NULL) {
			*cause = xstrdup("unknown field in git request");
			return -1;
		}
	}
	if (!json_is_string(jsvc) || !json_is_string(jurl)) {
		*cause = xstrdup("a git request needs \"service\" and \"url\" strings");
		return -1;
	}
	if (jprog != NULL && !json_is_boolean(jprog)) {
		*cause = xstrdup("\"progress\" in a git request must be true or false");
		return -1;
	}
	g->progress = json_is_true(jprog);
	svc = json_string_value(jsvc);
	url = json_string_value(jurl);
	g->audit_argv = json_pack("[ss]", svc, url);
	for (i = 0; i < profile_git.nservices; i++) {
		if (strcmp(svc, profile_git.services[i].name) == 0)
			g->svc = &profile_git.services[i];
	}
	if (g->svc == NULL) {
		*cause = xstrdup("unsupported git service");
		xasprintf(msg, "git %s is not served through the bridge; only fetch, clone, "
		    "pull, ls-remote and push are.", svc);
		return -1;
	}
	g->service = xstrdup(g->svc->helper);
	if (!config_session_has_tool(s, profile_git.name) || c->git_helper == NULL || c->git_path == NULL) {
		g->code = ERR_UNKNOWN_TOOL;
		*cause = xstrdup("git not granted to the session");
		*msg = xstrdup("git network access (push, fetch, clone) is not available in "
		    "this sandbox session. Local git commands still work; ask the operator if "
		    "you need to reach the remote.");
		return -1;
	}
	if (profile_git_parse_url(url, &g->host, &g->owner, &g->name, &why) != 0) {
		*cause = xstrdup(why);
		xasprintf(msg, "the remote URL %.200s is refused: %s. Use "
		    "https://HOST/OWNER/REPOSITORY.", url, why);
		return -1;
	}
	if ((gh = config_git_host(c, g->host)) == NULL) {
		*cause = xstrdup("host not served");
		xasprintf(msg, "git access to %s is refused: the bridge serves no such host. "
		    "Nothing was sent.", g->host);
		return -1;
	}
	xasprintf(&repo, "%s/%s", g->owner, g->name);
	if (!config_session_has_repo(s, repo)) {
		char list[512];
		size_t len = 0;

		list[0] = '\0';
		for (i = 0; i < s->nrepos && len + strlen(s->repos[i]) + 3 < sizeof list; i++)
			len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
			    i ? ", " : "", s->repos[i]);
		xasprintf(cause, "repository %s not allowed for the session", repo);
		xasprintf(msg, "git access to %s is refused: this session may only reach %s. "
		    "Nothing was sent.", repo, s->nrepos ? list : "no repositories");
		free(repo);
		return -1;
	}
	free(repo);
	g->secret_name = gh->secret;	/* the caller looks its value up (keyring) */
	xasprintf(&g->upstream, "%.*s/%s/%s.git", (int)(strlen(gh->upstream) -
	    (gh->upstream[strlen(gh->upstream) - 1] == '/')), gh->upstream, g->owner, g->name);
	lo = profile_git_lower(g->owner);
	ln = profile_git_lower(g->name);
	{
		char *lh = profile_git_lower(g->host);

		xasprintf(&g->mirror, "%s/mirrors/%s/%s/%s/%s.git", c->state_dir, s->name, lh, lo, ln);
		free(lh);
	}
	free(lo);
	free(ln);
	if (env != NULL && json_is_string(v = json_object_get(env, "GIT_PROTOCOL"))) {
		const char *pv = json_string_value(v);

		if (strcmp(pv, "version=2") == 0 || strcmp(pv, "version=1") == 0 ||
		    strcmp(pv, "version=0") == 0)
			g->protocol = xstrdup(pv);
	}
	xasprintf(&g->rule, "git.hosts.%s/sessions.%s.repos", gh->name, s->name);
	g->argv = xcalloc(3, sizeof *g->argv);
	g->argv[0] = xstrdup("shimbridge-git");
	g->argv[1] = xstrdup("serve");
	return 0;
}

/* mkdir -p below base, each new level owned by uid:gid, mode 0700. */
static int
profile_git_mkdirs(const char *base, const char *rel, uid_t uid, gid_t gid, char **cause)
{
	char *path, *p;

	xasprintf(&path, "%s/%s", base, rel);
	for (p = path + strlen(base) + 1; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		{
			char saved = *p;

			*p = '\0';
			if (mkdir(path, 0700) == 0) {
				if (chown(path, uid, gid) != 0) {
					xasprintf(cause, "chown %s: %s", path, strerror(errno));
					free(path);
					return -1;
				}
			} else if (errno != EEXIST) {
				xasprintf(cause, "mkdir %s: %s", path, strerror(errno));
				free(path);
				return -1;
			}
			*p = saved;
			if (saved == '\0')
				break;
		}
	}
	free(path);
	return 0;
}

/* Join a string vector with commas. */
static char *
profile_git_join(char *const *v, size_t n)
{
	size_t len = 1, i;
	char *s;

	for (i = 0; i < n; i++)
		len += strlen(v[i]) + 1;
	s = xcalloc(1, len);
	for (i = 0; i < n; i++) {
		if (i > 0)
			strcat(s, ",");
		strcat(s, v[i]);
	}
	return s;
}

/* Build the helper's environment from nothing. */
int
profile_git_env(struct profile_git_req *g, const char *scratch, const char *via, char **cause)
{
	const struct config *c = g->cfg;
	const struct git_host *gh = config_git_host(c, g->host);
	char *rel, *lh, *lo, *s;
	size_t i;

	lh = profile_git_lower(g->host);
	lo = profile_git_lower(g->owner);
	xasprintf(&rel, "%s/%s/%s", g->session->name, lh, lo);
	free(lh);
	free(lo);
	{
		char *base;
		int rc;

		xasprintf(&base, "%s/mirrors", c->state_dir);
		rc = profile_git_mkdirs(base, rel, g->session->runner_uid, g->session->runner_gid,
		    cause);
		free(base);
		free(rel);
		if (rc != 0)
			return -1;
	}
	g->env = envbuild_new();
	for (i = 0; profile_git.fixed_env[i] != NULL; i += 2)
		envbuild_set(g->env, profile_git.fixed_env[i], profile_git.fixed_env[i + 1],
		    strlen(profile_git.fixed_env[i + 1]), 0);
	envbuild_set(g->env, "HOME", scratch, strlen(scratch), 0);
	envbuild_set(g->env, GITC_ENV_SERVICE, g->service, strlen(g->service), 0);
	envbuild_set(g->env, GITC_ENV_MIRROR, g->mirror, strlen(g->mirror), 0);
	if (via != NULL) {
		/* The injector checks the repository and adds the credential itself. */
		xasprintf(&s, "%s/%s/%s.git", via, g->owner, g->name);
		envbuild_set(g->env, GITC_ENV_UPSTREAM, s, strlen(s), 0);
		free(s);
	} else {
		envbuild_set(g->env, GITC_ENV_UPSTREAM, g->upstream, strlen(g->upstream), 0);
		envbuild_set(g->env, GITC_ENV_USERNAME, gh->username, strlen(gh->username), 0);
	}
	envbuild_set(g->env, GITC_ENV_GIT, c->git_path, strlen(c->git_path), 0);
	s = profile_git_join(c->no_push_branches, c->nno_push_branches);
	envbuild_set(g->env, GITC_ENV_NO_PUSH, s, strlen(s), 0);
	free(s);
	s = profile_git_join(c->protected_branches, c->nprotected_branches);
	envbuild_set(g->env, GITC_ENV_FF_ONLY, s, strlen(s), 0);
	free(s);
	s = profile_git_join(c->protected_tags, c->nprotected_tags);
	envbuild_set(g->env, GITC_ENV_TAGS, s, strlen(s), 0);
	free(s);
	s = profile_git_join(c->deny_paths, c->ndeny_paths);
	envbuild_set(g->env, GITC_ENV_DENY_PATHS, s, strlen(s), 0);
	free(s);
	if (c->nask_branches > 0) {
		s = profile_git_join(c->ask_branches, c->nask_branches);
		envbuild_set(g->env, GITC_ENV_ASK, s, strlen(s), 0);
		free(s);
	}
	s = NULL;
	xasprintf(&s, "%d", GITC_VERSION);
	envbuild_set(g->env, GITC_ENV_VERSION, s, strlen(s), 0);
	free(s);
	if (g->protocol != NULL)
		envbuild_set(g->env, GITC_ENV_PROTOCOL, g->protocol, strlen(g->protocol), 0);
	if (g->progress)
		envbuild_set(g->env, GITC_ENV_PROGRESS, "1", 1, 0);
	/* Phase marks for the audit log's "git-phases" record (op-git.c). */
	envbuild_set(g->env, GITC_ENV_PHASES, "1", 1, 0);
	if (via == NULL && envbuild_set(g->env, GITC_ENV_TOKEN,
	    (const char *)g->secret->val.value, g->secret->val.len, 1) != 0) {
		*cause = xstrdup("the git credential cannot be passed (it contains a NUL byte)");
		return -1;
	}
	return 0;
}

/* Release everything. */
void
profile_git_clear(struct profile_git_req *g)
{
	size_t i;

	free(g->service);
	free(g->host);
	free(g->owner);
	free(g->name);
	free(g->upstream);
	free(g->mirror);
	free(g->protocol);
	free(g->rule);
	if (g->argv != NULL) {
		for (i = 0; g->argv[i] != NULL; i++)
			free(g->argv[i]);
		free(g->argv);
	}
	envbuild_free(g->env);
	json_decref(g->audit_argv);
	memset(g, 0, sizeof *g);
}

/* Parse the text of a "T" record (common/gitcontract.h): "<phase> <ns>". */
int
profile_git_phase(const char *p, size_t len, const char **name, unsigned long long *ns)
{
	static const char *const names[] = { GITC_PHASE_START, GITC_PHASE_GC, GITC_PHASE_MIRROR,
	    GITC_PHASE_HOOK, GITC_PHASE_POLICY, GITC_PHASE_APPROVED, GITC_PHASE_UPSTREAM,
	    GITC_PHASE_END, GITC_PHASE_WARM };
	size_t i, n = 0;

	*name = NULL;
	*ns = 0;
	for (i = 0; i < sizeof names / sizeof names[0] && *name == NULL; i++) {
		n = strlen(names[i]);
		if (len > n + 1 && memcmp(p, names[i], n) == 0 && p[n] == ' ')
			*name = names[i];
	}
	if (*name == NULL)
		return -1;
	p += n + 1;
	len -= n + 1;
	if (len == 0 || len > 19) {		/* 19 digits never overflow 64 bits */
		*name = NULL;
		return -1;
	}
	for (i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9') {
			*name = NULL;
			*ns = 0;
			return -1;
		}
		*ns = *ns * 10 + (unsigned long long)(p[i] - '0');
	}
	return 0;
}

/* Whether a ref name may go into the list: printable, no space. */
static int
profile_git_refname_ok(const char *r, size_t n)
{
	size_t i;

	if (n < 12 || n > 1024)
		return 0;
	for (i = 0; i < n; i++) {
		if ((unsigned char)r[i] <= 0x20 || r[i] == 0x7f)
			return 0;
	}
	return 1;
}

/*
 * Turn upstream's protocol v0 ref advertisement (the body of GET
 * .../info/refs?service=git-upload-pack) into the SHIMBRIDGE_UPSTREAM_REFS message:
 * its heads and tags as "<oid> <ref>" lines between "refs" and "end".
 */
int
profile_git_refs(const unsigned char *adv, size_t len, char **out, size_t *outlen)
{
	static const char svc[] = "# service=git-upload-pack\n";
	const char *p = (const char *)adv, *end = p + len, *line, *sp, *nul;
	size_t n, cap = GITC_REFS_MAX, olen = 0, oidlen, i;
	char *o = NULL;
	int pl, section = 0, first = 1;

	*out = NULL;
	*outlen = 0;
	o = xmalloc(cap);
	memcpy(o, "refs\n", 5);
	olen = 5;
	for (;;) {
		if (end - p < 4 || (pl = valid_pkt_len(p)) < 0 || pl == 1 || pl == 2 ||
		    pl == 3 || pl > 65520 || (pl > 0 && end - p < pl))
			goto bad;
		if (pl == 0) {			/* flush: the end of a section */
			p += 4;
			if (++section == 2)
				break;
			continue;
		}
		line = p + 4;
		n = (size_t)pl - 4;
		p += pl;
		if (n > 0 && line[n - 1] == '\n')
			n--;
		if (section == 0) {
			if (n != sizeof svc - 2 || memcmp(line, svc, n) != 0)
				goto bad;
			continue;
		}
		/* "<oid> <ref>[\0<capabilities>]" (capabilities on the first only). */
		if ((nul = memchr(line, '\0', n)) != NULL) {
			if (!first)
				goto bad;
			n = (size_t)(nul - line);
		}
		first = 0;
		if ((sp = memchr(line, ' ', n)) == NULL)
			goto bad;
		oidlen = (size_t)(sp - line);
		if (oidlen != 40 && oidlen != 64)
			goto bad;
		for (i = 0; i < oidlen; i++) {
			if (!((line[i] >= '0' && line[i] <= '9') || (line[i] >= 'a' && line[i] <= 'f')))
				goto bad;
		}
		n -= oidlen + 1;
		sp++;
		if ((n > 11 && memcmp(sp, "refs/heads/", 11) == 0) ||
		    (n > 10 && memcmp(sp, "refs/tags/", 10) == 0)) {
			if (memcmp(sp + n - 3, "^{}", 3) == 0)
				continue;	/* a peeled tag: not a ref of its own */
			if (!profile_git_refname_ok(sp, n))
				goto bad;
			if (olen + oidlen + 1 + n + 1 + 4 > cap)
				goto bad;	/* too many: shimbridge-git fetches instead */
			memcpy(o + olen, line, oidlen + 1);
			memcpy(o + olen + oidlen + 1, sp, n);
			olen += oidlen + 1 + n;
			o[olen++] = '\n';
		}
	}
	if (p != end)
		goto bad;
	memcpy(o + olen, "end\n", 4);
	*out = o;
	*outlen = olen + 4;
	return 0;
bad:
	free(o);
	return -1;
}

char *
profile_git_head(const unsigned char *adv, size_t len)
{
	static const char cap[] = "symref=HEAD:refs/heads/";
	const char *p = (const char *)adv, *end = p + len, *line, *nul, *c, *e;
	size_t n, w;
	int pl, section = 0;

	while (end - p >= 4 && (pl = valid_pkt_len(p)) >= 0) {
		if (pl == 0) {
			p += 4;
			if (++section == 2)
				return NULL;
			continue;
		}
		if (pl < 4 || end - p < pl)
			return NULL;
		line = p + 4;
		n = (size_t)pl - 4;
		p += pl;
		if (section == 0)
			continue;	/* "# service=git-upload-pack" */
		/* The first ref: "<oid> <ref>\0<capabilities>\n". */
		if ((nul = memchr(line, '\0', n)) == NULL)
			return NULL;
		c = nul + 1;
		e = line + n;
		if (e > c && e[-1] == '\n')
			e--;
		while (c < e) {
			const char *sp = memchr(c, ' ', (size_t)(e - c));

			w = sp != NULL ? (size_t)(sp - c) : (size_t)(e - c);
			/* "symref=HEAD:" is 12 bytes; then refs/heads/NAME. */
			if (w > sizeof cap - 1 && memcmp(c, cap, sizeof cap - 1) == 0 &&
			    profile_git_refname_ok(c + 12, w - 12) &&
			    w - (sizeof cap - 1) <= GITC_ASK_LINE_MAX)
				return xstrndup(c + sizeof cap - 1, w - (sizeof cap - 1));
			c += w + 1;
		}
		return NULL;
	}
	return NULL;
}

/* Whether a branch (without refs/heads/) matches git.ask_branches. */
int
profile_git_asks(const struct config *c, const char *branch)
{
	size_t i;

	for (i = 0; i < c->nask_branches; i++) {
		if (fnmatch(c->ask_branches[i], branch, 0) == 0)
			return 1;
	}
	return 0;
}

/*
 * Parse the text of an "A" record (common/gitcontract.h): "<kind> <old> <new>
 * refs/heads/<branch>". The runner wrote it, so everything is checked: a known
 * kind that agrees with the object names (create: old is zero; delete: new is
 * zero; never both), hex names of one length (40 or 64), and a branch of
 * printable ASCII without spaces, at most GITC_ASK_LINE_MAX bytes in all, that
 * git could name (no "..", no leading '-' or '/', no trailing '/' or ".lock").
 */
int
profile_git_ask_parse(const char *p, size_t len, struct profile_git_update *u)
{
	static const char *const kinds[] = { GITC_ASK_UPDATE, GITC_ASK_CREATE,
	    GITC_ASK_FORCE, GITC_ASK_DELETE };
	const char *sp, *end = p + len, *b;
	size_t i, n, hl, bl;
	int ozero, nzero;

	memset(u, 0, sizeof *u);
	if (len > GITC_ASK_LINE_MAX)
		return -1;
	for (i = 0; i < sizeof kinds / sizeof kinds[0] && u->kind == NULL; i++) {
		n = strlen(kinds[i]);
		if (len > n && memcmp(p, kinds[i], n) == 0 && p[n] == ' ')
			u->kind = kinds[i];
	}
	if (u->kind == NULL)
		goto bad;
	p += strlen(u->kind) + 1;
	if ((sp = memchr(p, ' ', (size_t)(end - p))) == NULL)
		goto bad;
	hl = (size_t)(sp - p);
	if ((hl != 40 && hl != 64) || (size_t)(end - sp) < hl + 2 || sp[hl + 1] != ' ' ||
	    !valid_hex_lower(p, hl) || !valid_hex_lower(sp + 1, hl))
		goto bad;
	memcpy(u->old, p, hl);
	memcpy(u->new, sp + 1, hl);
	b = sp + 1 + hl + 1;
	bl = (size_t)(end - b);
	if (bl <= 11 || memcmp(b, "refs/heads/", 11) != 0)
		goto bad;
	b += 11;
	bl -= 11;
	for (i = 0; i < bl; i++) {
		if ((unsigned char)b[i] <= 0x20 || (unsigned char)b[i] >= 0x7f)
			goto bad;
	}
	memcpy(u->branch, b, bl);
	if (u->branch[0] == '-' || u->branch[0] == '/' || u->branch[bl - 1] == '/' ||
	    strstr(u->branch, "..") != NULL || strstr(u->branch, "//") != NULL ||
	    (bl >= 5 && strcmp(u->branch + bl - 5, ".lock") == 0) ||
	    strcmp(u->branch, "HEAD") == 0)
		goto bad;
	ozero = u->old[strspn(u->old, "0")] == '\0';
	nzero = u->new[strspn(u->new, "0")] == '\0';
	if ((ozero && nzero) || ozero != (strcmp(u->kind, GITC_ASK_CREATE) == 0) ||
	    nzero != (strcmp(u->kind, GITC_ASK_DELETE) == 0))
		goto bad;
	return 0;
bad:
	memset(u, 0, sizeof *u);
	return -1;
}

/*
 * The push as the operator sees it, in git's own syntax, and what "identical"
 * means for --for: "git push https://HOST/OWNER/NAME BRANCH +FORCED :DELETED"
 * (*command) and a JSON key of the session's repository and the same list (*key).
 */
void
profile_git_ask_command(const char *host, const char *repo,
    const struct profile_git_update *u, size_t n, char **command, char **key)
{
	json_t *k = json_array();
	char *cmd, *item, *next;
	size_t i;

	xasprintf(&cmd, "git push https://%s/%s", host, repo);
	xasprintf(&item, "%s/%s", host, repo);
	json_array_append_new(k, json_string("git push"));
	json_array_append_new(k, json_string(item));
	free(item);
	for (i = 0; i < n; i++) {
		xasprintf(&item, "%s%s", strcmp(u[i].kind, GITC_ASK_FORCE) == 0 ? "+" :
		    strcmp(u[i].kind, GITC_ASK_DELETE) == 0 ? ":" : "", u[i].branch);
		xasprintf(&next, "%s %s", cmd, item);
		free(cmd);
		cmd = next;
		json_array_append_new(k, json_string(item));
		free(item);
	}
	*command = cmd;
	*key = json_dumps(k, JSON_COMPACT);
	json_decref(k);
	if (*key == NULL)		/* jansson out of memory: the command says as much */
		*key = xstrdup(cmd);
}
