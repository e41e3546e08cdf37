/*
 * Audit log: one JSON line per decision and per completion, appended with a
 * single write(2) so a crash never leaves half a line. Control characters are
 * escaped by the JSON encoder; secret values are redacted before writing.
 */
#ifndef SHIMBRIDGE_AUDIT_H
#define SHIMBRIDGE_AUDIT_H

#include <jansson.h>

struct redact;

/* Open (or reopen, for log rotation) the audit file; -1 and *cause on failure. */
int	audit_open(const char *path, char **cause);
void	audit_close(void);
/* Log rotation: reopen path, keeping the old file (and logging why) on failure. */
void	audit_reopen(const char *path);
/* Also send each record, redacted, to syslog(3) with facility authpriv (1) or stop (0). */
void	audit_syslog(int on);
/* Write obj (consumed) with "time" added, redacted with r (may be NULL). */
void	audit_write(json_t *obj, const struct redact *r);

#endif
