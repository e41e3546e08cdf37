/*
 * Unit tests: the HTTP policy (bridge/httppolicy.c). Recorded real gh 2.23
 * requests (tests/fuzz/corpus/httppolicy/gh-*) must pass, the recorded ones gh
 * sends for refused features (ghdeny-*) and for attacks an agent could try with
 * gh (ghattack-*: other repositories, qualifiers, merges, deletes, ...) must not,
 * and every bypass tried here
 * (encodings, dot segments, qualifiers, aliases, variables, fragments, ...) must be
 * refused with a reason.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "httppolicy.h"

static const char *const repos[] = { "o/r", "Octo-Org/Widgets" };

static struct httppolicy_verdict last;

/* Run the policy on one request; keeps the verdict in `last` for message checks. */
static int
hp(enum http_api api, int push, const char *method, const char *target, const char *ct,
    const char *body, size_t body_len)
{
	struct httppolicy_scope sc = { api, repos, 2, push };
	struct httppolicy_req req = { method, target, ct, (const unsigned char *)body,
	    body_len };

	httppolicy_verdict_free(&last);
	assert_int_equal(httppolicy_check(&sc, &req, &last), 0);
	assert_non_null(last.summary);
	assert_true(last.allowed == (last.reason == NULL));
	return last.allowed;
}

#define GET(t)		hp(HTTP_API_GITHUB, 0, "GET", (t), NULL, NULL, 0)
#define GHE(m, t)	hp(HTTP_API_GHE, 0, (m), (t), NULL, NULL, 0)
#define REST(m, t)	hp(HTTP_API_GITHUB, 0, (m), (t), "application/json", "{}", 2)
#define GIT(m, t, p)	hp(HTTP_API_GIT, (p), (m), (t), NULL, NULL, 0)

/* A GraphQL request with the query, variables (JSON text or NULL) and operationName. */
static int
gql(const char *query, const char *vars, const char *opname)
{
	json_t *o = json_object(), *v;
	char *body;
	int r;

	json_object_set_new(o, "query", json_string(query));
	if (vars != NULL) {
		v = json_loads(vars, 0, NULL);
		assert_non_null(v);
		json_object_set_new(o, "variables", v);
	}
	if (opname != NULL)
		json_object_set_new(o, "operationName", json_string(opname));
	body = json_dumps(o, JSON_COMPACT);
	r = hp(HTTP_API_GITHUB, 0, "POST", "/graphql", "application/json; charset=utf-8",
	    body, strlen(body));
	free(body);
	json_decref(o);
	return r;
}

/* Whether the last refusal mentions s. */
static int
why_has(const char *s)
{
	return last.reason != NULL && strstr(last.reason, s) != NULL;
}

/* Replay the recorded requests: gh-* allowed, ghdeny-* and ghattack-* refused. */
static void
test_recorded_gh(void **state)
{
	const char *dir = getenv("HTTPPOLICY_CORPUS") != NULL ? getenv("HTTPPOLICY_CORPUS") :
	    "tests/fuzz/corpus/httppolicy";
	struct dirent *de;
	size_t nallow = 0, ndeny = 0;
	DIR *d;

	(void)state;
	d = opendir(dir);
	assert_non_null(d);	/* run from the source tree (as tests/run-all does) */
	while ((de = readdir(d)) != NULL) {
		char path[1024], *buf, *m, *t, *ct, *b;
		int deny = strncmp(de->d_name, "ghdeny-", 7) == 0 ||
		    strncmp(de->d_name, "ghattack-", 9) == 0;
		size_t n;
		FILE *f;

		if (strncmp(de->d_name, "gh-", 3) != 0 && !deny)
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		assert_non_null(f = fopen(path, "rb"));
		buf = malloc(HTTPPOLICY_MAX_BODY + 16384);
		n = fread(buf, 1, HTTPPOLICY_MAX_BODY + 16383, f);
		fclose(f);
		buf[n] = '\0';
		m = buf + 1;
		assert_non_null(t = strchr(m, '\n'));
		*t++ = '\0';
		assert_non_null(ct = strchr(t, '\n'));
		*ct++ = '\0';
		assert_non_null(b = strchr(ct, '\n'));
		*b++ = '\0';
		if (hp(buf[0] == 1 ? HTTP_API_GHE : HTTP_API_GITHUB, 0, m, t, *ct ? ct : NULL, b,
		    n - (size_t)(b - buf)) == deny) {
			fprintf(stderr, "recorded %s: %s (%s)\n", de->d_name, last.summary,
			    last.reason != NULL ? last.reason : "allowed");
			fail();
		}
		if (deny)
			ndeny++;
		else
			nallow++;
		free(buf);
	}
	closedir(d);
	assert_true(nallow >= 150);
	assert_true(ndeny >= 60);
}

static void
test_rest_paths(void **state)
{
	(void)state;
	assert_true(GET("/repos/o/r/issues"));
	assert_string_equal(last.summary, "GET /repos/o/r/issues");
	assert_true(GET("/repos/O/R/pulls/1"));
	assert_true(GET("/repos/octo-org/WIDGETS/readme"));
	assert_true(GET("/repos/o/r"));
	assert_true(GET("/repos/o/r/"));
	assert_true(GET("/repos/o/r.git/issues"));		/* the same repository */
	assert_true(GET("/repos/o/r/issues?state=all&per_page=100"));
	assert_true(GET("/repos/o/r/compare/main...feature"));
	assert_true(GET("/repos/o/r/contents/docs/a%20b.md"));
	assert_true(GET("/"));
	assert_true(GET("/user"));
	assert_true(GET("/meta"));
	assert_true(GET("/rate_limit"));
	assert_true(GET("/users/octocat"));
	assert_true(hp(HTTP_API_GITHUB, 0, "HEAD", "/repos/o/r", NULL, NULL, 0));
	/* Other repositories, however spelled. */
	assert_false(GET("/repos/x/y"));
	assert_true(why_has("x/y") && why_has("not one this session may act on"));
	assert_false(GET("/repos/x/y.git/issues"));
	assert_false(GET("/repos/o/r2/issues"));
	assert_false(GET("/repos/o"));
	assert_false(GET("/repos/o%2Fr/issues"));
	assert_false(GET("/repos/o/r%2F..%2F..%2Fx%2Fy"));
	assert_false(GET("/repos%2Fx%2Fy/issues"));
	assert_false(GET("/repos/o/r/../../x/y/issues"));
	assert_false(GET("/repos/o/r/%2e%2e/%2E%2E/x/y"));
	assert_false(GET("/repos/o/r/./issues"));
	assert_false(GET("/repos/./o/r"));
	assert_false(GET("/repos/o/%2572"));			/* double encoding */
	assert_false(GET("/repos/o/r%252F..%252Fx"));
	assert_false(GET("//repos/o/r"));
	assert_false(GET("/repos//o/r"));
	assert_false(GET("/repos/o/r\\..\\x"));
	assert_false(GET("/repos/o/r%5C..%5Cx/y"));
	assert_false(GET("/repos/o/r%00/issues"));
	assert_false(GET("/repos/o/r%0a/issues"));
	assert_false(GET("/repos/o/r%ff"));			/* invalid UTF-8 */
	assert_false(GET("/repos/o/r%c0%af"));			/* overlong '/' */
	assert_false(GET("/repos/o/r.git%3F/issues"));
	assert_false(GET("/repos/o/r%"));
	assert_false(GET("/repos/o/r%4"));
	assert_false(GET("/repos/o/r%zz"));
	assert_false(GET("/repos/o/r#x"));
	assert_false(GET("/repos/o/r x"));
	assert_false(GET("/repos/o/r\t"));
	assert_false(GET("/repos/o/\xc3\xa9"));
	assert_false(GET("https://api.github.com/repos/o/r"));
	assert_false(GET("repos/o/r"));
	assert_false(GET(""));
	assert_false(GET("*"));
	/* Endpoints outside the repositories. */
	assert_false(GET("/user/repos"));
	assert_false(GET("/users/x/repos"));
	assert_false(GET("/users/octo-agent/received_events"));
	assert_false(GET("/orgs/o"));
	assert_false(GET("/orgs/o/repos"));
	assert_false(GET("/notifications"));
	assert_false(GET("/gists"));
	assert_false(GET("/repositories/123/issues"));
	assert_true(why_has("/repositories/ID"));
	assert_false(GET("/repos/o/r/forks"));
	assert_false(GET("/repos/o/r/compare/main...x:secret"));
	assert_false(GET("/graphql"));
	assert_false(GET("/api/v3/repos/o/r"));			/* GHE prefix on github.com */
	{
		char big[HTTPPOLICY_MAX_TARGET + 16];

		memset(big, 'a', sizeof big - 1);
		memcpy(big, "/repos/o/r/", 11);
		big[sizeof big - 1] = '\0';
		assert_false(GET(big));
	}
}

static void
test_rest_methods(void **state)
{
	(void)state;
	assert_true(REST("POST", "/repos/o/r/issues"));
	assert_true(REST("POST", "/repos/o/r/issues/1/comments"));
	assert_true(REST("PATCH", "/repos/o/r/issues/12"));
	assert_true(REST("PATCH", "/repos/o/r/issues/comments/99"));
	assert_true(REST("POST", "/repos/o/r/issues/1/labels"));
	assert_true(REST("POST", "/repos/o/r/pulls"));
	assert_true(REST("PATCH", "/repos/o/r/pulls/3"));
	assert_true(REST("POST", "/repos/o/r/pulls/3/reviews"));
	assert_true(REST("POST", "/repos/o/r/pulls/3/requested_reviewers"));
	assert_false(REST("POST", "/repos/x/y/issues"));
	assert_false(REST("POST", "/repos/o/r/issues/1x/comments"));
	assert_false(REST("POST", "/repos/o/r/issues/1/comments/2"));
	assert_false(REST("DELETE", "/repos/o/r/issues/comments/1"));
	assert_true(why_has("DELETE"));
	assert_false(REST("DELETE", "/repos/o/r"));
	assert_false(REST("PUT", "/repos/o/r/pulls/1/merge"));
	assert_false(REST("PATCH", "/repos/o/r"));
	assert_false(REST("POST", "/repos/o/r/forks"));
	assert_false(REST("POST", "/repos/o/r/transfer"));
	assert_false(REST("POST", "/repos/o/r/git/refs"));
	assert_false(REST("POST", "/user/repos"));
	assert_false(REST("POST", "/user"));
	assert_false(REST("PATCH", "/user"));
	assert_false(REST("POST", "/"));
	assert_false(REST("get", "/repos/o/r"));
	assert_false(REST("GETX", "/repos/o/r"));
	assert_false(REST("TRACE", "/repos/o/r"));
	assert_false(REST("OPTIONS", "/repos/o/r"));
	assert_false(REST("", "/repos/o/r"));
	assert_false(REST("CONNECT", "api.github.com:443"));
	/* Method overrides and non-JSON writes. */
	assert_false(REST("POST", "/repos/o/r/issues?_method=DELETE"));
	assert_false(REST("POST", "/repos/o/r/issues?x=1&%5Fmethod=DELETE"));
	assert_false(REST("POST", "/repos/o/r/issues?_METHOD=DELETE"));
	assert_false(GET("/repos/o/r/issues?_method=DELETE"));
	assert_false(hp(HTTP_API_GITHUB, 0, "POST", "/repos/o/r/issues",
	    "application/x-www-form-urlencoded", "_method=DELETE", 14));
	assert_true(hp(HTTP_API_GITHUB, 0, "POST", "/repos/o/r/issues", NULL, "{}", 2));
}

static void
test_ghe_prefix(void **state)
{
	(void)state;
	assert_true(GHE("GET", "/api/v3/repos/o/r/issues"));
	assert_string_equal(last.summary, "GET /api/v3/repos/o/r/issues");
	assert_true(GHE("GET", "/api/v3/"));
	assert_true(GHE("GET", "/api/v3"));
	assert_true(GHE("GET", "/api/v3/user"));
	assert_false(GHE("GET", "/repos/o/r"));
	assert_false(GHE("GET", "/api/v3/repos/x/y"));
	assert_false(GHE("GET", "/api/v3/../v3/repos/x/y"));
	assert_false(GHE("GET", "/api/v3%2Frepos/o/r"));
	assert_false(GHE("GET", "/api/uploads/repos/o/r/releases/1/assets"));
	assert_false(GHE("GET", "/api/v4/repos/o/r"));
	assert_false(GHE("POST", "/graphql"));
	assert_false(hp(HTTP_API_GITHUB, 0, "POST", "/api/graphql", "application/json",
	    "{\"query\":\"{viewer{login}}\"}", 27));
	assert_true(hp(HTTP_API_GHE, 0, "POST", "/api/graphql", "application/json",
	    "{\"query\":\"{viewer{login}}\"}", 27));
}

static void
test_search_rest(void **state)
{
	(void)state;
	assert_true(GET("/search/issues?q=foo+repo%3Ao%2Fr+type%3Aissue&page=1&per_page=30"));
	assert_true(GET("/search/issues?q=repo:o/r"));
	assert_true(GET("/search/issues?q=repo%3A%22o%2Fr%22+is%3Aopen"));	/* quoted */
	assert_true(GET("/search/issues?q=repo:O/R+repo:octo-org/widgets"));
	assert_true(GET("/search/issues?q=repo:o/r+-repo:x/y+-org:x"));
	assert_false(GET("/search/issues?q=repo:o/r%09is:open"));	/* spaces only */
	assert_false(GET("/search/issues?q=repo:o/r%0arepo:x/y"));
	assert_true(GET("/search/issues?q=repo:o/r&sort=created&order=asc"));
	assert_true(GET("/search/commits?q=foo+repo%3Ao%2Fr"));
	assert_true(GET("/search/code?q=foo+repo:o/r"));
	assert_true(GET("/search/issues?q=repo:o/r+reason:%22not+planned%22"));
	/* No repository: searches everything. */
	assert_false(GET("/search/issues?q=foo+type%3Aissue"));
	assert_true(why_has("--repo OWNER/REPO"));
	assert_false(GET("/search/issues"));
	assert_false(GET("/search/issues?q="));
	assert_false(GET("/search/issues?page=1"));
	/* Other repositories or wider scopes. */
	assert_false(GET("/search/issues?q=repo:x/y"));
	assert_false(GET("/search/issues?q=repo:o/r+repo:x/y"));
	assert_false(GET("/search/issues?q=REPO:x/y+repo:o/r"));
	assert_false(GET("/search/issues?q=Repo%3Ax%2Fy+repo:o/r"));
	assert_false(GET("/search/issues?q=repo:o/r+org:x"));
	assert_false(GET("/search/issues?q=repo:o/r+org:o"));
	assert_false(GET("/search/issues?q=repo:o/r+user:x"));
	assert_false(GET("/search/issues?q=repo:o/r+owner:x"));
	assert_false(GET("/search/issues?q=repo:o/r+repository:x/y"));
	assert_false(GET("/search/issues?q=repo:o/r/x"));
	assert_false(GET("/search/issues?q=repo:o/"));
	assert_false(GET("/search/issues?q=repo:/r"));
	assert_false(GET("/search/issues?q=repo:o/r,x/y"));
	assert_false(GET("/search/issues?q=repo:%22o/r%22x/y"));
	/* Operators and grouping that could widen a qualifier. */
	assert_false(GET("/search/issues?q=repo:o/r+OR+is:open"));
	assert_false(GET("/search/issues?q=is:open+or+repo:o/r"));
	assert_false(GET("/search/issues?q=repo:o/r+NOT+x"));
	assert_false(GET("/search/issues?q=repo:o/r+AND+x"));
	assert_false(GET("/search/issues?q=(repo:o/r)"));
	assert_false(GET("/search/issues?q=repo:o/r+(is:open+OR+is:closed)"));
	/* Qualifiers hidden inside other terms or quotes. */
	assert_false(GET("/search/issues?q=foo,repo:x/y+repo:o/r"));
	assert_false(GET("/search/issues?q=is:repo:x/y+repo:o/r"));
	assert_false(GET("/search/issues?q=%22x+repo:x/y%22+repo:o/r"));
	assert_false(GET("/search/issues?q=label:%22a+org:x%22+repo:o/r"));
	assert_false(GET("/search/issues?q=foo%C2%A0repo:x/y+repo:o/r"));	/* NBSP */
	assert_false(GET("/search/issues?q=foo%E3%80%80repo:x/y+repo:o/r"));	/* U+3000 */
	assert_false(GET("/search/issues?q=%22repo:o/r"));		/* unterminated quote */
	/* Query-string tricks. */
	assert_false(GET("/search/issues?q=repo:o/r&q=repo:x/y"));
	assert_false(GET("/search/issues?q[]=repo:x/y&q=repo:o/r"));
	assert_false(GET("/search/issues?q=repo:o/r&advanced_search=true"));
	assert_false(GET("/search/issues?q=repo:o/r;q=repo:x/y"));
	assert_false(GET("/search/issues?q=repo:o/r%"));
	assert_false(GET("/search/issues?q=repo:o/r%00"));
	assert_false(GET("/search/issues?q=repo:o/r%0b"));
	assert_false(GET("/search/issues?q=repo:o/r%ff"));
	assert_false(GET("/search/issues?%71=repo:x/y&q=repo:o/r"));	/* %71 is q */
	assert_false(GET("/search/repositories?q=repo:o/r"));
	assert_false(GET("/search/users?q=repo:o/r"));
	assert_false(REST("POST", "/search/issues?q=repo:o/r"));
}

static void
test_graphql_scope(void **state)
{
	(void)state;
	assert_true(gql("query($owner:String!,$repo:String!){repository(owner:$owner,"
	    "name:$repo){issues(first:1){nodes{title author{login}}}}}",
	    "{\"owner\":\"o\",\"repo\":\"r\"}", NULL));
	assert_true(gql("{repository(owner:\"OCTO-org\",name:\"widgets\"){id}}", NULL, NULL));
	assert_true(gql("{viewer{login}}", NULL, NULL));
	assert_string_equal(last.summary, "graphql query viewer");
	assert_true(gql("query Q{rateLimit{remaining}}", NULL, NULL));
	assert_true(gql("{__schema{types{name fields{name}}}}", NULL, NULL));
	assert_true(gql("{__type(name:\"Issue\"){fields(includeDeprecated:true){name}}}", NULL,
	    NULL));
	assert_true(gql("{user(login:\"x\"){id login}}", NULL, NULL));
	assert_true(gql("{organization(login:\"octo-org\"){teams(first:10){nodes{id slug}}}}",
	    NULL, NULL));
	assert_true(gql("{node(id:\"I_1\"){...on Issue{title}}}", NULL, NULL));
	assert_true(gql("{repository(owner:\"o\",name:\"r\"){parent{name owner{login}}}}", NULL,
	    NULL));
	assert_true(gql("{repository(owner:\"o\",name:\"r\"){issues(first:1){nodes{title "
	    "@include(if:true)}}}}", NULL, NULL));
	/* repository() elsewhere: literal, variable, default, alias, fragments. */
	assert_false(gql("{repository(owner:\"x\",name:\"y\"){id}}", NULL, NULL));
	assert_true(why_has("not one this session may act on"));
	assert_false(gql("query($o:String!,$n:String!){repository(owner:$o,name:$n){id}}",
	    "{\"o\":\"x\",\"n\":\"y\"}", NULL));
	assert_false(gql("query($o:String=\"x\",$n:String=\"y\"){repository(owner:$o,name:$n)"
	    "{id}}", NULL, NULL));
	assert_false(gql("query($o:String=\"o\",$n:String=\"r\"){repository(owner:$o,name:$n)"
	    "{id}}", "{\"o\":\"x\",\"n\":\"y\"}", NULL));	/* variables beat defaults */
	assert_true(gql("query($o:String=\"o\",$n:String=\"r\"){repository(owner:$o,name:$n)"
	    "{id}}", NULL, NULL));
	assert_false(gql("{a:repository(owner:\"o\",name:\"r\"){id} b:repository(owner:\"x\","
	    "name:\"y\"){id}}", NULL, NULL));
	assert_false(gql("{...F} fragment F on Query{repository(owner:\"x\",name:\"y\"){id}}",
	    NULL, NULL));
	assert_false(gql("{...on Query{repository(owner:\"x\",name:\"y\"){id}}}", NULL, NULL));
	assert_false(gql("{repository(owner:\"o\",name:\"r\"){...F}} fragment F on Repository"
	    "{owner{repository(name:\"secret\"){issues{nodes{body}}}}}", NULL, NULL));
	assert_false(gql("{repository(owner:\"o\",name:\"r\"){owner{...on User{repositories("
	    "first:9){nodes{name}}}}}}", NULL, NULL));
	assert_false(gql("{repository(owner:\"o\",name:\"r\"){parent{issues(first:1){nodes"
	    "{body}}}}}", NULL, NULL));
	assert_false(gql("{repository(owner:\"o\",name:\"r\"){pullRequest(number:1){"
	    "headRepository{object(expression:\"HEAD\"){id}}}}}", NULL, NULL));
	assert_false(gql("{repository(owner:\"o\",name:\"r\"){issue(number:1){author{...on User"
	    "{issues(first:5){nodes{body}}}}}}}", NULL, NULL));
	assert_false(gql("{repository(owner:\"o\",name:\"r\"){issue(number:1){timelineItems("
	    "first:5){nodes{...on CrossReferencedEvent{source{...on Issue{body}}}}}}}}", NULL,
	    NULL));
	assert_false(gql("{repository(owner:\"o\",name:\"r\"){issue(number:1){author{...on User"
	    "{organization(login:\"x\"){id}}}}}}", NULL, NULL));
	assert_false(gql("{repository(owner:\"o\",name:\"r\"){projectCards{nodes{project{"
	    "columns{nodes{name}}}}}}}", NULL, NULL));
	assert_false(gql("{repository(owner:\"o\",name:\"r\"){projectsV2(first:1){nodes{items("
	    "first:9){nodes{content{...on Issue{body}}}}}}}}", NULL, NULL));
	assert_false(gql("{viewer{repositories(first:9){nodes{name}}}}", NULL, NULL));
	assert_false(gql("{viewer{repository(name:\"x\"){id}}}", NULL, NULL));
	assert_false(gql("{user(login:\"x\"){repositories(first:9){nodes{name}}}}", NULL, NULL));
	assert_false(gql("{organization(login:\"x\"){id}}", NULL, NULL));
	assert_false(gql("{organization(login:\"o\"){repositories(first:1){nodes{id}}}}", NULL,
	    NULL));
	assert_false(gql("{organization(login:\"o\"){teams(first:1){nodes{repositories(first:1)"
	    "{nodes{id}}}}}}", NULL, NULL));
	assert_false(gql("{repositoryOwner(login:\"x\"){id}}", NULL, NULL));
	assert_false(gql("{resource(url:\"https://github.com/x/y\"){__typename}}", NULL, NULL));
	assert_false(gql("{relay{repository(owner:\"x\",name:\"y\"){id}}}", NULL, NULL));
	assert_false(gql("{repository(owner:\"o\",name:\"r\"){id} topic(name:\"x\"){id}}", NULL,
	    NULL));
	/* Argument forms the policy cannot resolve. */
	assert_false(gql("query($o:String!){repository(owner:$o,name:\"r\"){id}}", NULL, NULL));
	assert_false(gql("query($o:String!){repository(owner:$o,name:\"r\"){id}}",
	    "{\"o\":null}", NULL));
	assert_false(gql("query($o:String!){repository(owner:$o,name:\"r\"){id}}",
	    "{\"o\":[\"o\"]}", NULL));
	assert_false(gql("query($o:String!){repository(owner:$o,name:\"r\"){id}}",
	    "{\"o\":7}", NULL));
	assert_false(gql("{repository(owner:$o,name:\"r\"){id}}", "{\"o\":\"o\"}", NULL));
	assert_false(gql("{repository(owner:o,name:r){id}}", NULL, NULL));	/* enums */
	assert_false(gql("{repository(owner:\"o\\u0000x\",name:\"r\"){id}}", NULL, NULL));
	assert_false(gql("{repository(owner:\"o\",name:\"r/../y\"){id}}", NULL, NULL));
	assert_false(gql("{repository(name:\"r\"){id}}", NULL, NULL));
	assert_false(gql("{repository(owner:\"o\",name:\"r\",extra:1){id}}", NULL, NULL));
	/* Block strings: their value hangs on indentation rules; gh never sends them. */
	assert_false(gql("{repository(owner:\"\"\"o\"\"\",name:\"\"\"\n  r\n\"\"\"){id}}", NULL,
	    NULL));
	assert_false(gql("query($o:String=\"\"\"o\"\"\"){repository(owner:$o,name:\"r\"){id}}",
	    NULL, NULL));
	assert_true(gql("{repository(owner:\"\\u006f\",name:\"r\"){id}}", NULL, NULL));
	/* node(id:): issues and pull requests only. */
	assert_true(gql("query($id:ID!){node(id:$id){...on PullRequest{number} ...F __typename "
	    "id}} fragment F on Issue{title}", "{\"id\":\"PR_1\"}", NULL));
	assert_false(gql("{node(id:\"R_1\"){...on Repository{name}}}", NULL, NULL));
	assert_false(gql("{node(id:\"R_1\"){...F}} fragment F on Repository{name}", NULL, NULL));
	assert_false(gql("{node(id:\"R_1\"){...{id}}}", NULL, NULL));
	assert_false(gql("{node(id:\"U_1\"){login}}", NULL, NULL));
	assert_false(gql("{nodes(ids:[\"I_1\"]){...on Issue{repository{issues(first:1){nodes{"
	    "body}}}}}}", NULL, NULL));
	/* Fields gh never reads are refused, wherever they are. */
	assert_false(gql("{repository(owner:\"o\",name:\"r\"){object(expression:\"HEAD:x\"){"
	    "...on Blob{text}}}}", NULL, NULL));
	assert_true(why_has("object"));
	assert_false(gql("{repository(owner:\"o\",name:\"r\"){issue(number:1){author{...on User"
	    "{bio company}}}}}", NULL, NULL));
	assert_false(gql("mutation{createIssue(input:{}){issue{repository{object(expression:"
	    "\"HEAD\"){id}}}}}", NULL, NULL));
	assert_false(gql("{repository(owner:\"\"\"x\"\"\",name:\"\"\"y\"\"\"){id}}", NULL, NULL));
	/* Directives other than skip/include. */
	assert_false(gql("{viewer{login @export(as:\"x\")}}", NULL, NULL));
	assert_false(gql("query @live {viewer{login}}", NULL, NULL));
	assert_false(gql("query($o:String=\"o\" @x){repository(owner:$o,name:\"r\"){id}}", NULL,
	    NULL));
	assert_false(gql("{...F} fragment F on Query @x {viewer{login}}", NULL, NULL));
	assert_true(gql("{...F @include(if:true)} fragment F on Query {viewer{login}}", NULL,
	    NULL));
}

static void
test_graphql_search(void **state)
{
	(void)state;
	assert_true(gql("query($q:String!){search(query:$q,type:ISSUE,first:5){nodes{...on "
	    "Issue{title repository{nameWithOwner}}}}}", "{\"q\":\"foo repo:o/r\"}", NULL));
	assert_true(gql("{search(query:\"repo:o/r is:open\",type:ISSUE,first:5){issueCount}}",
	    NULL, NULL));
	assert_false(gql("query($q:String!){search(query:$q,type:ISSUE,first:5){issueCount}}",
	    "{\"q\":\"assignee:@me state:open\"}", NULL));
	assert_true(why_has("--repo OWNER/REPO"));
	assert_false(gql("{search(query:\"repo:x/y\",type:ISSUE,first:5){issueCount}}", NULL,
	    NULL));
	assert_false(gql("{search(query:\"repo:o/r org:x\",type:ISSUE,first:5){issueCount}}",
	    NULL, NULL));
	assert_false(gql("{a:search(query:\"repo:o/r\",type:ISSUE,first:5){issueCount} b:search("
	    "query:\"is:open\",type:ISSUE,first:5){issueCount}}", NULL, NULL));
	assert_false(gql("{search(query:\"repo:o/r\",type:REPOSITORY,first:5){issueCount}}",
	    NULL, NULL));
	assert_false(gql("query($t:SearchType!){search(query:\"repo:o/r\",type:$t,first:5)"
	    "{issueCount}}", "{\"t\":\"USER\"}", NULL));
	assert_true(gql("query($t:SearchType!){search(query:\"repo:o/r\",type:$t,first:5)"
	    "{issueCount}}", "{\"t\":\"ISSUE\"}", NULL));
	assert_false(gql("{search(type:ISSUE,first:5){issueCount}}", NULL, NULL));
	assert_false(gql("{repository(owner:\"o\",name:\"r\"){issue(number:1){author{...on User{"
	    "id}}}} s:search(query:\"is:open\",type:ISSUE,first:1){issueCount}}", NULL, NULL));
}

static void
test_graphql_mutations(void **state)
{
	(void)state;
	assert_true(gql("mutation IssueCreate($input: CreateIssueInput!) { createIssue(input: "
	    "$input) { issue { id url } } }", "{\"input\":{\"repositoryId\":\"R_1\",\"title\":"
	    "\"t\"}}", NULL));
	assert_string_equal(last.summary, "graphql mutation IssueCreate createIssue");
	assert_true(gql("mutation{addComment(input:{subjectId:\"I_1\",body:\"b\"}){commentEdge{"
	    "node{url}}}}", NULL, NULL));
	assert_true(gql("mutation{a:closeIssue(input:{issueId:\"I_1\"}){issue{id}} b:addComment("
	    "input:{subjectId:\"I_1\",body:\"b\"}){__typename}}", NULL, NULL));
	assert_false(gql("mutation{deleteIssue(input:{issueId:\"I_1\"}){clientMutationId}}",
	    NULL, NULL));
	assert_true(why_has("deleteIssue"));
	assert_false(gql("mutation IssueCreate{mergePullRequest(input:{pullRequestId:\"P\"}){"
	    "clientMutationId}}", NULL, "IssueCreate"));	/* names do not matter */
	assert_false(gql("mutation{createIssue:transferIssue(input:{}){clientMutationId}}", NULL,
	    NULL));						/* alias */
	assert_false(gql("mutation{...M} fragment M on Mutation{deleteRepository:deleteIssue("
	    "input:{}){clientMutationId}}", NULL, NULL));
	assert_false(gql("mutation{... on Mutation{archiveRepository(input:{}){"
	    "clientMutationId}}}", NULL, NULL));
	assert_false(gql("mutation{createIssue(input:{}){issue{author{...on User{repositories("
	    "first:1){nodes{name}}}}}}}", NULL, NULL));
	/* Several operations: every one is checked; the one to run must be named. */
	assert_false(gql("query A{viewer{login}} mutation B{deleteIssue(input:{}){"
	    "clientMutationId}}", NULL, "A"));
	assert_false(gql("query A{viewer{login}} query B{viewer{login}}", NULL, NULL));
	assert_true(why_has("operationName"));
	assert_true(gql("query A{viewer{login}} query B{viewer{id}}", NULL, "B"));
	assert_false(gql("query A{viewer{login}}", NULL, "B"));
	assert_false(gql("subscription{issueUpdated{id}}", NULL, NULL));
	assert_false(gql("mutation{addProjectV2ItemById(input:{}){item{id}}}", NULL, NULL));
	assert_false(gql("mutation{enablePullRequestAutoMerge(input:{}){clientMutationId}}", NULL,
	    NULL));
}

static void
test_graphql_bodies(void **state)
{
	const char *q = "{\"query\":\"{viewer{login}}\"}";
	char *big, *deep;
	size_t i, n;

	(void)state;
#define POST(ct, b, n)	hp(HTTP_API_GITHUB, 0, "POST", "/graphql", (ct), (b), (n))
#define PL(lit)		POST("application/json", (lit), sizeof(lit) - 1)
	assert_true(POST("application/json", q, strlen(q)));
	assert_true(POST("Application/JSON; charset=utf-8", q, strlen(q)));
	assert_false(POST(NULL, q, strlen(q)));
	assert_false(POST("text/plain", q, strlen(q)));
	assert_false(POST("application/x-www-form-urlencoded", q, strlen(q)));
	assert_false(POST("application/jsonx", q, strlen(q)));
	assert_false(POST("application/json x", q, strlen(q)));
	assert_true(POST("application/json ;charset=utf-8", q, strlen(q)));
	assert_false(hp(HTTP_API_GITHUB, 0, "GET", "/graphql?query=%7Bviewer%7Blogin%7D%7D",
	    NULL, NULL, 0));
	assert_false(hp(HTTP_API_GITHUB, 0, "POST", "/graphql?query=x", "application/json", q,
	    strlen(q)));
	assert_false(hp(HTTP_API_GITHUB, 0, "PUT", "/graphql", "application/json", q, strlen(q)));
	assert_false(POST("application/json", NULL, 0));
	assert_false(PL(""));
	assert_false(PL("not json"));
	assert_false(PL("[1]"));
	assert_false(PL("{\"query\":\"{viewer{login}}\",\"query\":"
	    "\"mutation{deleteIssue(input:{}){clientMutationId}}\"}"));
	assert_false(PL("{\"query\":\"{viewer{login}}\",\"extensions\":{}}"));
	assert_false(PL("{\"query\":1}"));
	assert_false(PL("{\"query\":\"{viewer{login}}\",\"variables\":[]}"));
	assert_false(PL("{\"query\":\"{viewer{login}}\",\"operationName\":1}"));
	assert_false(PL("{\"query\":\"{viewer{login}}\"}\0x"));
	assert_false(PL("{\"query\":\"{viewer{login}}\\u0000\"}"));
	assert_false(PL("{\"query\":\"{viewer{login}}\xff\"}"));
	assert_false(PL("{\"query\":\"{viewer{login\\u0001}}\"}"));
	/* Size and depth limits. */
	n = HTTPPOLICY_MAX_BODY + 10;
	big = malloc(n);
	memset(big, ' ', n);
	memcpy(big, q, strlen(q));
	assert_false(POST("application/json", big, n));
	free(big);
	deep = malloc(4096);
	strcpy(deep, "{repository(owner:\"o\",name:\"r\")");
	for (i = 0; i < 60; i++)
		strcat(deep, "{issues");
	strcat(deep, "{id");
	for (i = 0; i < 62; i++)
		strcat(deep, "}");
	assert_false(gql(deep, NULL, NULL));
	assert_true(why_has("nests deeper"));
	free(deep);
	/* Fragment cycles and exponential fragment expansion. */
	assert_false(gql("{...A} fragment A on Query{...B} fragment B on Query{...A}", NULL,
	    NULL));
	{
		char doc[8192];
		int k;

		snprintf(doc, sizeof doc, "{viewer{...F0}}");
		for (k = 0; k < 15; k++)
			snprintf(doc + strlen(doc), sizeof doc - strlen(doc),
			    " fragment F%d on User{...F%d ...F%d}", k, k + 1, k + 1);
		snprintf(doc + strlen(doc), sizeof doc - strlen(doc), " fragment F15 on User{login}");
		assert_false(gql(doc, NULL, NULL));
		assert_true(why_has("expands to more than"));
	}
	/* Nothing of the body reaches the summary or the reason. */
	assert_false(gql("mutation SECRETNAME{deleteIssue(input:{issueId:\"BODYSECRET\"}){"
	    "clientMutationId}}", NULL, NULL));
	assert_null(strstr(last.summary, "BODYSECRET"));
	assert_null(strstr(last.reason, "BODYSECRET"));
}

static void
test_git(void **state)
{
	(void)state;
	assert_true(GIT("GET", "/o/r.git/info/refs?service=git-upload-pack", 0));
	assert_string_equal(last.summary, "GET /o/r.git/info/refs?service=git-upload-pack");
	assert_true(GIT("GET", "/o/r/info/refs?service=git-upload-pack", 0));
	assert_true(GIT("GET", "/Octo-Org/widgets.git/info/refs?service=git-upload-pack", 0));
	assert_true(GIT("POST", "/o/r.git/git-upload-pack", 0));
	assert_false(GIT("GET", "/o/r.git/info/refs?service=git-receive-pack", 0));
	assert_true(why_has("push"));
	assert_false(GIT("POST", "/o/r.git/git-receive-pack", 0));
	assert_true(GIT("GET", "/o/r.git/info/refs?service=git-receive-pack", 1));
	assert_true(GIT("POST", "/o/r.git/git-receive-pack", 1));
	assert_false(GIT("GET", "/x/y.git/info/refs?service=git-upload-pack", 1));
	assert_false(GIT("POST", "/x/y/git-upload-pack", 1));
	assert_false(GIT("GET", "/o/r.git/info/refs", 1));		/* dumb HTTP */
	assert_false(GIT("GET", "/o/r.git/info/refs?service=git-upload-pack&x=1", 1));
	assert_false(GIT("GET", "/o/r.git/info/refs?service=git-upload-archive", 1));
	assert_false(GIT("POST", "/o/r.git/info/refs?service=git-upload-pack", 1));
	assert_false(GIT("GET", "/o/r.git/git-upload-pack", 1));
	assert_false(GIT("POST", "/o/r.git/git-upload-pack?x=1", 1));
	assert_false(GIT("GET", "/o/r.git/HEAD", 1));
	assert_false(GIT("GET", "/o/r.git/objects/info/packs", 1));
	assert_false(GIT("POST", "/o/r.git/git-upload-archive", 1));
	assert_false(GIT("GET", "/o%2Fr.git/info/refs?service=git-upload-pack", 1));
	assert_false(GIT("GET", "/o/r/../../x/y/info/refs?service=git-upload-pack", 1));
	assert_false(GIT("GET", "/x/y/../../o/r/info/refs?service=git-upload-pack", 1));
	assert_false(GIT("GET", "/o/r.git/info/refs/?service=git-upload-pack/", 1));
	assert_false(GIT("PUT", "/o/r.git/git-receive-pack", 1));
	assert_false(GIT("POST", "/o/r/x/git-upload-pack", 1));
	assert_false(GIT("POST", "/r.git/git-upload-pack", 1));
	assert_false(GIT("GET", "/api/v3/repos/o/r", 1));
	assert_false(GIT("POST", "/graphql", 1));
}

/* What may be sent twice (the injector's retry on a kept connection upstream closed). */
static void
test_safe(void **state)
{
	(void)state;
	assert_true(GET("/repos/o/r/issues"));
	assert_true(last.safe);
	assert_false(GET("/repos/x/y/issues"));
	assert_false(last.safe);
	assert_true(REST("POST", "/repos/o/r/issues"));
	assert_false(last.safe);
	assert_true(gql("query{repository(owner:\"o\",name:\"r\"){id}}", NULL, NULL));
	assert_true(last.safe);
	assert_true(gql("query A{viewer{login}} query B{viewer{id}}", NULL, "B"));
	assert_true(last.safe);
	assert_true(gql("mutation{addComment(input:{subjectId:\"I_1\",body:\"b\"}){commentEdge{"
	    "node{url}}}}", NULL, NULL));
	assert_false(last.safe);
	assert_true(GIT("POST", "/o/r.git/git-upload-pack", 0));
	assert_true(last.safe);
	assert_true(GIT("GET", "/o/r.git/info/refs?service=git-receive-pack", 1));
	assert_true(last.safe);
	assert_true(GIT("POST", "/o/r.git/git-receive-pack", 1));
	assert_false(last.safe);
}

static void
test_messages(void **state)
{
	char target[600];

	(void)state;
	/* Summaries and reasons are printable ASCII, however odd the request. */
	assert_false(GET("/repos/o/r%0a%1b[31m/x"));
	assert_null(strpbrk(last.summary, "\n\x1b"));
	assert_false(gql("{repository(owner:\"\\u001b[31m\\n\",name:\"r\"){id}}", NULL, NULL));
	assert_null(strpbrk(last.reason, "\n\x1b"));
	memset(target, 'a', sizeof target - 1);
	memcpy(target, "/repos/x/", 9);
	target[sizeof target - 1] = '\0';
	assert_false(GET(target));
	assert_true(strlen(last.summary) <= 310);
	assert_true(hp(HTTP_API_GITHUB, 0, "GET", "/repos/o/r", NULL, NULL, 0));
	assert_null(last.reason);
	/* NULL arguments: -1, verdict refused. */
	{
		struct httppolicy_scope sc = { HTTP_API_GITHUB, repos, 2, 0 };
		struct httppolicy_req req = { NULL, "/", NULL, NULL, 0 };
		struct httppolicy_verdict v;

		assert_int_equal(httppolicy_check(&sc, &req, &v), -1);
		assert_false(v.allowed);
		httppolicy_verdict_free(&v);
		assert_int_equal(httppolicy_check(NULL, &req, NULL), -1);
	}
}

static int
teardown(void **state)
{
	(void)state;
	httppolicy_verdict_free(&last);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_recorded_gh, teardown),
		cmocka_unit_test_teardown(test_rest_paths, teardown),
		cmocka_unit_test_teardown(test_rest_methods, teardown),
		cmocka_unit_test_teardown(test_ghe_prefix, teardown),
		cmocka_unit_test_teardown(test_search_rest, teardown),
		cmocka_unit_test_teardown(test_graphql_scope, teardown),
		cmocka_unit_test_teardown(test_graphql_search, teardown),
		cmocka_unit_test_teardown(test_graphql_mutations, teardown),
		cmocka_unit_test_teardown(test_graphql_bodies, teardown),
		cmocka_unit_test_teardown(test_git, teardown),
		cmocka_unit_test_teardown(test_safe, teardown),
		cmocka_unit_test_teardown(test_messages, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
