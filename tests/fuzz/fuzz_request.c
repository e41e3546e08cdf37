/*
 * libFuzzer target for request validation (bridge/request.c), the first code that
 * sees a peer's REQUEST frame after jansson. The input is the frame's payload,
 * parsed as the bridge parses it (json_loadb, JSON_REJECT_DUPLICATES). Both
 * request_check_run and request_check_env (on the "env" member and on the whole
 * document) run; whenever one accepts, the invariants below are checked here,
 * independently of request.c:
 *   run: an object with only op/tool/argv/cwd/env/context; argv an array of at
 *        most REQ_MAX_ARGS strings whose lengths + 1 sum to at most
 *        REQ_MAX_ARG_BYTES; tool a string of 1-REQ_MAX_NAME bytes; cwd absent or
 *        an absolute path of at most REQ_MAX_PATH bytes; env as below; context
 *        absent or an object with at most remote_url and branch, strings of at most
 *        1024 bytes, which are what the policy context points to.
 *   env: absent, or an object of at most REQ_MAX_ENV members named by
 *        proto_env_allowed or GIT_PROTOCOL, string values of at most 1024 bytes,
 *        name=value sizes summing to at most REQ_MAX_ENV_BYTES.
 * A refusal must come with a reason; success with none.
 *
 * A document with "op": "git" also goes through profile_git_prepare (bridge/profile-git.c) for a
 * session of a fixed config loaded in LLVMFuzzerInitialize (secrets loaded, so a
 * request can succeed). On success: the service is upload-pack or receive-pack, the
 * repository is one of the session's (case-insensitively), the host is configured,
 * the upstream is that host's upstream + "/OWNER/NAME.git", the mirror is
 * STATE/mirrors/SESSION/HOST/OWNER/NAME.git in lower case with no "." or ".."
 * component, and GIT_PROTOCOL is absent or one of version=0/1/2. On refusal: a cause.
 */
#include <sys/stat.h>

#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "profile-git.h"
#include "policy.h"
#include "proto.h"
#include "request.h"

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static struct config	*cfg;
static char		 fuzz_dir[] = "/tmp/fuzz_request.XXXXXX";

/* Write a root-owned 0600 file. */
static void
fuzz_file(const char *path, const char *text)
{
	FILE *f;

	if ((f = fopen(path, "w")) == NULL || fputs(text, f) == EOF || fclose(f) != 0)
		abort();
}

/* Remove the fixed config's files at exit. */
static void
fuzz_cleanup(void)
{
	char path[128];

	snprintf(path, sizeof path, "%s/token", fuzz_dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/config.json", fuzz_dir);
	unlink(path);
	rmdir(fuzz_dir);
}

/* A config with git hosts and a session that may use git; secrets loaded. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[128], tok[128], *text, *cause = NULL;

	(void)argc;
	(void)argv;
	umask(077);
	if (mkdtemp(fuzz_dir) == NULL)
		abort();
	atexit(fuzz_cleanup);
	snprintf(tok, sizeof tok, "%s/token", fuzz_dir);
	fuzz_file(tok, "ghs_fuzz0123456789\n");
	snprintf(path, sizeof path, "%s/config.json", fuzz_dir);
	if (asprintf(&text,
	    "{\"socket\": {\"path\": \"%s/sock\"}, \"runner\": \"daemon\",\n"
	    " \"audit_log\": \"%s/audit\", \"state_dir\": \"%s/state\",\n"
	    " \"secrets\": {\"gh\": {\"source\": \"file\", \"path\": \"%s\"}},\n"
	    " \"git\": {\"path\": \"/bin/true\", \"helper\": \"/bin/true\", \"hosts\": {\n"
	    "   \"github.com\": {\"upstream\": \"https://github.com/\", \"secret\": \"gh\"},\n"
	    "   \"ghe.example.com:8443\": {\"upstream\": \"http://127.0.0.1:1\", \"secret\": \"gh\"}}},\n"
	    " \"sessions\": [{\"name\": \"s1\", \"uid\": 1001, \"tools\": [\"git\"],\n"
	    "   \"repos\": [\"octo/one\", \"Octo/Two.dots\"]}]}\n",
	    fuzz_dir, fuzz_dir, fuzz_dir, tok) < 0)
		abort();
	fuzz_file(path, text);
	free(text);
	if ((cfg = config_load(path, 0, &cause)) == NULL) {
		fprintf(stderr, "fuzz_request: cannot load the fixed config (run as root): %s\n",
		    cause);
		abort();
	}
	return 0;
}

/* Lower-case comparison of a path component of length n with s. */
static int
fuzz_lower_eq(const char *p, size_t n, const char *s)
{
	size_t i;

	if (strlen(s) != n)
		return 0;
	for (i = 0; i < n; i++) {
		if (p[i] != tolower((unsigned char)s[i]))
			return 0;
	}
	return 1;
}

/* The profile_git_prepare checks on a "git" request. */
static void
fuzz_git(json_t *req)
{
	const struct session *s = &cfg->sessions[0];
	const struct git_host *h;
	struct profile_git_req g;
	char *msg = NULL, *cause = NULL, *repo, *want, *p, *q;
	size_t n;

	if (profile_git_prepare(cfg, s, req, &g, &msg, &cause) != 0) {
		if (cause == NULL)
			abort();
		free(msg);
		free(cause);
		profile_git_clear(&g);
		return;
	}
	if (strcmp(g.service, "upload-pack") != 0 && strcmp(g.service, "receive-pack") != 0)
		abort();
	if ((h = config_git_host(cfg, g.host)) == NULL)
		abort();
	/* The secret the caller looks up in the keyring is the host's. */
	if (g.secret_name == NULL || strcmp(g.secret_name, h->secret) != 0)
		abort();
	if (asprintf(&repo, "%s/%s", g.owner, g.name) < 0)
		abort();
	if (!config_session_has_repo(s, repo))
		abort();
	n = strlen(h->upstream);
	if (h->upstream[n - 1] == '/')
		n--;
	if (asprintf(&want, "%.*s/%s/%s.git", (int)n, h->upstream, g.owner, g.name) < 0)
		abort();
	if (strcmp(g.upstream, want) != 0)
		abort();
	free(want);
	/* STATE/mirrors/SESSION/HOST/OWNER/NAME.git, lower case, no dot components. */
	n = strlen(cfg->state_dir);
	if (strncmp(g.mirror, cfg->state_dir, n) != 0 || strncmp(g.mirror + n, "/mirrors/", 9) != 0)
		abort();
	p = g.mirror + n + 9;
	if (strncmp(p, s->name, strlen(s->name)) != 0 || p[strlen(s->name)] != '/')
		abort();
	p += strlen(s->name) + 1;
	q = strchr(p, '/');
	if (q == NULL || !fuzz_lower_eq(p, (size_t)(q - p), g.host))
		abort();
	p = q + 1;
	q = strchr(p, '/');
	if (q == NULL || !fuzz_lower_eq(p, (size_t)(q - p), g.owner))
		abort();
	p = q + 1;
	n = strlen(p);
	if (n < 5 || strcmp(p + n - 4, ".git") != 0 || !fuzz_lower_eq(p, n - 4, g.name) ||
	    strchr(p, '/') != NULL)
		abort();
	for (p = g.mirror; p != NULL; p = strchr(p, '/') != NULL ? strchr(p, '/') + 1 : NULL) {
		n = strcspn(p, "/");
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			abort();
	}
	if (g.protocol != NULL && strcmp(g.protocol, "version=0") != 0 &&
	    strcmp(g.protocol, "version=1") != 0 && strcmp(g.protocol, "version=2") != 0)
		abort();
	free(repo);
	free(msg);
	free(cause);
	profile_git_clear(&g);
}

/* The env invariants. */
static void
fuzz_env_ok(json_t *env)
{
	const char *k;
	json_t *v;
	size_t total = 0;

	if (env == NULL)
		return;
	if (!json_is_object(env) || json_object_size(env) > REQ_MAX_ENV)
		abort();
	json_object_foreach(env, k, v) {
		size_t n = strlen(k);

		if (!proto_env_allowed(k, n) && strcmp(k, "GIT_PROTOCOL") != 0)
			abort();
		/* An allowed name is a plain identifier: no '=', no NUL, not empty. */
		if (n == 0 || strchr(k, '=') != NULL)
			abort();
		if (!json_is_string(v) || json_string_length(v) > 1024 ||
		    memchr(json_string_value(v), '\0', json_string_length(v)) != NULL)
			abort();
		total += n + 1 + json_string_length(v);
	}
	if (total > REQ_MAX_ENV_BYTES)
		abort();
}

/* The run invariants. */
static void
fuzz_run_ok(json_t *req, const struct policy_ctx *pc)
{
	static const char *const keys[] = { "op", "tool", "argv", "cwd", "env", "context", NULL };
	json_t *argv = json_object_get(req, "argv"), *tool = json_object_get(req, "tool");
	json_t *cwd = json_object_get(req, "cwd"), *ctx = json_object_get(req, "context");
	json_t *v;
	const char *k;
	size_t i, total = 0;

	if (!json_is_object(req))
		abort();
	json_object_foreach(req, k, v) {
		for (i = 0; keys[i] != NULL && strcmp(keys[i], k) != 0; i++)
			;
		if (keys[i] == NULL)
			abort();
	}
	if (!json_is_array(argv) || json_array_size(argv) > REQ_MAX_ARGS)
		abort();
	json_array_foreach(argv, i, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			abort();
		total += json_string_length(v) + 1;
	}
	if (total > REQ_MAX_ARG_BYTES)
		abort();
	if (!json_is_string(tool) || json_string_length(tool) == 0 ||
	    json_string_length(tool) > REQ_MAX_NAME)
		abort();
	if (cwd != NULL && (!json_is_string(cwd) || json_string_value(cwd)[0] != '/' ||
	    json_string_length(cwd) > REQ_MAX_PATH))
		abort();
	fuzz_env_ok(json_object_get(req, "env"));
	if (ctx == NULL) {
		if (pc->remote_url != NULL || pc->branch != NULL)
			abort();
	} else {
		json_t *ru = json_object_get(ctx, "remote_url"), *br = json_object_get(ctx, "branch");

		if (!json_is_object(ctx) || json_object_size(ctx) > 2 ||
		    json_object_size(ctx) != (ru != NULL) + (br != NULL))
			abort();
		if ((ru != NULL && (!json_is_string(ru) || json_string_length(ru) > 1024 ||
		    pc->remote_url != json_string_value(ru))) || (ru == NULL && pc->remote_url != NULL))
			abort();
		if ((br != NULL && (!json_is_string(br) || json_string_length(br) > 1024 ||
		    pc->branch != json_string_value(br))) || (br == NULL && pc->branch != NULL))
			abort();
	}
	if (pc->repo != NULL || pc->head != NULL || pc->nextra != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct policy_ctx pc;
	json_error_t je;
	json_t *req;
	const char *why = NULL;

	req = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
	if (req == NULL)
		return 0;
	memset(&pc, 0, sizeof pc);
	if (request_check_run(req, &pc, &why) == 0) {
		if (why != NULL)
			abort();
		fuzz_run_ok(req, &pc);
	} else if (why == NULL || why[0] == '\0')
		abort();
	why = NULL;
	if (request_check_env(json_object_get(req, "env"), &why) == 0)
		fuzz_env_ok(json_object_get(req, "env"));
	else if (why == NULL)
		abort();
	why = NULL;
	if (request_check_env(req, &why) == 0)
		fuzz_env_ok(req);
	else if (why == NULL)
		abort();
	if (json_is_object(req) && json_is_string(json_object_get(req, "op")) &&
	    strcmp(json_string_value(json_object_get(req, "op")), "git") == 0)
		fuzz_git(req);
	json_decref(req);
	return 0;
}
