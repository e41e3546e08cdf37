/*
 * Configuration loading and validation. Unknown keys are errors: a typo in a
 * security policy must fail loudly, not be ignored. Every message names the file
 * and the location of the problem.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "config.h"
#include "ghapp.h"
#include "profile.h"
#include "proto.h"
#include "keyring.h"
#include "secret.h"
#include "store.h"
#include "util.h"
#include "valid.h"

#define CONFIG_MAX_BYTES	(1024 * 1024)
#define CONFIG_MAX_FILES	4096
#define OVERFLOW_UID		65534

#define DEF_SOCKET		"/run/shimbridge/bridge.sock"
#define DEF_AUDIT		"/var/log/shimbridge/audit.log"
#define DEF_STATE		"/var/lib/shimbridge"
#define DEF_RUNNER		"shimbridge-runner"

/* Loader state: the file being read, for messages. */
struct loader {
	const char	*file;
	char		*cause;
	crypto_generichash_state *hash;	/* over every file read: the config version */
};

/* Record the first error as "file: where: message". */
static int __attribute__((format(printf, 3, 4)))
lerr(struct loader *l, const char *where, const char *fmt, ...)
{
	char *msg;
	va_list ap;

	if (l->cause != NULL)
		return -1;
	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	if (where != NULL && *where != '\0')
		xasprintf(&l->cause, "%s: %s: %s", l->file, where, msg);
	else
		xasprintf(&l->cause, "%s: %s", l->file, msg);
	free(msg);
	return -1;
}

/* Join a location and a key: "tools" + "gh" -> "tools.gh". */
static char *
at(const char *where, const char *key)
{
	char *s;

	if (where == NULL || *where == '\0')
		return xstrdup(key);
	xasprintf(&s, "%s.%s", where, key);
	return s;
}

/* Join a location and an index: "rules" + 3 -> "rules[3]". */
static char *
at_index(const char *where, size_t i)
{
	char *s;

	xasprintf(&s, "%s[%zu]", where, i);
	return s;
}

/* Refuse keys not in the allowed list. */
static int
check_keys(struct loader *l, json_t *obj, const char *where, const char *const *allowed)
{
	const char *key;
	json_t *v;
	size_t i;

	json_object_foreach(obj, key, v) {
		for (i = 0; allowed[i] != NULL; i++) {
			if (strcmp(key, allowed[i]) == 0)
				break;
		}
		if (allowed[i] == NULL) {
			char *w = at(where, key);

			lerr(l, w, "unknown key (allowed here: see docs/CONFIG.md)");
			free(w);
			return -1;
		}
	}
	return 0;
}

/* Optional string member; *out stays as it is when absent. */
static int
get_str(struct loader *l, json_t *obj, const char *where, const char *key, char **out)
{
	json_t *v = json_object_get(obj, key);
	char *w;

	if (v == NULL)
		return 0;
	if (!json_is_string(v) || json_string_length(v) == 0 ||
	    json_string_length(v) > PATH_MAX) {
		w = at(where, key);
		lerr(l, w, "expected a non-empty string");
		free(w);
		return -1;
	}
	free(*out);
	*out = xstrdup(json_string_value(v));
	return 0;
}

/* Optional integer member within [min, max]. */
static int
get_int(struct loader *l, json_t *obj, const char *where, const char *key, long long min,
    long long max, long long *out)
{
	json_t *v = json_object_get(obj, key);
	char *w;

	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
		w = at(where, key);
		lerr(l, w, "expected an integer from %lld to %lld", min, max);
		free(w);
		return -1;
	}
	*out = json_integer_value(v);
	return 0;
}

/* Optional array of non-empty strings. */
static int
get_strv(struct loader *l, json_t *obj, const char *where, const char *key, size_t maxn,
    char ***out, size_t *nout)
{
	json_t *v = json_object_get(obj, key), *e;
	size_t i;
	char *w;

	if (v == NULL)
		return 0;
	w = at(where, key);
	if (!json_is_array(v) || json_array_size(v) > maxn) {
		lerr(l, w, "expected an array of at most %zu strings", maxn);
		free(w);
		return -1;
	}
	*out = xcalloc(json_array_size(v) + 1, sizeof **out);
	*nout = 0;
	json_array_foreach(v, i, e) {
		if (!json_is_string(e) || json_string_length(e) == 0 ||
		    json_string_length(e) > 4096) {
			char *wi = at_index(w, i);

			lerr(l, wi, "expected a non-empty string");
			free(wi);
			free(w);
			return -1;
		}
		(*out)[(*nout)++] = xstrdup(json_string_value(e));
	}
	free(w);
	return 0;
}

/* Names: 1-64 chars of [A-Za-z0-9_.-], not starting with '.' or '-'. */
static int
valid_name(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > REQ_MAX_NAME || s[0] == '.' || s[0] == '-')
		return 0;
	for (i = 0; i < n; i++) {
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
			return 0;
	}
	return 1;
}

/* Environment variable names: [A-Za-z_][A-Za-z0-9_]*. */
static int
valid_env_name(const char *s)
{
	size_t i;

	if (!isalpha((unsigned char)s[0]) && s[0] != '_')
		return 0;
	for (i = 1; s[i] != '\0'; i++) {
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return 0;
	}
	return i <= 128;
}

/* Open a config file and check it is a root-owned regular file nobody else may write. */
static int
config_open(struct loader *l, const char *path, char **text, size_t *len)
{
	struct stat st;
	ssize_t n;
	size_t off = 0;
	int fd;

	*text = NULL;
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) < 0)
		return lerr(l, NULL, "cannot open: %s", strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return lerr(l, NULL, "not a regular file");
	}
	if (st.st_uid != 0) {
		close(fd);
		return lerr(l, NULL, "must be owned by root (owner uid is %u)", (unsigned)st.st_uid);
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		close(fd);
		return lerr(l, NULL, "must not be group- or world-writable (mode %04o)",
		    (unsigned)(st.st_mode & 07777));
	}
	if (st.st_size > CONFIG_MAX_BYTES) {
		close(fd);
		return lerr(l, NULL, "larger than %d bytes", CONFIG_MAX_BYTES);
	}
	*text = xmalloc((size_t)st.st_size + 1);
	while (off < (size_t)st.st_size) {
		n = read(fd, *text + off, (size_t)st.st_size - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	close(fd);
	*len = off;
	(*text)[off] = '\0';
	return 0;
}

/* Parse JSON text, turning syntax errors into file:line:column messages. */
static json_t *
config_parse(struct loader *l, const char *text, size_t len)
{
	json_error_t je;
	json_t *root;

	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL) {
		lerr(l, NULL, "line %d column %d: %s", je.line, je.column, je.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		lerr(l, NULL, "the top level must be a JSON object");
		return NULL;
	}
	return root;
}

/*
 * Parse one argv rule: {"allow": [...]}, {"deny": [...]} or {"ask": [...]}, optional
 * "reason"; an ask rule may give its own "timeout" in seconds.
 */
static int
parse_rule(struct loader *l, json_t *obj, const char *where, struct rule *r)
{
	static const char *const keys[] = { "allow", "deny", "ask", "reason", "timeout", NULL };
	json_t *allow = json_object_get(obj, "allow"), *deny = json_object_get(obj, "deny");
	json_t *ask = json_object_get(obj, "ask");
	const char *key;
	long long v = 0;
	size_t i;

	if (!json_is_object(obj))
		return lerr(l, where, "a rule must be an object");
	if (check_keys(l, obj, where, keys) != 0)
		return -1;
	if ((allow != NULL) + (deny != NULL) + (ask != NULL) != 1)
		return lerr(l, where, "a rule has exactly one of \"allow\", \"deny\" or \"ask\"");
	r->allow = allow != NULL;
	r->ask = ask != NULL;
	key = r->allow ? "allow" : r->ask ? "ask" : "deny";
	if (get_strv(l, obj, where, key, 64, &r->argv, &r->nargv) != 0)
		return -1;
	for (i = 0; i < r->nargv; i++) {
		if (strcmp(r->argv[i], "**") == 0 && i != r->nargv - 1)
			return lerr(l, where, "\"**\" may only be the last pattern of a rule");
	}
	if (get_str(l, obj, where, "reason", &r->reason) != 0)
		return -1;
	if (json_object_get(obj, "timeout") != NULL && !r->ask)
		return lerr(l, where, "\"timeout\" belongs to \"ask\" rules only");
	if (get_int(l, obj, where, "timeout", 1, 86400, &v) != 0)
		return -1;
	r->timeout = (int)v;
	r->where = xstrdup(where);
	return 0;
}

/* Parse an absolute path member that must name an executable regular file. */
static int
get_exec_path(struct loader *l, json_t *obj, const char *where, const char *key, char **out)
{
	struct stat st;
	char *w;

	if (get_str(l, obj, where, key, out) != 0)
		return -1;
	if (*out == NULL)
		return 0;
	w = at(where, key);
	if ((*out)[0] != '/') {
		lerr(l, w, "must be an absolute path");
		free(w);
		return -1;
	}
	if (stat(*out, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0) {
		lerr(l, w, "%s is not an executable file", *out);
		free(w);
		return -1;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		lerr(l, w, "%s is group- or world-writable; refusing to run it", *out);
		free(w);
		return -1;
	}
	free(w);
	return 0;
}

/* An optional CA bundle path ("ca_file"): absolute, a regular file. */
static int
get_ca_file(struct loader *l, json_t *obj, const char *where, char **out)
{
	struct stat st;
	char *w;
	int rc = -1;

	if (get_str(l, obj, where, "ca_file", out) != 0)
		return -1;
	if (*out == NULL)
		return 0;
	w = at(where, "ca_file");
	if ((*out)[0] != '/')
		lerr(l, w, "must be an absolute path to a PEM CA bundle");
	else if (stat(*out, &st) != 0 || !S_ISREG(st.st_mode))
		lerr(l, w, "%s is not a readable file (a PEM bundle of the CA that signed "
		    "the host's certificate)", *out);
	else
		rc = 0;
	free(w);
	return rc;
}

/* Parse one tool. */
static int
parse_tool(struct loader *l, const char *name, json_t *obj, struct tool *t)
{
	static const char *const keys[] = { "path", "profile", "cwd", "rules", "deny_args",
	    "env", "secrets", "timeout", "output_limit", "help", "host", "ca_file", "network",
	    "expose", NULL };
	char *where = at("tools", name), *s = NULL, *w = NULL;
	long long v;
	json_t *rules, *e, *env;
	const char *k;
	size_t i;
	int rc = -1;

	t->name = xstrdup(name);
	t->timeout = 600;
	t->output_limit = 256ULL * 1024 * 1024;
	if (!valid_name(name)) {
		lerr(l, where, "tool names are 1-64 characters of A-Z a-z 0-9 _ . -");
		goto out;
	}
	if (!json_is_object(obj)) {
		lerr(l, where, "expected an object");
		goto out;
	}
	if (check_keys(l, obj, where, keys) != 0)
		goto out;
	if (get_exec_path(l, obj, where, "path", &t->path) != 0)
		goto out;
	if (t->path == NULL) {
		lerr(l, where, "\"path\" is required");
		goto out;
	}
	if (get_str(l, obj, where, "profile", &s) != 0)
		goto out;
	t->profile = s == NULL ? profile_generic() : profile_find(s);
	if (t->profile == NULL || t->profile->op != NULL) {
		/* git's profile serves op "git" (the "git" section), never a tool. */
		lerr(l, where, "profile must be one of %s%s", profile_names(),
		    t->profile != NULL ? " (git is configured in the \"git\" section)" : "");
		goto out;
	}
	free(s);
	s = NULL;
	if (get_str(l, obj, where, "cwd", &s) != 0)
		goto out;
	if (s == NULL || strcmp(s, "scratch") == 0)
		t->cwd = CWD_SCRATCH;
	else if (strcmp(s, "workspace") == 0)
		t->cwd = CWD_WORKSPACE;
	else {
		lerr(l, where, "cwd must be \"scratch\" or \"workspace\"");
		goto out;
	}
	free(s);
	s = NULL;
	if (get_str(l, obj, where, "network", &s) != 0)
		goto out;
	/* An injected tool (gh) reaches its host only through the injector's socket. */
	if (s == NULL)
		t->network = t->profile->inject ? TOOL_NET_NONE : TOOL_NET_HOST;
	else if (strcmp(s, "host") == 0)
		t->network = TOOL_NET_HOST;
	else if (strcmp(s, "none") == 0)
		t->network = TOOL_NET_NONE;
	else {
		lerr(l, where, "network must be \"host\" or \"none\"");
		goto out;
	}
	v = t->timeout;
	if (get_int(l, obj, where, "timeout", 1, 86400, &v) != 0)
		goto out;
	t->timeout = (int)v;
	v = (long long)t->output_limit;
	if (get_int(l, obj, where, "output_limit", 1, 1LL << 40, &v) != 0)
		goto out;
	t->output_limit = (uint64_t)v;
	if (get_str(l, obj, where, "help", &t->help) != 0 ||
	    get_str(l, obj, where, "host", &t->host) != 0 ||
	    get_ca_file(l, obj, where, &t->ca_file) != 0)
		goto out;
	if (t->host != NULL && !(t->profile->keys & PROFILE_KEY_HOST)) {
		lerr(l, where, "\"host\" is for tools with the gh profile");
		goto out;
	}
	if (t->ca_file != NULL && !(t->profile->keys & PROFILE_KEY_CA_FILE)) {
		lerr(l, where, "\"ca_file\" is for tools with the gh profile");
		goto out;
	}

	if (get_strv(l, obj, where, "deny_args", 256, &t->deny_args, &t->ndeny_args) != 0)
		goto out;
	if (get_strv(l, obj, where, "expose", TOOL_EXPOSE_MAX, &t->expose, &t->nexpose) != 0)
		goto out;
	for (i = 0; i < t->nexpose; i++) {
		if (t->expose[i][0] != '/' || strstr(t->expose[i], "/../") != NULL ||
		    strcmp(t->expose[i], "/") == 0) {
			lerr(l, where, "expose: %s must be an absolute path without .. (not /)",
			    t->expose[i]);
			goto out;
		}
	}

	rules = json_object_get(obj, "rules");
	if (rules != NULL) {
		w = at(where, "rules");
		if (!json_is_array(rules) || json_array_size(rules) > 1024) {
			lerr(l, w, "expected an array of at most 1024 rules");
			goto out;
		}
		t->rules = xcalloc(json_array_size(rules), sizeof *t->rules);
		json_array_foreach(rules, i, e) {
			char *wi = at_index(w, i);
			int r = parse_rule(l, e, wi, &t->rules[t->nrules++]);

			free(wi);
			if (r != 0)
				goto out;
		}
		free(w);
		w = NULL;
	} else
		profile_default_rules(t);

	env = json_object_get(obj, "env");
	if (env != NULL) {
		w = at(where, "env");
		if (!json_is_object(env) || json_object_size(env) > 64) {
			lerr(l, w, "expected an object of at most 64 NAME: value strings");
			goto out;
		}
		t->env = xcalloc(json_object_size(env), sizeof *t->env);
		json_object_foreach(env, k, e) {
			if (!valid_env_name(k) || !json_is_string(e)) {
				lerr(l, w, "%s: expected a valid variable name with a string value", k);
				goto out;
			}
			t->env[t->nenv].name = xstrdup(k);
			t->env[t->nenv++].value = xstrdup(json_string_value(e));
		}
		free(w);
		w = NULL;
	}

	env = json_object_get(obj, "secrets");
	if (env != NULL) {
		w = at(where, "secrets");
		if (!json_is_object(env) || json_object_size(env) > 16) {
			lerr(l, w, "expected an object of at most 16 VARIABLE: secret-name strings");
			goto out;
		}
		t->secrets = xcalloc(json_object_size(env), sizeof *t->secrets);
		json_object_foreach(env, k, e) {
			if (!valid_env_name(k) || !json_is_string(e) ||
			    !valid_name(json_string_value(e))) {
				lerr(l, w, "%s: expected a variable name mapped to a secret name", k);
				goto out;
			}
			/* The host decides the variable: gh ignores any other. */
			if (t->profile->secret_var != NULL && strcmp(k,
			    t->profile->secret_var(profile_host(t))) != 0) {
				const char *want = t->profile->secret_var(profile_host(t));

				lerr(l, w, "%s is the wrong variable for host %s: %s reads its "
				    "token from %s there (GH_TOKEN for github.com, "
				    "GH_ENTERPRISE_TOKEN for any other host) and would send no "
				    "token. Fix: \"secrets\": {\"%s\": \"%s\"}", k,
				    profile_host(t), t->profile->name, want, want,
				    json_string_value(e));
				goto out;
			}
			t->secrets[t->nsecrets].var = xstrdup(k);
			t->secrets[t->nsecrets++].secret = xstrdup(json_string_value(e));
		}
		free(w);
		w = NULL;
	}
	rc = 0;
out:
	free(s);
	free(w);
	free(where);
	return rc;
}

/* Parse a secrets object (host-wide or a session's overrides). */
static int
parse_secrets(struct loader *l, json_t *obj, const char *where, struct secret_src **out,
    size_t *nout)
{
	const char *k;
	json_t *e;

	if (obj == NULL)
		return 0;
	if (!json_is_object(obj) || json_object_size(obj) > 256)
		return lerr(l, where, "expected an object of at most 256 secrets");
	*out = xcalloc(json_object_size(obj), sizeof **out);
	json_object_foreach(obj, k, e) {
		char *w = at(where, k), *cause = NULL;

		if (!valid_name(k)) {
			lerr(l, w, "secret names are 1-64 characters of A-Z a-z 0-9 _ . -");
			free(w);
			return -1;
		}
		if (secret_parse(e, k, w, &(*out)[*nout], &cause) != 0) {
			secret_clear(&(*out)[*nout]);	/* the half-parsed entry is not counted */
			lerr(l, w, "%s", cause);
			free(cause);
			free(w);
			return -1;
		}
		(*nout)++;
		free(w);
	}
	return 0;
}

/* Parse one session object (inline or from a drop-in file). */
static int
parse_session(struct loader *l, json_t *obj, const char *where, struct session *s)
{
	static const char *const keys[] = { "name", "user", "uid", "workspace", "tools",
	    "repos", "secrets", "max_concurrent", "runner", NULL };
	long long uid = -1, mc = 0;
	char *ws = NULL, *w;
	size_t i;
	int rc = -1;

	if (!json_is_object(obj))
		return lerr(l, where, "a session must be an object");
	if (check_keys(l, obj, where, keys) != 0)
		return -1;
	if (get_str(l, obj, where, "name", &s->name) != 0)
		return -1;
	if (s->name == NULL || !valid_name(s->name))
		return lerr(l, where, "\"name\" is required: 1-64 characters of A-Z a-z 0-9 _ . -");
	w = at(where, s->name);
	if (get_str(l, obj, w, "user", &s->user) != 0 ||
	    get_str(l, obj, w, "runner", &s->runner) != 0 ||
	    get_int(l, obj, w, "uid", 0, UINT32_MAX - 1, &uid) != 0 ||
	    get_str(l, obj, w, "workspace", &ws) != 0 ||
	    get_strv(l, obj, w, "tools", 64, &s->tools, &s->ntools) != 0 ||
	    get_strv(l, obj, w, "repos", 1024, &s->repos, &s->nrepos) != 0 ||
	    get_int(l, obj, w, "max_concurrent", 1, 100000, &mc) != 0)
		goto out;
	if ((s->user == NULL) == (uid < 0)) {
		lerr(l, w, "give exactly one of \"user\" or \"uid\"");
		goto out;
	}
	if (s->user != NULL) {
		struct passwd *pw = getpwnam(s->user);

		if (pw == NULL) {
			lerr(l, w, "user %s does not exist", s->user);
			goto out;
		}
		s->uid = pw->pw_uid;
	} else
		s->uid = (uid_t)uid;
	if (s->uid == 0 || s->uid == OVERFLOW_UID) {
		lerr(l, w, "a session cannot be root or the overflow uid %d", OVERFLOW_UID);
		goto out;
	}
	if (ws != NULL) {
		char real[PATH_MAX];

		if (ws[0] != '/' || realpath(ws, real) == NULL) {
			lerr(l, w, "workspace %s must be an existing absolute path", ws);
			goto out;
		}
		s->workspace = xstrdup(real);
	}
	for (i = 0; i < s->nrepos; i++) {
		if (!valid_repo(s->repos[i])) {
			lerr(l, w, "repos: %s is not OWNER/NAME", s->repos[i]);
			goto out;
		}
	}
	s->max_concurrent = (int)mc;
	{
		char *ws2 = at(w, "secrets");

		rc = parse_secrets(l, json_object_get(obj, "secrets"), ws2, &s->secrets,
		    &s->nsecrets);
		free(ws2);
		if (rc != 0)
			goto out;
	}
	s->file = xstrdup(l->file);
	rc = 0;
out:
	free(ws);
	free(w);
	return rc;
}

static void config_warn(struct config *, const char *, ...)
    __attribute__((format(printf, 2, 3)));

/* A git branch list item: a plain name without refs/heads/, nothing a glob could mean. */
static int
config_git_branch_ok(const char *b)
{
	size_t i;

	if (b[0] == '-' || strncmp(b, "refs/", 5) == 0 || strstr(b, "..") != NULL ||
	    strpbrk(b, " ~^:?*[\\,") != NULL)
		return 0;
	for (i = 0; b[i] != '\0'; i++) {
		if ((unsigned char)b[i] < 0x20 || b[i] == 0x7f)
			return 0;
	}
	return 1;
}

/* A protected tag: a name or fnmatch(3) pattern without refs/tags/. */
static int
config_git_tag_ok(const char *t)
{
	size_t i;

	if (t[0] == '-' || strncmp(t, "refs/", 5) == 0 || strstr(t, "..") != NULL ||
	    strpbrk(t, " ~^:\\,") != NULL)
		return 0;
	for (i = 0; t[i] != '\0'; i++) {
		if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f)
			return 0;
	}
	return 1;
}

/* One of the git section's lists: replaces the default if given; items checked by ok. */
static int
parse_git_list(struct loader *l, json_t *obj, const char *key, int (*ok)(const char *),
    char ***v, size_t *n)
{
	size_t i;

	if (json_object_get(obj, key) == NULL)
		return 0;
	while (*n > 0)		/* the defaults */
		free((*v)[--*n]);
	free(*v);
	*v = NULL;
	if (get_strv(l, obj, "git", key, 256, v, n) != 0)
		return -1;
	for (i = 0; i < *n; i++) {
		if ((*v)[i][0] == '\0' || strchr((*v)[i], ',') != NULL ||
		    (ok != NULL && !ok((*v)[i])))
			return lerr(l, "git", "%s: \"%s\" is not a valid %s", key, (*v)[i],
			    strcmp(key, "ask_branches") == 0 ? "branch name or pattern (without "
			    "refs/heads/)" : ok == config_git_tag_ok ? "tag name or pattern" :
			    ok != NULL ? "branch name (without refs/heads/)" : "path");
	}
	return 0;
}

/* Parse the "git" section. */
static int
parse_git(struct loader *l, json_t *obj, struct config *c)
{
	static const char *const keys[] = { "path", "helper", "hosts", "protected_branches",
	    "ff_only_branches", "no_push_branches", "protected_tags", "deny_paths", "timeout",
	    "ask_branches", "ask_timeout", NULL };
	static const char *const hkeys[] = { "upstream", "secret", "username", "ca_file", NULL };
	json_t *hosts, *h;
	const char *k, *ffkey = "ff_only_branches";
	long long v = c->git_timeout, ask = c->git_ask_timeout;

	if (obj == NULL)
		return 0;
	if (!json_is_object(obj))
		return lerr(l, "git", "expected an object");
	if (check_keys(l, obj, "git", keys) != 0 ||
	    get_exec_path(l, obj, "git", "path", &c->git_path) != 0 ||
	    get_exec_path(l, obj, "git", "helper", &c->git_helper) != 0 ||
	    get_int(l, obj, "git", "timeout", 1, 86400, &v) != 0 ||
	    get_int(l, obj, "git", "ask_timeout", 1, 86400, &ask) != 0)
		return -1;
	c->git_timeout = (int)v;
	c->git_ask_timeout = (int)ask;
	/* protected_branches is the old name of ff_only_branches. */
	if (json_object_get(obj, "protected_branches") != NULL) {
		if (json_object_get(obj, ffkey) != NULL)
			return lerr(l, "git", "give \"ff_only_branches\" or its old name "
			    "\"protected_branches\", not both");
		ffkey = "protected_branches";
		config_warn(c, "git.protected_branches is the old name of git.ff_only_branches "
		    "(fast-forward pushes only: no force, no delete); rename it, and see "
		    "git.no_push_branches for branches that take no direct push at all");
	}
	if (parse_git_list(l, obj, ffkey, config_git_branch_ok, &c->protected_branches,
	    &c->nprotected_branches) != 0 ||
	    parse_git_list(l, obj, "no_push_branches", config_git_branch_ok,
	    &c->no_push_branches, &c->nno_push_branches) != 0 ||
	    parse_git_list(l, obj, "protected_tags", config_git_tag_ok, &c->protected_tags,
	    &c->nprotected_tags) != 0 ||
	    parse_git_list(l, obj, "deny_paths", NULL, &c->deny_paths, &c->ndeny_paths) != 0 ||
	    parse_git_list(l, obj, "ask_branches", config_git_tag_ok, &c->ask_branches,
	    &c->nask_branches) != 0)
		return -1;
	hosts = json_object_get(obj, "hosts");
	if (hosts == NULL)
		return 0;
	if (!json_is_object(hosts) || json_object_size(hosts) > 64)
		return lerr(l, "git.hosts", "expected an object of at most 64 hosts");
	c->git_hosts = xcalloc(json_object_size(hosts), sizeof *c->git_hosts);
	json_object_foreach(hosts, k, h) {
		struct git_host *gh = &c->git_hosts[c->ngit_hosts++];
		char *w = at("git.hosts", k);
		int bad;

		gh->name = xstrdup(k);
		bad = !json_is_object(h) || check_keys(l, h, w, hkeys) != 0 ||
		    get_str(l, h, w, "upstream", &gh->upstream) != 0 ||
		    get_str(l, h, w, "secret", &gh->secret) != 0 ||
		    get_str(l, h, w, "username", &gh->username) != 0 ||
		    get_ca_file(l, h, w, &gh->ca_file) != 0;
		if (!bad && (gh->upstream == NULL || (strncmp(gh->upstream, "https://", 8) != 0 &&
		    strncmp(gh->upstream, "http://", 7) != 0)))
			bad = lerr(l, w, "\"upstream\" must be an http:// or https:// base URL");
		if (!bad && gh->secret == NULL)
			bad = lerr(l, w, "\"secret\" is required");
		free(w);
		if (bad)
			return lerr(l, "git.hosts", "invalid host entry %s", k);
		if (gh->username == NULL)
			gh->username = xstrdup(profile_git.default_username);
	}
	return 0;
}

/*
 * Parse "approval": {"timeout", "command": [argv], "user", "command_timeout"}. The
 * approver runs as a dedicated user: never root, the overflow uid, a session user
 * or a runner (checked in config_crosscheck, once sessions are known).
 */
static int
parse_approval(struct loader *l, json_t *obj, struct config *c)
{
	static const char *const keys[] = { "timeout", "command", "user", "command_timeout",
	    NULL };
	struct stat st;
	long long v;

	if (obj == NULL)
		return 0;
	if (!json_is_object(obj) || check_keys(l, obj, "approval", keys) != 0)
		return lerr(l, "approval", "expected an object");
	v = c->approval.timeout;
	if (get_int(l, obj, "approval", "timeout", 1, 86400, &v) != 0)
		return -1;
	c->approval.timeout = (int)v;
	v = c->approval.command_timeout;
	if (get_int(l, obj, "approval", "command_timeout", 1, 86400, &v) != 0)
		return -1;
	c->approval.command_timeout = (int)v;
	{
		size_t n = 0;

		if (get_strv(l, obj, "approval", "command", 64, &c->approval.command, &n) != 0)
			return -1;
		if (c->approval.command != NULL && n == 0)
			return lerr(l, "approval.command", "expected the program's absolute path "
			    "and its arguments");
	}
	if (get_str(l, obj, "approval", "user", &c->approval.user) != 0)
		return -1;
	if ((c->approval.command == NULL) != (c->approval.user == NULL))
		return lerr(l, "approval", "\"command\" and \"user\" go together: the "
		    "approver command runs as that dedicated user");
	if (c->approval.command != NULL && (c->approval.command[0][0] != '/' ||
	    stat(c->approval.command[0], &st) != 0 || !S_ISREG(st.st_mode) ||
	    !(st.st_mode & 0111)))
		return lerr(l, "approval.command", "%s must be an absolute path to an "
		    "executable file", c->approval.command[0]);
	return 0;
}

/* Parse the main file's top level. */
static int
parse_main(struct loader *l, json_t *root, struct config *c)
{
	static const char *const keys[] = { "socket", "runner", "audit_log", "state_dir",
	    "sessions_dir", "limits", "secrets", "tools", "sessions", "git", "store", "audit",
	    "approval", NULL };
	static const char *const akeys[] = { "syslog", "sign_key", "sign_key_credential",
	    "checkpoint_interval", NULL };
	static const char *const stkeys[] = { "path", "key", "key_credential", NULL };
	static const char *const skeys[] = { "path", "group", "mode", NULL };
	static const char *const lkeys[] = { "max_connections", "max_per_session",
	    "handshake_timeout", "kill_grace", "jail_pool", "scratch_tmpfs", NULL };
	json_t *sock, *lim, *tools, *sessions, *e;
	const char *k;
	long long v;
	size_t i;

	if (check_keys(l, root, "", keys) != 0)
		return -1;
	sock = json_object_get(root, "socket");
	if (sock != NULL) {
		if (!json_is_object(sock) || check_keys(l, sock, "socket", skeys) != 0)
			return lerr(l, "socket", "expected an object with path, group, mode");
		if (get_str(l, sock, "socket", "path", &c->socket_path) != 0 ||
		    get_str(l, sock, "socket", "group", &c->socket_group) != 0)
			return -1;
		v = c->socket_mode;
		if (get_int(l, sock, "socket", "mode", 0, 0777, &v) != 0)
			return -1;
		if (v & 0007)
			return lerr(l, "socket.mode", "the socket must not be accessible to others");
		c->socket_mode = (int)v;
	}
	if (c->socket_path[0] != '/')
		return lerr(l, "socket.path", "must be an absolute path");
	if (get_str(l, root, "", "runner", &c->runner) != 0 ||
	    get_str(l, root, "", "audit_log", &c->audit_path) != 0 ||
	    get_str(l, root, "", "state_dir", &c->state_dir) != 0 ||
	    get_str(l, root, "", "sessions_dir", &c->sessions_dir) != 0)
		return -1;
	if (c->audit_path[0] != '/' || c->state_dir[0] != '/' || c->sessions_dir[0] != '/')
		return lerr(l, NULL, "audit_log, state_dir and sessions_dir must be absolute paths");
	if ((e = json_object_get(root, "store")) != NULL) {
		if (!json_is_object(e) || check_keys(l, e, "store", stkeys) != 0 ||
		    get_str(l, e, "store", "path", &c->store_path) != 0 ||
		    get_str(l, e, "store", "key", &c->store_key) != 0 ||
		    get_str(l, e, "store", "key_credential", &c->store_key_credential) != 0)
			return lerr(l, "store", "expected {\"path\", \"key\" or \"key_credential\"}");
		if (c->store_key_credential != NULL) {
			free(c->store_key);
			c->store_key = NULL;
		}
		if (c->store_path[0] != '/' || (c->store_key != NULL && c->store_key[0] != '/'))
			return lerr(l, "store", "path and key must be absolute");
	}
	if ((e = json_object_get(root, "audit")) != NULL) {
		json_t *sl = json_is_object(e) ? json_object_get(e, "syslog") : NULL;

		if (!json_is_object(e) || check_keys(l, e, "audit", akeys) != 0 ||
		    (sl != NULL && !json_is_boolean(sl)))
			return lerr(l, "audit", "expected {\"syslog\": true or false, "
			    "\"sign_key\" or \"sign_key_credential\"}");
		c->audit_syslog = json_is_true(sl);
		if (get_str(l, e, "audit", "sign_key", &c->audit_sign_key) != 0 ||
		    get_str(l, e, "audit", "sign_key_credential", &c->audit_sign_key_credential) != 0)
			return -1;
		if (c->audit_sign_key != NULL && c->audit_sign_key[0] != '/')
			return lerr(l, "audit.sign_key", "must be an absolute path");
		if (c->audit_sign_key != NULL && c->audit_sign_key_credential != NULL)
			return lerr(l, "audit", "give sign_key or sign_key_credential, not both");
		v = c->audit_checkpoint_interval;
		if (get_int(l, e, "audit", "checkpoint_interval", 0, 86400, &v) != 0)
			return -1;
		c->audit_checkpoint_interval = (int)v;
		if (c->audit_sign_key_credential != NULL &&
		    (c->audit_sign_key_credential[0] == '\0' ||
		    strchr(c->audit_sign_key_credential, '/') != NULL))
			return lerr(l, "audit.sign_key_credential", "must be a credential name "
			    "without '/'");
	}
	lim = json_object_get(root, "limits");
	if (lim != NULL) {
		if (!json_is_object(lim) || check_keys(l, lim, "limits", lkeys) != 0)
			return lerr(l, "limits", "expected an object");
		v = c->max_connections;
		if (get_int(l, lim, "limits", "max_connections", 1, 100000, &v) != 0)
			return -1;
		c->max_connections = (int)v;
		v = c->max_per_session;
		if (get_int(l, lim, "limits", "max_per_session", 1, 100000, &v) != 0)
			return -1;
		c->max_per_session = (int)v;
		v = c->handshake_timeout;
		if (get_int(l, lim, "limits", "handshake_timeout", 1, 3600, &v) != 0)
			return -1;
		c->handshake_timeout = (int)v;
		v = c->kill_grace;
		if (get_int(l, lim, "limits", "kill_grace", 0, 600, &v) != 0)
			return -1;
		c->kill_grace = (int)v;
		v = c->jail_pool;
		if (get_int(l, lim, "limits", "jail_pool", 0, 64, &v) != 0)
			return -1;
		c->jail_pool = (int)v;
		v = c->scratch_tmpfs;
		if (get_int(l, lim, "limits", "scratch_tmpfs", 0, 1048576, &v) != 0)
			return -1;
		c->scratch_tmpfs = (int)v;
	}
	if (parse_secrets(l, json_object_get(root, "secrets"), "secrets", &c->secrets,
	    &c->nsecrets) != 0)
		return -1;
	tools = json_object_get(root, "tools");
	if (tools != NULL) {
		if (!json_is_object(tools) || json_object_size(tools) > 256)
			return lerr(l, "tools", "expected an object of at most 256 tools");
		c->tools = xcalloc(json_object_size(tools), sizeof *c->tools);
		json_object_foreach(tools, k, e) {
			if (parse_tool(l, k, e, &c->tools[c->ntools++]) != 0)
				return -1;
		}
	}
	if (parse_git(l, json_object_get(root, "git"), c) != 0 ||
	    parse_approval(l, json_object_get(root, "approval"), c) != 0)
		return -1;
	sessions = json_object_get(root, "sessions");
	if (sessions != NULL) {
		if (!json_is_array(sessions) || json_array_size(sessions) > CONFIG_MAX_FILES)
			return lerr(l, "sessions", "expected an array of session objects");
		c->sessions = xreallocarray(c->sessions, json_array_size(sessions),
		    sizeof *c->sessions);
		json_array_foreach(sessions, i, e) {
			char *w = at_index("sessions", i);
			int r;

			memset(&c->sessions[c->nsessions], 0, sizeof *c->sessions);
			r = parse_session(l, e, w, &c->sessions[c->nsessions++]);
			free(w);
			if (r != 0)
				return -1;
		}
	}
	return 0;
}

/* Sort helper for drop-in names. */
static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Load every sessions.d/NAME.json file, in name order. A missing directory is fine. */
static int
load_dropins(struct loader *l, struct config *c)
{
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, i;
	int rc = -1;
	DIR *d;

	if ((d = opendir(c->sessions_dir)) == NULL) {
		if (errno == ENOENT)
			return 0;
		l->file = c->sessions_dir;
		return lerr(l, NULL, "cannot open the drop-in directory: %s", strerror(errno));
	}
	{
		struct stat st;

		if (fstat(dirfd(d), &st) != 0 || st.st_uid != 0 ||
		    (st.st_mode & (S_IWGRP | S_IWOTH))) {
			closedir(d);
			l->file = c->sessions_dir;
			return lerr(l, NULL, "must be a root-owned directory nobody else may write");
		}
	}
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);

		if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		if (n >= CONFIG_MAX_FILES) {
			closedir(d);
			l->file = c->sessions_dir;
			lerr(l, NULL, "more than %d drop-in files", CONFIG_MAX_FILES);
			goto out;
		}
		names = xreallocarray(names, n + 1, sizeof *names);
		names[n++] = xstrdup(de->d_name);
	}
	closedir(d);
	if (n > 0)
		qsort(names, n, sizeof *names, cmp_str);
	for (i = 0; i < n; i++) {
		char *path, *text = NULL;
		json_t *root;
		size_t len;
		int r;

		xasprintf(&path, "%s/%s", c->sessions_dir, names[i]);
		l->file = path;
		if (config_open(l, path, &text, &len) != 0 ||
		    (root = config_parse(l, text, len)) == NULL) {
			free(text);
			free(path);
			l->file = c->sessions_dir;
			goto out;
		}
		crypto_generichash_update(l->hash, (unsigned char *)text, len);
		c->sessions = xreallocarray(c->sessions, c->nsessions + 1, sizeof *c->sessions);
		memset(&c->sessions[c->nsessions], 0, sizeof *c->sessions);
		r = parse_session(l, root, "", &c->sessions[c->nsessions++]);
		json_decref(root);
		free(text);
		free(path);
		l->file = c->sessions_dir;
		if (r != 0)
			goto out;
	}
	rc = 0;
out:
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* Add a non-fatal finding for --check and the log. */
static void __attribute__((format(printf, 2, 3)))
config_warn(struct config *c, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	c->warnings = xreallocarray(c->warnings, c->nwarnings + 1, sizeof *c->warnings);
	c->warnings[c->nwarnings++] = msg;
}

/* Find a secret source by name in a list. */
static struct secret_src *
find_secret(struct secret_src *v, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (strcmp(v[i].name, name) == 0)
			return &v[i];
	}
	return NULL;
}

/* Resolve a session's runner (its own or the global fallback). */
static int
config_session_runner(struct loader *l, struct config *c, struct session *s)
{
	struct passwd *pw;

	l->file = s->file;
	if (s->runner == NULL) {
		s->runner = xstrdup(c->runner);
		s->runner_uid = c->runner_uid;
		s->runner_gid = c->runner_gid;
		s->runner_own = 0;
		return 0;
	}
	if ((pw = getpwnam(s->runner)) == NULL)
		return lerr(l, s->name, "runner %s does not exist (shimbridge session add "
		    "creates it)", s->runner);
	s->runner_uid = pw->pw_uid;
	s->runner_gid = pw->pw_gid;
	if (s->runner_uid == 0 || s->runner_gid == 0)
		return lerr(l, s->name, "runner %s must not be root or in group root", s->runner);
	if (s->runner_uid == OVERFLOW_UID)
		return lerr(l, s->name, "runner %s must not be the overflow uid", s->runner);
	/* Naming the global runner is the fallback spelled out: shared, warned about. */
	s->runner_own = s->runner_uid != c->runner_uid;
	return 0;
}

/* Warn once about sessions sharing the global runner, naming them and what to do. */
static void
config_warn_shared_runner(struct config *c)
{
	char *names = NULL, *t;
	size_t i, n = 0;

	for (i = 0; i < c->nsessions; i++) {
		if (c->sessions[i].runner_own)
			continue;
		if (names == NULL)
			names = xstrdup(c->sessions[i].name);
		else {
			xasprintf(&t, "%s, %s", names, c->sessions[i].name);
			free(names);
			names = t;
		}
		n++;
	}
	if (n > 1)
		config_warn(c, "sessions %s share the global runner %s: give each session its "
		    "own runner (shimbridge session add NAME creates sb-NAME-run, or set "
		    "\"runner\" in the session's drop-in to a user of its own)", names, c->runner);
	free(names);
}

/*
 * The approver command's user: it exists and is a user of its own, never root, the
 * overflow uid, the global runner, a session user or a session's runner.
 */
static int
config_approver_user(struct loader *l, struct config *c)
{
	struct passwd *pw;
	size_t i;

	if (c->approval.user == NULL)
		return 0;
	if ((pw = getpwnam(c->approval.user)) == NULL)
		return lerr(l, "approval.user", "user %s does not exist", c->approval.user);
	c->approval.uid = pw->pw_uid;
	c->approval.gid = pw->pw_gid;
	if (pw->pw_uid == 0 || pw->pw_gid == 0 || pw->pw_uid == OVERFLOW_UID ||
	    pw->pw_uid == c->runner_uid)
		return lerr(l, "approval.user", "%s must be a dedicated user: not root, "
		    "group root, the overflow uid or the runner", c->approval.user);
	for (i = 0; i < c->nsessions; i++) {
		if (pw->pw_uid == c->sessions[i].uid || pw->pw_uid == c->sessions[i].runner_uid)
			return lerr(l, "approval.user", "%s is a user of session %s; the "
			    "approver must be a dedicated user", c->approval.user,
			    c->sessions[i].name);
	}
	return 0;
}

/* Checks across sections: users, references, uniqueness. */
static int
config_crosscheck(struct loader *l, struct config *c)
{
	struct passwd *pw;
	struct group *gr;
	size_t i, j, k;

	l->file = c->path;
	if ((pw = getpwnam(c->runner)) == NULL)
		return lerr(l, "runner", "user %s does not exist", c->runner);
	c->runner_uid = pw->pw_uid;
	c->runner_gid = pw->pw_gid;
	if (c->runner_uid == 0 || c->runner_gid == 0)
		return lerr(l, "runner", "the runner must not be root or in group root");
	if (c->runner_uid == OVERFLOW_UID)
		return lerr(l, "runner", "the runner must not be the overflow uid");
	c->socket_gid = 0;
	if (c->socket_group != NULL) {
		if ((gr = getgrnam(c->socket_group)) == NULL)
			return lerr(l, "socket.group", "group %s does not exist", c->socket_group);
		c->socket_gid = gr->gr_gid;
	}
	for (i = 0; i < c->ntools; i++) {
		for (j = 0; j < c->tools[i].nsecrets; j++) {
			if (find_secret(c->secrets, c->nsecrets, c->tools[i].secrets[j].secret) == NULL)
				return lerr(l, "tools", "%s uses secret %s, which is not defined "
				    "in \"secrets\"", c->tools[i].name, c->tools[i].secrets[j].secret);
		}
	}
	for (i = 0; i < c->ngit_hosts; i++) {
		if (find_secret(c->secrets, c->nsecrets, c->git_hosts[i].secret) == NULL)
			return lerr(l, "git.hosts", "%s uses secret %s, which is not defined",
			    c->git_hosts[i].name, c->git_hosts[i].secret);
	}
	/* The runner (the tool) reads a tool's CA bundle itself. */
	for (i = 0; i < c->ntools; i++) {
		struct stat st;

		if (c->tools[i].ca_file != NULL && stat(c->tools[i].ca_file, &st) == 0 &&
		    (st.st_mode & S_IROTH) == 0)
			config_warn(c, "tools.%s.ca_file: %s is not world-readable; the runner "
			    "cannot read it (chmod 644: a CA bundle holds no secret)",
			    c->tools[i].name, c->tools[i].ca_file);
	}
	for (i = 0; i < c->nsessions; i++) {
		if (config_session_runner(l, c, &c->sessions[i]) != 0)
			return -1;
	}
	for (i = 0; i < c->nsessions; i++) {
		struct session *s = &c->sessions[i];

		l->file = s->file;
		if (s->uid == c->runner_uid)
			return lerr(l, s->name, "a session cannot use the runner's uid");
		for (j = 0; j < c->nsessions; j++) {
			if (c->sessions[j].runner_uid == s->uid)
				return lerr(l, s->name, "uid %u is the runner of session %s",
				    (unsigned)s->uid, c->sessions[j].name);
			if (j < i && s->runner_own && c->sessions[j].runner_own &&
			    s->runner_uid == c->sessions[j].runner_uid)
				return lerr(l, s->name, "runner %s is also the runner of session "
				    "%s: a runner belongs to one session (shimbridge session add "
				    "creates one per session)", s->runner, c->sessions[j].name);
		}
		for (j = 0; j < i; j++) {
			if (strcmp(c->sessions[j].name, s->name) == 0)
				return lerr(l, s->name, "session name also used in %s",
				    c->sessions[j].file);
			if (c->sessions[j].uid == s->uid)
				return lerr(l, s->name, "uid %u is also session %s", (unsigned)s->uid,
				    c->sessions[j].name);
		}
		for (j = 0; j < s->ntools; j++) {
			if (strcmp(s->tools[j], "git") == 0 && c->git_helper != NULL)
				continue;
			if (config_tool(c, s->tools[j]) == NULL)
				return lerr(l, s->name, "tool %s is not defined in \"tools\"%s",
				    s->tools[j], strcmp(s->tools[j], "git") == 0 ?
				    " (git needs the \"git\" section with a helper)" : "");
		}
		for (j = 0; j < s->nsecrets; j++) {
			if (find_secret(c->secrets, c->nsecrets, s->secrets[j].name) == NULL)
				return lerr(l, s->name, "overrides secret %s, which the host does "
				    "not define", s->secrets[j].name);
		}
		for (k = 0; k < s->ntools; k++) {
			if (strcmp(s->tools[k], "git") == 0 && s->nrepos == 0)
				config_warn(c, "session %s may use git but allows no repository",
				    s->name);
		}
	}
	config_warn_shared_runner(c);
	l->file = c->path;
	{
		char *why = NULL;

		if (ghapp_config_check(c, &why) != 0) {
			int rc = lerr(l, "secrets", "%s", why);

			free(why);
			return rc;
		}
	}
	return config_approver_user(l, c);
}

/* Load, validate and (unless no_secrets) fill in secret values. */
struct config *
config_load(const char *path, int no_secrets, char **cause)
{
	struct loader l = { path, NULL, NULL };
	crypto_generichash_state hs;
	unsigned char digest[16];
	struct config *c;
	json_t *root = NULL;
	char *text = NULL, *slash;
	size_t len, i;

	if (sodium_init() < 0) {
		*cause = xstrdup("libsodium failed to initialise");
		return NULL;
	}
	crypto_generichash_init(&hs, NULL, 0, sizeof digest);
	l.hash = &hs;
	c = xcalloc(1, sizeof *c);
	c->refs = 1;
	c->path = xstrdup(path);
	c->socket_path = xstrdup(DEF_SOCKET);
	c->socket_mode = 0660;
	c->audit_path = xstrdup(DEF_AUDIT);
	c->state_dir = xstrdup(DEF_STATE);
	c->runner = xstrdup(DEF_RUNNER);
	c->max_connections = 1024;
	c->max_per_session = 64;
	c->handshake_timeout = 10;
	c->kill_grace = 2;
	c->jail_pool = 2;
	c->scratch_tmpfs = 1024;
	c->git_timeout = 600;
	c->approval.timeout = 300;
	c->approval.command_timeout = 60;
	c->store_path = xstrdup("/etc/shimbridge/secrets.store");
	c->store_key = xstrdup("/etc/shimbridge/store.key");
	c->protected_branches = xcalloc(3, sizeof *c->protected_branches);
	c->protected_branches[0] = xstrdup("main");
	c->protected_branches[1] = xstrdup("master");
	c->nprotected_branches = 2;
	c->no_push_branches = xcalloc(2, sizeof *c->no_push_branches);
	c->no_push_branches[0] = xstrdup("HEAD");	/* upstream's default branch */
	c->nno_push_branches = 1;
	c->protected_tags = xcalloc(2, sizeof *c->protected_tags);
	c->protected_tags[0] = xstrdup("*");		/* every tag, once it exists */
	c->nprotected_tags = 1;
	c->deny_paths = xcalloc(2, sizeof *c->deny_paths);
	c->deny_paths[0] = xstrdup(".github/workflows/");
	c->ndeny_paths = 1;
	if ((slash = strrchr(path, '/')) != NULL)
		xasprintf(&c->sessions_dir, "%.*s/sessions.d", (int)(slash - path), path);
	else
		c->sessions_dir = xstrdup("sessions.d");

	if (config_open(&l, path, &text, &len) != 0)
		goto bad;
	crypto_generichash_update(&hs, (unsigned char *)text, len);
	if ((root = config_parse(&l, text, len)) == NULL || parse_main(&l, root, c) != 0)
		goto bad;
	if (load_dropins(&l, c) != 0 || config_crosscheck(&l, c) != 0)
		goto bad;
	crypto_generichash_final(&hs, digest, sizeof digest);
	c->version = xcalloc(1, 2 * 6 + 1);
	for (i = 0; i < 6; i++)
		snprintf(c->version + 2 * i, 3, "%02x", digest[i]);
	if (!no_secrets) {
		/* A trial load, for --check: the values are wiped at once. */
		struct keyring *kr = keyring_new();

		keyring_load(kr, c, &c->warnings, &c->nwarnings);
		keyring_free(kr);
	}
	json_decref(root);
	free(text);
	return c;
bad:
	*cause = l.cause != NULL ? l.cause : xstrdup("invalid configuration");
	json_decref(root);
	free(text);
	config_unref(c);
	return NULL;
}

/* Take a reference. */
struct config *
config_ref(struct config *c)
{
	c->refs++;
	return c;
}

/* Free a NULL-terminated or counted string vector. */
static void
free_strv(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Drop a reference; the last one frees everything and wipes the secrets. */
void
config_unref(struct config *c)
{
	size_t i, j;

	if (c == NULL || --c->refs > 0)
		return;
	for (i = 0; i < c->ntools; i++) {
		struct tool *t = &c->tools[i];

		for (j = 0; j < t->nrules; j++) {
			free_strv(t->rules[j].argv, t->rules[j].nargv);
			free(t->rules[j].reason);
			free(t->rules[j].where);
		}
		free(t->rules);
		free_strv(t->deny_args, t->ndeny_args);
		free_strv(t->expose, t->nexpose);
		for (j = 0; j < t->nenv; j++) {
			free(t->env[j].name);
			free(t->env[j].value);
		}
		free(t->env);
		for (j = 0; j < t->nsecrets; j++) {
			free(t->secrets[j].var);
			free(t->secrets[j].secret);
		}
		free(t->secrets);
		free(t->name);
		free(t->path);
		free(t->help);
		free(t->host);
		free(t->ca_file);
	}
	free(c->tools);
	for (i = 0; i < c->nsecrets; i++)
		secret_clear(&c->secrets[i]);
	free(c->secrets);
	for (i = 0; i < c->nsessions; i++) {
		struct session *s = &c->sessions[i];

		free(s->name);
		free(s->user);
		free(s->runner);
		free(s->workspace);
		free_strv(s->tools, s->ntools);
		free_strv(s->repos, s->nrepos);
		for (j = 0; j < s->nsecrets; j++)
			secret_clear(&s->secrets[j]);
		free(s->secrets);
		free(s->file);
	}
	free(c->sessions);
	for (i = 0; i < c->ngit_hosts; i++) {
		free(c->git_hosts[i].name);
		free(c->git_hosts[i].upstream);
		free(c->git_hosts[i].secret);
		free(c->git_hosts[i].username);
		free(c->git_hosts[i].ca_file);
	}
	free(c->git_hosts);
	free_strv(c->protected_branches, c->nprotected_branches);
	free_strv(c->no_push_branches, c->nno_push_branches);
	free_strv(c->protected_tags, c->nprotected_tags);
	free_strv(c->deny_paths, c->ndeny_paths);
	free_strv(c->ask_branches, c->nask_branches);
	if (c->approval.command != NULL) {
		size_t n;

		for (n = 0; c->approval.command[n] != NULL; n++)
			;
		free_strv(c->approval.command, n);
	}
	free(c->approval.user);
	free_strv(c->warnings, c->nwarnings);
	free(c->store_path);
	free(c->store_key);
	free(c->store_key_credential);
	free(c->audit_sign_key);
	free(c->audit_sign_key_credential);
	free(c->git_path);
	free(c->git_helper);
	free(c->path);
	free(c->sessions_dir);
	free(c->version);
	free(c->socket_path);
	free(c->socket_group);
	free(c->audit_path);
	free(c->state_dir);
	free(c->runner);
	free(c);
}

/* The session of a peer uid, or NULL. */
const struct session *
config_session_by_uid(const struct config *c, uid_t uid)
{
	size_t i;

	if (uid == 0 || uid == OVERFLOW_UID)
		return NULL;
	for (i = 0; i < c->nsessions; i++) {
		if (c->sessions[i].uid == uid)
			return &c->sessions[i];
	}
	return NULL;
}

/* A session by name, or NULL. */
const struct session *
config_session_by_name(const struct config *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->nsessions; i++) {
		if (strcmp(c->sessions[i].name, name) == 0)
			return &c->sessions[i];
	}
	return NULL;
}

/* A tool by name, or NULL. */
const struct tool *
config_tool(const struct config *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->ntools; i++) {
		if (strcmp(c->tools[i].name, name) == 0)
			return &c->tools[i];
	}
	return NULL;
}

/* Every distinct runner uid, the global one first. */
size_t
config_runner_uids(const struct config *c, uid_t *uids, size_t max)
{
	size_t i, j, n = 0;

	if (max == 0)
		return 0;
	uids[n++] = c->runner_uid;
	for (i = 0; i < c->nsessions && n < max; i++) {
		for (j = 0; j < n && uids[j] != c->sessions[i].runner_uid; j++)
			;
		if (j == n)
			uids[n++] = c->sessions[i].runner_uid;
	}
	return n;
}

/* Whether the session lists the tool. */
int
config_session_has_tool(const struct session *s, const char *name)
{
	size_t i;

	for (i = 0; i < s->ntools; i++) {
		if (strcmp(s->tools[i], name) == 0)
			return 1;
	}
	return 0;
}

/* Whether owner/name is allowlisted (GitHub names are case-insensitive). */
int
config_session_has_repo(const struct session *s, const char *repo)
{
	size_t i;

	for (i = 0; i < s->nrepos; i++) {
		if (strcasecmp(s->repos[i], repo) == 0)
			return 1;
	}
	return 0;
}

/* A git host entry by the name the sandbox uses, or NULL. */
const struct git_host *
config_git_host(const struct config *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->ngit_hosts; i++) {
		if (strcasecmp(c->git_hosts[i].name, name) == 0)
			return &c->git_hosts[i];
	}
	return NULL;
}
