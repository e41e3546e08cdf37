/* Unit tests: the command source's ttl cache (due, usable, renewal, failure, back-off). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/wait.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "secret.h"

#define OK_STATUS	0		/* a wait status: exited 0 */
#define FAIL_STATUS	(3 << 8)	/* exited 3 */

/* A command source with a ttl and no value yet. */
static void
make_src(struct secret_src *s, int ttl)
{
	static char *argv[] = { "/usr/local/bin/mint-token", NULL };

	memset(s, 0, sizeof *s);
	s->name = strdup("tok");
	s->type = SECRET_COMMAND;
	s->argv = calloc(2, sizeof *s->argv);
	s->argv[0] = strdup(argv[0]);
	s->nargv = 1;
	s->ttl = ttl;
	s->timeout = 5;
}

static void
test_first_value_and_ttl(void **state)
{
	struct secret_src s;

	(void)state;
	make_src(&s, 300);
	assert_true(secret_due(&s));		/* nothing yet: run it */
	assert_false(secret_usable(&s));
	secret_command_done(&s, (const unsigned char *)"value-1\n", 8, OK_STATUS, NULL);
	assert_non_null(s.value);
	assert_int_equal(s.len, 7);		/* one trailing newline dropped */
	assert_memory_equal(s.value, "value-1", 7);
	assert_null(s.error);
	assert_true(secret_usable(&s));
	assert_false(secret_due(&s));		/* fresh */
	/* A fifth of the ttl before expiry it is due, still usable. */
	s.loaded_at = time(NULL) - 241;
	assert_true(secret_due(&s));
	assert_true(secret_usable(&s));
	/* While a renewal runs it is not due again. */
	s.refreshing = 1;
	assert_false(secret_due(&s));
	s.refreshing = 0;
	/* Past the ttl it may not be used. */
	s.loaded_at = time(NULL) - 300;
	assert_false(secret_usable(&s));
	secret_clear(&s);
}

static void
test_short_ttl_lead(void **state)
{
	struct secret_src s;

	(void)state;
	make_src(&s, 2);
	secret_command_done(&s, (const unsigned char *)"v", 1, OK_STATUS, NULL);
	s.loaded_at = time(NULL);
	assert_false(secret_due(&s));
	s.loaded_at = time(NULL) - 1;		/* at least 1 s ahead of expiry */
	assert_true(secret_due(&s));
	assert_true(secret_usable(&s));
	secret_clear(&s);
}

static void
test_renewal_keeps_previous(void **state)
{
	struct secret_src s;

	(void)state;
	make_src(&s, 60);
	secret_command_done(&s, (const unsigned char *)"old-value", 9, OK_STATUS, NULL);
	secret_command_done(&s, (const unsigned char *)"new-value", 9, OK_STATUS, NULL);
	assert_memory_equal(s.value, "new-value", 9);
	assert_non_null(s.prev);
	assert_int_equal(s.prev_len, 9);
	assert_memory_equal(s.prev, "old-value", 9);
	secret_command_done(&s, (const unsigned char *)"third", 5, OK_STATUS, NULL);
	assert_memory_equal(s.prev, "new-value", 9);
	secret_clear(&s);
}

static void
test_failure_keeps_valid_value_and_backs_off(void **state)
{
	struct secret_src s;
	time_t now = time(NULL);

	(void)state;
	make_src(&s, 60);
	secret_command_done(&s, (const unsigned char *)"good-value", 10, OK_STATUS, NULL);
	s.loaded_at = now - 50;			/* due, still valid */
	secret_command_done(&s, NULL, 0, FAIL_STATUS, NULL);
	assert_non_null(s.value);		/* an expiring token beats none */
	assert_memory_equal(s.value, "good-value", 10);
	assert_non_null(s.error);
	assert_non_null(strstr(s.error, "status 3"));
	assert_null(strstr(s.error, "good-value"));
	assert_true(s.retry_at >= now + 30);	/* back-off min(ttl, 30) */
	assert_false(secret_due(&s));
	/* A failure after expiry drops the value. */
	s.loaded_at = now - 61;
	secret_command_done(&s, NULL, 0, OK_STATUS, "did not finish within 5 seconds");
	assert_null(s.value);
	assert_false(secret_usable(&s));
	assert_non_null(strstr(s.error, "did not finish"));
	/* Once the back-off has passed it is due again. */
	s.retry_at = now - 1;
	assert_true(secret_due(&s));
	secret_clear(&s);
}

static void
test_backoff_bounded_by_ttl(void **state)
{
	struct secret_src s;
	time_t now = time(NULL);

	(void)state;
	make_src(&s, 5);
	secret_command_done(&s, NULL, 0, FAIL_STATUS, NULL);
	assert_true(s.retry_at >= now + 5 && s.retry_at <= now + 6);
	/* An empty output is a failure too, never an empty secret. */
	s.retry_at = 0;
	secret_command_done(&s, (const unsigned char *)"\n", 1, OK_STATUS, NULL);
	assert_null(s.value);
	assert_non_null(strstr(s.error, "empty"));
	secret_clear(&s);
}

static void
test_other_sources_never_due(void **state)
{
	struct secret_src s;

	(void)state;
	memset(&s, 0, sizeof s);
	s.type = SECRET_FILE;
	assert_false(secret_due(&s));
	assert_false(secret_usable(&s));
	s.value = sodium_malloc(1);
	s.len = 1;
	s.loaded_at = 1;			/* ancient: files have no ttl */
	assert_true(secret_usable(&s));
	sodium_free(s.value);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_value_and_ttl),
		cmocka_unit_test(test_short_ttl_lead),
		cmocka_unit_test(test_renewal_keeps_previous),
		cmocka_unit_test(test_failure_keeps_valid_value_and_backs_off),
		cmocka_unit_test(test_backoff_bounded_by_ttl),
		cmocka_unit_test(test_other_sources_never_due),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
