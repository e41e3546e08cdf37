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

static int	cg_on;
static char	cg_line[4096];		/* what a child read from /proc/self/cgroup */
static char	cg_stack[64 * 1024] __attribute__((aligned(16)));

/* A CLONE_VM child: note its own cgroup line in our memory, exit 7. */
static int
child_note_cgroup(void *arg)
{
	ssize_t n;
	int fd;

	(void)arg;
	if ((fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC)) < 0)
		return 1;
	n = read(fd, cg_line, sizeof cg_line - 1);
	close(fd);
	if (n <= 0)
		return 2;
	cg_line[n] = '\0';
	return 7;
}

/* A CLONE_VM|CLONE_VFORK child that becomes a long sleep. */
static int
child_sleep(void *arg)
{
	char *const argv[] = { "sleep", "300", NULL };
	char *const envp[] = { NULL };

	(void)arg;
	execve("/bin/sleep", argv, envp);
	return 127;
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

/* Without cgroups, a session has no cgroup and cgroup_clone is a plain clone. */
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

/* A CLONE_VM|CLONE_VFORK child on its own stack starts in the session's cgroup. */
static void
test_cgroup_clone_into_session(void **state)
{
	char *cause = NULL;
	int fd, st;
	pid_t pid;

	(void)state;
	if (!cg_on)
		skip();
	fd = cgroup_session_fd("alice", &cause);
	assert_true(fd > 2);
	memset(cg_line, 0, sizeof cg_line);
	pid = cgroup_clone(child_note_cgroup, cg_stack + sizeof cg_stack,
	    CLONE_VM | CLONE_VFORK | SIGCHLD, NULL, fd);
	close(fd);
	if (pid < 0 && errno == ENOSYS)
		skip();	/* no trampoline on this architecture */
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 7);
	assert_non_null(strstr(cg_line, "0::/"));
	assert_non_null(strstr(cg_line, "/s-alice."));
	/* Without a cgroup fd: the parent's cgroup (a plain clone). */
	memset(cg_line, 0, sizeof cg_line);
	pid = cgroup_clone(child_note_cgroup, cg_stack + sizeof cg_stack,
	    CLONE_VM | CLONE_VFORK | SIGCHLD, NULL, 0);
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(WEXITSTATUS(st), 7);
	assert_null(strstr(cg_line, "/s-alice."));
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
	pid = cgroup_clone(child_sleep, cg_stack + sizeof cg_stack,
	    CLONE_VM | CLONE_VFORK | SIGCHLD, NULL, fd);
	close(fd);
	if (pid < 0 && errno == ENOSYS)
		skip();
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
		cmocka_unit_test(test_cgroup_clone_into_session),
		cmocka_unit_test(test_cgroup_session_kill),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "test_cgroup: needs root (cgroups); skipped\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
