/* Audit log writer. */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "audit.h"
#include "auditchain.h"
#include "log.h"
#include "redact.h"
#include "util.h"

static int audit_fd = -1;
static int audit_to_syslog;
static char *audit_path;		/* of the open file, for checkpoints */
static int audit_opened;		/* the first open writes "start", later ones "reopen" */
/* The chain: the last record written (auditchain.h); in memory while the daemon runs. */
static unsigned long long audit_seq;
static unsigned char audit_last[AUDITCHAIN_HASH];
static int audit_chained;
/* The checkpoint signing key (guarded memory) and its public half, or NULL. */
static unsigned char *audit_sk;
static unsigned char audit_pk[AUDITCHAIN_PK];
/* Periodic checkpoints: interval, last one, and whether records came since. */
static int audit_every;
static time_t audit_last_cp;
static int audit_dirty;

/* Append one line (newline added); 0 when all of it was written. */
static int
audit_append(const char *line, size_t len)
{
	char *buf = xmalloc(len + 1);
	size_t off = 0;
	ssize_t n;
	int rc = 0;

	memcpy(buf, line, len);
	buf[len++] = '\n';
	while (off < len) {
		n = write(audit_fd, buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			log_warnx("audit: write failed: %s", strerror(errno));
			rc = -1;
			break;
		}
		off += (size_t)n;
	}
	free(buf);
	return rc;
}

/*
 * Seal a record's text with the chain members (signing it when it is a
 * checkpoint and a key is loaded), send it to syslog, append it, and advance the
 * chain only when it was written whole, so that a lost record leaves no gap.
 */
static void
audit_emit(const char *text, int checkpoint)
{
	char *line = NULL;
	size_t len;

	if (auditchain_seal(text, strlen(text), audit_seq + 1, audit_last, &line, &len) != 0) {
		log_warnx("audit: cannot seal a record");
		return;
	}
	if (checkpoint && audit_sk != NULL)
		auditchain_sign(&line, &len, audit_sk);
	if (audit_to_syslog)
		syslog(LOG_AUTHPRIV | LOG_INFO, "%s", line);
	if (audit_fd >= 0 && audit_append(line, len) == 0) {
		audit_seq++;
		auditchain_hash(line, len, audit_last);
		audit_chained = 1;
		audit_dirty = !checkpoint;
		if (checkpoint)
			audit_last_cp = time(NULL);
	}
	free(line);
}

/* The current time as the audit log writes it. */
static void
audit_time(char *ts, size_t len)
{
	struct timespec now;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	snprintf(ts, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
	    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	    now.tv_nsec / 1000000);
}

/* Write a checkpoint: the chain state, signed when a key is loaded. */
static void
audit_checkpoint(const char *reason, int fresh, int torn)
{
	char ts[96], hex[2 * AUDITCHAIN_PK + 1], *text;
	json_t *o = json_object();

	audit_time(ts, sizeof ts);
	json_object_set_new(o, "event", json_string(AUDITCHAIN_EVENT));
	json_object_set_new(o, "reason", json_string(reason));
	if (audit_path != NULL)
		json_object_set_new(o, "file", json_string(audit_path));
	json_object_set_new(o, "pid", json_integer(getpid()));
	json_object_set_new(o, "chain", json_string(fresh ? "new" : "continued"));
	if (torn)
		json_object_set_new(o, "torn", json_true());
	if (audit_sk != NULL) {
		auditchain_hex(audit_pk, sizeof audit_pk, hex);
		json_object_set_new(o, "key", json_string(hex));
	}
	json_object_set_new(o, "time", json_string(ts));
	text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (text == NULL) {
		log_warnx("audit: cannot encode a checkpoint");
		return;
	}
	audit_emit(text, 1);
	free(text);
}

/*
 * Where the chain stands when the daemon starts: the last record of the file
 * (a bounded read of its tail) or, for an empty file, of the rotated one before
 * it (PATH.1). 1 when found, 0 when a new chain starts.
 */
static int
audit_resume(int fd, const char *path, int *torn)
{
	char *old;
	int ofd, r, otorn;

	r = auditchain_tail(fd, &audit_seq, audit_last, torn);
	if (r != 0)
		return r == 1;
	xasprintf(&old, "%s.1", path);
	ofd = open(old, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	free(old);
	if (ofd < 0)
		return 0;
	r = auditchain_tail(ofd, &audit_seq, audit_last, &otorn);
	close(ofd);
	return r == 1;
}

/* Set the periodic checkpoint interval (audit.checkpoint_interval). */
void
audit_checkpoint_every(int seconds)
{
	audit_every = seconds > 0 ? seconds : 0;
}

/*
 * Every second: when records came in since the last checkpoint and the interval
 * has passed, write one, so that a signed checkpoint covers them within it.
 */
void
audit_tick(time_t now)
{
	if (audit_every == 0 || !audit_dirty || audit_fd < 0 ||
	    now - audit_last_cp < audit_every)
		return;
	audit_checkpoint("interval", 0, 0);
}

/* Load (or, with path NULL, drop) the checkpoint signing key. */
int
audit_sign_key(const char *path, char **cause)
{
	unsigned char *sk, pk[AUDITCHAIN_PK];

	if (path == NULL) {
		if (audit_sk != NULL)
			sodium_free(audit_sk);
		audit_sk = NULL;
		return 0;
	}
	if ((sk = sodium_malloc(AUDITCHAIN_SK)) == NULL) {
		*cause = xstrdup("cannot allocate guarded memory for the audit signing key");
		return -1;
	}
	if (auditchain_load_key(path, sk, pk, cause) != 0) {
		sodium_free(sk);
		return -1;
	}
	if (audit_sk != NULL)
		sodium_free(audit_sk);
	audit_sk = sk;
	memcpy(audit_pk, pk, sizeof pk);
	return 0;
}

/* Load the key the config names (a file or a systemd credential), or drop it. */
int
audit_sign_key_config(const char *file, const char *credential, char **cause)
{
	char *path;
	int rc;

	path = auditchain_key_path(file, credential, cause);
	if (path == NULL && *cause != NULL)
		return -1;
	rc = audit_sign_key(path, cause);
	free(path);
	return rc;
}

/*
 * Open the audit file for appending. It belongs to root and to the group of its
 * directory; that group may read it (mode 0640) when it is not root's group and
 * may enter the directory: the installer makes /var/log/shimbridge
 * root:shimbridge-audit 0750 so that `shimbridge audit` works for its members.
 * Otherwise the file is root-only (0600). Applied at every open, so a file made
 * by someone else (log rotation) gets the same owner and mode.
 */
int
audit_open(const char *path, char **cause)
{
	struct stat dst;
	char *dir, *slash;
	mode_t mode = 0600;
	gid_t gid = 0;
	int fd, fresh = 0, torn = 0;

	dir = xstrdup(path);
	if ((slash = strrchr(dir, '/')) != NULL)
		*(slash == dir ? slash + 1 : slash) = '\0';
	if (stat(slash != NULL ? dir : ".", &dst) == 0 && dst.st_gid != 0 &&
	    (dst.st_mode & (S_IRGRP | S_IXGRP)) == (S_IRGRP | S_IXGRP) &&
	    (dst.st_mode & (S_IWGRP | S_IWOTH)) == 0) {
		gid = dst.st_gid;
		mode = 0640;
	}
	free(dir);
	fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		xasprintf(cause, "cannot open audit log %s: %s", path, strerror(errno));
		return -1;
	}
	if (fchown(fd, 0, gid) != 0 || fchmod(fd, mode) != 0) {
		xasprintf(cause, "cannot set owner root:%u and mode %04o on audit log %s: %s",
		    (unsigned)gid, (unsigned)mode, path, strerror(errno));
		close(fd);
		return -1;
	}
	if (fstat(fd, &dst) != 0 || !S_ISREG(dst.st_mode)) {
		xasprintf(cause, "audit log %s is not a regular file", path);
		close(fd);
		return -1;
	}
	/* At start the chain continues from the file's last record; later from memory. */
	if (!audit_chained)
		fresh = !audit_resume(fd, path, &torn);
	if (audit_fd >= 0)
		close(audit_fd);
	audit_fd = fd;
	free(audit_path);
	audit_path = xstrdup(path);
	if (torn)
		(void)audit_append("", 0);	/* the checkpoint starts on a line of its own */
	if (fresh) {
		audit_seq = 0;
		memset(audit_last, 0, sizeof audit_last);
	}
	audit_checkpoint(audit_opened ? "reopen" : "start", fresh, torn);
	audit_opened = 1;
	return 0;
}

/* SIGUSR1 (log rotation): open path anew; on failure keep writing to the old file. */
void
audit_reopen(const char *path)
{
	char *cause = NULL;

	if (audit_open(path, &cause) != 0) {
		log_warnx("%s; audit stays on the old file", cause);
		free(cause);
		return;
	}
	log_info("audit log reopened");
}

/* Also send every record to syslog(3), facility authpriv (config "audit": {"syslog": true}). */
void
audit_syslog(int on)
{
	if (on && !audit_to_syslog)
		openlog("shimbridged", LOG_PID | LOG_NDELAY, LOG_AUTHPRIV);
	else if (!on && audit_to_syslog)
		closelog();
	audit_to_syslog = on;
}

/* Close the audit file. */
void
audit_close(void)
{
	if (audit_fd >= 0) {
		audit_checkpoint("stop", 0, 0);
		close(audit_fd);
	}
	audit_fd = -1;
	free(audit_path);
	audit_path = NULL;
	(void)audit_sign_key(NULL, NULL);
}

/* Append one record, sealed into the chain. */
void
audit_write(json_t *obj, const struct redact *r)
{
	char ts[96], *line = NULL, *red = NULL;

	audit_time(ts, sizeof ts);
	json_object_set_new(obj, "time", json_string(ts));
	line = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
	json_decref(obj);
	if (line == NULL) {
		log_warnx("audit: cannot encode a record");
		return;
	}
	/* Redacted before sealing: the chain covers exactly the bytes written. */
	red = redact_string(r, line);
	free(line);
	if (red == NULL)
		return;
	audit_emit(red, 0);
	free(red);
}
