/*
 * Audit log: one JSON line per decision and per completion, appended with a
 * single write(2) so a crash never leaves half a line. Control characters are
 * escaped by the JSON encoder; secret values are redacted before writing. Every
 * line is sealed into a hash chain (auditchain.h): it ends with its sequence
 * number and the hash of the line before. Each open of the file (start, SIGHUP,
 * SIGUSR1), the stop and (audit_checkpoint_every) a timer write a checkpoint
 * record, signed when a key is loaded.
 */
#ifndef SHIMBRIDGE_AUDIT_H
#define SHIMBRIDGE_AUDIT_H

#include <time.h>

#include <jansson.h>

struct redact;

/*
 * Open (or reopen, for log rotation) the audit file and write a checkpoint; -1
 * and *cause on failure. The first open continues the chain from the file's last
 * record (or PATH.1's when the file is empty); later ones from memory.
 */
int	audit_open(const char *path, char **cause);
/* Write the "stop" checkpoint, close the file, drop the signing key. */
void	audit_close(void);
/*
 * Load the Ed25519 key that signs checkpoints from path (auditchain_load_key),
 * or drop it with path NULL. On failure the key loaded before stays; -1, *cause.
 */
int	audit_sign_key(const char *path, char **cause);
/*
 * The same from the config: the key file audit.sign_key, or the systemd
 * credential audit.sign_key_credential, or (both NULL) no key.
 */
int	audit_sign_key_config(const char *file, const char *credential, char **cause);
/* Log rotation: reopen path, keeping the old file (and logging why) on failure. */
void	audit_reopen(const char *path);
/* Also send each record, redacted, to syslog(3) with facility authpriv (1) or stop (0). */
void	audit_syslog(int on);
/* Also write a checkpoint every seconds while records come in (0: only at open and stop). */
void	audit_checkpoint_every(int seconds);
/* Called every second: write the periodic checkpoint when it is due. */
void	audit_tick(time_t now);
/* Write obj (consumed) with "time" added, redacted with r (may be NULL). */
void	audit_write(json_t *obj, const struct redact *r);

#endif
