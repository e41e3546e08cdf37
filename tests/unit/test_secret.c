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
make_src(struct secret_src *s, struct secret_val *v, int ttl)
{
	static char *argv[] = { "/usr/local/bin/mint-token", NULL };

	memset(s, 0, sizeof *s);
	memset(v, 0, sizeof *v);
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
	struct secret_val v;

	(void)state;
	make_src(&s, &v, 300);
	assert_true(secret_due(&s, &v));		/* nothing yet: run it */
	assert_false(secret_usable(&s, &v));
	secret_command_done(&s, &v, (const unsigned char *)"value-1\n", 8, OK_STATUS, NULL);
	assert_non_null(v.value);
	assert_int_equal(v.len, 7);		/* one trailing newline dropped */
	assert_memory_equal(v.value, "value-1", 7);
	assert_null(v.error);
	assert_true(secret_usable(&s, &v));
	assert_false(secret_due(&s, &v));		/* fresh */
	/* A fifth of the ttl before expiry it is due, still usable. */
	v.loaded_at = time(NULL) - 241;
	assert_true(secret_due(&s, &v));
	assert_true(secret_usable(&s, &v));
	/* While a renewal runs it is not due again. */
	v.refreshing = 1;
	assert_false(secret_due(&s, &v));
	v.refreshing = 0;
	/* Past the ttl it may not be used. */
	v.loaded_at = time(NULL) - 300;
	assert_false(secret_usable(&s, &v));
	secret_clear(&s);
	secret_val_clear(&v);
}

static void
test_short_ttl_lead(void **state)
{
	struct secret_src s;
	struct secret_val v;

	(void)state;
	make_src(&s, &v, 2);
	secret_command_done(&s, &v, (const unsigned char *)"v", 1, OK_STATUS, NULL);
	v.loaded_at = time(NULL);
	assert_false(secret_due(&s, &v));
	v.loaded_at = time(NULL) - 1;		/* at least 1 s ahead of expiry */
	assert_true(secret_due(&s, &v));
	assert_true(secret_usable(&s, &v));
	secret_clear(&s);
	secret_val_clear(&v);
}

static void
test_renewal_keeps_previous(void **state)
{
	struct secret_src s;
	struct secret_val v;
	size_t i;

	(void)state;
	make_src(&s, &v, 60);
	secret_command_done(&s, &v, (const unsigned char *)"old-value", 9, OK_STATUS, NULL);
	secret_command_done(&s, &v, (const unsigned char *)"new-value", 9, OK_STATUS, NULL);
	assert_memory_equal(v.value, "new-value", 9);
	assert_int_equal(v.nprev, 1);
	assert_int_equal(v.prev_len[0], 9);
	assert_memory_equal(v.prev[0], "old-value", 9);
	secret_command_done(&s, &v, (const unsigned char *)"third", 5, OK_STATUS, NULL);
	assert_int_equal(v.nprev, 2);
	assert_memory_equal(v.prev[0], "new-value", 9);
	assert_memory_equal(v.prev[1], "old-value", 9);
	/* At most SECRET_PREV_MAX are kept, newest first: the oldest go first. */
	for (i = 0; i < SECRET_PREV_MAX; i++) {
		char val[16];

		snprintf(val, sizeof val, "value-%02zu", i);
		secret_command_done(&s, &v, (const unsigned char *)val, 8, OK_STATUS, NULL);
	}
	assert_int_equal(v.nprev, SECRET_PREV_MAX);
	assert_memory_equal(v.prev[0], "value-06", 8);
	assert_int_equal(v.prev_len[SECRET_PREV_MAX - 1], 5);
	assert_memory_equal(v.prev[SECRET_PREV_MAX - 1], "third", 5);
	secret_clear(&s);
	secret_val_clear(&v);
}

static void
test_failure_keeps_valid_value_and_backs_off(void **state)
{
	struct secret_src s;
	struct secret_val v;
	time_t now = time(NULL);

	(void)state;
	make_src(&s, &v, 60);
	secret_command_done(&s, &v, (const unsigned char *)"good-value", 10, OK_STATUS, NULL);
	v.loaded_at = now - 50;			/* due, still valid */
	secret_command_done(&s, &v, NULL, 0, FAIL_STATUS, NULL);
	assert_non_null(v.value);		/* an expiring token beats none */
	assert_memory_equal(v.value, "good-value", 10);
	assert_non_null(v.error);
	assert_non_null(strstr(v.error, "status 3"));
	assert_null(strstr(v.error, "good-value"));
	assert_true(v.retry_at >= now + 30);	/* back-off min(ttl, 30) */
	assert_false(secret_due(&s, &v));
	/* A failure after expiry drops the value. */
	v.loaded_at = now - 61;
	secret_command_done(&s, &v, NULL, 0, OK_STATUS, "did not finish within 5 seconds");
	assert_null(v.value);
	assert_false(secret_usable(&s, &v));
	assert_non_null(strstr(v.error, "did not finish"));
	/* Once the back-off has passed it is due again. */
	v.retry_at = now - 1;
	assert_true(secret_due(&s, &v));
	secret_clear(&s);
	secret_val_clear(&v);
}

static void
test_backoff_bounded_by_ttl(void **state)
{
	struct secret_src s;
	struct secret_val v;
	time_t now = time(NULL);

	(void)state;
	make_src(&s, &v, 5);
	secret_command_done(&s, &v, NULL, 0, FAIL_STATUS, NULL);
	assert_true(v.retry_at >= now + 5 && v.retry_at <= now + 6);
	/* An empty output is a failure too, never an empty secret. */
	v.retry_at = 0;
	secret_command_done(&s, &v, (const unsigned char *)"\n", 1, OK_STATUS, NULL);
	assert_null(v.value);
	assert_non_null(strstr(v.error, "empty"));
	secret_clear(&s);
	secret_val_clear(&v);
}

static void
test_other_sources_never_due(void **state)
{
	struct secret_src s;
	struct secret_val v;

	(void)state;
	memset(&s, 0, sizeof s);
	memset(&v, 0, sizeof v);
	s.type = SECRET_FILE;
	assert_false(secret_due(&s, &v));
	assert_false(secret_usable(&s, &v));
	v.value = sodium_malloc(1);
	v.len = 1;
	v.loaded_at = 1;			/* ancient: files have no ttl */
	assert_true(secret_usable(&s, &v));
	sodium_free(v.value);
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
