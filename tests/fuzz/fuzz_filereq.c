/*
 * libFuzzer target for the bridge's side of file requests (bridge/filereq.c): the
 * input is the byte stream a hostile shim sends after the bridge asked for files
 * (byte 0 picks how many, 1..PROTO_FILES_MAX). Frames are cut with the real header
 * codec; FILE_DATA / FILE_END (and any other type) go to filereq_frame until it
 * says DONE, REFUSED or BAD. Checked: BAD and REFUSED always come with a message,
 * DONE only after every file ended, no copy is ever larger than the caps and the
 * bytes of all copies never exceed the per-request total; ASan catches the rest.
 */
#include <sys/stat.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "filereq.h"
#include "policy.h"
#include "proto.h"
#include "spawn.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char tmpl[] = "/tmp/fuzz_filereq.XXXXXX", *dir, *cause = NULL, *msg = NULL;
	struct policy_ctx ctx;
	struct filereq *fr;
	const char *why;
	enum filereq_rc rc = FILEREQ_MORE;
	size_t n, i, off = 1, total = 0;
	struct stat st;

	if (size < 1)
		return 0;
	if ((dir = mkdtemp(tmpl)) == NULL)
		abort();
	memset(&ctx, 0, sizeof ctx);
	n = 1 + data[0] % PROTO_FILES_MAX;
	for (i = 0; i < n; i++) {
		ctx.files[i].path = strdup("f");
		ctx.files[i].flag = "--body-file";
	}
	ctx.nfiles = n;
	if ((fr = filereq_new(dir, &ctx, &cause)) == NULL)
		abort();
	while (rc == FILEREQ_MORE && size - off >= FRAME_HDR) {
		uint8_t type;
		uint32_t len;

		if (frame_parse_header(data + off, &type, &len, &why) != 0)
			break;	/* the connection would be closed before filereq sees it */
		if (size - off - FRAME_HDR < len)
			break;
		rc = filereq_frame(fr, type, data + off + FRAME_HDR, len, &msg);
		off += FRAME_HDR + len;
		if ((rc == FILEREQ_BAD || rc == FILEREQ_REFUSED) != (msg != NULL))
			abort();
		free(msg);
		msg = NULL;
	}
	for (i = 0; i < n; i++) {
		if (stat(filereq_copies(fr)[i], &st) == 0) {
			if (st.st_size > PROTO_FILE_MAX)
				abort();
			total += (size_t)st.st_size;
		} else if (rc == FILEREQ_DONE)
			abort();	/* DONE means every copy exists */
	}
	if (total > PROTO_FILES_TOTAL_MAX)
		abort();
	filereq_free(fr);
	policy_ctx_free(&ctx);
	spawn_rmtree(dir);
	return 0;
}
