/*
 * libFuzzer target for the parser of shimbridge-git's "T <phase> <ns>" records
 * (bridge/profile-git.c profile_git_phase; the runner writes them to the refusal
 * pipe, common/gitcontract.h). The input is the record's text after "T " (any
 * bytes, NULs included, read through the length only). On success the name is one
 * of the GITC_PHASE_* strings, the input is exactly NAME, a space and 1-19 decimal
 * digits, and their value is *ns (checked by re-printing it with its leading
 * zeros); on failure *name is NULL and *ns 0. Inputs are copied to an exact-size
 * buffer so that ASan sees any read past the length.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gitcontract.h"
#include "profile-git.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = { GITC_PHASE_START, GITC_PHASE_MIRROR,
	    GITC_PHASE_HOOK, GITC_PHASE_POLICY, GITC_PHASE_UPSTREAM, GITC_PHASE_END };
	const char *name = (const char *)1;
	unsigned long long ns = 1;
	char *in, re[64];
	size_t i, n, digits;
	int known = 0;

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
