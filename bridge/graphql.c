/* A bounded parser for GraphQL executable documents (see graphql.h). */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graphql.h"
#include "util.h"

/* Arena chunks: at least this big; the arena never holds more than GRAPHQL_ARENA_MAX. */
#define GRAPHQL_CHUNK		(64 * 1024)
#define GRAPHQL_ARENA_MAX	(64 * 1024 * 1024)

struct graphql_chunk {
	struct graphql_chunk	*next;
	size_t			 cap;
	size_t			 used;
	unsigned char		 data[];
};

struct graphql_arena {
	struct graphql_chunk	*head;
	size_t			 total;
};

enum graphql_tok {
	TOK_EOF,
	TOK_PUNCT,	/* one of !$&()...:=@[]{|}; "..." is '.' */
	TOK_NAME,
	TOK_INT,
	TOK_FLOAT,
	TOK_STRING	/* regular or block string, decoded into str/slen */
};

struct graphql_parser {
	const char		*src;
	size_t			 len;
	size_t			 pos;
	struct graphql_arena	*arena;
	/* The current token. */
	enum graphql_tok	 tok;
	char			 punct;
	int			 block;		/* TOK_STRING: a block string */
	const char		*start;		/* token text in src */
	size_t			 tlen;
	char			*str;		/* TOK_STRING: decoded, in the arena */
	size_t			 slen;
	size_t			 ntokens;
	int			 depth;
	char			*err;		/* first error; parsing stops */
};

/* Allocate n zeroed bytes from the arena, or NULL when it is full. */
static void *
graphql_alloc(struct graphql_arena *a, size_t n)
{
	struct graphql_chunk *c = a->head;
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (c == NULL || c->cap - c->used < n) {
		size_t cap = n > GRAPHQL_CHUNK ? n : GRAPHQL_CHUNK;

		if (a->total + cap > GRAPHQL_ARENA_MAX)
			return NULL;
		c = xmalloc(sizeof *c + cap);
		c->next = a->head;
		c->cap = cap;
		c->used = 0;
		a->head = c;
		a->total += cap;
	}
	p = c->data + c->used;
	c->used += n;
	memset(p, 0, n);
	return p;
}

/* Record the first error. */
static void __attribute__((format(printf, 2, 3)))
graphql_error(struct graphql_parser *p, const char *fmt, ...)
{
	va_list ap;

	if (p->err != NULL)
		return;
	va_start(ap, fmt);
	xvasprintf(&p->err, fmt, ap);
	va_end(ap);
}

/* Arena allocation that records an error when the arena is full. */
static void *
graphql_new(struct graphql_parser *p, size_t n)
{
	void *v = graphql_alloc(p->arena, n);

	if (v == NULL)
		graphql_error(p, "the GraphQL document is too large");
	return v;
}

/* Copy n bytes into the arena as a NUL-terminated string. */
static char *
graphql_strndup(struct graphql_parser *p, const char *s, size_t n)
{
	char *d;

	if (n >= GRAPHQL_ARENA_MAX || (d = graphql_new(p, n + 1)) == NULL)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

/* Length of the valid UTF-8 sequence at s[0..n) (RFC 3629), or 0. */
static size_t
graphql_utf8(const unsigned char *s, size_t n)
{
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (s[0] >= 0xe0 && s[0] <= 0xef) {
		if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
			return 0;
		if (s[0] == 0xe0 && s[1] < 0xa0)
			return 0;	/* overlong */
		if (s[0] == 0xed && s[1] >= 0xa0)
			return 0;	/* surrogate */
		return 3;
	}
	if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 ||
		    (s[3] & 0xc0) != 0x80)
			return 0;
		if ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
			return 0;
		return 4;
	}
	return 0;
}

/* Append code point cp as UTF-8 to d; returns bytes written. */
static size_t
graphql_put_utf8(char *d, uint32_t cp)
{
	if (cp < 0x80) {
		d[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		d[0] = (char)(0xc0 | (cp >> 6));
		d[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		d[0] = (char)(0xe0 | (cp >> 12));
		d[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		d[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	d[0] = (char)(0xf0 | (cp >> 18));
	d[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	d[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	d[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Read the escape after '\u' at s[*i]: \uXXXX or \u{X...}; -1 if malformed. */
static int64_t
graphql_unicode_escape(const char *s, size_t n, size_t *i)
{
	int64_t cp = 0;
	size_t k;
	int h;

	if (*i < n && s[*i] == '{') {
		for (k = *i + 1; k < n && s[k] != '}'; k++) {
			if ((h = util_hexval(s[k])) < 0 || cp > 0x10ffff)
				return -1;
			cp = cp * 16 + h;
		}
		if (k >= n || k == *i + 1 || cp > 0x10ffff)
			return -1;
		*i = k + 1;
		return cp;
	}
	if (n - *i < 4)
		return -1;
	for (k = 0; k < 4; k++) {
		if ((h = util_hexval(s[*i + k])) < 0)
			return -1;
		cp = cp * 16 + h;
	}
	*i += 4;
	return cp;
}

/* Lex a regular string starting at the opening quote; decodes into p->str. */
static void
graphql_lex_string(struct graphql_parser *p)
{
	const char *s = p->src;
	size_t i = p->pos + 1, o = 0, end;
	char *d;

	/* Find the end first: decoded text is never longer than the source text. */
	for (end = i; end < p->len && s[end] != '"' && s[end] != '\n' && s[end] != '\r'; end++) {
		if (s[end] == '\\')
			end++;
	}
	if ((d = graphql_new(p, end - p->pos + 1)) == NULL)
		return;
	for (;;) {
		int64_t cp, lo;

		if (i >= p->len || s[i] == '\n' || s[i] == '\r') {
			graphql_error(p, "unterminated string in the GraphQL document");
			return;
		}
		if (s[i] == '"')
			break;
		if (s[i] != '\\') {
			d[o++] = s[i++];
			continue;
		}
		if (++i >= p->len) {
			graphql_error(p, "unterminated string in the GraphQL document");
			return;
		}
		switch (s[i++]) {
		case '"': d[o++] = '"'; break;
		case '\\': d[o++] = '\\'; break;
		case '/': d[o++] = '/'; break;
		case 'b': d[o++] = '\b'; break;
		case 'f': d[o++] = '\f'; break;
		case 'n': d[o++] = '\n'; break;
		case 'r': d[o++] = '\r'; break;
		case 't': d[o++] = '\t'; break;
		case 'u':
			if ((cp = graphql_unicode_escape(s, p->len, &i)) < 0)
				goto bad;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				/* A leading surrogate needs its trailing half. */
				if (p->len - i < 2 || s[i] != '\\' || s[i + 1] != 'u')
					goto bad;
				i += 2;
				if ((lo = graphql_unicode_escape(s, p->len, &i)) < 0 ||
				    lo < 0xdc00 || lo > 0xdfff)
					goto bad;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp <= 0xdfff)
				goto bad;
			/* \u escapes are at least 6 bytes long, UTF-8 at most 4. */
			o += graphql_put_utf8(d + o, (uint32_t)cp);
			break;
		default:
			goto bad;
		}
	}
	d[o] = '\0';
	p->str = d;
	p->slen = o;
	p->tok = TOK_STRING;
	p->block = 0;
	p->tlen = i + 1 - p->pos;
	p->pos = i + 1;
	return;
bad:
	graphql_error(p, "invalid escape sequence in a GraphQL string");
}

/* Whether a line of a block string is only blanks. */
static int
graphql_blank(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] != ' ' && s[i] != '\t')
			return 0;
	}
	return 1;
}

/* Lex a block string ("""...""") and apply the spec's BlockStringValue(). */
static void
graphql_lex_block_string(struct graphql_parser *p)
{
	const char *s = p->src;
	size_t i = p->pos + 3, rlen = 0, o = 0, nlines = 0, k, common = SIZE_MAX;
	size_t first = 0, last, *ls = NULL, *le = NULL;
	char *raw, *d;

	for (k = i; k < p->len; k++) {
		if (p->len - k >= 4 && memcmp(s + k, "\\\"\"\"", 4) == 0)
			k += 3;
		else if (p->len - k >= 3 && memcmp(s + k, "\"\"\"", 3) == 0)
			break;
	}
	if ((raw = graphql_new(p, k - p->pos + 1)) == NULL)
		return;
	for (;;) {
		if (i >= p->len) {
			graphql_error(p, "unterminated block string in the GraphQL document");
			return;
		}
		if (p->len - i >= 3 && memcmp(s + i, "\"\"\"", 3) == 0)
			break;
		if (p->len - i >= 4 && memcmp(s + i, "\\\"\"\"", 4) == 0) {
			memcpy(raw + rlen, "\"\"\"", 3);
			rlen += 3;
			i += 4;
			continue;
		}
		raw[rlen++] = s[i++];
	}
	p->tlen = i + 3 - p->pos;
	p->pos = i + 3;
	/* Split into lines at \r\n, \n or \r. */
	for (k = 0; k <= rlen; k++) {
		if (k == rlen || raw[k] == '\n' || raw[k] == '\r') {
			nlines++;
			if (k < rlen && raw[k] == '\r' && k + 1 < rlen && raw[k + 1] == '\n')
				k++;
		}
	}
	ls = graphql_new(p, nlines * sizeof *ls);
	le = graphql_new(p, nlines * sizeof *le);
	if ((d = graphql_new(p, rlen + 1)) == NULL || ls == NULL || le == NULL)
		return;
	for (k = 0, nlines = 0, ls[0] = 0; k <= rlen; k++) {
		if (k == rlen || raw[k] == '\n' || raw[k] == '\r') {
			le[nlines] = k;
			if (k < rlen && raw[k] == '\r' && k + 1 < rlen && raw[k + 1] == '\n')
				k++;
			nlines++;
			if (k < rlen)
				ls[nlines] = k + 1;
		}
	}
	for (k = 1; k < nlines; k++) {
		size_t n = le[k] - ls[k], ind = 0;

		while (ind < n && (raw[ls[k] + ind] == ' ' || raw[ls[k] + ind] == '\t'))
			ind++;
		if (ind < n && ind < common)
			common = ind;
	}
	if (common != SIZE_MAX) {
		for (k = 1; k < nlines; k++)
			ls[k] += common < le[k] - ls[k] ? common : le[k] - ls[k];
	}
	while (first < nlines && graphql_blank(raw + ls[first], le[first] - ls[first]))
		first++;
	last = nlines;
	while (last > first && graphql_blank(raw + ls[last - 1], le[last - 1] - ls[last - 1]))
		last--;
	for (k = first; k < last; k++) {
		if (k > first)
			d[o++] = '\n';
		memcpy(d + o, raw + ls[k], le[k] - ls[k]);
		o += le[k] - ls[k];
	}
	d[o] = '\0';
	p->str = d;
	p->slen = o;
	p->tok = TOK_STRING;
	p->block = 1;
}

/* Whether c may start a name. */
static int
graphql_name_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* Whether c may continue a name. */
static int
graphql_name_char(char c)
{
	return graphql_name_start(c) || (c >= '0' && c <= '9');
}

/* Lex a number: IntValue or FloatValue, with the spec's lookahead restrictions. */
static void
graphql_lex_number(struct graphql_parser *p)
{
	const char *s = p->src;
	size_t i = p->pos;
	int isfloat = 0;

#define DIGIT(k)	((k) < p->len && s[k] >= '0' && s[k] <= '9')
	if (s[i] == '-')
		i++;
	if (!DIGIT(i))
		goto bad;
	if (s[i] == '0') {
		i++;
		if (DIGIT(i))
			goto bad;	/* leading zero */
	} else {
		while (DIGIT(i))
			i++;
	}
	if (i < p->len && s[i] == '.') {
		i++;
		if (!DIGIT(i))
			goto bad;
		while (DIGIT(i))
			i++;
		isfloat = 1;
	}
	if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < p->len && (s[i] == '+' || s[i] == '-'))
			i++;
		if (!DIGIT(i))
			goto bad;
		while (DIGIT(i))
			i++;
		isfloat = 1;
	}
	if (i < p->len && (s[i] == '.' || graphql_name_start(s[i])))
		goto bad;
#undef DIGIT
	p->tok = isfloat ? TOK_FLOAT : TOK_INT;
	p->tlen = i - p->pos;
	p->pos = i;
	return;
bad:
	graphql_error(p, "invalid number in the GraphQL document");
}

/* Advance to the next token (skipping blanks, commas, comments and the BOM). */
static void
graphql_next(struct graphql_parser *p)
{
	const char *s = p->src;
	char c;

	if (p->err != NULL) {
		p->tok = TOK_EOF;
		return;
	}
	for (;;) {
		if (p->pos >= p->len) {
			p->tok = TOK_EOF;
			p->start = s + p->len;
			p->tlen = 0;
			return;
		}
		c = s[p->pos];
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',')
			p->pos++;
		else if (c == '#') {
			while (p->pos < p->len && s[p->pos] != '\n' && s[p->pos] != '\r')
				p->pos++;
		} else if (p->len - p->pos >= 3 && memcmp(s + p->pos, "\xef\xbb\xbf", 3) == 0)
			p->pos += 3;
		else
			break;
	}
	if (++p->ntokens > GRAPHQL_MAX_TOKENS) {
		graphql_error(p, "the GraphQL document has more than %d tokens",
		    GRAPHQL_MAX_TOKENS);
		p->tok = TOK_EOF;
		return;
	}
	p->start = s + p->pos;
	p->str = NULL;
	if (c != '\0' && strchr("!$&()=:@[]{|}", c) != NULL) {
		p->tok = TOK_PUNCT;
		p->punct = c;
		p->tlen = 1;
		p->pos++;
	} else if (c == '.') {
		if (p->len - p->pos < 3 || s[p->pos + 1] != '.' || s[p->pos + 2] != '.') {
			graphql_error(p, "unexpected '.' in the GraphQL document");
			p->tok = TOK_EOF;
			return;
		}
		p->tok = TOK_PUNCT;
		p->punct = '.';
		p->tlen = 3;
		p->pos += 3;
	} else if (graphql_name_start(c)) {
		size_t i = p->pos + 1;

		while (i < p->len && graphql_name_char(s[i]))
			i++;
		p->tok = TOK_NAME;
		p->tlen = i - p->pos;
		p->pos = i;
	} else if (c == '-' || (c >= '0' && c <= '9'))
		graphql_lex_number(p);
	else if (c == '"') {
		if (p->len - p->pos >= 3 && memcmp(s + p->pos, "\"\"\"", 3) == 0)
			graphql_lex_block_string(p);
		else
			graphql_lex_string(p);
	} else
		graphql_error(p, "unexpected character 0x%02x in the GraphQL document",
		    (unsigned char)c);
	if (p->err != NULL)
		p->tok = TOK_EOF;
}

/* Whether the current token is punctuator c. */
static int
graphql_is(const struct graphql_parser *p, char c)
{
	return p->tok == TOK_PUNCT && p->punct == c;
}

/* Whether the current token is the name word. */
static int
graphql_is_word(const struct graphql_parser *p, const char *word)
{
	return p->tok == TOK_NAME && p->tlen == strlen(word) &&
	    memcmp(p->start, word, p->tlen) == 0;
}

/* Consume punctuator c or record an error. */
static int
graphql_expect(struct graphql_parser *p, char c)
{
	if (!graphql_is(p, c)) {
		if (p->err == NULL)
			graphql_error(p, "expected '%s' at offset %zu of the GraphQL document",
			    c == '.' ? "..." : (char[]){ c, '\0' }, (size_t)(p->start - p->src));
		return -1;
	}
	graphql_next(p);
	return 0;
}

/* Consume a name and return it (arena copy), or NULL with an error. */
static const char *
graphql_name(struct graphql_parser *p)
{
	const char *n;

	if (p->tok != TOK_NAME) {
		graphql_error(p, "expected a name at offset %zu of the GraphQL document",
		    (size_t)(p->start - p->src));
		return NULL;
	}
	if ((n = graphql_strndup(p, p->start, p->tlen)) == NULL)
		return NULL;
	graphql_next(p);
	return n;
}

/* Enter one nesting level; -1 beyond the limit. */
static int
graphql_enter(struct graphql_parser *p)
{
	if (++p->depth > GRAPHQL_MAX_DEPTH) {
		graphql_error(p, "the GraphQL document nests deeper than %d levels",
		    GRAPHQL_MAX_DEPTH);
		return -1;
	}
	return 0;
}

static struct graphql_value *graphql_value(struct graphql_parser *, int);

/* Parse a list or object value (after its opening bracket or brace). */
static struct graphql_value *
graphql_compound(struct graphql_parser *p, int isconst, struct graphql_value *v)
{
	char close = v->kind == GRAPHQL_LIST ? ']' : '}';
	struct graphql_value **tail = &v->child, *m, *o;
	size_t count = 0;

	if (graphql_enter(p) != 0)
		return NULL;
	graphql_next(p);
	while (p->err == NULL && !graphql_is(p, close)) {
		const char *name = NULL;

		if (v->kind == GRAPHQL_OBJECT) {
			if (++count > GRAPHQL_MAX_NAMED) {
				graphql_error(p, "an input object has more than %d fields",
				    GRAPHQL_MAX_NAMED);
				return NULL;
			}
			if ((name = graphql_name(p)) == NULL || graphql_expect(p, ':') != 0)
				return NULL;
			for (o = v->child; o != NULL; o = o->next) {
				if (strcmp(o->name, name) == 0) {
					graphql_error(p, "input object field %.64s is given twice",
					    name);
					return NULL;
				}
			}
		}
		if ((m = graphql_value(p, isconst)) == NULL)
			return NULL;
		m->name = name;
		*tail = m;
		tail = &m->next;
	}
	if (graphql_expect(p, close) != 0)
		return NULL;
	p->depth--;
	return v;
}

/* Parse a value; isconst refuses variables (default values, const directives). */
static struct graphql_value *
graphql_value(struct graphql_parser *p, int isconst)
{
	struct graphql_value *v;

	if (p->err != NULL || (v = graphql_new(p, sizeof *v)) == NULL)
		return NULL;
	switch (p->tok) {
	case TOK_PUNCT:
		if (p->punct == '$' && !isconst) {
			graphql_next(p);
			v->kind = GRAPHQL_VARIABLE;
			if ((v->str = graphql_name(p)) == NULL)
				return NULL;
			v->len = strlen(v->str);
			return v;
		}
		if (p->punct == '[') {
			v->kind = GRAPHQL_LIST;
			return graphql_compound(p, isconst, v);
		}
		if (p->punct == '{') {
			v->kind = GRAPHQL_OBJECT;
			return graphql_compound(p, isconst, v);
		}
		break;
	case TOK_INT:
	case TOK_FLOAT:
		v->kind = p->tok == TOK_INT ? GRAPHQL_INT : GRAPHQL_FLOAT;
		if ((v->str = graphql_strndup(p, p->start, p->tlen)) == NULL)
			return NULL;
		v->len = p->tlen;
		graphql_next(p);
		return v;
	case TOK_STRING:
		v->kind = GRAPHQL_STRING;
		v->str = p->str;
		v->len = p->slen;
		v->block = p->block;
		graphql_next(p);
		return v;
	case TOK_NAME:
		if (graphql_is_word(p, "true") || graphql_is_word(p, "false"))
			v->kind = GRAPHQL_BOOLEAN;
		else if (graphql_is_word(p, "null"))
			v->kind = GRAPHQL_NULL;
		else
			v->kind = GRAPHQL_ENUM;
		if ((v->str = graphql_name(p)) == NULL)
			return NULL;
		v->len = strlen(v->str);
		return v;
	default:
		break;
	}
	graphql_error(p, "expected a value at offset %zu of the GraphQL document",
	    (size_t)(p->start - p->src));
	return NULL;
}

/* Parse optional arguments "(name: value ...)"; 0 on success. */
static int
graphql_args(struct graphql_parser *p, int isconst, struct graphql_arg **out)
{
	struct graphql_arg **tail = out, *a, *o;
	size_t count = 0;

	*out = NULL;
	if (!graphql_is(p, '('))
		return 0;
	graphql_next(p);
	if (graphql_is(p, ')')) {
		graphql_error(p, "empty argument list in the GraphQL document");
		return -1;
	}
	while (p->err == NULL && !graphql_is(p, ')')) {
		if (++count > GRAPHQL_MAX_NAMED) {
			graphql_error(p, "a field has more than %d arguments", GRAPHQL_MAX_NAMED);
			return -1;
		}
		if ((a = graphql_new(p, sizeof *a)) == NULL ||
		    (a->name = graphql_name(p)) == NULL || graphql_expect(p, ':') != 0 ||
		    (a->value = graphql_value(p, isconst)) == NULL)
			return -1;
		for (o = *out; o != NULL; o = o->next) {
			if (strcmp(o->name, a->name) == 0) {
				graphql_error(p, "argument %.64s is given twice", a->name);
				return -1;
			}
		}
		*tail = a;
		tail = &a->next;
	}
	return graphql_expect(p, ')');
}

/* Parse optional directives "@name(args) ..."; 0 on success. */
static int
graphql_directives(struct graphql_parser *p, int isconst, struct graphql_directive **out)
{
	struct graphql_directive **tail = out, *d;

	*out = NULL;
	while (p->err == NULL && graphql_is(p, '@')) {
		graphql_next(p);
		if ((d = graphql_new(p, sizeof *d)) == NULL ||
		    (d->name = graphql_name(p)) == NULL ||
		    graphql_args(p, isconst, &d->args) != 0)
			return -1;
		*tail = d;
		tail = &d->next;
	}
	return p->err == NULL ? 0 : -1;
}

/* Append text to a type being built in buf[0..cap); -1 when it does not fit. */
static int
graphql_type_add(struct graphql_parser *p, char *buf, size_t *o, size_t cap, const char *s,
    size_t n)
{
	if (cap - *o <= n) {
		graphql_error(p, "a variable type in the GraphQL document is too long");
		return -1;
	}
	memcpy(buf + *o, s, n);
	*o += n;
	buf[*o] = '\0';
	return 0;
}

/* Parse a type reference (Name, [Type], Type!) into buf as written, without blanks. */
static int
graphql_type(struct graphql_parser *p, char *buf, size_t *o, size_t cap)
{
	if (graphql_is(p, '[')) {
		if (graphql_enter(p) != 0 || graphql_type_add(p, buf, o, cap, "[", 1) != 0)
			return -1;
		graphql_next(p);
		if (graphql_type(p, buf, o, cap) != 0 || graphql_expect(p, ']') != 0 ||
		    graphql_type_add(p, buf, o, cap, "]", 1) != 0)
			return -1;
		p->depth--;
	} else {
		if (p->tok != TOK_NAME) {
			graphql_error(p, "expected a type at offset %zu of the GraphQL document",
			    (size_t)(p->start - p->src));
			return -1;
		}
		if (graphql_type_add(p, buf, o, cap, p->start, p->tlen) != 0)
			return -1;
		graphql_next(p);
	}
	if (graphql_is(p, '!')) {
		if (graphql_type_add(p, buf, o, cap, "!", 1) != 0)
			return -1;
		graphql_next(p);
	}
	return p->err == NULL ? 0 : -1;
}

/* Parse "on TypeName"; returns the name. */
static const char *
graphql_type_cond(struct graphql_parser *p)
{
	if (!graphql_is_word(p, "on")) {
		graphql_error(p, "expected 'on' at offset %zu of the GraphQL document",
		    (size_t)(p->start - p->src));
		return NULL;
	}
	graphql_next(p);
	return graphql_name(p);
}

/* Parse a selection set "{ ... }" into a list; NULL with an error on failure. */
static struct graphql_sel *
graphql_selection_set(struct graphql_parser *p)
{
	struct graphql_sel *first = NULL, **tail = &first, *s;

	if (graphql_enter(p) != 0 || graphql_expect(p, '{') != 0)
		return NULL;
	if (graphql_is(p, '}')) {
		graphql_error(p, "empty selection set in the GraphQL document");
		return NULL;
	}
	while (p->err == NULL && !graphql_is(p, '}')) {
		if ((s = graphql_new(p, sizeof *s)) == NULL)
			return NULL;
		if (graphql_is(p, '.')) {
			graphql_next(p);
			if (p->tok == TOK_NAME && !graphql_is_word(p, "on")) {
				s->kind = GRAPHQL_SPREAD;
				if ((s->name = graphql_name(p)) == NULL ||
				    graphql_directives(p, 0, &s->dirs) != 0)
					return NULL;
			} else {
				s->kind = GRAPHQL_INLINE;
				if (graphql_is_word(p, "on") &&
				    (s->type_cond = graphql_type_cond(p)) == NULL)
					return NULL;
				if (graphql_directives(p, 0, &s->dirs) != 0 ||
				    (s->sels = graphql_selection_set(p)) == NULL)
					return NULL;
			}
		} else {
			s->kind = GRAPHQL_FIELD;
			if ((s->name = graphql_name(p)) == NULL)
				return NULL;
			if (graphql_is(p, ':')) {
				graphql_next(p);
				s->alias = s->name;
				if ((s->name = graphql_name(p)) == NULL)
					return NULL;
			}
			if (graphql_args(p, 0, &s->args) != 0 ||
			    graphql_directives(p, 0, &s->dirs) != 0)
				return NULL;
			if (graphql_is(p, '{') && (s->sels = graphql_selection_set(p)) == NULL)
				return NULL;
		}
		*tail = s;
		tail = &s->next;
	}
	if (graphql_expect(p, '}') != 0)
		return NULL;
	p->depth--;
	return first;
}

/* Parse variable definitions "($name: Type = default @dir ...)". */
static int
graphql_vardefs(struct graphql_parser *p, struct graphql_vardef **out)
{
	struct graphql_vardef **tail = out, *v, *o;
	size_t count = 0;

	*out = NULL;
	if (!graphql_is(p, '('))
		return 0;
	graphql_next(p);
	if (graphql_is(p, ')')) {
		graphql_error(p, "empty variable list in the GraphQL document");
		return -1;
	}
	while (p->err == NULL && !graphql_is(p, ')')) {
		if (++count > GRAPHQL_MAX_NAMED) {
			graphql_error(p, "an operation has more than %d variables",
			    GRAPHQL_MAX_NAMED);
			return -1;
		}
		char type[256];
		size_t tlen = 0;

		type[0] = '\0';
		if (graphql_expect(p, '$') != 0 || (v = graphql_new(p, sizeof *v)) == NULL)
			return -1;
		if ((v->name = graphql_name(p)) == NULL || graphql_expect(p, ':') != 0 ||
		    graphql_type(p, type, &tlen, sizeof type) != 0 ||
		    (v->type = graphql_strndup(p, type, tlen)) == NULL)
			return -1;
		if (graphql_is(p, '=')) {
			graphql_next(p);
			if ((v->defval = graphql_value(p, 1)) == NULL)
				return -1;
		}
		if (graphql_directives(p, 1, &v->dirs) != 0)
			return -1;
		for (o = *out; o != NULL; o = o->next) {
			if (strcmp(o->name, v->name) == 0) {
				graphql_error(p, "variable $%.64s is defined twice", v->name);
				return -1;
			}
		}
		*tail = v;
		tail = &v->next;
	}
	return graphql_expect(p, ')');
}

/* Parse one definition and link it into the document. */
static int
graphql_definition(struct graphql_parser *p, struct graphql_doc *doc,
    struct graphql_op ***optail, struct graphql_frag ***fragtail)
{
	struct graphql_op *op;
	struct graphql_frag *f;

	if (doc->nfrags >= GRAPHQL_MAX_FRAGMENTS || doc->nops >= GRAPHQL_MAX_OPERATIONS) {
		graphql_error(p, "the GraphQL document has more than %d fragments or %d operations",
		    GRAPHQL_MAX_FRAGMENTS, GRAPHQL_MAX_OPERATIONS);
		return -1;
	}
	if (graphql_is_word(p, "fragment")) {
		graphql_next(p);
		if ((f = graphql_new(p, sizeof *f)) == NULL)
			return -1;
		if (graphql_is_word(p, "on")) {
			graphql_error(p, "a fragment may not be called 'on'");
			return -1;
		}
		if ((f->name = graphql_name(p)) == NULL ||
		    (f->type_cond = graphql_type_cond(p)) == NULL ||
		    graphql_directives(p, 0, &f->dirs) != 0 ||
		    (f->sels = graphql_selection_set(p)) == NULL)
			return -1;
		if (graphql_fragment(doc, f->name) != NULL) {
			graphql_error(p, "fragment %.64s is defined twice", f->name);
			return -1;
		}
		**fragtail = f;
		*fragtail = &f->next;
		doc->nfrags++;
		return 0;
	}
	if ((op = graphql_new(p, sizeof *op)) == NULL)
		return -1;
	if (graphql_is(p, '{'))
		op->type = GRAPHQL_QUERY;	/* the query shorthand */
	else {
		if (graphql_is_word(p, "query"))
			op->type = GRAPHQL_QUERY;
		else if (graphql_is_word(p, "mutation"))
			op->type = GRAPHQL_MUTATION;
		else if (graphql_is_word(p, "subscription"))
			op->type = GRAPHQL_SUBSCRIPTION;
		else {
			graphql_error(p, "expected an operation or a fragment at offset %zu of "
			    "the GraphQL document (type system definitions are refused)",
			    (size_t)(p->start - p->src));
			return -1;
		}
		graphql_next(p);
		if (p->tok == TOK_NAME && (op->name = graphql_name(p)) == NULL)
			return -1;
		if (graphql_vardefs(p, &op->vars) != 0 ||
		    graphql_directives(p, 0, &op->dirs) != 0)
			return -1;
	}
	if ((op->sels = graphql_selection_set(p)) == NULL)
		return -1;
	**optail = op;
	*optail = &op->next;
	doc->nops++;
	return 0;
}

/* Check that every spread in sels names a defined fragment. */
static int
graphql_check_spreads(struct graphql_parser *p, const struct graphql_doc *doc,
    const struct graphql_sel *s)
{
	for (; s != NULL; s = s->next) {
		if (s->kind == GRAPHQL_SPREAD && graphql_fragment(doc, s->name) == NULL) {
			graphql_error(p, "fragment %.64s is used but not defined", s->name);
			return -1;
		}
		if (graphql_check_spreads(p, doc, s->sels) != 0)
			return -1;
	}
	return 0;
}

/* Reject a document whose operations are ambiguous or whose spreads dangle. */
static int
graphql_validate(struct graphql_parser *p, const struct graphql_doc *doc)
{
	const struct graphql_op *a, *b;
	const struct graphql_frag *f;

	if (doc->nops == 0) {
		graphql_error(p, "the GraphQL document has no operation");
		return -1;
	}
	for (a = doc->ops; a != NULL; a = a->next) {
		if (a->name == NULL && doc->nops > 1) {
			graphql_error(p, "an anonymous GraphQL operation must be the only one");
			return -1;
		}
		for (b = a->next; b != NULL; b = b->next) {
			if (a->name != NULL && b->name != NULL && strcmp(a->name, b->name) == 0) {
				graphql_error(p, "operation %.64s is defined twice", a->name);
				return -1;
			}
		}
		if (graphql_check_spreads(p, doc, a->sels) != 0)
			return -1;
	}
	for (f = doc->frags; f != NULL; f = f->next) {
		if (graphql_check_spreads(p, doc, f->sels) != 0)
			return -1;
	}
	return 0;
}

/* Check the whole input: size, UTF-8, no NUL or control characters. */
static int
graphql_check_source(const char *src, size_t len, char **cause)
{
	size_t i, n;

	if (len > GRAPHQL_MAX_SIZE) {
		xasprintf(cause, "the GraphQL document is larger than %d bytes",
		    GRAPHQL_MAX_SIZE);
		return -1;
	}
	for (i = 0; i < len; i += n) {
		unsigned char c = (unsigned char)src[i];

		if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
			xasprintf(cause, "the GraphQL document holds control character 0x%02x",
			    c);
			return -1;
		}
		if ((n = graphql_utf8((const unsigned char *)src + i, len - i)) == 0) {
			*cause = xstrdup("the GraphQL document is not valid UTF-8");
			return -1;
		}
	}
	return 0;
}

/* Parse an executable document (see graphql.h for limits and refusals). */
struct graphql_doc *
graphql_parse(const char *src, size_t len, char **cause)
{
	struct graphql_parser p;
	struct graphql_doc *doc = NULL;
	struct graphql_op **optail;
	struct graphql_frag **fragtail;

	*cause = NULL;
	if (graphql_check_source(src, len, cause) != 0)
		return NULL;
	memset(&p, 0, sizeof p);
	p.src = src;
	p.len = len;
	doc = xcalloc(1, sizeof *doc);
	doc->arena = xcalloc(1, sizeof *doc->arena);
	p.arena = doc->arena;
	optail = &doc->ops;
	fragtail = &doc->frags;
	graphql_next(&p);
	while (p.err == NULL && p.tok != TOK_EOF) {
		if (graphql_definition(&p, doc, &optail, &fragtail) != 0)
			break;
	}
	if (p.err == NULL)
		graphql_validate(&p, doc);
	if (p.err != NULL) {
		*cause = p.err;	/* transferred */
		graphql_free(doc);
		return NULL;
	}
	return doc;
}

/* Free a document and its arena. */
void
graphql_free(struct graphql_doc *doc)
{
	struct graphql_chunk *c, *n;

	if (doc == NULL)
		return;
	if (doc->arena != NULL) {
		for (c = doc->arena->head; c != NULL; c = n) {
			n = c->next;
			free(c);
		}
		free(doc->arena);
	}
	free(doc);
}

/* The fragment called name, or NULL. */
const struct graphql_frag *
graphql_fragment(const struct graphql_doc *doc, const char *name)
{
	const struct graphql_frag *f;

	for (f = doc->frags; f != NULL; f = f->next) {
		if (strcmp(f->name, name) == 0)
			return f;
	}
	return NULL;
}

/* The keyword of an operation type. */
const char *
graphql_op_word(enum graphql_op_type t)
{
	switch (t) {
	case GRAPHQL_QUERY:
		return "query";
	case GRAPHQL_MUTATION:
		return "mutation";
	default:
		return "subscription";
	}
}
