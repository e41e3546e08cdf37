/*
 * Unit tests: cgroup v2 containment (bridge/cgroup.c) against the real kernel. They
 * need root and a writable cgroup2 hierarchy; without one, cgroup_init must say why
 * and the tests that need a cgroup are skipped.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "proc.h"

static int	cg_on;

/*
 * Start path with argv as a child in the cgroup of cgfd (> 2; else ours), the way
 * the daemon starts unjailed tools (proc_spawn: clone3 with CLONE_INTO_CGROUP).
 * Its stdout is a pipe: *out gets the read end when out is not NULL.
 */
static pid_t
start_in(int cgfd, const char *path, char *const argv[], int *out)
{
	char *const envp[] = { NULL };
	struct proc_req r;
	struct proc p;
	char *cause = NULL;

	proc_req_init(&r, path, argv, envp);
	r.cgroup_fd = cgfd;
	if (out != NULL)
		r.fd[1] = PROC_PIPE;
	if (proc_spawn(&r, &p, &cause) != 0) {
		print_message("proc_spawn: %s\n", cause);
		free(cause);
		return -1;
	}
	if (out != NULL)
		*out = p.fd[1];
	return p.pid;
}

/* The cgroup line of a child started in cgfd's cgroup. */
static void
cgroup_of_child(int cgfd, char *line, size_t size)
{
	char *const argv[] = { "cat", "/proc/self/cgroup", NULL };
	size_t got = 0;
	ssize_t n;
	pid_t pid;
	int fd = -1, st;

	pid = start_in(cgfd, "/bin/cat", argv, &fd);
	assert_true(pid > 0);
	while (got < size - 1 && (n = read(fd, line + got, size - 1 - got)) > 0)
		got += (size_t)n;
	line[got] = '\0';
	close(fd);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static int
setup(void **state)
{
	char *msg = NULL;

	(void)state;
	cg_on = cgroup_init(&msg);
	assert_non_null(msg);
	/* Either path says which it is, and the fallback says why. */
	if (cg_on)
		assert_non_null(strstr(msg, "process containment: cgroup v2, a cgroup per session under "));
	else
		assert_non_null(strstr(msg, "cgroup v2 is not used because "));
	assert_int_equal(cgroup_enabled(), cg_on);
	free(msg);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	cgroup_shutdown();
	assert_false(cgroup_enabled());
	return 0;
}

/* Without cgroups, a session has no cgroup (fd 0: children start in ours). */
static void
test_cgroup_off_or_fd(void **state)
{
	char *cause = NULL;
	int fd;

	(void)state;
	fd = cgroup_session_fd("alice", &cause);
	if (!cg_on) {
		assert_int_equal(fd, 0);
		return;
	}
	assert_true(fd > 2);
	assert_null(cause);
	close(fd);
}

/* A child started with the session's cgroup fd is in that cgroup from its start. */
static void
test_cgroup_child_in_session(void **state)
{
	char *cause = NULL, line[4096];
	int fd;

	(void)state;
	if (!cg_on)
		skip();
	fd = cgroup_session_fd("alice", &cause);
	assert_true(fd > 2);
	cgroup_of_child(fd, line, sizeof line);
	close(fd);
	assert_non_null(strstr(line, "0::/"));
	assert_non_null(strstr(line, "/s-alice."));
	/* Without a cgroup fd: the parent's cgroup. */
	cgroup_of_child(-1, line, sizeof line);
	assert_null(strstr(line, "/s-alice."));
}

/* Killing a session's cgroup kills what runs in it; the sweep removes it. */
static void
test_cgroup_session_kill(void **state)
{
	char *cause = NULL, path[4096];
	int fd, st, n;
	pid_t pid;

	(void)state;
	if (!cg_on)
		skip();
	fd = cgroup_session_fd("bob", &cause);
	assert_true(fd > 2);
	{
		char *const argv[] = { "sleep", "300", NULL };

		pid = start_in(fd, "/bin/sleep", argv, NULL);
	}
	close(fd);
	assert_true(pid > 0);
	/* Which directory the sleep is in, from its own /proc entry. */
	{
		char p[64];
		size_t len;
		FILE *f;

		snprintf(p, sizeof p, "/proc/%ld/cgroup", (long)pid);
		assert_non_null(f = fopen(p, "re"));
		len = fread(path, 1, sizeof path - 1, f);
		fclose(f);
		path[len] = '\0';
		assert_non_null(strstr(path, "/s-bob."));
	}
	n = cgroup_session_kill("bob");
	assert_int_equal(n, 1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGKILL);
	/* A killed session is gone from the table: a new call gets a new cgroup. */
	cgroup_sweep();
	assert_int_equal(cgroup_session_kill("bob"), 0);
	fd = cgroup_session_fd("bob", &cause);
	assert_true(fd > 2);
	close(fd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cgroup_off_or_fd),
		cmocka_unit_test(test_cgroup_child_in_session),
		cmocka_unit_test(test_cgroup_session_kill),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "test_cgroup: needs root (cgroups); skipped\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
