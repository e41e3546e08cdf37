/* Unit tests for the daemon <-> jail init control messages (common/jailmsg.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jailmsg.h"

/* Encode a SETUP into buf; its length. */
static size_t
setup_enc(unsigned char *buf, size_t size, const struct jailmsg_setup *s)
{
	size_t n = jailmsg_setup_size(s);

	assert_true(n > 0 && n <= size);
	assert_int_equal(jailmsg_setup_encode(buf, size, s), n);
	return n;
}

static void
test_header(void **state)
{
	unsigned char h[JAILMSG_HDR];
	enum jailmsg_type t;
	uint32_t len;

	(void)state;
	jailmsg_put_header(h, JAILMSG_RUN, 1234);
	assert_int_equal(jailmsg_get_header(h, &t, &len), 0);
	assert_int_equal(t, JAILMSG_RUN);
	assert_int_equal(len, 1234);
	/* Little endian on the wire, whatever the host. */
	assert_int_equal(h[0], 'R');
	assert_int_equal(h[4], 1234 & 0xff);
	jailmsg_put_header(h, JAILMSG_RUN, JAILMSG_MAX + 1);
	assert_int_equal(jailmsg_get_header(h, &t, &len), -1);
	jailmsg_put_header(h, (enum jailmsg_type)'Z', 0);
	assert_int_equal(jailmsg_get_header(h, &t, &len), -1);
}

static void
test_setup_roundtrip(void **state)
{
	struct jailmsg_setup s, d;
	unsigned char buf[4096];
	const char *why = NULL;
	size_t n;

	(void)state;
	memset(&s, 0, sizeof s);
	s.uid = 1001;
	s.gid = 1002;
	s.net = JAILMSG_NET_NEW_LO;
	s.root = "/var/lib/shimbridge/jail";
	s.scratch = "/var/lib/shimbridge/run/abcd";
	s.nbinds = 2;
	s.binds[0].path = "/var/lib/shimbridge/run/abcd";
	s.binds[0].writable = 1;
	s.binds[1].path = "/opt/tool";
	n = setup_enc(buf, sizeof buf, &s);
	assert_int_equal(jailmsg_setup_decode(buf, n, &d, &why), 0);
	assert_int_equal(d.uid, 1001);
	assert_int_equal(d.gid, 1002);
	assert_int_equal(d.net, JAILMSG_NET_NEW_LO);
	assert_string_equal(d.root, s.root);
	assert_string_equal(d.scratch, s.scratch);
	assert_int_equal(d.nbinds, 2);
	assert_string_equal(d.binds[0].path, s.binds[0].path);
	assert_int_equal(d.binds[0].writable, 1);
	assert_string_equal(d.binds[1].path, "/opt/tool");
	assert_int_equal(d.binds[1].writable, 0);
	/* Every truncation is refused with a reason, never read past the end. */
	for (size_t k = 0; k < n; k++) {
		why = NULL;
		assert_int_equal(jailmsg_setup_decode(buf, k, &d, &why), -1);
		assert_non_null(why);
	}
	/* A trailing byte is refused too. */
	buf[n] = 'x';
	assert_int_equal(jailmsg_setup_decode(buf, n + 1, &d, &why), -1);
	assert_string_equal(why, "setup: trailing bytes");
}

static void
test_setup_refusals(void **state)
{
	struct jailmsg_setup s, d;
	unsigned char buf[4096];
	const char *why = NULL;
	size_t n;

	(void)state;
	memset(&s, 0, sizeof s);
	s.uid = 1001;
	s.gid = 1001;
	s.root = "/j";
	s.scratch = "";
	/* The runner is never root. */
	s.uid = 0;
	n = setup_enc(buf, sizeof buf, &s);
	assert_int_equal(jailmsg_setup_decode(buf, n, &d, &why), -1);
	assert_string_equal(why, "setup: the runner may not be root");
	s.uid = 1001;
	s.gid = 0;
	n = setup_enc(buf, sizeof buf, &s);
	assert_int_equal(jailmsg_setup_decode(buf, n, &d, &why), -1);
	s.gid = 1001;
	/* Binds: absolute, no "..", writable 0 or 1. */
	s.nbinds = 1;
	s.binds[0].path = "/a/../etc";
	n = setup_enc(buf, sizeof buf, &s);
	assert_int_equal(jailmsg_setup_decode(buf, n, &d, &why), -1);
	assert_string_equal(why, "setup: bad bind");
	s.binds[0].path = "/a/..";
	n = setup_enc(buf, sizeof buf, &s);
	assert_int_equal(jailmsg_setup_decode(buf, n, &d, &why), -1);
	s.binds[0].path = "relative";
	n = setup_enc(buf, sizeof buf, &s);
	assert_int_equal(jailmsg_setup_decode(buf, n, &d, &why), -1);
	s.binds[0].path = "/a/..b/c";	/* a name that starts with "..": fine */
	n = setup_enc(buf, sizeof buf, &s);
	assert_int_equal(jailmsg_setup_decode(buf, n, &d, &why), 0);
	buf[n - strlen("/a/..b/c") - 1 - 4] = 2;	/* writable = 2 */
	assert_int_equal(jailmsg_setup_decode(buf, n, &d, &why), -1);
	/* Unknown network mode, too many binds (as counted on the wire). */
	s.nbinds = 0;
	n = setup_enc(buf, sizeof buf, &s);
	buf[8] = 9;
	assert_int_equal(jailmsg_setup_decode(buf, n, &d, &why), -1);
	assert_string_equal(why, "setup: unknown network mode");
	buf[8] = 0;
	buf[12] = JAILMSG_BINDS_MAX + 1;
	assert_int_equal(jailmsg_setup_decode(buf, n, &d, &why), -1);
	assert_string_equal(why, "setup: too many binds");
	/* The encoder refuses what the decoder would. */
	s.nbinds = JAILMSG_BINDS_MAX + 1;
	assert_int_equal(jailmsg_setup_size(&s), 0);
}

static void
test_run_roundtrip(void **state)
{
	char *argv[] = { "gh", "api", "", "user", NULL };
	char *envp[] = { "HOME=/s", "GH_TOKEN=x=y", NULL };
	struct jailmsg_run m;
	unsigned char buf[4096];
	const char *why = NULL;
	size_t n;

	(void)state;
	n = jailmsg_run_size("/usr/bin/gh", "/s", argv, envp);
	assert_true(n > 0 && n < sizeof buf);
	assert_int_equal(jailmsg_run_encode(buf, sizeof buf, 65, 4, "/usr/bin/gh", "/s", argv,
	    envp), n);
	assert_int_equal(jailmsg_run_decode(buf, n, &m, &why), 0);
	assert_int_equal(m.cpu_seconds, 65);
	assert_int_equal(m.nfds, 4);
	assert_string_equal(m.path, "/usr/bin/gh");
	assert_string_equal(m.cwd, "/s");
	assert_string_equal(m.argv[0], "gh");
	assert_string_equal(m.argv[2], "");	/* empty arguments survive */
	assert_string_equal(m.argv[3], "user");
	assert_null(m.argv[4]);
	assert_string_equal(m.envp[1], "GH_TOKEN=x=y");
	assert_null(m.envp[2]);
	jailmsg_run_free(&m);
	for (size_t k = 0; k < n; k++) {
		why = NULL;
		assert_int_equal(jailmsg_run_decode(buf, k, &m, &why), -1);
		assert_non_null(why);
		assert_null(m.argv);
		assert_null(m.envp);
	}
}

static void
test_run_refusals(void **state)
{
	char *argv[] = { "t", NULL }, *noargv[] = { NULL };
	char *badenv[] = { "NOEQUALS", NULL }, *badenv2[] = { "=x", NULL }, *envp[] = { NULL };
	struct jailmsg_run m;
	unsigned char buf[4096];
	const char *why = NULL;
	size_t n;

	(void)state;
	/* No argv[0], wrong fd count: the encoder refuses. */
	assert_int_equal(jailmsg_run_size("/t", "/", noargv, envp), 0);
	assert_int_equal(jailmsg_run_encode(buf, sizeof buf, 1, 5, "/t", "/", argv, envp), 0);
	/* Relative or ".." paths. */
	n = jailmsg_run_encode(buf, sizeof buf, 1, 3, "t", "/", argv, envp);
	assert_int_equal(jailmsg_run_decode(buf, n, &m, &why), -1);
	assert_string_equal(why, "run: bad path or directory");
	n = jailmsg_run_encode(buf, sizeof buf, 1, 3, "/t", "/x/../..", argv, envp);
	assert_int_equal(jailmsg_run_decode(buf, n, &m, &why), -1);
	/* Environment entries are NAME=value. */
	n = jailmsg_run_encode(buf, sizeof buf, 1, 3, "/t", "/", argv, badenv);
	assert_int_equal(jailmsg_run_decode(buf, n, &m, &why), -1);
	assert_string_equal(why, "run: bad environment entry");
	n = jailmsg_run_encode(buf, sizeof buf, 1, 3, "/t", "/", argv, badenv2);
	assert_int_equal(jailmsg_run_decode(buf, n, &m, &why), -1);
	/* Counts that claim more strings than there are bytes. */
	n = jailmsg_run_encode(buf, sizeof buf, 1, 3, "/t", "/", argv, envp);
	buf[8] = 0xff;
	buf[9] = 0xff;
	assert_int_equal(jailmsg_run_decode(buf, n, &m, &why), -1);
	assert_string_equal(why, "run: bad argument or environment count");
	buf[8] = 1;
	buf[9] = 0;
	buf[12] = 3;	/* three env strings announced, none there */
	assert_int_equal(jailmsg_run_decode(buf, n, &m, &why), -1);
	buf[12] = 0;
	buf[4] = 7;	/* seven descriptors */
	assert_int_equal(jailmsg_run_decode(buf, n, &m, &why), -1);
	assert_string_equal(why, "run: bad descriptor count");
	buf[4] = 3;
	assert_int_equal(jailmsg_run_decode(buf, n, &m, &why), 0);
	jailmsg_run_free(&m);
}

/* FORK and PID: exact lengths, flags within what the server allows, errnos in range. */
static void
test_fork_pid(void **state)
{
	unsigned char b[JAILMSG_FORK_LEN], p[JAILMSG_PID_LEN];
	const char *why = NULL;
	uint32_t f = 0;
	int cg = -1, tm = -1;
	int32_t pid = 0;

	(void)state;
	jailmsg_fork_encode(b, 0x0f, 1, 0);
	assert_int_equal(jailmsg_fork_decode(b, sizeof b, 0x1f, 0x0f, &f, &cg, &tm, &why), 0);
	assert_int_equal(f, 0x0f);
	assert_int_equal(cg, 1);
	assert_int_equal(tm, 0);
	jailmsg_fork_encode(b, 0x1f, 0, 1);
	assert_int_equal(jailmsg_fork_decode(b, sizeof b, 0x1f, 0x0f, &f, &cg, &tm, &why), 0);
	assert_int_equal(f, 0x1f);
	assert_int_equal(cg, 0);
	assert_int_equal(tm, 1);
	jailmsg_fork_encode(b, 0x0f, 1, 1);
	assert_int_equal(jailmsg_fork_decode(b, sizeof b, 0x1f, 0x0f, &f, &cg, &tm, &why), 0);
	assert_int_equal(cg, 1);
	assert_int_equal(tm, 1);
	/* A namespace the server may not make, one it must make missing, a bad length. */
	jailmsg_fork_encode(b, 0x2f, 0, 0);
	assert_int_equal(jailmsg_fork_decode(b, sizeof b, 0x1f, 0x0f, &f, &cg, &tm, &why), -1);
	assert_non_null(why);
	jailmsg_fork_encode(b, 0x07, 0, 0);
	assert_int_equal(jailmsg_fork_decode(b, sizeof b, 0x1f, 0x0f, &f, &cg, &tm, &why), -1);
	assert_int_equal(jailmsg_fork_decode(b, sizeof b - 1, 0x1f, 0x0f, &f, &cg, &tm, &why), -1);
	/* An option this version does not know. */
	jailmsg_fork_encode(b, 0x0f, 0, 0);
	b[4] = 4;
	assert_int_equal(jailmsg_fork_decode(b, sizeof b, 0x1f, 0x0f, &f, &cg, &tm, &why), -1);
	b[4] = 0;
	b[7] = 0x80;
	assert_int_equal(jailmsg_fork_decode(b, sizeof b, 0x1f, 0x0f, &f, &cg, &tm, &why), -1);

	jailmsg_pid_encode(p, 4242);
	assert_int_equal(jailmsg_pid_decode(p, sizeof p, &pid, &why), 0);
	assert_int_equal(pid, 4242);
	jailmsg_pid_encode(p, -12);
	assert_int_equal(jailmsg_pid_decode(p, sizeof p, &pid, &why), 0);
	assert_int_equal(pid, -12);
	jailmsg_pid_encode(p, 0);
	assert_int_equal(jailmsg_pid_decode(p, sizeof p, &pid, &why), -1);
	jailmsg_pid_encode(p, -5000);
	assert_int_equal(jailmsg_pid_decode(p, sizeof p, &pid, &why), -1);
	assert_int_equal(jailmsg_pid_decode(p, 3, &pid, &why), -1);
}

/* TMPL: two absolute paths without "..", the scratch parent not "/", nothing more. */
static void
test_tmpl(void **state)
{
	unsigned char b[256];
	const char *root = NULL, *sdir = NULL, *why = NULL;
	size_t n;

	(void)state;
	n = jailmsg_tmpl_encode(b, sizeof b, "/var/lib/sb/jail", "/var/lib/sb/run");
	assert_int_equal(n, sizeof "/var/lib/sb/jail" + sizeof "/var/lib/sb/run");
	assert_int_equal(jailmsg_tmpl_decode(b, n, &root, &sdir, &why), 0);
	assert_string_equal(root, "/var/lib/sb/jail");
	assert_string_equal(sdir, "/var/lib/sb/run");
	/* Trailing bytes, a missing NUL, a relative path, "..", "/" as the parent. */
	assert_int_equal(jailmsg_tmpl_decode(b, n - 1, &root, &sdir, &why), -1);
	b[n] = 'x';
	assert_int_equal(jailmsg_tmpl_decode(b, n + 1, &root, &sdir, &why), -1);
	n = jailmsg_tmpl_encode(b, sizeof b, "/j", "run");
	assert_int_equal(jailmsg_tmpl_decode(b, n, &root, &sdir, &why), -1);
	n = jailmsg_tmpl_encode(b, sizeof b, "/j", "/var/../etc");
	assert_int_equal(jailmsg_tmpl_decode(b, n, &root, &sdir, &why), -1);
	n = jailmsg_tmpl_encode(b, sizeof b, "/j", "/");
	assert_int_equal(jailmsg_tmpl_decode(b, n, &root, &sdir, &why), -1);
	assert_non_null(why);
	/* Too small a buffer. */
	assert_int_equal(jailmsg_tmpl_encode(b, 4, "/j", "/run"), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_setup_roundtrip),
		cmocka_unit_test(test_setup_refusals),
		cmocka_unit_test(test_run_roundtrip),
		cmocka_unit_test(test_run_refusals),
		cmocka_unit_test(test_fork_pid),
		cmocka_unit_test(test_tmpl),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
