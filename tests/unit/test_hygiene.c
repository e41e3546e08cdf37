/* Unit tests: the common hygiene helpers and validators (common/hygiene.c, valid.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hygiene.h"
#include "valid.h"

static void
test_closefrom(void **state)
{
	int a = open("/dev/null", O_RDONLY), b = dup2(a, 40), c = dup2(a, 1000);

	(void)state;
	assert_true(a >= 3 && b == 40 && c == 1000);
	hygiene_closefrom(40);
	assert_int_equal(fcntl(40, F_GETFD), -1);
	assert_int_equal(fcntl(1000, F_GETFD), -1);
	assert_true(fcntl(a, F_GETFD) != -1);	/* below lowfd: kept */
	close(a);
}

/* In a child: close 0 and 2, then hygiene_stdio reopens them on /dev/null. */
static void
test_stdio(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	if ((pid = fork()) == 0) {
		struct stat st;

		close(0);
		close(2);
		if (hygiene_stdio() != 0 || fstat(0, &st) != 0 || !S_ISCHR(st.st_mode) ||
		    fstat(2, &st) != 0 || !S_ISCHR(st.st_mode) || open("/dev/null", O_RDONLY) < 3)
			_exit(1);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/*
 * hygiene_stdio_null: a child whose stdout and stderr are a pipe lets go of them and
 * lives on; the reader sees EOF before the child ends, and fds 0-2 are /dev/null.
 */
static void
test_stdio_null(void **state)
{
	struct pollfd pfd;
	int p[2], gate[2], status;
	char c;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(pipe(gate), 0);
	if ((pid = fork()) == 0) {
		struct stat st;
		int i;

		close(p[0]);
		close(gate[1]);
		if (dup2(p[1], 1) != 1 || dup2(p[1], 2) != 2)
			_exit(1);
		close(p[1]);
		if (hygiene_stdio_null() != 0)
			_exit(2);
		for (i = 0; i < 3; i++) {
			if (fstat(i, &st) != 0 || !S_ISCHR(st.st_mode))
				_exit(3);
		}
		/* Alive until the parent has seen EOF. */
		if (read(gate[0], &c, 1) != 0)
			_exit(4);
		_exit(0);
	}
	close(p[1]);
	close(gate[0]);
	/* EOF while the child waits (bounded: a child that kept the pipe would hang us). */
	pfd.fd = p[0];
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 10000) != 1) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		fail_msg("the child's stdout did not end");
	}
	assert_int_equal(read(p[0], &c, 1), 0);
	assert_int_equal(waitpid(pid, &status, WNOHANG), 0);
	close(gate[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(p[0]);
}

/* Run hygiene_drop_privileges in a child; its exit code says what came back. */
static int
drop_in_child(uid_t uid, gid_t gid, const char *name)
{
	int status;
	pid_t pid;

	if ((pid = fork()) == 0) {
		const char *step = hygiene_drop_privileges(uid, gid, name);

		if (step != NULL)
			_exit(strcmp(step, "refusing uid 0") == 0 ? 3 : 2);
		if (getuid() != uid || geteuid() != uid || getgid() != gid ||
		    (name == NULL && getgroups(0, NULL) != 0) || setuid(0) == 0)
			_exit(1);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void
test_drop_privileges(void **state)
{
	(void)state;
	assert_int_equal(drop_in_child(1, 1, NULL), 0);
	assert_int_equal(drop_in_child(65534, 65534, NULL), 0);
	assert_int_equal(drop_in_child(0, 0, NULL), 3);
}

static void
test_mkdir_root(void **state)
{
	char dir[] = "/tmp/test_hygiene.XXXXXX", p[128], l[128], *cause = NULL;
	struct stat st;
	mode_t old;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof p, "%s/d", dir);
	old = umask(077);
	assert_int_equal(hygiene_mkdir_root(p, 0755, 0, &cause), 0);
	umask(old);
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);	/* the umask did not apply */
	/* Existing: kept as it is, or set to mode when enforced. */
	chmod(p, 0700);
	assert_int_equal(hygiene_mkdir_root(p, 0755, 0, &cause), 0);
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(hygiene_mkdir_root(p, 0711, 1, &cause), 0);
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0711);
	/* Writable by others: refused unless the mode is enforced. */
	chmod(p, 0777);
	assert_int_equal(hygiene_mkdir_root(p, 0755, 0, &cause), -1);
	assert_non_null(strstr(cause, "root-owned directory nobody else may write"));
	free(cause);
	cause = NULL;
	/* Someone else's: refused. */
	chmod(p, 0755);
	assert_int_equal(chown(p, 1, 1), 0);
	assert_int_equal(hygiene_mkdir_root(p, 0755, 1, &cause), -1);
	free(cause);
	cause = NULL;
	/* A symbolic link to a good directory: refused. */
	assert_int_equal(chown(p, 0, 0), 0);
	snprintf(l, sizeof l, "%s/link", dir);
	assert_int_equal(symlink(p, l), 0);
	assert_int_equal(hygiene_mkdir_root(l, 0755, 1, &cause), -1);
	free(cause);
	cause = NULL;
	/* A missing parent. */
	snprintf(l, sizeof l, "%s/no/such", dir);
	assert_int_equal(hygiene_mkdir_root(l, 0755, 0, &cause), -1);
	assert_non_null(strstr(cause, "cannot create"));
	free(cause);
	snprintf(l, sizeof l, "%s/link", dir);
	unlink(l);
	rmdir(p);
	rmdir(dir);
}

/* Whether resource's soft and hard limits are cur and max. */
static int
limits_are(int resource, rlim_t cur, rlim_t max)
{
	struct rlimit	rl;

	return getrlimit(resource, &rl) == 0 && rl.rlim_cur == cur && rl.rlim_max == max;
}

/*
 * In a child: run hygiene_tool_limits(7) and check each limit against what was
 * asked, lowered to the hard limit the child had before where that was lower.
 * Exits 0, or the number of the first check that failed.
 */
static void __attribute__((noreturn))
tool_limits_child(void)
{
	static const struct { int res; rlim_t cur, max; } want[] = {
		{ RLIMIT_CORE, 0, 0 },
		{ RLIMIT_CPU, 7, 12 },
		{ RLIMIT_AS, (rlim_t)8 << 30, (rlim_t)8 << 30 },
		{ RLIMIT_FSIZE, (rlim_t)4 << 30, (rlim_t)4 << 30 },
		{ RLIMIT_NOFILE, 1024, 1024 },
		{ RLIMIT_NPROC, 8192, 8192 },
	};
	struct rlimit	before[6];
	rlim_t		cur, max;
	size_t		i;

	for (i = 0; i < 6; i++) {
		if (getrlimit(want[i].res, &before[i]) != 0)
			_exit(100);
	}
	if (hygiene_tool_limits(7) != NULL)
		_exit(101);
	for (i = 0; i < 6; i++) {
		max = want[i].max;
		if (before[i].rlim_max != RLIM_INFINITY && before[i].rlim_max < max)
			max = before[i].rlim_max;
		cur = want[i].cur < max ? want[i].cur : max;
		if (!limits_are(want[i].res, cur, max))
			_exit((int)i + 1);
	}
	_exit(0);
}

/*
 * A tool's limits, as asked where the hard limits allow them, and never above a
 * hard limit that is lower (the CPU and the descriptors in the second child).
 */
static void
test_tool_limits(void **state)
{
	struct rlimit	rl;
	int		status;
	pid_t		pid;

	(void)state;
	if ((pid = fork()) == 0)
		tool_limits_child();
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	if ((pid = fork()) == 0) {
		rl.rlim_cur = rl.rlim_max = 3;
		if (setrlimit(RLIMIT_CPU, &rl) != 0)
			_exit(1);
		rl.rlim_cur = rl.rlim_max = 512;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			_exit(2);
		if (hygiene_tool_limits(60) != NULL)
			_exit(3);
		if (!limits_are(RLIMIT_CPU, 3, 3))
			_exit(4);
		if (!limits_are(RLIMIT_NOFILE, 512, 512))
			_exit(5);
		if (!limits_are(RLIMIT_CORE, 0, 0))
			_exit(6);
		_exit(0);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void
test_valid_repo(void **state)
{
	(void)state;
	assert_true(valid_repo("octo/repo"));
	assert_true(valid_repo("Octo-1/re.po_x"));
	assert_true(valid_repo("a/.github"));
	assert_false(valid_repo("octo"));
	assert_false(valid_repo("/repo"));
	assert_false(valid_repo("octo/"));
	assert_false(valid_repo("a/b/c"));
	assert_false(valid_repo("a/.."));
	assert_false(valid_repo("a/."));
	assert_false(valid_repo("../x"));	/* the admin CLI's copy missed these */
	assert_false(valid_repo("./x"));
	assert_false(valid_repo("a b/c"));
	assert_false(valid_repo("a/c%2f"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_closefrom),
		cmocka_unit_test(test_stdio),
		cmocka_unit_test(test_stdio_null),
		cmocka_unit_test(test_drop_privileges),
		cmocka_unit_test(test_mkdir_root),
		cmocka_unit_test(test_tool_limits),
		cmocka_unit_test(test_valid_repo),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
