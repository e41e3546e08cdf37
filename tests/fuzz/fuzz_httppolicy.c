/*
 * libFuzzer target for the HTTP policy (bridge/httppolicy.c, with bridge/graphql.c
 * behind it).
 *
 * Input: byte 0 picks the API (bits 0-1: 0 github.com, 1 GHE, 2 git, 3 GHE), push
 * (bit 2) and the scope (bit 3: "o/r" and "Octo-Org/Widgets", else only "o/r").
 * The rest is "METHOD\nTARGET\nCONTENT-TYPE\nBODY" (an empty CONTENT-TYPE line is
 * no header); tests/fuzz/corpus/httppolicy/gh-* are requests recorded from the
 * real gh 2.23 against tests/fixtures/fakegh.py.
 *
 * Asserted for every input: the verdict is filled, allowed <=> no reason, summary
 * and reason are short printable ASCII. Asserted, independently of the policy's
 * code, for an allowed request:
 *   - the method is GET, HEAD, POST or PATCH (git: GET or POST);
 *   - the raw target has no "%2F", "%5C", "%25", "..", "/./", "//" or '#';
 *   - a /repos/OWNER/REPO/ path (git: /OWNER/REPO/) names a repository in scope
 *     after %-decoding, and git-receive-pack only with push allowed;
 *   - GraphQL: the body is a JSON object whose query parses, every top-level
 *     mutation field is in a fixed list, and no operation is a subscription.
 */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "graphql.h"
#include "httppolicy.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const char *const fuzz_repos[] = { "o/r", "Octo-Org/Widgets" };

static const char *const fuzz_mutations[] = {
	"addComment", "updateIssueComment", "createIssue", "updateIssue", "closeIssue",
	"reopenIssue", "addLabelsToLabelable", "removeLabelsFromLabelable",
	"addAssigneesToAssignable", "removeAssigneesFromAssignable", "createPullRequest",
	"updatePullRequest", "closePullRequest", "reopenPullRequest",
	"markPullRequestReadyForReview", "convertPullRequestToDraft", "addPullRequestReview",
	"submitPullRequestReview", "requestReviews", "__typename", NULL
};

/* Whether s is short, printable ASCII. */
static int
fuzz_printable(const char *s, size_t max)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++) {
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return 0;
	}
	return i <= max;
}

/* %-decode s[0..n) naively into out (size n + 1). */
static void
fuzz_decode(const char *s, size_t n, char *out)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
		    isxdigit((unsigned char)s[i + 2])) {
			char h[3] = { s[i + 1], s[i + 2], '\0' };

			out[k++] = (char)strtol(h, NULL, 16);
			i += 2;
		} else
			out[k++] = s[i];
	}
	out[k] = '\0';
}

/* Whether OWNER/REPO (REPO possibly with .git) is one of the scope's. */
static int
fuzz_in_scope(const char *o, const char *r, size_t nrepos)
{
	size_t i, rn = strlen(r);
	char name[512];

	if (rn > 4 && strcasecmp(r + rn - 4, ".git") == 0)
		rn -= 4;
	if (strlen(o) + rn + 2 > sizeof name)
		return 0;
	memcpy(name, o, strlen(o));
	name[strlen(o)] = '/';
	memcpy(name + strlen(o) + 1, r, rn);
	name[strlen(o) + 1 + rn] = '\0';
	for (i = 0; i < nrepos; i++) {
		if (strcasecmp(fuzz_repos[i], name) == 0)
			return 1;
	}
	return 0;
}

/* The raw path: no encoded '/', '\\' or '%', no empty, "." or ".." segments, no '#'. */
static void
fuzz_check_raw(const char *target)
{
	size_t n = strcspn(target, "?"), i;
	char *path = strndup(target, n), *dec = malloc(n + 1), *p, *e;

	if (strchr(target, '#') != NULL || strcasestr(path, "%2f") != NULL ||
	    strcasestr(path, "%5c") != NULL || strstr(path, "%25") != NULL)
		abort();
	fuzz_decode(path, n, dec);
	for (p = dec + 1; *p != '\0'; p = e + 1) {
		if ((e = strchr(p, '/')) == NULL)
			e = p + strlen(p);
		if (e == p && *e != '\0')
			abort();	/* empty segment */
		if ((e - p == 1 && p[0] == '.') || (e - p == 2 && p[0] == '.' && p[1] == '.'))
			abort();
		if (*e == '\0')
			break;
	}
	for (i = 0; dec[i] != '\0'; i++) {
		if (dec[i] == '\\')
			abort();
	}
	free(path);
	free(dec);
}

/* Check the repository named by the segments after skip ones. */
static void
fuzz_check_path(const char *target, size_t skip, int git, int push, size_t nrepos)
{
	size_t n = strcspn(target, "?");
	char *dec = malloc(n + 1), *seg[4] = { NULL }, *p;
	size_t i = 0;

	fuzz_decode(target, n, dec);
	p = dec + 1;
	while (i < 4 && p != NULL) {
		seg[i++] = p;
		if ((p = strchr(p, '/')) != NULL)
			*p++ = '\0';
	}
	if (git) {
		if (seg[0] == NULL || seg[1] == NULL || !fuzz_in_scope(seg[0], seg[1], nrepos))
			abort();
		if (strstr(target, "receive-pack") != NULL && !push)
			abort();
	} else if (i > skip + 2 && strcmp(seg[skip], "repos") == 0) {
		if (!fuzz_in_scope(seg[skip + 1], seg[skip + 2], nrepos))
			abort();
	}
	free(dec);
}

/* Check top-level fields of every operation of an allowed GraphQL body. */
static void
fuzz_check_graphql(const unsigned char *body, size_t len)
{
	json_t *j = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, NULL), *q;
	struct graphql_doc *doc;
	const struct graphql_op *op;
	const struct graphql_sel *s;
	char *cause = NULL;
	size_t k;

	if (j == NULL || (q = json_object_get(j, "query")) == NULL || !json_is_string(q))
		abort();
	doc = graphql_parse(json_string_value(q), json_string_length(q), &cause);
	if (doc == NULL)
		abort();
	for (op = doc->ops; op != NULL; op = op->next) {
		if (op->type == GRAPHQL_SUBSCRIPTION)
			abort();
		if (op->type != GRAPHQL_MUTATION)
			continue;
		for (s = op->sels; s != NULL; s = s->next) {
			if (s->kind != GRAPHQL_FIELD)
				continue;	/* fragments: checked by the policy's walk */
			for (k = 0; fuzz_mutations[k] != NULL; k++) {
				if (strcmp(fuzz_mutations[k], s->name) == 0)
					break;
			}
			if (fuzz_mutations[k] == NULL)
				abort();
		}
	}
	graphql_free(doc);
	json_decref(j);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct httppolicy_scope sc;
	struct httppolicy_req req;
	struct httppolicy_verdict v;
	char *buf, *method, *target, *ct, *body;
	const char *m;
	size_t rest;

	if (size < 1)
		return 0;
	memset(&sc, 0, sizeof sc);
	sc.api = (data[0] & 3) == 0 ? HTTP_API_GITHUB : (data[0] & 3) == 2 ? HTTP_API_GIT :
	    HTTP_API_GHE;
	sc.allow_push = (data[0] >> 2) & 1;
	sc.repos = fuzz_repos;
	sc.nrepos = (data[0] >> 3) & 1 ? 2 : 1;
	buf = malloc(size);
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';
	method = buf;
	if ((target = memchr(method, '\n', size - 1)) == NULL)
		goto out;
	*target++ = '\0';
	rest = size - 1 - (size_t)(target - buf);
	if ((ct = memchr(target, '\n', rest)) == NULL)
		goto out;
	*ct++ = '\0';
	rest = size - 1 - (size_t)(ct - buf);
	if ((body = memchr(ct, '\n', rest)) == NULL)
		goto out;
	*body++ = '\0';
	rest = size - 1 - (size_t)(body - buf);
	memset(&req, 0, sizeof req);
	req.method = method;
	req.target = target;
	req.content_type = *ct != '\0' ? ct : NULL;
	req.body = (const unsigned char *)body;
	req.body_len = rest;
	if (httppolicy_check(&sc, &req, &v) != 0)
		abort();
	if (v.summary == NULL || !fuzz_printable(v.summary, 320))
		abort();
	if (v.allowed != (v.reason == NULL))
		abort();
	if (v.reason != NULL && !fuzz_printable(v.reason, 4096))
		abort();
	if (v.allowed) {
		m = req.method;
		if (strcmp(m, "GET") != 0 && strcmp(m, "POST") != 0 &&
		    (sc.api == HTTP_API_GIT || (strcmp(m, "HEAD") != 0 && strcmp(m, "PATCH") != 0)))
			abort();
		fuzz_check_raw(target);
		if (sc.api == HTTP_API_GIT)
			fuzz_check_path(target, 0, 1, sc.allow_push, sc.nrepos);
		else if (sc.api == HTTP_API_GHE && strncmp(target, "/api/v3/", 8) == 0)
			fuzz_check_path(target, 2, 0, 0, sc.nrepos);
		else if (sc.api == HTTP_API_GITHUB)
			fuzz_check_path(target, 0, 0, 0, sc.nrepos);
		if ((sc.api == HTTP_API_GITHUB && strncmp(target, "/graphql", 8) == 0) ||
		    (sc.api == HTTP_API_GHE && strncmp(target, "/api/graphql", 12) == 0)) {
			if (strchr(target, '?') != NULL || strcmp(req.method, "POST") != 0)
				abort();
			fuzz_check_graphql(req.body, req.body_len);
		}
	}
	httppolicy_verdict_free(&v);
out:
	free(buf);
	return 0;
}
