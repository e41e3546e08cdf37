/*
 * libFuzzer target for the GraphQL parser (bridge/graphql.c) and the GraphQL part
 * of the HTTP policy (bridge/httppolicy.c).
 *
 * Input: a GraphQL document (tests/fuzz/corpus/graphql/gh-* are the documents the
 * real gh 2.23 sent to tests/fixtures/fakegh.py).
 *
 * Asserted:
 *   - parse or refuse, with a cause exactly when refused;
 *   - round trip: a parsed document printed canonically (below) parses again and
 *     prints to the same text, so the tree is a faithful reading of the input;
 *   - names in the tree are GraphQL names, nesting stays within the limit, every
 *     spread names a defined fragment;
 *   - the document sent as a GraphQL request (GHE, scope "o/r", a few variables)
 *     gets a filled verdict; when allowed, no operation is a subscription, every
 *     top-level mutation field is in a fixed list, and every top-level query field
 *     is one of repository, viewer, user, organization, search, node, nodes,
 *     rateLimit, __type, __schema, __typename.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "graphql.h"
#include "httppolicy.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* A growing output buffer. */
struct fuzz_out {
	char	*buf;
	size_t	 len, cap;
};

static const char *const fuzz_mutations[] = {
	"addComment", "updateIssueComment", "createIssue", "updateIssue", "closeIssue",
	"reopenIssue", "addLabelsToLabelable", "removeLabelsFromLabelable",
	"addAssigneesToAssignable", "removeAssigneesFromAssignable", "createPullRequest",
	"updatePullRequest", "closePullRequest", "reopenPullRequest",
	"markPullRequestReadyForReview", "convertPullRequestToDraft", "addPullRequestReview",
	"submitPullRequestReview", "requestReviews", "__typename", NULL
};

static const char *const fuzz_queries[] = {
	"repository", "viewer", "user", "organization", "search", "node", "nodes",
	"rateLimit", "__type", "__schema", "__typename", NULL
};

/* Append n bytes. */
static void
fuzz_put(struct fuzz_out *o, const char *s, size_t n)
{
	if (o->len + n + 1 > o->cap) {
		o->cap = (o->len + n + 1) * 2;
		o->buf = realloc(o->buf, o->cap);
		if (o->buf == NULL)
			abort();
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

/* Append a NUL-terminated string. */
static void
fuzz_puts(struct fuzz_out *o, const char *s)
{
	fuzz_put(o, s, strlen(s));
}

/* Whether s is a GraphQL name. */
static int
fuzz_name(const char *s)
{
	size_t i;

	if (s == NULL || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
	    s[0] == '_'))
		return 0;
	for (i = 1; s[i] != '\0'; i++) {
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return 0;
	}
	return 1;
}

/* Print a value canonically. */
static void
fuzz_value(struct fuzz_out *o, const struct graphql_value *v, int depth)
{
	const struct graphql_value *m;
	char esc[8];
	size_t i;

	if (depth > GRAPHQL_MAX_DEPTH + 1)
		abort();
	switch (v->kind) {
	case GRAPHQL_VARIABLE:
		if (!fuzz_name(v->str))
			abort();
		fuzz_puts(o, "$");
		fuzz_puts(o, v->str);
		break;
	case GRAPHQL_STRING:
		fuzz_puts(o, "\"");
		for (i = 0; i < v->len; i++) {
			unsigned char c = (unsigned char)v->str[i];

			if (c == '"' || c == '\\') {
				esc[0] = '\\';
				esc[1] = (char)c;
				fuzz_put(o, esc, 2);
			} else if (c < 0x20 || c == 0x7f) {
				snprintf(esc, sizeof esc, "\\u%04x", c);
				fuzz_puts(o, esc);
			} else
				fuzz_put(o, (const char *)&c, 1);
		}
		fuzz_puts(o, "\"");
		break;
	case GRAPHQL_NULL:
		fuzz_puts(o, "null");
		break;
	case GRAPHQL_LIST:
	case GRAPHQL_OBJECT:
		fuzz_puts(o, v->kind == GRAPHQL_LIST ? "[" : "{");
		for (m = v->child; m != NULL; m = m->next) {
			if (v->kind == GRAPHQL_OBJECT) {
				if (!fuzz_name(m->name))
					abort();
				fuzz_puts(o, m->name);
				fuzz_puts(o, ":");
			}
			fuzz_value(o, m, depth + 1);
			if (m->next != NULL)
				fuzz_puts(o, " ");
		}
		fuzz_puts(o, v->kind == GRAPHQL_LIST ? "]" : "}");
		break;
	default:	/* INT, FLOAT, BOOLEAN, ENUM: the token text */
		fuzz_puts(o, v->str);
		break;
	}
}

/* Print arguments "(a:v b:v)". */
static void
fuzz_args(struct fuzz_out *o, const struct graphql_arg *a)
{
	if (a == NULL)
		return;
	fuzz_puts(o, "(");
	for (; a != NULL; a = a->next) {
		if (!fuzz_name(a->name))
			abort();
		fuzz_puts(o, a->name);
		fuzz_puts(o, ":");
		fuzz_value(o, a->value, 0);
		if (a->next != NULL)
			fuzz_puts(o, " ");
	}
	fuzz_puts(o, ")");
}

/* Print directives " @d(args)". */
static void
fuzz_dirs(struct fuzz_out *o, const struct graphql_directive *d)
{
	for (; d != NULL; d = d->next) {
		if (!fuzz_name(d->name))
			abort();
		fuzz_puts(o, " @");
		fuzz_puts(o, d->name);
		fuzz_args(o, d->args);
	}
}

/* Print a selection set. */
static void
fuzz_sels(struct fuzz_out *o, const struct graphql_doc *doc, const struct graphql_sel *s,
    int depth)
{
	if (s == NULL || depth > GRAPHQL_MAX_DEPTH)
		abort();
	fuzz_puts(o, "{");
	for (; s != NULL; s = s->next) {
		switch (s->kind) {
		case GRAPHQL_FIELD:
			if (s->alias != NULL) {
				if (!fuzz_name(s->alias))
					abort();
				fuzz_puts(o, s->alias);
				fuzz_puts(o, ":");
			}
			if (!fuzz_name(s->name))
				abort();
			fuzz_puts(o, s->name);
			fuzz_args(o, s->args);
			fuzz_dirs(o, s->dirs);
			if (s->sels != NULL)
				fuzz_sels(o, doc, s->sels, depth + 1);
			break;
		case GRAPHQL_SPREAD:
			if (!fuzz_name(s->name) || strcmp(s->name, "on") == 0 ||
			    graphql_fragment(doc, s->name) == NULL || s->sels != NULL)
				abort();
			fuzz_puts(o, "...");
			fuzz_puts(o, s->name);
			fuzz_dirs(o, s->dirs);
			break;
		case GRAPHQL_INLINE:
			fuzz_puts(o, "...");
			if (s->type_cond != NULL) {
				if (!fuzz_name(s->type_cond))
					abort();
				fuzz_puts(o, " on ");
				fuzz_puts(o, s->type_cond);
			}
			fuzz_dirs(o, s->dirs);
			fuzz_sels(o, doc, s->sels, depth + 1);
			break;
		}
		if (s->next != NULL)
			fuzz_puts(o, " ");
	}
	fuzz_puts(o, "}");
}

/* Print a whole document canonically. */
static void
fuzz_doc(struct fuzz_out *o, const struct graphql_doc *doc)
{
	const struct graphql_op *op;
	const struct graphql_vardef *v;
	const struct graphql_frag *f;
	size_t nops = 0, nfrags = 0;

	for (op = doc->ops; op != NULL; op = op->next, nops++) {
		fuzz_puts(o, graphql_op_word(op->type));
		if (op->name != NULL) {
			if (!fuzz_name(op->name))
				abort();
			fuzz_puts(o, " ");
			fuzz_puts(o, op->name);
		}
		if (op->vars != NULL) {
			fuzz_puts(o, "(");
			for (v = op->vars; v != NULL; v = v->next) {
				if (!fuzz_name(v->name) || v->type == NULL || v->type[0] == '\0')
					abort();
				fuzz_puts(o, "$");
				fuzz_puts(o, v->name);
				fuzz_puts(o, ":");
				fuzz_puts(o, v->type);
				if (v->defval != NULL) {
					fuzz_puts(o, "=");
					fuzz_value(o, v->defval, 0);
				}
				fuzz_dirs(o, v->dirs);
				if (v->next != NULL)
					fuzz_puts(o, " ");
			}
			fuzz_puts(o, ")");
		}
		fuzz_dirs(o, op->dirs);
		fuzz_sels(o, doc, op->sels, 1);
		fuzz_puts(o, "\n");
	}
	for (f = doc->frags; f != NULL; f = f->next, nfrags++) {
		if (!fuzz_name(f->name) || strcmp(f->name, "on") == 0 || !fuzz_name(f->type_cond))
			abort();
		fuzz_puts(o, "fragment ");
		fuzz_puts(o, f->name);
		fuzz_puts(o, " on ");
		fuzz_puts(o, f->type_cond);
		fuzz_dirs(o, f->dirs);
		fuzz_sels(o, doc, f->sels, 1);
		fuzz_puts(o, "\n");
	}
	if (nops != doc->nops || nfrags != doc->nfrags || nops == 0)
		abort();
}

/* Whether name is in a NULL-terminated list. */
static int
fuzz_in(const char *const *list, const char *name)
{
	for (; *list != NULL; list++) {
		if (strcmp(*list, name) == 0)
			return 1;
	}
	return 0;
}

/* Run the document through the HTTP policy and check an allowed verdict. */
static void
fuzz_policy(const char *src, size_t len, const struct graphql_doc *doc)
{
	static const char *const repos[] = { "o/r" };
	struct httppolicy_scope sc = { HTTP_API_GHE, repos, 1, 0 };
	struct httppolicy_req req;
	struct httppolicy_verdict v;
	const struct graphql_op *op;
	const struct graphql_sel *s;
	json_t *o, *str;
	char *body;

	if ((str = json_stringn(src, len)) == NULL)
		return;	/* not UTF-8 or holds NUL: jansson cannot carry it */
	o = json_pack("{s:o, s:{s:s, s:s, s:s, s:s, s:s}}", "query", str, "variables",
	    "owner", "o", "repo", "r", "name", "r", "q", "repo:o/r is:open", "other", "x");
	body = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	memset(&req, 0, sizeof req);
	req.method = "POST";
	req.target = "/api/graphql";
	req.content_type = "application/json";
	req.body = (const unsigned char *)body;
	req.body_len = strlen(body);
	if (httppolicy_check(&sc, &req, &v) != 0 || v.summary == NULL ||
	    v.allowed != (v.reason == NULL))
		abort();
	if (v.allowed) {
		if (doc == NULL)
			abort();	/* an unparsable document was let through */
		for (op = doc->ops; op != NULL; op = op->next) {
			if (op->type == GRAPHQL_SUBSCRIPTION)
				abort();
			for (s = op->sels; s != NULL; s = s->next) {
				if (s->kind != GRAPHQL_FIELD)
					continue;
				if (!fuzz_in(op->type == GRAPHQL_MUTATION ? fuzz_mutations :
				    fuzz_queries, s->name))
					abort();
			}
		}
	}
	httppolicy_verdict_free(&v);
	free(body);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_out a = { NULL, 0, 0 }, b = { NULL, 0, 0 };
	struct graphql_doc *doc, *again;
	char *cause = NULL, *cause2 = NULL;

	doc = graphql_parse((const char *)data, size, &cause);
	if ((doc == NULL) != (cause != NULL))
		abort();
	if (doc != NULL) {
		fuzz_doc(&a, doc);
		if (a.len <= GRAPHQL_MAX_SIZE) {
			again = graphql_parse(a.buf, a.len, &cause2);
			if (again == NULL && strstr(cause2, "tokens") != NULL)
				goto policy;	/* "{...}" printed as "query{...}": one more */
			if (again == NULL) {
				fprintf(stderr, "reprint refused: %s\n%s\n", cause2, a.buf);
				abort();
			}
			fuzz_doc(&b, again);
			if (a.len != b.len || memcmp(a.buf, b.buf, a.len) != 0) {
				fprintf(stderr, "round trip differs:\n%s\n%s\n", a.buf, b.buf);
				abort();
			}
			graphql_free(again);
		}
	}
policy:
	fuzz_policy((const char *)data, size, doc);
	graphql_free(doc);
	free(cause);
	free(cause2);
	free(a.buf);
	free(b.buf);
	return 0;
}
