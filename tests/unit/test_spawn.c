/* Unit tests: environment building, path walking beneath a root, scratch dirs, spawning. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "jail.h"
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
	struct spawn_req r = { "/bin/sh", argv, envp, 1, 1, -1, "/", 10, 0, NULL, 0 };
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
	struct spawn_req r = { "/bin/sh", argv, envp, 1, 1, -1, "/", 10, -1, NULL, 0 };
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
	struct spawn_req r = { "/nonexistent/tool", argv, envp, 1, 1, -1, "/", 10, 0, NULL, 0 };
	struct child ch;
	char *cause = NULL;

	(void)state;
	assert_int_equal(spawn_child(&r, &ch, &cause), -1);
	assert_non_null(strstr(cause, "/nonexistent/tool"));
	free(cause);
}

/* Whether pid exists and is not a zombie. */
static int
proc_alive(pid_t pid)
{
	char path[64], buf[256], *p;
	int fd;
	ssize_t n;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY)) < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p != NULL && p[1] == ' ' && p[2] != 'Z';
}

/* How many live processes have a command line starting with the len bytes of want. */
static int
cmdline_count(const char *want, size_t len)
{
	struct dirent *de;
	DIR *d = opendir("/proc");
	int found = 0;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		char p[300], cmd[64] = "";
		int fd;
		ssize_t n;

		snprintf(p, sizeof p, "/proc/%s/cmdline", de->d_name);
		if ((fd = open(p, O_RDONLY)) < 0)
			continue;
		n = read(fd, cmd, sizeof cmd - 1);
		close(fd);
		if (n >= (ssize_t)len && memcmp(cmd, want, len) == 0 && proc_alive(atoi(de->d_name)))
			found++;
	}
	closedir(d);
	return found;
}

/* A jail's directories: its (empty) root, a runner-owned scratch, a host secret. */
struct jt {
	char	root[64], scratch[64], secret[64], file[96];
};

static void
jt_setup(struct jt *t)
{
	int fd;

	strcpy(t->root, "/var/tmp/sbjroot.XXXXXX");
	strcpy(t->scratch, "/var/tmp/sbjscr.XXXXXX");
	strcpy(t->secret, "/tmp/sbjsec.XXXXXX");
	assert_non_null(mkdtemp(t->root));
	assert_non_null(mkdtemp(t->scratch));
	assert_non_null(mkdtemp(t->secret));
	assert_int_equal(chown(t->scratch, 1, 1), 0);
	assert_int_equal(chmod(t->secret, 0755), 0);
	snprintf(t->file, sizeof t->file, "%s/f", t->secret);
	fd = open(t->file, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "topsecret\n", 10), 10);
	close(fd);
}

static void
jt_teardown(struct jt *t)
{
	assert_int_equal(spawn_rmtree(t->scratch), 0);
	assert_int_equal(spawn_rmtree(t->secret), 0);
	assert_int_equal(rmdir(t->root), 0);	/* still empty: the mount was the child's */
}

/* Run argv jailed as uid 1, collect stdout, return the (mapped) wait status. */
static int
jt_run(const char *path, char **argv, const struct jail *j, char *out, size_t size)
{
	char *envp[] = { "PATH=/usr/bin:/bin", NULL };
	struct spawn_req r = { path, argv, envp, 1, 1, -1, "/", 10, 0, j, 0 };
	struct child ch;
	char *cause = NULL;
	int status;

	if (spawn_child(&r, &ch, &cause) != 0) {
		snprintf(out, size, "%s", cause);
		free(cause);
		return -1;
	}
	assert_true(ch.jailed);
	close(ch.in);
	slurp(ch.out, out, size);
	assert_int_equal(waitpid(ch.pid, &status, 0), ch.pid);
	close(ch.out);
	close(ch.err);
	if (ch.mntns >= 0)
		close(ch.mntns);
	return spawn_wait_status(ch.jailed, status);
}

static void
test_jail_view(void **state)
{
	struct jt t;
	struct jail_bind b[1];
	struct jail j = { NULL, -1, b, 1, NULL, NULL };
	char script[2048], out[2048];
	char *argv[] = { "sh", "-c", script, NULL };
	int st;

	(void)state;
	jt_setup(&t);
	j.root = t.root;
	j.tmp = t.scratch;
	b[0].path = t.scratch;
	b[0].writable = 1;
	snprintf(script, sizeof script,
	    "id -u; echo pid=$$; ls /; "
	    "test -e /proc/%d && echo host-pid-visible; "
	    "for p in /home /root /run /work /var/lib /mnt %s %s /var/tmp/sbjroot; do "
	    "test -e $p && echo visible:$p; done; "
	    "cat %s 2>/dev/null; "
	    "touch /usr/x 2>/dev/null && echo usr-writable; "
	    "touch /x 2>/dev/null && echo root-writable; "
	    "echo data >%s/f && echo scratch-ok; "
	    "echo t >/tmp/g && test -e %s/g && echo tmp-is-scratch; "
	    "echo -n >/dev/null && head -c 4 /dev/urandom | wc -c; "
	    "cat /proc/sys/kernel/hostname; "
	    "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
	    "ls /proc >/tmp/procs; grep -c '^[0-9]' /tmp/procs",
	    (int)getpid(), t.secret, t.file, t.file, t.scratch, t.scratch);
	st = jt_run("/bin/sh", argv, &j, out, sizeof out);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The runner, PID 2 (init is 1), only system dirs plus the scratch's top, no host paths. */
	assert_non_null(strstr(out, "1\npid=2\nbin\ndev\netc\nlib\n"));
	assert_non_null(strstr(out, "\nproc\nsbin\ntmp\nusr\nvar\n"));
	assert_null(strstr(out, "visible"));
	assert_null(strstr(out, "topsecret"));
	assert_null(strstr(out, "writable"));
	assert_non_null(strstr(out, "scratch-ok\ntmp-is-scratch\n4\nshimbridge\nlo\n"));
	/*
	 * init, sh and ls: nothing of the host. (ls into a file first: with a pipe
	 * to grep, whether grep existed yet when ls read /proc was a race.)
	 */
	assert_non_null(strstr(out, "lo\n3\n"));
	jt_teardown(&t);
}

/*
 * The template (docs/JAIL.md): a jail whose one bind is its scratch dir, in the
 * template's scratch_dir, is a copy of it, and sees what a jail built from
 * nothing sees; run/ is a tmpfs of its own there. A template that cannot be
 * built says which step failed, and such jails are built from nothing instead.
 */
static void
test_jail_template(void **state)
{
	struct jt t;
	struct jail_bind b[1];
	struct jail j = { NULL, JAIL_NET_NEW, b, 1, NULL, NULL };
	char base[64], run[96], scratch[128], script[2048], out[2048], *cause = NULL;
	char *argv[] = { "sh", "-c", script, NULL };
	int st, round;

	(void)state;
	jt_setup(&t);
	strcpy(base, "/var/tmp/sbjtpl.XXXXXX");
	assert_non_null(mkdtemp(base));
	snprintf(run, sizeof run, "%s/run", base);
	snprintf(scratch, sizeof scratch, "%s/0123abcd", run);
	assert_int_equal(mkdir(run, 0711), 0);
	assert_int_equal(mkdir(scratch, 0700), 0);
	assert_int_equal(chown(scratch, 1, 1), 0);
	j.root = t.root;
	j.tmp = scratch;
	b[0].path = scratch;
	b[0].writable = 1;
	snprintf(script, sizeof script,
	    "id -u; echo pid=$$; ls /; ls -a %s | wc -l; "
	    "for p in /home /root %s %s %s/sbjroot; do test -e $p && echo visible:$p; done; "
	    "touch /x /usr/x %s/x 2>/dev/null && echo writable; "
	    "echo data >%s/f && echo t >/tmp/g && test -e %s/g && echo tmp-is-scratch; "
	    "awk '$5 == \"%s\" { print \"run-mount\" }' /proc/self/mountinfo; "
	    "cat /proc/sys/kernel/hostname",
	    run, t.secret, t.file, base, run, scratch, scratch, run);
	for (round = 0; round < 2; round++) {
		if (round == 0)
			assert_int_equal(spawn_jail_template(t.root, run, &cause), 0);
		else {
			/* No such mount point: the template server says so and ends. */
			assert_int_equal(spawn_jail_template("/nonexistent/sbjroot", run, &cause), -1);
			assert_non_null(strstr(cause, "template: mount jail root"));
			free(cause);
			cause = NULL;
		}
		st = jt_run("/bin/sh", argv, &j, out, sizeof out);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		assert_non_null(strstr(out, "1\npid=2\nbin\ndev\netc\nlib\n"));
		assert_non_null(strstr(out, "\nproc\nsbin\ntmp\nusr\nvar\n"));
		assert_null(strstr(out, "visible"));
		assert_null(strstr(out, "writable"));
		assert_non_null(strstr(out, "tmp-is-scratch\n"));
		assert_non_null(strstr(out, "shimbridge\n"));
		if (round == 0) {
			/* ., .., the scratch dir and the /tmp link, on a tmpfs of this jail's. */
			assert_non_null(strstr(out, "\nvar\n4\n"));
			assert_non_null(strstr(out, "run-mount\n"));
		} else {
			/* Built from nothing: run/ is a directory of the jail's root. */
			assert_non_null(strstr(out, "\nvar\n3\n"));
			assert_null(strstr(out, "run-mount"));
		}
		assert_int_equal(access(scratch, F_OK), 0);
	}
	assert_int_equal(spawn_rmtree(base), 0);
	jt_teardown(&t);
}

static void
test_jail_grandchild_dies(void **state)
{
	struct jt t;
	struct jail j = { NULL, -1, NULL, 0, NULL, NULL };
	char out[256], *argv[] = { "sh", "-c", "setsid sleep 987.5 >/dev/null 2>&1 & echo started", NULL };
	struct dirent *de;
	DIR *d;
	int st, found = 0;

	(void)state;
	jt_setup(&t);
	j.root = t.root;
	st = jt_run("/bin/sh", argv, &j, out, sizeof out);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_string_equal(out, "started\n");
	/* The init's exit took the detached sleep with it. */
	assert_non_null(d = opendir("/proc"));
	while ((de = readdir(d)) != NULL) {
		char p[300], cmd[64] = "";
		int fd;
		ssize_t n;

		snprintf(p, sizeof p, "/proc/%s/cmdline", de->d_name);
		if ((fd = open(p, O_RDONLY)) < 0)
			continue;
		n = read(fd, cmd, sizeof cmd - 1);
		close(fd);
		if (n > 0 && memcmp(cmd, "sleep\0" "987.5", 12) == 0)
			found++;
	}
	closedir(d);
	assert_int_equal(found, 0);
	jt_teardown(&t);
}

static void
test_jail_signals(void **state)
{
	struct jt t;
	struct jail j = { NULL, -1, NULL, 0, NULL, NULL };
	char *argv[] = { "sleep", "1000", NULL }, *envp[] = { NULL }, *cause = NULL;
	struct spawn_req r = { "/bin/sleep", argv, envp, 1, 1, -1, "/", 10, 0, &j, 0 };
	struct child ch;
	int status;

	(void)state;
	jt_setup(&t);
	j.root = t.root;
	assert_int_equal(spawn_child(&r, &ch, &cause), 0);
	/* As the daemon stops a child: TERM to the group; init forwards it to the tool. */
	assert_int_equal(kill(-ch.pid, SIGTERM), 0);
	assert_int_equal(waitpid(ch.pid, &status, 0), ch.pid);
	status = spawn_wait_status(ch.jailed, status);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGTERM);
	close(ch.in);
	close(ch.out);
	close(ch.err);
	if (ch.mntns >= 0)
		close(ch.mntns);
	assert_true(jail_is_system_path("/usr/bin/gh"));
	assert_true(jail_is_system_path("/bin/sh"));
	assert_false(jail_is_system_path("/usr/../tmp/x"));
	assert_false(jail_is_system_path("/usrx/bin/gh"));
	assert_false(jail_is_system_path("/tmp/sbt.1/tools/x.sh"));
	/* A tool's own exit code passes through unchanged. */
	assert_int_equal(spawn_wait_status(1, 3 << 8), 3 << 8);
	assert_int_equal(spawn_wait_status(0, 143 << 8), 143 << 8);
	jt_teardown(&t);
}

static void
test_jail_dies_with_parent(void **state)
{
	struct jt t;
	struct jail j = { NULL, JAIL_NET_HOST, NULL, 0, NULL, NULL };
	char *argv[] = { "sleep", "654.5", NULL }, *envp[] = { NULL }, *cause = NULL;
	struct spawn_req r = { "/bin/sleep", argv, envp, 1, 1, -1, "/", 10, 0, &j, 0 };
	int p[2], status, i, alive = 1;
	pid_t mid, tool = 0;
	char buf[32], path[64];

	(void)state;
	jt_setup(&t);
	j.root = t.root;
	assert_int_equal(pipe(p), 0);
	/* A "daemon" that spawns a jailed tool, reports it, and is killed. */
	if ((mid = fork()) == 0) {
		struct child ch;

		if (spawn_child(&r, &ch, &cause) != 0)
			_exit(1);
		snprintf(buf, sizeof buf, "%d\n", (int)ch.pid);
		(void)!write(p[1], buf, strlen(buf));
		pause();
		_exit(0);
	}
	close(p[1]);
	assert_true(read(p[0], buf, sizeof buf) > 0);
	close(p[0]);
	/* The init (a child of mid) runs as the runner now: the uid change must not disarm it. */
	usleep(200000);
	snprintf(path, sizeof path, "/proc/%d", atoi(buf));
	assert_int_equal(access(path, F_OK), 0);
	tool = (pid_t)atoi(buf);
	assert_int_equal(kill(mid, SIGKILL), 0);
	assert_int_equal(waitpid(mid, &status, 0), mid);
	/* The init and the tool die (an unreaped zombie of the init is dead too). */
	for (i = 0; i < 100 && alive; i++) {
		alive = proc_alive(tool) || cmdline_count("sleep\0" "654.5", 12) > 0;
		if (alive)
			usleep(10000);
	}
	if (alive)
		print_message("init %d alive %d, sleeps %d\n", (int)tool, proc_alive(tool),
		    cmdline_count("sleep\0" "654.5", 12));
	assert_false(alive);
	jt_teardown(&t);
}

static void
test_jail_failures(void **state)
{
	struct jt t;
	struct jail_bind b[1];
	struct jail j = { "/nonexistent/jailroot", -1, NULL, 0, NULL, NULL };
	char out[256], tool[128], *argv[] = { "tool", NULL }, *envp[] = { NULL }, *cause = NULL;
	struct spawn_req r = { "/bin/true", argv, envp, 1, 1, 0, NULL, 10, 0, &j, 0 };
	struct child ch;
	int st;

	(void)state;
	jt_setup(&t);
	/* Setup failures come back as the cause, naming the step. */
	assert_int_equal(jt_run("/bin/true", argv, &j, out, sizeof out), -1);
	assert_non_null(strstr(out, "jail: mount jail root"));
	j.root = t.root;
	/* A cwd fd from outside would be a way out: refused. */
	assert_int_equal(spawn_child(&r, &ch, &cause), -1);
	assert_non_null(strstr(cause, "cwd as a path"));
	free(cause);
	/* A tool outside the system dirs is not there unless bound. */
	snprintf(tool, sizeof tool, "%s/true", t.secret);
	assert_int_equal(link("/bin/true", tool) == 0 || symlink("/usr/bin/true", tool) == 0, 1);
	unlink(tool);
	{
		int in = open("/bin/true", O_RDONLY), o = open(tool, O_WRONLY | O_CREAT, 0755);
		char buf[65536];
		ssize_t n;

		assert_true(in >= 0 && o >= 0);
		while ((n = read(in, buf, sizeof buf)) > 0)
			assert_int_equal(write(o, buf, (size_t)n), n);
		close(in);
		close(o);
	}
	assert_int_equal(jt_run(tool, argv, &j, out, sizeof out), -1);
	assert_non_null(strstr(out, tool));
	b[0].path = tool;
	b[0].writable = 0;
	j.binds = b;
	j.nbinds = 1;
	st = jt_run(tool, argv, &j, out, sizeof out);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	jt_teardown(&t);
}

static void
test_jail_netns(void **state)
{
	struct jt t;
	struct jail j = { NULL, -1, NULL, 0, NULL, NULL };
	struct sockaddr_in sin;
	char script[256], out[512], *cause = NULL;
	char *argv[] = { "bash", "-c", script, NULL };
	int nsfd, lfd, port, s, a, st;
	struct pollfd pfd;

	(void)state;
	jt_setup(&t);
	j.root = t.root;
	/* A new empty netns: loopback exists but is down. */
	snprintf(script, sizeof script, "{ echo x >/dev/tcp/127.0.0.1/1; } 2>&1 | grep -o unreachable | head -n 1");
	st = jt_run("/bin/bash", argv, &j, out, sizeof out);
	assert_true(WIFEXITED(st));
	assert_string_equal(out, "unreachable\n");

	assert_int_equal(jail_netns_listen(&nsfd, &lfd, &port, &cause), 0);
	assert_true(port > 0);
	/* From the host's namespace the port is not ours to reach. */
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((unsigned short)port);
	s = socket(AF_INET, SOCK_STREAM, 0);
	(void)connect(s, (struct sockaddr *)&sin, sizeof sin);
	close(s);
	pfd.fd = lfd;
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, 200), 0);
	/* A child joined to it reaches the daemon's listener. */
	j.netns_fd = nsfd;
	snprintf(script, sizeof script, "echo hello-from-jail >/dev/tcp/127.0.0.1/%d", port);
	st = jt_run("/bin/bash", argv, &j, out, sizeof out);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(poll(&pfd, 1, 2000), 1);
	a = accept(lfd, NULL, NULL);
	assert_true(a >= 0);
	memset(out, 0, sizeof out);
	assert_true(read(a, out, sizeof out - 1) > 0);
	assert_string_equal(out, "hello-from-jail\n");
	close(a);
	close(lfd);
	close(nsfd);

	/* A pre-built jail with its own netns: the listener goes inside it. */
	{
		struct spawn_jail warm;

		j.netns_fd = JAIL_NET_NEW_LO;
		assert_int_equal(spawn_jail_start(&j, 1, 1, 0, &warm, &cause), 0);
		assert_true(warm.netns > 2);	/* made and held by the daemon */
		assert_int_equal(jail_netns_listen_in(warm.netns, &nsfd, &lfd, &port, &cause), 0);
		j.netns_fd = nsfd;
		j.warm = &warm;
		snprintf(script, sizeof script, "echo hello-from-warm >/dev/tcp/127.0.0.1/%d", port);
		st = jt_run("/bin/bash", argv, &j, out, sizeof out);
		j.warm = NULL;
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		pfd.fd = lfd;
		assert_int_equal(poll(&pfd, 1, 2000), 1);
		a = accept(lfd, NULL, NULL);
		assert_true(a >= 0);
		memset(out, 0, sizeof out);
		assert_true(read(a, out, sizeof out - 1) > 0);
		assert_string_equal(out, "hello-from-warm\n");
		close(a);
		close(lfd);
		close(nsfd);
	}
	jt_teardown(&t);
}

/*
 * The init is shimbridge-jail (forked by the jail server, exec'd once), not a copy of this process: its exe
 * is that program, its environment and command line hold nothing of ours, and a
 * pre-built jail (spawn_jail_start, then j.warm) runs the tool the same way.
 */
static void
test_jail_init_is_exec(void **state)
{
	struct jt t;
	struct jail j = { NULL, JAIL_NET_NEW, NULL, 0, NULL, NULL };
	struct spawn_jail warm;
	char *argv[] = { "sleep", "1000", NULL }, *envp[] = { "SECRETISH=xyz", NULL };
	char *cause = NULL, path[64], exe[256], buf[256];
	struct spawn_req r = { "/bin/sleep", argv, envp, 1, 1, -1, "/", 10, 0, &j, 0 };
	struct child ch;
	ssize_t n;
	int fd, status, round;

	(void)state;
	jt_setup(&t);
	j.root = t.root;
	for (round = 0; round < 2; round++) {
		if (round == 1) {
			/* Pre-built: started and waiting before the request exists. */
			assert_int_equal(spawn_jail_start(&j, 1, 1, 0, &warm, &cause), 0);
			j.warm = &warm;
		}
		assert_int_equal(spawn_child(&r, &ch, &cause), 0);
		assert_true(ch.jailed);
		j.warm = NULL;
		snprintf(path, sizeof path, "/proc/%d/exe", (int)ch.pid);
		n = readlink(path, exe, sizeof exe - 1);
		assert_true(n > 0);
		exe[n] = '\0';
		assert_non_null(strstr(exe, "/shimbridge-jail"));
		snprintf(path, sizeof path, "/proc/%d/environ", (int)ch.pid);
		assert_true((fd = open(path, O_RDONLY)) >= 0);
		assert_int_equal(read(fd, buf, sizeof buf), 0);
		close(fd);
		snprintf(path, sizeof path, "/proc/%d/cmdline", (int)ch.pid);
		assert_true((fd = open(path, O_RDONLY)) >= 0);
		n = read(fd, buf, sizeof buf);
		close(fd);
		assert_int_equal(n, 16);
		assert_memory_equal(buf, "shimbridge-jail", 16);
		/* It runs as the runner already. */
		snprintf(path, sizeof path, "/proc/%d/status", (int)ch.pid);
		assert_true((fd = open(path, O_RDONLY)) >= 0);
		{
			char st[4096] = "";

			assert_true(read(fd, st, sizeof st - 1) > 0);
			assert_non_null(strstr(st, "\nUid:\t1\t1\t1\t1\n"));
		}
		close(fd);
		/* The call holds the jail's mount namespace until it is answered. */
		assert_true(ch.mntns > 2);
		assert_int_equal(kill(ch.pid, SIGKILL), 0);
		assert_int_equal(waitpid(ch.pid, &status, 0), ch.pid);
		close(ch.in);
		close(ch.out);
		close(ch.err);
		close(ch.mntns);
	}
	/* A pre-built jail that died is replaced by a fresh one for the request. */
	assert_int_equal(spawn_jail_start(&j, 1, 1, 0, &warm, &cause), 0);
	assert_int_equal(kill(warm.pid, SIGKILL), 0);
	assert_int_equal(waitpid(warm.pid, &status, 0), warm.pid);
	j.warm = &warm;
	assert_int_equal(spawn_child(&r, &ch, &cause), 0);
	assert_int_equal(warm.ctl, -1);
	assert_int_equal(kill(ch.pid, SIGKILL), 0);
	assert_int_equal(waitpid(ch.pid, &status, 0), ch.pid);
	if (ch.mntns >= 0)
		close(ch.mntns);
	close(ch.in);
	close(ch.out);
	close(ch.err);
	jt_teardown(&t);
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
		cmocka_unit_test(test_jail_view),
		cmocka_unit_test(test_jail_template),
		cmocka_unit_test(test_jail_grandchild_dies),
		cmocka_unit_test(test_jail_signals),
		cmocka_unit_test(test_jail_dies_with_parent),
		cmocka_unit_test(test_jail_failures),
		cmocka_unit_test(test_jail_netns),
		cmocka_unit_test(test_jail_init_is_exec),
	};

	char *cause = NULL;

	if (sodium_init() < 0)
		return 1;
	/* The jail's init, built by make next to the daemon; tests run from the top. */
	if (spawn_jail_find("build/shimbridge-jail", &cause) != 0) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
