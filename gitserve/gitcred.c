/*
 * The credential helper host git calls back ("credential.helper=!shimbridge-git
 * credential"). It answers only for the exact upstream of this call: same protocol,
 * same host and port, same repository path. Anything else gets no answer, so a
 * redirect, a submodule or a crafted URL can never draw the token to another place.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "gitserve.h"

#define GITCRED_INPUT_MAX	(GITCRED_LINES_MAX * (GITCRED_LINE_MAX + 1) + 1)

/* Zero memory in a way the compiler may not remove. */
void
gitcred_wipe(void *p, size_t len)
{
	if (p == NULL || len == 0)
		return;
#if defined(__APPLE__)
	memset_s(p, len, 0, len);
#else
	explicit_bzero(p, len);
#endif
}

/* Store value for a key we care about, refusing repeats. */
static int
gitcred_set(char **slot, const char *key, const char *value, size_t len, char **cause)
{
	if (*slot != NULL) {
		xasprintf(cause, "credential request repeats \"%s\"", key);
		return -1;
	}
	*slot = xstrndup(value, len);
	return 0;
}

/* Parse git's key=value request lines. */
int
gitcred_parse(const char *buf, size_t len, struct gitcred *c, char **cause)
{
	const char	*p = buf, *end = buf + len, *eol, *eq;
	size_t		 lines = 0, n, klen;

	memset(c, 0, sizeof *c);
	if (memchr(buf, '\0', len) != NULL) {
		xasprintf(cause, "credential request contains a NUL byte");
		goto fail;
	}
	while (p < end) {
		eol = memchr(p, '\n', end - p);
		n = eol == NULL ? (size_t)(end - p) : (size_t)(eol - p);
		if (n == 0)
			break;	/* a blank line ends the request */
		if (n > GITCRED_LINE_MAX) {
			xasprintf(cause, "credential request line longer than %d bytes",
			    GITCRED_LINE_MAX);
			goto fail;
		}
		if (++lines > GITCRED_LINES_MAX) {
			xasprintf(cause, "credential request has more than %d lines",
			    GITCRED_LINES_MAX);
			goto fail;
		}
		if ((eq = memchr(p, '=', n)) == NULL || eq == p) {
			xasprintf(cause, "credential request line is not key=value");
			goto fail;
		}
		klen = eq - p;
		eq++;
		n -= klen + 1;
		if (klen == 8 && memcmp(p, "protocol", 8) == 0) {
			if (gitcred_set(&c->protocol, "protocol", eq, n, cause) != 0)
				goto fail;
		} else if (klen == 4 && memcmp(p, "host", 4) == 0) {
			if (gitcred_set(&c->host, "host", eq, n, cause) != 0)
				goto fail;
		} else if (klen == 4 && memcmp(p, "path", 4) == 0) {
			if (gitcred_set(&c->path, "path", eq, n, cause) != 0)
				goto fail;
		} else if (klen == 8 && memcmp(p, "username", 8) == 0) {
			if (gitcred_set(&c->username, "username", eq, n, cause) != 0)
				goto fail;
		}
		/* Other keys (password, url, capability[], wwwauth[], ...) are ignored. */
		if (eol == NULL)
			break;
		p = eol + 1;
	}
	return 0;

fail:
	gitcred_free(c);
	return -1;
}

/* Release a parsed request. */
void
gitcred_free(struct gitcred *c)
{
	free(c->protocol);
	free(c->host);
	free(c->path);
	free(c->username);
	memset(c, 0, sizeof *c);
}

/* Whether the request is for exactly this upstream. */
int
gitcred_match(const struct gitcred *c, const struct giturl *u, const char *username)
{
	if (c->protocol == NULL || c->host == NULL || c->path == NULL)
		return 0;
	if (strcmp(c->protocol, u->scheme) != 0 || strcmp(c->host, u->host) != 0)
		return 0;
	if (!giturl_path_eq(c->path, u->path))
		return 0;
	if (c->username != NULL && strcmp(c->username, username) != 0)
		return 0;
	return 1;
}

/* Read all of stdin, up to max bytes; -1 if there is more or on error. */
static int
gitcred_read_input(char *buf, size_t max, size_t *len, char **cause)
{
	ssize_t	n;

	*len = 0;
	for (;;) {
		if (*len == max) {
			xasprintf(cause, "credential request longer than %zu bytes", max - 1);
			return -1;
		}
		n = read(STDIN_FILENO, buf + *len, max - *len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			xasprintf(cause, "reading credential request: %s", strerror(errno));
			return -1;
		}
		if (n == 0)
			return 0;
		*len += n;
		/* git ends a request with EOF; a blank line ends it too. */
		if ((*len == 1 && buf[0] == '\n') ||
		    (*len >= 2 && buf[*len - 1] == '\n' && buf[*len - 2] == '\n'))
			return 0;
	}
}

/* Write all of buf to stdout. */
static int
gitcred_write_all(const char *buf, size_t len)
{
	ssize_t	n;

	while (len > 0) {
		n = write(STDOUT_FILENO, buf, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= n;
	}
	return 0;
}

/* The "credential get|store|erase" mode. */
int
gitcred_helper(int argc, char **argv)
{
	struct gitctx	 ctx;
	struct gitcred	 c;
	char		*buf = NULL, *answer = NULL, *cause = NULL;
	size_t		 len, alen = 0;
	int		 rc = GS_EXIT_REFUSED, get;

	memset(&ctx, 0, sizeof ctx);
	memset(&c, 0, sizeof c);
	if (argc != 3 || (strcmp(argv[2], "get") != 0 && strcmp(argv[2], "store") != 0 &&
	    strcmp(argv[2], "erase") != 0)) {
		fprintf(stderr, "usage: shimbridge-git credential get|store|erase\n");
		return GS_EXIT_USAGE;
	}
	get = strcmp(argv[2], "get") == 0;

	buf = xmalloc(GITCRED_INPUT_MAX);
	if (gitcred_read_input(buf, GITCRED_INPUT_MAX, &len, &cause) != 0)
		goto out;
	if (!get) {
		rc = GS_EXIT_OK;	/* nothing is ever stored or erased */
		goto out;
	}
	if (gitcred_parse(buf, len, &c, &cause) != 0)
		goto out;
	if (gitenv_load(&ctx, GITENV_UPSTREAM | GITENV_CRED, &cause) != 0)
		goto out;
	if (ctx.token != NULL && gitcred_match(&c, &ctx.url, ctx.username)) {
		alen = xasprintf(&answer, "username=%s\npassword=%s\n", ctx.username, ctx.token);
		if (gitcred_write_all(answer, alen) != 0) {
			xasprintf(&cause, "writing credential: %s", strerror(errno));
			goto out;
		}
	}
	rc = GS_EXIT_OK;

out:
	if (cause != NULL) {
		gitmsg_say("credential helper: %s", cause);
		free(cause);
	}
	if (answer != NULL) {
		gitcred_wipe(answer, alen);
		free(answer);
	}
	gitcred_wipe(buf, GITCRED_INPUT_MAX);
	free(buf);
	gitcred_free(&c);
	gitenv_free(&ctx);
	return rc;
}
