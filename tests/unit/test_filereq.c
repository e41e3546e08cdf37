/* Unit tests: fetching file arguments from the sandbox (bridge/filereq.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "filereq.h"
#include "policy.h"
#include "profile.h"
#include "proto.h"
#include "spawn.h"

/* A fresh scratch directory and a context asking for n files. */
static char *
setup(struct policy_ctx *ctx, size_t n)
{
	char tmpl[] = "/tmp/test_filereq.XXXXXX", *d;
	size_t i;

	d = mkdtemp(tmpl);
	assert_non_null(d);
	memset(ctx, 0, sizeof *ctx);
	for (i = 0; i < n; i++) {
		ctx->files[i].argi = i;
		ctx->files[i].off = 0;
		ctx->files[i].path = strdup(i == 0 ? "PR.md" : "other.txt");
		ctx->files[i].flag = "--body-file";
	}
	ctx->nfiles = n;
	return strdup(d);
}

/* What a copy holds, NUL-terminated (the tests write text). */
static char *
slurp(const char *path)
{
	static char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

#define END_OK(n)	"{\"status\":\"ok\",\"size\":" #n "}"
#define FEED(fr, t, s, m)	filereq_frame(fr, t, (const unsigned char *)(s), strlen(s), m)

static void
test_two_files(void **state)
{
	struct policy_ctx ctx;
	struct filereq *fr;
	struct stat st;
	char *dir, *cause = NULL, *msg = NULL;
	char *argv[2];

	(void)state;
	dir = setup(&ctx, 2);
	fr = filereq_new(dir, &ctx, &cause);
	assert_non_null(fr);
	assert_int_equal(filereq_count(fr), 2);
	assert_string_equal(filereq_path(fr, 0), "PR.md");
	assert_int_equal(FEED(fr, FRAME_FILE_DATA, "hello ", &msg), FILEREQ_MORE);
	assert_int_equal(FEED(fr, FRAME_FILE_DATA, "world", &msg), FILEREQ_MORE);
	assert_int_equal(FEED(fr, FRAME_FILE_END, END_OK(11), &msg), FILEREQ_MORE);
	/* An empty file still gets a copy. */
	assert_int_equal(FEED(fr, FRAME_FILE_END, END_OK(0), &msg), FILEREQ_DONE);
	assert_string_equal(slurp(filereq_copies(fr)[0]), "hello world");
	assert_string_equal(slurp(filereq_copies(fr)[1]), "");
	/* Root-owned and read-only to the tool. */
	assert_int_equal(stat(filereq_copies(fr)[0], &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(st.st_uid, geteuid());
	/* Anything more is a protocol error. */
	assert_int_equal(FEED(fr, FRAME_FILE_DATA, "x", &msg), FILEREQ_BAD);
	free(msg);
	argv[0] = strdup("PR.md");
	argv[1] = strdup("other.txt");
	profile_files_apply(argv, 2, &ctx, filereq_copies(fr));
	assert_string_equal(argv[0], filereq_copies(fr)[0]);
	free(argv[0]);
	free(argv[1]);
	filereq_free(fr);
	policy_ctx_free(&ctx);
	spawn_rmtree(dir);
	free(dir);
}

static void
test_refused(void **state)
{
	struct policy_ctx ctx;
	struct filereq *fr;
	char *dir, *cause = NULL, *msg = NULL;

	(void)state;
	dir = setup(&ctx, 1);
	fr = filereq_new(dir, &ctx, &cause);
	assert_int_equal(FEED(fr, FRAME_FILE_END, "{\"status\":\"not-found\"}", &msg),
	    FILEREQ_REFUSED);
	assert_non_null(strstr(msg, "--body-file PR.md"));
	assert_non_null(strstr(msg, "no such file"));
	assert_non_null(strstr(msg, "Nothing was run"));
	free(msg);
	filereq_free(fr);
	policy_ctx_free(&ctx);
	spawn_rmtree(dir);
	free(dir);
	dir = setup(&ctx, 1);
	fr = filereq_new(dir, &ctx, &cause);
	assert_int_equal(FEED(fr, FRAME_FILE_END, "{\"status\":\"too-large\"}", &msg),
	    FILEREQ_REFUSED);
	assert_non_null(strstr(msg, "1 MiB"));
	free(msg);
	filereq_free(fr);
	policy_ctx_free(&ctx);
	spawn_rmtree(dir);
	free(dir);
}

/* Each malformed answer is a protocol error for this connection. */
static void
test_bad_peer(void **state)
{
	static const char *const ends[] = {
		"", "[]", "{\"status\":\"ok\"}", "{\"status\":\"ok\",\"size\":2}",
		"{\"status\":\"ok\",\"size\":-1}", "{\"status\":\"maybe\"}",
		"{\"status\":\"ok\",\"size\":0,\"x\":1}", "{\"status\":1}",
		"{\"status\":\"ok\",\"status\":\"ok\",\"size\":0}",
		"{\"status\":\"not-found\",\"size\":0}",
	};
	struct policy_ctx ctx;
	struct filereq *fr;
	char *dir, *cause = NULL, *msg = NULL;
	unsigned char *big;
	size_t i, k;

	(void)state;
	for (i = 0; i < sizeof ends / sizeof ends[0]; i++) {
		dir = setup(&ctx, 1);
		fr = filereq_new(dir, &ctx, &cause);
		assert_int_equal(FEED(fr, FRAME_FILE_END, ends[i], &msg), FILEREQ_BAD);
		assert_non_null(msg);
		free(msg);
		filereq_free(fr);
		policy_ctx_free(&ctx);
		spawn_rmtree(dir);
		free(dir);
	}
	/* Wrong frame type, and a file over the per-file cap. */
	dir = setup(&ctx, 1);
	fr = filereq_new(dir, &ctx, &cause);
	assert_int_equal(FEED(fr, FRAME_STDIN, "x", &msg), FILEREQ_BAD);
	free(msg);
	big = calloc(1, FRAME_DATA_MAX);
	for (k = 0; k < PROTO_FILE_MAX / FRAME_DATA_MAX; k++)
		assert_int_equal(filereq_frame(fr, FRAME_FILE_DATA, big, FRAME_DATA_MAX, &msg),
		    FILEREQ_MORE);
	assert_int_equal(filereq_frame(fr, FRAME_FILE_DATA, big, 1, &msg), FILEREQ_BAD);
	free(msg);
	free(big);
	filereq_free(fr);
	policy_ctx_free(&ctx);
	spawn_rmtree(dir);
	free(dir);
}

/* The directory must be the one just made: an existing "files" is refused. */
static void
test_existing_dir(void **state)
{
	struct policy_ctx ctx;
	char *dir, *cause = NULL, path[128];

	(void)state;
	dir = setup(&ctx, 1);
	snprintf(path, sizeof path, "%s/files", dir);
	assert_int_equal(symlink("/tmp", path), 0);
	assert_null(filereq_new(dir, &ctx, &cause));
	assert_non_null(cause);
	free(cause);
	policy_ctx_free(&ctx);
	spawn_rmtree(dir);
	free(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_files),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_bad_peer),
		cmocka_unit_test(test_existing_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
