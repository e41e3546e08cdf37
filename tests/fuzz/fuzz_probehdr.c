/*
 * libFuzzer target for what shimbridge check reads from an upstream's answer
 * (admin/probehdr.c): the input is split at '\n' into header lines, as libcurl
 * hands them over, up to an empty line; the rest is the body, fed in pieces.
 * Then the expiry date found is read. Checks: values are bounded and
 * NUL-terminated, the body keeps at most 4 KiB, and an expiry that reads as
 * known is consistent with a second reading at another time.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../admin/admin.h"	/* not on the fuzz build's -I path */

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct probe_result r;
	const char *p = (const char *)data, *end = p + size, *nl;
	long long a, b;
	size_t piece;

	memset(&r, 0, sizeof r);
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		nl = nl != NULL ? nl + 1 : end;
		if (nl - p <= 2 && (*p == '\n' || *p == '\r')) {
			p = nl;
			break;
		}
		probehdr_line(&r, p, (size_t)(nl - p));
		p = nl;
	}
	for (piece = 1; p < end; piece = piece * 2 + 1) {
		size_t n = piece < (size_t)(end - p) ? piece : (size_t)(end - p);

		probehdr_body(&r, p, n);
		p += n;
	}
	if (r.scopes != NULL && strlen(r.scopes) > 1024)
		abort();
	if (r.expires != NULL && strlen(r.expires) > 1024)
		abort();
	if (r.body != NULL && strlen(r.body) > 4096)
		abort();
	a = probehdr_expiry(r.expires, (time_t)1700000000);
	b = probehdr_expiry(r.expires, (time_t)1700000100);
	if ((a < 0) != (b < 0))
		abort();
	if (a > 100 && b != a - 100)
		abort();
	free(r.scopes);
	free(r.expires);
	free(r.body);
	return 0;
}
