/*
 * libFuzzer target for the parsers of shimbridge-git's records on the refusal
 * channel (common/gitcontract.h; the runner writes them): "T <phase> <ns>"
 * (bridge/profile-git.c profile_git_phase) and "A <kind> <old> <new> <ref>"
 * (profile_git_ask_parse). An input that begins with "A " is the text of an "A"
 * record after those two bytes; any other input is the text of a "T" record
 * after "T " (any bytes, NULs included, read through the length only).
 *
 * T: on success the name is one of the GITC_PHASE_* strings, the input is exactly
 * NAME, a space and 1-19 decimal digits, and their value is *ns (checked by
 * re-printing it with its leading zeros); on failure *name is NULL and *ns 0.
 * A: on success the kind is one of the GITC_ASK_* words and agrees with the
 * object names (40 or 64 lowercase hex digits each, the same length), the branch
 * is printable ASCII without spaces, and printing the update again gives back
 * exactly the input; on failure the update is all zeros.
 * Inputs are copied to an exact-size buffer so that ASan sees any read past the
 * length.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gitcontract.h"
#include "profile-git.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Whether s is n lowercase hex digits. */
static int
hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	}
	return 1;
}

/* An "A" record's text (see above). */
static void
ask(const char *in, size_t size)
{
	static const char *const kinds[] = { GITC_ASK_UPDATE, GITC_ASK_CREATE,
	    GITC_ASK_FORCE, GITC_ASK_DELETE };
	struct profile_git_update u;
	const unsigned char *z;
	char *re;
	size_t i, hl, bl;
	int known = 0, n, oz, nz;

	if (profile_git_ask_parse(in, size, &u) != 0) {
		z = (const unsigned char *)&u;
		for (i = 0; i < sizeof u; i++) {
			if (z[i] != 0)
				abort();
		}
		return;
	}
	for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		known |= strcmp(u.kind, kinds[i]) == 0;
	hl = strlen(u.old);
	bl = strlen(u.branch);
	if (!known || (hl != 40 && hl != 64) || strlen(u.new) != hl || !hex(u.old, hl) ||
	    !hex(u.new, hl) || bl == 0 || size > GITC_ASK_LINE_MAX)
		abort();
	for (i = 0; i < bl; i++) {
		if ((unsigned char)u.branch[i] <= 0x20 || (unsigned char)u.branch[i] >= 0x7f)
			abort();
	}
	oz = strspn(u.old, "0") == hl;
	nz = strspn(u.new, "0") == hl;
	if ((oz && nz) || oz != (strcmp(u.kind, GITC_ASK_CREATE) == 0) ||
	    nz != (strcmp(u.kind, GITC_ASK_DELETE) == 0))
		abort();
	n = asprintf(&re, "%s %s %s refs/heads/%s", u.kind, u.old, u.new, u.branch);
	if (n < 0)
		abort();
	if ((size_t)n != size || memcmp(re, in, size) != 0)
		abort();
	free(re);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = { GITC_PHASE_START, GITC_PHASE_GC, GITC_PHASE_MIRROR,
	    GITC_PHASE_HOOK, GITC_PHASE_POLICY, GITC_PHASE_APPROVED, GITC_PHASE_UPSTREAM,
	    GITC_PHASE_END, GITC_PHASE_WARM };
	const char *name = (const char *)1;
	unsigned long long ns = 1;
	char *in, re[64];
	size_t i, n, digits;
	int known = 0;

	if (size >= 2 && data[0] == 'A' && data[1] == ' ') {
		in = malloc(size - 2 > 0 ? size - 2 : 1);
		if (in == NULL)
			return 0;
		memcpy(in, data + 2, size - 2);
		ask(in, size - 2);
		free(in);
		return 0;
	}
	in = malloc(size > 0 ? size : 1);
	if (in == NULL)
		return 0;
	memcpy(in, data, size);
	if (profile_git_phase(in, size, &name, &ns) != 0) {
		if (name != NULL || ns != 0)
			abort();
		free(in);
		return 0;
	}
	for (i = 0; i < sizeof names / sizeof names[0]; i++)
		known |= strcmp(name, names[i]) == 0;
	if (!known)
		abort();
	n = strlen(name);
	digits = size - n - 1;
	if (size < n + 2 || memcmp(in, name, n) != 0 || in[n] != ' ' || digits > 19)
		abort();
	for (i = n + 1; i < size; i++) {
		if (in[i] < '0' || in[i] > '9')
			abort();
	}
	snprintf(re, sizeof re, "%0*llu", (int)digits, ns);
	if (strlen(re) != digits || memcmp(re, in + n + 1, digits) != 0)
		abort();
	free(in);
	return 0;
}
