/* Unit tests: the table of calls waiting for approval, timed approvals, durations. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approve.h"

static void
test_table(void **state)
{
	struct approve *a = approve_new();
	struct approve_entry *e1, *e2, *e3;
	char big[APPROVE_COMMAND_MAX + 50];
	int owner;

	(void)state;
	e1 = approve_add(a, "alice", "gh pr merge 3", "k1", "tools.gh.rules[0]", 100, 300,
	    &owner);
	e2 = approve_add(a, "bob", "gh pr merge 4", "k2", "tools.gh.rules[0]", 101, 10, NULL);
	assert_non_null(e1);
	assert_non_null(e2);
	assert_int_equal(e1->id, 1);
	assert_int_equal(e2->id, 2);
	assert_int_equal(e1->deadline, 400);
	assert_ptr_equal(e1->owner, &owner);
	assert_int_equal(approve_count(a), 2);
	assert_ptr_equal(approve_find(a, 2), e2);
	assert_null(approve_find(a, 3));
	assert_ptr_equal(approve_first(a), e1);
	assert_ptr_equal(approve_next(e1), e2);
	assert_null(approve_next(e2));
	approve_remove(a, e1);
	assert_null(approve_find(a, 1));
	assert_int_equal(approve_count(a), 1);
	/* Ids are never reused. */
	e3 = approve_add(a, "alice", "gh pr merge 3", "k1", "r", 102, 5, NULL);
	assert_int_equal(e3->id, 3);
	/* A long command is cut. */
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	e3 = approve_add(a, "alice", big, "k", "r", 102, 5, NULL);
	assert_int_equal(strlen(e3->command), APPROVE_COMMAND_MAX);
	assert_string_equal(e3->command + APPROVE_COMMAND_MAX - 3, "...");
	approve_free(a);
}

static void
test_table_full(void **state)
{
	struct approve *a = approve_new();
	size_t i;

	char name[32];

	(void)state;
	/* One session: APPROVE_SESSION_MAX at most; another session still may wait. */
	for (i = 0; i < APPROVE_SESSION_MAX; i++)
		assert_non_null(approve_add(a, "s", "c", "k", "r", 1, 1, NULL));
	assert_null(approve_add(a, "s", "c", "k", "r", 1, 1, NULL));
	assert_non_null(approve_add(a, "t", "c", "k", "r", 1, 1, NULL));
	approve_remove(a, approve_first(a));
	assert_non_null(approve_add(a, "s", "c", "k", "r", 1, 1, NULL));
	/* Every session: APPROVE_PENDING_MAX at most. */
	for (i = 0; approve_count(a) < APPROVE_PENDING_MAX; i++) {
		snprintf(name, sizeof name, "u%zu", i / (APPROVE_SESSION_MAX - 1));
		assert_non_null(approve_add(a, name, "c", "k", "r", 1, 1, NULL));
	}
	assert_null(approve_add(a, "fresh", "c", "k", "r", 1, 1, NULL));
	approve_free(a);
}

static void
test_grants(void **state)
{
	struct approve *a = approve_new();
	char key[32];
	size_t i;

	(void)state;
	assert_false(approve_granted(a, "alice", "k1", 100));
	assert_int_equal(approve_grant(a, "alice", "k1", 100, 700), 0);
	assert_true(approve_granted(a, "alice", "k1", 699));
	assert_false(approve_granted(a, "bob", "k1", 200));	/* another session */
	assert_false(approve_granted(a, "alice", "k2", 200));	/* another call */
	assert_false(approve_granted(a, "alice", "k1", 700));	/* expired, and dropped */
	assert_int_equal(approve_grants(a, 700), 0);
	/* A later grant replaces an earlier one. */
	assert_int_equal(approve_grant(a, "alice", "k1", 100, 200), 0);
	assert_int_equal(approve_grant(a, "alice", "k1", 100, 900), 0);
	assert_int_equal(approve_grants(a, 150), 1);
	assert_true(approve_granted(a, "alice", "k1", 800));
	/* Bounded. */
	for (i = 1; i < APPROVE_GRANTS_MAX; i++) {
		snprintf(key, sizeof key, "k%zu", i + 10);
		assert_int_equal(approve_grant(a, "alice", key, 100, 1000), 0);
	}
	assert_int_equal(approve_grant(a, "alice", "one-more", 100, 1000), -1);
	/* Expired grants make room. */
	assert_int_equal(approve_grant(a, "alice", "one-more", 1000, 2000), 0);
	assert_int_equal(approve_grants(a, 1000), 1);
	approve_free(a);
}

static void
test_duration(void **state)
{
	static const struct { const char *s; long v; } ok[] = {
		{ "1", 1 }, { "90", 90 }, { "90s", 90 }, { "10m", 600 }, { "2h", 7200 },
		{ "1d", 86400 }, { "7d", 604800 }, { "604800", 604800 }, { "168h", 604800 },
	};
	static const char *const bad[] = {
		"", "0", "0m", "m", "-1", "+5", " 5", "5 ", "5x", "5mm", "1.5h", "8d",
		"604801", "99999999999999999999", "10M", "1w", "5m\n",
	};
	const char *why;
	size_t i;
	long v;

	(void)state;
	for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		v = -1;
		assert_int_equal(approve_parse_duration(ok[i].s, &v, &why), 0);
		assert_int_equal(v, ok[i].v);
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		why = NULL;
		assert_int_equal(approve_parse_duration(bad[i], &v, &why), -1);
		assert_non_null(why);
	}
	assert_int_equal(approve_parse_duration(NULL, &v, &why), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_table_full),
		cmocka_unit_test(test_grants),
		cmocka_unit_test(test_duration),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
