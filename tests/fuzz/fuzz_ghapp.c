/*
 * libFuzzer target for what the bridge reads from GitHub's App endpoints
 * (bridge/ghapp.c): the access_tokens answer, the installations list and error
 * messages. The first byte picks the owner to look up (so matching is reached);
 * the rest is the answer. Checks: a parsed token is non-empty, bounded and
 * printable, its expiry positive; an error message is printable and bounded.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "ghapp.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const owners[] = { "octo", "Octo", "other", "" };
	struct ghapp_token t;
	char *cause = NULL, *m;
	long long id = 0;
	size_t i;

	if (size < 1)
		return 0;
	if (sodium_init() < 0)
		abort();
	if (ghapp_parse_token(data + 1, size - 1, &t, &cause) == 0) {
		if (t.value == NULL || t.len == 0 || t.len > 1024 || t.expires_at <= 0)
			abort();
		for (i = 0; i < t.len; i++)
			if (t.value[i] <= 0x20 || t.value[i] >= 0x7f)
				abort();
		ghapp_token_clear(&t);
	} else if (cause == NULL || t.value != NULL)
		abort();
	free(cause);
	cause = NULL;
	if (ghapp_parse_installations(data + 1, size - 1, owners[data[0] % 4], &id, &cause) ==
	    0) {
		if (id <= 0)
			abort();
	} else if (cause == NULL)
		abort();
	free(cause);
	if ((m = ghapp_error_message(data + 1, size - 1)) != NULL) {
		if (strlen(m) > 200)
			abort();
		for (i = 0; m[i] != '\0'; i++)
			if ((unsigned char)m[i] < 0x20 || m[i] == 0x7f)
				abort();
		free(m);
	}
	return 0;
}
