/*
 * libFuzzer target for the audit chain reader (bridge/auditchain.c), which
 * `shimbridge audit verify` runs on log files that may have been tampered with
 * and the daemon runs on its log's tail at start: the input is split into lines,
 * each is parsed and fed to the verifier, and the whole input is read back as a
 * file tail. Checks: a parsed chained record's fields are consistent, a JSON
 * object sealed by the writer parses back with the seq it was given, and the
 * verifier's kind and explanation agree.
 */
#include <sys/mman.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "auditchain.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned char zero[AUDITCHAIN_HASH];
	struct auditchain_verify v;
	struct auditchain_rec r, r2;
	const char *p = (const char *)data, *end = p + size, *nl;
	unsigned char h[AUDITCHAIN_HASH];
	unsigned long long seq;
	char *cause = NULL, *sealed;
	size_t len, slen;
	int broken = 0, torn, fd;

	if (sodium_init() < 0)
		abort();
	auditchain_verify_init(&v, NULL);
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		len = (size_t)((nl != NULL ? nl : end) - p);
		if (auditchain_parse(p, len, &r, &cause) == 0) {
			if (cause != NULL)
				abort();
			if (r.has_sig && (!r.chained || !r.checkpoint || r.signed_len >= len))
				abort();
			if (r.genesis && (!r.checkpoint ||
			    memcmp(r.prev, zero, sizeof zero) != 0))
				abort();
			if (!r.chained && len > 2 && p[0] == '{' && p[len - 1] == '}' &&
			    auditchain_seal(p, len, 7, zero, &sealed, &slen) == 0) {
				if (auditchain_parse(sealed, slen, &r2, &cause) == 0 &&
				    (!r2.chained || r2.seq != 7))
					abort();
				free(cause);
				cause = NULL;
				free(sealed);
			}
		} else {
			if (cause == NULL)
				abort();
			free(cause);
			cause = NULL;
		}
		if (!broken && auditchain_verify_line(&v, p, len, 1) != 0) {
			if (v.kind == AUDITCHAIN_OK || v.why == NULL)
				abort();
			broken = 1;
		}
		p = nl != NULL ? nl + 1 : end;
	}
	if (!broken && v.kind != AUDITCHAIN_OK)
		abort();
	auditchain_verify_free(&v);
	if ((fd = memfd_create("tail", 0)) >= 0) {
		if (write(fd, data, size) == (ssize_t)size &&
		    auditchain_tail(fd, &seq, h, &torn) == 1 && seq == 0)
			abort();
		close(fd);
	}
	return 0;
}
