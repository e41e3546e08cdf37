/* Unit tests: environment building, path walking beneath a root, scratch dirs, spawning. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "spawn.h"

static void
test_envbuild(void **state)
{
	struct envbuild *e = envbuild_new();
	char *const *arr;

	(void)state;
	assert_int_equal(envbuild_set(e, "PATH", "/usr/bin:/bin", 13, 0), 0);
	assert_int_equal(envbuild_set(e, "TOKEN", "abc", 3, 1), 0);
	assert_int_equal(envbuild_set(e, "PATH", "/bin", 4, 0), 0);	/* replaces */
	assert_int_equal(envbuild_count(e), 2);
	assert_string_equal(envbuild_get(e, "PATH"), "/bin");
	assert_string_equal(envbuild_get(e, "TOKEN"), "abc");
	assert_null(envbuild_get(e, "PAT"));
	assert_int_equal(envbuild_set(e, "BAD=NAME", "x", 1, 0), -1);
	assert_int_equal(envbuild_set(e, "", "x", 1, 0), -1);
	assert_int_equal(envbuild_set(e, "NUL", "a\0b", 3, 0), -1);
	arr = envbuild_array(e);
	assert_string_equal(arr[0], "PATH=/bin");
	assert_string_equal(arr[1], "TOKEN=abc");
	assert_null(arr[2]);
	envbuild_free(e);
}

static void
test_envbuild_limit(void **state)
{
	struct envbuild *e = envbuild_new();
	char name[32];
	int i, rc = 0;

	(void)state;
	for (i = 0; i < 300 && rc == 0; i++) {
		snprintf(name, sizeof name, "V%d", i);
		rc = envbuild_set(e, name, "x", 1, 0);
	}
	assert_int_equal(rc, -1);
	assert_int_equal(envbuild_count(e), 256);
	envbuild_free(e);
}

static void
test_open_beneath(void **state)
{
	char root[64], p[256];
	int fd;

	(void)state;
	strcpy(root, "/tmp/sbspawn.XXXXXX");
	assert_non_null(mkdtemp(root));
	snprintf(p, sizeof p, "%s/a", root);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/a/b", root);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/escape", root);
	assert_int_equal(symlink("/etc", p), 0);
	snprintf(p, sizeof p, "%s/a/inner", root);
	assert_int_equal(symlink("b", p), 0);

	fd = spawn_open_beneath(root, root);
	assert_true(fd >= 0);
	close(fd);
	snprintf(p, sizeof p, "%s/a/b", root);
	fd = spawn_open_beneath(root, p);
	assert_true(fd >= 0);
	close(fd);
	snprintf(p, sizeof p, "%s/a/b/", root);
	fd = spawn_open_beneath(root, p);
	assert_true(fd >= 0);
	close(fd);
	/* Symlinks are never followed, even ones that stay inside. */
	snprintf(p, sizeof p, "%s/escape", root);
	assert_int_equal(spawn_open_beneath(root, p), -1);
	snprintf(p, sizeof p, "%s/a/inner", root);
	assert_int_equal(spawn_open_beneath(root, p), -1);
	snprintf(p, sizeof p, "%s/a/../../etc", root);
	assert_int_equal(spawn_open_beneath(root, p), -1);
	assert_int_equal(errno, EXDEV);
	assert_int_equal(spawn_open_beneath(root, "/etc"), -1);
	snprintf(p, sizeof p, "%sx", root);	/* prefix of the name, not a child */
	assert_int_equal(spawn_open_beneath(root, p), -1);

	/* rmtree removes links, not their targets. */
	assert_int_equal(spawn_rmtree(root), 0);
	assert_int_equal(access("/etc/hostname", F_OK), 0);
	assert_int_equal(access(root, F_OK), -1);
}

static void
test_scratch(void **state)
{
	char parent[64], *a, *b, *cause = NULL;
	struct stat st;

	(void)state;
	strcpy(parent, "/tmp/sbscratch.XXXXXX");
	assert_non_null(mkdtemp(parent));
	a = spawn_scratch_create(parent, 1, 1, &cause);
	b = spawn_scratch_create(parent, 1, 1, &cause);
	assert_non_null(a);
	assert_non_null(b);
	assert_string_not_equal(a, b);
	assert_int_equal(stat(a, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(st.st_uid, 1);
	free(a);
	free(b);
	assert_int_equal(spawn_rmtree(parent), 0);
}

/* Read everything from fd (blocking). */
static size_t
slurp(int fd, char *buf, size_t size)
{
	size_t off = 0;
	ssize_t n;
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	while (off + 1 < size && (n = read(fd, buf + off, size - 1 - off)) > 0)
		off += (size_t)n;
	buf[off] = '\0';
	return off;
}

static void
test_spawn_drops_privileges(void **state)
{
	char *argv[] = { "sh", "-c", "id -u; id -g; id -G; echo \"$X\"; ls /proc/self/fd | wc -l; "
	    "grep NoNewPrivs /proc/self/status; ulimit -c", NULL };
	char *envp[] = { "X=hello", "PATH=/usr/bin:/bin", NULL };
	struct spawn_req r = { "/bin/sh", argv, envp, 1, 1, -1, "/", 10, 0 };
	struct child ch;
	char out[512], *cause = NULL;
	int status;

	(void)state;
	assert_int_equal(spawn_child(&r, &ch, &cause), 0);
	close(ch.in);
	slurp(ch.out, out, sizeof out);
	assert_int_equal(waitpid(ch.pid, &status, 0), ch.pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* uid 1, gid 1, no other groups, env as given, fds 0-2 (+1 for ls's own dir fd). */
	assert_string_equal(out, "1\n1\n1\nhello\n4\nNoNewPrivs:\t1\n0\n");
	close(ch.out);
	close(ch.err);
}

/* extra_fd: the child gets it as fd 3 (and only it above 2); what it writes arrives. */
static void
test_spawn_extra_fd(void **state)
{
	char *argv[] = { "sh", "-c", "ls /proc/self/fd | wc -l; echo via-fd3 >&3", NULL };
	char *envp[] = { "PATH=/usr/bin:/bin", NULL };
	struct spawn_req r = { "/bin/sh", argv, envp, 1, 1, -1, "/", 10, -1 };
	struct child ch;
	char out[512], got[64], *cause = NULL;
	int status, p[2];
	ssize_t n;

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	r.extra_fd = p[1];
	assert_int_equal(spawn_child(&r, &ch, &cause), 0);
	close(p[1]);
	close(ch.in);
	slurp(ch.out, out, sizeof out);
	assert_int_equal(waitpid(ch.pid, &status, 0), ch.pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* fds 0-3, +1 for ls's own dir fd. */
	assert_string_equal(out, "5\n");
	n = read(p[0], got, sizeof got - 1);
	assert_true(n > 0);
	got[n] = '\0';
	assert_string_equal(got, "via-fd3\n");
	close(p[0]);
	close(ch.out);
	close(ch.err);
}

static void
test_spawn_exec_failure(void **state)
{
	char *argv[] = { "nope", NULL };
	char *envp[] = { NULL };
	struct spawn_req r = { "/nonexistent/tool", argv, envp, 1, 1, -1, "/", 10, 0 };
	struct child ch;
	char *cause = NULL;

	(void)state;
	assert_int_equal(spawn_child(&r, &ch, &cause), -1);
	assert_non_null(strstr(cause, "/nonexistent/tool"));
	free(cause);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_envbuild),
		cmocka_unit_test(test_envbuild_limit),
		cmocka_unit_test(test_open_beneath),
		cmocka_unit_test(test_scratch),
		cmocka_unit_test(test_spawn_drops_privileges),
		cmocka_unit_test(test_spawn_extra_fd),
		cmocka_unit_test(test_spawn_exec_failure),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
