/*
 * A bounded parser for GraphQL executable documents (operations and fragments,
 * GraphQL spec October 2021, section 2), for the HTTP policy. It reads untrusted
 * input: size, tokens and nesting are capped, and anything outside the grammar
 * (type system definitions, control characters, invalid UTF-8, NUL bytes,
 * duplicate arguments / object fields / variables / fragment or operation names,
 * spreads of unknown fragments, an anonymous operation beside others) is refused.
 * No I/O; the result is a tree of linked lists in one arena, freed at once.
 */
#ifndef SHIMBRIDGE_GRAPHQL_H
#define SHIMBRIDGE_GRAPHQL_H

#include <stddef.h>

#define GRAPHQL_MAX_SIZE	(256 * 1024)	/* bytes of document */
#define GRAPHQL_MAX_TOKENS	40000		/* lexical tokens */
#define GRAPHQL_MAX_DEPTH	40		/* nested selection sets, values and types */
#define GRAPHQL_MAX_FRAGMENTS	128		/* fragment definitions */
#define GRAPHQL_MAX_OPERATIONS	32		/* operation definitions */
#define GRAPHQL_MAX_NAMED	256		/* arguments of a field, fields of an input
						   object, variables of an operation */

enum graphql_op_type {
	GRAPHQL_QUERY,
	GRAPHQL_MUTATION,
	GRAPHQL_SUBSCRIPTION
};

enum graphql_value_kind {
	GRAPHQL_VARIABLE,	/* str: the variable's name without '$' */
	GRAPHQL_INT,		/* str: the token text */
	GRAPHQL_FLOAT,		/* str: the token text */
	GRAPHQL_STRING,		/* str, len: the decoded value (may hold NUL from \u0000) */
	GRAPHQL_BOOLEAN,	/* str: "true" or "false" */
	GRAPHQL_NULL,
	GRAPHQL_ENUM,		/* str: the name */
	GRAPHQL_LIST,		/* child: first item */
	GRAPHQL_OBJECT		/* child: first field (its name in ->name) */
};

struct graphql_value {
	enum graphql_value_kind	 kind;
	const char		*str;
	size_t			 len;
	const char		*name;	/* member of an object: the field name */
	int			 block;	/* GRAPHQL_STRING written as a block string */
	struct graphql_value	*child;
	struct graphql_value	*next;	/* next list item or object field */
};

struct graphql_arg {
	const char		*name;
	struct graphql_value	*value;
	struct graphql_arg	*next;
};

struct graphql_directive {
	const char		*name;
	struct graphql_arg	*args;
	struct graphql_directive *next;
};

enum graphql_sel_kind {
	GRAPHQL_FIELD,		/* alias (or NULL), name, args, sels */
	GRAPHQL_SPREAD,		/* ...name */
	GRAPHQL_INLINE		/* ... [on type_cond] { sels } */
};

struct graphql_sel {
	enum graphql_sel_kind	 kind;
	const char		*alias;
	const char		*name;
	const char		*type_cond;	/* NULL when absent */
	struct graphql_arg	*args;
	struct graphql_directive *dirs;
	struct graphql_sel	*sels;		/* first of the selection set, NULL if none */
	struct graphql_sel	*next;
};

struct graphql_vardef {
	const char		*name;
	const char		*type;		/* as written, without blanks: "[String!]!" */
	struct graphql_value	*defval;	/* default value, or NULL */
	struct graphql_directive *dirs;
	struct graphql_vardef	*next;
};

struct graphql_op {
	enum graphql_op_type	 type;
	const char		*name;		/* NULL: anonymous (or the { } shorthand) */
	struct graphql_vardef	*vars;
	struct graphql_directive *dirs;
	struct graphql_sel	*sels;
	struct graphql_op	*next;
};

struct graphql_frag {
	const char		*name;
	const char		*type_cond;
	struct graphql_directive *dirs;
	struct graphql_sel	*sels;
	struct graphql_frag	*next;
};

struct graphql_doc {
	struct graphql_op	*ops;
	size_t			 nops;
	struct graphql_frag	*frags;
	size_t			 nfrags;
	struct graphql_arena	*arena;
};

/*
 * Parse src[0..len). Returns the document, or NULL with *cause set (a short
 * sentence, caller frees) when the input is not a valid executable document within
 * the limits above.
 */
struct graphql_doc	*graphql_parse(const char *src, size_t len, char **cause);
void			 graphql_free(struct graphql_doc *);
/* The fragment called name, or NULL. */
const struct graphql_frag *graphql_fragment(const struct graphql_doc *, const char *name);
/* "query", "mutation" or "subscription". */
const char		*graphql_op_word(enum graphql_op_type);

#endif
