/* Unit tests: the audit hash chain (bridge/auditchain.c): seal, parse, sign, tail, verifier. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "auditchain.h"

#define NREC	6

static char *lines[NREC];
static size_t lens[NREC];
static unsigned char sk[AUDITCHAIN_SK], pk[AUDITCHAIN_PK];

/* A chain of NREC records: checkpoint, 4 records, checkpoint (signed when sign). */
static void
make_chain(int sign)
{
	unsigned char prev[AUDITCHAIN_HASH] = { 0 };
	char obj[256];
	int i;

	for (i = 0; i < NREC; i++) {
		free(lines[i]);
		if (i == 0 || i == NREC - 1)
			snprintf(obj, sizeof obj, "{\"event\":\"audit-checkpoint\",\"reason\":\"%s\","
			    "\"time\":\"t\"}", i == 0 ? "start" : "stop");
		else
			snprintf(obj, sizeof obj, "{\"event\":\"done\",\"n\":%d,\"time\":\"t\"}", i);
		assert_int_equal(auditchain_seal(obj, strlen(obj), (unsigned long long)i + 1, prev,
		    &lines[i], &lens[i]), 0);
		if (sign && (i == 0 || i == NREC - 1))
			auditchain_sign(&lines[i], &lens[i], sk);
		auditchain_hash(lines[i], lens[i], prev);
	}
}

/* Run the verifier over lines in the order given by idx; the kind it stops at, and where. */
static enum auditchain_kind
run_verify(const int *idx, int n, const unsigned char *key, int *at)
{
	struct auditchain_verify v;
	enum auditchain_kind k = AUDITCHAIN_OK;
	int i;

	auditchain_verify_init(&v, key);
	*at = -1;
	for (i = 0; i < n; i++) {
		if (auditchain_verify_line(&v, lines[idx[i]], lens[idx[i]], 1) != 0) {
			k = v.kind;
			*at = i;
			assert_non_null(v.why);
			break;
		}
	}
	auditchain_verify_free(&v);
	return k;
}

static void
test_seal_parse(void **state)
{
	struct auditchain_rec r;
	unsigned char h[AUDITCHAIN_HASH];
	char *cause = NULL, *out;
	size_t len;

	(void)state;
	make_chain(0);
	assert_int_equal(auditchain_parse(lines[1], lens[1], &r, &cause), 0);
	assert_true(r.chained);
	assert_false(r.checkpoint);
	assert_int_equal(r.seq, 2);
	auditchain_hash(lines[0], lens[0], h);
	assert_memory_equal(r.prev, h, sizeof h);
	assert_int_equal(auditchain_parse(lines[0], lens[0], &r, &cause), 0);
	assert_true(r.checkpoint && r.genesis);
	assert_string_equal(r.reason, "start");
	/* unchained JSON is fine; other text is not */
	assert_int_equal(auditchain_parse("{\"a\":1}", 7, &r, &cause), 0);
	assert_false(r.chained);
	assert_int_equal(auditchain_parse("nope", 4, &r, &cause), -1);
	free(cause);
	cause = NULL;
	/* chain members not last, duplicated, or malformed */
	assert_int_equal(auditchain_parse("{\"seq\":1,\"prev\":\"00\",\"a\":1}", 28, &r, &cause), -1);
	free(cause);
	cause = NULL;
	assert_int_equal(auditchain_parse("{\"seq\":1,\"seq\":1}", 17, &r, &cause), -1);
	free(cause);
	cause = NULL;
	assert_int_equal(auditchain_seal("{}", 2, 1, h, &out, &len), -1);
	assert_int_equal(auditchain_seal("[1]", 3, 1, h, &out, &len), -1);
	/* upper-case hex is not the writer's form */
	out = strdup(lines[1]);
	{
		char *p = strstr(out, "\"prev\":\"") + 8;
		size_t i;

		for (i = 0; i < 64; i++)
			if (p[i] >= 'a' && p[i] <= 'f')
				p[i] = (char)(p[i] - 'a' + 'A');
	}
	assert_int_equal(auditchain_parse(out, lens[1], &r, &cause), -1);
	free(cause);
	free(out);
}

static void
test_sign(void **state)
{
	struct auditchain_rec r;
	unsigned char other[AUDITCHAIN_PK], osk[AUDITCHAIN_SK];
	char *cause = NULL;

	(void)state;
	make_chain(1);
	assert_int_equal(auditchain_parse(lines[0], lens[0], &r, &cause), 0);
	assert_true(r.has_sig);
	assert_int_equal(auditchain_sig_ok(lines[0], &r, pk), 1);
	crypto_sign_keypair(other, osk);
	assert_int_equal(auditchain_sig_ok(lines[0], &r, other), 0);
	/* a flipped byte before the signature */
	strstr(lines[0], "start")[0] ^= 1;
	assert_int_equal(auditchain_parse(lines[0], lens[0], &r, &cause), 0);
	assert_int_equal(auditchain_sig_ok(lines[0], &r, pk), 0);
	strstr(lines[0], "rtart")[0] ^= 1;
	/* a signature on an ordinary record is malformed */
	auditchain_sign(&lines[1], &lens[1], sk);
	assert_int_equal(auditchain_parse(lines[1], lens[1], &r, &cause), -1);
	free(cause);
}

static void
test_verify_kinds(void **state)
{
	static const int good[] = { 0, 1, 2, 3, 4, 5 }, del[] = { 0, 1, 3, 4, 5 },
	    swap[] = { 0, 2, 1, 3 }, dup[] = { 0, 1, 1 }, head[] = { 1, 2, 3 },
	    restart[] = { 0, 1, 0 };
	int at;

	(void)state;
	make_chain(1);
	assert_int_equal(run_verify(good, 6, pk, &at), AUDITCHAIN_OK);
	assert_int_equal(run_verify(good, 6, NULL, &at), AUDITCHAIN_OK);
	assert_int_equal(run_verify(del, 5, NULL, &at), AUDITCHAIN_GAP);
	assert_int_equal(at, 2);
	assert_int_equal(run_verify(swap, 4, NULL, &at), AUDITCHAIN_GAP);
	assert_int_equal(run_verify(dup, 3, NULL, &at), AUDITCHAIN_DUPLICATED);
	assert_int_equal(run_verify(head, 3, NULL, &at), AUDITCHAIN_TRUNCATED_HEAD);
	assert_int_equal(run_verify(restart, 3, NULL, &at), AUDITCHAIN_RESTARTED);
	/* an edit shows at the next record */
	lines[2][strlen("{\"event\":\"done\",\"n\":")] = '9';
	assert_int_equal(run_verify(good, 6, NULL, &at), AUDITCHAIN_EDITED);
	assert_int_equal(at, 3);
	/* unsigned checkpoints while a key is required */
	make_chain(0);
	assert_int_equal(run_verify(good, 6, pk, &at), AUDITCHAIN_UNSIGNED);
	assert_int_equal(at, 0);
}

static void
test_tail(void **state)
{
	char path[] = "/tmp/test_auditchain.XXXXXX";
	unsigned char h[AUDITCHAIN_HASH], want[AUDITCHAIN_HASH];
	unsigned long long seq = 0;
	int fd, torn, i;

	(void)state;
	make_chain(0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(auditchain_tail(fd, &seq, h, &torn), 0);
	for (i = 0; i < 3; i++) {
		assert_int_equal(write(fd, lines[i], lens[i]), (ssize_t)lens[i]);
		assert_int_equal(write(fd, "\n", 1), 1);
	}
	assert_int_equal(auditchain_tail(fd, &seq, h, &torn), 1);
	assert_int_equal(seq, 3);
	assert_false(torn);
	auditchain_hash(lines[2], lens[2], want);
	assert_memory_equal(h, want, sizeof h);
	/* half a line after it: torn, and the last complete record still counts */
	assert_int_equal(write(fd, lines[3], 20), 20);
	assert_int_equal(auditchain_tail(fd, &seq, h, &torn), 1);
	assert_true(torn);
	assert_int_equal(seq, 3);
	/* a last line that is not a chained record */
	assert_int_equal(write(fd, "\n{\"a\":1}\n", 9), 9);
	assert_int_equal(auditchain_tail(fd, &seq, h, &torn), -1);
	close(fd);
	unlink(path);
}

static void
test_load_key(void **state)
{
	char path[] = "/tmp/test_auditchain_key.XXXXXX";
	unsigned char *ksk = sodium_malloc(AUDITCHAIN_SK), kpk[AUDITCHAIN_PK];
	char *cause = NULL;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "000102030405060708090a0b0c0d0e0f"
	    "101112131415161718191a1b1c1d1e1f\n", 65), 65);
	fchmod(fd, 0600);
	assert_int_equal(auditchain_load_key(path, ksk, kpk, &cause), 0);
	fchmod(fd, 0640);
	assert_int_equal(auditchain_load_key(path, ksk, kpk, &cause), -1);
	assert_non_null(strstr(cause, "only its owner"));
	free(cause);
	cause = NULL;
	fchmod(fd, 0600);
	assert_int_equal(ftruncate(fd, 30), 0);
	assert_int_equal(auditchain_load_key(path, ksk, kpk, &cause), -1);
	free(cause);
	close(fd);
	unlink(path);
	sodium_free(ksk);
}

static int
teardown(void **state)
{
	int i;

	(void)state;
	for (i = 0; i < NREC; i++) {
		free(lines[i]);
		lines[i] = NULL;
	}
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_seal_parse, teardown),
		cmocka_unit_test_teardown(test_sign, teardown),
		cmocka_unit_test_teardown(test_verify_kinds, teardown),
		cmocka_unit_test_teardown(test_tail, teardown),
		cmocka_unit_test(test_load_key),
	};

	if (sodium_init() < 0)
		return 1;
	crypto_sign_keypair(pk, sk);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
