/*
 * The shimbridge wire protocol: length-prefixed frames on a SOCK_STREAM Unix socket.
 * docs/PROTOCOL.md is the prose half of this header; change both together and bump
 * PROTO_VERSION whenever a message changes.
 */
#ifndef SHIMBRIDGE_PROTO_H
#define SHIMBRIDGE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION		2

/* Frame header: 4-byte big-endian payload length, then 1 byte type. */
#define FRAME_HDR		5

enum frame_type {
	FRAME_HELLO	= 0x01,	/* JSON, both ways: version check */
	FRAME_REQUEST	= 0x02,	/* JSON, client -> bridge: what to run */
	FRAME_ERROR	= 0x03,	/* JSON, bridge -> client: refusal or failure; final */
	FRAME_EXIT	= 0x04,	/* JSON, bridge -> client: child's end; final */
	FRAME_FILE_REQ	= 0x05,	/* path bytes, bridge -> client: send me this file */
	FRAME_STDIN	= 0x10,	/* data, client -> bridge; empty payload = EOF */
	FRAME_STDOUT	= 0x11,	/* data, bridge -> client; empty payload = EOF */
	FRAME_STDERR	= 0x12,	/* data, bridge -> client; empty payload = EOF */
	FRAME_FILE_DATA	= 0x13,	/* data, client -> bridge: bytes of the oldest unanswered FILE_REQ */
	FRAME_FILE_END	= 0x14,	/* JSON, client -> bridge: that file is complete, or why not */
	FRAME_SIGNAL	= 0x20,	/* JSON, client -> bridge: {"signal":"INT"} */
	FRAME_WINSIZE	= 0x21,	/* JSON, client -> bridge: {"rows":N,"cols":N} */
};

/* Hard caps. A peer exceeding any of them gets FRAME_ERROR "protocol" and is closed. */
#define FRAME_DATA_MAX		(64 * 1024)	/* payload of a data frame */
#define FRAME_CTRL_MAX		(256 * 1024)	/* payload of a JSON frame */
#define FRAME_SMALL_MAX		1024		/* HELLO, SIGNAL, WINSIZE payloads */
#define REQ_MAX_ARGS		1024		/* argv entries after the tool name */
#define REQ_MAX_ARG_BYTES	(128 * 1024)	/* sum of argv string lengths */
#define REQ_MAX_ENV		64		/* forwarded environment variables */
#define REQ_MAX_ENV_BYTES	(16 * 1024)	/* sum of name=value lengths */
#define REQ_MAX_PATH		4096		/* cwd, urls */
#define REQ_MAX_NAME		64		/* tool, session, secret names */

/*
 * File requests (docs/PROTOCOL.md "FILE_REQ"): the bridge asks for at most
 * PROTO_FILES_MAX files per request, each path 1..REQ_MAX_PATH bytes without NUL;
 * the client answers in order with FILE_DATA frames and one FILE_END each.
 */
#define PROTO_FILES_MAX		8		/* FILE_REQ frames per request */
#define PROTO_FILE_MAX		(1024 * 1024)	/* bytes of one file */
#define PROTO_FILES_TOTAL_MAX	(4 * 1024 * 1024)	/* bytes of all files of a request */
/* FILE_END "status" values: the client's answer for one file. */
#define FILE_OK			"ok"		/* complete; "size" gives its length */
#define FILE_NOT_FOUND		"not-found"	/* no such file (or a directory on the way is missing) */
#define FILE_DENIED		"denied"	/* the sandbox user may not read it */
#define FILE_NOT_REGULAR	"not-regular"	/* a directory, device, FIFO or socket */
#define FILE_TOO_LARGE		"too-large"	/* over PROTO_FILE_MAX (or the request's total) */
#define FILE_ERROR		"error"		/* any other failure */

/* Error codes carried in FRAME_ERROR {"code":...}; the shim maps each to an exit code. */
#define ERR_PROTOCOL		"protocol"	/* malformed frame or version mismatch */
#define ERR_DENIED		"denied"	/* policy refused the request */
#define ERR_UNKNOWN_TOOL	"unknown-tool"	/* tool not configured or not granted */
#define ERR_UNAUTHORIZED	"unauthorized"	/* peer uid has no session */
#define ERR_BUSY		"busy"		/* connection or concurrency limit */
#define ERR_UNAVAILABLE		"unavailable"	/* a secret or tool could not be prepared */
#define ERR_TIMEOUT		"timeout"	/* child killed after its wall-clock limit */
#define ERR_OUTPUT_LIMIT	"output-limit"	/* child killed after its output cap */
#define ERR_INTERNAL		"internal"	/* bridge-side failure */

/* Exit codes of the shim for its own failures (child statuses pass through). */
#define EXIT_OUTPUT_LIMIT	118
#define EXIT_UNAVAILABLE	119
#define EXIT_UNAUTHORIZED	120
#define EXIT_BUSY		121
#define EXIT_UNREACHABLE	122
#define EXIT_CONN_LOST		123
#define EXIT_TIMEOUT		124
#define EXIT_PROTOCOL		125
#define EXIT_DENIED		126
#define EXIT_UNKNOWN_TOOL	127

/* Environment variables the shim forwards (exact names, plus every LC_* name). */
#define PROTO_ENV_ALLOW		"TERM", "LANG", "LANGUAGE", "NO_COLOR", "CLICOLOR", \
				"CLICOLOR_FORCE", "COLUMNS", "LINES", "TZ"

void	 frame_put_header(unsigned char hdr[FRAME_HDR], uint8_t type, uint32_t len);
/* Parse and check a header: 0 if the type is known and len within its cap, else -1 and *cause. */
int	 frame_parse_header(const unsigned char hdr[FRAME_HDR], uint8_t *type, uint32_t *len,
	     const char **cause);
/* The largest payload allowed for a frame type (0 for unknown types). */
uint32_t frame_max_len(uint8_t type);

/* Map an error code to the shim's exit code (EXIT_PROTOCOL for unknown codes). */
int	 proto_error_exit(const char *code);
/* Portable signal names ("INT") <-> local numbers; NULL / -1 when unknown. */
const char *proto_signame(int signo);
int	 proto_signum(const char *name);
/* Whether an environment variable name may be forwarded by the shim. */
int	 proto_env_allowed(const char *name, size_t len);

#endif
