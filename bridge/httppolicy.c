/* The HTTP policy for gh and git requests through the injector (see httppolicy.h). */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "graphql.h"
#include "httppolicy.h"
#include "util.h"

#define HP_MAX_SEGS		64	/* path segments */
#define HP_SUMMARY_MAX		300	/* bytes of audit summary */
#define HP_GQL_BUDGET		20000	/* selections visited, fragments expanded */
#define HP_GQL_FRAG_DEPTH	16	/* nested fragment spreads (also stops cycles) */

/* One request target, split and decoded. */
struct hp_target {
	char	*segs[HP_MAX_SEGS];	/* decoded path segments */
	size_t	 nsegs;
	char	*query;			/* raw query string (after '?'), or NULL */
};

/* Mutation fields that gh's allowed subcommands send (gh 2.23, api/ and pkg/cmd/). */
static const char *const hp_mutations[] = {
	"addComment",				/* issue/pr comment, close -c, reopen -c */
	"updateIssueComment",			/* issue/pr comment --edit-last */
	"createIssue",				/* issue create */
	"updateIssue",				/* issue edit */
	"closeIssue",				/* issue close */
	"reopenIssue",				/* issue reopen */
	"addLabelsToLabelable",			/* issue/pr edit --add-label */
	"removeLabelsFromLabelable",		/* issue/pr edit --remove-label */
	"addAssigneesToAssignable",		/* assignees (REST-equivalent) */
	"removeAssigneesFromAssignable",
	"createPullRequest",			/* pr create */
	"updatePullRequest",			/* pr edit, pr create metadata */
	"closePullRequest",			/* pr close */
	"reopenPullRequest",			/* pr reopen */
	"markPullRequestReadyForReview",	/* pr ready */
	"convertPullRequestToDraft",		/* pr ready --undo */
	"addPullRequestReview",			/* pr review */
	"submitPullRequestReview",
	"requestReviews",			/* pr create/edit --reviewer */
	NULL
};

/* Fields that, with a selection set, reach repositories or content outside scope. */
static const char *const hp_gql_denied[] = {
	"repositories", "repositoriesContributedTo", "starredRepositories", "watching",
	"pinnedItems", "pinnableItems", "pinnedRepositories", "topRepositories",
	"itemShowcase", "contributionsCollection", "gist", "gists", "organizations",
	"enterprise", "enterprises", "sponsoring", "sponsors", "sponsorshipsAsMaintainer",
	"sponsorshipsAsSponsor", "lists", "repositoryDiscussions",
	"repositoryDiscussionComments", "issueComments", "commitComments", "forks",
	"search", "resource", "associatedPullRequests", "timelineItems", "timeline",
	"trackedIssues", "trackedInIssues", "subIssues", "closingIssuesReferences",
	"packages", "savedReplies", "recentProjects", "compare", "relay", "items",
	"source", "target", "subject", "projectsV2", "projectV2", "projects",
	NULL
};

/*
 * Every field name that may appear below the top level of a GraphQL document:
 * the fields gh 2.23's allowed subcommands select (their query builders, queries,
 * mutation payloads and every --json field, from gh's source and recordings of
 * real requests), sorted for bsearch(). A field outside this list is refused even
 * where no rule below would catch it: the schema is too large to reason about
 * fields gh never asks for.
 */
static const char *const hp_gql_fields[] = {
	"__typename", "about", "activeLockReason", "actor", "addComment",
	"addLabelsToLabelable", "addPullRequestReview", "additions", "affiliations",
	"after", "annotationFailure", "annotationWarning", "assets", "assignable",
	"assignableUsers", "assigned", "assignedIssues", "assignedPRs", "assignee",
	"assignees", "assignments", "author", "authorAssociation", "authored",
	"authoredDate", "authors", "autoMergeAllowed", "baseRef", "baseRefName", "before",
	"body", "branchProtectionRule", "branchProtectionRules", "changedFiles",
	"checkSuite", "clientMutationId", "closeIssue", "closePullRequest", "closed",
	"closedAt", "codeOfConduct", "collaborators", "color", "column", "comment",
	"commentEdge", "comments", "commit", "commits", "commitsCount", "committedDate",
	"completedAt", "conclusion", "conflictStatus", "contactLinks", "content",
	"contentType", "context", "contexts", "convertPullRequestToDraft", "cost",
	"createIssue", "createNewTagOption", "createPullRequest", "createdAt", "createdBy",
	"databaseId", "defaultBranchRef", "deleteBranchOnMerge", "deletions",
	"description", "detailsUrl", "direction", "diskUsage", "displayTitle",
	"downloadCount", "draft", "dueOn", "edges", "email", "endCursor", "event",
	"exclude", "failed", "fields", "file", "filename", "files", "filterBy", "first",
	"forkCount", "forkingAllowed", "fundingLinks", "hasDiscussionsEnabled",
	"hasIssuesEnabled", "hasNextPage", "hasProjectsEnabled", "hasWikiEnabled",
	"headBranch", "headCommit", "headRef", "headRefName", "headRefOid",
	"headRepository", "headRepositoryOwner", "headSha", "homepageUrl", "id",
	"includesCreatedEdit", "isArchived", "isBlankIssuesEnabled", "isCrossRepository",
	"isDefault", "isDraft", "isEmpty", "isFork", "isInMergeQueue", "isInOrganization",
	"isLatest", "isMergeQueueEnabled", "isMinimized", "isMirror", "isPinned",
	"isPrerelease", "isPrivate", "isRequired", "isSecurityPolicyEnabled", "isTemplate",
	"isUserConfigurationRepository", "issue", "issueComment", "issueCount", "issueId",
	"issueOrPullRequest", "issueTemplates", "issues", "jobs", "key", "label",
	"labelable", "labels", "languages", "last", "lastComment", "lastCommit",
	"latestRelease", "latestReviews", "least", "licenseInfo", "limit", "locked",
	"lockedRecord", "login", "maintainerCanModify", "markPullRequestReadyForReview",
	"maximum", "mention", "mentionableUsers", "mentioned", "mentions", "mergeCommit",
	"mergeCommitAllowed", "mergeStateStatus", "mergeable", "mergedAt", "mergedBy",
	"message", "messageBody", "messageHeadline", "milestone", "milestones", "mimeType",
	"minimizedReason", "mirrorUrl", "name", "nameWithOwner", "nickname",
	"noMaintainerEdit", "node", "nodeCount", "nodes", "number", "oid",
	"openGraphImageUrl", "orderBy", "organization", "owner", "pageInfo", "parent",
	"path", "platform", "potentialMergeCommit", "pr", "prWithReviews",
	"primaryLanguage", "project", "projectCards", "projectItems", "projects",
	"projectsV2", "publishedAt", "pullRequest", "pullRequestId",
	"pullRequestMergeMethodMerge", "pullRequestMergeMethodRebase", "pullRequestReview",
	"pullRequestTemplates", "pullRequests", "pushedAt", "qualifiedName", "r",
	"reactionGroups", "reason", "rebaseMergeAllowed", "ref", "release", "releases",
	"remaining", "removeLabelsFromLabelable", "reopenIssue", "reopenPullRequest",
	"repository", "repositoryId", "repositoryTopics", "requestReviews", "requested",
	"requestedReviewer", "required", "requiredApprovingReviewCount",
	"requiresStrictStatusChecks", "resetAt", "resourcePath", "reviewDecision",
	"reviewRequested", "reviewRequests", "reviews", "securityPolicyUrl", "size",
	"slug", "squashMergeAllowed", "sshUrl", "stargazerCount", "startLine", "startedAt",
	"state", "stateReason", "states", "status", "statusCheckRollup", "statusCode",
	"steps", "subjectId", "submittedAt", "tagDescription", "tagName",
	"targetCommitish", "targetUrl", "teams", "templateRepository", "text", "title",
	"topic", "totalCount", "unlockedRecord", "updateIssue", "updateIssueComment",
	"updatePullRequest", "updatedAt", "url", "used", "user", "users",
	"usesCustomOpenGraphImage", "viewer", "viewerCanAdminister", "viewerCreated",
	"viewerDefaultCommitEmail", "viewerDefaultMergeMethod", "viewerDidAuthor",
	"viewerHasStarred", "viewerMergeBodyText", "viewerMergeHeadlineText",
	"viewerPermission", "viewerPossibleCommitEmails", "viewerSubscription",
	"visibility", "watchers", "workflow", "workflowName", "workflowRun",
	"workflowRuns",
};

/* Compare a name with a table entry, for bsearch(). */
static int
hp_gql_field_cmp(const void *key, const void *elem)
{
	return strcmp(key, *(const char *const *)elem);
}

/* Whether a field name is one gh's allowed subcommands use. */
static int
hp_gql_known(const char *name)
{
	return bsearch(name, hp_gql_fields, sizeof hp_gql_fields / sizeof hp_gql_fields[0],
	    sizeof hp_gql_fields[0], hp_gql_field_cmp) != NULL;
}

/* Whether word is in a NULL-terminated list. */
static int
hp_in(const char *const *list, const char *word)
{
	for (; *list != NULL; list++) {
		if (strcmp(*list, word) == 0)
			return 1;
	}
	return 0;
}

/* Set *why once (the first refusal wins). */
static void __attribute__((format(printf, 2, 3)))
hp_why(char **why, const char *fmt, ...)
{
	va_list ap;

	if (*why != NULL)
		return;
	va_start(ap, fmt);
	xvasprintf(why, fmt, ap);
	va_end(ap);
}

/* Append s[0..n) to a summary buffer, escaping anything but safe printable ASCII. */
static void
hp_sum_add(char *buf, size_t *o, const char *s, size_t n, const char *keep)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < n && *o < HP_SUMMARY_MAX - 4; i++) {
		unsigned char c = (unsigned char)s[i];

		if (isalnum(c) || strchr(keep, c) != NULL)
			buf[(*o)++] = (char)c;
		else {
			buf[(*o)++] = '%';
			buf[(*o)++] = hex[c >> 4];
			buf[(*o)++] = hex[c & 15];
		}
	}
	if (i < n && *o <= HP_SUMMARY_MAX - 4) {
		memcpy(buf + *o, "...", 3);
		*o += 3;
	}
	buf[*o] = '\0';
}

/* A printable name for the method (letters only, capped). */
static void
hp_method_word(const char *m, char *out, size_t outsz)
{
	size_t i;

	for (i = 0; m[i] != '\0' && i + 1 < outsz; i++) {
		if (m[i] < 'A' || m[i] > 'Z') {
			strcpy_checked(out, outsz, "?");
			return;
		}
		out[i] = m[i];
	}
	out[i] = '\0';
	if (i == 0 || m[i] != '\0')
		strcpy_checked(out, outsz, "?");
}

/* Free a split target. */
static void
hp_target_free(struct hp_target *t)
{
	size_t i;

	for (i = 0; i < t->nsegs; i++)
		free(t->segs[i]);
	free(t->query);
	memset(t, 0, sizeof *t);
}

/* Whether s[0..n) is valid UTF-8 without NUL or control characters. */
static int
hp_text_ok(const unsigned char *s, size_t n)
{
	size_t i = 0, k, need;

	while (i < n) {
		unsigned char c = s[i];

		if (c < 0x80) {
			if (c < 0x20 || c == 0x7f)
				return 0;
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			need = 1;
		else if (c >= 0xe0 && c <= 0xef)
			need = 2;
		else if (c >= 0xf0 && c <= 0xf4)
			need = 3;
		else
			return 0;
		if (n - i <= need)
			return 0;
		for (k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
		}
		if ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] >= 0xa0) ||
		    (c == 0xf0 && s[i + 1] < 0x90) || (c == 0xf4 && s[i + 1] >= 0x90))
			return 0;
		i += need + 1;
	}
	return 1;
}

/*
 * Split and decode a request target. Refuses what could make two parsers
 * disagree on the path: no leading '/', a fragment, bytes outside printable ASCII,
 * bad %-escapes, encoded '/', '\' or '%' (double encoding), NUL or control
 * characters after decoding, empty, "." and ".." segments.
 */
static int
hp_target_split(const char *target, struct hp_target *t, char **why)
{
	const char *p, *q, *end;
	size_t i, n = strlen(target);

	memset(t, 0, sizeof *t);
	if (n == 0 || n > HTTPPOLICY_MAX_TARGET || target[0] != '/') {
		hp_why(why, "the request target must be a path of at most %d bytes starting "
		    "with /", HTTPPOLICY_MAX_TARGET);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if ((unsigned char)target[i] <= 0x20 || (unsigned char)target[i] >= 0x7f ||
		    target[i] == '#') {
			hp_why(why, "the request target holds a character that is refused "
			    "(space, control, non-ASCII or #)");
			return -1;
		}
	}
	if ((q = strchr(target, '?')) != NULL)
		t->query = xstrdup(q + 1);
	end = q != NULL ? q : target + n;
	if (end - target == 1)
		return 0;	/* "/" */
	/* One trailing slash is tolerated ("/api/v3/"); it names the same resource. */
	if (end[-1] == '/')
		end--;
	for (p = target + 1; p <= end; ) {
		const char *s = p, *e = memchr(p, '/', (size_t)(end - p));
		char *d;
		size_t k = 0;

		if (e == NULL)
			e = end;
		if (t->nsegs >= HP_MAX_SEGS) {
			hp_why(why, "the request path has more than %d segments", HP_MAX_SEGS);
			return -1;
		}
		d = xmalloc((size_t)(e - s) + 1);
		t->segs[t->nsegs++] = d;
		for (; s < e; s++) {
			int h, l;

			if (*s != '%') {
				d[k++] = *s;
				continue;
			}
			if (e - s < 3 || (h = util_hexval(s[1])) < 0 || (l = util_hexval(s[2])) < 0) {
				hp_why(why, "the request path has a malformed %%-escape");
				return -1;
			}
			d[k] = (char)(h * 16 + l);
			if (d[k] == '/' || d[k] == '\\' || d[k] == '%') {
				hp_why(why, "the request path encodes '/', '\\' or '%%' (%%2F, %%5C, "
				    "%%25); such paths are refused");
				return -1;
			}
			k++;
			s += 2;
		}
		d[k] = '\0';
		if (!hp_text_ok((unsigned char *)d, k) || memchr(d, '\\', k) != NULL) {
			hp_why(why, "the request path holds NUL, control characters, a "
			    "backslash or invalid UTF-8 after decoding");
			return -1;
		}
		if (k == 0 || strcmp(d, ".") == 0 || strcmp(d, "..") == 0) {
			hp_why(why, "the request path has an empty, '.' or '..' segment; "
			    "send the normalised path");
			return -1;
		}
		p = e + 1;
	}
	return 0;
}

/* The normalised path for the audit summary: "METHOD /seg/seg[?query]". */
static char *
hp_summary_path(const char *method, const struct hp_target *t, int with_query)
{
	char buf[HP_SUMMARY_MAX + 8], m[12];
	size_t o = 0, i;

	hp_method_word(method, m, sizeof m);
	hp_sum_add(buf, &o, m, strlen(m), "");
	hp_sum_add(buf, &o, " ", 1, " ");
	if (t->nsegs == 0)
		hp_sum_add(buf, &o, "/", 1, "/");
	for (i = 0; i < t->nsegs; i++) {
		hp_sum_add(buf, &o, "/", 1, "/");
		hp_sum_add(buf, &o, t->segs[i], strlen(t->segs[i]), "-._~!$&'()*+,;=:@");
	}
	if (with_query && t->query != NULL) {
		hp_sum_add(buf, &o, "?", 1, "?");
		hp_sum_add(buf, &o, t->query, strlen(t->query), "-._~!$&'()*+,;=:@/?%");
	}
	return xstrdup(buf);
}

/* Whether an owner or repository name uses only characters GitHub allows. */
static int
hp_name_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > 100)
		return 0;
	for (i = 0; i < n; i++) {
		if (!isalnum((unsigned char)s[i]) && strchr("-_.", s[i]) == NULL)
			return 0;
	}
	return !(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.');
}

/* Whether owner/name (lengths given) is in scope, case-insensitively. */
static int
hp_in_scope(const struct httppolicy_scope *sc, const char *o, size_t on, const char *r,
    size_t rn)
{
	size_t i;

	if (!hp_name_ok(o, on) || !hp_name_ok(r, rn))
		return 0;
	for (i = 0; i < sc->nrepos; i++) {
		const char *e = sc->repos[i], *sl = strchr(e, '/');

		if (sl == NULL)
			continue;
		if ((size_t)(sl - e) == on && strncasecmp(e, o, on) == 0 &&
		    strlen(sl + 1) == rn && strncasecmp(sl + 1, r, rn) == 0)
			return 1;
	}
	return 0;
}

/* Whether login owns a repository in scope. */
static int
hp_owner_in_scope(const struct httppolicy_scope *sc, const char *o, size_t on)
{
	size_t i;

	for (i = 0; i < sc->nrepos; i++) {
		const char *e = sc->repos[i], *sl = strchr(e, '/');

		if (sl != NULL && (size_t)(sl - e) == on && strncasecmp(e, o, on) == 0)
			return 1;
	}
	return 0;
}

/* Length of r without a ".git" suffix. */
static size_t
hp_strip_git(const char *r)
{
	size_t n = strlen(r);

	if (n > 4 && strcasecmp(r + n - 4, ".git") == 0)
		return n - 4;
	return n;
}

/* Check an OWNER and REPO path segment pair against the scope. */
static int
hp_repo_segs(const struct httppolicy_scope *sc, const char *o, const char *r, char **why)
{
	if (!hp_in_scope(sc, o, strlen(o), r, hp_strip_git(r))) {
		hp_why(why, "repository %.100s/%.100s is not one this session may act on; "
		    "use one of the session's repositories", o, r);
		return -1;
	}
	return 0;
}

/* Lowercase copy of s[0..n). */
static char *
hp_lower(const char *s, size_t n)
{
	char *d = xmalloc(n + 1);
	size_t i;

	for (i = 0; i < n; i++)
		d[i] = (char)tolower((unsigned char)s[i]);
	d[n] = '\0';
	return d;
}

/*
 * Whether c separates search terms: only the space. Other blanks are refused
 * (hp_text_ok), so a term cannot be split differently here and upstream.
 */
static int
hp_search_space(char c)
{
	return c == ' ';
}

/* Qualifier keys that choose which repositories a search covers. */
static const char *const hp_scope_keys[] = { "repo:", "org:", "user:", "owner:",
    "repository:", NULL };

/* Check a search query: a repo: qualifier in scope and nothing that widens it. */
int
httppolicy_search_query(const struct httppolicy_scope *sc, const char *q, size_t len,
    char **why)
{
	const char *const *k;
	char *lq = NULL;
	size_t i = 0, nrepo = 0;
	int rc = -1;

	*why = NULL;
	if (!hp_text_ok((const unsigned char *)q, len)) {
		hp_why(why, "the search query holds NUL, tabs, newlines, other control "
		    "characters or invalid UTF-8; separate terms with spaces");
		goto out;
	}
	lq = hp_lower(q, len);
	i = 0;
	while (i < len) {
		size_t s, e, klen = 0;
		int neg = 0, quoted = 0;

		while (i < len && hp_search_space(q[i]))
			i++;
		if (i >= len)
			break;
		s = i;
		/* A term runs to the next blank outside double quotes. */
		for (e = s; e < len && (quoted || !hp_search_space(q[e])); e++) {
			if (q[e] == '"')
				quoted = !quoted;
		}
		if (quoted) {
			hp_why(why, "the search query has an unterminated quote");
			goto out;
		}
		i = e;
		if (memchr(q + s, '(', e - s) != NULL || memchr(q + s, ')', e - s) != NULL) {
			hp_why(why, "parentheses in a search query are refused: they can widen a "
			    "repo: qualifier; search with plain terms and qualifiers");
			goto out;
		}
		if ((e - s == 2 && strncmp(lq + s, "or", 2) == 0) ||
		    (e - s == 3 && (strncmp(lq + s, "and", 3) == 0 ||
		    strncmp(lq + s, "not", 3) == 0))) {
			hp_why(why, "the search operators AND, OR and NOT are refused: they can "
			    "widen a repo: qualifier; use plain terms and -qualifier:value");
			goto out;
		}
		if (q[s] == '-') {
			neg = 1;
			s++;
		}
		/* A scope key may only appear as the term's own key. */
		for (k = hp_scope_keys; *k != NULL; k++) {
			size_t kl = strlen(*k), j;

			for (j = s; j + kl <= e; j++) {
				if (memcmp(lq + j, *k, kl) != 0)
					continue;
				if (j != s) {
					hp_why(why, "the search term %.*s hides a %s qualifier; write "
					    "qualifiers as separate terms", (int)(e - s > 100 ? 100 :
					    e - s), q + s, *k);
					goto out;
				}
				klen = kl;
			}
		}
		if (klen == 0)
			continue;
		if (neg)
			continue;	/* -repo:x excludes; it cannot widen the search */
		if (strncmp(lq + s, "repo:", 5) == 0) {
			const char *v = q + s + 5, *sl;
			size_t vn = e - s - 5;

			if (vn >= 2 && v[0] == '"' && v[vn - 1] == '"') {
				v++;
				vn -= 2;
			}
			sl = memchr(v, '/', vn);
			if (sl == NULL || !hp_in_scope(sc, v, (size_t)(sl - v), sl + 1,
			    vn - (size_t)(sl - v) - 1)) {
				hp_why(why, "the search names repository %.*s, which is not one this "
				    "session may act on", (int)(vn > 100 ? 100 : vn), v);
				goto out;
			}
			nrepo++;
			continue;
		}
		hp_why(why, "the search qualifier %.*s searches beyond this session's "
		    "repositories; use repo:OWNER/REPO (or --repo OWNER/REPO) instead",
		    (int)(klen - 1), lq + s);
		goto out;
	}
	if (nrepo == 0) {
		hp_why(why, "a search without a repo: qualifier searches every repository; "
		    "add --repo OWNER/REPO (or repo:OWNER/REPO) for one of this session's "
		    "repositories");
		goto out;
	}
	rc = 0;
out:
	free(lq);
	return rc;
}

/* Percent-decode a query-string component ('+' is a space); NULL if malformed. */
static char *
hp_form_decode(const char *s, size_t n, size_t *outlen)
{
	char *d = xmalloc(n + 1);
	size_t i, k = 0;

	for (i = 0; i < n; i++) {
		int h, l;

		if (s[i] == '+')
			d[k++] = ' ';
		else if (s[i] != '%')
			d[k++] = s[i];
		else {
			if (n - i < 3 || (h = util_hexval(s[i + 1])) < 0 || (l = util_hexval(s[i + 2])) < 0) {
				free(d);
				return NULL;
			}
			d[k++] = (char)(h * 16 + l);
			i += 2;
		}
	}
	d[k] = '\0';
	*outlen = k;
	return d;
}

/* REST search: only known parameters, exactly one q, scoped by hp_search_query. */
static int
hp_rest_search(const struct httppolicy_scope *sc, const char *query, char **why)
{
	static const char *const params[] = { "q", "sort", "order", "per_page", "page", NULL };
	const char *p = query;
	char *q = NULL, *w = NULL;
	size_t qlen = 0;
	int rc = -1;

	if (query == NULL || *query == '\0') {
		hp_why(why, "a search needs q=...; add --repo OWNER/REPO");
		return -1;
	}
	if (strchr(query, ';') != NULL) {
		hp_why(why, "';' in a search query string is refused; separate parameters "
		    "with '&'");
		return -1;
	}
	while (*p != '\0') {
		size_t n = strcspn(p, "&"), kn;
		const char *eq = memchr(p, '=', n);
		char *key;

		kn = eq != NULL ? (size_t)(eq - p) : n;
		if ((key = hp_form_decode(p, kn, &kn)) == NULL) {
			hp_why(why, "malformed %%-escape in the query string");
			goto out;
		}
		if (strlen(key) != kn || !hp_in(params, key)) {
			hp_why(why, "search parameter %.40s is refused (allowed: q, sort, order, "
			    "per_page, page)", key);
			free(key);
			goto out;
		}
		if (strcmp(key, "q") == 0) {
			free(key);
			if (q != NULL) {
				hp_why(why, "the search query string has more than one q=");
				goto out;
			}
			if (eq == NULL || (q = hp_form_decode(eq + 1, n - kn - 1, &qlen)) == NULL) {
				hp_why(why, "malformed q= in the search query string");
				goto out;
			}
		} else
			free(key);
		p += n;
		if (*p == '&')
			p++;
	}
	if (q == NULL) {
		hp_why(why, "a search needs q=...; add --repo OWNER/REPO");
		goto out;
	}
	if (httppolicy_search_query(sc, q, qlen, &w) != 0) {
		hp_why(why, "%s", w);
		goto out;
	}
	rc = 0;
out:
	free(q);
	free(w);
	return rc;
}

/* Whether segment s is a positive decimal number. */
static int
hp_number(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= 20 && strspn(s, "0123456789") == n;
}

/*
 * Writes under /repos/OWNER/REPO/ that gh's allowed subcommands make (or their
 * REST equivalents): "#" stands for a number.
 */
static const struct {
	const char	*method;
	const char	*path;
} hp_rest_writes[] = {
	{ "POST", "issues" },
	{ "PATCH", "issues/#" },
	{ "POST", "issues/#/comments" },
	{ "PATCH", "issues/comments/#" },
	{ "POST", "issues/#/labels" },
	{ "POST", "issues/#/assignees" },
	{ "POST", "pulls" },
	{ "PATCH", "pulls/#" },
	{ "POST", "pulls/#/comments" },
	{ "POST", "pulls/#/comments/#/replies" },
	{ "PATCH", "pulls/comments/#" },
	{ "POST", "pulls/#/reviews" },
	{ "POST", "pulls/#/reviews/#/events" },
	{ "POST", "pulls/#/requested_reviewers" },
};

/* Whether segs match a write pattern. */
static int
hp_rest_write_match(const char *pat, char *const *segs, size_t n)
{
	size_t i = 0;

	while (*pat != '\0') {
		size_t k = strcspn(pat, "/");

		if (i >= n)
			return 0;
		if (k == 1 && pat[0] == '#') {
			if (!hp_number(segs[i]))
				return 0;
		} else if (strlen(segs[i]) != k || strncmp(segs[i], pat, k) != 0)
			return 0;
		i++;
		pat += k;
		if (*pat == '/')
			pat++;
	}
	return i == n;
}

/* The REST check on decoded segments (API prefix already removed). */
static int
hp_rest(const struct httppolicy_scope *sc, const char *method, char *const *s, size_t n,
    const char *query, char **why)
{
	int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
	size_t i;

	if (n == 0 || (n == 1 && (strcmp(s[0], "meta") == 0 ||
	    strcmp(s[0], "rate_limit") == 0 || strcmp(s[0], "user") == 0))) {
		if (!get)
			goto readonly;
		return 0;
	}
	if (n == 2 && strcmp(s[0], "users") == 0 && hp_name_ok(s[1], strlen(s[1]))) {
		if (!get)
			goto readonly;
		return 0;
	}
	if (n == 2 && strcmp(s[0], "search") == 0 && (strcmp(s[1], "issues") == 0 ||
	    strcmp(s[1], "commits") == 0 || strcmp(s[1], "code") == 0)) {
		if (!get)
			goto readonly;
		return hp_rest_search(sc, query, why);
	}
	if (n >= 3 && strcmp(s[0], "repos") == 0) {
		if (hp_repo_segs(sc, s[1], s[2], why) != 0)
			return -1;
		if (get) {
			if (n >= 4 && strcmp(s[3], "forks") == 0) {
				hp_why(why, "listing forks reaches other repositories; it is refused");
				return -1;
			}
			if (n >= 5 && strcmp(s[3], "compare") == 0 && strchr(s[4], ':') != NULL) {
				hp_why(why, "comparing with another repository's branch (OWNER:BRANCH) "
				    "is refused; compare branches of this repository");
				return -1;
			}
			return 0;
		}
		for (i = 0; i < sizeof hp_rest_writes / sizeof hp_rest_writes[0]; i++) {
			if (strcmp(method, hp_rest_writes[i].method) == 0 &&
			    hp_rest_write_match(hp_rest_writes[i].path, s + 3, n - 3))
				return 0;
		}
		hp_why(why, "%s on this repository path is refused: writes are limited to "
		    "creating and editing issues, pull requests, comments, labels, assignees "
		    "and reviews (POST/PATCH); DELETE, PUT and everything else are refused",
		    method);
		return -1;
	}
	if (n >= 1 && strcmp(s[0], "repositories") == 0) {
		hp_why(why, "/repositories/ID paths name a repository by number and cannot be "
		    "checked; use /repos/OWNER/REPO/...");
		return -1;
	}
	hp_why(why, "this API endpoint is not one the allowed gh commands use; allowed are "
	    "/repos/OWNER/REPO/... for this session's repositories, /search/issues|commits|"
	    "code with a repo: qualifier, /user, /users/NAME, /meta, /rate_limit and GraphQL");
	return -1;
readonly:
	hp_why(why, "%s is refused here: this endpoint is read-only (GET)", method);
	return -1;
}

/* State of one GraphQL check. */
struct hp_gql {
	const struct httppolicy_scope	*sc;
	const struct graphql_doc	*doc;
	const struct graphql_op		*op;		/* the operation being walked */
	json_t				*vars;		/* "variables", or NULL */
	size_t				 budget;
	int				 fragdepth;
	char				*why;
};

/* Where a selection set is, which decides what its fields may do. */
enum hp_ctx {
	CTX_QUERY,	/* the query root */
	CTX_MUTATION,	/* the mutation root */
	CTX_REPO,	/* directly in a top-level repository(owner:, name:) in scope */
	CTX_ANY,	/* below an allowed field: the denylist applies */
	CTX_ORG,	/* organization(login:) of a scope owner: teams and projects only */
	CTX_META,	/* a related repository (parent, head, ...): names and metadata */
	CTX_LEAF,	/* only fields without a selection set */
	CTX_CONN,	/* a connection: nodes, edges, node, pageInfo and leaves */
	CTX_NODE,	/* node(id:)/nodes(ids:): id, __typename, ... on Issue|PullRequest */
	CTX_INTRO	/* introspection (__type, __schema): anything */
};

/* Look up an argument by name. */
static const struct graphql_arg *
hp_gql_arg(const struct graphql_sel *s, const char *name)
{
	const struct graphql_arg *a;

	for (a = s->args; a != NULL; a = a->next) {
		if (strcmp(a->name, name) == 0)
			return a;
	}
	return NULL;
}

/* Refuse arguments other than those listed. */
static int
hp_gql_only_args(struct hp_gql *g, const struct graphql_sel *s, const char *const *ok)
{
	const struct graphql_arg *a;

	for (a = s->args; a != NULL; a = a->next) {
		if (!hp_in(ok, a->name)) {
			hp_why(&g->why, "GraphQL argument %.64s of %.64s is refused", a->name,
			    s->name);
			return -1;
		}
	}
	return 0;
}

/*
 * Resolve an argument value to a string: a literal, or a variable from the body's
 * "variables" (else its default). Enum literals count when enum_ok. -1 otherwise.
 */
static int
hp_gql_string(struct hp_gql *g, const struct graphql_value *v, int enum_ok,
    const char **str, size_t *len)
{
	const struct graphql_vardef *d;
	json_t *j;

	/*
	 * Block strings are refused here: their value depends on indentation rules
	 * that another parser might apply differently, and gh never sends them.
	 */
	if ((v->kind == GRAPHQL_STRING && !v->block) || (enum_ok && v->kind == GRAPHQL_ENUM)) {
		*str = v->str;
		*len = v->len;
		return 0;
	}
	if (v->kind != GRAPHQL_VARIABLE)
		return -1;
	for (d = g->op->vars; d != NULL; d = d->next) {
		if (strcmp(d->name, v->str) == 0)
			break;
	}
	if (d == NULL)
		return -1;	/* undefined variable */
	if (g->vars != NULL && (j = json_object_get(g->vars, v->str)) != NULL) {
		if (!json_is_string(j))
			return -1;
		*str = json_string_value(j);
		*len = json_string_length(j);
		return 0;
	}
	if (d->defval != NULL && ((d->defval->kind == GRAPHQL_STRING && !d->defval->block) ||
	    (enum_ok && d->defval->kind == GRAPHQL_ENUM))) {
		*str = d->defval->str;
		*len = d->defval->len;
		return 0;
	}
	return -1;
}

/* The string value of a required argument, or -1 with a refusal. */
static int
hp_gql_string_arg(struct hp_gql *g, const struct graphql_sel *s, const char *name,
    int enum_ok, const char **str, size_t *len)
{
	const struct graphql_arg *a = hp_gql_arg(s, name);

	if (a == NULL || hp_gql_string(g, a->value, enum_ok, str, len) != 0 ||
	    memchr(*str, '\0', *len) != NULL) {
		hp_why(&g->why, "GraphQL %.64s(%.64s:) must be a string given literally or in "
		    "variables", s->name, name);
		return -1;
	}
	return 0;
}

static int hp_gql_sels(struct hp_gql *, const struct graphql_sel *, enum hp_ctx);

/* Only @skip and @include, which cannot change what a field reaches. */
static int
hp_gql_dirs(struct hp_gql *g, const struct graphql_directive *d)
{
	for (; d != NULL; d = d->next) {
		if (strcmp(d->name, "skip") != 0 && strcmp(d->name, "include") != 0) {
			hp_why(&g->why, "GraphQL directive @%.64s is refused (only @skip and "
			    "@include are allowed)", d->name);
			return -1;
		}
	}
	return 0;
}

/* A top-level query field. */
static int
hp_gql_query_field(struct hp_gql *g, const struct graphql_sel *s)
{
	static const char *const repo_args[] = { "owner", "name", "followRenames", NULL };
	static const char *const login_args[] = { "login", NULL };
	static const char *const search_args[] = { "query", "type", "first", "last",
	    "after", "before", NULL };
	const char *v, *t;
	size_t vn, tn;
	char *w = NULL;

	if (strcmp(s->name, "__typename") == 0)
		return 0;
	if (strcmp(s->name, "repository") == 0) {
		if (hp_gql_only_args(g, s, repo_args) != 0 ||
		    hp_gql_string_arg(g, s, "owner", 0, &v, &vn) != 0 ||
		    hp_gql_string_arg(g, s, "name", 0, &t, &tn) != 0)
			return -1;
		if (!hp_in_scope(g->sc, v, vn, t, tn)) {
			hp_why(&g->why, "GraphQL repository(owner: \"%.*s\", name: \"%.*s\") is "
			    "not one this session may act on", (int)(vn > 100 ? 100 : vn), v,
			    (int)(tn > 100 ? 100 : tn), t);
			return -1;
		}
		return hp_gql_sels(g, s->sels, CTX_REPO);
	}
	if (strcmp(s->name, "viewer") == 0 || strcmp(s->name, "rateLimit") == 0) {
		if (s->args != NULL && strcmp(s->name, "viewer") == 0) {
			hp_why(&g->why, "GraphQL viewer takes no arguments");
			return -1;
		}
		return hp_gql_sels(g, s->sels, CTX_LEAF);
	}
	if (strcmp(s->name, "user") == 0) {
		if (hp_gql_only_args(g, s, login_args) != 0 ||
		    hp_gql_string_arg(g, s, "login", 0, &v, &vn) != 0)
			return -1;
		return hp_gql_sels(g, s->sels, CTX_LEAF);
	}
	if (strcmp(s->name, "organization") == 0) {
		if (hp_gql_only_args(g, s, login_args) != 0 ||
		    hp_gql_string_arg(g, s, "login", 0, &v, &vn) != 0)
			return -1;
		if (!hp_owner_in_scope(g->sc, v, vn)) {
			hp_why(&g->why, "GraphQL organization(login: \"%.*s\") does not own any "
			    "of this session's repositories", (int)(vn > 100 ? 100 : vn), v);
			return -1;
		}
		return hp_gql_sels(g, s->sels, CTX_ORG);
	}
	if (strcmp(s->name, "search") == 0) {
		if (hp_gql_only_args(g, s, search_args) != 0 ||
		    hp_gql_string_arg(g, s, "type", 1, &t, &tn) != 0 ||
		    hp_gql_string_arg(g, s, "query", 0, &v, &vn) != 0)
			return -1;
		if (tn != 5 || memcmp(t, "ISSUE", 5) != 0) {
			hp_why(&g->why, "GraphQL search is allowed for type ISSUE only");
			return -1;
		}
		if (httppolicy_search_query(g->sc, v, vn, &w) != 0) {
			hp_why(&g->why, "%s", w);
			free(w);
			return -1;
		}
		return hp_gql_sels(g, s->sels, CTX_ANY);
	}
	if (strcmp(s->name, "node") == 0 || strcmp(s->name, "nodes") == 0) {
		/*
		 * By ID: cannot be scoped without a lookup (docs/HTTP-POLICY.md, node
		 * IDs); limited to issues and pull requests, as gh reads them.
		 */
		return hp_gql_sels(g, s->sels, CTX_NODE);
	}
	if (strcmp(s->name, "__type") == 0 || strcmp(s->name, "__schema") == 0)
		return hp_gql_sels(g, s->sels, CTX_INTRO);
	hp_why(&g->why, "GraphQL query field %.64s is refused: only repository, viewer, user, "
	    "organization, search, node(s), rateLimit and introspection are allowed",
	    s->name);
	return -1;
}

/* A field below the root, in context ctx. */
static int
hp_gql_field(struct hp_gql *g, const struct graphql_sel *s, enum hp_ctx ctx)
{
	const char *n = s->name;

	if (ctx == CTX_QUERY)
		return hp_gql_query_field(g, s);
	if (ctx == CTX_MUTATION) {
		if (strcmp(n, "__typename") == 0)
			return 0;
		if (!hp_in(hp_mutations, n)) {
			hp_why(&g->why, "GraphQL mutation %.64s is refused: only the mutations of "
			    "gh issue/pr create, edit, comment, close, reopen, ready and review "
			    "are allowed", n);
			return -1;
		}
		return hp_gql_sels(g, s->sels, CTX_ANY);
	}
	if (ctx == CTX_INTRO)
		return hp_gql_sels(g, s->sels, ctx);
	if (!hp_gql_known(n)) {
		hp_why(&g->why, "GraphQL field %.64s is refused: it is not one the allowed gh "
		    "commands read", n);
		return -1;
	}
	if (s->sels == NULL)
		return 0;	/* a leaf reaches nothing further */
	switch (ctx) {
	case CTX_LEAF:
		hp_why(&g->why, "GraphQL field %.64s may not be expanded here: only plain "
		    "fields may be read from this object", n);
		return -1;
	case CTX_CONN:
		if (strcmp(n, "nodes") == 0 || strcmp(n, "edges") == 0 ||
		    strcmp(n, "node") == 0 || strcmp(n, "pageInfo") == 0)
			return hp_gql_sels(g, s->sels, CTX_CONN);
		hp_why(&g->why, "GraphQL field %.64s may not be expanded in this list", n);
		return -1;
	case CTX_META:
		if (strcmp(n, "owner") == 0 || strcmp(n, "defaultBranchRef") == 0 ||
		    strcmp(n, "primaryLanguage") == 0 || strcmp(n, "licenseInfo") == 0)
			return hp_gql_sels(g, s->sels, CTX_LEAF);
		hp_why(&g->why, "GraphQL field %.64s of a related repository is refused: only "
		    "its names and metadata may be read", n);
		return -1;
	case CTX_ORG:
		if (strcmp(n, "teams") == 0 || strcmp(n, "projects") == 0 ||
		    strcmp(n, "projectsV2") == 0)
			return hp_gql_sels(g, s->sels, CTX_CONN);
		hp_why(&g->why, "GraphQL organization field %.64s is refused", n);
		return -1;
	default:
		break;
	}
	/* CTX_REPO and CTX_ANY. */
	if ((strcmp(n, "issues") == 0 || strcmp(n, "pullRequests") == 0) && ctx == CTX_REPO)
		return hp_gql_sels(g, s->sels, CTX_ANY);
	if ((strcmp(n, "projects") == 0 || strcmp(n, "projectsV2") == 0 ||
	    strcmp(n, "projectV2") == 0) && ctx == CTX_REPO)
		return hp_gql_sels(g, s->sels, CTX_CONN);
	if (strcmp(n, "issues") == 0 || strcmp(n, "pullRequests") == 0 ||
	    hp_in(hp_gql_denied, n)) {
		hp_why(&g->why, "GraphQL field %.64s is refused here: it can reach repositories "
		    "other than this session's", n);
		return -1;
	}
	if (strcmp(n, "repository") == 0 || strcmp(n, "organization") == 0 ||
	    strcmp(n, "node") == 0 || strcmp(n, "nodes") == 0) {
		if (s->args != NULL) {
			hp_why(&g->why, "GraphQL field %.64s with arguments is refused below the "
			    "top level: it looks up objects outside this session's repositories",
			    n);
			return -1;
		}
		if (strcmp(n, "repository") == 0)
			return hp_gql_sels(g, s->sels, CTX_META);
		if (strcmp(n, "organization") == 0)
			return hp_gql_sels(g, s->sels, CTX_LEAF);
		return hp_gql_sels(g, s->sels, CTX_ANY);
	}
	if (strcmp(n, "parent") == 0 || strcmp(n, "templateRepository") == 0 ||
	    strcmp(n, "headRepository") == 0 || strcmp(n, "baseRepository") == 0)
		return hp_gql_sels(g, s->sels, CTX_META);
	if (strcmp(n, "project") == 0 || strcmp(n, "column") == 0)
		return hp_gql_sels(g, s->sels, CTX_LEAF);
	return hp_gql_sels(g, s->sels, CTX_ANY);
}

/* Whether a type condition below node(id:) is one gh reads by ID. */
static int
hp_gql_node_type(const char *t)
{
	return t != NULL && (strcmp(t, "Issue") == 0 || strcmp(t, "PullRequest") == 0);
}

/* Walk a selection set, expanding fragments, in context ctx. */
static int
hp_gql_sels(struct hp_gql *g, const struct graphql_sel *s, enum hp_ctx ctx)
{
	const struct graphql_frag *f;
	int rc;

	for (; s != NULL; s = s->next) {
		if (g->budget == 0) {
			hp_why(&g->why, "the GraphQL document expands to more than %d selections",
			    HP_GQL_BUDGET);
			return -1;
		}
		g->budget--;
		if (hp_gql_dirs(g, s->dirs) != 0)
			return -1;
		switch (s->kind) {
		case GRAPHQL_FIELD:
			if (ctx == CTX_NODE && strcmp(s->name, "id") != 0 &&
			    strcmp(s->name, "__typename") != 0) {
				hp_why(&g->why, "GraphQL node(id:) may select only id, __typename "
				    "and ... on Issue / ... on PullRequest");
				return -1;
			}
			rc = hp_gql_field(g, s, ctx == CTX_NODE ? CTX_ANY : ctx);
			break;
		case GRAPHQL_INLINE:
			if (ctx == CTX_NODE && !hp_gql_node_type(s->type_cond)) {
				hp_why(&g->why, "GraphQL node(id:) may be read only as an Issue or a "
				    "PullRequest");
				return -1;
			}
			rc = hp_gql_sels(g, s->sels, ctx == CTX_NODE ? CTX_ANY : ctx);
			break;
		default:
			if ((f = graphql_fragment(g->doc, s->name)) == NULL) {
				hp_why(&g->why, "GraphQL fragment %.64s is not defined", s->name);
				return -1;
			}
			if (++g->fragdepth > HP_GQL_FRAG_DEPTH) {
				hp_why(&g->why, "GraphQL fragments nest deeper than %d levels (or "
				    "form a cycle)", HP_GQL_FRAG_DEPTH);
				return -1;
			}
			if (ctx == CTX_NODE && !hp_gql_node_type(f->type_cond)) {
				hp_why(&g->why, "GraphQL node(id:) may be read only as an Issue or a "
				    "PullRequest");
				return -1;
			}
			rc = hp_gql_dirs(g, f->dirs) == 0 ? hp_gql_sels(g, f->sels,
			    ctx == CTX_NODE ? CTX_ANY : ctx) : -1;
			g->fragdepth--;
			break;
		}
		if (rc != 0)
			return -1;
	}
	return 0;
}

/* The audit summary of a GraphQL operation: "graphql TYPE NAME field field ...". */
static char *
hp_gql_summary(const struct graphql_doc *doc, const struct graphql_op *op)
{
	char buf[HP_SUMMARY_MAX + 8];
	size_t o = 0;
	const struct graphql_sel *s;
	const char *w = graphql_op_word(op->type);

	hp_sum_add(buf, &o, "graphql ", 8, " ");
	hp_sum_add(buf, &o, w, strlen(w), "");
	if (op->name != NULL) {
		hp_sum_add(buf, &o, " ", 1, " ");
		hp_sum_add(buf, &o, op->name, strlen(op->name), "_");
	}
	for (s = op->sels; s != NULL; s = s->next) {
		const char *n = s->kind == GRAPHQL_FIELD ? s->name :
		    s->kind == GRAPHQL_SPREAD ? "..." : "...on";

		hp_sum_add(buf, &o, " ", 1, " ");
		hp_sum_add(buf, &o, n, strlen(n), "_.");
		if (s->kind == GRAPHQL_SPREAD && graphql_fragment(doc, s->name) != NULL)
			hp_sum_add(buf, &o, s->name, strlen(s->name), "_");
	}
	return xstrdup(buf);
}

/* Whether a Content-Type names JSON (application/json, parameters allowed). */
static int
hp_json_type(const char *ct)
{
	size_t n = strlen("application/json");

	if (ct == NULL || strncasecmp(ct, "application/json", n) != 0)
		return 0;
	ct += n;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return *ct == '\0' || *ct == ';';
}

/* Whether any variable definition of op carries a directive. */
static int
hp_gql_vardirs(const struct graphql_op *op)
{
	const struct graphql_vardef *v;

	for (v = op->vars; v != NULL; v = v->next) {
		if (v->dirs != NULL)
			return 1;
	}
	return 0;
}

/* The GraphQL check: body { query, variables?, operationName? }. */
static int
hp_graphql(const struct httppolicy_scope *sc, const struct httppolicy_req *req,
    const struct hp_target *t, struct httppolicy_verdict *v)
{
	struct hp_gql g;
	struct graphql_doc *doc = NULL;
	const struct graphql_op *op, *sel = NULL;
	json_t *body = NULL, *jq, *jv, *jo;
	const char *key, *opname = NULL;
	json_t *val;
	char *cause = NULL;
	int rc = -1;

	memset(&g, 0, sizeof g);
	if (strcmp(req->method, "POST") != 0 || t->query != NULL) {
		hp_why(&v->reason, "GraphQL is accepted only as POST without a query string");
		goto out;
	}
	if (!hp_json_type(req->content_type)) {
		hp_why(&v->reason, "GraphQL requests must have Content-Type: application/json");
		goto out;
	}
	if (req->body == NULL || req->body_len == 0 || req->body_len > HTTPPOLICY_MAX_BODY ||
	    memchr(req->body, '\0', req->body_len) != NULL) {
		hp_why(&v->reason, "the GraphQL request body is empty, larger than %d bytes or "
		    "holds a NUL byte", HTTPPOLICY_MAX_BODY);
		goto out;
	}
	body = json_loadb((const char *)req->body, req->body_len, JSON_REJECT_DUPLICATES,
	    NULL);
	if (body == NULL || !json_is_object(body)) {
		hp_why(&v->reason, "the GraphQL request body is not a JSON object (duplicate "
		    "keys are refused)");
		goto out;
	}
	json_object_foreach(body, key, val) {
		if (strcmp(key, "query") != 0 && strcmp(key, "variables") != 0 &&
		    strcmp(key, "operationName") != 0) {
			hp_why(&v->reason, "the GraphQL request body has key %.40s; only query, "
			    "variables and operationName are accepted", key);
			goto out;
		}
	}
	jq = json_object_get(body, "query");
	jv = json_object_get(body, "variables");
	jo = json_object_get(body, "operationName");
	if (!json_is_string(jq) || (jv != NULL && !json_is_object(jv) && !json_is_null(jv)) ||
	    (jo != NULL && !json_is_string(jo) && !json_is_null(jo))) {
		hp_why(&v->reason, "the GraphQL request body needs a string query, optional "
		    "object variables and optional string operationName");
		goto out;
	}
	if ((doc = graphql_parse(json_string_value(jq), json_string_length(jq), &cause)) ==
	    NULL) {
		hp_why(&v->reason, "the GraphQL document was refused: %s", cause);
		goto out;
	}
	if (json_is_string(jo))
		opname = json_string_value(jo);
	for (op = doc->ops; op != NULL; op = op->next) {
		if (opname == NULL || (op->name != NULL && strcmp(op->name, opname) == 0))
			sel = op;
	}
	if (sel == NULL || (opname == NULL && doc->nops != 1)) {
		hp_why(&v->reason, "the GraphQL operation to run is ambiguous or missing: send "
		    "one operation, or name it in operationName");
		goto out;
	}
	free(v->summary);
	v->summary = hp_gql_summary(doc, sel);
	/* Every operation is checked, not only the one selected to run. */
	g.sc = sc;
	g.doc = doc;
	g.vars = json_is_object(jv) ? jv : NULL;
	g.budget = HP_GQL_BUDGET;
	for (op = doc->ops; op != NULL; op = op->next) {
		g.op = op;
		if (op->type == GRAPHQL_SUBSCRIPTION) {
			hp_why(&g.why, "GraphQL subscriptions are refused");
			break;
		}
		if (op->dirs != NULL || hp_gql_vardirs(op)) {
			hp_why(&g.why, "directives on GraphQL operations and variables are refused");
			break;
		}
		if (hp_gql_sels(&g, op->sels, op->type == GRAPHQL_MUTATION ? CTX_MUTATION :
		    CTX_QUERY) != 0)
			break;
	}
	if (g.why != NULL) {
		v->reason = g.why;	/* transferred */
		g.why = NULL;
		goto out;
	}
	v->safe = 1;
	for (op = doc->ops; op != NULL; op = op->next) {
		if (op->type != GRAPHQL_QUERY)
			v->safe = 0;
	}
	rc = 0;
out:
	free(cause);
	free(g.why);
	graphql_free(doc);
	json_decref(body);
	return rc;
}

/*
 * Whether a query string has a _method parameter (in any spelling a framework
 * might decode): Rack-style method override could turn a POST into a DELETE.
 */
static int
hp_method_override(const char *query)
{
	const char *p = query;
	char *key;
	size_t n, kn;
	int found;

	while (p != NULL && *p != '\0') {
		n = strcspn(p, "&;");
		kn = strcspn(p, "=");
		if (kn > n)
			kn = n;
		key = hp_form_decode(p, kn, &kn);
		found = key == NULL || strncasecmp(key, "_method", 7) == 0;
		free(key);
		if (found)
			return 1;
		p += n;
		if (*p != '\0')
			p++;
	}
	return 0;
}

/* The git smart-HTTP check. */
static int
hp_git(const struct httppolicy_scope *sc, const struct httppolicy_req *req,
    const struct hp_target *t, char **why)
{
	char *const *s = t->segs;
	const char *service = NULL;

	if (t->nsegs == 4 && strcmp(s[2], "info") == 0 && strcmp(s[3], "refs") == 0) {
		if (strcmp(req->method, "GET") != 0 || t->query == NULL) {
			hp_why(why, "git info/refs is accepted only as GET with "
			    "?service=git-upload-pack or git-receive-pack (smart HTTP)");
			return -1;
		}
		if (strcmp(t->query, "service=git-upload-pack") == 0)
			service = "git-upload-pack";
		else if (strcmp(t->query, "service=git-receive-pack") == 0)
			service = "git-receive-pack";
		else {
			hp_why(why, "git info/refs needs exactly ?service=git-upload-pack or "
			    "?service=git-receive-pack");
			return -1;
		}
	} else if (t->nsegs == 3 && (strcmp(s[2], "git-upload-pack") == 0 ||
	    strcmp(s[2], "git-receive-pack") == 0)) {
		if (strcmp(req->method, "POST") != 0 || t->query != NULL) {
			hp_why(why, "git %s is accepted only as POST without a query string", s[2]);
			return -1;
		}
		service = s[2];
	} else {
		hp_why(why, "only git smart HTTP is relayed: /OWNER/REPO[.git]/info/refs and "
		    "/OWNER/REPO[.git]/git-upload-pack|git-receive-pack");
		return -1;
	}
	if (hp_repo_segs(sc, s[0], s[1], why) != 0)
		return -1;
	if (strcmp(service, "git-receive-pack") == 0 && !sc->allow_push) {
		hp_why(why, "pushing to %.100s/%.100s is not allowed for this session", s[0], s[1]);
		return -1;
	}
	return 0;
}

/* Decide on one request (see httppolicy.h). */
int
httppolicy_check(const struct httppolicy_scope *sc, const struct httppolicy_req *req,
    struct httppolicy_verdict *v)
{
	static const char *const methods[] = { "GET", "HEAD", "POST", "PATCH", "PUT",
	    "DELETE", NULL };
	struct hp_target t;
	char *const *segs, *p;
	size_t n;
	int gql = 0;

	if (v == NULL)
		return -1;
	memset(v, 0, sizeof *v);
	memset(&t, 0, sizeof t);
	if (sc == NULL || req == NULL || req->method == NULL || req->target == NULL) {
		v->reason = xstrdup("internal error: incomplete request for the HTTP policy");
		v->summary = xstrdup("? ?");
		return -1;
	}
	if (hp_target_split(req->target, &t, &v->reason) != 0) {
		char buf[HP_SUMMARY_MAX + 8], m[12];
		size_t o = 0;

		hp_method_word(req->method, m, sizeof m);
		hp_sum_add(buf, &o, m, strlen(m), "");
		hp_sum_add(buf, &o, " ", 1, " ");
		hp_sum_add(buf, &o, req->target, strlen(req->target), "/-._~!$&'()*+,;=:@?%");
		v->summary = xstrdup(buf);
		goto out;
	}
	v->summary = hp_summary_path(req->method, &t, sc->api == HTTP_API_GIT);
	if (!hp_in(methods, req->method)) {
		hp_why(&v->reason, "HTTP method %.16s is refused", req->method);
		goto out;
	}
	if (sc->api == HTTP_API_GIT) {
		if (hp_git(sc, req, &t, &v->reason) == 0) {
			v->allowed = 1;
			v->safe = t.nsegs == 3 && strcmp(t.segs[2], "git-upload-pack") == 0;
		}
		goto out;
	}
	segs = t.segs;
	n = t.nsegs;
	if (sc->api == HTTP_API_GHE) {
		if (n == 2 && strcmp(segs[0], "api") == 0 && strcmp(segs[1], "graphql") == 0)
			gql = 1;
		else if (n >= 2 && strcmp(segs[0], "api") == 0 && strcmp(segs[1], "v3") == 0) {
			segs += 2;
			n -= 2;
		} else {
			hp_why(&v->reason, "only the REST API under /api/v3/ and GraphQL at "
			    "/api/graphql are relayed");
			goto out;
		}
	} else if (n == 1 && strcmp(segs[0], "graphql") == 0)
		gql = 1;
	if (gql) {
		if (hp_graphql(sc, req, &t, v) == 0)
			v->allowed = 1;
		goto out;
	}
	if (hp_method_override(t.query)) {
		hp_why(&v->reason, "the query string has a _method parameter (method override) "
		    "or a malformed %%-escape; such requests are refused");
		goto out;
	}
	if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0 &&
	    req->content_type != NULL && !hp_json_type(req->content_type)) {
		hp_why(&v->reason, "API writes must send JSON (Content-Type: application/json)");
		goto out;
	}
	if (hp_rest(sc, req->method, segs, n, t.query, &v->reason) == 0)
		v->allowed = 1;
out:
	if (v->allowed) {
		free(v->reason);
		v->reason = NULL;
		if (strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0)
			v->safe = 1;
	} else
		v->safe = 0;
	if (!v->allowed && v->reason == NULL)
		v->reason = xstrdup("the request was refused by the HTTP policy");
	/* Reasons quote request text: keep them printable ASCII for the agent and logs. */
	for (p = v->reason; p != NULL && *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	}
	hp_target_free(&t);
	return 0;
}

/* Free a verdict's strings. */
void
httppolicy_verdict_free(struct httppolicy_verdict *v)
{
	if (v == NULL)
		return;
	free(v->reason);
	free(v->summary);
	v->reason = NULL;
	v->summary = NULL;
	v->allowed = 0;
}
