/*
 * Unit tests: the git profile (bridge/profile-git.c): its table in the profile
 * registry, the git op's checks and the environment it builds for shimbridge-git
 * (the bridge's half of common/gitcontract.h). Runs as root: the
 * config and the secret file must be root-owned.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "config.h"
#include "gitcontract.h"
#include "profile.h"
#include "profile-git.h"
#include "keyring.h"
#include "spawn.h"

static char dir[64];
static struct config *cfg;

/* Write a root-owned 0600 file. */
static void
put(const char *p, const char *text)
{
	FILE *f = fopen(p, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(p, 0600), 0);
}

static int
setup(void **state)
{
	char path[128], sd[128], tok[128], text[2048], *cause = NULL;

	(void)state;
	strcpy(dir, "/tmp/sbgitop.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(sd, sizeof sd, "%s/mirrors", dir);	/* made by the daemon at start */
	if (mkdir(sd, 0700) != 0)
		return -1;
	snprintf(sd, sizeof sd, "%s/sessions.d", dir);
	if (mkdir(sd, 0700) != 0)
		return -1;
	snprintf(tok, sizeof tok, "%s/token", dir);
	put(tok, "ghs_unitTestToken0123456789\n");	/* the config wants the file */
	snprintf(path, sizeof path, "%s/config.json", dir);
	snprintf(text, sizeof text, "{\"runner\": \"daemon\", \"state_dir\": \"%s\", "
	    "\"sessions_dir\": \"%s\", "
	    "\"secrets\": {\"gh\": {\"source\": \"file\", \"path\": \"%s\"}}, "
	    "\"git\": {\"path\": \"/usr/bin/git\", \"helper\": \"/bin/true\", "
	    "\"hosts\": {\"github.com\": {\"upstream\": \"https://github.com/\", "
	    "\"secret\": \"gh\"}}, \"no_push_branches\": [\"HEAD\", \"release\"], "
	    "\"ff_only_branches\": [\"main\", \"dev\"], \"protected_tags\": [\"v*\"], "
	    "\"deny_paths\": [\".github/workflows/\", \"CODEOWNERS\"], "
	    "\"ask_branches\": [\"release/*\", \"hotfix-?\"], \"ask_timeout\": 45}, "
	    "\"sessions\": [{\"name\": \"alice\", \"uid\": 4242, \"tools\": [\"git\"], "
	    "\"repos\": [\"Octo/Repo\"]}]}", dir, sd, tok);
	put(path, text);
	cfg = config_load(path, 0, &cause);
	if (cfg == NULL) {
		fprintf(stderr, "config: %s\n", cause);
		return -1;
	}
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	config_unref(cfg);
	return spawn_rmtree(dir);
}

/* Prepare a request given as JSON text; returns profile_git_prepare's result. */
static int
prepare(const char *json, struct profile_git_req *g, char **msg, char **cause)
{
	json_t *req = json_loads(json, 0, NULL);
	int rc;

	assert_non_null(req);
	rc = profile_git_prepare(cfg, &cfg->sessions[0], req, g, msg, cause);
	json_decref(req);
	return rc;
}

static void
test_parse_url(void **state)
{
	static const char *const good[][4] = {
		{ "https://github.com/octo/repo", "github.com", "octo", "repo" },
		{ "https://github.com/octo/repo.git", "github.com", "octo", "repo" },
		{ "https://github.com/octo/repo/", "github.com", "octo", "repo" },
		{ "http://localhost:8443/o/r.git", "localhost:8443", "o", "r" },
		{ "git@github.com:octo/repo.git", "github.com", "octo", "repo" },
		{ "ssh://git@github.com/octo/repo", "github.com", "octo", "repo" },
	};
	static const char *const bad[] = {
		"ftp://github.com/octo/repo", "https://user@github.com/octo/repo",
		"https://github.com/octo", "https://github.com/octo/repo/extra",
		"https://github.com/../repo", "https://github..com/o/r", "https://github.com/o/r%2e",
		"https://-x.com/o/r", "file:///etc/passwd", "https://github.com/o/.",
	};
	char *h, *o, *n;
	const char *why;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		if (profile_git_parse_url(good[i][0], &h, &o, &n, &why) != 0)
			fail_msg("refused %s: %s", good[i][0], why);
		assert_string_equal(h, good[i][1]);
		assert_string_equal(o, good[i][2]);
		assert_string_equal(n, good[i][3]);
		free(h);
		free(o);
		free(n);
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		why = NULL;
		if (profile_git_parse_url(bad[i], &h, &o, &n, &why) == 0)
			fail_msg("accepted %s", bad[i]);
		assert_non_null(why);
		assert_null(h);
	}
}

static void
test_prepare_refusals(void **state)
{
	struct profile_git_req g;
	char *msg, *cause;

	(void)state;
	/* Malformed: no message for the agent, only a protocol error. */
	assert_int_equal(prepare("{\"op\":\"git\",\"service\":\"git-upload-pack\","
	    "\"url\":\"https://github.com/octo/repo\",\"extra\":1}", &g, &msg, &cause), -1);
	assert_null(msg);
	assert_non_null(strstr(cause, "unknown field"));
	free(cause);
	profile_git_clear(&g);
	assert_int_equal(prepare("{\"op\":\"git\",\"service\":\"git-upload-pack\","
	    "\"url\":\"https://github.com/octo/repo\",\"progress\":\"yes\"}", &g, &msg, &cause), -1);
	assert_null(msg);
	assert_non_null(strstr(cause, "progress"));
	free(cause);
	profile_git_clear(&g);

	/* Refused with what to do. */
	assert_int_equal(prepare("{\"op\":\"git\",\"service\":\"git-upload-archive\","
	    "\"url\":\"https://github.com/octo/repo\"}", &g, &msg, &cause), -1);
	assert_non_null(strstr(msg, "only fetch, clone"));
	free(msg);
	free(cause);
	profile_git_clear(&g);
	assert_int_equal(prepare("{\"op\":\"git\",\"service\":\"git-upload-pack\","
	    "\"url\":\"https://gitlab.com/octo/repo\"}", &g, &msg, &cause), -1);
	assert_non_null(strstr(msg, "serves no such host"));
	free(msg);
	free(cause);
	profile_git_clear(&g);
	assert_int_equal(prepare("{\"op\":\"git\",\"service\":\"git-receive-pack\","
	    "\"url\":\"https://github.com/octo/other\"}", &g, &msg, &cause), -1);
	assert_non_null(strstr(msg, "may only reach Octo/Repo"));
	free(msg);
	free(cause);
	profile_git_clear(&g);
}

/* Environment checks for one request; via as for profile_git_env. */
static void
check_env(const char *json, const char *via, int progress)
{
	static char tok[] = "ghs_unitTestToken0123456789";
	struct profile_git_req g;
	struct key k;
	char *msg = NULL, *cause = NULL, scratch[128], want[256];
	const char *v;

	snprintf(scratch, sizeof scratch, "%s", dir);
	if (prepare(json, &g, &msg, &cause) != 0)
		fail_msg("refused: %s / %s", msg != NULL ? msg : "", cause != NULL ? cause : "");
	assert_int_equal(g.progress, progress);
	assert_string_equal(g.secret_name, "gh");
	/* As op-git does from the keyring. */
	memset(&k, 0, sizeof k);
	k.val.value = (unsigned char *)tok;
	k.val.len = strlen(tok);
	g.secret = &k;
	if (profile_git_env(&g, scratch, via, &cause) != 0)
		fail_msg("env: %s", cause);
	assert_string_equal(envbuild_get(g.env, GITC_ENV_SERVICE), "receive-pack");
	snprintf(want, sizeof want, "%s/mirrors/alice/github.com/octo/repo.git", dir);
	assert_string_equal(envbuild_get(g.env, GITC_ENV_MIRROR), want);
	assert_string_equal(envbuild_get(g.env, GITC_ENV_NO_PUSH), "HEAD,release");
	assert_string_equal(envbuild_get(g.env, GITC_ENV_FF_ONLY), "main,dev");
	assert_string_equal(envbuild_get(g.env, GITC_ENV_TAGS), "v*");
	assert_string_equal(envbuild_get(g.env, GITC_ENV_DENY_PATHS),
	    ".github/workflows/,CODEOWNERS");
	assert_string_equal(envbuild_get(g.env, GITC_ENV_GIT), "/usr/bin/git");
	assert_string_equal(envbuild_get(g.env, "HOME"), scratch);
	assert_string_equal(envbuild_get(g.env, "PATH"), "/usr/bin:/bin");
	assert_string_equal(envbuild_get(g.env, "LANG"), "C.UTF-8");
	assert_string_equal(envbuild_get(g.env, GITC_ENV_PHASES), "1");
	assert_string_equal(envbuild_get(g.env, GITC_ENV_ASK), "release/*,hotfix-?");
	snprintf(want, sizeof want, "%d", GITC_VERSION);
	assert_string_equal(envbuild_get(g.env, GITC_ENV_VERSION), want);
	assert_ptr_equal(g.svc, &profile_git.services[1]);
	assert_true(g.svc->push);
	v = envbuild_get(g.env, GITC_ENV_PROGRESS);
	if (progress)
		assert_string_equal(v, "1");
	else
		assert_null(v);
	if (via == NULL) {
		/* The URL as the sandbox spelled it; the token for the helper. */
		assert_string_equal(envbuild_get(g.env, GITC_ENV_UPSTREAM),
		    "https://github.com/Octo/Repo.git");
		assert_string_equal(envbuild_get(g.env, GITC_ENV_USERNAME), "x-access-token");
		assert_string_equal(envbuild_get(g.env, GITC_ENV_TOKEN),
		    "ghs_unitTestToken0123456789");
	} else {
		snprintf(want, sizeof want, "%s/Octo/Repo.git", via);
		assert_string_equal(envbuild_get(g.env, GITC_ENV_UPSTREAM), want);
		assert_null(envbuild_get(g.env, GITC_ENV_USERNAME));
		assert_null(envbuild_get(g.env, GITC_ENV_TOKEN));
	}
	profile_git_clear(&g);
}

static void
test_env(void **state)
{
	(void)state;
	check_env("{\"op\":\"git\",\"service\":\"git-receive-pack\","
	    "\"url\":\"https://github.com/Octo/Repo\"}", NULL, 0);
	check_env("{\"op\":\"git\",\"service\":\"git-receive-pack\","
	    "\"url\":\"https://github.com/Octo/Repo\",\"progress\":true}",
	    "http://127.0.0.1:40123", 1);
	check_env("{\"op\":\"git\",\"service\":\"git-receive-pack\","
	    "\"url\":\"git@github.com:Octo/Repo.git\",\"progress\":false}", NULL, 0);
}

/* The profile is registered by name, serves op "git", and no tool may name it. */
static void
test_table(void **state)
{
	char path[128], text[512], *cause = NULL;
	struct config *c;
	size_t i;

	(void)state;
	assert_ptr_equal(profile_find("git"), &profile_git);
	assert_string_equal(profile_git.op, "git");
	assert_true(profile_git.raw_stdout);
	assert_int_equal(profile_git.nservices, 2);
	for (i = 0; i < profile_git.nservices; i++)
		assert_int_equal(profile_git.services[i].push,
		    strcmp(profile_git.services[i].name, "git-receive-pack") == 0);
	assert_null(strstr(profile_names(), "git"));
	assert_string_equal(cfg->git_hosts[0].username, profile_git.default_username);

	snprintf(path, sizeof path, "%s/tool.json", dir);
	snprintf(text, sizeof text, "{\"runner\": \"daemon\", \"state_dir\": \"%s\", "
	    "\"tools\": {\"hostgit\": {\"path\": \"/usr/bin/git\", \"profile\": \"git\", "
	    "\"rules\": [{\"allow\": [\"**\"]}]}}, \"sessions\": []}", dir);
	put(path, text);
	c = config_load(path, 0, &cause);
	assert_null(c);
	assert_non_null(cause);
	assert_non_null(strstr(cause, "\"git\" section"));
	free(cause);
}

/* "T" records: a known phase, a space, 1-19 digits; nothing else. */
static void
test_phase(void **state)
{
	static const char *const bad[] = { "", "start", "start ", "start x", "start 1 ",
	    "start  1", "Start 1", "hook 12345678901234567890", "end -1", "end 1\n",
	    "done 1", "spawn 5", "gc", "gcx 1" };
	const char *name;
	unsigned long long ns;
	size_t i;

	(void)state;
	assert_int_equal(profile_git_phase("start 42", 8, &name, &ns), 0);
	assert_string_equal(name, GITC_PHASE_START);
	assert_true(ns == 42);
	assert_int_equal(profile_git_phase("upstream 9999999999999999999", 28, &name, &ns), 0);
	assert_string_equal(name, GITC_PHASE_UPSTREAM);
	assert_true(ns == 9999999999999999999ULL);
	assert_int_equal(profile_git_phase("gc 7", 4, &name, &ns), 0);
	assert_string_equal(name, GITC_PHASE_GC);
	assert_int_equal(profile_git_phase("warm 8", 6, &name, &ns), 0);
	assert_string_equal(name, GITC_PHASE_WARM);
	assert_true(ns == 8);
	/* The length counts, not a NUL. */
	assert_int_equal(profile_git_phase("end 12345", 6, &name, &ns), 0);
	assert_true(ns == 12);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (profile_git_phase(bad[i], strlen(bad[i]), &name, &ns) != -1)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_null(name);
	}
}

/* upstream's v0 ref advertisement → the SHIMBRIDGE_UPSTREAM_REFS message. */
static void
test_refs(void **state)
{
	static const char adv[] =
	    "001e# service=git-upload-pack\n0000"
	    "00461111111111111111111111111111111111111111 HEAD\0multi_ack side-band\n"
	    "003d1111111111111111111111111111111111111111 refs/heads/main\n"
	    "003a2222222222222222222222222222222222222222 refs/tags/v1\n"
	    "003d1111111111111111111111111111111111111111 refs/tags/v1^{}\n"
	    "003e1111111111111111111111111111111111111111 refs/pull/1/head\n"
	    "0000";
	static const char want[] = "refs\n"
	    "1111111111111111111111111111111111111111 refs/heads/main\n"
	    "2222222222222222222222222222222222222222 refs/tags/v1\n"
	    "end\n";
	static const char *const bad[] = {
		"",					/* nothing */
		"001e# service=git-upload-pack\n",	/* no flush */
		"001e# service=git-receive-pac\n0000",	/* wrong service */
		"001e# service=git-upload-pack\n00000000x",	/* trailing bytes */
		"001e# service=git-upload-pack\n0000003f1111 refs/heads/mainXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX\n0000",
		"001e# service=git-upload-pack\n0000"
		    "003c1111111111111111111111111111111111111111 refs/heads/m n\n0000",
		"001e# service=git-upload-pack\n0000ffff",	/* longer than the body */
		"001e# service=git-upload-pack\n00000001",	/* a v2 delimiter */
	};
	char *out;
	size_t len, i;

	(void)state;
	assert_int_equal(profile_git_refs((const unsigned char *)adv, sizeof adv - 1, &out,
	    &len), 0);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(out, want, len);
	free(out);
	/* An empty repository: an empty list, which is an answer too. */
	assert_int_equal(profile_git_refs((const unsigned char *)
	    "001e# service=git-upload-pack\n00000000", 38, &out, &len), 0);
	assert_int_equal(len, 9);
	assert_memory_equal(out, "refs\nend\n", 9);
	free(out);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		out = (char *)1;
		if (profile_git_refs((const unsigned char *)bad[i], strlen(bad[i]), &out,
		    &len) != -1)
			fail_msg("accepted bad advertisement %zu", i);
		assert_null(out);
	}
}

/* "A" records: kind, old, new, refs/heads/BRANCH, consistent and printable; nothing else. */
static void
test_ask_parse(void **state)
{
	static const char z[] = "0000000000000000000000000000000000000000";
	static const char a[] = "1111111111111111111111111111111111111111";
	static const char b[] = "2222222222222222222222222222222222222222";
	/* After "update OLD NEW": nothing git could name as a branch of ours. */
	static const char *const badref[] = {
		"", " refs/heads/", " refs/tags/v1", " refs/heads/a b", " refs/heads/a\tb",
		" refs/heads/-x", " refs/heads/a..b", " refs/heads/x/", " refs/heads/x.lock",
		" refs/heads/HEAD", " refs/heads/caf\xc3\xa9", "  refs/heads/x", " refs/heads/x ",
		" refs/heads//x", " refs/heads/a\x7f", " heads/x",
	};
	static const char *const badrec[] = { "", "update", "Update", "update ", "push x y z" };
	struct profile_git_update u;
	char rec[256], *cmd, *key, big[GITC_ASK_LINE_MAX + 64];
	size_t i;

	(void)state;
	snprintf(rec, sizeof rec, "update %s %s refs/heads/release/2.0", a, b);
	assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &u), 0);
	assert_string_equal(u.kind, GITC_ASK_UPDATE);
	assert_string_equal(u.old, a);
	assert_string_equal(u.new, b);
	assert_string_equal(u.branch, "release/2.0");
	/* The kind must agree with the object names. */
	snprintf(rec, sizeof rec, "create %s %s refs/heads/r", z, b);
	assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &u), 0);
	snprintf(rec, sizeof rec, "delete %s %s refs/heads/r", a, z);
	assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &u), 0);
	snprintf(rec, sizeof rec, "force %s %s refs/heads/r", a, b);
	assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &u), 0);
	snprintf(rec, sizeof rec, "update %s %s refs/heads/r", z, b);	/* a create */
	assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &u), -1);
	snprintf(rec, sizeof rec, "create %s %s refs/heads/r", a, b);
	assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &u), -1);
	snprintf(rec, sizeof rec, "force %s %s refs/heads/r", a, z);	/* a delete */
	assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &u), -1);
	snprintf(rec, sizeof rec, "delete %s %s refs/heads/r", z, z);
	assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &u), -1);
	/* Object names: one length, lowercase hex. */
	snprintf(rec, sizeof rec, "update %s %.39s refs/heads/r", a, b);
	assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &u), -1);
	snprintf(rec, sizeof rec, "update %s %s0000000000000000000000000 refs/heads/r", a, b);
	assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &u), -1);
	snprintf(rec, sizeof rec, "update %.39sA %s refs/heads/r", a, b);
	assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &u), -1);
	for (i = 0; i < sizeof badref / sizeof badref[0]; i++) {
		snprintf(rec, sizeof rec, "update %s %s%s", a, b, badref[i]);
		if (profile_git_ask_parse(rec, strlen(rec), &u) != -1)
			fail_msg("accepted \"%s\"", rec);
		assert_null(u.kind);
	}
	for (i = 0; i < sizeof badrec / sizeof badrec[0]; i++) {
		if (profile_git_ask_parse(badrec[i], strlen(badrec[i]), &u) != -1)
			fail_msg("accepted \"%s\"", badrec[i]);
		assert_null(u.kind);
	}
	/* The length counts, not a NUL; and it is bounded. */
	snprintf(rec, sizeof rec, "update %s %s refs/heads/rx", a, b);
	assert_int_equal(profile_git_ask_parse(rec, strlen(rec) - 1, &u), 0);
	assert_string_equal(u.branch, "r");
	memset(big, 'x', sizeof big);
	snprintf(rec, sizeof rec, "update %s %s refs/heads/", a, b);
	memcpy(big, rec, strlen(rec));
	assert_int_equal(profile_git_ask_parse(big, sizeof big, &u), -1);
	assert_int_equal(profile_git_ask_parse(big, GITC_ASK_LINE_MAX, &u), 0);

	/* git.ask_branches: fnmatch patterns; the config's timeout. */
	assert_true(profile_git_asks(cfg, "release/2.0"));
	assert_true(profile_git_asks(cfg, "hotfix-1"));
	assert_false(profile_git_asks(cfg, "hotfix-12"));
	assert_false(profile_git_asks(cfg, "main"));
	assert_int_equal(cfg->git_ask_timeout, 45);

	/* The operator's line in git's push syntax; the --for key. */
	{
		struct profile_git_update us[3];

		snprintf(rec, sizeof rec, "update %s %s refs/heads/release/2.0", a, b);
		assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &us[0]), 0);
		snprintf(rec, sizeof rec, "force %s %s refs/heads/release/3", a, b);
		assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &us[1]), 0);
		snprintf(rec, sizeof rec, "delete %s %s refs/heads/release/old", a, z);
		assert_int_equal(profile_git_ask_parse(rec, strlen(rec), &us[2]), 0);
		profile_git_ask_command("github.com", "octo/repo", us, 3, &cmd, &key);
		assert_string_equal(cmd, "git push https://github.com/octo/repo release/2.0 "
		    "+release/3 :release/old");
		assert_string_equal(key, "[\"git push\",\"github.com/octo/repo\",\"release/2.0\","
		    "\"+release/3\",\":release/old\"]");
		free(cmd);
		free(key);
	}
}

/* Config: ask_branches items are branch names or patterns, ask_timeout 1..86400. */
static void
test_ask_config(void **state)
{
	static const char *const bad[] = {
		"\"ask_branches\": [\"refs/heads/x\"]", "\"ask_branches\": [\"a b\"]",
		"\"ask_branches\": [\"-x\"]", "\"ask_branches\": [\"a,b\"]",
		"\"ask_branches\": [\"\"]", "\"ask_branches\": \"release/*\"",
		"\"ask_timeout\": 0", "\"ask_timeout\": 86401", "\"ask_timeout\": \"5\"",
		"\"ask_branch\": [\"x\"]",
	};
	char path[128], text[1024], *cause = NULL;
	struct config *c;
	size_t i;

	(void)state;
	snprintf(path, sizeof path, "%s/ask.json", dir);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(text, sizeof text, "{\"runner\": \"daemon\", \"state_dir\": \"%s\", "
		    "\"git\": {\"path\": \"/usr/bin/git\", \"helper\": \"/bin/true\", %s}, "
		    "\"sessions\": []}", dir, bad[i]);
		put(path, text);
		c = config_load(path, 0, &cause);
		if (c != NULL)
			fail_msg("accepted %s", bad[i]);
		assert_non_null(cause);
		free(cause);
		cause = NULL;
	}
	snprintf(text, sizeof text, "{\"runner\": \"daemon\", \"state_dir\": \"%s\", "
	    "\"git\": {\"path\": \"/usr/bin/git\", \"helper\": \"/bin/true\"}, "
	    "\"sessions\": []}", dir);
	put(path, text);
	c = config_load(path, 0, &cause);
	assert_non_null(c);
	assert_int_equal(c->nask_branches, 0);
	assert_int_equal(c->git_ask_timeout, 0);	/* approval.timeout applies */
	config_unref(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_url),
		cmocka_unit_test(test_prepare_refusals),
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_phase),
		cmocka_unit_test(test_refs),
		cmocka_unit_test(test_ask_parse),
		cmocka_unit_test(test_ask_config),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, setup, teardown);
}
