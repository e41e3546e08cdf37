/*
 * The upstream URL. Only the plain forms a GitHub-like host uses are accepted:
 * http(s)://host[:port]/path with no user info, query, fragment or escapes, so that
 * the URL git is given and the fields its credential protocol sends back compare
 * byte for byte.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "gitserve.h"

#define GITURL_MAX	4096

/* Whether c may appear in a host name. */
static int
giturl_hostchar(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    c == '.' || c == '-';
}

/* Whether c may appear in a repository path. */
static int
giturl_pathchar(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    c == '.' || c == '-' || c == '_' || c == '~' || c == '/';
}

/* Check "host", "host:port", "[v6]" or "[v6]:port". */
static int
giturl_check_host(const char *s, size_t len)
{
	size_t	i = 0, hostend, digits;
	long	port = 0;

	if (len == 0)
		return -1;
	if (s[0] == '[') {
		for (i = 1; i < len && s[i] != ']'; i++) {
			if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
			    (s[i] >= 'A' && s[i] <= 'F') || s[i] == ':' || s[i] == '.'))
				return -1;
		}
		if (i == len || i == 1)
			return -1;
		hostend = i + 1;
	} else {
		while (i < len && giturl_hostchar((unsigned char)s[i]))
			i++;
		if (i == 0 || s[0] == '-' || s[0] == '.')
			return -1;
		hostend = i;
	}
	if (hostend == len)
		return 0;
	if (s[hostend] != ':')
		return -1;
	digits = 0;
	for (i = hostend + 1; i < len; i++) {
		if (s[i] < '0' || s[i] > '9' || ++digits > 5)
			return -1;
		port = port * 10 + (s[i] - '0');
	}
	if (digits == 0 || port < 1 || port > 65535)
		return -1;
	return 0;
}

/* Check a path without its leading '/': plain characters, no empty, "." or ".." segments. */
static int
giturl_check_path(const char *p)
{
	const char	*seg, *end;
	size_t		 n;

	if (*p == '\0')
		return -1;
	for (end = p; *end != '\0'; end++) {
		if (!giturl_pathchar((unsigned char)*end))
			return -1;
	}
	seg = p;
	for (;;) {
		end = strchr(seg, '/');
		n = end == NULL ? strlen(seg) : (size_t)(end - seg);
		if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return -1;
		if (end == NULL)
			break;
		seg = end + 1;
	}
	return 0;
}

/* Parse an upstream URL into scheme, host[:port] and path. */
int
giturl_parse(const char *url, struct giturl *u, char **cause)
{
	const char	*rest, *slash;
	size_t		 schemelen;

	memset(u, 0, sizeof *u);
	if (strlen(url) > GITURL_MAX) {
		xasprintf(cause, "upstream URL is longer than %d bytes", GITURL_MAX);
		return -1;
	}
	if (strncmp(url, "https://", 8) == 0)
		schemelen = 5;
	else if (strncmp(url, "http://", 7) == 0)
		schemelen = 4;
	else {
		xasprintf(cause, "upstream URL must start with https:// or http://");
		return -1;
	}
	rest = url + schemelen + 3;
	slash = strchr(rest, '/');
	if (slash == NULL) {
		xasprintf(cause, "upstream URL has no repository path");
		return -1;
	}
	if (memchr(rest, '@', slash - rest) != NULL) {
		xasprintf(cause, "upstream URL must not contain user info");
		return -1;
	}
	if (giturl_check_host(rest, slash - rest) != 0) {
		xasprintf(cause, "upstream URL has an invalid host or port");
		return -1;
	}
	if (giturl_check_path(slash + 1) != 0) {
		xasprintf(cause, "upstream URL has an invalid repository path "
		    "(allowed: letters, digits, . - _ ~ and single slashes)");
		return -1;
	}
	u->scheme = xstrndup(url, schemelen);
	u->host = xstrndup(rest, slash - rest);
	u->path = xstrdup(slash + 1);
	return 0;
}

/* Release a parsed URL. */
void
giturl_free(struct giturl *u)
{
	free(u->scheme);
	free(u->host);
	free(u->path);
	memset(u, 0, sizeof *u);
}

/* Length of p without one trailing ".git". */
static size_t
giturl_stem(const char *p)
{
	size_t	n = strlen(p);

	if (n > 4 && strcmp(p + n - 4, ".git") == 0)
		return n - 4;
	return n;
}

/* Compare repository paths with and without a trailing ".git". */
int
giturl_path_eq(const char *a, const char *b)
{
	size_t	na = giturl_stem(a), nb = giturl_stem(b);

	return na == nb && memcmp(a, b, na) == 0;
}
