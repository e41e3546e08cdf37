/*
 * Fuzz target for the streaming redactor: checks redact_feed()/redact_flush() against
 * a naive reference that encodes the secrets with its own simple encoders, marks
 * covered bytes by brute-force search in the input and in its two views (escape
 * sequences, CR and LF dropped; and %XX decoded too), and, for input without the
 * bytes that wake the views, knows what each hold policy holds back after every
 * chunk (otherwise it checks that what is written is settled and the hold bounded).
 *
 * Input: byte 0 picks the number of secrets (1-4) and options (hold policy, second
 * stream, freeing order, sink failure, redact_string() between feeds); then each secret as a
 * length byte (0-32, so short and empty secrets occur) and its bytes; then a byte
 * choosing how the data is cut into feed() calls; the rest is a small program that
 * builds the data: 0xFE t u inserts encoding t of a secret (whole, or a prefix or
 * suffix, per u), 0xFE 0xFE is a literal 0xFE, any other byte is itself.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redact.h"

#define DATA_MAX	4096
#define NSEC_MAX	4
#define SEC_MAX		32
#define NENC		24
#define PAT_MAX		(SEC_MAX * 6)	/* longest encoding: JSON \u00XX */
#define MASKLEN		(sizeof REDACT_MASK - 1)

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

struct pat {
	unsigned char	 b[PAT_MAX];
	size_t		 len;
};

struct out {
	unsigned char	*p;
	size_t		 len;
	size_t		 cap;
	long		 calls;
	long		 fail_at;	/* fail on this call (-1: never) */
};

/* Abort with a message: the fuzzer records the input. */
static void
fail(const char *what)
{
	fprintf(stderr, "fuzz_redact: %s\n", what);
	abort();
}

/* Append to a growing buffer, aborting on exhaustion. */
static void
out_append(struct out *o, const void *buf, size_t len)
{
	if (o->len + len > o->cap) {
		size_t cap = o->cap ? o->cap : 256;

		while (cap < o->len + len)
			cap *= 2;
		if ((o->p = realloc(o->p, cap)) == NULL)
			fail("out of memory");
		o->cap = cap;
	}
	memcpy(o->p + o->len, buf, len);
	o->len += len;
}

/* The sink under test: collects output, checks pieces are non-empty, may fail. */
static int
out_sink(void *arg, const void *buf, size_t len)
{
	struct out *o = arg;

	if (len == 0)
		fail("sink called with zero length");
	if (o->fail_at >= 0 && o->calls++ == o->fail_at)
		return -1;
	out_append(o, buf, len);
	return 0;
}

/* Reference base64: classic groups of three over k zero bytes + s, then the stable middle. */
static size_t
ref_b64(const unsigned char *s, size_t n, int k, int url, unsigned char *out)
{
	const char *abc = url ?
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" :
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned char in[SEC_MAX + 4], enc[(SEC_MAX + 4) / 3 * 4 + 8];
	size_t m = (size_t)k + n, i, e = 0, lo, hi;

	memset(in, 0, sizeof in);
	memcpy(in + k, s, n);
	for (i = 0; i < m; i += 3) {
		unsigned int v = (unsigned int)in[i] << 16 | (unsigned int)in[i + 1] << 8 | in[i + 2];

		enc[e++] = (unsigned char)abc[v >> 18 & 63];
		enc[e++] = (unsigned char)abc[v >> 12 & 63];
		enc[e++] = (unsigned char)abc[v >> 6 & 63];
		enc[e++] = (unsigned char)abc[v & 63];
	}
	/* Character j is bits 6j..6j+5: keep those inside the secret's bits. */
	lo = (8 * (size_t)k + 5) / 6;
	hi = 8 * m / 6;
	if (hi <= lo)
		return 0;
	memcpy(out, enc + lo, hi - lo);
	return hi - lo;
}

/*
 * Reference ASCII-only JSON: decode UTF-8 strictly (shortest form, no surrogates,
 * at most U+10FFFF), escape the JSON specials, everything non-ASCII as \uXXXX
 * (surrogate pairs above U+FFFF). 0 for invalid UTF-8 or all-ASCII input.
 */
static size_t
ref_json_ascii(const unsigned char *s, size_t n, int upper, unsigned char *out)
{
	unsigned long cps[SEC_MAX];
	size_t ncp = 0, i = 0, o = 0, k;
	int nonascii = 0;
	char tmp[16];

	while (i < n) {
		unsigned long v;
		size_t len;

		if (s[i] < 0x80) {
			v = s[i];
			len = 1;
		} else if (s[i] >= 0xc2 && s[i] <= 0xdf)
			len = 2;
		else if (s[i] >= 0xe0 && s[i] <= 0xef)
			len = 3;
		else if (s[i] >= 0xf0 && s[i] <= 0xf4)
			len = 4;
		else
			return 0;
		if (len > 1) {
			if (n - i < len)
				return 0;
			v = s[i] & (0x7f >> len);
			for (k = 1; k < len; k++) {
				if ((s[i + k] & 0xc0) != 0x80)
					return 0;
				v = v << 6 | (s[i + k] & 0x3f);
			}
			if ((len == 3 && v < 0x800) || (len == 4 && v < 0x10000) || v > 0x10ffff ||
			    (v >= 0xd800 && v <= 0xdfff))
				return 0;
			nonascii = 1;
		}
		cps[ncp++] = v;
		i += len;
	}
	if (!nonascii)
		return 0;
	for (k = 0; k < ncp; k++) {
		unsigned long c = cps[k];
		int w;

		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (unsigned char)c;
		} else if (c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') {
			out[o++] = '\\';
			out[o++] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' :
			    c == '\b' ? 'b' : 'f';
		} else if (c >= 0x20 && c < 0x80)
			out[o++] = (unsigned char)c;
		else if (c > 0xffff) {
			w = snprintf(tmp, sizeof tmp, upper ? "\\u%04lX\\u%04lX" : "\\u%04lx\\u%04lx",
			    0xd800 + ((c - 0x10000) >> 10), 0xdc00 + ((c - 0x10000) & 0x3ff));
			memcpy(out + o, tmp, (size_t)w);
			o += (size_t)w;
		} else {
			w = snprintf(tmp, sizeof tmp, upper ? "\\u%04lX" : "\\u%04lx", c);
			memcpy(out + o, tmp, (size_t)w);
			o += (size_t)w;
		}
	}
	return o;
}

/*
 * Reference every-character JSON: valid UTF-8 (as ref_json_ascii() decodes it) as one
 * \uXXXX per code point, surrogate pairs above U+FFFF; anything else byte by byte.
 */
static size_t
ref_json_u(const unsigned char *s, size_t n, int upper, unsigned char *out)
{
	unsigned char tmpout[PAT_MAX];
	size_t i = 0, o = 0, k;
	char tmp[16];
	int utf8 = 1;

	/* Valid UTF-8: ref_json_ascii() accepts it (or it is all ASCII). */
	for (k = 0; k < n; k++)
		if (s[k] >= 0x80)
			break;
	if (k < n && ref_json_ascii(s, n, 0, tmpout) == 0)
		utf8 = 0;
	while (i < n) {
		unsigned long v = s[i];
		size_t len = 1;

		if (utf8 && s[i] >= 0x80) {
			len = s[i] >= 0xf0 ? 4 : s[i] >= 0xe0 ? 3 : 2;
			v = s[i] & (0x7f >> len);
			for (k = 1; k < len; k++)
				v = v << 6 | (s[i + k] & 0x3f);
		}
		if (v > 0xffff) {
			snprintf(tmp, sizeof tmp, upper ? "\\u%04lX" : "\\u%04lx",
			    0xd800 + ((v - 0x10000) >> 10));
			memcpy(out + o, tmp, 6);
			o += 6;
			v = 0xdc00 + ((v - 0x10000) & 0x3ff);
		}
		snprintf(tmp, sizeof tmp, upper ? "\\u%04lX" : "\\u%04lx", v);
		memcpy(out + o, tmp, 6);
		o += 6;
		i += len;
	}
	return o;
}

/* Reference encoder number enc (same numbering idea as the header's list). */
static size_t
ref_encode(int enc, const unsigned char *s, size_t n, unsigned char *out)
{
	size_t i, o = 0;
	char tmp[8];

	switch (enc) {
	case 0:
		memcpy(out, s, n);
		return n;
	case 1: case 2: case 3:
		return ref_b64(s, n, enc - 1, 0, out);
	case 4: case 5: case 6:
		return ref_b64(s, n, enc - 4, 1, out);
	case 7: case 8:
		for (i = 0; i < n; i++) {
			if (s[i] != 0 && strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			    "0123456789-._~", s[i]) != NULL)
				out[o++] = s[i];
			else {
				snprintf(tmp, sizeof tmp, enc == 7 ? "%%%02X" : "%%%02x", s[i]);
				memcpy(out + o, tmp, 3);
				o += 3;
			}
		}
		return o;
	case 9: case 10: case 11: case 12: case 13: {
		int slash = enc == 10 || enc == 12, upper = enc == 11 || enc == 12;
		int html = enc == 13;

		for (i = 0; i < n; i++) {
			unsigned char c = s[i];

			if (c == '"' || c == '\\' || (c == '/' && slash)) {
				out[o++] = '\\';
				out[o++] = c;
			} else if (c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') {
				out[o++] = '\\';
				out[o++] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' :
				    c == '\b' ? 'b' : 'f';
			} else if (c < 0x20 || (html && (c == '<' || c == '>' || c == '&'))) {
				snprintf(tmp, sizeof tmp, upper ? "\\u%04X" : "\\u%04x", c);
				memcpy(out + o, tmp, 6);
				o += 6;
			} else
				out[o++] = c;
		}
		return o;
	}
	case 14: case 15:
		for (i = 0; i < n; i++) {
			snprintf(tmp, sizeof tmp, enc == 14 ? "%02x" : "%02X", s[i]);
			memcpy(out + o, tmp, 2);
			o += 2;
		}
		return o;
	case 16: case 17:
		return ref_json_ascii(s, n, enc == 17, out);
	case 18: case 19:	/* every byte %XX */
		for (i = 0; i < n; i++) {
			snprintf(tmp, sizeof tmp, enc == 18 ? "%%%02X" : "%%%02x", s[i]);
			memcpy(out + o, tmp, 3);
			o += 3;
		}
		return o;
	case 20: case 21:	/* form: space as '+' */
		for (i = 0; i < n; i++) {
			if (s[i] == ' ')
				out[o++] = '+';
			else if (s[i] != 0 && strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			    "0123456789-._~", s[i]) != NULL)
				out[o++] = s[i];
			else {
				snprintf(tmp, sizeof tmp, enc == 20 ? "%%%02X" : "%%%02x", s[i]);
				memcpy(out + o, tmp, 3);
				o += 3;
			}
		}
		return o;
	case 22: case 23:	/* every character \uXXXX */
		return ref_json_u(s, n, enc == 23, out);
	}
	return 0;
}

/* One byte of a view: its value, the input span it stands for, its segment. */
struct vbyte {
	unsigned char	 b;
	size_t		 start;	/* first input byte of its unit */
	size_t		 end;	/* a match ending with it covers input up to here */
	size_t		 seg;	/* matches never cross segments */
};

/* Append a view byte. */
static void
ref_vput(struct vbyte *v, size_t *nv, unsigned char b, size_t start, size_t end, size_t seg)
{
	v[*nv].b = b;
	v[*nv].start = start;
	v[*nv].end = end;
	v[*nv].seg = seg;
	(*nv)++;
}

/*
 * Reference view of data[0..n), as redact.h describes it, written out over the
 * whole input at once: escape sequences (ESC [ params/intermediates final,
 * ESC ] text BEL or ESC \, ESC intermediates final), CR and LF dropped; a lone ESC
 * dropped and the next byte taken afresh; more than REDACT_MAXGAP dropped bytes in
 * a row start a new segment (and end any sequence). With decode, %XX (either case)
 * becomes one byte; a '%' (and a hex digit) not completed, or interrupted by
 * dropped bytes, is literal.
 */
static size_t
ref_view(const unsigned char *d, size_t n, int decode, struct vbyte *v)
{
	size_t i, nv = 0, seg = 0, gap = 0, pstart = 0, hpos = 0;
	int st = 0, pend = 0, junk;	/* st: 0 idle 1 ESC 2 inter 3 CSI 4 OSC 5 OSC-ESC */
	unsigned char b, ph = 0;

	for (i = 0; i < n; i++) {
		b = d[i];
	again:
		junk = 1;
		switch (st) {
		case 0:
			if (b == 0x1b)
				st = 1;
			else if (b != '\r' && b != '\n')
				junk = 0;
			break;
		case 1:
			if (b == '[')
				st = 3;
			else if (b == ']')
				st = 4;
			else if (b >= 0x20 && b <= 0x2f)
				st = 2;
			else if (b >= 0x30 && b <= 0x7e)
				st = 0;
			else {
				st = 0;
				goto again;
			}
			break;
		case 2:
			if (b >= 0x30 && b <= 0x7e)
				st = 0;
			else if (!(b >= 0x20 && b <= 0x2f)) {
				st = 0;
				goto again;
			}
			break;
		case 3:
			if (b >= 0x40 && b <= 0x7e)
				st = 0;
			else if (!(b >= 0x20 && b <= 0x3f)) {
				st = 0;
				goto again;
			}
			break;
		case 4:
			if (b == 0x07)
				st = 0;
			else if (b == 0x1b)
				st = 5;
			else if (b < 0x20 || b == 0x7f) {
				st = 0;
				goto again;
			}
			break;
		default:
			if (b == '\\')
				st = 0;
			else {
				st = 1;
				goto again;
			}
			break;
		}
		if (junk) {
			if (pend) {
				ref_vput(v, &nv, '%', pstart, pstart + 1, seg);
				if (pend == 2)
					ref_vput(v, &nv, ph, hpos, hpos + 1, seg);
				pend = 0;
			}
			if (++gap > REDACT_MAXGAP) {
				seg++;
				gap = 0;
				st = 0;
			}
			continue;
		}
		gap = 0;
		if (!decode) {
			ref_vput(v, &nv, b, i, i + 1, seg);
			continue;
		}
		if (pend == 0 && b == '%') {
			pend = 1;
			pstart = i;
		} else if (pend == 1 && isxdigit(b)) {
			pend = 2;
			ph = b;
			hpos = i;
		} else if (pend == 2 && isxdigit(b)) {
			unsigned int hi = isdigit(ph) ? (unsigned)(ph - '0') :
			    (unsigned)(tolower(ph) - 'a' + 10);
			unsigned int lo = isdigit(b) ? (unsigned)(b - '0') :
			    (unsigned)(tolower(b) - 'a' + 10);

			ref_vput(v, &nv, (unsigned char)(hi << 4 | lo), pstart, i + 1, seg);
			pend = 0;
		} else {
			if (pend) {
				ref_vput(v, &nv, '%', pstart, pstart + 1, seg);
				if (pend == 2)
					ref_vput(v, &nv, ph, hpos, hpos + 1, seg);
				pend = 0;
				goto again;
			}
			ref_vput(v, &nv, b, i, i + 1, seg);
		}
	}
	return nv;
}

/* Whether two collected outputs are the same bytes. */
static int
out_equal(const struct out *a, const struct out *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

/* Render data[a..b) under coverage cov: one mask per run, starting a run at a if cov[a]. */
static void
render(const unsigned char *data, const unsigned char *cov, size_t a, size_t b, struct out *o)
{
	size_t i;

	for (i = a; i < b; i++) {
		if (!cov[i])
			out_append(o, &data[i], 1);
		else if (i == 0 || !cov[i - 1])
			out_append(o, REDACT_MASK, MASKLEN);
	}
}

/* Fuzz entry point. */
int
LLVMFuzzerTestOneInput(const uint8_t *buf, size_t size)
{
	static struct pat pats[NSEC_MAX * NENC];
	static unsigned char data[DATA_MAX], cov[DATA_MAX + 1], fcov[DATA_MAX + 1];
	static size_t reach[DATA_MAX + 1], endlen[DATA_MAX + 1], arun[DATA_MAX + 1];
	static struct vbyte vbytes[DATA_MAX];
	unsigned char holdable[256];
	struct redact_secret secs[NSEC_MAX];
	unsigned char secbuf[NSEC_MAX][SEC_MAX];
	struct redact *r = NULL, *r2 = NULL, *use;
	struct out got = { 0 }, exp = { 0 }, full = { 0 };
	size_t pos = 0, nsec, i, j, k, n = 0, npat = 0, maxlen = 0, m, e, done, h, safecap;
	size_t nv, holdmax;
	int plain, released = 0;
	unsigned int opts, mode;
	uint32_t rng;
	int rc, failed = 0;

	if (size < 2)
		return 0;
	opts = buf[pos++];
	nsec = 1 + (opts & 3);
	for (i = 0; i < nsec; i++) {
		size_t l = pos < size ? buf[pos++] % (SEC_MAX + 1) : 0;

		if (l > size - pos)
			l = size - pos;
		memcpy(secbuf[i], buf + pos, l);
		pos += l;
		secs[i].value = secbuf[i];
		secs[i].len = l;
	}
	mode = pos < size ? buf[pos++] : 0;

	/* Every pattern of every secret, by the reference encoders. */
	for (i = 0; i < nsec; i++) {
		if (secs[i].len < REDACT_MIN_LEN)
			continue;
		for (j = 0; j < NENC; j++) {
			size_t l = ref_encode((int)j, secs[i].value, secs[i].len, pats[npat].b);

			if (l < REDACT_MIN_LEN)
				continue;
			pats[npat++].len = l;
			if (l > maxlen)
				maxlen = l;
		}
	}

	/* Build the data. */
	while (pos < size && n < DATA_MAX) {
		unsigned char c = buf[pos++], t, u;
		unsigned char enc[PAT_MAX];
		size_t l, from, cnt;

		if (c != 0xFE || pos >= size) {
			data[n++] = c;
			continue;
		}
		if ((t = buf[pos++]) == 0xFE) {
			data[n++] = t;
			continue;
		}
		u = pos < size ? buf[pos++] : 0;
		i = (t & 3) % nsec;
		l = ref_encode((t >> 2) % NENC, secs[i].value, secs[i].len, enc);
		from = 0;
		cnt = l;
		if (l != 0 && (u & 0xC0) == 0x80)
			cnt = (u & 0x3f) % l;
		else if (l != 0 && (u & 0xC0) == 0xC0) {
			cnt = (u & 0x3f) % l;
			from = l - cnt;
		}
		if (cnt > DATA_MAX - n)
			cnt = DATA_MAX - n;
		memcpy(data + n, enc + from, cnt);
		n += cnt;
	}

	/* The safe hold: runs of letters, digits, +/-_.~%\" and pattern bytes, capped at
	 * the longest pattern rounded up to REDACT_HOLD_ROUND, less one. */
	memset(holdable, 0, sizeof holdable);
	for (i = 0; i < 256; i++) {
		if ((i >= 'A' && i <= 'Z') || (i >= 'a' && i <= 'z') || (i >= '0' && i <= '9') ||
		    (i != 0 && strchr("+/-_.~%\\\"", (int)i) != NULL))
			holdable[i] = 1;
	}
	for (i = 0; i < npat; i++) {
		for (j = 0; j < pats[i].len; j++)
			holdable[pats[i].b[j]] = 1;
	}
	safecap = maxlen == 0 ? 0 : (maxlen + REDACT_HOLD_ROUND - 1) / REDACT_HOLD_ROUND *
	    REDACT_HOLD_ROUND - 1;
	arun[0] = 0;
	for (i = 0; i < n; i++)
		arun[i + 1] = holdable[data[i]] ? arun[i] + 1 : 0;

	/* Occurrences, and for each start the reach of a proper prefix of a pattern. */
	memset(fcov, 0, n + 1);
	memset(cov, 0, n + 1);
	for (i = 0; i <= n; i++) {
		reach[i] = 0;
		endlen[i] = 0;
	}
	for (i = 0; i < n; i++) {
		for (j = 0; j < npat; j++) {
			size_t l = 0, lim = n - i < pats[j].len ? n - i : pats[j].len;

			while (l < lim && data[i + l] == pats[j].b[l])
				l++;
			if (l == pats[j].len) {
				if (l > endlen[i + l])
					endlen[i + l] = l;
				memset(fcov + i, 1, l);
			}
			if (l > pats[j].len - 1)
				l = pats[j].len - 1;
			if (l > reach[i])
				reach[i] = l;
		}
	}

	/* The views: every pattern found in them covers the input span it stands for. */
	for (k = 0; k < 2; k++) {
		nv = ref_view(data, n, (int)k, vbytes);
		for (i = 0; i < nv; i++) {
			for (j = 0; j < npat; j++) {
				size_t l = 0;

				while (l < pats[j].len && i + l < nv && vbytes[i + l].seg ==
				    vbytes[i].seg && vbytes[i + l].b == pats[j].b[l])
					l++;
				if (l == pats[j].len)
					memset(fcov + vbytes[i].start, 1,
					    vbytes[i + l - 1].end - vbytes[i].start);
			}
		}
	}
	/* Without bytes that wake the views, the holds are the input's alone, exactly. */
	plain = 1;
	for (i = 0; i < n; i++) {
		if (data[i] == 0x1b || data[i] == '\r' || data[i] == '\n' || data[i] == '%')
			plain = 0;
	}
	holdmax = safecap * (3 + REDACT_MAXGAP) + 2 * REDACT_MAXGAP + 8;

	/* The redactor under test, on its first stream or on a second one. */
	if ((r = redact_new(secs, nsec)) == NULL)
		fail("redact_new failed");
	for (i = 0, j = 0; i < npat; i++) {
		for (k = 0; k < i; k++) {
			if (pats[k].len == pats[i].len &&
			    memcmp(pats[k].b, pats[i].b, pats[i].len) == 0)
				break;
		}
		j += k == i;
	}
	if (redact_patterns(r) != j)
		fail("number of distinct patterns differs from the reference");
	use = r;
	if (opts & 0x10) {
		if ((r2 = redact_new_stream(r)) == NULL)
			fail("redact_new_stream failed");
		use = r2;
		if (opts & 0x08) {
			/* The policy belongs to the stream: setting it on the first one
			 * must not change the second. */
			redact_set_hold(r, (opts & 0x04) ? REDACT_HOLD_SAFE : REDACT_HOLD_MINIMAL);
		}
		if (opts & 0x20) {
			/* The second stream must outlive the first. */
			redact_free(r);
			r = NULL;
		}
	}
	if (opts & 0x04)
		redact_set_hold(use, REDACT_HOLD_MINIMAL);
	got.fail_at = (opts & 0x40) ? (long)(mode >> 2) : -1;
	exp.fail_at = full.fail_at = -1;

	/* Feed in chunks; after each, output and hold must be exactly the reference's. */
	rng = 0x9e3779b9u ^ (uint32_t)mode * 2654435761u ^ (uint32_t)n;
	done = 0;
	e = 0;
	for (m = 0; m < n || done == 0; ) {
		size_t chunk;

		switch (mode & 3) {
		case 0:
			chunk = n - m;
			break;
		case 1:
			chunk = 1;
			break;
		default:
			rng ^= rng << 13;
			rng ^= rng >> 17;
			rng ^= rng << 5;
			chunk = rng % ((mode & 3) == 2 ? 9 : 300);
			break;
		}
		if (chunk > n - m)
			chunk = n - m;
		done = 1;
		rc = redact_feed(use, data + m, chunk, out_sink, &got);
		if (rc != 0) {
			if (got.fail_at < 0)
				fail("redact_feed failed without a sink failure");
			failed = 1;
			break;
		}
		for (j = m + 1; j <= m + chunk; j++) {
			if (endlen[j] != 0)
				memset(cov + j - endlen[j], 1, endlen[j]);
		}
		m += chunk;

		if (!plain) {
			/*
			 * With the views at work the hold depends on where they woke up;
			 * what is written must still be the final rendering of a prefix,
			 * settled for good, and the hold bounded.
			 */
			h = m - redact_held(use);
			if (redact_held(use) > m || h < e)
				fail("settled boundary moved back");
			if (m - h > holdmax)
				fail("held more than the bound");
			/*
			 * A feed ending just after a line break lets a short line tail
			 * go (REDACT_WRAP_MIN): a secret carried on in the next line
			 * then shows those bytes. From there on only the one-feed
			 * checks below (redact_string, the reuse) are exact.
			 */
			for (j = m; j > 0 && j + REDACT_MAXGAP + 1 > m && !released; j--)
				released = data[j - 1] == '\r' || data[j - 1] == '\n';
			render(data, fcov, e, h, &exp);
			e = h;
			if (!released && !out_equal(&got, &exp))
				fail("output after a feed differs from the reference");
			goto fed;
		}

		/* Held: from the earliest start whose proper-prefix reach gets to m, or
		 * under the safe policy the start of the capped holdable run if earlier;
		 * then on through bytes already covered. */
		h = m;
		for (i = m > maxlen ? m - maxlen : 0; i < m; i++) {
			if (i + reach[i] >= m) {
				h = i;
				break;
			}
		}
		if (!(opts & 0x04)) {
			size_t run = arun[m] < safecap ? arun[m] : safecap;

			if (m - run < h)
				h = m - run;
		}
		while (h < m && cov[h])
			h++;
		if (h < e)
			fail("settled boundary moved back");
		render(data, cov, e, h, &exp);
		e = h;
		if (!out_equal(&got, &exp))
			fail("output after a feed differs from the reference");
		if (redact_held(use) != m - h)
			fail("held bytes differ from the reference");

	fed:
		if (opts & 0x80) {
			/* redact_string() in the middle must not disturb the stream. */
			char str[65], *red;
			size_t sl = strnlen((const char *)data, n < 64 ? n : 64);

			memcpy(str, data, sl);
			str[sl] = '\0';
			if ((red = redact_string(use, str)) == NULL)
				fail("redact_string failed");
			free(red);
		}
	}
	if (!failed) {
		if (redact_flush(use, out_sink, &got) != 0) {
			if (got.fail_at < 0)
				fail("redact_flush failed without a sink failure");
			failed = 1;
		}
	}
	if (failed) {
		if (redact_feed(use, "a", 1, out_sink, &got) != -1 ||
		    redact_flush(use, out_sink, &got) != -1)
			fail("a dead stream accepted more");
		goto out;
	}
	render(data, plain ? cov : fcov, e, n, &exp);
	if (redact_held(use) != 0)
		fail("bytes held after flush");

	/* The whole thing, rendered from scratch with the full coverage. */
	render(data, fcov, 0, n, &full);
	if (!out_equal(&exp, &full))
		fail("reference disagrees with itself");
	if (!released && !out_equal(&got, &full))
		fail("output differs from the reference");

	/* redact_string() agrees when the data is a C string. */
	if (memchr(data, 0, n) == NULL) {
		char *s = malloc(n + 1), *red;

		if (s == NULL)
			fail("out of memory");
		memcpy(s, data, n);
		s[n] = '\0';
		if ((red = redact_string(use, s)) == NULL)
			fail("redact_string failed");
		if (strlen(red) != full.len || (full.len != 0 && memcmp(red, full.p, full.len) != 0))
			fail("redact_string differs from the reference");
		free(red);
		free(s);
	}

	/* The stream is reusable after a flush. */
	got.len = 0;
	got.fail_at = -1;
	if (redact_feed(use, data, n, out_sink, &got) != 0 ||
	    redact_flush(use, out_sink, &got) != 0)
		fail("reuse after flush failed");
	if (!out_equal(&got, &full))
		fail("reuse after flush differs from the reference");

out:
	redact_free(r2);
	redact_free(r);
	free(got.p);
	free(exp.p);
	free(full.p);
	return 0;
}
