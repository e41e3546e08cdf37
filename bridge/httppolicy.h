/*
 * The HTTP policy: what a host-side gh or git may send upstream through the
 * injector (bridge/inject.c), decided per request before the real credential is
 * added. Pure functions: no I/O, no event loop. What is allowed and why is in
 * docs/HTTP-POLICY.md; in short:
 *   - REST (HTTP_API_GITHUB at "/", HTTP_API_GHE at "/api/v3/"): a method + path
 *     allowlist of what gh's allowed subcommands call; every repository the path
 *     names (after percent-decoding; dot segments, empty segments and encoded
 *     slashes are refused) must be in scope; search queries need a repo:
 *     qualifier and may name only repositories in scope.
 *   - GraphQL (POST "/graphql" or "/api/graphql"): parsed (bridge/graphql.c);
 *     only known top-level query fields, repository(owner:, name:) in scope (from
 *     literals or variables), search(query:) as above, no field that reaches other
 *     repositories, mutations from a fixed list of field names.
 *   - git smart HTTP (HTTP_API_GIT): info/refs and upload-pack/receive-pack of a
 *     repository in scope; receive-pack only with allow_push.
 */
#ifndef SHIMBRIDGE_HTTPPOLICY_H
#define SHIMBRIDGE_HTTPPOLICY_H

#include <stddef.h>

#define HTTPPOLICY_MAX_TARGET	8192		/* bytes of request target */
#define HTTPPOLICY_MAX_BODY	(1024 * 1024)	/* bytes of a GraphQL request body */

enum http_api {
	HTTP_API_GITHUB,	/* REST at /, GraphQL at POST /graphql */
	HTTP_API_GHE,		/* REST at /api/v3/, GraphQL at POST /api/graphql */
	HTTP_API_GIT		/* smart HTTP: /OWNER/REPO[.git]/info/refs?service=git-upload-pack|
				   git-receive-pack, POST .../git-upload-pack|git-receive-pack */
};

struct httppolicy_scope {
	enum http_api		 api;
	const char *const	*repos;		/* "owner/name", compared case-insensitively */
	size_t			 nrepos;
	int			 allow_push;	/* git: receive-pack allowed */
};

struct httppolicy_req {
	const char		*method;
	const char		*target;	/* as received: path[?query] */
	const char		*content_type;	/* NULL if absent; GraphQL needs application/json */
	const unsigned char	*body;
	size_t			 body_len;
};

struct httppolicy_verdict {
	int	 allowed;
	char	*reason;	/* why refused: for agent + audit; NULL when allowed */
	char	*summary;	/* audit: "GET /repos/o/r/issues", "graphql mutation IssueCreate
				   createIssue"; never a body, always printable ASCII */
	int	 safe;		/* allowed, and sending it twice changes nothing upstream:
				   GET, HEAD, a GraphQL document of queries only, a git
				   upload-pack POST (a fetch's negotiation) */
};

/*
 * Decide on one request. Returns 0 with the verdict filled (allowed or not; the
 * caller frees it with httppolicy_verdict_free), or -1 only when an argument is
 * NULL (verdict then refused if it can be written).
 */
int	httppolicy_check(const struct httppolicy_scope *, const struct httppolicy_req *,
	    struct httppolicy_verdict *);
void	httppolicy_verdict_free(struct httppolicy_verdict *);

/*
 * The search-query check on its own (also used for GraphQL search(query:)): 0 if
 * q[0..len) searches only repositories in scope, else -1 with *why set.
 */
int	httppolicy_search_query(const struct httppolicy_scope *, const char *q, size_t len,
	    char **why);

#endif
