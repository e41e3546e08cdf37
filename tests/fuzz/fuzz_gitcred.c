/*
 * libFuzzer target for shimbridge-git's parsers of what host git hands it
 * (gitserve/): the credential helper request (gitcred_parse, gitcred_match), the
 * upstream URL (giturl_parse) and the pre-receive hook's "old new ref" lines
 * (githook_parse_line).
 *
 * The input is a credential request as git writes it to the helper. Checks:
 *   - gitcred_parse agrees with an independent reading of the key=value lines
 *     (up to the first blank line; a repeated protocol/host/path/username, a NUL,
 *     a line over GITCRED_LINE_MAX or more than GITCRED_LINES_MAX lines refuse);
 *     a refusal leaves a cause and an empty struct;
 *   - gitcred_match answers for the fixed upstream https://github.com/octo/one.git
 *     exactly when protocol, host and path (+/- ".git") are those, byte for byte:
 *     the token must never be offered to another host, port or repository;
 *   - the first line, as an upstream URL: on success scheme is http/https, host
 *     and path have the documented characters, no user info, no empty, "." or
 *     ".." path segment, and the parts re-assemble to the URL;
 *   - every line through githook_parse_line: on success 40 or 64 hex digits twice
 *     and a ref without spaces or control bytes, re-assembling to the line.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../gitserve/gitserve.h"	/* not on the fuzz build's -I path */

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* The reference reading of a credential request. */
struct fuzz_cred {
	int		 ok;
	const char	*v[4];		/* protocol, host, path, username */
	size_t		 n[4];
};

/* Parse like git's credential_read_fp, with shimbridge's limits. */
static void
fuzz_cred_ref(const char *buf, size_t len, struct fuzz_cred *r)
{
	static const char *const keys[] = { "protocol", "host", "path", "username" };
	const char *p = buf, *end = buf + len, *eol, *eq;
	size_t n, lines = 0, k;

	memset(r, 0, sizeof *r);
	if (memchr(buf, '\0', len) != NULL)
		return;
	while (p < end) {
		eol = memchr(p, '\n', (size_t)(end - p));
		n = eol != NULL ? (size_t)(eol - p) : (size_t)(end - p);
		if (n == 0)
			break;
		if (n > GITCRED_LINE_MAX || ++lines > GITCRED_LINES_MAX)
			return;
		eq = memchr(p, '=', n);
		if (eq == NULL || eq == p)
			return;
		for (k = 0; k < 4; k++) {
			if ((size_t)(eq - p) == strlen(keys[k]) &&
			    memcmp(p, keys[k], strlen(keys[k])) == 0) {
				if (r->v[k] != NULL)
					return;
				r->v[k] = eq + 1;
				r->n[k] = n - (size_t)(eq + 1 - p);
			}
		}
		if (eol == NULL)
			break;
		p = eol + 1;
	}
	r->ok = 1;
}

/* Whether s (NUL-terminated) equals the n bytes at v; NULL matches NULL. */
static int
fuzz_eq(const char *s, const char *v, size_t n)
{
	if (s == NULL || v == NULL)
		return s == NULL && v == NULL;
	return strlen(s) == n && memcmp(s, v, n) == 0;
}

/* The credential request checks. */
static void
fuzz_cred(const char *buf, size_t len)
{
	static const char *const eqpaths[] = { "octo/one.git", "octo/one" };
	struct giturl u = { "https", "github.com", "octo/one.git" };
	struct gitcred c;
	struct fuzz_cred r;
	char *cause = NULL;
	int rc, m, want;

	fuzz_cred_ref(buf, len, &r);
	memset(&c, 0xa5, sizeof c);
	rc = gitcred_parse(buf, len, &c, &cause);
	if (rc != 0) {
		if (r.ok || cause == NULL || c.protocol != NULL || c.host != NULL ||
		    c.path != NULL || c.username != NULL)
			abort();
		free(cause);
		return;
	}
	if (!r.ok || cause != NULL)
		abort();
	if (!fuzz_eq(c.protocol, r.v[0], r.n[0]) || !fuzz_eq(c.host, r.v[1], r.n[1]) ||
	    !fuzz_eq(c.path, r.v[2], r.n[2]) || !fuzz_eq(c.username, r.v[3], r.n[3]))
		abort();
	m = gitcred_match(&c, &u, "x-access-token");
	want = c.protocol != NULL && strcmp(c.protocol, "https") == 0 &&
	    c.host != NULL && strcmp(c.host, "github.com") == 0 && c.path != NULL &&
	    (strcmp(c.path, eqpaths[0]) == 0 || strcmp(c.path, eqpaths[1]) == 0) &&
	    (c.username == NULL || strcmp(c.username, "x-access-token") == 0);
	if (m != want)
		abort();
	gitcred_free(&c);
}

/* Whether c may appear in a host name / a repository path (as documented). */
static int
fuzz_hostchar(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    c == '.' || c == '-' || c == ':' || c == '[' || c == ']';
}

static int
fuzz_pathchar(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    c == '.' || c == '-' || c == '_' || c == '~' || c == '/';
}

/* The upstream URL checks on a NUL-terminated line. */
static void
fuzz_url(const char *url)
{
	struct giturl u;
	char *cause = NULL, *re;
	const char *s;
	size_t n;

	if (giturl_parse(url, &u, &cause) != 0) {
		if (cause == NULL || u.scheme != NULL || u.host != NULL || u.path != NULL)
			abort();
		free(cause);
		return;
	}
	if (strcmp(u.scheme, "https") != 0 && strcmp(u.scheme, "http") != 0)
		abort();
	if (u.host[0] == '\0' || strchr(u.host, '@') != NULL || u.host[0] == '.' ||
	    u.host[0] == '-')
		abort();
	for (s = u.host; *s != '\0'; s++) {
		if (!fuzz_hostchar((unsigned char)*s))
			abort();
	}
	if (u.path[0] == '\0' || u.path[0] == '/' || strstr(u.path, "//") != NULL ||
	    u.path[strlen(u.path) - 1] == '/')
		abort();
	for (s = u.path; *s != '\0'; s++) {
		if (!fuzz_pathchar((unsigned char)*s))
			abort();
	}
	for (s = u.path; s != NULL; s = strchr(s, '/') != NULL ? strchr(s, '/') + 1 : NULL) {
		n = strcspn(s, "/");
		if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			abort();
	}
	n = strlen(url) + 1;
	re = malloc(n);
	snprintf(re, n, "%s://%s/%s", u.scheme, u.host, u.path);
	if (strcmp(re, url) != 0)
		abort();
	free(re);
	giturl_free(&u);
}

/* The hook line checks. */
static void
fuzz_hook(const char *line, size_t len)
{
	struct githook_update u;
	char *cause = NULL, *re;
	size_t h, i, n;

	if (githook_parse_line(line, len, &u, &cause) != 0) {
		if (cause == NULL || u.old != NULL || u.new != NULL || u.ref != NULL)
			abort();
		free(cause);
		return;
	}
	h = strlen(u.old);
	if ((h != 40 && h != 64) || strlen(u.new) != h || u.ref[0] == '\0')
		abort();
	for (i = 0; i < h; i++) {
		if (strchr("0123456789abcdefABCDEF", u.old[i]) == NULL ||
		    strchr("0123456789abcdefABCDEF", u.new[i]) == NULL)
			abort();
	}
	for (i = 0; u.ref[i] != '\0'; i++) {
		if ((unsigned char)u.ref[i] <= 0x20 || u.ref[i] == 0x7f)
			abort();
	}
	n = len + 1;
	re = malloc(n);
	snprintf(re, n, "%s %s %s", u.old, u.new, u.ref);
	if (strlen(re) != len || memcmp(re, line, len) != 0)
		abort();
	free(re);
	githook_free_update(&u);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *p, *eol;
	char *line;
	size_t n;

	fuzz_cred(buf, size);
	for (p = buf; p < buf + size; p = eol + 1) {
		eol = memchr(p, '\n', (size_t)(buf + size - p));
		if (eol == NULL)
			eol = buf + size;
		n = (size_t)(eol - p);
		line = malloc(n + 1);
		memcpy(line, p, n);
		line[n] = '\0';
		if (p == buf && memchr(p, '\0', n) == NULL)
			fuzz_url(line);
		fuzz_hook(p, n);
		free(line);
	}
	return 0;
}
