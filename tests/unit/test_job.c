/* Unit tests: one child process and its pipes (job.c): states, output, stdin, signals. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <sodium.h>

#include "job.h"
#include "platform.h"
#include "spawn.h"

#define TEST_JOB_MANY	200

struct seen {
	char		 out[4096], err[4096];
	size_t		 nout, nerr;
	int		 eof_out, eof_err;
	int		 nstate;
	enum job_state	 states[4];
	int		 written;
	int		 free_on_closed;
	struct job	*job;
};

static void
seen_output(struct job *j, enum job_stream s, const unsigned char *buf, size_t n, void *arg)
{
	struct seen *sn = arg;
	char *dst = s == JOB_ERR ? sn->err : sn->out;
	size_t *len = s == JOB_ERR ? &sn->nerr : &sn->nout;

	(void)j;
	assert_true(n > 0);
	assert_true(*len + n < sizeof sn->out);
	memcpy(dst + *len, buf, n);
	*len += n;
	dst[*len] = '\0';
}

static void
seen_eof(struct job *j, enum job_stream s, void *arg)
{
	struct seen *sn = arg;

	(void)j;
	if (s == JOB_ERR)
		sn->eof_err++;
	else
		sn->eof_out++;
}

static void
seen_written(struct job *j, void *arg)
{
	(void)j;
	((struct seen *)arg)->written++;
}

static void
seen_state(struct job *j, void *arg)
{
	struct seen *sn = arg;

	assert_true(sn->nstate < 4);
	sn->states[sn->nstate++] = job_state(j);
	if (sn->free_on_closed && job_state(j) == JOB_CLOSED) {
		job_free(j);	/* from its own callback: released after return */
		sn->job = NULL;
	}
}

static const struct job_cb seen_cb = { seen_output, seen_eof, seen_written, seen_state };

/* Start sh -c script as uid 1 under a job. */
static struct job *
start(struct event_base *base, const char *script, struct seen *sn)
{
	char *argv[] = { "sh", "-c", (char *)script, NULL };
	char *envp[] = { "PATH=/usr/bin:/bin", NULL };
	struct spawn_req r = { "/bin/sh", argv, envp, 1, 1, -1, "/", 10, 0, NULL, 0 };
	struct child ch;
	char *cause = NULL;

	memset(sn, 0, sizeof *sn);
	assert_int_equal(spawn_child(&r, &ch, &cause), 0);
	sn->job = job_new(base, &ch, &seen_cb, sn);
	assert_int_equal(ch.in, -1);	/* transferred */
	assert_int_equal(job_state(sn->job), JOB_RUNNING);
	return sn->job;
}

/* Run the loop and the reaper until cond or a 10 s limit. */
static void
loop_until(struct event_base *base, int (*cond)(struct seen *), struct seen *sn)
{
	time_t end = time(NULL) + 10;
	int status;
	pid_t pid;

	while (!cond(sn) && time(NULL) < end) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			(void)job_reaped(pid, status);
		usleep(2000);
	}
	assert_true(cond(sn));
}

static int
is_closed(struct seen *sn)
{
	return sn->job == NULL || job_state(sn->job) == JOB_CLOSED;
}

static int
is_dead(struct seen *sn)
{
	return job_state(sn->job) != JOB_RUNNING;
}

static void
test_job_exit(void **state)
{
	struct event_base *base = event_base_new();
	struct seen sn;
	struct job *j = start(base, "echo out; echo err >&2; exit 3", &sn);
	size_t n;
	pid_t *live = job_live_pids(&n);

	(void)state;
	assert_int_equal(n, 1);
	assert_int_equal(live[0], job_pid(j));
	free(live);
	loop_until(base, is_closed, &sn);
	assert_string_equal(sn.out, "out\n");
	assert_string_equal(sn.err, "err\n");
	assert_int_equal(sn.eof_out, 1);
	assert_int_equal(sn.eof_err, 1);
	assert_true(WIFEXITED(job_status(j)) && WEXITSTATUS(job_status(j)) == 3);
	assert_true(job_reaped_at(j) > 0);
	/* Every state was passed through, in order, whichever came first. */
	assert_int_equal(sn.nstate, 2);
	assert_int_equal(sn.states[0], JOB_DEAD);
	assert_int_equal(sn.states[1], JOB_CLOSED);
	live = job_live_pids(&n);
	assert_int_equal(n, 0);
	free(live);
	/* A pid that is no job's is not dispatched; a closed job is not reaped twice. */
	assert_int_equal(job_reaped(job_pid(j), 0), 0);
	assert_int_equal(job_reaped(1, 0), 0);
	job_free(j);
	event_base_free(base);
}

static void
test_job_signal(void **state)
{
	struct event_base *base = event_base_new();
	struct seen sn;
	struct job *j = start(base, "exec sleep 30", &sn);

	(void)state;
	assert_int_equal(job_stop(j), 0);	/* SIGTERM first */
	loop_until(base, is_closed, &sn);
	assert_true(WIFSIGNALED(job_status(j)) && WTERMSIG(job_status(j)) == SIGTERM);
	job_free(j);

	j = start(base, "trap '' TERM; echo ready; sleep 30", &sn);
	while (sn.nout == 0)
		event_base_loop(base, EVLOOP_ONCE);
	assert_int_equal(job_stop(j), 0);	/* ignored */
	assert_int_equal(job_stop(j), 1);	/* then SIGKILL */
	loop_until(base, is_closed, &sn);
	assert_true(WIFSIGNALED(job_status(j)) && WTERMSIG(job_status(j)) == SIGKILL);
	job_kill(j, SIGKILL);			/* reaped: a no-op */
	job_free(j);
	event_base_free(base);
}

static void
test_job_stdin(void **state)
{
	struct event_base *base = event_base_new();
	struct evbuffer *src = evbuffer_new();
	struct seen sn;
	struct job *j = start(base, "cat; echo done", &sn);

	(void)state;
	assert_true(job_stdin_open(j));
	evbuffer_add(src, "hello ", 6);
	evbuffer_add(src, "world\n", 6);
	job_stdin(j, src, 12);
	assert_int_equal(evbuffer_get_length(src), 0);
	job_stdin_eof(j);
	assert_false(job_stdin_open(j));
	loop_until(base, is_closed, &sn);
	assert_string_equal(sn.out, "hello world\ndone\n");
	assert_true(sn.written > 0);
	assert_int_equal(job_stdin_buffered(j), 0);
	job_free(j);
	evbuffer_free(src);
	event_base_free(base);
}

/* Reaped but not drained: a process that left the group holds the pipes. */
static void
test_job_dead_not_drained(void **state)
{
	struct event_base *base = event_base_new();
	char dir[] = "/tmp/test_job.XXXXXX", script[512], path[64], buf[32];
	struct seen sn;
	struct job *j;
	FILE *f;
	long pid = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	chmod(dir, 0777);
	snprintf(path, sizeof path, "%s/pid", dir);
	snprintf(script, sizeof script, "setsid sh -c 'echo $$ > %s; exec sleep 30' & "
	    "while [ ! -s %s ]; do sleep 0.01; done; echo bye", path, path);
	j = start(base, script, &sn);
	loop_until(base, is_dead, &sn);
	/* Give the loop a moment: the pipes stay open, so no CLOSED. */
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(job_state(j), JOB_DEAD);
	assert_int_equal(sn.nstate, 1);
	job_close_output(j, -1);
	assert_int_equal(job_state(j), JOB_CLOSED);
	assert_int_equal(sn.eof_out, 1);
	assert_int_equal(sn.eof_err, 1);
	assert_int_equal(sn.nstate, 2);
	assert_non_null(f = fopen(path, "r"));
	if (fgets(buf, sizeof buf, f) != NULL)
		pid = strtol(buf, NULL, 10);
	fclose(f);
	assert_true(pid > 1);
	kill((pid_t)pid, SIGKILL);
	unlink(path);
	rmdir(dir);
	job_free(j);
	event_base_free(base);
}

/* Output is not read while paused; freeing from the job's own callback is safe. */
static void
test_job_pause_and_free_in_callback(void **state)
{
	struct event_base *base = event_base_new();
	struct seen sn;
	struct job *j = start(base, "echo x", &sn);

	(void)state;
	job_pause_output(j, 1);
	assert_true(job_output_paused(j));
	usleep(200000);
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(sn.nout, 0);
	assert_true(job_output_pending(j));
	job_pause_output(j, 0);
	sn.free_on_closed = 1;
	loop_until(base, is_closed, &sn);
	assert_null(sn.job);
	assert_string_equal(sn.out, "x\n");
	event_base_free(base);
}

/*
 * Reaped first, drained after (a leftover of the group held the pipe until the
 * reaper killed it): the owner frees the job when told it is closed, from the
 * stream's EOF; nothing may read the job after that (ASan build).
 */
static void
test_job_free_on_closed_after_reap(void **state)
{
	struct event_base *base = event_base_new();
	struct seen sn;

	(void)state;
	start(base, "(sleep 30; echo late) & echo early", &sn);
	sn.free_on_closed = 1;
	loop_until(base, is_closed, &sn);
	assert_null(sn.job);
	assert_int_equal(sn.nstate, 2);
	assert_int_equal(sn.states[0], JOB_DEAD);
	assert_int_equal(sn.states[1], JOB_CLOSED);
	assert_string_equal(sn.out, "early\n");
	event_base_free(base);
}

/* Freeing a running job kills its group; the reaper then finds no job. */
static void
test_job_free_running(void **state)
{
	struct event_base *base = event_base_new();
	struct seen sn;
	struct job *j = start(base, "exec sleep 30", &sn);
	pid_t pid = job_pid(j);
	int status;

	(void)state;
	job_free(j);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	assert_int_equal(job_reaped(pid, status), 0);
	event_base_free(base);
}

/* job_wait blocks until the end and dispatches as the reaper would. */
static void
test_job_wait(void **state)
{
	struct event_base *base = event_base_new();
	struct seen sn;
	struct job *j = start(base, "exit 7", &sn);

	(void)state;
	job_wait(j);
	assert_true(job_state(j) != JOB_RUNNING);
	assert_true(WIFEXITED(job_status(j)) && WEXITSTATUS(job_status(j)) == 7);
	job_close_output(j, -1);
	assert_int_equal(job_state(j), JOB_CLOSED);
	job_free(j);
	event_base_free(base);
}

/*
 * The orphan scan keeps every live job, however many (the keep list once had a
 * fixed bound of 4096 beyond which legitimate children were killed): n live
 * jobs, none killed; leave one out of the list and exactly that one is.
 */
static pid_t test_job_left_out;

/* Every live job but test_job_left_out. */
static int
test_job_keep_but_one(pid_t pid)
{
	return pid != test_job_left_out && job_is_live(pid);
}

static void
test_job_orphan_scan_keeps_all(void **state)
{
	struct event_base *base = event_base_new();
	struct seen sn[TEST_JOB_MANY];
	pid_t *live;
	size_t n, i;
	int status;

	(void)state;
	for (i = 0; i < TEST_JOB_MANY; i++)
		(void)start(base, "exec sleep 30", &sn[i]);
	live = job_live_pids(&n);
	assert_int_equal(n, TEST_JOB_MANY);
	for (i = 0; i < n; i++)
		assert_true(job_is_live(live[i]));
	assert_int_equal(platform_kill_orphans(job_is_live), 0);
	test_job_left_out = live[0];
	assert_int_equal(platform_kill_orphans(test_job_keep_but_one), 1);
	assert_int_equal(waitpid(live[0], &status, 0), live[0]);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	assert_int_equal(job_reaped(live[0], status), 1);
	free(live);
	for (i = 0; i < TEST_JOB_MANY; i++)
		job_free(sn[i].job);
	while (waitpid(-1, &status, 0) > 0)
		;
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_job_exit),
		cmocka_unit_test(test_job_signal),
		cmocka_unit_test(test_job_stdin),
		cmocka_unit_test(test_job_dead_not_drained),
		cmocka_unit_test(test_job_pause_and_free_in_callback),
		cmocka_unit_test(test_job_free_on_closed_after_reap),
		cmocka_unit_test(test_job_free_running),
		cmocka_unit_test(test_job_wait),
		cmocka_unit_test(test_job_orphan_scan_keeps_all),
	};

	if (sodium_init() < 0)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
