/*
 * HTTP-layer credential injection: the security boundary between a host-side
 * tool (gh, git) and its upstream. The tool talks plain HTTP/1.1 to a listener
 * the daemon owns, holding only a placeholder; each request is parsed (libevent
 * evhttp), checked (Host, placeholder, httppolicy_check), given the real
 * credential and forwarded over TLS (OpenSSL 3, certificate and host name
 * verified), and the answer is streamed back. Any parse, TLS or policy error is
 * a refused request, never a pass-through. See docs/INJECTOR.md.
 */
#ifndef SHIMBRIDGE_INJECT_H
#define SHIMBRIDGE_INJECT_H

#include <stddef.h>

#include "httppolicy.h"

struct event_base;

/* Limits (bytes, seconds). Bodies are buffered whole: the policy reads them. */
#define INJECT_MAX_HEADERS	(64 * 1024)		/* request head, downstream */
#define INJECT_MAX_BODY_API	(25 * 1024 * 1024)	/* REST / GraphQL request bodies */
#define INJECT_MAX_BODY_GIT	(1024 * 1024 * 1024)	/* git pushes (receive-pack) */
#define INJECT_TIMEOUT		60			/* connect, TLS and idle, each way */

struct pushcmd;

enum inject_auth {
	INJECT_AUTH_TOKEN,	/* "Authorization: token S" */
	INJECT_AUTH_BASIC,	/* "Authorization: Basic base64(username:S)" */
};

struct inject_target {
	enum http_api	 api;
	const char	*host;		/* Host header the tool must send; NULL: any (git) */
	const char	*upstream;	/* "https://HOST[:PORT]"; http:// only if so configured */
	const char	*ca_file;	/* NULL: the system's CA store */
	enum inject_auth auth;
	const char	*username;	/* INJECT_AUTH_BASIC */
	/*
	 * The placeholder the tool was given: its Authorization header must be exactly
	 * "token PLACEHOLDER" (or absent). NULL: the tool must send no Authorization.
	 */
	const char	*placeholder;
	size_t		 max_body;	/* 0: INJECT_MAX_BODY_API, or _GIT for HTTP_API_GIT */
	const struct httppolicy_scope *scope;	/* must outlive the injector */
	/*
	 * The secret, fetched per request (renewals): 0 and a pointer valid until the
	 * call returns, -1 if unavailable, or 1 if it is being fetched (the request
	 * waits and asks again every 100 ms, up to INJECT_TIMEOUT).
	 */
	int		(*secret)(void *arg, const unsigned char **val, size_t *len);
	/*
	 * One call per finished or refused request, for the audit log: summary is the
	 * policy's ("GET /repos/o/r", "graphql mutation createIssue") or METHOD + path;
	 * status is what the tool got; refusal is NULL if the request was forwarded.
	 * Never bodies or secrets.
	 */
	void		(*audit)(void *arg, const char *summary, int status,
			    unsigned long long bytes_up, unsigned long long bytes_down,
			    const char *refusal);
	/*
	 * Optional: called once for the first inject_prefetch: with the body of its
	 * 200 answer (valid during the call), or with NULL when there will be none
	 * (failed, not 200, too large, dropped).
	 */
	void		(*prefetched)(void *arg, const unsigned char *body, size_t len);
	/*
	 * Optional, git: the ref updates of each POST .../git-receive-pack the policy
	 * let through (pushcmd.h), before anything goes upstream; 0 lets it go, -1 with
	 * *why (allocated) refuses it. A body whose updates cannot be read is refused.
	 */
	int		(*push_check)(void *arg, const struct pushcmd *u, size_t n, char **why);
	/*
	 * Optional, git: the first INJECT_ADVERT_MAX bytes of each 200 answer to
	 * GET .../info/refs?service=git-upload-pack relayed to the tool (upstream's ref
	 * advertisement: its default branch). The prefetch's comes by prefetched.
	 */
	void		(*advertised)(void *arg, const unsigned char *body, size_t len);
	void		*arg;
};

struct inject;

#define INJECT_ADVERT_MAX	8192

/*
 * Serve HTTP on listen_fd (a listening socket, transferred: closed by
 * inject_free or on failure). The strings of target are copied; scope and arg
 * must outlive the injector. NULL and *cause on a bad upstream URL or CA file.
 */
struct inject	*inject_new(struct event_base *, int listen_fd,
		    const struct inject_target *, char **cause);
/*
 * Close the listener and every in-flight request; each unfinished one is audited
 * (status 0). Never call it from the audit or secret callback.
 */
void		 inject_free(struct inject *);
/*
 * GET uri upstream now, before the tool asks (git's ref advertisement while
 * shimbridge-git starts). The tool's first GET of exactly uri without a
 * Git-Protocol header is then answered from it (or waits for it), within
 * INJECT_PREFETCH_AGE seconds; if it fails or is not 200, the tool's request
 * goes upstream itself. The same policy applies as to the tool's requests, and
 * it is audited ("prefetch ..."). Up to two per injector, each of its own uri;
 * only the first one's answer goes to the prefetched callback. -1 and *cause if
 * refused.
 */
int		 inject_prefetch(struct inject *, const char *uri, char **cause);
/*
 * Forget the prefetched answers (taken too early: something may have changed
 * since); a request waiting for one goes upstream. NULL or none: nothing happens.
 */
void		 inject_prefetch_drop(struct inject *);
/* How many upstream answers were HTTP 401 (the host's token was rejected). */
unsigned int	 inject_unauthorized(const struct inject *);
/* Requests finished or refused so far. */
unsigned int	 inject_requests(const struct inject *);
/*
 * The injector's cached TLS client context trusting ca_file (NULL: the system
 * store): a new reference (SSL_CTX_free it), or NULL and *cause.
 */
struct ssl_ctx_st *inject_client_ctx(const char *ca_file, char **cause);
/*
 * Make libevent wipe every block it frees (request heads hold the credential).
 * Call once, before creating the event base; inject_new calls it too.
 */
void		 inject_memory_init(void);

#endif
