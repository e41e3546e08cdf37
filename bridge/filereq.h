/*
 * Files a call fetches from the sandbox: the file arguments a profile found
 * (policy_ctx.files, e.g. gh --body-file PR.md) are asked of the shim with one
 * FRAME_FILE_REQ each; the shim answers in order with FRAME_FILE_DATA frames and
 * one FRAME_FILE_END per file (docs/PROTOCOL.md). The bytes are stored in the
 * call's scratch directory, in a root-owned "files" directory the tool can read
 * but not change, and the arguments are rewritten to the copies
 * (profile_files_apply). Every count and length from the peer is bounded.
 *
 * Use from the connection (state CONN_FILES, between REQUEST and RUNNING):
 *   fr = filereq_new(scratch, ctx, &cause);
 *   for (i = 0; i < filereq_count(fr); i++) send FILE_REQ filereq_path(fr, i);
 *   on each FILE_DATA / FILE_END frame: filereq_frame(fr, type, buf, len, &msg)
 *     FILEREQ_MORE: wait for more; FILEREQ_DONE: rewrite argv with
 *     filereq_copies(fr) and spawn; FILEREQ_REFUSED: ERROR denied with msg (for
 *     the agent); FILEREQ_BAD: ERROR protocol with msg.
 *   A peer that does not answer within the handshake timeout is a protocol error.
 */
#ifndef SHIMBRIDGE_FILEREQ_H
#define SHIMBRIDGE_FILEREQ_H

#include <stddef.h>
#include <stdint.h>

struct policy_ctx;
struct filereq;

enum filereq_rc {
	FILEREQ_MORE,		/* frame taken; more files or bytes to come */
	FILEREQ_DONE,		/* every file arrived and is stored */
	FILEREQ_REFUSED,	/* the sandbox could not give a file: *msg for the agent */
	FILEREQ_BAD,		/* the peer broke the protocol: *msg says how */
};

/*
 * Prepare to fetch ctx's files into scratch/files (created here, root-owned 0755,
 * copies 0644). Returns NULL and *cause if the directory cannot be made.
 */
struct filereq	*filereq_new(const char *scratch, const struct policy_ctx *ctx, char **cause);
/* How many files to ask for, and the path to put in FILE_REQ number i. */
size_t		 filereq_count(const struct filereq *);
const char	*filereq_path(const struct filereq *, size_t i);
/*
 * Take one client frame (FILE_DATA or FILE_END; any other type is FILEREQ_BAD).
 * On FILEREQ_REFUSED and FILEREQ_BAD, *msg is malloc'd.
 */
enum filereq_rc	 filereq_frame(struct filereq *, uint8_t type, const unsigned char *buf,
		    size_t len, char **msg);
/* Paths of the stored copies, one per file (valid until filereq_free). */
char *const	*filereq_copies(const struct filereq *);
/* Close and free; the copies stay until the scratch directory is removed. */
void		 filereq_free(struct filereq *);

#endif
