/*
 * libFuzzer target for the parser of upstream's protocol v0 ref advertisement
 * (bridge/profile-git.c profile_git_refs): the body of GET
 * .../info/refs?service=git-upload-pack as upstream sends it, through the injector's
 * prefetch, turned into the SHIMBRIDGE_UPSTREAM_REFS message for shimbridge-git.
 * The input is the body (any bytes). On success the message is at most
 * GITC_REFS_MAX bytes, "refs\n", then lines "<40 or 64 lowercase hex> refs/heads/..."
 * or "... refs/tags/..." of printable bytes without spaces in the name and never a
 * peeled "^{}" entry, then "end\n"; each of its lines occurs in the input. On
 * failure nothing is allocated. The same input goes through profile_git_head
 * (upstream's default branch, from the first ref's symref capability). The input
 * is copied to an exact-size buffer so
 * that ASan sees any read past its end.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gitcontract.h"
#include "profile-git.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* One "<oid> <ref>" line of the message (without its newline). */
static void
fuzz_line(const char *l, size_t n, const unsigned char *in, size_t inlen)
{
	const char *sp = memchr(l, ' ', n);
	size_t oid, i;

	if (sp == NULL)
		abort();
	oid = (size_t)(sp - l);
	if (oid != 40 && oid != 64)
		abort();
	for (i = 0; i < oid; i++) {
		if (!((l[i] >= '0' && l[i] <= '9') || (l[i] >= 'a' && l[i] <= 'f')))
			abort();
	}
	sp++;
	n -= oid + 1;
	if (!(n > 11 && memcmp(sp, "refs/heads/", 11) == 0) &&
	    !(n > 10 && memcmp(sp, "refs/tags/", 10) == 0))
		abort();
	if (n >= 3 && memcmp(sp + n - 3, "^{}", 3) == 0)
		abort();
	for (i = 0; i < n; i++) {
		if ((unsigned char)sp[i] <= 0x20 || sp[i] == 0x7f)
			abort();
	}
	if (memmem(in, inlen, l, oid + 1 + n) == NULL)
		abort();
}

/*
 * profile_git_head on the same input: NULL, or a branch name of printable bytes
 * without spaces, at most GITC_ASK_LINE_MAX, that follows
 * "symref=HEAD:refs/heads/" in the input.
 */
static void
fuzz_head(const unsigned char *in, size_t inlen)
{
	char *h = profile_git_head(in, inlen), cap[GITC_ASK_LINE_MAX + 32];
	size_t n, i;

	if (h == NULL)
		return;
	n = strlen(h);
	if (n == 0 || n > GITC_ASK_LINE_MAX)
		abort();
	for (i = 0; i < n; i++) {
		if ((unsigned char)h[i] <= 0x20 || h[i] == 0x7f)
			abort();
	}
	n = (size_t)snprintf(cap, sizeof cap, "symref=HEAD:refs/heads/%s", h);
	if (memmem(in, inlen, cap, n) == NULL)
		abort();
	free(h);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *in;
	char *out = (char *)1, *p, *nl;
	size_t outlen = 1;

	in = malloc(size > 0 ? size : 1);
	if (in == NULL)
		return 0;
	memcpy(in, data, size);
	fuzz_head(in, size);
	if (profile_git_refs(in, size, &out, &outlen) != 0) {
		if (out != NULL || outlen != 0)
			abort();
		free(in);
		return 0;
	}
	if (out == NULL || outlen < 9 || outlen > GITC_REFS_MAX ||
	    memcmp(out, "refs\n", 5) != 0 || memcmp(out + outlen - 4, "end\n", 4) != 0)
		abort();
	for (p = out + 5; p < out + outlen - 4; p = nl + 1) {
		if ((nl = memchr(p, '\n', (size_t)(out + outlen - 4 - p))) == NULL)
			abort();
		fuzz_line(p, (size_t)(nl - p), in, size);
	}
	free(out);
	free(in);
	return 0;
}
