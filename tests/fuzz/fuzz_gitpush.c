/*
 * libFuzzer target for the parsers of shimbridge-git's own push and warming fetch
 * requests (gitserve/gitpush.c): upstream's receive-pack ref advertisement (the body
 * of GET .../info/refs?service=git-receive-pack), its answer to the POST, with and
 * without side-band-64k, and upload-pack's answer to the warming fetch (ACK/NAK
 * lines, then the side-band pack). The input is either body (any bytes). On success the
 * advertisement's capabilities are a NUL-terminated string of what the first ref line
 * holds, and every object name is 40 or 64 lowercase hex digits; the report's counts
 * agree with its lists. The input is copied to an exact-size buffer so that ASan sees
 * any read past its end.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../gitserve/gitserve.h"	/* not on the fuzz build's -I path */

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Lines ("\n"-terminated) in a gitbuf. */
static size_t
fuzz_lines(const struct gitbuf *b)
{
	size_t	i, n = 0;

	for (i = 0; i < b->len; i++)
		n += b->data[i] == '\n';
	return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gitpush_adv	 adv;
	struct gitpush_result		 res;
	struct gitbuf			 pack;
	char				*buf, *cause = NULL;
	size_t				 i, j;
	int				 sb;

	buf = malloc(size == 0 ? 1 : size);
	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	if (gitpush_parse_adv(buf, size, &adv, &cause) == 0) {
		if (cause != NULL || adv.n > GITPUSH_ADV_MAX ||
		    memchr(adv.caps, '\0', sizeof adv.caps) == NULL ||
		    (adv.hexlen != 40 && adv.hexlen != 64))
			abort();
		for (i = 0; i < adv.n; i++) {
			if (strlen(adv.oids[i]) != adv.hexlen)
				abort();
			for (j = 0; j < adv.hexlen; j++) {
				if (!((adv.oids[i][j] >= '0' && adv.oids[i][j] <= '9') ||
				    (adv.oids[i][j] >= 'a' && adv.oids[i][j] <= 'f')))
					abort();
			}
		}
	} else if (cause == NULL)
		abort();
	free(cause);
	gitbuf_init(&pack, 1024 * 1024);
	if (gitpush_parse_fetch(buf, size, &pack) == 0 && pack.len > size)
		abort();
	gitbuf_free(&pack);
	for (sb = 0; sb < 2; sb++) {
		gitpush_result_init(&res);
		if (gitpush_parse_result(buf, size, sb, &res) == 0) {
			if (fuzz_lines(&res.oks) != res.ok || fuzz_lines(&res.ngs) != res.ng ||
			    (res.unpack_ok && !res.unpack_seen))
				abort();
		}
		gitpush_result_free(&res);
	}
	free(buf);
	return 0;
}
