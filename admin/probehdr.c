/*
 * What shimbridge check reads from an upstream's answer, without libcurl (so the
 * fuzzer can reach it): the two response headers it reports, the start of the
 * body, and GitHub's token expiry date. The input is the upstream's: every
 * length is bounded and nothing is trusted to be terminated.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "admin.h"
#include "util.h"

#define PROBEHDR_VALUE_MAX	1024	/* longest header value kept */
#define PROBEHDR_BODY_MAX	4096	/* bytes of the body kept */

/* Keep a header line's value if it is one check reports (names case-insensitive). */
void
probehdr_line(struct probe_result *r, const char *buf, size_t len)
{
	static const char *const names[] = { "x-oauth-scopes:",
	    "github-authentication-token-expiration:" };
	size_t i, nl, vl;
	const char *v;
	char **slot;

	for (i = 0; i < 2; i++) {
		nl = strlen(names[i]);
		if (len < nl || strncasecmp(buf, names[i], nl) != 0)
			continue;
		slot = i == 0 ? &r->scopes : &r->expires;
		v = buf + nl;
		vl = len - nl;
		while (vl > 0 && (*v == ' ' || *v == '\t')) {
			v++;
			vl--;
		}
		while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		if (vl > PROBEHDR_VALUE_MAX)
			vl = PROBEHDR_VALUE_MAX;
		free(*slot);
		/* Stops at an embedded NUL: the value is text for a report line. */
		*slot = xstrndup(v, vl);
	}
}

/* Append to the kept start of the body (at most 4 KiB; it is only searched). */
void
probehdr_body(struct probe_result *r, const char *buf, size_t len)
{
	size_t have = r->body != NULL ? strlen(r->body) : 0, take;

	take = have + len > PROBEHDR_BODY_MAX ? PROBEHDR_BODY_MAX - have : len;
	if (take == 0)
		return;
	r->body = xreallocarray(r->body, have + take + 1, 1);
	memcpy(r->body + have, buf, take);
	r->body[have + take] = '\0';
}

/*
 * Seconds from now until a token expiry date as GitHub sends it ("2026-01-31
 * 12:00:00 UTC", or with a numeric zone "+0100" / "+01:00"); 0 when it is past,
 * -1 when absent or unreadable.
 */
long long
probehdr_expiry(const char *v, time_t now)
{
	struct tm tm;
	const char *rest;
	time_t when;
	long off = 0;
	int i;

	if (v == NULL)
		return -1;
	memset(&tm, 0, sizeof tm);
	if ((rest = strptime(v, "%Y-%m-%d %H:%M:%S", &tm)) == NULL)
		return -1;
	while (*rest == ' ')
		rest++;
	if (rest[0] == '+' || rest[0] == '-') {
		char d[4];
		size_t n = 0;

		for (i = 1; rest[i] != '\0' && n < 4; i++) {
			if (rest[i] == ':' && i == 3)
				continue;
			if (rest[i] < '0' || rest[i] > '9')
				return -1;
			d[n++] = rest[i];
		}
		if (n != 4 || rest[i] != '\0')
			return -1;
		off = ((d[0] - '0') * 10 + (d[1] - '0')) * 3600L +
		    ((d[2] - '0') * 10 + (d[3] - '0')) * 60L;
		if (rest[0] == '-')
			off = -off;
	} else if (*rest != '\0' && strcmp(rest, "UTC") != 0 && strcmp(rest, "GMT") != 0 &&
	    strcmp(rest, "Z") != 0)
		return -1;
	if ((when = timegm(&tm)) == (time_t)-1)
		return -1;
	when -= off;
	return when <= now ? 0 : (long long)(when - now);
}
