/* Streaming redaction: an Aho-Corasick automaton over every encoding of every secret. */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "redact.h"
#include "util.h"

/* sodium_malloc() aligns only as well as the size is rounded: keep every size a multiple. */
#define REDACT_ALIGN	64

/*
 * Freed streams an automaton keeps (wiped) for its next ones: a stream is secure
 * memory (guard pages, mlock), and making and unmaking that costs a dozen system
 * calls and page-table changes per stream, two streams per request.
 */
#define REDACT_SPARES	4

/* Size of the bigram filter: one byte per pair of input bytes. */
#define REDACT_BIGRAMS	65536

/* The encodings applied to each secret; see redact.h for what each one means. */
enum redact_enc {
	ENC_RAW,
	ENC_B64_0,
	ENC_B64_1,
	ENC_B64_2,
	ENC_B64URL_0,
	ENC_B64URL_1,
	ENC_B64URL_2,
	ENC_URL_UPPER,
	ENC_URL_LOWER,
	ENC_JSON,
	ENC_JSON_SLASH,
	ENC_JSON_UPPER,
	ENC_JSON_SLASH_UPPER,
	ENC_JSON_GO,
	ENC_HEX_LOWER,
	ENC_HEX_UPPER,
	ENC_JSON_ASCII_LOWER,
	ENC_JSON_ASCII_UPPER,
	ENC_URL_ALL_UPPER,
	ENC_URL_ALL_LOWER,
	ENC_FORM_UPPER,
	ENC_FORM_LOWER,
	ENC_JSON_U_LOWER,
	ENC_JSON_U_UPPER,
	ENC_COUNT
};

/* Variants of the JSON encoding. */
#define JSON_SLASH	0x1	/* '/' as \/ */
#define JSON_UPPER	0x2	/* \u00XX with upper-case hex */
#define JSON_HTML	0x4	/* < > & as \u003c \u003e \u0026, like Go */

/* The largest expansion of any encoding (JSON's \u00XX): bytes out per byte in. */
#define REDACT_EXPAND	6

static const char b64_std[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
static const char hex_lower[] = "0123456789abcdef";
/* Bytes every secret's encodings may use: the safe hold treats them all alike. */
static const char holdable_always[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_.~%\\\"";
static const char hex_upper[] = "0123456789ABCDEF";

/*
 * The automaton, shared by the streams of one request. A state is the offset of its
 * row in table: classes transitions (already multiplied by stride), then the length
 * of the longest pattern ending in this state, then the hold: the length of the
 * longest suffix of the state's string that is a proper prefix of a pattern.
 * States are numbered root, depth 1, other non-matching, matching, so two
 * comparisons tell the scanner where it is.
 */
struct redact_ac {
	atomic_size_t	 refs;		/* streams using this automaton */
	size_t		 size;		/* bytes of this allocation */
	atomic_flag	 spare_lock;	/* guards spare and nspare */
	size_t		 nspare;
	struct redact	*spare[REDACT_SPARES];	/* freed streams, wiped, for reuse */
	size_t		 maxlen;	/* longest pattern */
	size_t		 npatterns;	/* distinct patterns */
	size_t		 nstates;
	uint32_t	 classes;	/* byte classes; row = classes + 2 words */
	uint32_t	 stride;
	uint32_t	 shallow;	/* states below: root and depth 1 */
	uint32_t	 match;		/* states from here on end a pattern */
	size_t		 safecap;	/* longest hold under REDACT_HOLD_SAFE */
	uint8_t		 cls[256];	/* byte -> class */
	uint8_t		 holdable[256];	/* bytes the safe hold keeps: F and pattern bytes */
	uint8_t		 special[256];	/* bytes that may wake the views (none without patterns) */
	uint8_t		*bigram;	/* [REDACT_BIGRAMS]: can a pattern start with it */
	uint32_t	*table;		/* [nstates * stride] */
};

/* A covered interval [s, e) of stream offsets, not yet written. */
struct redact_iv {
	uint64_t	 s;
	uint64_t	 e;
};

/*
 * Views. Besides the input itself, two views of it are matched against the same
 * automaton: the input without what a terminal or a line wrap puts between the
 * characters of a pattern (escape sequences, CR, LF), and the same with %XX decoded
 * (a partly URL-encoded secret). A view byte remembers the input offset its unit
 * starts at, so a match masks the whole input span, junk inside included. The views
 * differ from the input only near a special byte (ESC, CR, LF, '%'): they run, byte
 * by byte and in step with the input's automaton, from a special byte until
 * REDACT_HOLD_ROUND-rounded quiet bytes have passed; elsewhere their automaton state
 * is the input's, so the input's fast path does their work.
 */
#define REDACT_NVIEWS	2	/* 0: junk stripped; 1: junk stripped, %XX decoded */
#define BG_PATTERN	0x1	/* bigram filter: a pattern starts with these two bytes */
#define BG_SPECIAL	0x2	/* they wake the views: ESC, CR or LF, or '%' and a hex digit */

/* The strip parser: where in an escape sequence the input is. */
enum {
	X_IDLE,		/* between sequences */
	X_ESC,		/* after ESC */
	X_INTER,	/* ESC, intermediate bytes (0x20-0x2f) */
	X_CSI,		/* ESC [ parameters and intermediates */
	X_OSC,		/* ESC ] text, until BEL or ESC \ */
	X_OSC_ESC	/* ESC inside an OSC */
};

/* One view of a stream. */
struct redact_view {
	uint32_t	 state;		/* automaton state */
	int		 pend;		/* decoding view: 0, '%' seen (1), and a hex digit (2) */
	unsigned char	 phex;		/* that hex digit */
	uint64_t	 pstart;	/* offset of the pending '%' */
	uint64_t	 phexpos;	/* offset of the pending hex digit */
	uint64_t	 vpos;		/* view bytes so far */
	size_t		 vvalid;	/* map entries that are valid, at most mapmask + 1 */
	size_t		 arun;		/* holdable view bytes ending here, at most safecap */
	uint64_t	*map;		/* [mapmask + 1]: input offset of view byte vpos - k */
};

/* The state of one stream. */
struct redact_state {
	uint64_t	 pos;		/* stream offset of the next input byte */
	uint64_t	 emitted;	/* stream offset of the first byte not yet written */
	uint32_t	 state;		/* automaton state after byte pos - 1 */
	int		 in_run;	/* byte emitted - 1 was covered (mask written) */
	int		 failed;	/* a sink failed: the stream is dead */
	int		 minimal;	/* REDACT_HOLD_MINIMAL */
	size_t		 arun;		/* holdable bytes ending at pos, at most safecap */
	unsigned char	*hold;		/* bytes [emitted, pos); NULL for one-shot use */
	size_t		 holdcap;
	size_t		 nhold;		/* bytes of hold in use, for wiping */
	struct redact_iv *iv;		/* ring of covered intervals, in order */
	size_t		 ivcap;
	size_t		 ivhead;
	size_t		 ivlen;
	int		 active;	/* the views run (near a special byte) */
	int		 esc;		/* strip parser state (X_*) */
	size_t		 gap;		/* junk bytes since the last view byte */
	uint64_t	 quiet;		/* bytes since the last special one */
	size_t		 mapmask;	/* view maps: a power of two, less one */
	int		 veq;		/* no %XX unit since the views woke: view 1 is view 0 */
	int		 lbreak;	/* a CR or LF since the last view byte */
	/*
	 * Collapsed: the views are asleep in the input's state, but a view's
	 * holdable run began before junk the input counts as a break; until the
	 * input's run ends too, the views still hold from c_hold. They wake (their
	 * maps brought up to date) at a special byte or at c_until, where a run
	 * would reach safecap.
	 */
	int		 collapsed;
	uint64_t	 c_from;	/* offset where they went to sleep */
	uint64_t	 c_hold;	/* the earliest start of their runs */
	uint64_t	 c_until;	/* wake here at the latest */
	int		 c_short;	/* asleep at a line break after a short tail */
	int		 c_line;	/* asleep at the line break at c_t: c_run bytes of */
	size_t		 c_run;		/* run before it (SIZE_MAX: not counted yet) */
	uint64_t	 c_t;
	struct redact_view view[REDACT_NVIEWS];
};

struct redact {
	struct redact_ac	*ac;
	size_t			 size;	/* bytes of this allocation */
	struct redact_state	 st;
};

/* One call to redact_run(): where the bytes of each stream offset are. */
struct redact_run {
	const struct redact_ac	*ac;
	struct redact_state	*st;
	const unsigned char	*in;
	uint64_t		 base;	/* stream offset of in[0] */
	uint64_t		 hbase;	/* stream offset of st->hold[0] */
	int			 covered; /* a view or lockstep match since the last emit */
	redact_sink		 sink;
	void			*arg;
};

/* What the build needs for each pattern: where its bytes are. */
struct redact_pat {
	size_t		 off;
	size_t		 len;
};

/* Scratch for building the automaton; all of it in secure memory. */
struct redact_build {
	unsigned char		*pbytes;	/* all patterns, back to back */
	size_t			 ptotal;
	size_t			 pbytes_size;
	struct redact_pat	*pats;
	size_t			 npats;
	size_t			 pats_size;
	uint32_t		*trie;		/* [maxnodes * classes] node numbers */
	uint32_t		*node;		/* [maxnodes * NODE_WORDS] per-node data */
	size_t			 scratch_size;
	size_t			 maxnodes;
	size_t			 nnodes;
};

/* Per-node words of build scratch. */
enum {
	N_DEPTH,
	N_FAIL,
	N_MAXOUT,
	N_HOLD,
	N_FLAGS,
	N_QUEUE,
	N_PERM,
	NODE_WORDS
};
#define NF_TERMINAL	0x1
#define NF_CHILD	0x2

/* Round n up to REDACT_ALIGN; 0 if that overflows. */
static size_t
redact_round(size_t n)
{
	if (n > SIZE_MAX - (REDACT_ALIGN - 1))
		return 0;
	return (n + REDACT_ALIGN - 1) & ~(size_t)(REDACT_ALIGN - 1);
}

/* *sum += n, returning -1 on overflow. */
static int
redact_add(size_t *sum, size_t n)
{
	if (n > SIZE_MAX - *sum)
		return -1;
	*sum += n;
	return 0;
}

/* *prod = a * b, returning -1 on overflow. */
static int
redact_mul(size_t *prod, size_t a, size_t b)
{
	if (a != 0 && b > SIZE_MAX / a)
		return -1;
	*prod = a * b;
	return 0;
}

/* Allocate size bytes (a multiple of REDACT_ALIGN) of zeroed secure memory. */
static void *
redact_secure_alloc(size_t size)
{
	void *p;

	if (size == 0) {
		errno = ENOMEM;
		return NULL;
	}
	if ((p = sodium_malloc(size)) == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	memset(p, 0, size);
	return p;
}

/* Wipe and release secure memory from redact_secure_alloc(). */
static void
redact_secure_free(void *p, size_t size)
{
	if (p == NULL)
		return;
	sodium_memzero(p, size);
	sodium_free(p);
}

/* Append m bytes to an encoding being built (or only count them when out is NULL). */
static void
redact_put(unsigned char *out, size_t *o, const char *bytes, size_t m)
{
	if (out != NULL)
		memcpy(out + *o, bytes, m);
	*o += m;
}

/* Append code point cp as JSON \uXXXX (beyond U+FFFF: a surrogate pair). */
static void
redact_put_u(unsigned char *out, size_t *o, unsigned long cp, const char *hex)
{
	unsigned long u[2];
	char e[6];
	int k, nu = 1;

	u[0] = cp;
	if (cp > 0xffff) {
		u[0] = 0xd800 + ((cp - 0x10000) >> 10);
		u[1] = 0xdc00 + ((cp - 0x10000) & 0x3ff);
		nu = 2;
	}
	for (k = 0; k < nu; k++) {
		e[0] = '\\';
		e[1] = 'u';
		e[2] = hex[u[k] >> 12 & 15];
		e[3] = hex[u[k] >> 8 & 15];
		e[4] = hex[u[k] >> 4 & 15];
		e[5] = hex[u[k] & 15];
		redact_put(out, o, e, 6);
	}
	sodium_memzero(e, sizeof e);
	sodium_memzero(u, sizeof u);
}

/*
 * Base64 of k filler bytes followed by s, keeping only the characters whose six bits
 * all come from s. Character j holds bits [6j, 6j + 6) of the stream; s holds bits
 * [8k, 8(k + n)). The filler is never read.
 */
static size_t
redact_enc_b64(const unsigned char *s, size_t n, size_t k, const char *abc,
    unsigned char *out)
{
	size_t bits = 8 * (k + n), j, o = 0;

	for (j = (8 * k + 5) / 6; 6 * j + 6 <= bits; j++) {
		size_t b = 6 * j / 8 - k, sh = 6 * j % 8;
		unsigned int v = (unsigned int)s[b] << 8;

		if (b + 1 < n)
			v |= s[b + 1];
		if (out != NULL)
			out[o] = (unsigned char)abc[(v >> (10 - sh)) & 63];
		o++;
	}
	return o;
}

/* Variants of the URL encoding. */
#define URL_ALL		0x1	/* every byte as %XX, unreserved ones too */
#define URL_FORM	0x2	/* space as '+' (application/x-www-form-urlencoded) */

/*
 * Percent-encode every byte outside the unreserved set of RFC 3986, or (URL_ALL)
 * every byte; URL_FORM writes a space as '+'.
 */
static size_t
redact_enc_url(const unsigned char *s, size_t n, const char *hex, int flags,
    unsigned char *out)
{
	size_t i, o = 0;
	char e[3];

	for (i = 0; i < n; i++) {
		unsigned char c = s[i];

		if (!(flags & URL_ALL) && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~' ||
		    (c == ' ' && (flags & URL_FORM)))) {
			e[0] = c == ' ' ? '+' : (char)c;
			redact_put(out, &o, e, 1);
			continue;
		}
		e[0] = '%';
		e[1] = hex[c >> 4];
		e[2] = hex[c & 15];
		redact_put(out, &o, e, 3);
	}
	sodium_memzero(e, sizeof e);
	return o;
}

/* Escape s as the body of a JSON string, in the variant flags selects. */
static size_t
redact_enc_json(const unsigned char *s, size_t n, int flags, unsigned char *out)
{
	const char *hex = (flags & JSON_UPPER) ? hex_upper : hex_lower;
	size_t i, o = 0;
	char e[6];

	for (i = 0; i < n; i++) {
		unsigned char c = s[i];
		const char *sh = NULL;

		switch (c) {
		case '"':  sh = "\\\""; break;
		case '\\': sh = "\\\\"; break;
		case '\b': sh = "\\b"; break;
		case '\f': sh = "\\f"; break;
		case '\n': sh = "\\n"; break;
		case '\r': sh = "\\r"; break;
		case '\t': sh = "\\t"; break;
		case '/':
			if (flags & JSON_SLASH)
				sh = "\\/";
			break;
		}
		if (sh != NULL) {
			redact_put(out, &o, sh, 2);
			continue;
		}
		if (c < 0x20 || ((flags & JSON_HTML) && (c == '<' || c == '>' || c == '&'))) {
			memcpy(e, "\\u00", 4);
			e[4] = hex[c >> 4];
			e[5] = hex[c & 15];
			redact_put(out, &o, e, 6);
			continue;
		}
		e[0] = (char)c;
		redact_put(out, &o, e, 1);
	}
	sodium_memzero(e, sizeof e);
	return o;
}

/* Decode one UTF-8 sequence at s[i..n); returns its length (0 if invalid) and *cp. */
static size_t
redact_utf8(const unsigned char *s, size_t n, size_t i, unsigned long *cp)
{
	unsigned char c = s[i];
	size_t len, k;
	unsigned long v, min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if ((c & 0xe0) == 0xc0) {
		len = 2;
		v = c & 0x1f;
		min = 0x80;
	} else if ((c & 0xf0) == 0xe0) {
		len = 3;
		v = c & 0x0f;
		min = 0x800;
	} else if ((c & 0xf8) == 0xf0) {
		len = 4;
		v = c & 0x07;
		min = 0x10000;
	} else
		return 0;
	if (n - i < len)
		return 0;
	for (k = 1; k < len; k++) {
		if ((s[i + k] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (s[i + k] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

/*
 * Escape s as an ASCII-only JSON string body (jansson's JSON_ENSURE_ASCII, Python's
 * json.dumps default): every non-ASCII character as \uXXXX, beyond U+FFFF as a
 * surrogate pair. Only for secrets that are valid UTF-8 with a non-ASCII byte;
 * otherwise the plain JSON forms already cover them and 0 is returned.
 */
static size_t
redact_enc_json_ascii(const unsigned char *s, size_t n, const char *hex, unsigned char *out)
{
	size_t i, o = 0, len;
	unsigned long cp;
	int nonascii = 0;
	char e[6];

	for (i = 0; i < n; i += len) {
		if ((len = redact_utf8(s, n, i, &cp)) == 0)
			return 0;
		nonascii |= cp >= 0x80;
	}
	if (!nonascii)
		return 0;
	for (i = 0; i < n; i += len) {
		len = redact_utf8(s, n, i, &cp);
		if (cp < 0x80 && cp >= 0x20 && cp != '"' && cp != '\\') {
			e[0] = (char)cp;
			redact_put(out, &o, e, 1);
			continue;
		}
		if (cp == '"' || cp == '\\' || cp == '\n' || cp == '\r' || cp == '\t' ||
		    cp == '\b' || cp == '\f') {
			e[0] = '\\';
			e[1] = cp == '\n' ? 'n' : cp == '\r' ? 'r' : cp == '\t' ? 't' :
			    cp == '\b' ? 'b' : cp == '\f' ? 'f' : (char)cp;
			redact_put(out, &o, e, 2);
			continue;
		}
		redact_put_u(out, &o, cp, hex);
	}
	sodium_memzero(e, sizeof e);
	return o;
}

/*
 * Every character as a JSON \uXXXX escape, ASCII ones too (an encoder that escapes
 * everything): UTF-8 decoded to code points, beyond U+FFFF as a surrogate pair; a
 * secret that is not valid UTF-8 has each byte as \u00XX.
 */
static size_t
redact_enc_json_u(const unsigned char *s, size_t n, const char *hex, unsigned char *out)
{
	size_t i, o = 0, len;
	unsigned long cp;
	int utf8 = 1;

	for (i = 0; i < n; i += len) {
		if ((len = redact_utf8(s, n, i, &cp)) == 0) {
			utf8 = 0;
			break;
		}
	}
	for (i = 0; i < n; i += len) {
		if (utf8)
			len = redact_utf8(s, n, i, &cp);
		else {
			len = 1;
			cp = s[i];
		}
		redact_put_u(out, &o, cp, hex);
	}
	cp = 0;
	return o;
}

/* Hex-encode s. */
static size_t
redact_enc_hex(const unsigned char *s, size_t n, const char *hex, unsigned char *out)
{
	size_t i, o = 0;
	char e[2];

	for (i = 0; i < n; i++) {
		e[0] = hex[s[i] >> 4];
		e[1] = hex[s[i] & 15];
		redact_put(out, &o, e, 2);
	}
	sodium_memzero(e, sizeof e);
	return o;
}

/*
 * Write encoding enc of s[0..n) to out, or only measure it when out is NULL.
 * The caller has checked that n * REDACT_EXPAND (and 8 * (n + 2)) cannot overflow.
 */
static size_t
redact_encode(int enc, const unsigned char *s, size_t n, unsigned char *out)
{
	switch (enc) {
	case ENC_RAW:
		if (out != NULL)
			memcpy(out, s, n);
		return n;
	case ENC_B64_0:
	case ENC_B64_1:
	case ENC_B64_2:
		return redact_enc_b64(s, n, (size_t)(enc - ENC_B64_0), b64_std, out);
	case ENC_B64URL_0:
	case ENC_B64URL_1:
	case ENC_B64URL_2:
		return redact_enc_b64(s, n, (size_t)(enc - ENC_B64URL_0), b64_url, out);
	case ENC_URL_UPPER:
		return redact_enc_url(s, n, hex_upper, 0, out);
	case ENC_URL_LOWER:
		return redact_enc_url(s, n, hex_lower, 0, out);
	case ENC_URL_ALL_UPPER:
		return redact_enc_url(s, n, hex_upper, URL_ALL, out);
	case ENC_URL_ALL_LOWER:
		return redact_enc_url(s, n, hex_lower, URL_ALL, out);
	case ENC_FORM_UPPER:
		return redact_enc_url(s, n, hex_upper, URL_FORM, out);
	case ENC_FORM_LOWER:
		return redact_enc_url(s, n, hex_lower, URL_FORM, out);
	case ENC_JSON_U_LOWER:
		return redact_enc_json_u(s, n, hex_lower, out);
	case ENC_JSON_U_UPPER:
		return redact_enc_json_u(s, n, hex_upper, out);
	case ENC_JSON:
		return redact_enc_json(s, n, 0, out);
	case ENC_JSON_SLASH:
		return redact_enc_json(s, n, JSON_SLASH, out);
	case ENC_JSON_UPPER:
		return redact_enc_json(s, n, JSON_UPPER, out);
	case ENC_JSON_SLASH_UPPER:
		return redact_enc_json(s, n, JSON_SLASH | JSON_UPPER, out);
	case ENC_JSON_GO:
		return redact_enc_json(s, n, JSON_HTML, out);
	case ENC_HEX_LOWER:
		return redact_enc_hex(s, n, hex_lower, out);
	case ENC_HEX_UPPER:
		return redact_enc_hex(s, n, hex_upper, out);
	case ENC_JSON_ASCII_LOWER:
		return redact_enc_json_ascii(s, n, hex_lower, out);
	case ENC_JSON_ASCII_UPPER:
		return redact_enc_json_ascii(s, n, hex_upper, out);
	}
	return 0;
}

/* Generate every pattern of every secret into secure memory. */
static int
redact_build_patterns(struct redact_build *b, const struct redact_secret *secrets,
    size_t n)
{
	size_t i, total = 0, count = 0, o = 0, m;
	int enc;

	for (i = 0; i < n; i++) {
		const struct redact_secret *sec = &secrets[i];

		if (sec->value == NULL && sec->len != 0) {
			errno = EINVAL;
			return -1;
		}
		if (sec->len < REDACT_MIN_LEN)
			continue;
		if (sec->len > SIZE_MAX / 8 - 2 || sec->len > SIZE_MAX / REDACT_EXPAND) {
			errno = E2BIG;
			return -1;
		}
		for (enc = 0; enc < ENC_COUNT; enc++) {
			m = redact_encode(enc, sec->value, sec->len, NULL);
			if (m < REDACT_MIN_LEN)
				continue;
			if (redact_add(&total, m) != 0 || redact_add(&count, 1) != 0) {
				errno = E2BIG;
				return -1;
			}
		}
	}
	b->ptotal = total;
	b->npats = count;
	if (count == 0)
		return 0;

	if ((b->pbytes_size = redact_round(total)) == 0 ||
	    redact_mul(&m, count, sizeof *b->pats) != 0 ||
	    (b->pats_size = redact_round(m)) == 0) {
		errno = E2BIG;
		return -1;
	}
	if ((b->pbytes = redact_secure_alloc(b->pbytes_size)) == NULL ||
	    (b->pats = redact_secure_alloc(b->pats_size)) == NULL)
		return -1;

	count = 0;
	for (i = 0; i < n; i++) {
		const struct redact_secret *sec = &secrets[i];

		if (sec->len < REDACT_MIN_LEN)
			continue;
		for (enc = 0; enc < ENC_COUNT; enc++) {
			m = redact_encode(enc, sec->value, sec->len, NULL);
			if (m < REDACT_MIN_LEN)
				continue;
			redact_encode(enc, sec->value, sec->len, b->pbytes + o);
			b->pats[count].off = o;
			b->pats[count].len = m;
			o += m;
			count++;
		}
	}
	return 0;
}

/* Give each byte used by some pattern its own class; all other bytes share one. */
static void
redact_build_classes(struct redact_build *b, struct redact_ac *ac)
{
	uint8_t used[256];
	size_t i;
	unsigned int c, next = 0;

	memset(used, 0, sizeof used);
	for (i = 0; i < b->ptotal; i++)
		used[b->pbytes[i]] = 1;
	for (c = 0; c < 256; c++) {
		if (used[c])
			ac->cls[c] = (uint8_t)next++;
	}
	/* next <= 256; the shared class exists only if some byte is unused. */
	for (c = 0; c < 256; c++) {
		if (!used[c])
			ac->cls[c] = (uint8_t)next;
	}
	ac->classes = next < 256 ? next + 1 : 256;
	for (c = 0; c < 256; c++)
		ac->holdable[c] = used[c];
	for (i = 0; holdable_always[i] != '\0'; i++)
		ac->holdable[(unsigned char)holdable_always[i]] = 1;
	sodium_memzero(used, sizeof used);
}

/* Insert every pattern into the trie, counting distinct ones. */
static void
redact_build_trie(struct redact_build *b, struct redact_ac *ac)
{
	size_t p, i;
	uint32_t *nd = b->node;

	b->nnodes = 1;
	for (p = 0; p < b->npats; p++) {
		const unsigned char *s = b->pbytes + b->pats[p].off;
		size_t len = b->pats[p].len;
		uint32_t u = 0, v;

		for (i = 0; i < len; i++) {
			uint32_t *slot = &b->trie[(size_t)u * ac->classes + ac->cls[s[i]]];

			if ((v = *slot) == 0) {
				v = (uint32_t)b->nnodes++;
				*slot = v;
				nd[(size_t)v * NODE_WORDS + N_DEPTH] =
				    nd[(size_t)u * NODE_WORDS + N_DEPTH] + 1;
				nd[(size_t)u * NODE_WORDS + N_FLAGS] |= NF_CHILD;
			}
			u = v;
		}
		if (!(nd[(size_t)u * NODE_WORDS + N_FLAGS] & NF_TERMINAL)) {
			nd[(size_t)u * NODE_WORDS + N_FLAGS] |= NF_TERMINAL;
			ac->npatterns++;
		}
		if (len > ac->maxlen)
			ac->maxlen = len;
	}
}

/*
 * Breadth-first over the trie: failure links, complete transitions (the trie becomes
 * a DFA), and for each node the longest pattern ending there and its hold.
 */
static void
redact_build_links(struct redact_build *b, struct redact_ac *ac)
{
	uint32_t *nd = b->node, *tr = b->trie;
	size_t qh = 0, qt = 0, c, C = ac->classes;

#define ND(u, w) nd[(size_t)(u) * NODE_WORDS + (w)]
	for (c = 0; c < C; c++) {
		uint32_t v = tr[c];

		if (v != 0) {
			ND(v, N_FAIL) = 0;
			ND(qt++, N_QUEUE) = v;
		}
	}
	while (qh < qt) {
		uint32_t u = ND(qh++, N_QUEUE), f = ND(u, N_FAIL);

		ND(u, N_MAXOUT) = (ND(u, N_FLAGS) & NF_TERMINAL) ? ND(u, N_DEPTH) : ND(f, N_MAXOUT);
		ND(u, N_HOLD) = (ND(u, N_FLAGS) & NF_CHILD) ? ND(u, N_DEPTH) : ND(f, N_HOLD);
		for (c = 0; c < C; c++) {
			uint32_t v = tr[(size_t)u * C + c];

			if (v != 0) {
				ND(v, N_FAIL) = tr[(size_t)f * C + c];
				ND(qt++, N_QUEUE) = v;
			} else
				tr[(size_t)u * C + c] = tr[(size_t)f * C + c];
		}
	}
#undef ND
}

/* Renumber the states by kind and write the final table of row offsets. */
static void
redact_build_table(struct redact_build *b, struct redact_ac *ac)
{
	uint32_t *nd = b->node;
	size_t u, c, C = ac->classes, n[4] = { 0, 0, 0, 0 }, next[4];
	int kind;

#define ND(u, w) nd[(size_t)(u) * NODE_WORDS + (w)]
#define KIND(u) ((u) == 0 ? 0 : ND(u, N_DEPTH) == 1 ? 1 : ND(u, N_MAXOUT) == 0 ? 2 : 3)
	for (u = 0; u < b->nnodes; u++)
		n[KIND(u)]++;
	next[0] = 0;
	for (kind = 1; kind < 4; kind++)
		next[kind] = next[kind - 1] + n[kind - 1];
	for (u = 0; u < b->nnodes; u++)
		ND(u, N_PERM) = (uint32_t)next[KIND(u)]++;
	ac->shallow = (uint32_t)((n[0] + n[1]) * ac->stride);
	ac->match = (uint32_t)((n[0] + n[1] + n[2]) * ac->stride);

	for (u = 0; u < b->nnodes; u++) {
		uint32_t *row = ac->table + (size_t)ND(u, N_PERM) * ac->stride;

		for (c = 0; c < C; c++)
			row[c] = ND(b->trie[u * C + c], N_PERM) * ac->stride;
		row[C] = ND(u, N_MAXOUT);
		row[C + 1] = ND(u, N_HOLD);
	}
#undef KIND
#undef ND
}

/* The bigram index of p[0], p[1]: the same function for patterns and input. */
static inline size_t
redact_bigram(const unsigned char *p)
{
	uint16_t x;

	memcpy(&x, p, sizeof x);
	return x;
}

/*
 * The most a stream holds: safecap view bytes, each a %XX unit at most, with up to
 * REDACT_MAXGAP junk bytes before each and after the last, and a pending unit. Secret-independent
 * beyond what safecap already tells.
 */
static size_t
redact_holdmax(const struct redact_ac *ac)
{
	return ac->safecap * (3 + REDACT_MAXGAP) + 2 * REDACT_MAXGAP + 8;
}

/*
 * Room for covered intervals: they lie in the held bytes, are disjoint, not
 * adjacent and (but for the first) at least REDACT_MIN_LEN long, plus one being
 * added.
 */
static size_t
redact_ivcap(const struct redact_ac *ac)
{
	return redact_holdmax(ac) / 4 + 3;
}

/* Entries of a view's offset map: a power of two above safecap. */
static size_t
redact_mapcap(const struct redact_ac *ac)
{
	size_t n = 64;

	while (n <= ac->safecap + 1)
		n *= 2;
	return n;
}

/* Lock an automaton's spare streams (held for a few instructions only). */
static void
redact_spare_lock(struct redact_ac *ac)
{
	while (atomic_flag_test_and_set_explicit(&ac->spare_lock, memory_order_acquire))
		;
}

/* Unlock them. */
static void
redact_spare_unlock(struct redact_ac *ac)
{
	atomic_flag_clear_explicit(&ac->spare_lock, memory_order_release);
}

/* A freed stream of ac (all zero: it was wiped when freed), or NULL. */
static struct redact *
redact_spare_take(struct redact_ac *ac)
{
	struct redact *r = NULL;

	redact_spare_lock(ac);
	if (ac->nspare > 0)
		r = ac->spare[--ac->nspare];
	redact_spare_unlock(ac);
	return r;
}

/* Wipe a stream of ac and keep it for the next one; 0, or -1 if there are enough. */
static int
redact_spare_put(struct redact_ac *ac, struct redact *r)
{
	int rc = -1;

	redact_spare_lock(ac);
	if (ac->nspare < REDACT_SPARES) {
		sodium_memzero(r, r->size);
		ac->spare[ac->nspare++] = r;
		rc = 0;
	}
	redact_spare_unlock(ac);
	return rc;
}

/* Allocate a stream on ac (taking a reference) with room for what it may hold. */
static struct redact *
redact_stream_alloc(struct redact_ac *ac)
{
	struct redact *r;
	size_t hsz, ivcap, ivsz, mapcap, mapsz, size = 0, m, v;

	if (ac->safecap > SIZE_MAX / (4 * REDACT_MAXGAP) ||
	    (hsz = redact_round(redact_holdmax(ac) + 1)) == 0) {
		errno = ENOMEM;
		return NULL;
	}
	ivcap = redact_ivcap(ac);
	mapcap = redact_mapcap(ac);
	mapsz = redact_round(mapcap * sizeof(uint64_t));
	if (redact_mul(&m, ivcap, sizeof *r->st.iv) != 0 || (ivsz = redact_round(m)) == 0 ||
	    redact_add(&size, redact_round(sizeof *r)) != 0 || redact_add(&size, hsz) != 0 ||
	    redact_add(&size, ivsz) != 0 || redact_add(&size, REDACT_NVIEWS * mapsz) != 0) {
		errno = ENOMEM;
		return NULL;
	}
	if ((r = redact_spare_take(ac)) == NULL && (r = redact_secure_alloc(size)) == NULL)
		return NULL;
	r->size = size;
	r->ac = ac;
	r->st.hold = (unsigned char *)r + redact_round(sizeof *r);
	r->st.holdcap = hsz;
	r->st.iv = (struct redact_iv *)(void *)(r->st.hold + hsz);
	r->st.ivcap = ivcap;
	r->st.mapmask = mapcap - 1;
	for (v = 0; v < REDACT_NVIEWS; v++)
		r->st.view[v].map = (uint64_t *)(void *)((unsigned char *)r->st.iv + ivsz +
		    v * mapsz);
	atomic_fetch_add(&ac->refs, 1);
	return r;
}

/* Mark the bytes and bigrams where the views have work. */
static void
redact_build_special(struct redact_ac *ac)
{
	static const char hex[] = "0123456789abcdefABCDEF";
	unsigned char pair[2];
	unsigned int x;
	size_t k;

	ac->special[0x1b] = ac->special['\r'] = ac->special['\n'] = ac->special['%'] = 1;
	for (x = 0; x < 256; x++) {
		pair[1] = (unsigned char)x;
		pair[0] = 0x1b;
		ac->bigram[redact_bigram(pair)] |= BG_SPECIAL;
		pair[0] = '\r';
		ac->bigram[redact_bigram(pair)] |= BG_SPECIAL;
		pair[0] = '\n';
		ac->bigram[redact_bigram(pair)] |= BG_SPECIAL;
	}
	pair[0] = '%';
	for (k = 0; hex[k] != '\0'; k++) {
		pair[1] = (unsigned char)hex[k];
		ac->bigram[redact_bigram(pair)] |= BG_SPECIAL;
	}
}

/* Build the automaton for secrets[0..n) and a first stream on it. */
struct redact *
redact_new(const struct redact_secret *secrets, size_t n)
{
	struct redact_build b;
	struct redact_ac hdr, *ac = NULL;
	struct redact *r = NULL;
	size_t bound, tsize, size = 0, trie_size, node_size, p;
	int saved;

	memset(&b, 0, sizeof b);
	memset(&hdr, 0, sizeof hdr);
	if (n != 0 && secrets == NULL) {
		errno = EINVAL;
		goto out;
	}
	if (sodium_init() < 0) {
		errno = ENOMEM;
		goto out;
	}
	if (redact_build_patterns(&b, secrets, n) != 0)
		goto out;
	redact_build_classes(&b, &hdr);
	hdr.stride = hdr.classes + 2;

	/* The trie has at most one node per pattern byte, plus the root: refuse early
	 * if even that bound is too big, so the scratch stays bounded too. */
	b.maxnodes = b.ptotal + 1;
	if (redact_mul(&bound, b.maxnodes, (size_t)hdr.stride * sizeof(uint32_t)) != 0 ||
	    bound > REDACT_MAX_AUTOMATON) {
		errno = E2BIG;
		goto out;
	}

	/* Build scratch: trie rows of node numbers, then per-node words. */
	if (redact_mul(&trie_size, b.maxnodes, (size_t)hdr.classes * sizeof(uint32_t)) != 0 ||
	    redact_mul(&node_size, b.maxnodes, NODE_WORDS * sizeof(uint32_t)) != 0 ||
	    (trie_size = redact_round(trie_size)) == 0 ||
	    (node_size = redact_round(node_size)) == 0 ||
	    redact_add(&b.scratch_size, trie_size) != 0 ||
	    redact_add(&b.scratch_size, node_size) != 0) {
		errno = E2BIG;
		goto out;
	}
	if ((b.trie = redact_secure_alloc(b.scratch_size)) == NULL)
		goto out;
	b.node = (uint32_t *)(void *)((unsigned char *)b.trie + trie_size);
	redact_build_trie(&b, &hdr);
	redact_build_links(&b, &hdr);

	/* The automaton proper, sized for the states that exist: header, bigram
	 * filter, table. */
	tsize = b.nnodes * hdr.stride * sizeof(uint32_t);	/* <= bound */
	if (redact_add(&size, redact_round(sizeof *ac)) != 0 ||
	    redact_add(&size, REDACT_BIGRAMS) != 0 ||
	    redact_add(&size, redact_round(tsize)) != 0) {
		errno = E2BIG;
		goto out;
	}
	if ((ac = redact_secure_alloc(size)) == NULL)
		goto out;
	memcpy(ac->cls, hdr.cls, sizeof ac->cls);
	memcpy(ac->holdable, hdr.holdable, sizeof ac->holdable);
	ac->safecap = hdr.maxlen == 0 ? 0 :
	    (hdr.maxlen + REDACT_HOLD_ROUND - 1) / REDACT_HOLD_ROUND * REDACT_HOLD_ROUND - 1;
	ac->classes = hdr.classes;
	ac->stride = hdr.stride;
	ac->maxlen = hdr.maxlen;
	ac->npatterns = hdr.npatterns;
	ac->nstates = b.nnodes;
	ac->size = size;
	atomic_init(&ac->refs, 0);
	atomic_flag_clear(&ac->spare_lock);
	ac->nspare = 0;
	ac->bigram = (uint8_t *)ac + redact_round(sizeof *ac);
	ac->table = (uint32_t *)(void *)(ac->bigram + REDACT_BIGRAMS);
	redact_build_table(&b, ac);
	for (p = 0; p < b.npats; p++)
		ac->bigram[redact_bigram(b.pbytes + b.pats[p].off)] = BG_PATTERN;
	if (ac->maxlen > 0)
		redact_build_special(ac);

	if ((r = redact_stream_alloc(ac)) == NULL)
		goto out;
	ac = NULL;	/* transferred */

out:
	saved = errno;
	sodium_memzero(&hdr, sizeof hdr);
	redact_secure_free(b.trie, b.scratch_size);
	redact_secure_free(b.pats, b.pats_size);
	redact_secure_free(b.pbytes, b.pbytes_size);
	if (ac != NULL)
		redact_secure_free(ac, ac->size);
	errno = saved;
	return r;
}

/* A new empty stream sharing r's automaton. */
struct redact *
redact_new_stream(const struct redact *r)
{
	if (r == NULL) {
		errno = EINVAL;
		return NULL;
	}
	return redact_stream_alloc(r->ac);
}

/*
 * Free a stream, and the automaton with its last stream. A stream is wiped and,
 * while its automaton lives, kept for the next one (redact_spare_put) before its
 * reference goes, so the last one frees every spare with the automaton.
 */
void
redact_free(struct redact *r)
{
	struct redact_ac *ac;
	size_t size;

	if (r == NULL)
		return;
	ac = r->ac;
	size = r->size;
	if (redact_spare_put(ac, r) != 0)
		redact_secure_free(r, size);
	if (atomic_fetch_sub(&ac->refs, 1) == 1) {
		while ((r = redact_spare_take(ac)) != NULL)
			redact_secure_free(r, size);
		redact_secure_free(ac, ac->size);
	}
}

/* Write stream bytes [a, b), which are in the hold buffer, the input, or both. */
static int
redact_emit_raw(struct redact_run *run, uint64_t a, uint64_t b)
{
	if (a < run->base) {
		uint64_t m = (b < run->base ? b : run->base) - a;

		if (run->sink(run->arg, run->st->hold + (a - run->hbase), (size_t)m) != 0)
			return -1;
		a += m;
	}
	if (a < b && run->sink(run->arg, run->in + (a - run->base), (size_t)(b - a)) != 0)
		return -1;
	return 0;
}

/*
 * Write everything settled: raw bytes before stream offset b, and any covered run
 * that starts where the output stands (its bytes are masked whatever comes next).
 */
static int
redact_emit(struct redact_run *run, uint64_t b)
{
	struct redact_state *st = run->st;
	struct redact_iv *f;
	uint64_t stop;

	for (;;) {
		f = st->ivlen != 0 ? &st->iv[st->ivhead] : NULL;
		if (f != NULL && f->s <= st->emitted) {
			if (!st->in_run &&
			    run->sink(run->arg, REDACT_MASK, sizeof REDACT_MASK - 1) != 0)
				return -1;
			st->in_run = 1;
			st->emitted = f->e;
			if (++st->ivhead == st->ivcap)
				st->ivhead = 0;
			st->ivlen--;
			continue;
		}
		stop = b;
		if (f != NULL && f->s < stop)
			stop = f->s;
		if (stop <= st->emitted)
			return 0;
		if (redact_emit_raw(run, st->emitted, stop) != 0)
			return -1;
		st->in_run = 0;
		st->emitted = stop;
	}
}

/*
 * The number of holdable bytes ending at stream offset q (in this call's input, or
 * at its start), at most safecap: what REDACT_HOLD_SAFE holds there.
 */
static size_t
redact_arun(const struct redact_run *run, uint64_t q)
{
	const struct redact_ac *ac = run->ac;
	size_t n = 0, cap = ac->safecap;

	while (n < cap) {
		if (q - n == run->base) {
			/* The run goes on before this input: add what ended there. */
			n += run->st->arun;
			return n < cap ? n : cap;
		}
		if (!ac->holdable[run->in[q - n - 1 - run->base]])
			break;
		n++;
	}
	return n;
}

/*
 * What to hold at stream offset q in automaton state s: the possible prefix, and
 * under REDACT_HOLD_SAFE the (never shorter) run of holdable bytes.
 */
static uint64_t
redact_hold(const struct redact_run *run, uint32_t s, uint64_t q)
{
	uint64_t h = run->ac->table[s + run->ac->classes + 1], safe;

	if (run->st->minimal)
		return h;
	safe = redact_arun(run, q);
	return safe > h ? safe : h;
}

/*
 * Record the covered interval [start, end) of stream offsets. Intervals arrive with
 * non-decreasing ends; one that reaches back over earlier ones absorbs them.
 */
static void
redact_cover(struct redact_run *run, uint64_t start, uint64_t end)
{
	struct redact_state *st = run->st;
	struct redact_iv *back;
	size_t i;

	/* Bytes before emitted are already written, necessarily inside a mask: a match
	 * never starts before the hold of the state preceding it. (A view's match can
	 * end a byte before the input's last one, so it may even end there.) */
	if (end <= st->emitted)
		return;
	if (start < st->emitted)
		start = st->emitted;
	while (st->ivlen != 0) {
		i = st->ivhead + st->ivlen - 1;
		back = &st->iv[i >= st->ivcap ? i - st->ivcap : i];
		if (back->e < start)
			break;
		if (back->s < start)
			start = back->s;
		if (back->e > end)
			end = back->e;
		st->ivlen--;
	}
	if (st->ivlen == st->ivcap)
		abort();	/* the bound in redact_ivcap() is broken */
	i = st->ivhead + st->ivlen;
	back = &st->iv[i >= st->ivcap ? i - st->ivcap : i];
	back->s = start;
	back->e = end;
	st->ivlen++;
}

/* The first offset a view may still need at stream offset q: what it holds. */
static uint64_t
redact_view_hold(const struct redact_run *run, const struct redact_view *v, uint64_t q)
{
	const struct redact_ac *ac = run->ac;
	size_t vh = ac->table[v->state + ac->classes + 1];
	uint64_t start = q;

	/*
	 * A line just ended, in a short holdable tail: it goes out now, so a tool
	 * that prints "ready" and waits is seen waiting. Should the next line carry
	 * on a secret, the rest of it is masked (the match goes on from there), but
	 * these few bytes were shown.
	 */
	if (run->st->lbreak && !run->st->minimal && v->arun < REDACT_WRAP_MIN)
		return v->pend ? v->pstart : q;
	if (!run->st->minimal && v->arun > vh)
		vh = v->arun;
	/* Past what the map knows: bytes already written (covered); hold the rest. */
	if (vh > v->vvalid)
		start = run->st->emitted;
	else if (vh > 0)
		start = v->map[(v->vpos - vh) & run->st->mapmask];
	if (v->pend && v->pstart < start)
		start = v->pstart;
	return start;
}

/*
 * Views asleep at a line break learn the run before it (counted only when needed,
 * and always before the feed that holds the line break ends).
 */
static void
redact_collapsed_settle(struct redact_run *run)
{
	struct redact_state *st = run->st;
	struct redact_view *v = &st->view[0];
	size_t r, j, mask = st->mapmask;

	if (!st->collapsed || !st->c_line || st->c_run != SIZE_MAX)
		return;
	r = redact_arun(run, st->c_t);
	if (r > st->c_t - st->emitted)
		r = (size_t)(st->c_t - st->emitted);
	for (j = 0; j < r; j++)
		v->map[j & mask] = st->c_t - r + j;
	v->vpos = r;
	v->vvalid = r;
	v->arun = r;
	st->c_run = r;
	st->c_short = r < REDACT_WRAP_MIN;
	st->c_hold = st->c_t - r;
}

/*
 * Whether the input's holdable run has ended since collapsed views went to sleep
 * (then theirs ended there too), at stream offset q.
 */
static int
redact_collapsed_broken(const struct redact_run *run, uint64_t q)
{
	size_t a = redact_arun(run, q);

	return a < q - run->st->c_from && a < run->ac->safecap;
}

/* What collapsed views hold at stream offset q (q itself: nothing more). */
static uint64_t
redact_collapsed_hold(struct redact_run *run, uint64_t q)
{
	const struct redact_state *st = run->st;
	uint64_t n = q - st->c_from;

	redact_collapsed_settle(run);
	/* A short tail just before a line break that ends the feed goes now. */
	if (st->c_short && q == st->c_from)
		return q;
	if (!st->c_line)
		return st->c_hold;	/* until the run ends (the caller stops there) */
	if (redact_collapsed_broken(run, q))
		return q;
	if (n + st->c_run <= run->ac->safecap)
		return st->c_hold;
	if (n >= run->ac->safecap)
		return q - run->ac->safecap;
	return st->c_hold + (n + st->c_run - run->ac->safecap);
}

/* Where output may go up to at stream offset q: below every hold, the views' too. */
static uint64_t
redact_limit(struct redact_run *run, uint32_t s, uint64_t q)
{
	uint64_t lim = q - redact_hold(run, s, q), h;
	int k;

	if (!run->st->active) {
		if (run->st->collapsed && !run->st->minimal &&
		    (h = redact_collapsed_hold(run, q)) < lim)
			lim = h;
		return lim;
	}
	for (k = 0; k < (run->st->veq ? 1 : REDACT_NVIEWS); k++) {
		if ((h = redact_view_hold(run, &run->st->view[k], q)) < lim)
			lim = h;
	}
	return lim;
}

/*
 * A pattern ends just before stream offset end, the automaton being in state s:
 * record the covered interval and write what is settled.
 */
static int
redact_match(struct redact_run *run, uint32_t s, uint64_t end)
{
	redact_cover(run, end - run->ac->table[s + run->ac->classes], end);
	return redact_emit(run, redact_limit(run, s, end));
}

/* A view byte b whose unit starts at stream offset start; a match covers up to end. */
static inline __attribute__((always_inline)) void
redact_view_byte(struct redact_run *run, struct redact_view *v, unsigned char b,
    uint64_t start, uint64_t end)
{
	const struct redact_ac *ac = run->ac;
	size_t mask = run->st->mapmask, len;

	v->state = ac->table[v->state + ac->cls[b]];
	v->map[v->vpos & mask] = start;
	v->vpos++;
	if (v->vvalid <= mask)
		v->vvalid++;
	if (!ac->holdable[b])
		v->arun = 0;
	else if (v->arun < ac->safecap)
		v->arun++;
	if (v->state >= ac->match) {
		len = ac->table[v->state + ac->classes];
		/*
		 * A match reaching back past what the map knows began in bytes
		 * already written, which were covered (nothing else leaves the
		 * hold so early): it goes on from there, as the cover clamps it.
		 */
		redact_cover(run, len > v->vvalid ? 0 : v->map[(v->vpos - len) & mask], end);
		run->covered = 1;
	}
}

/*
 * A pending '%' (and hex digit) turned out literal: view bytes of their own. A
 * match ending with the '%' ends a byte before one the input may have found
 * ending at the hex digit; the two overlap, so the cover still merges them.
 */
static void
redact_view_unpend(struct redact_run *run, struct redact_view *v)
{
	if (v->pend == 0)
		return;
	redact_view_byte(run, v, '%', v->pstart, v->pstart + 1);
	if (v->pend == 2)
		redact_view_byte(run, v, v->phex, v->phexpos, v->phexpos + 1);
	v->pend = 0;
}

/* The decoding view: content byte b at offset q, %XX decoded. */
static inline __attribute__((always_inline)) void
redact_view_decode(struct redact_run *run, struct redact_view *v, unsigned char b, uint64_t q)
{
	int h;

	for (;;) {
		if (v->pend == 0) {
			if (b == '%') {
				v->pend = 1;
				v->pstart = q;
			} else
				redact_view_byte(run, v, b, q, q + 1);
			return;
		}
		h = util_hexval(b);
		if (v->pend == 1 && h >= 0) {
			v->pend = 2;
			v->phex = b;
			v->phexpos = q;
			return;
		}
		if (v->pend == 2 && h >= 0) {
			v->pend = 0;
			redact_view_byte(run, v, (unsigned char)(util_hexval(v->phex) << 4 | h),
			    v->pstart, q + 1);
			return;
		}
		/* Not a unit after all: the pending bytes are literal, then b afresh. */
		redact_view_unpend(run, v);
	}
}

/* Forget what the views have seen: too much junk between two characters. */
static void
redact_view_break(struct redact_state *st)
{
	int k;

	for (k = 0; k < REDACT_NVIEWS; k++) {
		st->view[k].state = 0;
		st->view[k].pend = 0;
		st->view[k].vvalid = 0;
		st->view[k].arun = 0;
	}
	st->gap = 0;
}

/* A junk byte (part of an escape sequence, CR, LF): no %XX unit spans it. */
static void
redact_view_junk(struct redact_run *run)
{
	struct redact_state *st = run->st;

	redact_view_unpend(run, &st->view[1]);
	st->quiet = 0;
	if (++st->gap > REDACT_MAXGAP) {
		redact_view_break(st);
		st->esc = X_IDLE;
	}
}

/* The decoding view goes its own way: it starts as a copy of the other. */
static void
redact_view_split(struct redact_state *st)
{
	struct redact_view *a = &st->view[0], *b = &st->view[1];
	uint64_t *map = b->map, j;

	for (j = a->vpos - a->vvalid; j < a->vpos; j++)
		map[j & st->mapmask] = a->map[j & st->mapmask];
	*b = *a;
	b->map = map;
	st->veq = 0;
}

/* Feed input byte b at stream offset q to the strip parser and the views. */
static inline __attribute__((always_inline)) void
redact_view_feed(struct redact_run *run, unsigned char b, uint64_t q)
{
	struct redact_state *st = run->st;

	for (;;) {
		switch (st->esc) {
		case X_IDLE:
			if (b == 0x1b) {
				st->esc = X_ESC;
				redact_view_junk(run);
			} else if (b == '\r' || b == '\n') {
				st->lbreak = 1;
				redact_view_junk(run);
			} else {
				st->gap = 0;
				st->lbreak = 0;
				st->quiet = b == '%' ? 0 : st->quiet + 1;
				/* Until a '%' the decoding view is the other one. */
				if (st->veq && b == '%')
					redact_view_split(st);
				/* Decoding first: its pending bytes end before q + 1. */
				if (!st->veq)
					redact_view_decode(run, &st->view[1], b, q);
				redact_view_byte(run, &st->view[0], b, q, q + 1);
			}
			return;
		case X_ESC:
			if (b == '[')
				st->esc = X_CSI;
			else if (b == ']')
				st->esc = X_OSC;
			else if (b >= 0x20 && b <= 0x2f)
				st->esc = X_INTER;
			else if (b >= 0x30 && b <= 0x7e)
				st->esc = X_IDLE;
			else {
				st->esc = X_IDLE;	/* a lone ESC: junk; b afresh */
				continue;
			}
			redact_view_junk(run);
			return;
		case X_INTER:
			if (b >= 0x30 && b <= 0x7e)
				st->esc = X_IDLE;
			else if (b < 0x20 || b > 0x2f) {
				st->esc = X_IDLE;
				continue;
			}
			redact_view_junk(run);
			return;
		case X_CSI:
			if (b >= 0x40 && b <= 0x7e)
				st->esc = X_IDLE;
			else if (b < 0x20 || b > 0x3f) {
				st->esc = X_IDLE;
				continue;
			}
			redact_view_junk(run);
			return;
		case X_OSC:
			if (b == 0x07)
				st->esc = X_IDLE;
			else if (b == 0x1b)
				st->esc = X_OSC_ESC;
			else if (b < 0x20 || b == 0x7f) {
				st->esc = X_IDLE;
				continue;
			}
			redact_view_junk(run);
			return;
		case X_OSC_ESC:
			if (b == '\\') {
				st->esc = X_IDLE;
				redact_view_junk(run);
				return;
			}
			st->esc = X_ESC;	/* the ESC began a new sequence */
			continue;
		}
		return;
	}
}

/*
 * Whether the views are in the input's state s (the caller has checked that the
 * bytes that state spells are plain content, so their holds of it span the same
 * bytes): from here on the input's automaton does their matching exactly.
 */
static inline __attribute__((always_inline)) int
redact_view_same(const struct redact_run *run, uint32_t s)
{
	const struct redact_state *st = run->st;
	int k;

	for (k = 0; k < (st->veq ? 1 : REDACT_NVIEWS); k++) {
		if (st->view[k].state != s)
			return 0;
	}
	return 1;
}

/*
 * Put the views to sleep at stream offset q (after the input's state s, which is
 * theirs): only their holdable runs still reach back over junk. Returns 0, or 1
 * when even those are the input's (none), so nothing is left to remember.
 */
static int
redact_view_collapse(struct redact_run *run, uint64_t q)
{
	struct redact_state *st = run->st;
	size_t maxrun = 0;
	uint64_t from = q, h;
	int k;

	st->active = 0;
	for (k = 0; k < (st->veq ? 1 : REDACT_NVIEWS); k++) {
		const struct redact_view *v = &st->view[k];

		if (v->arun == 0)
			continue;
		h = v->arun > v->vvalid ? st->emitted : v->map[(v->vpos - v->arun) &
		    st->mapmask];
		if (h < from)
			from = h;
		if (v->arun > maxrun)
			maxrun = v->arun;
	}
	if (maxrun == 0 || st->minimal || st->quiet > run->ac->safecap)
		return 1;
	st->collapsed = 1;
	st->c_short = 0;
	st->c_line = 0;
	st->c_from = q;
	st->c_hold = from;
	st->c_until = q + (run->ac->safecap - maxrun);
	return 0;
}

/*
 * A line break at stream offset t after a holdable run, outside any match (input
 * state the root): the views would drop it and be at the root too, their run going
 * on. Put them to sleep at once, remembering that run (the bytes before t).
 */
static void
redact_view_linebreak(struct redact_run *run, uint64_t t)
{
	struct redact_state *st = run->st;

	st->view[0].state = 0;
	st->view[0].pend = 0;
	st->view[1].pend = 0;
	st->veq = 1;
	st->esc = X_IDLE;
	st->gap = 0;
	st->quiet = 0;
	st->lbreak = 1;
	st->active = 0;
	st->collapsed = 1;
	st->c_line = 1;
	st->c_run = SIZE_MAX;	/* counted when needed: redact_collapsed_settle */
	st->c_t = t;
	st->c_from = t + 1;
}

/*
 * Wake collapsed views at stream offset u in input state s: everything since they
 * slept was holdable content, one view byte per input byte.
 */
static void
redact_view_wake(struct redact_run *run, uint32_t s, uint64_t u)
{
	struct redact_state *st = run->st;
	size_t mask = st->mapmask, n = (size_t)(u - st->c_from), j;
	int k;

	redact_collapsed_settle(run);
	for (k = 0; k < REDACT_NVIEWS; k++) {
		struct redact_view *v = &st->view[k];

		for (j = n > mask + 1 ? n - mask - 1 : 0; j < n; j++)
			v->map[(v->vpos + j) & mask] = st->c_from + j;
		v->vpos += n;
		v->vvalid = v->vvalid + n > mask + 1 ? mask + 1 : v->vvalid + n;
		v->arun = v->arun + n > run->ac->safecap ? run->ac->safecap : v->arun + n;
		v->state = s;
	}
	st->quiet += n;
	st->collapsed = 0;
	st->active = 1;
}

/*
 * Start the views at stream offset t, in input state s. They were idle (see
 * redact_view_idle), so each view's state is the input's, and its last view bytes,
 * as far back as a hold or a match can reach, are the input's own.
 */
static void
redact_view_start(struct redact_run *run, uint32_t s, uint64_t t)
{
	struct redact_state *st = run->st;
	size_t arun = redact_arun(run, t), n = run->ac->table[s + run->ac->classes + 1], j;
	size_t mask = st->mapmask;
	struct redact_view *v;
	uint64_t *map;

	/* Only the view bytes a hold can reach back to: the prefix, the run. */
	if (arun > n)
		n = arun;
	if (n > t - st->emitted)
		n = (size_t)(t - st->emitted);
	v = &st->view[0];
	map = v->map;
	for (j = 0; j < n; j++)
		map[j & mask] = t - n + j;
	v->state = s;
	v->pend = 0;
	v->vpos = n;
	v->vvalid = n;
	v->arun = arun;
	st->view[1].pend = 0;
	st->veq = 1;
	st->active = 1;
	st->esc = X_IDLE;
	st->gap = 0;
	st->quiet = 0;
}

/*
 * The first i in [p, len - 1) where a pattern could start at in[i], in[i + 1];
 * len if there is none. The caller guarantees p + 1 < len.
 */
static size_t
redact_skip(const uint8_t *bg, const unsigned char *in, size_t p, size_t len)
{
	size_t i = p;

	while (len - i > 16) {
		const unsigned char *q = in + i;
		unsigned int any;

		any = bg[redact_bigram(q)] | bg[redact_bigram(q + 1)] |
		    bg[redact_bigram(q + 2)] | bg[redact_bigram(q + 3)] |
		    bg[redact_bigram(q + 4)] | bg[redact_bigram(q + 5)] |
		    bg[redact_bigram(q + 6)] | bg[redact_bigram(q + 7)];
		any |= bg[redact_bigram(q + 8)] | bg[redact_bigram(q + 9)] |
		    bg[redact_bigram(q + 10)] | bg[redact_bigram(q + 11)] |
		    bg[redact_bigram(q + 12)] | bg[redact_bigram(q + 13)] |
		    bg[redact_bigram(q + 14)] | bg[redact_bigram(q + 15)];
		if (any)
			break;
		i += 16;
	}
	for (; i + 1 < len; i++) {
		if (bg[redact_bigram(in + i)])
			return i;
	}
	return len;
}

/*
 * Whether the special byte in[i] gives the views work: ESC, CR and LF always, '%'
 * when a %XX unit follows (or may, at the end of the input); any other '%' is the
 * same byte in every view.
 */
static inline int
redact_wakes(const unsigned char *in, size_t i, size_t end)
{
	if (in[i] != '%' || end - i < 3)
		return 1;
	return util_hexval(in[i + 1]) >= 0 && util_hexval(in[i + 2]) >= 0;
}

/*
 * The input's automaton over in[*ip, end), from state *sp, with the bigram filter:
 * where the automaton is in the root or a depth-1 state after in[i - 1], every
 * longer match must start with a bigram of some pattern, at i - 1 or later: the
 * filter finds the next such place, and the automaton restarts from the root there
 * in the state it would have reached. No pattern can end in between (all are at
 * least REDACT_MIN_LEN long), so nothing is lost. The filter also flags where the
 * views have work (BG_SPECIAL): the scan stops before such a byte, or one that
 * might be (ESC, CR, LF, '%'), and leaves *ip there, *sp exact after in[*ip - 1].
 */
static int
redact_scan(struct redact_run *run, uint32_t *sp, size_t *ip, size_t end)
{
	const struct redact_ac *ac = run->ac;
	const uint32_t *T = ac->table;
	const uint8_t *cls = ac->cls, *bg = ac->bigram, *special = ac->special;
	const unsigned char *in = run->in;
	uint32_t s = *sp, shallow = ac->shallow, match = ac->match;
	size_t i = *ip;
	int rc = 0;

	while (i < end) {
		do {
			if (special[in[i]] && redact_wakes(in, i, end))
				goto out;
			s = T[s + cls[in[i++]]];
			if (s >= match && redact_match(run, s, run->base + i) != 0) {
				rc = -1;
				goto out;
			}
		} while (s >= shallow && i < end);
		if (i == end)
			break;
		i = redact_skip(bg, in, i - 1, end);
		if (i == end) {
			/* The last byte starts no bigram: it may still be special. */
			if (special[in[end - 1]]) {
				i = end - 1;
				s = T[cls[in[end - 2]]];
				goto out;
			}
			s = T[cls[in[end - 1]]];
			break;
		}
		if ((bg[redact_bigram(in + i)] & BG_SPECIAL) && redact_wakes(in, i, end)) {
			s = T[cls[in[i - 1]]];
			goto out;
		}
		s = T[cls[in[i++]]];
	}
out:
	*sp = s;
	*ip = i;
	return rc;
}

/*
 * Run len bytes of a stream through the automaton, writing what is settled; at eof
 * write the rest too and make the stream empty again.
 *
 * Where the automaton is in the root or a depth-1 state after in[i - 1], every
 * longer match must start with a bigram of some pattern, at i - 1 or later: the
 * bigram filter finds the next such place, and the automaton restarts from the root
 * there in the state it would have reached. No pattern can end in between (all are
 * at least REDACT_MIN_LEN long), so nothing is lost.
 */
static int
redact_run(const struct redact_ac *ac, struct redact_state *st, const unsigned char *in,
    size_t len, int eof, redact_sink sink, void *arg)
{
	struct redact_run run;
	const uint32_t *T = ac->table;
	const uint8_t *cls = ac->cls;
	uint32_t s = st->state, match = ac->match;
	size_t i = 0, keep, old, stop, brk;
	uint64_t end, hold, q;
	int k;

	if (st->failed) {
		errno = EIO;
		return -1;
	}
	if ((uint64_t)len > UINT64_MAX - st->pos) {
		errno = EOVERFLOW;
		goto fail;
	}
	run.ac = ac;
	run.st = st;
	run.in = in;
	run.base = st->pos;
	run.hbase = st->emitted;
	run.sink = sink;
	run.arg = arg;
	run.covered = 0;

	while (i < len) {
		if (!st->active && st->collapsed && st->c_line) {
			/* Asleep at a line break: fast up to the next special byte. */
			if (redact_scan(&run, &s, &i, len) != 0)
				goto fail;
			if (i == len)
				break;
			if (run.base + i == st->c_from && s == 0 &&
			    (in[i] == '\n' || in[i] == '\r') && !ac->holdable[in[i]]) {
				/* CR LF, or blank lines: still nothing but line breaks. */
				s = T[s + cls[in[i++]]];
				st->c_from++;
				continue;
			}
			if (redact_collapsed_broken(&run, run.base + i))
				st->collapsed = 0;	/* their run ended with the input's */
			else
				redact_view_wake(&run, s, run.base + i);
		}
		if (!st->active && st->collapsed) {
			/* Fast up to where the input's run ends, or a view's would cap. */
			stop = st->c_until - run.base < len ? (size_t)(st->c_until - run.base) : len;
			for (brk = i; brk < stop && ac->holdable[in[brk]]; brk++)
				;
			if (redact_scan(&run, &s, &i, brk) != 0)
				goto fail;
			if (i == brk && i < len && run.base + i == st->c_from && s == 0 &&
			    (in[i] == '\n' || in[i] == '\r') && !ac->holdable[in[i]]) {
				/* CR LF, or blank lines: still nothing but line breaks. */
				s = T[s + cls[in[i++]]];
				st->c_from++;
				st->c_until++;
				continue;
			}
			if (i < brk || (i == stop && i < len) ||
			    (i < len && ac->special[in[i]] && redact_wakes(in, i, len))) {
				/* A special byte, or the cap: the views go on in step. */
				redact_view_wake(&run, s, run.base + i);
			} else if (i < len) {
				st->collapsed = 0;	/* the run ends here for all */
				continue;
			} else
				break;
		}
		if (!st->active) {
			/* The input alone, fast, up to the next special byte. */
			if (redact_scan(&run, &s, &i, len) != 0)
				goto fail;
			if (i == len)
				break;
			/*
			 * A line break after a byte no pattern uses, outside any
			 * match: the views would drop it and be where the input is
			 * after it (the root, no run), so they need not wake.
			 */
			if ((in[i] == '\n' || in[i] == '\r') && s == 0 && !ac->holdable[in[i]] &&
			    !st->minimal) {
				if (i > 0 ? ac->holdable[in[i - 1]] : st->arun != 0)
					redact_view_linebreak(&run, run.base + i);
				s = T[s + cls[in[i++]]];
				continue;
			}
			redact_view_start(&run, s, run.base + i);
		}
		/* Near special bytes: the input and its views byte by byte, in step. */
		for (; i < len && st->active; i++) {
			q = run.base + i;
			run.covered = 0;
			redact_view_feed(&run, in[i], q);
			s = T[s + cls[in[i]]];
			if (s >= match) {
				redact_cover(&run, q + 1 - T[s + ac->classes], q + 1);
				run.covered = 1;
			}
			if (run.covered && redact_emit(&run, redact_limit(&run, s, q + 1)) != 0)
				goto fail;
			if (st->esc == X_IDLE && st->gap == 0 && st->view[1].pend == 0 &&
			    st->quiet >= T[s + ac->classes + 1] && redact_view_same(&run, s))
				(void)redact_view_collapse(&run, q + 1);
		}
	}

	redact_collapsed_settle(&run);
	st->state = s;
	st->pos += len;
	if (eof)
		end = st->pos;
	else {
		hold = redact_hold(&run, s, st->pos);
		st->arun = redact_arun(&run, st->pos);
		end = redact_limit(&run, s, st->pos);
		if (st->pos - hold < end)
			end = st->pos - hold;
	}
	if (redact_emit(&run, end) != 0)
		goto fail;
	if (eof) {
		if (st->hold != NULL)
			sodium_memzero(st->hold, st->nhold);
		st->pos = st->emitted = 0;
		st->state = 0;
		st->in_run = 0;
		st->nhold = 0;
		st->arun = 0;
		st->ivhead = st->ivlen = 0;
		st->active = 0;
		st->collapsed = 0;
		st->c_short = 0;
		st->c_line = 0;
		st->lbreak = 0;
		st->esc = X_IDLE;
		st->gap = 0;
		st->quiet = 0;
		for (k = 0; k < REDACT_NVIEWS; k++)
			st->view[k].pend = 0;
		return 0;
	}

	/* Keep the bytes still open: first any left in the hold buffer, then input. */
	keep = (size_t)(st->pos - st->emitted);
	if (keep > st->holdcap)
		abort();	/* the hold is bounded by safecap */
	if (st->emitted < run.base) {
		old = (size_t)(run.base - st->emitted);
		memmove(st->hold, st->hold + (st->emitted - run.hbase), old);
		if (len != 0)
			memcpy(st->hold + old, in, len);
	} else if (keep != 0)
		memcpy(st->hold, in + (st->emitted - run.base), keep);
	if (st->nhold > keep)
		sodium_memzero(st->hold + keep, st->nhold - keep);
	st->nhold = keep;
	return 0;

fail:
	st->failed = 1;
	return -1;
}

/* Choose how much a stream holds back. */
void
redact_set_hold(struct redact *r, enum redact_hold how)
{
	r->st.minimal = how == REDACT_HOLD_MINIMAL;
}

/* Filter a chunk of a stream. */
int
redact_feed(struct redact *r, const void *in, size_t len, redact_sink sink, void *arg)
{
	if (len == 0 && !r->st.failed)
		return 0;
	return redact_run(r->ac, &r->st, in, len, 0, sink, arg);
}

/* End a stream: write what was held back. */
int
redact_flush(struct redact *r, redact_sink sink, void *arg)
{
	return redact_run(r->ac, &r->st, NULL, 0, 1, sink, arg);
}

/* Bytes fed but not yet written. */
size_t
redact_held(const struct redact *r)
{
	return (size_t)(r->st.pos - r->st.emitted);
}

/* A growing string for redact_string(). */
struct redact_buf {
	char	*p;
	size_t	 len;
	size_t	 cap;
};

/* Sink for redact_string(): append, growing the buffer with overflow checks. */
static int
redact_buf_sink(void *arg, const void *buf, size_t len)
{
	struct redact_buf *b = arg;
	size_t need = b->len, cap;
	char *p;

	if (redact_add(&need, len) != 0 || redact_add(&need, 1) != 0) {
		errno = ENOMEM;
		return -1;
	}
	if (need > b->cap) {
		cap = b->cap != 0 ? b->cap : 64;
		while (cap < need) {
			if (cap > SIZE_MAX / 2) {
				cap = need;
				break;
			}
			cap *= 2;
		}
		if ((p = realloc(b->p, cap)) == NULL)
			return -1;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, buf, len);
	b->len += len;
	return 0;
}

/* Redact a whole string with r's automaton and a throwaway stream state. */
char *
redact_string(const struct redact *r, const char *s)
{
	struct redact_state st;
	struct redact_buf b;
	char *ret = NULL;
	size_t len;
	int k;

	if (s == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if (r == NULL)
		return strdup(s);

	memset(&st, 0, sizeof st);
	memset(&b, 0, sizeof b);
	len = strlen(s);
	st.ivcap = redact_ivcap(r->ac);
	st.mapmask = redact_mapcap(r->ac) - 1;
	if ((st.iv = calloc(st.ivcap, sizeof *st.iv)) == NULL)
		goto out;
	for (k = 0; k < REDACT_NVIEWS; k++) {
		if ((st.view[k].map = calloc(st.mapmask + 1, sizeof(uint64_t))) == NULL)
			goto out;
	}
	/* The whole string is final: nothing is ever kept, so no hold buffer. */
	if (redact_run(r->ac, &st, (const unsigned char *)s, len, 1, redact_buf_sink, &b) != 0)
		goto out;
	if (redact_buf_sink(&b, "", 1) != 0)
		goto out;
	ret = b.p;
	b.p = NULL;	/* transferred */

out:
	free(st.iv);
	for (k = 0; k < REDACT_NVIEWS; k++)
		free(st.view[k].map);
	free(b.p);
	return ret;
}

/* Number of distinct patterns. */
size_t
redact_patterns(const struct redact *r)
{
	return r->ac->npatterns;
}

/* Secure memory used by the automaton. */
size_t
redact_automaton_size(const struct redact *r)
{
	return r->ac->size;
}
