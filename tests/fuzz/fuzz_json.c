/*
 * libFuzzer target for the shim's JSON reader and writer (common/jsonw.c), with
 * jansson (what the bridge uses) as the reference.
 *
 * Reader, on the input as a document:
 *   A. when jansson parses it as an object (duplicates refused, nesting within the
 *      reader's 32 levels) whose "code" is a string without NUL, jr_get_str must
 *      return 1 with the same bytes; an integer "code" must come back from
 *      jr_get_int; and jr must never call a document jansson accepts malformed.
 *   B. when jr_get_str finds the document well-formed (returns 0 or 1), jansson
 *      must accept it too, except for the reader's known, harmless leniencies,
 *      which are detected here and skipped (see fuzz_lenient): number tokens
 *      outside JSON's grammar, invalid UTF-8, lone surrogate escapes, and numbers
 *      jansson cannot represent. A skips inputs with a raw NUL byte: jansson 2.14
 *      swallows one right after a number or literal ("[1\0]" loads as [1]).
 *   C. surrogate pairs (\ud83d\ude00) are decoded by jansson into one code point
 *      and by jr into two U+FFFD: the byte comparison in A skips strings with
 *      4-byte UTF-8 sequences (reported; only messages from the bridge go through
 *      this reader, and jansson does not write such escapes by default).
 * Writer, with the input as a string value:
 *   D. jw_* output parses in jansson (JSON_ALLOW_NUL) to the same bytes whenever
 *      they are valid UTF-8, and always back through jr_get_str when without NUL.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jsonw.h"

#define JR_DEPTH	32

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Length of a valid UTF-8 sequence at s (RFC 3629, as jansson checks), or 0. */
static size_t
fuzz_utf8_seq(const unsigned char *s, size_t n)
{
	size_t len, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		cp = s[0] & 0x07;
	} else
		return 0;
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* Whether buf is valid UTF-8. */
static int
fuzz_utf8_ok(const unsigned char *s, size_t n)
{
	size_t i = 0, k;

	while (i < n) {
		if ((k = fuzz_utf8_seq(s + i, n - i)) == 0)
			return 0;
		i += k;
	}
	return 1;
}

/* Whether the bytes contain a 4-byte UTF-8 sequence (a code point past U+FFFF). */
static int
fuzz_has_astral(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if ((unsigned char)s[i] >= 0xf0)
			return 1;
	}
	return 0;
}

/* Strict JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int
fuzz_number_ok(const char *s, size_t n)
{
	size_t i = 0, d;

	if (i < n && s[i] == '-')
		i++;
	if (i < n && s[i] == '0')
		i++;
	else if (i < n && s[i] >= '1' && s[i] <= '9') {
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	} else
		return 0;
	if (i < n && s[i] == '.') {
		for (i++, d = 0; i < n && s[i] >= '0' && s[i] <= '9'; i++, d++)
			;
		if (d == 0)
			return 0;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		for (d = 0; i < n && s[i] >= '0' && s[i] <= '9'; i++, d++)
			;
		if (d == 0)
			return 0;
	}
	return i == n;
}

/* Hex value of 4 digits at s, or -1. */
static long
fuzz_hex4(const char *s, size_t n)
{
	long v = 0;
	size_t i;

	if (n < 4)
		return -1;
	for (i = 0; i < 4; i++) {
		char c = s[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/*
 * Whether the document uses one of jr's known leniencies: a number token (as jr
 * scans it) outside the JSON grammar, invalid UTF-8, or a lone surrogate escape.
 */
static int
fuzz_lenient(const char *s, size_t n)
{
	size_t i = 0, start;
	long cp, lo;

	if (!fuzz_utf8_ok((const unsigned char *)s, n))
		return 1;
	while (i < n) {
		if (s[i] == '"') {
			for (i++; i < n && s[i] != '"'; i++) {
				if (s[i] != '\\')
					continue;
				if (++i >= n)
					return 0;
				if (s[i] != 'u')
					continue;
				if ((cp = fuzz_hex4(s + i + 1, n - i - 1)) < 0)
					return 0;
				i += 4;
				if (cp >= 0xdc00 && cp <= 0xdfff)
					return 1;
				if (cp >= 0xd800 && cp <= 0xdbff) {
					if (i + 2 >= n || s[i + 1] != '\\' || s[i + 2] != 'u' ||
					    (lo = fuzz_hex4(s + i + 3, n - i - 3)) < 0xdc00 ||
					    lo > 0xdfff)
						return 1;
					i += 6;
				}
			}
			i++;
			continue;
		}
		if (s[i] == '-' || (s[i] >= '0' && s[i] <= '9')) {
			start = i;
			while (i < n && (s[i] == '-' || s[i] == '+' || s[i] == '.' ||
			    (s[i] >= '0' && s[i] <= '9') || s[i] == 'e' || s[i] == 'E'))
				i++;
			if (!fuzz_number_ok(s + start, i - start))
				return 1;
			continue;
		}
		i++;
	}
	return 0;
}

/* Nesting depth of a jansson value (1 for a flat object). */
static size_t
fuzz_depth(json_t *v)
{
	size_t d = 0, i, x;
	const char *k;
	json_t *e;

	if (json_is_object(v)) {
		json_object_foreach(v, k, e) {
			if ((x = fuzz_depth(e)) > d)
				d = x;
		}
		return d + 1;
	}
	if (json_is_array(v)) {
		json_array_foreach(v, i, e) {
			if ((x = fuzz_depth(e)) > d)
				d = x;
		}
		return d + 1;
	}
	return 0;
}

/* A and B: the reader against jansson on the input as a document. */
static void
fuzz_reader(const char *doc, size_t len)
{
	json_error_t	 je;
	json_t		*root, *jc;
	char		*s = NULL;
	long long	 iv = 0;
	int		 rs, ri;

	rs = jr_get_str(doc, len, "code", &s);
	if (rs != 1 && s != NULL)
		abort();
	if (rs == 1 && s == NULL)
		abort();
	ri = jr_get_int(doc, len, "code", &iv);
	if (rs < 0 && ri >= 0)	/* both validate the whole document first */
		abort();

	/* A */
	root = json_loadb(doc, len, JSON_REJECT_DUPLICATES, &je);
	if (root != NULL && json_is_object(root) && fuzz_depth(root) <= JR_DEPTH &&
	    memchr(doc, '\0', len) == NULL) {
		if (rs < 0)
			abort();	/* jr refused a document jansson accepts */
		jc = json_object_get(root, "code");
		if (json_is_string(jc) &&
		    memchr(json_string_value(jc), '\0', json_string_length(jc)) == NULL) {
			if (rs != 1)
				abort();
			if (!fuzz_has_astral(json_string_value(jc), json_string_length(jc)) &&
			    (strlen(s) != json_string_length(jc) ||
			    memcmp(s, json_string_value(jc), json_string_length(jc)) != 0))
				abort();
		} else if (rs == 1)
			abort();
		if (json_is_integer(jc) && json_integer_value(jc) < 100000000000000000LL &&
		    json_integer_value(jc) > -100000000000000000LL &&
		    (ri != 1 || iv != json_integer_value(jc)))
			abort();
	}
	json_decref(root);

	/* B */
	if (rs >= 0) {
		root = json_loadb(doc, len, 0, &je);
		if (root == NULL && json_error_code(&je) != json_error_numeric_overflow &&
		    !fuzz_lenient(doc, len))
			abort();
		json_decref(root);
	}
	free(s);
}

/* D: the writer, with the input as a string and a key made from it. */
static void
fuzz_writer(const char *str, size_t len)
{
	struct jbuf	 jb;
	json_error_t	 je;
	json_t		*root, *v;
	char		 key[16], *back = NULL;
	long long	 num = 0, iv = 0;
	size_t		 klen, i;
	int		 utf8 = fuzz_utf8_ok((const unsigned char *)str, len), rs;

	klen = strnlen(str, len < sizeof key - 1 ? len : sizeof key - 1);
	memcpy(key, str, klen);
	key[klen] = '\0';
	utf8 = utf8 && fuzz_utf8_ok((const unsigned char *)key, klen);	/* a cut sequence */
	for (i = 0; i < len && i < 8; i++)
		num = (long long)((unsigned long long)num << 8 | (unsigned char)str[i]);

	jw_init(&jb);
	jw_obj_open(&jb);
	jw_key(&jb, "code");
	jw_str(&jb, str, len);
	jw_key(&jb, "n");
	jw_int(&jb, num);
	jw_key(&jb, "a");
	jw_arr_open(&jb);
	jw_str(&jb, str, len);
	jw_bool(&jb, 1);
	jw_bool(&jb, 0);
	jw_obj_open(&jb);
	jw_obj_close(&jb);
	jw_arr_close(&jb);
	if (strcmp(key, "code") != 0 && strcmp(key, "n") != 0 && strcmp(key, "a") != 0) {
		jw_key(&jb, key);
		jw_cstr(&jb, key);
	}
	jw_obj_close(&jb);

	root = json_loadb(jb.buf, jb.len, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &je);
	if ((root != NULL) != utf8)
		abort();
	if (root != NULL) {
		v = json_object_get(root, "code");
		if (!json_is_string(v) || json_string_length(v) != len ||
		    memcmp(json_string_value(v), str, len) != 0)
			abort();
		v = json_object_get(root, "n");
		if (!json_is_integer(v) || json_integer_value(v) != num)
			abort();
		v = json_array_get(json_object_get(root, "a"), 0);
		if (!json_is_string(v) || json_string_length(v) != len ||
		    memcmp(json_string_value(v), str, len) != 0 ||
		    json_array_get(json_object_get(root, "a"), 1) != json_true() ||
		    json_array_size(json_object_get(root, "a")) != 4)
			abort();
		if (json_object_size(root) != 3 + (strcmp(key, "code") != 0 &&
		    strcmp(key, "n") != 0 && strcmp(key, "a") != 0))
			abort();
		json_decref(root);
	}
	rs = jr_get_str(jb.buf, jb.len, "code", &back);
	if (memchr(str, '\0', len) != NULL) {
		if (rs != -1)	/* \u0000 anywhere is refused */
			abort();
	} else if (rs != 1 || strlen(back) != len || memcmp(back, str, len) != 0)
		abort();
	free(back);
	if (memchr(str, '\0', len) == NULL &&
	    (jr_get_int(jb.buf, jb.len, "n", &iv) != 1 || iv != num) &&
	    num > -100000000000000000LL && num < 100000000000000000LL)
		abort();
	jw_free(&jb);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_reader((const char *)data, size);
	fuzz_writer((const char *)data, size);
	return 0;
}
