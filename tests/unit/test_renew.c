/*
 * Unit tests: background renewal of command secrets (renew.c) as jobs, into the
 * keyring: a due source is renewed, the replaced value stays masked, a result
 * for a key that was reloaded meanwhile is dropped, and stopping finishes runs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <sodium.h>

#include "config.h"
#include "job.h"
#include "keyring.h"
#include "redact.h"
#include "renew.h"
#include "spawn.h"

static char dir[64];
static struct config *cfg;
static struct keyring *kr;
static struct event_base *base;

/* Write a root-owned file with a mode. */
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
	char path[128], sd[128], text[1024], *cause = NULL, **warn = NULL;
	size_t nwarn = 0;

	(void)state;
	strcpy(dir, "/tmp/sbrenew.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	chmod(dir, 0755);
	snprintf(sd, sizeof sd, "%s/sessions.d", dir);
	mkdir(sd, 0700);
	/* Each run prints a new value: the nanosecond clock. */
	snprintf(text, sizeof text, "{\"runner\": \"daemon\", \"secrets\": {\"tok\": "
	    "{\"source\": \"command\", \"command\": [\"/bin/sh\", \"-c\", "
	    "\"echo renewed-$(date +%%s%%N)\"], \"ttl\": 300, \"timeout\": 5}}}");
	snprintf(path, sizeof path, "%s/config.json", dir);
	put(path, text, 0600);
	if ((cfg = config_load(path, 1, &cause)) == NULL) {
		fprintf(stderr, "%s\n", cause);
		return -1;
	}
	kr = keyring_new();
	keyring_load(kr, cfg, &warn, &nwarn);
	base = event_base_new();
	return nwarn == 0 ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	keyring_free(kr);
	config_unref(cfg);
	event_base_free(base);
	return spawn_rmtree(dir);
}

/* Run the loop and the reaper until the key's renewal is over (10 s at most). */
static void
pump(struct key *k)
{
	time_t end = time(NULL) + 10;
	int status;
	pid_t pid;

	while (k->val.refreshing && time(NULL) < end) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			(void)job_reaped(pid, status);
		usleep(2000);
	}
	assert_false(k->val.refreshing);
}

static void
test_renew_due_value(void **state)
{
	struct key *k = keyring_get(kr, NULL, "tok");
	unsigned char old[64];
	size_t oldlen;
	char *in, *red;

	(void)state;
	assert_non_null(k);
	assert_non_null(k->val.value);		/* loaded at start */
	assert_true(k->val.len < sizeof old);
	oldlen = k->val.len;
	memcpy(old, k->val.value, oldlen);
	renew_sweep(base, kr, cfg);
	assert_false(k->val.refreshing);		/* fresh: not due */
	k->val.loaded_at -= 290;			/* within the last fifth of its ttl */
	renew_sweep(base, kr, cfg);
	assert_true(k->val.refreshing);
	renew_sweep(base, kr, cfg);			/* not started twice */
	pump(k);
	assert_null(k->val.error);
	assert_non_null(k->val.value);
	assert_false(k->val.len == oldlen && memcmp(k->val.value, old, oldlen) == 0);
	assert_int_equal(k->val.nprev, 1);
	assert_int_equal(k->val.prev_len[0], oldlen);
	assert_memory_equal(k->val.prev[0], old, oldlen);
	/* The keyring's redactor was rebuilt: both values are masked. */
	assert_true(asprintf(&in, "a %.*s b %.*s c", (int)oldlen, (const char *)old,
	    (int)k->val.len, (const char *)k->val.value) > 0);
	red = redact_string(keyring_redactor(kr), in);
	assert_string_equal(red, "a " REDACT_MASK " b " REDACT_MASK " c");
	free(red);
	free(in);
}

/* A reload while a renewal runs: its result is dropped, the reloaded value stays. */
static void
test_renew_dropped_after_reload(void **state)
{
	struct key *k = keyring_get(kr, NULL, "tok");
	unsigned char now[64];
	char **warn = NULL;
	size_t nwarn = 0, len;

	(void)state;
	k->val.loaded_at -= 290;
	renew_sweep(base, kr, cfg);
	assert_true(k->val.refreshing);
	keyring_load(kr, cfg, &warn, &nwarn);	/* SIGHUP: the key is made anew */
	assert_int_equal(nwarn, 0);
	k = keyring_get(kr, NULL, "tok");
	assert_false(k->val.refreshing);
	len = k->val.len;
	memcpy(now, k->val.value, len);
	{
		time_t end = time(NULL) + 10;
		int status;
		pid_t pid;

		/* Until the old run is reaped and finished (its job list empties). */
		while (time(NULL) < end) {
			size_t n;
			pid_t *live;

			event_base_loop(base, EVLOOP_NONBLOCK);
			while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
				(void)job_reaped(pid, status);
			live = job_live_pids(&n);
			free(live);
			if (n == 0)
				break;
			usleep(2000);
		}
		for (int i = 0; i < 50; i++) {
			event_base_loop(base, EVLOOP_NONBLOCK);
			usleep(1000);
		}
	}
	assert_int_equal(k->val.len, len);
	assert_memory_equal(k->val.value, now, len);	/* not overwritten */
}

/* Stopping kills, reaps and finishes a run under way. */
static void
test_renew_stop_all(void **state)
{
	struct key *k = keyring_get(kr, NULL, "tok");
	size_t n;
	pid_t *live;

	(void)state;
	k->val.loaded_at -= 290;
	renew_sweep(base, kr, cfg);
	assert_true(k->val.refreshing);
	renew_stop_all();
	assert_false(k->val.refreshing);
	live = job_live_pids(&n);
	free(live);
	assert_int_equal(n, 0);
	assert_non_null(k->val.error);
	assert_non_null(strstr(k->val.error, "stopped: the bridge is stopping"));
	assert_non_null(k->val.value);		/* still within its ttl: kept */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_renew_due_value),
		cmocka_unit_test(test_renew_dropped_after_reload),
		cmocka_unit_test(test_renew_stop_all),
	};

	if (sodium_init() < 0)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
