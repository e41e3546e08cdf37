/* Validators (see valid.h). */
#include <ctype.h>
#include <string.h>

#include "valid.h"

/* owner/name with GitHub's characters; no "." or ".." parts. */
int
valid_repo(const char *s)
{
	const char *slash = strchr(s, '/');
	size_t i;

	if (slash == NULL || slash == s || slash[1] == '\0' || strchr(slash + 1, '/') != NULL)
		return 0;
	if (strlen(s) > 200 || strcmp(slash + 1, ".") == 0 || strcmp(slash + 1, "..") == 0 ||
	    strncmp(s, "./", 2) == 0 || strncmp(s, "../", 3) == 0)
		return 0;
	for (i = 0; s[i] != '\0'; i++) {
		if (s + i == slash)
			continue;
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return 0;
	}
	return 1;
}

/* A pkt-line length: 4 lowercase hex digits (as git writes them), or -1. */
int
valid_pkt_len(const char *p)
{
	int v = 0, i;

	for (i = 0; i < 4; i++) {
		v <<= 4;
		if (p[i] >= '0' && p[i] <= '9')
			v |= p[i] - '0';
		else if (p[i] >= 'a' && p[i] <= 'f')
			v |= p[i] - 'a' + 10;
		else
			return -1;
	}
	return v;
}

/* Whether s[0..n) is n lowercase hex digits. */
int
valid_hex_lower(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	}
	return 1;
}
