/*
 * INTERIM copy of the httppolicy contract from BRIEF-COMMON.md, used only until
 * bridge/httppolicy.h (helper "httppolicy") lands on main; -Ibridge comes first,
 * so the real header wins as soon as it exists. Delete this file then.
 */
#ifndef SHIMBRIDGE_HTTPPOLICY_H
#define SHIMBRIDGE_HTTPPOLICY_H

#include <stddef.h>

enum http_api { HTTP_API_GITHUB, HTTP_API_GHE, HTTP_API_GIT };
struct httppolicy_scope { enum http_api api; const char *const *repos; size_t nrepos;
			  int allow_push; };
struct httppolicy_req { const char *method; const char *target;
			const char *content_type; const unsigned char *body; size_t body_len; };
struct httppolicy_verdict { int allowed; char *reason; char *summary; };
int	httppolicy_check(const struct httppolicy_scope *, const struct httppolicy_req *,
	    struct httppolicy_verdict *);
void	httppolicy_verdict_free(struct httppolicy_verdict *);

#endif
