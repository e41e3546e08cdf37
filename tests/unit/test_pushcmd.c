/*
 * Unit tests: the ref updates of a push as the injector reads them
 * (bridge/pushcmd.c), and upstream's default branch from its ref advertisement
 * (profile_git_head in bridge/profile-git.c): what the daemon's own check of a
 * push going upstream rests on.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile-git.h"
#include "pushcmd.h"

#define A40 "1111111111111111111111111111111111111111"
#define B40 "2222222222222222222222222222222222222222"
#define Z40 "0000000000000000000000000000000000000000"
#define A64 A40 "111111111111111111111111"
#define B64 B40 "222222222222222222222222"

/* Append one pkt-line holding the n bytes of s to buf at *o. */
static void
pkt(char *buf, size_t *o, const char *s, size_t n)
{
	*o += (size_t)sprintf(buf + *o, "%04zx", n + 4);
	memcpy(buf + *o, s, n);
	*o += n;
}

static void
pkts(char *buf, size_t *o, const char *s)
{
	pkt(buf, o, s, strlen(s));
}

/* Parse buf[0..n); the updates or NULL, with *why on failure. */
static struct pushcmd *
parse(const char *buf, size_t n, size_t *count, const char **why)
{
	struct pushcmd *u = NULL;

	*why = NULL;
	if (pushcmd_parse((const unsigned char *)buf, n, &u, count, why) != 0) {
		assert_null(u);
		assert_non_null(*why);
		return NULL;
	}
	assert_non_null(u);
	return u;
}

static void
test_updates(void **state)
{
	char buf[4096], first[256];
	struct pushcmd *u;
	const char *why;
	size_t o = 0, n;

	(void)state;
	/* As git sends them: the first with capabilities after a NUL, then a flush, the pack. */
	snprintf(first, sizeof first, "%s %s refs/heads/feature", A40, B40);
	memcpy(first + strlen(first), "\0report-status side-band-64k\n", 30);
	pkt(buf, &o, first, strlen(A40 " " B40 " refs/heads/feature") + 30);
	pkts(buf, &o, Z40 " " B40 " refs/tags/v1\n");
	pkts(buf, &o, A40 " " Z40 " refs/heads/old");
	memcpy(buf + o, "0000PACK\0\0\0\2", 12);
	o += 12;
	u = parse(buf, o, &n, &why);
	assert_non_null(u);
	assert_int_equal(n, 3);
	assert_string_equal(u[0].old, A40);
	assert_string_equal(u[0].new, B40);
	assert_string_equal(u[0].ref, "refs/heads/feature");
	assert_true(pushcmd_zero(u[1].old));
	assert_false(pushcmd_zero(u[1].new));
	assert_string_equal(u[1].ref, "refs/tags/v1");
	assert_true(pushcmd_zero(u[2].new));
	assert_string_equal(u[2].ref, "refs/heads/old");
	free(u);

	/* shallow lines may come first; SHA-256 names. */
	o = 0;
	pkts(buf, &o, "shallow " A40 "\n");
	pkts(buf, &o, A64 " " B64 " refs/heads/x\n");
	memcpy(buf + o, "0000", 4);
	u = parse(buf, o + 4, &n, &why);
	assert_non_null(u);
	assert_int_equal(n, 1);
	assert_string_equal(u[0].new, B64);
	free(u);
}

static void
test_refused(void **state)
{
	static const char *const lines[] = {
		A40 " " B40 "refs/heads/x",		/* no space before the name */
		A40 " " B64 " refs/heads/x",		/* names of two lengths */
		A40 " " B40 " ",			/* no name */
		A40 " " B40 " refs/heads/a b",		/* a space in it */
		A40 " " B40 " refs/heads/a\tb",		/* a control byte */
		"1111 2222 refs/heads/x",		/* short names */
		"ABCDEF1111111111111111111111111111111111 " B40 " refs/heads/x",	/* uppercase */
		"push-cert\0report-status",		/* signed push */
		"shallow xyz",				/* a bad shallow line */
	};
	char buf[4096], big[1200];
	const char *why;
	size_t o, n, i;

	(void)state;
	for (i = 0; i < sizeof lines / sizeof lines[0]; i++) {
		o = 0;
		pkt(buf, &o, lines[i], strlen(lines[i]) + (i == 7 ? 14 : 0));
		memcpy(buf + o, "0000", 4);
		assert_null(parse(buf, o + 4, &n, &why));
	}
	/* No flush: incomplete. No update at all. A cut line. A NUL after the first. */
	o = 0;
	pkts(buf, &o, A40 " " B40 " refs/heads/x");
	assert_null(parse(buf, o, &n, &why));
	assert_null(parse("00ff" A40, 44, &n, &why));
	assert_null(parse("", 0, &n, &why));
	assert_int_equal(pushcmd_parse(NULL, 0, &(struct pushcmd *){ NULL }, &n, &why), -1);
	o = 0;
	pkts(buf, &o, A40 " " B40 " refs/heads/x");
	pkt(buf, &o, A40 " " B40 " refs/heads/y\0caps", strlen(A40 " " B40 " refs/heads/y") + 5);
	memcpy(buf + o, "0000", 4);
	assert_null(parse(buf, o + 4, &n, &why));
	/* pkt-line lengths 1-3 are not lines. */
	assert_null(parse("0002" "0000", 8, &n, &why));
	/* A name over PUSHCMD_REF_MAX. */
	memset(big, 'a', sizeof big);
	memcpy(big, A40 " " B40 " refs/heads/", 93);
	o = 0;
	pkt(buf, &o, big, sizeof big);
	memcpy(buf + o, "0000", 4);
	assert_null(parse(buf, o + 4, &n, &why));
}

static void
test_too_many(void **state)
{
	size_t cap = (PUSHCMD_MAX + 2) * 110, o = 0, n, i;
	char *buf = malloc(cap), line[128];
	struct pushcmd *u;
	const char *why;

	(void)state;
	assert_non_null(buf);
	for (i = 0; i < PUSHCMD_MAX; i++) {
		snprintf(line, sizeof line, A40 " " B40 " refs/heads/b%zu", i);
		pkts(buf, &o, line);
	}
	memcpy(buf + o, "0000", 4);
	u = parse(buf, o + 4, &n, &why);
	assert_non_null(u);
	assert_int_equal(n, PUSHCMD_MAX);
	free(u);
	pkts(buf, &o, A40 " " B40 " refs/heads/one-more");
	memcpy(buf + o, "0000", 4);
	assert_null(parse(buf, o + 4, &n, &why));
	assert_non_null(strstr(why, "too many"));
	free(buf);
}

static void
test_zero(void **state)
{
	struct pushcmd *u = (struct pushcmd *)1;
	const char *why = NULL;
	size_t n = 1;

	(void)state;
	/* git's probe before a push too large for one buffer: a flush alone, no update. */
	assert_int_equal(pushcmd_parse((const unsigned char *)"0000", 4, &u, &n, &why), 0);
	assert_null(u);
	assert_int_equal(n, 0);
	assert_true(pushcmd_zero(Z40));
	assert_false(pushcmd_zero(A40));
	assert_false(pushcmd_zero(""));
}

/*
 * An upload-pack advertisement in buf, up to its first ref line: HEAD at A40 with
 * the capabilities caps. Returns its length.
 */
static size_t
advert_head(char *buf, const char *caps)
{
	char line[512];
	size_t o = 0;
	int len;

	pkts(buf, &o, "# service=git-upload-pack\n");
	memcpy(buf + o, "0000", 4);
	o += 4;
	len = snprintf(line, sizeof line, "%s HEAD%c%s", A40, '\0', caps);
	pkt(buf, &o, line, (size_t)len);
	return o;
}

/* profile_git_head: the default branch from the first ref's symref capability. */
static void
test_head(void **state)
{
	char buf[2048];
	size_t o;
	char *h;

	(void)state;
	o = advert_head(buf, "multi_ack symref=HEAD:refs/heads/trunk agent=git/2.39\n");
	pkts(buf, &o, A40 " refs/heads/trunk\n");
	memcpy(buf + o, "0000", 4);
	h = profile_git_head((const unsigned char *)buf, o + 4);
	assert_non_null(h);
	assert_string_equal(h, "trunk");
	free(h);
	/* Last capability, no newline. */
	o = advert_head(buf, "ofs-delta symref=HEAD:refs/heads/main");
	h = profile_git_head((const unsigned char *)buf, o);
	assert_non_null(h);
	assert_string_equal(h, "main");
	free(h);
	/* No symref, an empty repository, another symref, garbage: nothing. */
	o = advert_head(buf, "ofs-delta symref=FOO:refs/heads/x");
	assert_null(profile_git_head((const unsigned char *)buf, o));
	assert_null(profile_git_head((const unsigned char *)"001e# service=git-upload-pack\n"
	    "00000000", 38));
	assert_null(profile_git_head((const unsigned char *)"zzzz", 4));
	assert_null(profile_git_head((const unsigned char *)"", 0));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_updates),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_too_many),
		cmocka_unit_test(test_zero),
		cmocka_unit_test(test_head),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
