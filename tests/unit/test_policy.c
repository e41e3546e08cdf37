/* Unit tests: argv policy matching and denial messages. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "policy.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void
test_rule_matching(void **state)
{
	char *p1[] = { "pr", "list", "**" };
	char *p2[] = { "pr", "view", "*" };
	char *p3[] = { "api", "repos/*" };
	char *a1[] = { "pr", "list" };
	char *a2[] = { "pr", "list", "--state", "open" };
	char *a3[] = { "pr", "view", "12" };
	char *a4[] = { "pr", "view", "12", "--web" };
	char *a5[] = { "pr" };
	char *a6[] = { "api", "repos/o/r" };
	char *a7[] = { "api", "repos/o/r", "extra" };

	(void)state;
	assert_true(policy_rule_matches(p1, N(p1), a1, N(a1)));
	assert_true(policy_rule_matches(p1, N(p1), a2, N(a2)));
	assert_false(policy_rule_matches(p1, N(p1), a3, N(a3)));
	assert_true(policy_rule_matches(p2, N(p2), a3, N(a3)));
	assert_false(policy_rule_matches(p2, N(p2), a4, N(a4)));	/* exact length */
	assert_false(policy_rule_matches(p2, N(p2), a5, N(a5)));	/* too short */
	assert_true(policy_rule_matches(p3, N(p3), a6, N(a6)));	/* fnmatch, / not special */
	assert_false(policy_rule_matches(p3, N(p3), a7, N(a7)));
	assert_true(policy_rule_matches(NULL, 0, NULL, 0));
	assert_false(policy_rule_matches(NULL, 0, a5, N(a5)));
}

/* A small config built by hand: one tool with deny_args and ordered rules. */
static void
make_config(struct config *c, struct tool *t, struct session *s, struct rule *r)
{
	static char *deny_args[] = { "--web", "--hostname*" };
	static char *r0[] = { "auth", "**" };
	static char *r1[] = { "pr", "list", "**" };
	static char *r2[] = { "pr", "**" };
	static char *tools[] = { "gh" };

	memset(c, 0, sizeof *c);
	memset(t, 0, sizeof *t);
	memset(s, 0, sizeof *s);
	memset(r, 0, 3 * sizeof *r);
	r[0].allow = 0; r[0].argv = r0; r[0].nargv = N(r0); r[0].where = "tools.gh.rules[0]";
	r[0].reason = "tokens stay on the host";
	r[1].allow = 1; r[1].argv = r1; r[1].nargv = N(r1); r[1].where = "tools.gh.rules[1]";
	r[2].allow = 0; r[2].argv = r2; r[2].nargv = N(r2); r[2].where = "tools.gh.rules[2]";
	t->name = "gh";
	t->path = "/usr/bin/gh";
	t->rules = r;
	t->nrules = 3;
	t->deny_args = deny_args;
	t->ndeny_args = N(deny_args);
	c->tools = t;
	c->ntools = 1;
	s->name = "alice";
	s->tools = tools;
	s->ntools = 1;
}

static void
test_policy_order(void **state)
{
	struct config c;
	struct tool t;
	struct session s;
	struct rule r[3];
	struct policy_result pr;
	char *ok[] = { "pr", "list", "--state", "open" };
	char *tok[] = { "auth", "token" };
	char *merge[] = { "pr", "merge", "1" };
	char *web[] = { "pr", "list", "--web" };
	char *host[] = { "pr", "list", "--hostname=evil.example" };
	char *other[] = { "repo", "delete" };

	(void)state;
	make_config(&c, &t, &s, r);
	assert_int_equal(policy_check(&c, &s, &t, ok, N(ok), &pr), 1);
	assert_string_equal(pr.rule, "tools.gh.rules[1]");
	policy_result_free(&pr);

	assert_int_equal(policy_check(&c, &s, &t, tok, N(tok), &pr), 0);
	assert_string_equal(pr.rule, "tools.gh.rules[0]");
	assert_string_equal(pr.reason, "tokens stay on the host");
	assert_non_null(strstr(pr.message, "gh auth token"));
	assert_non_null(strstr(pr.message, "gh pr list [ARGS]"));
	assert_non_null(strstr(pr.message, "tokens stay on the host"));
	policy_result_free(&pr);

	/* First match wins: pr merge falls through the allow rule to the deny rule. */
	assert_int_equal(policy_check(&c, &s, &t, merge, N(merge), &pr), 0);
	assert_string_equal(pr.rule, "tools.gh.rules[2]");
	policy_result_free(&pr);

	/* deny_args beat an allow rule, in both --opt and --opt=value forms. */
	assert_int_equal(policy_check(&c, &s, &t, web, N(web), &pr), 0);
	assert_string_equal(pr.rule, "tools.gh.deny_args[0]");
	policy_result_free(&pr);
	assert_int_equal(policy_check(&c, &s, &t, host, N(host), &pr), 0);
	assert_string_equal(pr.rule, "tools.gh.deny_args[1]");
	policy_result_free(&pr);

	/* Nothing matched: deny by default. */
	assert_int_equal(policy_check(&c, &s, &t, other, N(other), &pr), 0);
	assert_string_equal(pr.rule, "default");
	assert_non_null(strstr(pr.message, "ask the operator"));
	policy_result_free(&pr);
}

static void
test_message_is_bounded(void **state)
{
	struct config c;
	struct tool t;
	struct session s;
	struct rule r[3];
	struct policy_result pr;
	char *argv[300];
	char big[5000];
	size_t i;

	(void)state;
	make_config(&c, &t, &s, r);
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	for (i = 0; i < N(argv); i++)
		argv[i] = big;
	assert_int_equal(policy_check(&c, &s, &t, argv, N(argv), &pr), 0);
	assert_true(strlen(pr.message) < 2048);
	policy_result_free(&pr);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rule_matching),
		cmocka_unit_test(test_policy_order),
		cmocka_unit_test(test_message_is_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
