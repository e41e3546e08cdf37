/* Fetching a call's file arguments from the sandbox (see filereq.h). */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "filereq.h"
#include "policy.h"
#include "proto.h"
#include "util.h"

struct filereq {
	const struct policy_ctx	 *ctx;		/* the files asked for (not owned) */
	int			  dirfd;	/* scratch/files */
	char			**copies;	/* scratch/files/N, one per file */
	size_t			  n;		/* files in all */
	size_t			  cur;		/* the file being answered */
	int			  fd;		/* its copy, or -1 before its first byte */
	size_t			  got;		/* its bytes so far */
	size_t			  total;	/* bytes of all files so far */
};

/* Make scratch/files, root-owned and read-only to the tool, and open it. */
static int
filereq_mkdir(const char *scratch, char **cause)
{
	struct stat st;
	char *dir;
	int fd;

	xasprintf(&dir, "%s/files", scratch);
	if (mkdir(dir, 0755) != 0) {
		xasprintf(cause, "mkdir %s: %s", dir, strerror(errno));
		free(dir);
		return -1;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
		/* Someone else's directory was put in its place: do not write there. */
		xasprintf(cause, "%s is not the directory just made", dir);
		if (fd >= 0)
			close(fd);
		free(dir);
		return -1;
	}
	if (fchmod(fd, 0755) != 0) {	/* whatever the umask */
		xasprintf(cause, "chmod %s: %s", dir, strerror(errno));
		close(fd);
		free(dir);
		return -1;
	}
	free(dir);
	return fd;
}

/* Prepare a call's file fetches. */
struct filereq *
filereq_new(const char *scratch, const struct policy_ctx *ctx, char **cause)
{
	struct filereq *fr;
	size_t i;

	fr = xcalloc(1, sizeof *fr);
	fr->ctx = ctx;
	fr->fd = -1;
	fr->n = ctx->nfiles;
	if ((fr->dirfd = filereq_mkdir(scratch, cause)) < 0) {
		free(fr);
		return NULL;
	}
	fr->copies = xcalloc(fr->n + 1, sizeof *fr->copies);
	for (i = 0; i < fr->n; i++)
		xasprintf(&fr->copies[i], "%s/files/%zu", scratch, i);
	return fr;
}

/* Number of files to ask for. */
size_t
filereq_count(const struct filereq *fr)
{
	return fr->n;
}

/* The agent's path for file i, sent as FILE_REQ's payload. */
const char *
filereq_path(const struct filereq *fr, size_t i)
{
	return fr->ctx->files[i].path;
}

/* Paths of the copies. */
char *const *
filereq_copies(const struct filereq *fr)
{
	return fr->copies;
}

/* Create the current file's copy. */
static int
filereq_open(struct filereq *fr, char **msg)
{
	char name[32];

	snprintf(name, sizeof name, "%zu", fr->cur);
	fr->fd = openat(fr->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    0644);
	if (fr->fd < 0) {
		xasprintf(msg, "the bridge could not store a file argument (%s); nothing was "
		    "run. Tell the operator.", strerror(errno));
		return -1;
	}
	return 0;
}

/* Write bytes to the current copy. */
static int
filereq_write(struct filereq *fr, const unsigned char *buf, size_t len, char **msg)
{
	ssize_t n;

	while (len > 0) {
		n = write(fr->fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			xasprintf(msg, "the bridge could not store a file argument (%s); "
			    "nothing was run. Tell the operator.", strerror(errno));
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The agent-facing paragraph for a file the sandbox could not give. */
static char *
filereq_refusal(const struct filereq *fr, const char *status)
{
	const struct policy_file *f = &fr->ctx->files[fr->cur];
	const char *why;
	char *msg;

	if (strcmp(status, FILE_NOT_FOUND) == 0)
		why = "there is no such file (a relative path is taken from the directory "
		    "you ran the command in)";
	else if (strcmp(status, FILE_DENIED) == 0)
		why = "you may not read it";
	else if (strcmp(status, FILE_NOT_REGULAR) == 0)
		why = "it is not a regular file (directories, devices, FIFOs and sockets are "
		    "not sent)";
	else if (strcmp(status, FILE_TOO_LARGE) == 0)
		why = "it is larger than the bridge takes (1 MiB per file, 4 MiB per command)";
	else
		why = "it could not be read";
	xasprintf(&msg, "%s %.200s: the file is read in this sandbox and sent to the "
	    "bridge, but %s. Nothing was run; fix the path or the file and retry.",
	    f->flag, f->path, why);
	return msg;
}

/* A FILE_END frame: check it against what arrived and move to the next file. */
static enum filereq_rc
filereq_end(struct filereq *fr, const unsigned char *buf, size_t len, char **msg)
{
	static const char *const statuses[] = { FILE_OK, FILE_NOT_FOUND, FILE_DENIED,
	    FILE_NOT_REGULAR, FILE_TOO_LARGE, FILE_ERROR };
	json_t *j, *st, *sz;
	const char *status = NULL, *k;
	json_t *v;
	size_t i;
	enum filereq_rc rc = FILEREQ_BAD;

	j = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, NULL);
	if (j == NULL || !json_is_object(j)) {
		*msg = xstrdup("FILE_END is not a JSON object");
		goto out;
	}
	json_object_foreach(j, k, v) {
		if (strcmp(k, "status") != 0 && strcmp(k, "size") != 0) {
			*msg = xstrdup("FILE_END has an unknown field");
			goto out;
		}
	}
	st = json_object_get(j, "status");
	for (i = 0; json_is_string(st) && i < sizeof statuses / sizeof statuses[0]; i++) {
		if (strcmp(json_string_value(st), statuses[i]) == 0)
			status = statuses[i];
	}
	if (status == NULL) {
		*msg = xstrdup("FILE_END has no known status");
		goto out;
	}
	sz = json_object_get(j, "size");
	if (strcmp(status, FILE_OK) != 0) {
		if (sz != NULL || fr->got != 0) {
			*msg = xstrdup("FILE_END refuses a file it sent bytes of");
			goto out;
		}
		*msg = filereq_refusal(fr, status);
		rc = FILEREQ_REFUSED;
		goto out;
	}
	if (!json_is_integer(sz) || json_integer_value(sz) < 0 ||
	    (uint64_t)json_integer_value(sz) != (uint64_t)fr->got) {
		*msg = xstrdup("FILE_END size does not match the bytes sent");
		goto out;
	}
	if (fr->fd < 0 && filereq_open(fr, msg) != 0)	/* an empty file */
		goto out;
	close(fr->fd);
	fr->fd = -1;
	fr->got = 0;
	rc = ++fr->cur == fr->n ? FILEREQ_DONE : FILEREQ_MORE;
out:
	json_decref(j);
	return rc;
}

/* Take one client frame of the file exchange. */
enum filereq_rc
filereq_frame(struct filereq *fr, uint8_t type, const unsigned char *buf, size_t len,
    char **msg)
{
	*msg = NULL;
	if (fr->cur >= fr->n) {
		*msg = xstrdup("a file frame after the last file");
		return FILEREQ_BAD;
	}
	if (type == FRAME_FILE_END)
		return filereq_end(fr, buf, len, msg);
	if (type != FRAME_FILE_DATA) {
		*msg = xstrdup("expected FILE_DATA or FILE_END");
		return FILEREQ_BAD;
	}
	if (len > FRAME_DATA_MAX || fr->got + len > PROTO_FILE_MAX ||
	    fr->total + len > PROTO_FILES_TOTAL_MAX) {
		*msg = xstrdup("a file larger than the protocol allows");
		return FILEREQ_BAD;
	}
	if (len == 0)
		return FILEREQ_MORE;
	if (fr->fd < 0 && filereq_open(fr, msg) != 0)
		return FILEREQ_REFUSED;
	if (filereq_write(fr, buf, len, msg) != 0)
		return FILEREQ_REFUSED;
	fr->got += len;
	fr->total += len;
	return FILEREQ_MORE;
}

/* Free the state; the copies stay in the scratch directory. */
void
filereq_free(struct filereq *fr)
{
	size_t i;

	if (fr == NULL)
		return;
	if (fr->fd >= 0)
		close(fr->fd);
	if (fr->dirfd >= 0)
		close(fr->dirfd);
	for (i = 0; i < fr->n; i++)
		free(fr->copies[i]);
	free(fr->copies);
	free(fr);
}
