/*
 * libFuzzer target for the git remote URL parser (bridge/profile-git.c profile_git_parse_url),
 * whose host/owner/name become a mirror path (state_dir/mirrors/SESSION/HOST/OWNER/
 * NAME.git) and an upstream URL. The input, up to its first NUL, is the URL. On
 * success: host is [A-Za-z0-9.:-] without "@" or "/", not "." or "..", and no ".."
 * inside it; owner and name are 1-100 bytes of [A-Za-z0-9._-], never "." or "..";
 * and the URL really is SCHEME HOST SEP OWNER/NAME
 * with an optional ".git" and trailing "/", which is re-assembled and compared. On
 * failure: a reason and no allocations.
 */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile-git.h"
#include "proto.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Owner or name: GitHub's characters, never a path step. */
static void
fuzz_component(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > 100 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		abort();
	for (i = 0; i < n; i++) {
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			abort();
	}
}

/* Host[:port]: no user info, no path, not a path step. */
static void
fuzz_host(const char *h)
{
	size_t n = strlen(h), i;

	if (n == 0 || n > 253 || strchr(h, '@') != NULL || strchr(h, '/') != NULL ||
	    strstr(h, "..") != NULL || strcmp(h, ".") == 0)
		abort();
	for (i = 0; i < n; i++) {
		if (!isalnum((unsigned char)h[i]) && h[i] != '-' && h[i] != '.' && h[i] != ':')
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const prefixes[] = { "https://", "http://", "ssh://git@", "git@" };
	char *url, *host = NULL, *owner = NULL, *name = NULL, *re;
	const char *why = NULL, *prefix = NULL;
	size_t i;
	int rc, ok = 0;

	url = malloc(size + 1);
	memcpy(url, data, size);
	url[size] = '\0';
	rc = profile_git_parse_url(url, &host, &owner, &name, &why);
	if (rc != 0) {
		if (rc != -1 || why == NULL || host != NULL || owner != NULL || name != NULL)
			abort();
		free(url);
		return 0;
	}
	if (host == NULL || owner == NULL || name == NULL || strlen(url) > REQ_MAX_PATH)
		abort();
	fuzz_host(host);
	fuzz_component(owner);
	fuzz_component(name);
	/* Re-assemble and compare with the input. */
	for (i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
		if (strncmp(url, prefixes[i], strlen(prefixes[i])) == 0) {
			prefix = prefixes[i];
			break;
		}
	}
	if (prefix == NULL)
		abort();
	/* git@host/owner/name is accepted too: ':' and '/' both end a git@ host. */
	re = malloc(strlen(url) + 16);
	for (i = 0; i < 8 && !ok; i++) {
		const char *sep = strcmp(prefix, "git@") == 0 && (i & 4) == 0 ? ":" : "/";

		snprintf(re, strlen(url) + 16, "%s%s%s%s/%s%s%s", prefix, host, sep, owner,
		    name, (i & 1) ? ".git" : "", (i & 2) ? "/" : "");
		ok = strcmp(re, url) == 0;
	}
	if (!ok)
		abort();
	free(re);
	free(host);
	free(owner);
	free(name);
	free(url);
	return 0;
}
