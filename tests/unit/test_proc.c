/* Unit tests: starting children with pipes (common/proc.c), with real children. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"

static char *const noenv[] = { "PATH=/usr/bin:/bin", NULL };

/* Number of open fds of this process. */
static int
count_fds(void)
{
	struct dirent *de;
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] != '.')
			n++;
	}
	closedir(d);
	return n - 1;	/* the directory's own fd */
}

/* Read fd to EOF into buf (NUL-terminated). */
static size_t
read_all(int fd, char *buf, size_t size)
{
	size_t len = 0;
	ssize_t n;

	while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		assert_true(n > 0);
		len += (size_t)n;
	}
	buf[len] = '\0';
	return len;
}

/* A request for /bin/sh -c script, all three fds piped. */
static struct proc_req
sh_req(char **argv, const char *script)
{
	struct proc_req r;

	argv[0] = "sh";
	argv[1] = "-c";
	argv[2] = (char *)script;
	argv[3] = NULL;
	proc_req_init(&r, "/bin/sh", argv, noenv);
	r.fd[0] = r.fd[1] = r.fd[2] = PROC_PIPE;
	return r;
}

/* stdin, stdout and stderr through pipes; the exit code comes back. */
static void
run_pipes(int flags)
{
	char *argv[4], buf[256], *cause = NULL;
	struct proc_req r = sh_req(argv, "read x; echo \"out:$x\"; echo err:$x >&2; exit 3");
	struct proc p;
	int before = count_fds();

	r.flags = flags;
	assert_int_equal(proc_spawn(&r, &p, &cause), 0);
	assert_null(cause);
	assert_true(p.pid > 0 && p.fd[0] >= 0 && p.fd[1] >= 0 && p.fd[2] >= 0);
	/* The parent's ends do not leak into later children. */
	assert_true(fcntl(p.fd[0], F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(p.fd[1], F_GETFD) & FD_CLOEXEC);
	assert_int_equal(write(p.fd[0], "hi\n", 3), 3);
	read_all(p.fd[1], buf, sizeof buf);
	assert_string_equal(buf, "out:hi\n");
	read_all(p.fd[2], buf, sizeof buf);
	assert_string_equal(buf, "err:hi\n");
	proc_close(&p);
	assert_int_equal(proc_wait(p.pid, &cause), 3);
	assert_int_equal(count_fds(), before);
}

static void
test_pipes_fork(void **state)
{
	(void)state;
	run_pipes(0);
}

static void
test_pipes_vfork(void **state)
{
	(void)state;
	run_pipes(PROC_VFORK);
}

/* cwd_fd: the child starts in that directory (fchdir before the rest is closed). */
static void
test_cwd_fd(void **state)
{
	char *argv[4], buf[256], *cause = NULL;
	struct proc_req r = sh_req(argv, "pwd; ls -l /proc/self/fd | grep -c ' -> /usr/share$' || true");
	struct proc p;
	int dfd = open("/usr/share", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	(void)state;
	assert_true(dfd > 2);
	r.cwd_fd = dfd;
	r.flags = PROC_VFORK;
	assert_int_equal(proc_spawn(&r, &p, &cause), 0);
	read_all(p.fd[1], buf, sizeof buf);
	/* In the directory, and the fd itself did not follow the child. */
	assert_string_equal(buf, "/usr/share\n0\n");
	proc_close(&p);
	assert_int_equal(proc_wait(p.pid, &cause), 0);
	close(dfd);
}

/* The child has fds 0-2 only (plus extra_to when given), whatever the parent holds. */
static void
test_fds_closed(void **state)
{
	char *argv[] = { "ls", "-1", "/proc/self/fd", NULL }, buf[256], *cause = NULL;
	struct proc_req r;
	struct proc p;
	int leak = dup2(0, 47), x[2];

	(void)state;
	assert_int_equal(leak, 47);	/* not close-on-exec */
	memset(&r, 0, sizeof r);
	r.path = "/bin/ls";
	r.argv = argv;
	r.envp = noenv;
	r.fd[0] = PROC_NULL;
	r.fd[1] = PROC_PIPE;
	r.fd[2] = PROC_NULL;
	r.extra_fd = -1;
	assert_int_equal(proc_spawn(&r, &p, &cause), 0);
	assert_int_equal(p.fd[0], -1);
	assert_int_equal(p.fd[2], -1);
	read_all(p.fd[1], buf, sizeof buf);
	/* 3 is ls's own directory stream. */
	assert_string_equal(buf, "0\n1\n2\n3\n");
	proc_close(&p);
	assert_int_equal(proc_wait(p.pid, &cause), 0);

	/* An extra fd arrives as extra_to (here 5), nothing else does. */
	assert_int_equal(pipe(x), 0);
	r.extra_fd = x[0];
	r.extra_to = 5;
	assert_int_equal(proc_spawn(&r, &p, &cause), 0);
	read_all(p.fd[1], buf, sizeof buf);
	assert_string_equal(buf, "0\n1\n2\n3\n5\n");
	proc_close(&p);
	assert_int_equal(proc_wait(p.pid, &cause), 0);
	close(x[0]);
	close(x[1]);
	close(leak);
}

/* The extra fd's contents reach the child; a caller's own fd can be its stdout. */
static void
test_extra_and_own_fd(void **state)
{
	char *argv[4], buf[64], *cause = NULL;
	struct proc_req r = sh_req(argv, "cat <&3; echo two >&2");
	struct proc p;
	int x[2], o[2];

	(void)state;
	assert_int_equal(pipe(x), 0);
	assert_int_equal(pipe(o), 0);
	assert_int_equal(write(x[1], "one\n", 4), 4);
	close(x[1]);
	r.fd[0] = PROC_NULL;
	r.fd[1] = o[1];
	r.fd[2] = PROC_STDOUT;
	r.extra_fd = x[0];
	r.extra_to = 3;
	assert_int_equal(proc_spawn(&r, &p, &cause), 0);
	assert_int_equal(p.fd[1], -1);
	assert_int_equal(p.fd[2], -1);
	close(o[1]);	/* the caller keeps its fds: the child has copies */
	close(x[0]);
	read_all(o[0], buf, sizeof buf);
	assert_string_equal(buf, "one\ntwo\n");
	close(o[0]);
	assert_int_equal(proc_wait(p.pid, &cause), 0);
}

/* Ignored and blocked signals of the parent do not reach the child. */
static void
test_signals_reset(void **state)
{
	char *argv[] = { "grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status", NULL };
	char buf[256], *cause = NULL;
	struct proc_req r;
	struct proc p;
	sigset_t set, old;
	void (*oldh)(int);

	(void)state;
	oldh = signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, &old);
	memset(&r, 0, sizeof r);
	r.path = "/bin/grep";
	r.argv = argv;
	r.envp = noenv;
	r.fd[0] = PROC_NULL;
	r.fd[1] = PROC_PIPE;
	r.fd[2] = PROC_STDOUT;
	r.extra_fd = -1;
	assert_int_equal(proc_spawn(&r, &p, &cause), 0);
	sigprocmask(SIG_SETMASK, &old, NULL);
	signal(SIGPIPE, oldh);
	read_all(p.fd[1], buf, sizeof buf);
	assert_string_equal(buf, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
	proc_close(&p);
	assert_int_equal(proc_wait(p.pid, &cause), 0);
}

/* A new session; the parent's ends non-blocking when asked; death by signal reads 128+N. */
static void
test_setsid_nonblock_signal(void **state)
{
	char *argv[4], *cause = NULL;
	struct proc_req r = sh_req(argv, "read x; kill -TERM $$");
	struct proc p;

	(void)state;
	r.flags = PROC_SETSID | PROC_NONBLOCK;
	assert_int_equal(proc_spawn(&r, &p, &cause), 0);
	assert_int_equal(getsid(p.pid), p.pid);
	assert_int_equal(getpgid(p.pid), p.pid);
	assert_true(fcntl(p.fd[1], F_GETFL) & O_NONBLOCK);
	assert_int_equal(read(p.fd[1], argv, 1), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(write(p.fd[0], "\n", 1), 1);
	proc_close(&p);
	assert_int_equal(proc_wait(p.pid, &cause), 128 + SIGTERM);
}

/* Failures before or at exec: -1 with a cause, the child reaped, no fd left. */
static const char *
fail_setup(const struct proc_req *r, void *arg)
{
	(void)r;
	(void)arg;
	errno = EPERM;
	return "limits";
}

static void
test_failures(void **state)
{
	char *argv[4], *cause = NULL;
	struct proc_req r = sh_req(argv, "exit 0");
	struct proc p;
	int before = count_fds(), flags;

	(void)state;
	for (flags = 0; flags <= PROC_VFORK; flags += PROC_VFORK) {
		r.flags = flags;
		r.path = "/nonexistent/tool";
		assert_int_equal(proc_spawn(&r, &p, &cause), -1);
		assert_string_equal(cause, "cannot run /nonexistent/tool: No such file or directory");
		assert_int_equal(p.pid, -1);
		assert_int_equal(p.fd[0], -1);
		free(cause);
		cause = NULL;

		r.path = "/bin/sh";
		r.setup = fail_setup;
		assert_int_equal(proc_spawn(&r, &p, &cause), -1);
		assert_string_equal(cause, "cannot start /bin/sh: limits: Operation not permitted");
		free(cause);
		cause = NULL;
		r.setup = NULL;

		r.cwd = "/nonexistent";
		assert_int_equal(proc_spawn(&r, &p, &cause), -1);
		assert_string_equal(cause, "cannot start /bin/sh: chdir: No such file or directory");
		free(cause);
		cause = NULL;
		r.cwd = NULL;

		r.fd[1] = 999;	/* not open */
		assert_int_equal(proc_spawn(&r, &p, &cause), -1);
		assert_non_null(strstr(cause, "fd 999"));
		free(cause);
		cause = NULL;
		r.fd[1] = PROC_PIPE;

		r.extra_fd = 0;
		r.extra_to = 2;	/* would overwrite stderr */
		assert_int_equal(proc_spawn(&r, &p, &cause), -1);
		assert_non_null(strstr(cause, "internal error"));
		free(cause);
		cause = NULL;
		r.extra_fd = -1;
	}
	/* Every failed child was reaped, no fd was left open. */
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	assert_int_equal(count_fds(), before);
}

/* As root: the child runs as the given uid and gid, without supplementary groups. */
static void
test_drop(void **state)
{
	char *argv[] = { "id", NULL }, buf[128], *cause = NULL;
	struct proc_req r;
	struct proc p;

	(void)state;
	if (geteuid() != 0)
		skip();
	memset(&r, 0, sizeof r);
	r.path = "/usr/bin/id";
	r.argv = argv;
	r.envp = noenv;
	r.fd[0] = PROC_NULL;
	r.fd[1] = PROC_PIPE;
	r.fd[2] = PROC_STDOUT;
	r.extra_fd = -1;
	r.flags = PROC_DROP | PROC_NO_NEW_PRIVS | PROC_DIE_WITH_PARENT | PROC_VFORK;
	r.uid = 54321;
	r.gid = 54322;
	r.cwd = "/";
	assert_int_equal(proc_spawn(&r, &p, &cause), 0);
	read_all(p.fd[1], buf, sizeof buf);
	assert_string_equal(buf, "uid=54321 gid=54322 groups=54322\n");
	proc_close(&p);
	assert_int_equal(proc_wait(p.pid, &cause), 0);

	r.uid = 0;	/* refused: never root */
	assert_int_equal(proc_spawn(&r, &p, &cause), -1);
	assert_non_null(strstr(cause, "refusing uid 0"));
	free(cause);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pipes_fork),
		cmocka_unit_test(test_pipes_vfork),
		cmocka_unit_test(test_cwd_fd),
		cmocka_unit_test(test_fds_closed),
		cmocka_unit_test(test_extra_and_own_fd),
		cmocka_unit_test(test_signals_reset),
		cmocka_unit_test(test_setsid_nonblock_signal),
		cmocka_unit_test(test_failures),
		cmocka_unit_test(test_drop),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
