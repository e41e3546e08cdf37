/* Frame header codec: the only place that knows the header layout and the caps. */
#include <string.h>

#include "proto.h"

/* Encode a frame header. */
void
frame_put_header(unsigned char hdr[FRAME_HDR], uint8_t type, uint32_t len)
{
	hdr[0] = (unsigned char)(len >> 24);
	hdr[1] = (unsigned char)(len >> 16);
	hdr[2] = (unsigned char)(len >> 8);
	hdr[3] = (unsigned char)len;
	hdr[4] = type;
}

/* The largest payload a frame of this type may carry; 0 for unknown types. */
uint32_t
frame_max_len(uint8_t type)
{
	switch (type) {
	case FRAME_HELLO:
	case FRAME_SIGNAL:
	case FRAME_WINSIZE:
	case FRAME_FILE_END:
		return FRAME_SMALL_MAX;
	case FRAME_FILE_REQ:
		return REQ_MAX_PATH;
	case FRAME_REQUEST:
	case FRAME_ERROR:
	case FRAME_EXIT:
		return FRAME_CTRL_MAX;
	case FRAME_STDIN:
	case FRAME_STDOUT:
	case FRAME_STDERR:
	case FRAME_FILE_DATA:
		return FRAME_DATA_MAX;
	default:
		return 0;
	}
}

/* Decode a header and check it against the caps before anything is read. */
int
frame_parse_header(const unsigned char hdr[FRAME_HDR], uint8_t *type, uint32_t *len,
    const char **cause)
{
	uint32_t n, max;

	n = ((uint32_t)hdr[0] << 24) | ((uint32_t)hdr[1] << 16) |
	    ((uint32_t)hdr[2] << 8) | (uint32_t)hdr[3];
	max = frame_max_len(hdr[4]);
	if (max == 0) {
		*cause = "unknown frame type";
		return -1;
	}
	if (n > max) {
		*cause = "frame too large";
		return -1;
	}
	*type = hdr[4];
	*len = n;
	return 0;
}
