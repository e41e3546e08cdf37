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

#include "audit.h"
#include "log.h"
#include "redact.h"
#include "util.h"

static int audit_fd = -1;
static int audit_to_syslog;

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
	int fd;

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
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
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
	if (audit_fd >= 0)
		close(audit_fd);
	audit_fd = fd;
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
	if (audit_fd >= 0)
		close(audit_fd);
	audit_fd = -1;
}

/* Append one line. */
void
audit_write(json_t *obj, const struct redact *r)
{
	char ts[96], *line = NULL, *red = NULL;
	struct timespec now;
	struct tm tm;
	size_t len, off = 0;
	ssize_t n;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
	    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	    now.tv_nsec / 1000000);
	json_object_set_new(obj, "time", json_string(ts));
	line = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
	json_decref(obj);
	if (line == NULL) {
		log_warnx("audit: cannot encode a record");
		return;
	}
	red = redact_string(r, line);
	free(line);
	if (red == NULL)
		return;
	if (audit_to_syslog)
		syslog(LOG_AUTHPRIV | LOG_INFO, "%s", red);
	len = strlen(red);
	red[len++] = '\n';	/* over the NUL: the line is written by length */
	if (audit_fd < 0) {
		free(red);
		return;
	}
	while (off < len) {
		n = write(audit_fd, red + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			log_warnx("audit: write failed: %s", strerror(errno));
			break;
		}
		off += (size_t)n;
	}
	free(red);
}
