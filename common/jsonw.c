/* Minimal JSON writer and flat-object reader for the static shim. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonw.h"
#include "util.h"

/* Start an empty buffer. */
void
jw_init(struct jbuf *jb)
{
	memset(jb, 0, sizeof *jb);
}

/* Release a buffer. */
void
jw_free(struct jbuf *jb)
{
	free(jb->buf);
	memset(jb, 0, sizeof *jb);
}

/* Append bytes as they are. */
void
jw_raw(struct jbuf *jb, const char *s, size_t n)
{
	if (n > SIZE_MAX - jb->len - 1)
		die(125, "JSON buffer overflow");
	if (jb->len + n + 1 > jb->cap) {
		size_t cap = jb->cap ? jb->cap : 256;

		while (cap < jb->len + n + 1)
			cap *= 2;
		jb->buf = xreallocarray(jb->buf, cap, 1);
		jb->cap = cap;
	}
	memcpy(jb->buf + jb->len, s, n);
	jb->len += n;
	jb->buf[jb->len] = '\0';
}

/* Emit the separator before a value or key. */
static void
jw_sep(struct jbuf *jb)
{
	if (jb->need_comma)
		jw_raw(jb, ",", 1);
	jb->need_comma = 1;
}

/* Open a container with its bracket. */
static void
jw_open(struct jbuf *jb, const char *bracket)
{
	jw_sep(jb);
	jw_raw(jb, bracket, 1);
	jb->need_comma = 0;
}

/* Close a container with its bracket. */
static void
jw_close(struct jbuf *jb, const char *bracket)
{
	jw_raw(jb, bracket, 1);
	jb->need_comma = 1;
}

/* Open an object. */
void
jw_obj_open(struct jbuf *jb)
{
	jw_open(jb, "{");
}

/* Close an object. */
void
jw_obj_close(struct jbuf *jb)
{
	jw_close(jb, "}");
}

/* Open an array. */
void
jw_arr_open(struct jbuf *jb)
{
	jw_open(jb, "[");
}

/* Close an array. */
void
jw_arr_close(struct jbuf *jb)
{
	jw_close(jb, "]");
}

/* Write an escaped string body without separators. */
static void
jw_escaped(struct jbuf *jb, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	char esc[6] = { '\\', 'u', '0', '0', 0, 0 };
	size_t i, start = 0;

	jw_raw(jb, "\"", 1);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f)
			continue;
		jw_raw(jb, s + start, i - start);
		if (c == '"')
			jw_raw(jb, "\\\"", 2);
		else if (c == '\\')
			jw_raw(jb, "\\\\", 2);
		else {
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			jw_raw(jb, esc, 6);
		}
		start = i + 1;
	}
	jw_raw(jb, s + start, n - start);
	jw_raw(jb, "\"", 1);
}

/* Write an object key. */
void
jw_key(struct jbuf *jb, const char *k)
{
	jw_sep(jb);
	jw_escaped(jb, k, strlen(k));
	jw_raw(jb, ":", 1);
	jb->need_comma = 0;
}

/* Write a string value. */
void
jw_str(struct jbuf *jb, const char *s, size_t n)
{
	jw_sep(jb);
	jw_escaped(jb, s, n);
}

/* Write a NUL-terminated string value. */
void
jw_cstr(struct jbuf *jb, const char *s)
{
	jw_str(jb, s, strlen(s));
}

/* Write an integer value. */
void
jw_int(struct jbuf *jb, long long v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof tmp, "%lld", v);

	jw_sep(jb);
	jw_raw(jb, tmp, (size_t)n);
}

/* Write a boolean value. */
void
jw_bool(struct jbuf *jb, int v)
{
	jw_sep(jb);
	if (v)
		jw_raw(jb, "true", 4);
	else
		jw_raw(jb, "false", 5);
}

/* Reader state: a cursor over a bounded buffer. */
struct jr {
	const char	*p;
	const char	*end;
	int		 depth;
};

#define JR_MAX_DEPTH 32

/* Skip JSON whitespace. */
static void
jr_ws(struct jr *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' ||
	    *r->p == '\r'))
		r->p++;
}

/* Append a code point as UTF-8 (surrogates become U+FFFD). */
static void
jr_utf8(struct jbuf *out, unsigned cp)
{
	char b[4];

	if (cp >= 0xd800 && cp <= 0xdfff)
		cp = 0xfffd;
	if (cp < 0x80) {
		b[0] = (char)cp;
		jw_raw(out, b, 1);
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | (cp >> 6));
		b[1] = (char)(0x80 | (cp & 0x3f));
		jw_raw(out, b, 2);
	} else {
		b[0] = (char)(0xe0 | (cp >> 12));
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		jw_raw(out, b, 3);
	}
}

/* Parse a string at the cursor; decoded bytes go to out when it is not NULL. */
static int
jr_string(struct jr *r, struct jbuf *out)
{
	if (r->p >= r->end || *r->p != '"')
		return -1;
	r->p++;
	while (r->p < r->end) {
		unsigned char c = (unsigned char)*r->p++;

		if (c == '"')
			return 0;
		if (c < 0x20)
			return -1;
		if (c != '\\') {
			if (out != NULL)
				jw_raw(out, (const char *)&c, 1);
			continue;
		}
		if (r->p >= r->end)
			return -1;
		c = (unsigned char)*r->p++;
		switch (c) {
		case '"': case '\\': case '/':
			break;
		case 'b': c = '\b'; break;
		case 'f': c = '\f'; break;
		case 'n': c = '\n'; break;
		case 'r': c = '\r'; break;
		case 't': c = '\t'; break;
		case 'u': {
			unsigned cp = 0;
			int i, h;

			if (r->end - r->p < 4)
				return -1;
			for (i = 0; i < 4; i++) {
				if ((h = util_hexval(r->p[i])) < 0)
					return -1;
				cp = (cp << 4) | (unsigned)h;
			}
			r->p += 4;
			if (cp == 0)
				return -1;
			if (out != NULL)
				jr_utf8(out, cp);
			continue;
		}
		default:
			return -1;
		}
		if (out != NULL)
			jw_raw(out, (const char *)&c, 1);
	}
	return -1;
}

static int jr_value(struct jr *);

/* Match a literal word at the cursor. */
static int
jr_literal(struct jr *r, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
		return -1;
	r->p += n;
	return 0;
}

/* Skip an object or array at the cursor. */
static int
jr_compound(struct jr *r, char open, char close)
{
	int first = 1;

	if (++r->depth > JR_MAX_DEPTH)
		return -1;
	r->p++;	/* open */
	(void)open;
	for (;;) {
		jr_ws(r);
		if (r->p >= r->end)
			return -1;
		if (*r->p == close) {
			r->p++;
			r->depth--;
			return 0;
		}
		if (!first) {
			if (*r->p != ',')
				return -1;
			r->p++;
			jr_ws(r);
		}
		first = 0;
		if (close == '}') {
			if (jr_string(r, NULL) != 0)
				return -1;
			jr_ws(r);
			if (r->p >= r->end || *r->p != ':')
				return -1;
			r->p++;
			jr_ws(r);
		}
		if (jr_value(r) != 0)
			return -1;
	}
}

/* Skip one value at the cursor. */
static int
jr_value(struct jr *r)
{
	if (r->p >= r->end)
		return -1;
	switch (*r->p) {
	case '"':
		return jr_string(r, NULL);
	case '{':
		return jr_compound(r, '{', '}');
	case '[':
		return jr_compound(r, '[', ']');
	case 't':
		return jr_literal(r, "true");
	case 'f':
		return jr_literal(r, "false");
	case 'n':
		return jr_literal(r, "null");
	default:
		if (*r->p != '-' && (*r->p < '0' || *r->p > '9'))
			return -1;
		while (r->p < r->end && (*r->p == '-' || *r->p == '+' || *r->p == '.' ||
		    (*r->p >= '0' && *r->p <= '9') || *r->p == 'e' || *r->p == 'E'))
			r->p++;
		return 0;
	}
}

/* Check that the whole buffer is one well-formed JSON value. */
static int
jr_valid(const char *json, size_t len)
{
	struct jr r = { json, json + len, 0 };

	jr_ws(&r);
	if (jr_value(&r) != 0)
		return -1;
	jr_ws(&r);
	return r.p == r.end ? 0 : -1;
}

/* Find key at the top level; leave the cursor on its value. 1 found, 0 absent, -1 bad. */
static int
jr_find(struct jr *r, const char *key)
{
	struct jbuf name;
	int first = 1, found;

	jr_ws(r);
	if (r->p >= r->end || *r->p != '{')
		return -1;
	r->p++;
	for (;;) {
		jr_ws(r);
		if (r->p >= r->end)
			return -1;
		if (*r->p == '}')
			return 0;
		if (!first) {
			if (*r->p != ',')
				return -1;
			r->p++;
			jr_ws(r);
		}
		first = 0;
		jw_init(&name);
		if (jr_string(r, &name) != 0) {
			jw_free(&name);
			return -1;
		}
		found = name.buf != NULL && strcmp(name.buf, key) == 0;
		jw_free(&name);
		jr_ws(r);
		if (r->p >= r->end || *r->p != ':')
			return -1;
		r->p++;
		jr_ws(r);
		if (found)
			return 1;
		if (jr_value(r) != 0)
			return -1;
	}
}

/* Get a top-level string member. */
int
jr_get_str(const char *json, size_t len, const char *key, char **out)
{
	struct jr r = { json, json + len, 0 };
	struct jbuf v;
	int rc;

	*out = NULL;
	if (jr_valid(json, len) != 0)
		return -1;
	if ((rc = jr_find(&r, key)) != 1)
		return rc;
	if (r.p >= r.end || *r.p != '"')
		return 0;
	jw_init(&v);
	if (jr_string(&r, &v) != 0) {
		jw_free(&v);
		return -1;
	}
	*out = v.buf != NULL ? v.buf : xstrdup("");
	return 1;
}

/* Get a top-level integer member. */
int
jr_get_int(const char *json, size_t len, const char *key, long long *out)
{
	struct jr r = { json, json + len, 0 };
	long long v = 0;
	int rc, neg = 0, digits = 0;

	if (jr_valid(json, len) != 0)
		return -1;
	if ((rc = jr_find(&r, key)) != 1)
		return rc;
	if (r.p < r.end && *r.p == '-') {
		neg = 1;
		r.p++;
	}
	while (r.p < r.end && *r.p >= '0' && *r.p <= '9') {
		if (v > (INT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (*r.p++ - '0');
		digits++;
	}
	if (digits == 0)
		return 0;
	*out = neg ? -v : v;
	return 1;
}
