/*
 * libFuzzer target for the reading of a push's ref updates (bridge/pushcmd.c
 * pushcmd_parse): the body of POST .../git-receive-pack as the jailed
 * shimbridge-git sends it to the injector, any bytes. On success there are 0 to
 * PUSHCMD_MAX updates, each two lowercase hex names of one length (40 or 64) and a
 * name of 1 to PUSHCMD_REF_MAX bytes without controls, space or DEL, and each
 * "<old> <new> <ref>" occurs in the input; on failure nothing is returned and a
 * reason is. The input is copied to an exact-size buffer so that ASan sees any
 * read past its end. No update at all (git's probe before a large push) is a
 * success with none.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pushcmd.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
fuzz_hex(const char *s, size_t want)
{
	size_t i;

	if (strlen(s) != want)
		abort();
	for (i = 0; i < want; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *buf = malloc(size > 0 ? size : 1);
	struct pushcmd *u = NULL;
	const char *why = NULL;
	char line[PUSHCMD_REF_MAX + 200];
	size_t n = 0, i, j, olen, rlen, k;

	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	if (pushcmd_parse(buf, size, &u, &n, &why) != 0) {
		if (u != NULL || n != 0 || why == NULL)
			abort();
		free(buf);
		return 0;
	}
	if ((u == NULL) != (n == 0) || n > PUSHCMD_MAX)
		abort();
	for (i = 0; i < n; i++) {
		olen = strlen(u[i].old);
		if (olen != 40 && olen != 64)
			abort();
		fuzz_hex(u[i].old, olen);
		fuzz_hex(u[i].new, olen);
		rlen = strlen(u[i].ref);
		if (rlen == 0 || rlen > PUSHCMD_REF_MAX)
			abort();
		for (j = 0; j < rlen; j++) {
			if ((unsigned char)u[i].ref[j] <= ' ' || u[i].ref[j] == 0x7f)
				abort();
		}
		k = (size_t)snprintf(line, sizeof line, "%s %s %s", u[i].old, u[i].new, u[i].ref);
		if (memmem(buf, size, line, k) == NULL)
			abort();
	}
	free(u);
	free(buf);
	return 0;
}
