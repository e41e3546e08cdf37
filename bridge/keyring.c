/* The server's keyring of loaded secret values (see keyring.h). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "config.h"
#include "ghapp.h"
#include "keyring.h"
#include "redact.h"
#include "secret.h"
#include "store.h"
#include "util.h"

struct keyring {
	struct key	*keys;
	size_t		 nkeys;
	struct redact	*redact;	/* every live and replaced value */
	struct ghapp_old **old;		/* github_app tokens out of service, to revoke */
	size_t		 nold;
};

/* An empty keyring: a pass-through redactor until something is loaded. */
struct keyring *
keyring_new(void)
{
	struct keyring *kr = xcalloc(1, sizeof *kr);
	struct redact_secret none = { NULL, 0 };

	kr->redact = redact_new(&none, 0);
	return kr;
}

/* Wipe one key. */
static void
keyring_key_clear(struct key *k)
{
	secret_val_clear(&k->val);
	free(k->session);
	free(k->name);
	memset(k, 0, sizeof *k);
}

/* Wipe everything. */
void
keyring_free(struct keyring *kr)
{
	size_t i;

	if (kr == NULL)
		return;
	for (i = 0; i < kr->nkeys; i++)
		keyring_key_clear(&kr->keys[i]);
	free(kr->keys);
	for (i = 0; i < kr->nold; i++)
		ghapp_old_free(kr->old[i]);
	free(kr->old);
	redact_free(kr->redact);
	free(kr);
}

/* Whether a key is for (session or NULL, name). */
static int
keyring_match(const struct key *k, const char *session, const char *name)
{
	if ((k->session == NULL) != (session == NULL))
		return 0;
	if (session != NULL && strcmp(k->session, session) != 0)
		return 0;
	return strcmp(k->name, name) == 0;
}

/* The key exactly for (session, name). */
struct key *
keyring_find(struct keyring *kr, const char *session, const char *name)
{
	size_t i;

	for (i = 0; i < kr->nkeys; i++) {
		if (keyring_match(&kr->keys[i], session, name))
			return &kr->keys[i];
	}
	return NULL;
}

/* A session's override, else the host's key. */
struct key *
keyring_get(struct keyring *kr, const struct session *s, const char *name)
{
	struct key *k;

	if (s != NULL && (k = keyring_find(kr, s->name, name)) != NULL)
		return k;
	return keyring_find(kr, NULL, name);
}

/* How many keys there are. */
size_t
keyring_count(const struct keyring *kr)
{
	return kr->nkeys;
}

/* The key at index i. */
struct key *
keyring_key(struct keyring *kr, size_t i)
{
	return &kr->keys[i];
}

/* The one redactor over every live and replaced value. */
const struct redact *
keyring_redactor(const struct keyring *kr)
{
	return kr->redact;
}

/* Rebuild the one redactor over every live value and every replaced one. */
void
keyring_changed(struct keyring *kr)
{
	struct redact_secret *rs = xcalloc((1 + SECRET_PREV_MAX) * kr->nkeys + kr->nold + 1,
	    sizeof *rs);
	struct redact *r;
	size_t i, j, n = 0;

	for (i = 0; i < kr->nkeys; i++) {
		const struct secret_val *v = &kr->keys[i].val;

		if (v->value != NULL) {
			rs[n].value = v->value;
			rs[n++].len = v->len;
		}
		for (j = 0; j < v->nprev; j++) {
			rs[n].value = v->prev[j];
			rs[n++].len = v->prev_len[j];
		}
	}
	/* A token out of service may still be live upstream until its DELETE is done. */
	for (i = 0; i < kr->nold; i++) {
		rs[n].value = kr->old[i]->value;
		rs[n++].len = kr->old[i]->len;
	}
	r = redact_new(rs, n);
	free(rs);
	redact_free(kr->redact);
	kr->redact = r;		/* NULL if it could not be built: callers refuse */
}

/* Queue a token taken out of service for revocation (transferred; NULL is fine). */
void
keyring_retire(struct keyring *kr, struct ghapp_old *o)
{
	if (o == NULL)
		return;
	kr->old = xreallocarray(kr->old, kr->nold + 1, sizeof *kr->old);
	kr->old[kr->nold++] = o;
}

/* How many tokens wait for revocation. */
size_t
keyring_retired_count(const struct keyring *kr)
{
	return kr->nold;
}

/* The i-th of them. */
struct ghapp_old *
keyring_retired(struct keyring *kr, size_t i)
{
	return kr->old[i];
}

/* Drop the i-th (revoked, or expired anyway): wiped; the redactor is rebuilt. */
void
keyring_retired_drop(struct keyring *kr, size_t i)
{
	ghapp_old_free(kr->old[i]);
	memmove(&kr->old[i], &kr->old[i + 1], (kr->nold - i - 1) * sizeof *kr->old);
	kr->nold--;
	keyring_changed(kr);
}

/*
 * A session's token (session, name) leaves service at a reload: it, and any
 * older one of it still in its grace for requests in flight (a refresh just
 * replaced it), are revoked now. Nobody will use them again.
 */
static void
keyring_retire_now(struct keyring *kr, struct secret_val *v, const struct secret_src *src,
    const char *session, const char *name)
{
	time_t now = time(NULL);
	size_t i;

	for (i = 0; i < kr->nold; i++) {
		const struct ghapp_old *o = kr->old[i];

		if (o->revoke_at > now && (o->session == NULL) == (session == NULL) &&
		    (session == NULL || strcmp(o->session, session) == 0) &&
		    strcmp(o->name, name) == 0)
			kr->old[i]->revoke_at = now;
	}
	keyring_retire(kr, ghapp_retire(v, src, session, name, now));
}

/*
 * A github_app key of a session: a token minted for the same settings and
 * repositories is kept across a reload (with its state); any other is retired.
 */
static void
keyring_fill_app(struct keyring *kr, struct key *nk, struct key *old,
    const struct session *s, const struct secret_src *src)
{
	struct ghapp_state *st = xcalloc(1, sizeof *st);

	nk->session = xstrdup(s->name);
	nk->name = xstrdup(src->name);
	nk->src = src;
	st->sig = ghapp_signature(src, s);
	st->installation_id = src->app.installation_id;
	if (old != NULL && old->src->type == SECRET_GITHUB_APP && old->val.app != NULL &&
	    strcmp(old->val.app->sig, st->sig) == 0) {
		ghapp_state_free(st);
		nk->val = old->val;	/* transferred: token, expiry, state, a mint under way */
		memset(&old->val, 0, sizeof old->val);
		return;
	}
	nk->val.app = st;
	if (old != NULL && old->src->type == SECRET_GITHUB_APP) {
		nk->val.app->wanted = old->val.app != NULL && old->val.app->wanted;
		keyring_retire_now(kr, &old->val, old->src, old->session, old->name);
	}
}

/* Open the encrypted store with its key file or systemd credential. */
static struct store *
keyring_open_store(const struct config *c, char **error)
{
	struct store *st = NULL;
	unsigned char *key = NULL;
	char *cause = NULL, *kpath = NULL;
	const char *dir;

	if (c->store_key_credential != NULL) {
		if ((dir = getenv("CREDENTIALS_DIRECTORY")) == NULL || dir[0] != '/') {
			xasprintf(error, "the store key credential %s is not available "
			    "(CREDENTIALS_DIRECTORY is not set)", c->store_key_credential);
			return NULL;
		}
		xasprintf(&kpath, "%s/%s", dir, c->store_key_credential);
	} else
		kpath = xstrdup(c->store_key);
	if (store_key_load(kpath, &key, &cause) != 0 ||
	    store_load(c->store_path, key, 1, &st, &cause) != 0) {
		*error = cause;	/* transferred; it names the file already */
		st = NULL;
	}
	if (key != NULL)
		sodium_free(key);
	free(kpath);
	return st;
}

/* Append a warning. */
static void __attribute__((format(printf, 3, 4)))
keyring_warn(char ***w, size_t *n, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	*w = xreallocarray(*w, *n + 1, sizeof **w);
	(*w)[(*n)++] = msg;
}

/* Fill a new key for src: load it again; the old key's value stays masked if it changed. */
static void
keyring_fill(struct key *nk, struct key *old, const char *session,
    const struct secret_src *src, const struct config *c, const struct store *st,
    const char *store_error)
{
	nk->session = session != NULL ? xstrdup(session) : NULL;
	nk->name = xstrdup(src->name);
	nk->src = src;
	secret_load(src, &nk->val, c, st, store_error);
	/*
	 * Values the reload replaced may still be valid upstream: keep masking
	 * them, the old key's replaced ones and then its value if it changed (or
	 * could not be loaded again), newest first. A github_app token stays with
	 * its old key: keyring_load retires it (revoked, and masked until then).
	 */
	if (old == NULL)
		return;
	while (old->val.nprev > 0) {	/* transferred, oldest first */
		old->val.nprev--;
		secret_val_push_prev(&nk->val, old->val.prev[old->val.nprev],
		    old->val.prev_len[old->val.nprev]);
	}
	if (old->val.value != NULL && (old->src == NULL || old->src->type != SECRET_GITHUB_APP) &&
	    (nk->val.value == NULL || old->val.len != nk->val.len ||
	    sodium_memcmp(old->val.value, nk->val.value, nk->val.len) != 0)) {
		secret_val_push_prev(&nk->val, old->val.value, old->val.len);
		old->val.value = NULL;	/* transferred */
	}
}

/* Sync the keyring to a config (see keyring.h). */
void
keyring_load(struct keyring *kr, const struct config *c, char ***warnings, size_t *nwarnings)
{
	struct store *st = NULL;
	struct key *keys;
	char *store_error = NULL;
	size_t i, j, n = 0, cap = c->nsecrets;
	int need_store = 0;

	for (i = 0; i < c->nsecrets; i++)
		need_store |= c->secrets[i].type == SECRET_STORE;
	for (i = 0; i < c->nsessions; i++) {
		cap += c->sessions[i].nsecrets + c->nsecrets;
		for (j = 0; j < c->sessions[i].nsecrets; j++)
			need_store |= c->sessions[i].secrets[j].type == SECRET_STORE;
	}
	if (need_store)
		st = keyring_open_store(c, &store_error);
	keys = xcalloc(cap + 1, sizeof *keys);
	for (i = 0; i < c->nsecrets; i++) {
		keyring_fill(&keys[n], keyring_find(kr, NULL, c->secrets[i].name), NULL,
		    &c->secrets[i], c, st, store_error);
		if (keys[n].val.error != NULL)
			keyring_warn(warnings, nwarnings, "%s", keys[n].val.error);
		n++;
	}
	for (i = 0; i < c->nsessions; i++) {
		const struct session *s = &c->sessions[i];

		for (j = 0; j < s->nsecrets; j++) {
			if (s->secrets[j].type == SECRET_GITHUB_APP) {
				keyring_fill_app(kr, &keys[n++], keyring_find(kr, s->name,
				    s->secrets[j].name), s, &s->secrets[j]);
				continue;
			}
			keyring_fill(&keys[n], keyring_find(kr, s->name, s->secrets[j].name),
			    s->name, &s->secrets[j], c, st, store_error);
			if (keys[n].val.error != NULL)
				keyring_warn(warnings, nwarnings, "session %s: %s", s->name,
				    keys[n].val.error);
			n++;
		}
		/* A host github_app source is minted per session: one token each. */
		for (j = 0; j < c->nsecrets; j++) {
			if (c->secrets[j].type != SECRET_GITHUB_APP ||
			    secret_resolve(c, s, c->secrets[j].name) != &c->secrets[j])
				continue;
			keyring_fill_app(kr, &keys[n++], keyring_find(kr, s->name,
			    c->secrets[j].name), s, &c->secrets[j]);
		}
	}
	if (st != NULL)
		store_free(st);
	free(store_error);
	for (i = 0; i < kr->nkeys; i++) {
		/*
		 * A session removed, or a source gone: its token is revoked. Not a key
		 * the new one took over (its state went with it: a refresh's old token
		 * keeps its grace), nor the host's key of a source (it holds no token).
		 */
		if (kr->keys[i].src != NULL && kr->keys[i].src->type == SECRET_GITHUB_APP &&
		    kr->keys[i].session != NULL && kr->keys[i].val.app != NULL)
			keyring_retire_now(kr, &kr->keys[i].val, kr->keys[i].src,
			    kr->keys[i].session, kr->keys[i].name);
		keyring_key_clear(&kr->keys[i]);
	}
	free(kr->keys);
	kr->keys = keys;
	kr->nkeys = n;
	keyring_changed(kr);
}
