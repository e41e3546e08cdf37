/*
 * TEST-ONLY stand-in for bridge/httppolicy.c while it is not on main: allows
 * everything except a path containing "/forbidden/" (so refusals can be tested).
 * Linked into build/tools/injectd only when bridge/httppolicy.c is absent; never
 * into the daemon.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httppolicy.h"

/* Fill v: allowed unless the target names /forbidden/. */
int
httppolicy_check(const struct httppolicy_scope *s, const struct httppolicy_req *r,
    struct httppolicy_verdict *v)
{
	char	*sum;
	size_t	 n;

	(void)s;
	memset(v, 0, sizeof *v);
	n = strcspn(r->target, "?");
	if (asprintf(&sum, "%s %.*s", r->method, (int)n, r->target) == -1)
		return -1;
	v->summary = sum;
	if (strstr(r->target, "/forbidden/") != NULL) {
		v->reason = strdup("test policy: /forbidden/ is refused");
		return v->reason == NULL ? -1 : 0;
	}
	v->allowed = 1;
	return 0;
}

/* Free what httppolicy_check filled. */
void
httppolicy_verdict_free(struct httppolicy_verdict *v)
{
	free(v->reason);
	free(v->summary);
	v->reason = v->summary = NULL;
}
