/*
 * Unit tests for the streaming redactor (bridge/redact.c). Expected outputs were
 * produced by an independent Python reference (base64, urllib.parse, json, binascii
 * and a brute-force search), not by the code under test.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redact.h"

#define MASK		REDACT_MASK
#define MASKLEN		(sizeof REDACT_MASK - 1)
#define LIT(s)		(const unsigned char *)(s), sizeof(s) - 1

struct enc_case {
	const char	*name;
	const char	*in;
	const char	*out;
};

/* Generated from an independent Python reference (base64, urllib.parse, json, binascii). */
static const unsigned char enc_secret[] = "s3cr3t/Tok+en\"\\\012\001\033<&>~ z\?";
static const struct enc_case enc_cases[] = {
	{ "raw",
	    "key=s3cr3t/Tok+en\"\\\012\001\033<&>~ z\? end",
	    "key=[REDACTED] end" },
	{ "base64 offset 0",
	    "data:czNjcjN0L1RvaytlbiJcCgEbPCY+fiB6PyEh;",
	    "data:[REDACTED]yEh;" },
	{ "base64 offset 1",
	    "data:eHMzY3IzdC9Ub2srZW4iXAoBGzwmPn4gej8hIQ==;",
	    "data:eH[REDACTED]8hIQ==;" },
	{ "base64 offset 2",
	    "data:eHlzM2NyM3QvVG9rK2VuIlwKARs8Jj5+IHo/ISE=;",
	    "data:eHl[REDACTED]ISE=;" },
	{ "base64url offset 0",
	    "data:czNjcjN0L1RvaytlbiJcCgEbPCY-fiB6PyEh;",
	    "data:[REDACTED]yEh;" },
	{ "base64url offset 1",
	    "data:eHMzY3IzdC9Ub2srZW4iXAoBGzwmPn4gej8hIQ==;",
	    "data:eH[REDACTED]8hIQ==;" },
	{ "base64url offset 2",
	    "data:eHlzM2NyM3QvVG9rK2VuIlwKARs8Jj5-IHo_ISE=;",
	    "data:eHl[REDACTED]ISE=;" },
	{ "url upper",
	    "q=s3cr3t%2FTok%2Ben%22%5C%0A%01%1B%3C%26%3E~%20z%3F&x=1",
	    "q=[REDACTED]&x=1" },
	{ "url lower",
	    "q=s3cr3t%2fTok%2ben%22%5c%0a%01%1b%3c%26%3e~%20z%3f&x=1",
	    "q=[REDACTED]&x=1" },
	{ "json",
	    "{\"t\":\"s3cr3t/Tok+en\\\"\\\\\\n\\u0001\\u001b<&>~ z\?\"}",
	    "{\"t\":\"[REDACTED]\"}" },
	{ "json \\/",
	    "{\"t\":\"s3cr3t\\/Tok+en\\\"\\\\\\n\\u0001\\u001b<&>~ z\?\"}",
	    "{\"t\":\"[REDACTED]\"}" },
	{ "json upper",
	    "{\"t\":\"s3cr3t/Tok+en\\\"\\\\\\n\\u0001\\u001B<&>~ z\?\"}",
	    "{\"t\":\"[REDACTED]\"}" },
	{ "json \\/ upper",
	    "{\"t\":\"s3cr3t\\/Tok+en\\\"\\\\\\n\\u0001\\u001B<&>~ z\?\"}",
	    "{\"t\":\"[REDACTED]\"}" },
	{ "json go",
	    "{\"t\":\"s3cr3t/Tok+en\\\"\\\\\\n\\u0001\\u001b\\u003c\\u0026\\u"
	    "003e~ z\?\"}",
	    "{\"t\":\"[REDACTED]\"}" },
	{ "hex lower",
	    "hex:7333637233742f546f6b2b656e225c0a011b3c263e7e207a3f\012",
	    "hex:[REDACTED]\012" },
	{ "hex upper",
	    "hex:7333637233742F546F6B2B656E225C0A011B3C263E7E207A3F\012",
	    "hex:[REDACTED]\012" },
	{ "url every byte upper",
	    "q=%73%33%63%72%33%74%2F%54%6F%6B%2B%65%6E%22%5C%0A%01%1B%3C%26%3E%7E%2"
	    "0%7A%3F&x=1",
	    "q=[REDACTED]&x=1" },
	{ "url every byte lower",
	    "q=%73%33%63%72%33%74%2f%54%6f%6b%2b%65%6e%22%5c%0a%01%1b%3c%26%3e%7e%2"
	    "0%7a%3f&x=1",
	    "q=[REDACTED]&x=1" },
	{ "form upper",
	    "q=s3cr3t%2FTok%2Ben%22%5C%0A%01%1B%3C%26%3E~+z%3F&x=1",
	    "q=[REDACTED]&x=1" },
	{ "form lower",
	    "q=s3cr3t%2fTok%2ben%22%5c%0a%01%1b%3c%26%3e~+z%3f&x=1",
	    "q=[REDACTED]&x=1" },
	{ "json every char \\u lower",
	    "{\"t\":\"\\u0073\\u0033\\u0063\\u0072\\u0033\\u0074\\u002f\\u0054\\u00"
	    "6f\\u006b\\u002b\\u0065\\u006e\\u0022\\u005c\\u000a\\u0001\\u001b\\u00"
	    "3c\\u0026\\u003e\\u007e\\u0020\\u007a\\u003f\"}",
	    "{\"t\":\"[REDACTED]\"}" },
	{ "json every char \\u upper",
	    "{\"t\":\"\\u0073\\u0033\\u0063\\u0072\\u0033\\u0074\\u002F\\u0054\\u00"
	    "6F\\u006B\\u002B\\u0065\\u006E\\u0022\\u005C\\u000A\\u0001\\u001B\\u00"
	    "3C\\u0026\\u003E\\u007E\\u0020\\u007A\\u003F\"}",
	    "{\"t\":\"[REDACTED]\"}" },
};
#define ENC_SECRET_PATTERNS 21

/* A secret whose base64 has '+' and '/' at every offset, so both alphabets count. */
static const unsigned char b64_secret[] = "ok\377\376\373\357\276\373\377\277>>\?\?";
static const struct enc_case b64_cases[] = {
	{ "base64 +/ offset 0",
	    "b64=b2v//vvvvvv/vz4+Pz8h.",
	    "b64=[REDACTED]8h." },
	{ "base64 +/ offset 1",
	    "b64=eG9r//777777/78+Pj8/IQ==.",
	    "b64=eG[REDACTED]IQ==." },
	{ "base64 +/ offset 2",
	    "b64=eHlva//++++++/+/Pj4/PyE=.",
	    "b64=eHl[REDACTED]yE=." },
	{ "base64url -_ offset 0",
	    "b64=b2v__vvvvvv_vz4-Pz8h.",
	    "b64=[REDACTED]8h." },
	{ "base64url -_ offset 1",
	    "b64=eG9r__777777_78-Pj8_IQ==.",
	    "b64=eG[REDACTED]IQ==." },
	{ "base64url -_ offset 2",
	    "b64=eHlva__------_-_Pj4_PyE=.",
	    "b64=eHl[REDACTED]yE=." },
};
#define B64_SECRET_PATTERNS 16

/* Sixteen secrets: A is a prefix of B, C overlaps A's end, E overlaps D's end. */
static const char *const many_secrets[16] = {
	"abcdefgh", "abcdefghijkl", "efghXYZW", "0123456789", "6789zzzz",
	"tok05_U8JZpDE0iGXlD6gNCFba", "tok06_EPFjbD0kH8Oool8DklZD",
	"tok07_OCj2ISaJiHkTj0rLGlko", "tok08_MXGjtEkDnNfribxUdl7d",
	"tok09_XTPyLsxPFkThf4VucSmE", "tok10_HgaKwVJ7faC9qEwjky40",
	"tok11_UVsWmflzdE1F8ResqEDu", "tok12_sTpkr0cStY4qWB8dWKnH",
	"tok13_fDNxSIvPZZ63fFKcZjR4", "tok14_I0b3jRtaWr4Y9OJFLJOq",
	"tok15_OAf1lLQSAJaiXnkU8Is2",
};
#define MANY_PATTERNS	154
static const char many_in[] =
	    "1 abcdefgh 2 abcdefghijkl 3 abcdefghij 4 abcdefghXYZW 5 abcdXYZW"
	    " 6 0123456789zzzz 7 abcdefghabcdefgh 8 abcdefgh abcdefgh 9 abcde"
	    "fgh0123456789 10 tok05_U8JZpDE0iGXlD6gNCFbatok06_EPFjbD0kH8Oool8"
	    "DklZDtok07_OCj2ISaJiHkTj0rLGlkotok08_MXGjtEkDnNfribxUdl7dtok09_X"
	    "TPyLsxPFkThf4VucSmE 11 tok10_HgaKwVJ7faC9qEwjky40|tok11_UVsWmflz"
	    "dE1F8ResqEDu 12 746f6b31325f7354706b723063537459347157423864574b"
	    "6e48tok13_fDNxSIvPZZ63fFKcZjR4 13 UXRvazE0X0kwYjNqUnRhV3I0WTlPSk"
	    "ZMSk9xUQ== 14 tok15_OAf1lLQSAJaiXnkU8Is 15 abcdefg";
static const char many_out[] =
	    "1 [REDACTED] 2 [REDACTED] 3 [REDACTED]ij 4 [REDACTED] 5 abcdXYZW"
	    " 6 [REDACTED] 7 [REDACTED] 8 [REDACTED] [REDACTED] 9 [REDACTED] "
	    "10 [REDACTED] 11 [REDACTED]|[REDACTED] 12 [REDACTED] 13 UX[REDAC"
	    "TED]UQ== 14 tok15_OAf1lLQSAJaiXnkU8Is 15 abcdefg";

/* A secret full of NULs, in binary data: raw, hex and base64. */
static const unsigned char bin_secret[] = "\000\000\001\377se\000cret\000";
static const unsigned char bin_in[] =
	    "\000\000pre\000\000\000\001\377se\000cret\000\000mid\000000001ff"
	    "7365006372657400\000AAAB/3NlAGNyZXQA\000\377";
static const unsigned char bin_out[] =
	    "\000\000pre\000[REDACTED]\000mid\000[REDACTED]\000[REDACTED]\000"
	    "\377";

/* Collected output of a stream. */
struct buf {
	unsigned char	*p;
	size_t		 len;
	size_t		 cap;
	int		 fail;		/* sink returns -1 when set */
	int		 calls;
};

/* Sink that appends to a struct buf. */
static int
buf_sink(void *arg, const void *data, size_t len)
{
	struct buf *b = arg;

	b->calls++;
	assert_true(len > 0);
	if (b->fail)
		return -1;
	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
	return 0;
}

/* Check that a buffer holds exactly len bytes equal to exp. */
static void
buf_check(const struct buf *b, const void *exp, size_t len)
{
	assert_int_equal(b->len, len);
	if (len != 0)
		assert_memory_equal(b->p, exp, len);
}

/* A redactor for the given NUL-terminated secrets. */
static struct redact *
new_str(const char *const *secrets, size_t n)
{
	struct redact_secret s[16];
	struct redact *r;
	size_t i;

	assert_true(n <= 16);
	for (i = 0; i < n; i++) {
		s[i].value = (const unsigned char *)secrets[i];
		s[i].len = strlen(secrets[i]);
	}
	r = redact_new(s, n);
	assert_non_null(r);
	return r;
}

/* A redactor for one binary secret. */
static struct redact *
new_one(const unsigned char *value, size_t len)
{
	struct redact_secret s = { value, len };
	struct redact *r = redact_new(&s, 1);

	assert_non_null(r);
	return r;
}

/* Feed in pieces cut at the given offsets (ascending), flush, check the output. */
static void
check_cuts(struct redact *r, const unsigned char *in, size_t len, const size_t *cuts,
    size_t ncuts, const void *exp, size_t explen)
{
	struct buf b = { 0 };
	size_t i, at = 0;

	for (i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : len;

		assert_int_equal(redact_feed(r, in + at, end - at, buf_sink, &b), 0);
		at = end;
	}
	assert_int_equal(redact_flush(r, buf_sink, &b), 0);
	assert_int_equal(redact_held(r), 0);
	buf_check(&b, exp, explen);
	free(b.p);
}

/*
 * The output must be exp however the input is cut: whole, byte by byte, and at
 * every single split position.
 */
static void
check_all_splits(struct redact *r, const unsigned char *in, size_t len, const void *exp,
    size_t explen)
{
	struct buf b = { 0 };
	size_t i;

	check_cuts(r, in, len, NULL, 0, exp, explen);
	for (i = 0; i < len; i++)
		assert_int_equal(redact_feed(r, in + i, 1, buf_sink, &b), 0);
	assert_int_equal(redact_flush(r, buf_sink, &b), 0);
	buf_check(&b, exp, explen);
	free(b.p);
	for (i = 0; i <= len; i++)
		check_cuts(r, in, len, &i, 1, exp, explen);
}

/* Each encoding of a secret with awkward bytes is masked, whatever the split. */
static void
test_encodings(void **state)
{
	struct redact *r = new_one(enc_secret, sizeof enc_secret - 1);
	size_t i;

	(void)state;
	assert_int_equal(redact_patterns(r), ENC_SECRET_PATTERNS);
	for (i = 0; i < sizeof enc_cases / sizeof enc_cases[0]; i++) {
		const struct enc_case *c = &enc_cases[i];

		print_message("encoding: %s\n", c->name);
		check_all_splits(r, (const unsigned char *)c->in, strlen(c->in), c->out,
		    strlen(c->out));
	}
	redact_free(r);

	r = new_one(b64_secret, sizeof b64_secret - 1);
	assert_int_equal(redact_patterns(r), B64_SECRET_PATTERNS);
	for (i = 0; i < sizeof b64_cases / sizeof b64_cases[0]; i++) {
		const struct enc_case *c = &b64_cases[i];

		print_message("encoding: %s\n", c->name);
		check_all_splits(r, (const unsigned char *)c->in, strlen(c->in), c->out,
		    strlen(c->out));
	}
	redact_free(r);
}

/* All encodings one after another in one stream, cut at every position. */
static void
test_encodings_one_stream(void **state)
{
	struct redact *r = new_one(enc_secret, sizeof enc_secret - 1);
	unsigned char in[4096], out[4096];
	size_t i, il = 0, ol = 0, l;

	(void)state;
	for (i = 0; i < sizeof enc_cases / sizeof enc_cases[0]; i++) {
		l = strlen(enc_cases[i].in);
		assert_true(il + l + 1 < sizeof in);
		memcpy(in + il, enc_cases[i].in, l);
		il += l;
		in[il++] = '|';
		l = strlen(enc_cases[i].out);
		assert_true(ol + l + 1 < sizeof out);
		memcpy(out + ol, enc_cases[i].out, l);
		ol += l;
		out[ol++] = '|';
	}
	check_all_splits(r, in, il, out, ol);
	redact_free(r);
}

/* Sixteen secrets at once, overlapping and prefixes of each other. */
static void
test_many_secrets(void **state)
{
	struct redact *r = new_str(many_secrets, 16);

	(void)state;
	assert_int_equal(redact_patterns(r), MANY_PATTERNS);
	check_all_splits(r, LIT(many_in), many_out, sizeof many_out - 1);
	redact_free(r);
}

/* Adjacent and overlapping occurrences make one mask, also when they meet across feeds. */
static void
test_adjacent_one_mask(void **state)
{
	static const char *const secrets[] = { "abcdefgh", "abcdefghijkl", "QRSTUVWX" };
	struct redact *r = new_str(secrets, 3);
	struct buf b = { 0 };

	(void)state;
	check_all_splits(r, LIT("<abcdefghabcdefgh>"), LIT("<" MASK ">"));
	check_all_splits(r, LIT("<abcdefghQRSTUVWX>"), LIT("<" MASK ">"));
	check_all_splits(r, LIT("<abcdefgh6162636465666768>"), LIT("<" MASK ">"));
	check_all_splits(r, LIT("<abcdefgh-abcdefgh>"), LIT("<" MASK "-" MASK ">"));

	/* The mask goes out as soon as the run starts; its continuation in a later
	 * feed is absorbed, not masked again. */
	redact_set_hold(r, REDACT_HOLD_MINIMAL);
	assert_int_equal(redact_feed(r, "xxabcdefgh", 10, buf_sink, &b), 0);
	buf_check(&b, LIT("xx" MASK));
	assert_int_equal(redact_held(r), 0);
	assert_int_equal(redact_feed(r, "ijkl", 4, buf_sink, &b), 0);
	buf_check(&b, LIT("xx" MASK));
	assert_int_equal(redact_feed(r, "QRSTUVWX!", 9, buf_sink, &b), 0);
	buf_check(&b, LIT("xx" MASK "!"));
	assert_int_equal(redact_flush(r, buf_sink, &b), 0);
	buf_check(&b, LIT("xx" MASK "!"));
	free(b.p);
	redact_free(r);
}

/* A freed stream is wiped and reused by the next one, which starts from nothing. */
static void
test_stream_reuse(void **state)
{
	static const char *const secrets[] = { "abcdefghij" };
	struct redact *r = new_str(secrets, 1), *s, *t;
	struct buf b = { 0 };
	int i;

	(void)state;
	for (i = 0; i < 8; i++) {
		s = redact_new_stream(r);
		assert_non_null(s);
		/* Leave a held prefix of the secret in the stream, then free it. */
		assert_int_equal(redact_feed(s, "xxabcdefg", 9, buf_sink, &b), 0);
		assert_true(redact_held(s) > 0);
		redact_free(s);
		t = redact_new_stream(r);
		assert_non_null(t);
		assert_int_equal(redact_held(t), 0);
		b.len = 0;
		assert_int_equal(redact_feed(t, "hij", 3, buf_sink, &b), 0);
		assert_int_equal(redact_flush(t, buf_sink, &b), 0);
		buf_check(&b, LIT("hij"));
		b.len = 0;
		assert_int_equal(redact_feed(t, "<abcdefghij>", 12, buf_sink, &b), 0);
		assert_int_equal(redact_flush(t, buf_sink, &b), 0);
		buf_check(&b, LIT("<" MASK ">"));
		b.len = 0;
		redact_free(t);
	}
	/* Streams outliving the first object keep the automaton (and its spares) alive. */
	s = redact_new_stream(r);
	redact_free(r);
	assert_int_equal(redact_feed(s, "abcdefghij", 10, buf_sink, &b), 0);
	assert_int_equal(redact_flush(s, buf_sink, &b), 0);
	buf_check(&b, LIT(MASK));
	free(b.p);
	redact_free(s);
}

/* Minimal hold: only a possible start of a match is held; flush releases exactly that. */
static void
test_hold_minimal(void **state)
{
	static const char *const secrets[] = { "abcdefghij", "cdef" };
	struct redact *r = new_str(secrets, 2);
	struct buf b = { 0 };

	(void)state;
	redact_set_hold(r, REDACT_HOLD_MINIMAL);
	/* Nothing that could start a pattern: everything goes out at once. */
	assert_int_equal(redact_feed(r, "hello world", 11, buf_sink, &b), 0);
	buf_check(&b, LIT("hello world"));
	assert_int_equal(redact_held(r), 0);

	/* A prefix at the end is held, and only it. */
	assert_int_equal(redact_feed(r, " zzabcdefg", 10, buf_sink, &b), 0);
	buf_check(&b, LIT("hello world zz"));
	assert_int_equal(redact_held(r), 7);
	b.len = 0;
	assert_int_equal(redact_flush(r, buf_sink, &b), 0);
	assert_int_equal(redact_held(r), 0);
	/* "cdef" inside the held bytes was found and is masked at flush. */
	buf_check(&b, LIT("ab" MASK "g"));

	/* Held bytes that turn out to be nothing come out raw and unchanged. */
	b.len = 0;
	assert_int_equal(redact_feed(r, "abc", 3, buf_sink, &b), 0);
	assert_int_equal(redact_held(r), 3);
	buf_check(&b, "", 0);
	assert_int_equal(redact_feed(r, "X", 1, buf_sink, &b), 0);
	assert_int_equal(redact_held(r), 0);
	buf_check(&b, LIT("abcX"));
	b.len = 0;
	assert_int_equal(redact_flush(r, buf_sink, &b), 0);
	buf_check(&b, "", 0);

	/* Flush ends the stream: a match cannot span it. */
	b.len = 0;
	assert_int_equal(redact_feed(r, "abcd", 4, buf_sink, &b), 0);
	assert_int_equal(redact_flush(r, buf_sink, &b), 0);
	assert_int_equal(redact_feed(r, "efghij", 6, buf_sink, &b), 0);
	assert_int_equal(redact_flush(r, buf_sink, &b), 0);
	buf_check(&b, LIT("abcdefghij"));

	/* Flush on an empty stream writes nothing; so does an empty feed. */
	b.calls = 0;
	assert_int_equal(redact_feed(r, "", 0, buf_sink, &b), 0);
	assert_int_equal(redact_flush(r, buf_sink, &b), 0);
	assert_int_equal(b.calls, 0);
	free(b.p);
	redact_free(r);
}

/* Feed s to a fresh stream of r's automaton with policy how; return what it holds. */
static size_t
held_after(const struct redact *r, enum redact_hold how, const char *s, struct buf *b)
{
	struct redact *st = redact_new_stream(r);
	size_t held;

	assert_non_null(st);
	redact_set_hold(st, how);
	b->len = 0;
	assert_int_equal(redact_feed(st, s, strlen(s), buf_sink, b), 0);
	held = redact_held(st);
	assert_int_equal(b->len + held, strlen(s));	/* no mask in these inputs */
	redact_free(st);
	return held;
}

/*
 * Safe hold (the default): how much is held must not tell whether the end of the
 * output is a prefix of a secret's pattern. The minimal hold does tell: that is
 * the oracle the safe hold closes.
 */
static void
test_hold_safe(void **state)
{
	static const char *const secrets[] = { "abcdefgh" };
	static const char *const spaced[] = { "pass word" };
	static const char *const guesses[] = {
		"pre abcd",	/* prefix of the secret */
		"pre abce",	/* not */
		"pre qrst",	/* not */
		"pre 6162",	/* prefix of its hex */
		"pre YWJj",	/* prefix of its base64 */
	};
	static const size_t minimal[] = { 4, 0, 0, 4, 4 };
	struct redact *r = new_str(secrets, 1);
	struct buf b = { 0 };
	char run[200];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof guesses / sizeof guesses[0]; i++) {
		assert_int_equal(held_after(r, REDACT_HOLD_SAFE, guesses[i], &b), 4);
		assert_int_equal(held_after(r, REDACT_HOLD_MINIMAL, guesses[i], &b), minimal[i]);
	}
	assert_int_equal(held_after(r, REDACT_HOLD_SAFE, "pre abcd-", &b), 5);

	/* Prompts and lines end in bytes no pattern uses: nothing is held. */
	assert_int_equal(held_after(r, REDACT_HOLD_SAFE, "Password: ", &b), 0);
	assert_int_equal(held_after(r, REDACT_HOLD_SAFE, "Continue? [y/N] ", &b), 0);
	assert_int_equal(held_after(r, REDACT_HOLD_SAFE, "done: \n", &b), 0);
	/* A line break may split a secret: a long holdable tail waits for the next line, */
	assert_int_equal(held_after(r, REDACT_HOLD_SAFE, "done zyxwvuts\n", &b), 9);
	assert_int_equal(held_after(r, REDACT_HOLD_SAFE, "done qrstuvwx\r\n", &b), 10);
	assert_int_equal(held_after(r, REDACT_HOLD_SAFE, "done qrstuvwx\033[0m\n", &b), 13);
	/* a short one (a tool saying "ready" and waiting) goes out at once. */
	assert_int_equal(held_after(r, REDACT_HOLD_SAFE, "done abcd\n", &b), 0);
	assert_int_equal(held_after(r, REDACT_HOLD_SAFE, "ready\r\n", &b), 0);
	assert_int_equal(held_after(r, REDACT_HOLD_MINIMAL, "done qrst\r\n", &b), 0);
	assert_int_equal(held_after(r, REDACT_HOLD_MINIMAL, "done abc\r\n", &b), 5);

	/* A long run is held only up to the longest pattern (16) rounded up, less one. */
	memset(run, 'x', sizeof run - 1);
	run[sizeof run - 1] = '\0';
	assert_int_equal(held_after(r, REDACT_HOLD_SAFE, run, &b), REDACT_HOLD_ROUND - 1);
	assert_int_equal(held_after(r, REDACT_HOLD_MINIMAL, run, &b), 0);

	/* A run across feeds counts as one; the policy can change between feeds. */
	b.len = 0;
	assert_int_equal(redact_feed(r, "xxabcdefgh", 10, buf_sink, &b), 0);
	assert_int_equal(redact_held(r), 10);
	assert_int_equal(redact_feed(r, "ijk", 3, buf_sink, &b), 0);
	assert_int_equal(redact_held(r), 13);
	assert_int_equal(redact_feed(r, " yy", 3, buf_sink, &b), 0);
	buf_check(&b, LIT("xx" MASK "ijk "));
	assert_int_equal(redact_held(r), 2);
	redact_set_hold(r, REDACT_HOLD_MINIMAL);
	assert_int_equal(redact_feed(r, "z", 1, buf_sink, &b), 0);
	buf_check(&b, LIT("xx" MASK "ijk yyz"));
	redact_set_hold(r, REDACT_HOLD_SAFE);
	assert_int_equal(redact_feed(r, "zz", 2, buf_sink, &b), 0);
	assert_int_equal(redact_held(r), 2);
	assert_int_equal(redact_flush(r, buf_sink, &b), 0);
	buf_check(&b, LIT("xx" MASK "ijk yyzzz"));
	redact_free(r);

	/* An unusual byte in a secret joins the holdable set (and so is revealed). */
	r = new_str(spaced, 1);
	assert_int_equal(held_after(r, REDACT_HOLD_SAFE, "Password: ", &b), 1);
	redact_free(r);
	free(b.p);
}

/* Covered runs found behind an unsettled byte merge before they are written. */
static void
test_pending_runs_merge(void **state)
{
	static const char *const secrets[] = { "abcdefghijk", "cdef", "efgh", "ghij" };
	struct redact *r = new_str(secrets, 4);
	struct buf b = { 0 };

	(void)state;
	/* "a" stays open while "cdef", "efgh" and "ghij" are found: nothing can be
	 * written until the long pattern fails or completes. */
	redact_set_hold(r, REDACT_HOLD_MINIMAL);
	assert_int_equal(redact_feed(r, "zzabcdefghij", 12, buf_sink, &b), 0);
	buf_check(&b, LIT("zz"));
	assert_int_equal(redact_held(r), 10);
	assert_int_equal(redact_feed(r, "!", 1, buf_sink, &b), 0);
	buf_check(&b, LIT("zzab" MASK "!"));
	assert_int_equal(redact_held(r), 0);
	assert_int_equal(redact_flush(r, buf_sink, &b), 0);
	free(b.p);

	check_all_splits(r, LIT("zzabcdefghij!"), LIT("zzab" MASK "!"));
	check_all_splits(r, LIT("zzabcdefghijk!"), LIT("zz" MASK "!"));
	check_all_splits(r, LIT("abcdefXghij"), LIT("ab" MASK "X" MASK));
	check_all_splits(r, LIT("abcdefgh"), LIT("ab" MASK));
	redact_free(r);
}

/* No secrets: every byte passes at once, unchanged. */
static void
test_pass_through(void **state)
{
	struct redact *r = redact_new(NULL, 0);
	struct buf b = { 0 };
	unsigned char in[512];
	size_t i;

	(void)state;
	assert_non_null(r);
	assert_int_equal(redact_patterns(r), 0);
	for (i = 0; i < sizeof in; i++)
		in[i] = (unsigned char)(i * 7);
	for (i = 0; i < sizeof in; i++) {
		assert_int_equal(redact_feed(r, in + i, 1, buf_sink, &b), 0);
		assert_int_equal(redact_held(r), 0);
		buf_check(&b, in, i + 1);
	}
	assert_int_equal(redact_flush(r, buf_sink, &b), 0);
	buf_check(&b, in, sizeof in);
	free(b.p);
	check_all_splits(r, in, sizeof in, in, sizeof in);
	redact_free(r);
}

/* Secrets under REDACT_MIN_LEN are ignored; at REDACT_MIN_LEN they are masked. */
static void
test_short_secrets(void **state)
{
	static const char *const shorts[] = { "", "x", "ab", "abc" };
	static const char *const four[] = { "abc", "wxyz" };
	struct redact *r = new_str(shorts, 4);

	(void)state;
	assert_int_equal(redact_patterns(r), 0);
	check_all_splits(r, LIT("x ab abc abcd"), LIT("x ab abc abcd"));
	redact_free(r);

	r = new_str(four, 2);
	check_all_splits(r, LIT("abc wxyz 7778797a"), LIT("abc " MASK " " MASK));
	redact_free(r);
}

/* Binary data with NULs, and a secret made partly of NULs. */
static void
test_binary(void **state)
{
	struct redact *r = new_one(bin_secret, sizeof bin_secret - 1);

	(void)state;
	check_all_splits(r, bin_in, sizeof bin_in - 1, bin_out, sizeof bin_out - 1);
	redact_free(r);
}

/* A secret using all 256 byte values: no byte class is left for "other" bytes. */
static void
test_all_bytes(void **state)
{
	unsigned char sec[256], in[2 + 256 + 256 + 1], out[2 + MASKLEN + 256 + 1];
	struct redact *r;
	size_t i, il = 0, ol = 0;

	(void)state;
	for (i = 0; i < 256; i++)
		sec[i] = (unsigned char)i;
	r = new_one(sec, sizeof sec);
	in[il++] = '<';
	memcpy(in + il, sec, sizeof sec);
	il += sizeof sec;
	/* The same bytes backwards match nothing and pass unchanged. */
	for (i = 0; i < 256; i++)
		in[il++] = (unsigned char)(255 - i);
	in[il++] = '>';
	out[ol++] = '<';
	memcpy(out + ol, MASK, MASKLEN);
	ol += MASKLEN;
	for (i = 0; i < 256; i++)
		out[ol++] = (unsigned char)(255 - i);
	out[ol++] = '>';
	check_all_splits(r, in, il, out, ol);
	redact_free(r);
}

/* Identical patterns, within a secret or across secrets, are kept once. */
static void
test_dedup(void **state)
{
	static const char *const one[] = { "abcd1234" };
	static const char *const twice[] = { "abcd1234", "abcd1234" };
	static const char *const cross[] = { "abcd", "61626364" };
	struct redact *r;

	(void)state;
	/* raw = url = form = json; base64 standard = URL-safe; hex lower = upper; plus
	 * every byte %XX and every character \uXXXX, in two cases each. */
	r = new_str(one, 1);
	assert_int_equal(redact_patterns(r), 7);
	redact_free(r);
	r = new_str(twice, 2);
	assert_int_equal(redact_patterns(r), 7);
	redact_free(r);
	/* The hex of "abcd" is the second secret itself. */
	r = new_str(cross, 2);
	assert_int_equal(redact_patterns(r), 13);
	check_all_splits(r, LIT("abcd 61626364"), LIT(MASK " " MASK));
	redact_free(r);
}

/* Whole-string redaction, and that it leaves a stream in progress alone. */
static void
test_string(void **state)
{
	static const char *const secrets[] = { "abcdefgh" };
	struct redact *r = new_str(secrets, 1);
	struct buf b = { 0 };
	char *s;

	(void)state;
	s = redact_string(NULL, "abcdefgh");
	assert_string_equal(s, "abcdefgh");
	free(s);
	s = redact_string(r, "");
	assert_string_equal(s, "");
	free(s);
	s = redact_string(r, "error: token abcdefgh (hex 6162636465666768) rejected; abcdefg");
	assert_string_equal(s, "error: token " MASK " (hex " MASK ") rejected; abcdefg");
	free(s);

	redact_set_hold(r, REDACT_HOLD_MINIMAL);
	assert_int_equal(redact_feed(r, "xxabcd", 6, buf_sink, &b), 0);
	assert_int_equal(redact_held(r), 4);
	s = redact_string(r, "efgh abcdefgh");
	assert_string_equal(s, "efgh " MASK);
	free(s);
	assert_int_equal(redact_held(r), 4);
	assert_int_equal(redact_feed(r, "efgh.", 5, buf_sink, &b), 0);
	assert_int_equal(redact_flush(r, buf_sink, &b), 0);
	buf_check(&b, LIT("xx" MASK "."));
	free(b.p);

	errno = 0;
	assert_null(redact_string(r, NULL));
	assert_int_equal(errno, EINVAL);
	redact_free(r);
}

/* Two streams on one automaton keep separate state, and either may be freed first. */
static void
test_streams(void **state)
{
	static const char *const secrets[] = { "abcdefgh" };
	struct redact *out = new_str(secrets, 1), *err;
	struct buf bo = { 0 }, be = { 0 };

	(void)state;
	err = redact_new_stream(out);
	assert_non_null(err);
	assert_int_equal(redact_patterns(err), redact_patterns(out));
	assert_int_equal(redact_feed(out, "1 abc", 5, buf_sink, &bo), 0);
	assert_int_equal(redact_feed(err, "2 abcde", 7, buf_sink, &be), 0);
	assert_int_equal(redact_feed(out, "defgh 1", 7, buf_sink, &bo), 0);
	assert_int_equal(redact_feed(err, "fgh 2", 5, buf_sink, &be), 0);
	assert_int_equal(redact_flush(out, buf_sink, &bo), 0);
	redact_free(out);
	assert_int_equal(redact_feed(err, " abcdefgh", 9, buf_sink, &be), 0);
	assert_int_equal(redact_flush(err, buf_sink, &be), 0);
	buf_check(&bo, LIT("1 " MASK " 1"));
	buf_check(&be, LIT("2 " MASK " 2 " MASK));
	redact_free(err);
	redact_free(NULL);
	free(bo.p);
	free(be.p);
}

/* A failing sink kills the stream: -1 now and on every later call. */
static void
test_sink_failure(void **state)
{
	static const char *const secrets[] = { "abcdefgh" };
	struct redact *r = new_str(secrets, 1);
	struct buf b = { 0 };

	(void)state;
	b.fail = 1;
	assert_int_equal(redact_feed(r, "abc", 3, buf_sink, &b), 0);	/* all held */
	assert_int_equal(redact_feed(r, "defgh", 5, buf_sink, &b), -1);
	b.fail = 0;
	errno = 0;
	assert_int_equal(redact_feed(r, "x", 1, buf_sink, &b), -1);
	assert_int_equal(errno, EIO);
	assert_int_equal(redact_flush(r, buf_sink, &b), -1);
	assert_int_equal(b.len, 0);
	redact_free(r);
}

/* Bad arguments and oversized secret sets are refused with errno set. */
static void
test_refusals(void **state)
{
	struct redact_secret s = { NULL, 8 };
	unsigned char *big;
	size_t len = 4 << 20, i;

	(void)state;
	errno = 0;
	assert_null(redact_new(&s, 1));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(redact_new(NULL, 1));
	assert_int_equal(errno, EINVAL);

	big = malloc(len);
	assert_non_null(big);
	for (i = 0; i < len; i++)
		big[i] = (unsigned char)(i * 131 + (i >> 8));
	s.value = big;
	s.len = len;
	errno = 0;
	assert_null(redact_new(&s, 1));
	assert_int_equal(errno, E2BIG);
	free(big);
}

/* Test runner. */
/*
 * Non-ASCII secrets in ASCII-only JSON (jansson JSON_ENSURE_ASCII, Python json.dumps),
 * and with every character escaped.
 */
static void
test_json_ascii(void **state)
{
	/* "tok-Ä€😀-end": 2-, 3- and 4-byte UTF-8. */
	static const unsigned char sec[] = "tok-\xc3\x84\xe2\x82\xac\xf0\x9f\x98\x80-end";
	struct redact_secret rs = { sec, sizeof sec - 1 };
	struct redact *r = redact_new(&rs, 1);
	char *out;

	(void)state;
	assert_non_null(r);
	out = redact_string(r, "{\"t\": \"tok-\\u00c4\\u20ac\\ud83d\\ude00-end\"}");
	assert_string_equal(out, "{\"t\": \"" REDACT_MASK "\"}");
	free(out);
	out = redact_string(r, "a tok-\\u00C4\\u20AC\\uD83D\\uDE00-end b");
	assert_string_equal(out, "a " REDACT_MASK " b");
	free(out);
	/* Every character escaped, ASCII ones too (surrogate pair for the emoji). */
	out = redact_string(r, "[\\u0074\\u006f\\u006b\\u002d\\u00c4\\u20ac\\ud83d\\ude00"
	    "\\u002d\\u0065\\u006e\\u0064]");
	assert_string_equal(out, "[" REDACT_MASK "]");
	free(out);
	out = redact_string(r, "[\\u0074\\u006F\\u006B\\u002D\\u00C4\\u20AC\\uD83D\\uDE00"
	    "\\u002D\\u0065\\u006E\\u0064]");
	assert_string_equal(out, "[" REDACT_MASK "]");
	free(out);
	/* A near miss (another code point) passes untouched. */
	out = redact_string(r, "tok-\\u00c5\\u20ac\\ud83d\\ude00-end");
	assert_string_equal(out, "tok-\\u00c5\\u20ac\\ud83d\\ude00-end");
	free(out);
	redact_free(r);
}

/* Several secrets for the forms below: a classic token, a fine-grained one, a key. */
static const char *const form_secrets[] = {
	"ghp_R8vXo2mQ41tLzK9wYbN3cUe7HdJ5fAs0PiGq",
	"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDE",
	"AKIAIOSFODNN7EXAMPLE",
};
#define NFORM	(sizeof form_secrets / sizeof form_secrets[0])

/* Check in -> exp with every split, for a redactor of all form secrets. */
static void
check_form(const char *in, size_t inlen, const void *exp, size_t explen)
{
	struct redact *r = new_str(form_secrets, NFORM);

	check_all_splits(r, (const unsigned char *)in, inlen, exp, explen);
	redact_set_hold(r, REDACT_HOLD_MINIMAL);
	check_all_splits(r, (const unsigned char *)in, inlen, exp, explen);
	redact_free(r);
}

/* s with sep inserted after every character; in is sized by the caller. */
static size_t
interleave(char *out, const char *s, size_t n, const char *sep)
{
	size_t i, o = 0, sl = strlen(sep);

	for (i = 0; i < n; i++) {
		out[o++] = s[i];
		if (i + 1 < n) {
			memcpy(out + o, sep, sl);
			o += sl;
		}
	}
	out[o] = '\0';
	return o;
}

/* Lower-case hex of s. */
static size_t
hexof(char *out, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", (unsigned char)s[i]);
	return 2 * n;
}

/* Standard base64 of s[0..n), padded. */
static size_t
b64of(char *out, const unsigned char *s, size_t n)
{
	static const char abc[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i, o = 0;

	for (i = 0; i < n; i += 3) {
		unsigned int v = (unsigned int)s[i] << 16;

		if (i + 1 < n)
			v |= (unsigned int)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		out[o++] = abc[v >> 18 & 63];
		out[o++] = abc[v >> 12 & 63];
		out[o++] = i + 1 < n ? abc[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? abc[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

/*
 * Escape sequences between the characters of a secret (SGR, other CSI, OSC with BEL
 * or ST, two- and three-byte ESC sequences), in its raw, hex, base64 and
 * every-byte-%XX forms: the whole span is masked, junk inside included.
 */
static void
test_escapes_between(void **state)
{
	static const char *const seps[] = {
		"\033[31m", "\033[0m\033[1;32m", "\033[38;5;208m", "\033[?25l", "\033[2K",
		"\033]0;title\007", "\033]8;;\033\\", "\0337", "\033(B", "\r\n", "\033[0m\n",
	};
	char enc[512], body[8192], in[9000], exp[9000];
	size_t i, k, n, el, il, xl, bl, last;

	(void)state;
	for (k = 0; k < NFORM; k++) {
		for (i = 0; i < sizeof seps / sizeof seps[0]; i++) {
			int form = (int)((k + i) % 4);
			const char *s = form_secrets[k];

			n = strlen(s);
			if (form == 0)
				el = (size_t)snprintf(enc, sizeof enc, "%s", s);
			else if (form == 1)
				el = hexof(enc, s, n);
			else if (form == 2)
				el = b64of(enc, (const unsigned char *)s, n);
			else {
				for (el = 0; el < n; el++)
					snprintf(enc + 3 * el, 4, "%%%02X", (unsigned char)s[el]);
				el = 3 * n;
			}
			bl = interleave(body, enc, el, seps[i]);
			il = (size_t)snprintf(in, sizeof in, "out: %s\033[0m end", body);
			/* Base64: the characters after the last one all from the secret stay. */
			last = form == 2 ? (8 * n / 6 - 1) * (1 + strlen(seps[i])) + 1 : bl;
			xl = (size_t)snprintf(exp, sizeof exp, "out: %s%s\033[0m end", MASK,
			    body + last);
			if (strpbrk(seps[i], "\r\n") == NULL) {
				check_form(in, il, exp, xl);
				continue;
			}
			/* Line breaks: split anywhere once the run is long enough to wait. */
			{
				struct redact *r = new_str(form_secrets, NFORM);
				size_t cut, from = 5 + REDACT_WRAP_MIN * (1 + strlen(seps[i]));

				check_cuts(r, (const unsigned char *)in, il, NULL, 0, exp, xl);
				for (cut = from; cut <= il; cut += 3)
					check_cuts(r, (const unsigned char *)in, il, &cut, 1, exp, xl);
				redact_free(r);
			}
		}
	}

	/* More junk between two characters than a terminal would put there: not a view. */
	il = (size_t)snprintf(in, sizeof in, "ghp_R8vX%so2mQ41tLzK9wYbN3cUe7HdJ5fAs0PiGq!",
	    "\033[31m\033[32m\033[33m\033[34m\033[35m\033[36m\033[37m");
	check_form(in, il, in, il);
	/*
	 * The price of not holding short line tails: a secret split right after a
	 * line break, with the break ending a feed, shows its first few bytes; the
	 * rest is masked.
	 */
	{
		struct redact *r2 = new_str(form_secrets, NFORM);
		size_t cut = 10;

		check_cuts(r2, LIT("key: AKIA\nIOSFODNN7EXAMPLE."), &cut, 1,
		    LIT("key: AKIA\n" MASK "."));
		cut = 14;
		check_cuts(r2, LIT("key: AKIAIOSF\nODNN7EXAMPLE."), &cut, 1,
		    LIT("key: " MASK "."));
		redact_free(r2);
	}
	/* A match in a view goes on from a mask already written before the junk. */
	{
		static const char *const two[] = { "abcdefgh", "efghijkl" };
		struct redact *r2 = new_str(two, 2);

		check_all_splits(r2, LIT("abcdefgh\033[0mijkl."), LIT(MASK "."));
		check_all_splits(r2, LIT("xabcdefgh\r\nijkl\n"), LIT("x" MASK "\n"));
		redact_free(r2);
	}
	/* An ESC before a control byte is junk on its own; the control byte is not. */
	il = (size_t)snprintf(in, sizeof in, "AKIAIOSF\033\nODNN7EXAMPLE.");
	check_form(in, il, LIT(MASK "."));
	il = (size_t)snprintf(in, sizeof in, "AKIAIOSF\033\001ODNN7EXAMPLE.");
	check_form(in, il, in, il);
}

/*
 * Base64 of a secret, wrapped at any width with LF or CRLF, at each of the three
 * alignments: every character whose bits all come from the secret is masked, the
 * line breaks between them too.
 */
static void
test_wrapped_base64(void **state)
{
	static const size_t widths[] = { 76, 64, 60, 17, 4, 1 };
	static const char *const eols[] = { "\n", "\r\n" };
	unsigned char raw[128];
	char enc[256], in[1024], exp[1024];
	size_t k, w, e, a, n, el, il, xl, j, lo, hi, off[256 + 1], o, eol;

	(void)state;
	for (k = 0; k < NFORM; k++) {
		n = strlen(form_secrets[k]);
		for (a = 0; a < 3; a++) {
			memcpy(raw, "\377\376", a);
			memcpy(raw + a, form_secrets[k], n);
			memcpy(raw + a + n, "\375\374", 2);
			el = b64of(enc, raw, a + n + 2);
			lo = (8 * a + 5) / 6;
			hi = 8 * (a + n) / 6;
			for (w = 0; w < sizeof widths / sizeof widths[0]; w++) {
				for (e = 0; e < 2; e++) {
					eol = strlen(eols[e]);
					il = (size_t)snprintf(in, sizeof in, "-----BEGIN-----%s", eols[e]);
					for (j = 0; j < el; j++) {
						off[j] = il;
						in[il++] = enc[j];
						if ((j + 1) % widths[w] == 0 || j + 1 == el) {
							memcpy(in + il, eols[e], eol);
							il += eol;
						}
					}
					o = (size_t)snprintf(in + il, sizeof in - il, "-----END-----");
					il += o;
					memcpy(exp, in, off[lo]);
					xl = off[lo];
					memcpy(exp + xl, MASK, MASKLEN);
					xl += MASKLEN;
					memcpy(exp + xl, in + off[hi - 1] + 1, il - off[hi - 1] - 1);
					xl += il - off[hi - 1] - 1;
					if (widths[w] >= 60 || k == 0)
						check_form(in, il, exp, xl);
					else {
						/* Narrow widths: whole and byte by byte only (fast). */
						struct redact *r = new_str(form_secrets, NFORM);
						size_t cut = il / 2;

						check_cuts(r, (const unsigned char *)in, il, NULL, 0, exp, xl);
						check_cuts(r, (const unsigned char *)in, il, &cut, 1, exp, xl);
						redact_free(r);
					}
				}
			}
		}
	}
}

/*
 * A secret with some bytes %XX (upper or lower hex, each on its own) and the rest
 * literal, alone and with escape sequences in between.
 */
static void
test_partly_url_encoded(void **state)
{
	char in[1024], exp[256];
	size_t k, pat, i, n, il, xl;
	uint32_t x = 12345;

	(void)state;
	for (k = 0; k < NFORM; k++) {
		n = strlen(form_secrets[k]);
		for (pat = 0; pat < 6; pat++) {
			il = (size_t)snprintf(in, sizeof in, "GET /x?token=");
			for (i = 0; i < n; i++) {
				unsigned char c = (unsigned char)form_secrets[k][i];
				int enc;

				x = x * 1103515245u + 12345u;
				enc = pat == 0 ? i % 2 == 0 : pat == 1 ? i != 0 :
				    pat == 2 ? i + 1 != n : pat == 3 ? i == n / 2 :
				    (int)(x >> 16) % 3 != 0;
				if (!enc)
					in[il++] = (char)c;
				else if (pat == 5 && i % 3 == 0)
					il += (size_t)snprintf(in + il, sizeof in - il,
					    "%%%02X\033[0m", c);
				else
					il += (size_t)snprintf(in + il, sizeof in - il,
					    (x >> 20) & 1 ? "%%%02X" : "%%%02x", c);
			}
			il += (size_t)snprintf(in + il, sizeof in - il, "&page=2 HTTP/1.1");
			xl = (size_t)snprintf(exp, sizeof exp, "GET /x?token=%s&page=2 HTTP/1.1", MASK);
			check_form(in, il, exp, xl);
		}
	}
	/* Escapes between a %-encoded byte and literal ones. */
	il = (size_t)snprintf(in, sizeof in,
	    "[%%41\033[1mKIA\033[0mIOS%%46%%4f\033[31mDNN7EXAMPL%%45]");
	check_form(in, il, LIT("[" MASK "]"));
	/* '%' followed by the hex of a secret is still the hex form. */
	il = (size_t)snprintf(in, sizeof in, "%%");
	il += hexof(in + il, form_secrets[2], strlen(form_secrets[2]));
	check_form(in, il, LIT("%" MASK));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encodings),
		cmocka_unit_test(test_encodings_one_stream),
		cmocka_unit_test(test_many_secrets),
		cmocka_unit_test(test_adjacent_one_mask),
		cmocka_unit_test(test_hold_minimal),
		cmocka_unit_test(test_hold_safe),
		cmocka_unit_test(test_pending_runs_merge),
		cmocka_unit_test(test_pass_through),
		cmocka_unit_test(test_short_secrets),
		cmocka_unit_test(test_binary),
		cmocka_unit_test(test_all_bytes),
		cmocka_unit_test(test_dedup),
		cmocka_unit_test(test_string),
		cmocka_unit_test(test_streams),
		cmocka_unit_test(test_sink_failure),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_json_ascii),
		cmocka_unit_test(test_escapes_between),
		cmocka_unit_test(test_wrapped_base64),
		cmocka_unit_test(test_partly_url_encoded),
		cmocka_unit_test(test_stream_reuse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
