/*
 * libFuzzer target for the frame header codec (common/frame.c). The input is read
 * as a byte stream of frames, the way the bridge and the shim read the socket:
 * parse a header, check the result against the caps in proto.h, skip the payload
 * it announces, repeat. Every header that parses must re-encode to the same five
 * bytes, and every header built by frame_put_header must parse back (or be
 * refused exactly when its type is unknown or its length over the cap).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* The caps as the protocol header states them, written out independently. */
static uint32_t
fuzz_cap(uint8_t type)
{
	switch (type) {
	case FRAME_HELLO: case FRAME_SIGNAL: case FRAME_WINSIZE: case FRAME_FILE_END:
		return FRAME_SMALL_MAX;
	case FRAME_REQUEST: case FRAME_ERROR: case FRAME_EXIT:
		return FRAME_CTRL_MAX;
	case FRAME_FILE_REQ:
		return REQ_MAX_PATH;
	case FRAME_STDIN: case FRAME_STDOUT: case FRAME_STDERR: case FRAME_FILE_DATA:
		return FRAME_DATA_MAX;
	}
	return 0;
}

/* Parse one header and check everything that must hold about the answer. */
static int
fuzz_header(const unsigned char hdr[FRAME_HDR], uint32_t *lenp)
{
	unsigned char	 again[FRAME_HDR];
	const char	*cause = NULL;
	uint32_t	 len = 0xdeadbeef, want;
	uint8_t		 type = 0xee;
	int		 rc;

	want = ((uint32_t)hdr[0] << 24) | ((uint32_t)hdr[1] << 16) |
	    ((uint32_t)hdr[2] << 8) | hdr[3];
	rc = frame_parse_header(hdr, &type, &len, &cause);
	if (frame_max_len(hdr[4]) != fuzz_cap(hdr[4]))
		abort();
	if (rc != 0) {
		/* Refused: only for an unknown type or a length over its cap. */
		if (rc != -1 || cause == NULL || cause[0] == '\0')
			abort();
		if (fuzz_cap(hdr[4]) != 0 && want <= fuzz_cap(hdr[4]))
			abort();
		return -1;
	}
	if (cause != NULL || type != hdr[4] || len != want)
		abort();
	if (fuzz_cap(type) == 0 || len > fuzz_cap(type) || len > frame_max_len(type))
		abort();
	frame_put_header(again, type, len);
	if (memcmp(again, hdr, FRAME_HDR) != 0)
		abort();
	*lenp = len;
	return 0;
}

/* Build a header from arbitrary (type, len) and parse it back. */
static void
fuzz_roundtrip(uint8_t type, uint32_t len)
{
	unsigned char	 hdr[FRAME_HDR];
	const char	*cause = NULL;
	uint32_t	 got = 0;
	uint8_t		 t = 0;
	int		 ok;

	frame_put_header(hdr, type, len);
	if (hdr[4] != type || hdr[0] != (len >> 24) || hdr[3] != (len & 0xff))
		abort();
	ok = fuzz_cap(type) != 0 && len <= fuzz_cap(type);
	if ((frame_parse_header(hdr, &t, &got, &cause) == 0) != ok)
		abort();
	if (ok && (t != type || got != len))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t		 off = 0, i;
	uint32_t	 len;

	/* The stream: header, payload, header, ... until a refusal or the end. */
	while (size - off >= FRAME_HDR) {
		if (fuzz_header(data + off, &len) != 0)
			break;
		off += FRAME_HDR;
		if (len > size - off)
			break;	/* truncated payload: a reader would wait for more */
		off += len;
	}
	/* Every 5-byte window as a (type, len) pair through the encoder. */
	for (i = 0; i + FRAME_HDR <= size && i < 64; i++) {
		uint32_t n = ((uint32_t)data[i] << 24) | ((uint32_t)data[i + 1] << 16) |
		    ((uint32_t)data[i + 2] << 8) | data[i + 3];

		fuzz_roundtrip(data[i + 4], n);
		fuzz_roundtrip(data[i + 4], n & 0x3ffff);	/* near the caps */
	}
	return 0;
}
