/*
 * The server's keyring: every loaded secret value and its renewal state, keyed
 * by secret name and session (NULL: the host's definition; a session's override
 * has its own key). The parsed config stays read-only; the keyring is runtime
 * state beside it. Values live in libsodium guarded memory (struct secret_val).
 *
 * keyring_load syncs the keyring to a config: every source is read again (a
 * command source is run, as at start); keys no longer configured are wiped. A
 * value replaced by a reload or a renewal stays in the redactor under its key's
 * name (it may still be valid upstream, and running children may hold it). A
 * renewal under way when its key is reloaded is dropped when it ends.
 *
 * keyring_redactor is ONE redactor over every live value of every session plus
 * the replaced ones: the audit log, error messages and every request's output
 * redactor (redact_new_stream on it) use it, so a secret of session B printed by
 * session A's tool is masked too. It is rebuilt whenever a value changes; streams
 * made from an older one keep it alive by reference.
 *
 * A struct key pointer (and its value) is valid until the next keyring_load (a
 * reload) or renewal of that key: look it up when it is used (keyring_get), never
 * keep it across a turn of the event loop. The injector's secret callback, for
 * instance, calls keyring_get for every request it forwards.
 */
#ifndef SHIMBRIDGE_KEYRING_H
#define SHIMBRIDGE_KEYRING_H

#include <stddef.h>

#include "secret.h"

struct config;
struct ghapp_old;
struct redact;
struct session;

/* One loaded secret. */
struct key {
	char			*session;	/* NULL: the host's definition */
	char			*name;
	const struct secret_src	*src;		/* in the config last loaded */
	struct secret_val	 val;
};

struct keyring	*keyring_new(void);
void		 keyring_free(struct keyring *);
/*
 * Load the values cfg names (see above). Each failure is appended to
 * *warnings (xstrdup'd; "session NAME: " prefixed for overrides).
 */
void		 keyring_load(struct keyring *, const struct config *, char ***warnings,
		    size_t *nwarnings);
/* The key a session uses for name: its override, else the host's. NULL if none. */
struct key	*keyring_get(struct keyring *, const struct session *, const char *name);
/* The key exactly for (session name or NULL, name), or NULL. */
struct key	*keyring_find(struct keyring *, const char *session, const char *name);
/* Keys by index, for the renewal sweep: 0 <= i < keyring_count. */
size_t		 keyring_count(const struct keyring *);
struct key	*keyring_key(struct keyring *, size_t i);
/* A value changed (a renewal): rebuild the redactor. */
void		 keyring_changed(struct keyring *);
/*
 * github_app tokens out of service (a refresh replaced them, a reload changed or
 * removed their session or source), waiting to be revoked; they stay in the
 * redactor until dropped. keyring_retire takes o (NULL is fine).
 */
void		 keyring_retire(struct keyring *, struct ghapp_old *o);
size_t		 keyring_retired_count(const struct keyring *);
struct ghapp_old *keyring_retired(struct keyring *, size_t i);
void		 keyring_retired_drop(struct keyring *, size_t i);
/* The redactor over every live and replaced value; NULL only if building it failed. */
const struct redact *keyring_redactor(const struct keyring *);

#endif
