/* Unit tests: config loading and validation (runs as root: files must be root-owned). */
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

#include "config.h"
#include "keyring.h"
#include "redact.h"
#include "secret.h"
#include "spawn.h"

static char dir[64];
static char path[128];

/* Write a file with a mode. */
static void
put(const char *p, const char *text, mode_t mode)
{
	FILE *f = fopen(p, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(p, mode), 0);
}

static int
setup(void **state)
{
	char sd[160];

	(void)state;
	strcpy(dir, "/tmp/sbcfg.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(path, sizeof path, "%s/config.json", dir);
	snprintf(sd, sizeof sd, "%s/sessions.d", dir);
	return mkdir(sd, 0700);
}

static int
teardown(void **state)
{
	(void)state;
	return spawn_rmtree(dir);
}

/* Load text as the main config; returns the config or NULL with *cause. */
static struct config *
load(const char *text, char **cause)
{
	*cause = NULL;
	put(path, text, 0600);
	return config_load(path, 0, cause);
}

/* Expect a load failure whose message contains every needle. */
static void
expect_error(const char *text, const char *needle1, const char *needle2)
{
	char *cause = NULL;
	struct config *c = load(text, &cause);

	if (c != NULL)
		fail_msg("config unexpectedly valid: %s", text);
	assert_non_null(cause);
	if (strstr(cause, needle1) == NULL || (needle2 != NULL && strstr(cause, needle2) == NULL))
		fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", cause, needle1,
		    needle2 != NULL ? needle2 : "");
	free(cause);
}

#define TOOLS_OK "\"tools\": {\"sh\": {\"path\": \"/bin/sh\", \"rules\": [{\"allow\": [\"-c\", \"**\"]}]}}"

static void
test_minimal_defaults(void **state)
{
	char *cause = NULL;
	struct config *c;

	(void)state;
	c = load("{\"runner\": \"daemon\", " TOOLS_OK "}", &cause);
	if (c == NULL)
		fail_msg("%s", cause);
	assert_string_equal(c->socket_path, "/run/shimbridge/bridge.sock");
	assert_int_equal(c->socket_mode, 0660);
	assert_int_equal(c->runner_uid, 1);
	assert_int_equal(c->ntools, 1);
	assert_int_equal(c->tools[0].cwd, CWD_SCRATCH);
	assert_int_equal(c->tools[0].timeout, 600);
	assert_int_equal(c->max_connections, 1024);
	assert_int_equal(c->nprotected_branches, 2);
	assert_int_equal(c->nno_push_branches, 1);
	assert_string_equal(c->no_push_branches[0], "HEAD");
	assert_int_equal(c->nprotected_tags, 1);
	assert_string_equal(c->protected_tags[0], "*");
	assert_string_equal(c->deny_paths[0], ".github/workflows/");
	assert_non_null(c->version);
	assert_int_equal(strlen(c->version), 12);
	config_unref(c);
}

static void
test_sessions_and_dropins(void **state)
{
	char p[200], *cause = NULL;
	struct config *c;
	const struct session *s;

	(void)state;
	snprintf(p, sizeof p, "%s/sessions.d/b.json", dir);
	put(p, "{\"name\": \"bob\", \"uid\": 4242, \"tools\": [\"sh\"], \"repos\": [\"Octo/Repo\"]}", 0600);
	snprintf(p, sizeof p, "%s/sessions.d/ignored.txt", dir);
	put(p, "not json", 0600);
	c = load("{\"runner\": \"daemon\", " TOOLS_OK ", \"sessions\": [{\"name\": \"alice\", "
	    "\"user\": \"bin\", \"tools\": [\"sh\"], \"workspace\": \"/tmp/../tmp\"}]}", &cause);
	if (c == NULL)
		fail_msg("%s", cause);
	assert_int_equal(c->nsessions, 2);
	s = config_session_by_uid(c, 2);
	assert_non_null(s);
	assert_string_equal(s->name, "alice");
	assert_string_equal(s->workspace, "/tmp");
	s = config_session_by_uid(c, 4242);
	assert_non_null(s);
	assert_string_equal(s->name, "bob");
	assert_true(config_session_has_repo(s, "octo/repo"));
	assert_false(config_session_has_repo(s, "octo/other"));
	assert_true(config_session_has_tool(s, "sh"));
	assert_false(config_session_has_tool(s, "gh"));
	assert_null(config_session_by_uid(c, 0));
	assert_null(config_session_by_uid(c, 65534));
	assert_null(config_session_by_uid(c, 4243));
	config_unref(c);
	snprintf(p, sizeof p, "%s/sessions.d/b.json", dir);
	unlink(p);
	snprintf(p, sizeof p, "%s/sessions.d/ignored.txt", dir);
	unlink(p);
}

static void
test_dropin_errors_name_the_file(void **state)
{
	char p[200];

	(void)state;
	snprintf(p, sizeof p, "%s/sessions.d/broken.json", dir);
	put(p, "{\"name\": \"x\",\n \"uid\": }", 0600);
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK "}", "broken.json", "line 2");
	put(p, "{\"name\": \"x\", \"uid\": 77, \"tools\": [\"nope\"]}", 0600);
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK "}", "broken.json", "tool nope");
	put(p, "{\"name\": \"x\", \"uid\": 77, \"tools\": []}", 0666);
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK "}", "broken.json", "writable");
	unlink(p);
}

static void
test_session_runners(void **state)
{
	char p[200], *cause = NULL;
	struct config *c;
	const struct session *s;
	uid_t uids[8];
	size_t i, warned = 0;

	(void)state;
	/* Own runners (sys, sync), and two sessions falling back to the global one. */
	snprintf(p, sizeof p, "%s/sessions.d/a.json", dir);
	put(p, "{\"name\": \"a\", \"uid\": 4001, \"runner\": \"sys\", \"tools\": [\"sh\"]}", 0600);
	snprintf(p, sizeof p, "%s/sessions.d/b.json", dir);
	put(p, "{\"name\": \"b\", \"uid\": 4002, \"runner\": \"sync\", \"tools\": [\"sh\"]}", 0600);
	snprintf(p, sizeof p, "%s/sessions.d/c.json", dir);
	put(p, "{\"name\": \"c\", \"uid\": 4003, \"tools\": [\"sh\"]}", 0600);
	snprintf(p, sizeof p, "%s/sessions.d/d.json", dir);
	put(p, "{\"name\": \"d\", \"uid\": 4004, \"runner\": \"daemon\", \"tools\": [\"sh\"]}", 0600);
	c = load("{\"runner\": \"daemon\", " TOOLS_OK "}", &cause);
	if (c == NULL)
		fail_msg("%s", cause);
	s = config_session_by_name(c, "a");
	assert_string_equal(s->runner, "sys");
	assert_int_equal(s->runner_uid, 3);
	assert_true(s->runner_own);
	s = config_session_by_name(c, "c");
	assert_string_equal(s->runner, "daemon");
	assert_int_equal(s->runner_uid, 1);
	assert_false(s->runner_own);
	/* Naming the global runner is the shared fallback, not an own runner. */
	assert_false(config_session_by_name(c, "d")->runner_own);
	assert_int_equal(config_runner_uids(c, uids, 8), 3);
	assert_int_equal(uids[0], 1);
	assert_int_equal(uids[1], 3);
	assert_int_equal(uids[2], 4);
	for (i = 0; i < c->nwarnings; i++) {
		if (strstr(c->warnings[i], "sessions c, d share the global runner daemon") != NULL &&
		    strstr(c->warnings[i], "shimbridge session add") != NULL)
			warned++;
	}
	assert_int_equal(warned, 1);
	config_unref(c);

	/* One own runner for two sessions, a session user as runner, root, unknown. */
	snprintf(p, sizeof p, "%s/sessions.d/b.json", dir);
	put(p, "{\"name\": \"b\", \"uid\": 4002, \"runner\": \"sys\", \"tools\": [\"sh\"]}", 0600);
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK "}", "runner sys is also the runner of session a",
	    NULL);
	put(p, "{\"name\": \"b\", \"uid\": 3, \"tools\": [\"sh\"]}", 0600);
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK "}", "uid 3 is the runner of session a", NULL);
	put(p, "{\"name\": \"b\", \"uid\": 4002, \"runner\": \"root\", \"tools\": [\"sh\"]}", 0600);
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK "}", "b.json", "must not be root");
	put(p, "{\"name\": \"b\", \"uid\": 4002, \"runner\": \"nobody\", \"tools\": [\"sh\"]}", 0600);
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK "}", "b.json", "overflow");
	put(p, "{\"name\": \"b\", \"uid\": 4002, \"runner\": \"sb-no-such-run\", \"tools\": [\"sh\"]}",
	    0600);
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK "}", "does not exist", "session add");
	put(p, "{\"name\": \"b\", \"uid\": 4002, \"runner\": 7, \"tools\": [\"sh\"]}", 0600);
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK "}", "b.json", "runner");
	for (i = 0; i < 4; i++) {
		snprintf(p, sizeof p, "%s/sessions.d/%c.json", dir, (int)('a' + i));
		unlink(p);
	}
}

static void
test_tool_network(void **state)
{
	char *cause = NULL;
	struct config *c;

	(void)state;
	c = load("{\"runner\": \"daemon\", \"tools\": {\"a\": {\"path\": \"/bin/sh\"}, "
	    "\"b\": {\"path\": \"/bin/sh\", \"network\": \"none\"}, "
	    "\"c\": {\"path\": \"/bin/sh\", \"network\": \"host\"}}}", &cause);
	if (c == NULL)
		fail_msg("%s", cause);
	assert_int_equal(config_tool(c, "a")->network, TOOL_NET_HOST);
	assert_int_equal(config_tool(c, "b")->network, TOOL_NET_NONE);
	assert_int_equal(config_tool(c, "c")->network, TOOL_NET_HOST);
	assert_int_equal(config_tool(c, "c")->nexpose, 0);
	config_unref(c);
	c = load("{\"runner\": \"daemon\", \"tools\": {\"a\": {\"path\": \"/bin/sh\", "
	    "\"expose\": [\"/opt/ca.pem\", \"/srv/data\"]}}}", &cause);
	if (c == NULL)
		fail_msg("%s", cause);
	assert_int_equal(config_tool(c, "a")->nexpose, 2);
	assert_string_equal(config_tool(c, "a")->expose[1], "/srv/data");
	config_unref(c);
	expect_error("{\"runner\": \"daemon\", \"tools\": {\"a\": {\"path\": \"/bin/sh\", "
	    "\"expose\": [\"relative\"]}}}", "tools.a", "absolute");
	expect_error("{\"runner\": \"daemon\", \"tools\": {\"a\": {\"path\": \"/bin/sh\", "
	    "\"expose\": [\"/\"]}}}", "tools.a", "absolute");
	expect_error("{\"runner\": \"daemon\", \"tools\": {\"a\": {\"path\": \"/bin/sh\", "
	    "\"network\": \"some\"}}}", "tools.a", "network must be");
}

/* "ask" rules and the "approval" section. */
static void
test_approval(void **state)
{
	struct config *c;
	char *cause = NULL;

	(void)state;
	c = load("{\"runner\": \"daemon\", \"tools\": {\"sh\": {\"path\": \"/bin/sh\", "
	    "\"rules\": [{\"allow\": [\"-c\", \"true\"]}, {\"ask\": [\"-c\", \"**\"], "
	    "\"timeout\": 30}, {\"ask\": [\"**\"]}]}}}", &cause);
	if (c == NULL)
		fail_msg("%s", cause);
	assert_true(c->tools[0].rules[0].allow);
	assert_false(c->tools[0].rules[0].ask);
	assert_false(c->tools[0].rules[1].allow);
	assert_true(c->tools[0].rules[1].ask);
	assert_int_equal(c->tools[0].rules[1].timeout, 30);
	assert_int_equal(c->tools[0].rules[2].timeout, 0);
	assert_int_equal(c->approval.timeout, 300);		/* defaults */
	assert_int_equal(c->approval.command_timeout, 60);
	assert_null(c->approval.command);
	config_unref(c);
	c = load("{\"runner\": \"daemon\", \"approval\": {\"timeout\": 90, \"command\": "
	    "[\"/bin/true\", \"--x\"], \"user\": \"bin\", \"command_timeout\": 5}}", &cause);
	if (c == NULL)
		fail_msg("%s", cause);
	assert_int_equal(c->approval.timeout, 90);
	assert_string_equal(c->approval.command[0], "/bin/true");
	assert_string_equal(c->approval.command[1], "--x");
	assert_null(c->approval.command[2]);
	assert_string_equal(c->approval.user, "bin");
	assert_int_equal(c->approval.command_timeout, 5);
	config_unref(c);
	expect_error("{\"runner\": \"daemon\", \"tools\": {\"sh\": {\"path\": \"/bin/sh\", "
	    "\"rules\": [{\"ask\": [\"a\"], \"allow\": [\"b\"]}]}}}", "tools.sh.rules[0]",
	    "exactly one");
	expect_error("{\"runner\": \"daemon\", \"tools\": {\"sh\": {\"path\": \"/bin/sh\", "
	    "\"rules\": [{\"allow\": [\"a\"], \"timeout\": 5}]}}}", "tools.sh.rules[0]",
	    "ask");
	expect_error("{\"runner\": \"daemon\", \"tools\": {\"sh\": {\"path\": \"/bin/sh\", "
	    "\"rules\": [{\"ask\": [\"a\"], \"timeout\": 0}]}}}", "timeout", "1 to");
	expect_error("{\"runner\": \"daemon\", \"approval\": {\"command\": [\"/bin/true\"]}}",
	    "approval", "go together");
	expect_error("{\"runner\": \"daemon\", \"approval\": {\"command\": [\"bin/true\"], "
	    "\"user\": \"bin\"}}", "approval.command", "absolute");
	expect_error("{\"runner\": \"daemon\", \"approval\": {\"command\": [], "
	    "\"user\": \"bin\"}}", "approval.command", NULL);
	expect_error("{\"runner\": \"daemon\", \"approval\": {\"command\": [\"/bin/true\"], "
	    "\"user\": \"root\"}}", "approval.user", "dedicated");
	expect_error("{\"runner\": \"daemon\", \"approval\": {\"command\": [\"/bin/true\"], "
	    "\"user\": \"daemon\"}}", "approval.user", "runner");
	expect_error("{\"runner\": \"daemon\", \"approval\": {\"bogus\": 1}}", "approval", NULL);
}

static void
test_rejections(void **state)
{
	(void)state;
	expect_error("{\"runner\": \"daemon\", \"bogus\": 1}", "bogus", "unknown key");
	expect_error("{\"runner\": \"daemon\", \"tools\": {\"sh\": {\"path\": \"/bin/sh\", "
	    "\"rulez\": []}}}", "tools.sh.rulez", NULL);
	expect_error("{\"runner\": \"daemon\", \"tools\": {\"sh\": {\"path\": \"bin/sh\"}}}",
	    "tools.sh.path", "absolute");
	expect_error("{\"runner\": \"daemon\", \"tools\": {\"sh\": {\"path\": \"/nonexistent\"}}}",
	    "tools.sh.path", "executable");
	expect_error("{\"runner\": \"daemon\", \"tools\": {\"sh\": {\"path\": \"/bin/sh\", "
	    "\"rules\": [{\"allow\": [\"a\"], \"deny\": [\"b\"]}]}}}", "tools.sh.rules[0]", "exactly one");
	expect_error("{\"runner\": \"daemon\", \"tools\": {\"sh\": {\"path\": \"/bin/sh\", "
	    "\"rules\": [{\"allow\": [\"x\"]}, {\"allow\": [\"**\", \"x\"]}]}}}", "tools.sh.rules[1]",
	    "last");
	expect_error("{\"runner\": \"daemon\", \"tools\": {\"../x\": {\"path\": \"/bin/sh\"}}}",
	    "tool names", NULL);
	expect_error("{\"runner\": \"root\", " TOOLS_OK "}", "runner", "root");
	expect_error("{\"runner\": \"no-such-user-here\", " TOOLS_OK "}", "runner", "does not exist");
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK ", \"sessions\": [{\"name\": \"r\", "
	    "\"uid\": 0, \"tools\": []}]}", "root", NULL);
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK ", \"sessions\": [{\"name\": \"r\", "
	    "\"uid\": 65534, \"tools\": []}]}", "overflow", NULL);
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK ", \"sessions\": [{\"name\": \"r\", "
	    "\"uid\": 1, \"tools\": []}]}", "runner", NULL);
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK ", \"sessions\": [{\"name\": \"a\", "
	    "\"uid\": 50, \"tools\": []}, {\"name\": \"b\", \"uid\": 50, \"tools\": []}]}", "uid 50", NULL);
	expect_error("{\"runner\": \"daemon\", " TOOLS_OK ", \"sessions\": [{\"name\": \"a\", "
	    "\"uid\": 50, \"tools\": [], \"repos\": [\"../etc\"]}]}", "OWNER/NAME", NULL);
	expect_error("{\"runner\": \"daemon\", \"tools\": {\"sh\": {\"path\": \"/bin/sh\", "
	    "\"secrets\": {\"T\": \"missing\"}}}}", "secret missing", NULL);
	expect_error("{\"runner\": \"daemon\", \"socket\": {\"mode\": 438}}", "socket", "others");
	expect_error("{\"runner\": \"daemon\", \"a\": 1, \"a\": 2}", "duplicate", NULL);
	expect_error("[1]", "object", NULL);
}

static void
test_file_permissions(void **state)
{
	char *cause = NULL;
	struct config *c;

	(void)state;
	put(path, "{\"runner\": \"daemon\"}", 0620);
	c = config_load(path, 0, &cause);
	assert_null(c);
	assert_non_null(strstr(cause, "group- or world-writable"));
	free(cause);
	put(path, "{\"runner\": \"daemon\"}", 0600);
	assert_int_equal(chown(path, 1, 0), 0);
	c = config_load(path, 0, &cause);
	assert_null(c);
	assert_non_null(strstr(cause, "owned by root"));
	free(cause);
	unlink(path);
	assert_int_equal(symlink("/etc/hostname", path), 0);
	c = config_load(path, 0, &cause);
	assert_null(c);
	assert_non_null(strstr(cause, "cannot open"));
	free(cause);
	unlink(path);
}

static void
test_secret_sources(void **state)
{
	char sp[200], sp2[200], text[1024], *cause = NULL, **warn = NULL, *red;
	struct config *c;
	struct keyring *kr;
	struct key *k;
	size_t nwarn = 0, i;

	(void)state;
	snprintf(sp, sizeof sp, "%s/tok", dir);
	snprintf(sp2, sizeof sp2, "%s/loose", dir);
	put(sp, "value-123\n", 0600);
	put(sp2, "loose-value", 0644);
	setenv("SBTEST_SECRET", "from-env", 1);
	snprintf(text, sizeof text, "{\"runner\": \"daemon\", \"secrets\": {"
	    "\"a\": {\"source\": \"file\", \"path\": \"%s\"},"
	    "\"b\": {\"source\": \"file\", \"path\": \"%s\"},"
	    "\"c\": {\"source\": \"env\", \"variable\": \"SBTEST_SECRET\"},"
	    "\"d\": {\"source\": \"env\", \"variable\": \"SBTEST_UNSET_VAR\"}},"
	    "\"sessions\": [{\"name\": \"s\", \"uid\": 77, \"tools\": [], \"secrets\": "
	    "{\"a\": {\"source\": \"env\", \"variable\": \"SBTEST_SECRET\"}}}]}", sp, sp2);
	c = load(text, &cause);
	if (c == NULL)
		fail_msg("%s", cause);
	/* The config holds definitions only; values are in a keyring. */
	assert_non_null(secret_resolve(c, NULL, "a"));
	assert_ptr_equal(secret_resolve(c, config_session_by_name(c, "s"), "a"),
	    &config_session_by_name(c, "s")->secrets[0]);
	kr = keyring_new();
	keyring_load(kr, c, &warn, &nwarn);
	k = keyring_get(kr, NULL, "a");
	assert_non_null(k->val.value);
	assert_int_equal(k->val.len, 9);
	assert_memory_equal(k->val.value, "value-123", 9);
	k = keyring_get(kr, NULL, "b");
	assert_null(k->val.value);
	assert_non_null(strstr(k->val.error, "0600"));
	assert_null(strstr(k->val.error, "loose-value"));
	k = keyring_get(kr, NULL, "c");
	assert_memory_equal(k->val.value, "from-env", 8);
	k = keyring_get(kr, NULL, "d");
	assert_null(k->val.value);
	assert_non_null(strstr(k->val.error, "SBTEST_UNSET_VAR"));
	/* The session's override wins over the host's definition. */
	k = keyring_get(kr, config_session_by_name(c, "s"), "a");
	assert_memory_equal(k->val.value, "from-env", 8);
	assert_string_equal(k->session, "s");
	assert_null(keyring_get(kr, NULL, "zzz"));
	assert_int_equal(nwarn, 2);		/* b and d */
	/* Values are masked by the keyring's one redactor. */
	red = redact_string(keyring_redactor(kr), "x value-123 from-env y");
	assert_string_equal(red, "x " REDACT_MASK " " REDACT_MASK " y");
	free(red);
	/* A reload reads file sources again; the replaced value stays masked. */
	put(sp, "value-456", 0600);
	keyring_load(kr, c, &warn, &nwarn);
	k = keyring_get(kr, NULL, "a");
	assert_memory_equal(k->val.value, "value-456", 9);
	assert_int_equal(k->val.nprev, 1);
	assert_memory_equal(k->val.prev[0], "value-123", 9);
	red = redact_string(keyring_redactor(kr), "value-123 value-456");
	assert_string_equal(red, REDACT_MASK " " REDACT_MASK);
	free(red);
	/* Another: both replaced values are carried over, newest first; unchanged, nothing moves. */
	put(sp, "value-789", 0600);
	keyring_load(kr, c, &warn, &nwarn);
	keyring_load(kr, c, &warn, &nwarn);
	k = keyring_get(kr, NULL, "a");
	assert_memory_equal(k->val.value, "value-789", 9);
	assert_int_equal(k->val.nprev, 2);
	assert_memory_equal(k->val.prev[0], "value-456", 9);
	assert_memory_equal(k->val.prev[1], "value-123", 9);
	red = redact_string(keyring_redactor(kr), "value-123 value-456 value-789");
	assert_string_equal(red, REDACT_MASK " " REDACT_MASK " " REDACT_MASK);
	free(red);
	keyring_free(kr);
	for (i = 0; i < nwarn; i++)
		free(warn[i]);
	free(warn);
	/* The trial load of config_load reports the same failures as warnings. */
	assert_true(c->nwarnings >= 2);
	config_unref(c);
	expect_error("{\"runner\": \"daemon\", \"secrets\": {\"a\": {\"source\": \"file\", "
	    "\"path\": \"rel\"}}}", "secrets.a", "absolute");
	expect_error("{\"runner\": \"daemon\", \"secrets\": {\"a\": {\"source\": \"magic\"}}}",
	    "secrets.a", "unknown source");
	expect_error("{\"runner\": \"daemon\", \"secrets\": {\"a\": {\"source\": \"env\", "
	    "\"variable\": \"X\", \"extra\": 1}}}", "secrets.a", "extra");
	unlink(sp);
	unlink(sp2);
}

#define GIT_HEAD "{\"runner\": \"daemon\", " TOOLS_OK ", \"git\": {"

/* The git branch and tag lists: new names, the old alias with a warning, bad items. */
static void
test_git_lists(void **state)
{
	char *cause = NULL;
	struct config *c;
	size_t i;
	int warned = 0;

	(void)state;
	c = load(GIT_HEAD "\"no_push_branches\": [\"HEAD\", \"release\"], "
	    "\"ff_only_branches\": [\"dev\"], \"protected_tags\": [\"v*\"]}}", &cause);
	if (c == NULL)
		fail_msg("%s", cause);
	assert_int_equal(c->nno_push_branches, 2);
	assert_string_equal(c->no_push_branches[1], "release");
	assert_int_equal(c->nprotected_branches, 1);
	assert_string_equal(c->protected_branches[0], "dev");
	assert_string_equal(c->protected_tags[0], "v*");
	assert_int_equal(c->nwarnings, 0);
	config_unref(c);

	c = load(GIT_HEAD "\"protected_branches\": [\"main\"], \"no_push_branches\": []}}",
	    &cause);
	if (c == NULL)
		fail_msg("%s", cause);
	assert_int_equal(c->nprotected_branches, 1);
	assert_int_equal(c->nno_push_branches, 0);
	for (i = 0; i < c->nwarnings; i++)
		warned |= strstr(c->warnings[i], "old name of git.ff_only_branches") != NULL;
	assert_true(warned);
	config_unref(c);

	expect_error(GIT_HEAD "\"protected_branches\": [\"a\"], \"ff_only_branches\": [\"b\"]}}",
	    "not both", NULL);
	expect_error(GIT_HEAD "\"no_push_branches\": [\"refs/heads/main\"]}}",
	    "no_push_branches", "branch name");
	expect_error(GIT_HEAD "\"ff_only_branches\": [\"ma*\"]}}", "ff_only_branches", NULL);
	expect_error(GIT_HEAD "\"ff_only_branches\": [\"a,b\"]}}", "ff_only_branches", NULL);
	expect_error(GIT_HEAD "\"protected_tags\": [\"v1 x\"]}}", "protected_tags", "tag");
	expect_error(GIT_HEAD "\"protected_tags\": [\"../x\"]}}", "protected_tags", NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_minimal_defaults),
		cmocka_unit_test(test_sessions_and_dropins),
		cmocka_unit_test(test_dropin_errors_name_the_file),
		cmocka_unit_test(test_session_runners),
		cmocka_unit_test(test_tool_network),
		cmocka_unit_test(test_approval),
		cmocka_unit_test(test_rejections),
		cmocka_unit_test(test_file_permissions),
		cmocka_unit_test(test_secret_sources),
		cmocka_unit_test(test_git_lists),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
