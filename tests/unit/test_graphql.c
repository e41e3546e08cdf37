/* Unit tests: the GraphQL executable-document parser (bridge/graphql.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graphql.h"

static char *cause;

/* Parse a NUL-terminated document. */
static struct graphql_doc *
parse(const char *src)
{
	free(cause);
	cause = NULL;
	return graphql_parse(src, strlen(src), &cause);
}

/* Whether src is refused (and says why). */
static int
refused(const char *src)
{
	struct graphql_doc *d = parse(src);

	if (d != NULL) {
		graphql_free(d);
		return 0;
	}
	assert_non_null(cause);
	return 1;
}

/* The value of the first argument of the first field of the first operation. */
static const struct graphql_value *
first_value(const struct graphql_doc *d)
{
	assert_non_null(d->ops);
	assert_non_null(d->ops->sels);
	assert_non_null(d->ops->sels->args);
	return d->ops->sels->args->value;
}

static void
test_structure(void **state)
{
	struct graphql_doc *d;
	const struct graphql_op *op;
	const struct graphql_sel *s;
	const struct graphql_vardef *v;

	(void)state;
	d = parse("query IssueList($owner: String!, $repo: String! = \"r\", $n: [Int!]) "
	    "{ repo: repository(owner: $owner, name: $repo) { ...F ... on Repository "
	    "@include(if: true) { id } issues(first: 1) { nodes { title } } } }\n"
	    "fragment F on Repository { name }");
	assert_non_null(d);
	assert_int_equal(d->nops, 1);
	assert_int_equal(d->nfrags, 1);
	op = d->ops;
	assert_int_equal(op->type, GRAPHQL_QUERY);
	assert_string_equal(op->name, "IssueList");
	v = op->vars;
	assert_string_equal(v->name, "owner");
	assert_null(v->defval);
	v = v->next;
	assert_string_equal(v->name, "repo");
	assert_int_equal(v->defval->kind, GRAPHQL_STRING);
	assert_string_equal(v->defval->str, "r");
	assert_string_equal(v->next->name, "n");
	assert_null(v->next->next);
	s = op->sels;
	assert_int_equal(s->kind, GRAPHQL_FIELD);
	assert_string_equal(s->alias, "repo");
	assert_string_equal(s->name, "repository");
	assert_string_equal(s->args->name, "owner");
	assert_int_equal(s->args->value->kind, GRAPHQL_VARIABLE);
	assert_string_equal(s->args->value->str, "owner");
	assert_null(s->next);
	s = s->sels;
	assert_int_equal(s->kind, GRAPHQL_SPREAD);
	assert_string_equal(s->name, "F");
	s = s->next;
	assert_int_equal(s->kind, GRAPHQL_INLINE);
	assert_string_equal(s->type_cond, "Repository");
	assert_string_equal(s->dirs->name, "include");
	assert_string_equal(s->sels->name, "id");
	s = s->next;
	assert_string_equal(s->name, "issues");
	assert_null(s->alias);
	assert_string_equal(s->sels->sels->name, "title");
	assert_non_null(graphql_fragment(d, "F"));
	assert_string_equal(graphql_fragment(d, "F")->type_cond, "Repository");
	assert_null(graphql_fragment(d, "G"));
	graphql_free(d);

	/* Shorthand, mutation, several named operations, inline fragment without type. */
	d = parse("{ viewer { login } }");
	assert_non_null(d);
	assert_int_equal(d->ops->type, GRAPHQL_QUERY);
	assert_null(d->ops->name);
	graphql_free(d);
	d = parse("mutation M { a: addComment(input: {subjectId: \"x\", body: \"y\"}) "
	    "{ __typename } } query Q { ... @skip(if: false) { viewer { id } } }");
	assert_non_null(d);
	assert_int_equal(d->nops, 2);
	assert_int_equal(d->ops->type, GRAPHQL_MUTATION);
	assert_int_equal(d->ops->next->type, GRAPHQL_QUERY);
	assert_null(d->ops->next->sels->type_cond);
	assert_int_equal(graphql_op_word(d->ops->type)[0], 'm');
	graphql_free(d);
	/* Keywords are names where the grammar allows them. */
	d = parse("query query { query: fragment(on: on, true: null) { mutation } }");
	assert_non_null(d);
	assert_string_equal(d->ops->name, "query");
	assert_string_equal(d->ops->sels->name, "fragment");
	assert_int_equal(d->ops->sels->args->value->kind, GRAPHQL_ENUM);
	assert_int_equal(d->ops->sels->args->next->value->kind, GRAPHQL_NULL);
	graphql_free(d);
}

static void
test_values(void **state)
{
	struct graphql_doc *d;
	const struct graphql_value *v, *m;

	(void)state;
	d = parse("{f(a: [1, -2.5e3, \"s\", true, false, null, ENUM, {x: 1, y: [$v]}, []] ) "
	    "{id}}");
	assert_non_null(d);
	v = first_value(d);
	assert_int_equal(v->kind, GRAPHQL_LIST);
	m = v->child;
	assert_int_equal(m->kind, GRAPHQL_INT);
	assert_string_equal(m->str, "1");
	m = m->next;
	assert_int_equal(m->kind, GRAPHQL_FLOAT);
	assert_string_equal(m->str, "-2.5e3");
	m = m->next;
	assert_int_equal(m->kind, GRAPHQL_STRING);
	m = m->next;
	assert_int_equal(m->kind, GRAPHQL_BOOLEAN);
	assert_string_equal(m->str, "true");
	m = m->next;
	assert_int_equal(m->kind, GRAPHQL_BOOLEAN);
	m = m->next;
	assert_int_equal(m->kind, GRAPHQL_NULL);
	m = m->next;
	assert_int_equal(m->kind, GRAPHQL_ENUM);
	assert_string_equal(m->str, "ENUM");
	m = m->next;
	assert_int_equal(m->kind, GRAPHQL_OBJECT);
	assert_string_equal(m->child->name, "x");
	assert_string_equal(m->child->next->name, "y");
	assert_int_equal(m->child->next->child->kind, GRAPHQL_VARIABLE);
	m = m->next;
	assert_int_equal(m->kind, GRAPHQL_LIST);
	assert_null(m->child);
	assert_null(m->next);
	graphql_free(d);
	/* Numbers the grammar refuses. */
	assert_true(refused("{f(a: 01){id}}"));
	assert_true(refused("{f(a: 1.){id}}"));
	assert_true(refused("{f(a: .5){id}}"));
	assert_true(refused("{f(a: 1e){id}}"));
	assert_true(refused("{f(a: 0x1){id}}"));
	assert_true(refused("{f(a: 1a){id}}"));
	assert_true(refused("{f(a: 1.5.5){id}}"));
	assert_true(refused("{f(a: -){id}}"));
	assert_true(refused("{f(a: +1){id}}"));
	assert_false(refused("{f(a: -0, b: 0.0, c: 1E+2, d: 9e-9){id}}"));
	/* Variables are not constants. */
	assert_true(refused("query($a: Int = $b) {id}"));
	assert_false(refused("query($a: Int = 1, $b: [String!]! = [\"x\"]) {id}"));
	d = parse("query($a: [Int!]! = [1] @d(x: 1)) {id}");
	assert_non_null(d);
	assert_string_equal(d->ops->vars->type, "[Int!]!");
	assert_string_equal(d->ops->vars->dirs->name, "d");
	graphql_free(d);
	assert_false(refused("query { f(a: $ x) { id } }"));
}

/* The decoded value of the first argument of {f(a: ...){id}}. */
static void
assert_string_value(const char *src, const char *want, size_t wantlen)
{
	struct graphql_doc *d = parse(src);
	const struct graphql_value *v;

	if (d == NULL)
		fprintf(stderr, "refused %s: %s\n", src, cause);
	assert_non_null(d);
	v = first_value(d);
	assert_int_equal(v->kind, GRAPHQL_STRING);
	assert_int_equal(v->len, wantlen);
	assert_memory_equal(v->str, want, wantlen);
	graphql_free(d);
}

static void
test_strings(void **state)
{
	(void)state;
	assert_string_value("{f(a: \"plain\"){id}}", "plain", 5);
	assert_string_value("{f(a: \"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"){id}}",
	    "\" \\ / \b \f \n \r \t", 15);
	assert_string_value("{f(a: \"\\u0041\\u00e9\\u20AC\"){id}}", "A\xc3\xa9\xe2\x82\xac", 6);
	assert_string_value("{f(a: \"\\ud83d\\ude00\"){id}}", "\xf0\x9f\x98\x80", 4);
	assert_string_value("{f(a: \"\\u{1F600}\"){id}}", "\xf0\x9f\x98\x80", 4);
	assert_string_value("{f(a: \"\\u0000\"){id}}", "\0", 1);
	assert_string_value("{f(a: \"\xc3\xa9\"){id}}", "\xc3\xa9", 2);
	assert_string_value("{f(a: \"\"){id}}", "", 0);
	assert_true(refused("{f(a: \"\\ud83d\"){id}}"));		/* lone lead */
	assert_true(refused("{f(a: \"\\ude00\"){id}}"));		/* lone trail */
	assert_true(refused("{f(a: \"\\ud83d\\u0041\"){id}}"));
	assert_true(refused("{f(a: \"\\u{110000}\"){id}}"));
	assert_true(refused("{f(a: \"\\u{D800}\"){id}}"));
	assert_true(refused("{f(a: \"\\u{}\"){id}}"));
	assert_true(refused("{f(a: \"\\u12\"){id}}"));
	assert_true(refused("{f(a: \"\\x41\"){id}}"));
	assert_true(refused("{f(a: \"a\nb\"){id}}"));		/* raw newline */
	assert_true(refused("{f(a: \"abc){id}}"));
	assert_true(refused("{f(a: \"abc\\"));
	/* Block strings: the spec's BlockStringValue(). */
	assert_string_value("{f(a: \"\"\"\n    Hello,\n      World!\n\n    Yours,\n      GraphQL."
	    "\n  \"\"\"){id}}", "Hello,\n  World!\n\nYours,\n  GraphQL.", 34);
	assert_string_value("{f(a: \"\"\"  x  \"\"\"){id}}", "  x  ", 5);
	assert_string_value("{f(a: \"\"\"a\\\"\"\"b\"\"\"){id}}", "a\"\"\"b", 5);
	assert_string_value("{f(a: \"\"\"\\n\\u0041\"\"\"){id}}", "\\n\\u0041", 8);
	assert_string_value("{f(a: \"\"\"\r\n  a\r  b\r\n\"\"\"){id}}", "a\nb", 3);
	assert_string_value("{f(a: \"\"\"\"\"\"){id}}", "", 0);
	assert_string_value("{f(a: \"\"\"\n \t \n\"\"\"){id}}", "", 0);
	{
		struct graphql_doc *d = parse("{f(a: \"\"\"x\"\"\", b: \"x\"){id}}");

		assert_non_null(d);
		assert_true(first_value(d)->block);
		assert_false(d->ops->sels->args->next->value->block);
		graphql_free(d);
	}
	assert_true(refused("{f(a: \"\"\"abc\"\"){id}}"));
}

static void
test_refused_documents(void **state)
{
	(void)state;
	assert_true(refused(""));
	assert_true(refused("   # only a comment\n"));
	assert_true(refused("{}"));
	assert_true(refused("{ f() }"));
	assert_true(refused("query ($a: Int) {f} query {g}"));		/* anonymous + another */
	assert_true(refused("{f} {g}"));
	assert_true(refused("query A {f} query A {g}"));
	assert_true(refused("{...F} fragment F on Q {a} fragment F on Q {b}"));
	assert_true(refused("{...F}"));
	assert_true(refused("{f} fragment F on Q {...G}"));
	assert_true(refused("{...on} fragment on on Q {a}"));
	assert_true(refused("{f} fragment F {a}"));			/* no type condition */
	assert_true(refused("type Query { a: Int }"));
	assert_true(refused("schema { query: Query }"));
	assert_true(refused("extend type Query { a: Int }"));
	assert_true(refused("directive @d on FIELD"));
	assert_true(refused("\"description\" type Q { a: Int }"));
	assert_true(refused("{f(a: 1, a: 2)}"));
	assert_true(refused("{f(a: {x: 1, x: 2})}"));
	assert_true(refused("query($a: Int, $a: Int) {f}"));
	assert_true(refused("query() {f}"));
	assert_true(refused("{f(a:)}"));
	assert_true(refused("{f(: 1)}"));
	assert_true(refused("{a: b: c}"));
	assert_true(refused("{f"));
	assert_true(refused("{f}}"));
	assert_true(refused("{f} extra"));
	assert_true(refused("{..f}"));
	assert_true(refused("{f & g}"));
	assert_true(refused("{f | g}"));
	assert_true(refused("{f(a: [1, 2)}"));
	assert_true(refused("query($a: [Int) {f}"));
	assert_true(refused("query($a) {f}"));
	assert_true(refused("{f @}"));
	assert_true(refused("{f ~}"));
	assert_true(refused("{f ?}"));
	assert_true(refused("{f\x01}"));
	assert_true(refused("{f\x7f}"));
	assert_true(refused("{f(a: \"\xff\")}"));			/* invalid UTF-8 */
	assert_true(refused("{f(a: \"\xc0\xaf\")}"));			/* overlong */
	assert_true(refused("{f(a: \"\xed\xa0\x80\")}"));		/* surrogate */
	assert_true(refused("{f(a: \"\xf4\x90\x80\x80\")}"));		/* > U+10FFFF */
	assert_true(refused("{f(a: \"\xe2\x82\")}"));			/* truncated */
	{
		struct graphql_doc *d;
		static const char nul[] = "{f}\0{g}";

		free(cause);
		cause = NULL;
		d = graphql_parse(nul, sizeof nul - 1, &cause);
		assert_null(d);
		assert_non_null(cause);
	}
	/* Ignored tokens: BOM, commas, comments, CR LF. */
	assert_false(refused("\xef\xbb\xbf{ a, b,,, # comment\r\n c }"));
}

static void
test_limits(void **state)
{
	char *doc;
	size_t i, n;

	(void)state;
	/* Nesting: selection sets, lists, objects and list types all count. */
	doc = malloc(1024);
	doc[0] = '\0';
	for (i = 0; i < GRAPHQL_MAX_DEPTH; i++)
		strcat(doc, "{a");
	for (i = 0; i < GRAPHQL_MAX_DEPTH; i++)
		strcat(doc, "}");
	assert_false(refused(doc));
	doc[0] = '\0';
	for (i = 0; i < GRAPHQL_MAX_DEPTH + 1; i++)
		strcat(doc, "{a");
	for (i = 0; i < GRAPHQL_MAX_DEPTH + 1; i++)
		strcat(doc, "}");
	assert_true(refused(doc));
	assert_non_null(strstr(cause, "deeper"));
	strcpy(doc, "{f(a: ");
	for (i = 0; i < GRAPHQL_MAX_DEPTH + 1; i++)
		strcat(doc, "[");
	for (i = 0; i < GRAPHQL_MAX_DEPTH + 1; i++)
		strcat(doc, "]");
	strcat(doc, ")}");
	assert_true(refused(doc));
	strcpy(doc, "query($a: ");
	for (i = 0; i < GRAPHQL_MAX_DEPTH + 1; i++)
		strcat(doc, "[");
	strcat(doc, "Int");
	for (i = 0; i < GRAPHQL_MAX_DEPTH + 1; i++)
		strcat(doc, "]");
	strcat(doc, ") {f}");
	assert_true(refused(doc));
	free(doc);
	/* Size. */
	n = GRAPHQL_MAX_SIZE + 1;
	doc = malloc(n + 1);
	memset(doc, ' ', n);
	memcpy(doc, "{f}", 3);
	doc[n] = '\0';
	assert_true(refused(doc));
	assert_non_null(strstr(cause, "larger"));
	doc[n - 1] = '\0';
	assert_false(refused(doc));
	free(doc);
	/* Tokens. */
	n = GRAPHQL_MAX_TOKENS * 2 + 16;
	doc = malloc(n + 1);
	doc[0] = '{';
	for (i = 1; i + 2 < n; i += 2)
		memcpy(doc + i, "a ", 2);
	doc[i++] = '}';
	doc[i] = '\0';
	assert_true(refused(doc));
	assert_non_null(strstr(cause, "tokens"));
	free(doc);
	/* Fragment and operation counts. */
	doc = malloc(64 * (GRAPHQL_MAX_FRAGMENTS + 2));
	strcpy(doc, "{...F0}");
	for (i = 0; i <= GRAPHQL_MAX_FRAGMENTS; i++)
		sprintf(doc + strlen(doc), " fragment F%zu on Q {a}", i);
	assert_true(refused(doc));
	free(doc);
	/* Named members (duplicate checks are quadratic): arguments, object fields, variables. */
	doc = malloc(16 * (GRAPHQL_MAX_NAMED + 2) + 64);
	for (n = 0; n < 3; n++) {
		strcpy(doc, n == 0 ? "{f(" : n == 1 ? "{f(a:{" : "query(");
		for (i = 0; i <= GRAPHQL_MAX_NAMED; i++)
			sprintf(doc + strlen(doc), n == 2 ? "$a%zu:Int " : "a%zu:1 ", i);
		strcat(doc, n == 0 ? ")}" : n == 1 ? "})}" : "){f}");
		assert_true(refused(doc));
		assert_non_null(strstr(cause, "more than"));
	}
	free(doc);
	/* Many block strings stay within the arena (no quadratic copies). */
	n = GRAPHQL_MAX_SIZE - 64;
	doc = malloc(n + 64);
	strcpy(doc, "{f(a: [");
	for (i = strlen(doc); i + 8 < n; i += 7)
		memcpy(doc + i, "\"\"\"\"\"\" ", 7);
	strcpy(doc + i, "])}");
	assert_false(refused(doc));
	free(doc);
}

static int
teardown(void **state)
{
	(void)state;
	free(cause);
	cause = NULL;
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_structure, teardown),
		cmocka_unit_test_teardown(test_values, teardown),
		cmocka_unit_test_teardown(test_strings, teardown),
		cmocka_unit_test_teardown(test_refused_documents, teardown),
		cmocka_unit_test_teardown(test_limits, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
