/* GitHub App installation tokens: JWT, request body, answers, schedule (see ghapp.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sodium.h>

#include "config.h"
#include "ghapp.h"
#include "log.h"
#include "secret.h"
#include "util.h"
#include "wipe.h"

/* API host: api.github.com for github.com, else the GHE host itself. */
const char *
ghapp_api_host(const struct secret_app *a)
{
	return strcasecmp(a->host, "github.com") == 0 ? "api.github.com" : a->host;
}

/* API path prefix: none on github.com, /api/v3 on GitHub Enterprise Server. */
const char *
ghapp_api_prefix(const struct secret_app *a)
{
	return strcasecmp(a->host, "github.com") == 0 ? "" : "/api/v3";
}

/* base64url without padding of in into guarded memory (NUL-terminated); NULL on failure. */
static char *
ghapp_b64url(const unsigned char *in, size_t len)
{
	size_t n = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	char *out;

	if ((out = sodium_malloc(n)) == NULL)
		return NULL;
	sodium_bin2base64(out, n, in, len, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	return out;
}

/* A passphrase callback that gives none: an encrypted key fails instead of prompting. */
static int
ghapp_no_pass(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return 0;
}

/* Sign the app's JWT (see ghapp.h). */
char *
ghapp_jwt(const unsigned char *pem, size_t len, const char *app_id, time_t now, char **cause)
{
	static const char header[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
	EVP_PKEY *pkey = NULL;
	EVP_MD_CTX *md = NULL;
	BIO *bio = NULL;
	char claims[128], *h = NULL, *c = NULL, *sig64 = NULL, *input = NULL, *jwt = NULL;
	unsigned char *sig = NULL;
	size_t siglen = 0, ilen, n;

	if (len == 0 || len > 64 * 1024 || (bio = BIO_new_mem_buf(pem, (int)len)) == NULL) {
		*cause = xstrdup("the private key is empty or too large");
		goto out;
	}
	pkey = PEM_read_bio_PrivateKey(bio, NULL, ghapp_no_pass, NULL);
	ERR_clear_error();
	if (pkey == NULL || !EVP_PKEY_is_a(pkey, "RSA")) {
		*cause = xstrdup("the private key is not a PEM RSA private key (the .pem file "
		    "GitHub generates for the app, unencrypted)");
		goto out;
	}
	snprintf(claims, sizeof claims, "{\"iat\":%lld,\"exp\":%lld,\"iss\":\"%s\"}",
	    (long long)now - GHAPP_JWT_BACKDATE, (long long)now + GHAPP_JWT_LIFETIME, app_id);
	if ((h = ghapp_b64url((const unsigned char *)header, sizeof header - 1)) == NULL ||
	    (c = ghapp_b64url((const unsigned char *)claims, strlen(claims))) == NULL)
		goto nomem;
	ilen = strlen(h) + 1 + strlen(c);
	if ((input = sodium_malloc(ilen + 1)) == NULL)
		goto nomem;
	snprintf(input, ilen + 1, "%s.%s", h, c);
	if ((md = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, pkey) != 1 ||
	    EVP_DigestSign(md, NULL, &siglen, (unsigned char *)input, ilen) != 1 ||
	    (sig = sodium_malloc(siglen)) == NULL ||
	    EVP_DigestSign(md, sig, &siglen, (unsigned char *)input, ilen) != 1) {
		ERR_clear_error();
		*cause = xstrdup("signing the app's JWT with its private key failed");
		goto out;
	}
	if ((sig64 = ghapp_b64url(sig, siglen)) == NULL)
		goto nomem;
	n = ilen + 1 + strlen(sig64) + 1;
	if ((jwt = sodium_malloc(n)) == NULL)
		goto nomem;
	snprintf(jwt, n, "%s.%s", input, sig64);
	goto out;
nomem:
	*cause = xstrdup("out of guarded memory");
out:
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(pkey);	/* OpenSSL clears private key numbers as it frees them */
	BIO_free(bio);
	if (h != NULL)
		sodium_free(h);
	if (c != NULL)
		sodium_free(c);
	if (input != NULL)
		sodium_free(input);
	if (sig != NULL)
		sodium_free(sig);
	if (sig64 != NULL)
		sodium_free(sig64);
	return jwt;
}

/* The request body for a session's token (see ghapp.h). */
char *
ghapp_mint_body(const struct secret_app *a, const struct session *s, char **cause)
{
	json_t *o, *repos;
	const char *slash;
	char *out;
	size_t i, olen = 0;

	if (s->nrepos == 0) {
		xasprintf(cause, "session %s allows no repository: a GitHub App token is "
		    "minted for the session's \"repos\"", s->name);
		return NULL;
	}
	for (i = 0; i < s->nrepos; i++) {
		slash = strchr(s->repos[i], '/');
		if (slash == NULL) {
			xasprintf(cause, "session %s: repository %s is not OWNER/NAME", s->name,
			    s->repos[i]);
			return NULL;
		}
		if (i == 0)
			olen = (size_t)(slash - s->repos[0]);
		if ((size_t)(slash - s->repos[i]) != olen ||
		    strncasecmp(s->repos[i], s->repos[0], olen) != 0) {
			xasprintf(cause, "session %s: a GitHub App token covers one owner, but "
			    "its repositories %s and %s have different owners (give the other "
			    "owner's repositories their own session or secret)", s->name,
			    s->repos[0], s->repos[i]);
			return NULL;
		}
	}
	if (a->owner != NULL && (strlen(a->owner) != olen ||
	    strncasecmp(a->owner, s->repos[0], olen) != 0)) {
		xasprintf(cause, "session %s: its repositories belong to %.*s, not to the app "
		    "installation's owner %s", s->name, (int)olen, s->repos[0], a->owner);
		return NULL;
	}
	o = json_object();
	repos = json_array();
	for (i = 0; i < s->nrepos; i++)
		json_array_append_new(repos, json_string(s->repos[i] + olen + 1));
	json_object_set_new(o, "repositories", repos);
	if (a->permissions != NULL)
		json_object_set(o, "permissions", a->permissions);
	out = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (out == NULL)
		fatalx("out of memory");
	return out;
}

/* The request body without repositories: a token for all the installation's. */
char *
ghapp_mint_body_all(const struct secret_app *a)
{
	json_t *o = json_object();
	char *out;

	if (a->permissions != NULL)
		json_object_set(o, "permissions", a->permissions);
	out = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (out == NULL)
		fatalx("out of memory");
	return out;
}

/* What a token is minted for; a reload keeps the token only if this is unchanged. */
char *
ghapp_signature(const struct secret_src *src, const struct session *s)
{
	const struct secret_app *a = &src->app;
	char *body, *cause = NULL, *sig;

	if ((body = ghapp_mint_body(a, s, &cause)) == NULL) {
		body = cause;	/* transferred: a session that cannot mint signs as its error */
	}
	xasprintf(&sig, "%s|%lld|%s|%s|%s|%s|%s", a->app_id, a->installation_id,
	    a->owner != NULL ? a->owner : "", a->private_key, a->host,
	    a->ca_file != NULL ? a->ca_file : "", body);
	free(body);
	return sig;
}

/* Seconds since the epoch of "YYYY-MM-DDTHH:MM:SSZ"; -1 if it is not that. */
static time_t
ghapp_parse_time(const char *s)
{
	struct tm tm;
	char *end;

	if (strlen(s) != 20)
		return -1;
	memset(&tm, 0, sizeof tm);
	end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (end == NULL || *end != '\0')
		return -1;
	return timegm(&tm);
}

/* Parse the access_tokens answer (see ghapp.h). */
int
ghapp_parse_token(const unsigned char *body, size_t len, struct ghapp_token *t, char **cause)
{
	json_malloc_t om;
	json_free_t of;
	json_t *root, *v, *e;
	const char *tok;
	size_t tlen, i;
	int rc = -1;

	memset(t, 0, sizeof t[0]);
	if (len > GHAPP_MAX_RESPONSE) {
		*cause = xstrdup("the answer is too large");
		return -1;
	}
	/* The answer holds the token: every block jansson frees meanwhile is wiped. */
	json_get_alloc_funcs(&om, &of);
	json_set_alloc_funcs(malloc, wipe_free);
	root = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(root)) {
		*cause = xstrdup("the answer is not a JSON object");
		goto out;
	}
	v = json_object_get(root, "token");
	tok = json_string_value(v);
	tlen = json_string_length(v);
	if (tok == NULL || tlen == 0 || tlen > 1024) {
		*cause = xstrdup("the answer has no \"token\" string");
		goto out;
	}
	for (i = 0; i < tlen; i++) {
		if ((unsigned char)tok[i] <= 0x20 || (unsigned char)tok[i] >= 0x7f) {
			*cause = xstrdup("the token in the answer has characters a token cannot "
			    "have");
			goto out;
		}
	}
	v = json_object_get(root, "expires_at");
	if (!json_is_string(v) || (t->expires_at = ghapp_parse_time(json_string_value(v))) <=
	    0) {
		*cause = xstrdup("the answer has no \"expires_at\" time (YYYY-MM-DDTHH:MM:SSZ)");
		goto out;
	}
	v = json_object_get(root, "permissions");
	if (v != NULL && !json_is_object(v)) {
		*cause = xstrdup("\"permissions\" in the answer is not an object");
		goto out;
	}
	/* Copied out now, while the wiping free is in place for the original. */
	if (v != NULL) {
		const char *k;

		t->permissions = json_object();
		json_object_foreach(v, k, e) {
			if (json_is_string(e) && json_object_size(t->permissions) < 64)
				json_object_set_new(t->permissions, k,
				    json_string(json_string_value(e)));
		}
	}
	v = json_object_get(root, "repositories");
	if (v != NULL && !json_is_array(v)) {
		*cause = xstrdup("\"repositories\" in the answer is not an array");
		goto out;
	}
	if (v != NULL) {
		t->repositories = json_array();
		json_array_foreach(v, i, e) {
			const char *fn = json_string_value(json_object_get(e, "full_name"));

			if (fn != NULL && json_array_size(t->repositories) < 1024)
				json_array_append_new(t->repositories, json_string(fn));
		}
	}
	if ((t->value = sodium_malloc(tlen)) == NULL) {
		*cause = xstrdup("out of guarded memory");
		goto out;
	}
	memcpy(t->value, tok, tlen);
	sodium_mprotect_readonly(t->value);
	t->len = tlen;
	rc = 0;
out:
	json_decref(root);
	json_set_alloc_funcs(om, of);
	if (rc != 0)
		ghapp_token_clear(t);
	return rc;
}

/* Release a parsed answer. */
void
ghapp_token_clear(struct ghapp_token *t)
{
	if (t->value != NULL)
		sodium_free(t->value);
	json_decref(t->permissions);
	json_decref(t->repositories);
	memset(t, 0, sizeof *t);
}

/* Find owner's installation id in GET /app/installations (see ghapp.h). */
int
ghapp_parse_installations(const unsigned char *body, size_t len, const char *owner,
    long long *id, char **cause)
{
	json_t *root, *e, *idv;
	const char *login;
	size_t i;
	int rc = -1;

	if (len > GHAPP_MAX_RESPONSE ||
	    (root = json_loadb((const char *)body, len, 0, NULL)) == NULL) {
		*cause = xstrdup("the installations answer is not JSON");
		return -1;
	}
	if (!json_is_array(root)) {
		*cause = xstrdup("the installations answer is not an array");
		goto out;
	}
	json_array_foreach(root, i, e) {
		login = json_string_value(json_object_get(json_object_get(e, "account"),
		    "login"));
		idv = json_object_get(e, "id");
		if (login == NULL || strcasecmp(login, owner) != 0)
			continue;
		if (!json_is_integer(idv) || json_integer_value(idv) <= 0) {
			*cause = xstrdup("the installation has no numeric \"id\"");
			goto out;
		}
		*id = (long long)json_integer_value(idv);
		rc = 0;
		goto out;
	}
	xasprintf(cause, "the app is not installed on %s (install it there, or give "
	    "\"installation_id\")", owner);
out:
	json_decref(root);
	return rc;
}

/* GitHub's error message, made printable and short. */
char *
ghapp_error_message(const unsigned char *body, size_t len)
{
	json_t *root;
	const char *m;
	char *out = NULL;
	size_t i;

	if (len == 0 || len > GHAPP_MAX_RESPONSE ||
	    (root = json_loadb((const char *)body, len, 0, NULL)) == NULL)
		return NULL;
	if ((m = json_string_value(json_object_get(root, "message"))) != NULL) {
		xasprintf(&out, "%.200s", m);
		for (i = 0; out[i] != '\0'; i++)
			if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
				out[i] = ' ';
	}
	json_decref(root);
	return out;
}

/* When a token is refreshed: min(refresh_before, lifetime/2) before it expires. */
time_t
ghapp_refresh_at(time_t minted, time_t expires, int refresh_before)
{
	time_t life = expires - minted, ahead = refresh_before;

	if (life < 0)
		life = 0;
	if (life / 2 < ahead)
		ahead = life / 2;
	return expires - ahead;
}

/* Back-off after failures in a row: 2, 4, 8, 16, 32, 60, 60, ... seconds. */
int
ghapp_backoff(int failures)
{
	if (failures < 1)
		return 0;
	if (failures >= 6)
		return 60;
	return 1 << failures;
}

/* Name a token by the first 8 hex digits of its SHA-256 hash. */
void
ghapp_fingerprint(const unsigned char *tok, size_t len, char out[9])
{
	unsigned char h[crypto_hash_sha256_BYTES];

	crypto_hash_sha256(h, tok, len);
	snprintf(out, 9, "%02x%02x%02x%02x", h[0], h[1], h[2], h[3]);
}

/* ISO 8601 UTC time. */
void
ghapp_time(time_t t, char *out, size_t outlen)
{
	struct tm tm;

	if (t <= 0 || gmtime_r(&t, &tm) == NULL) {
		snprintf(out, outlen, "-");
		return;
	}
	strftime(out, outlen, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* A key's token state as JSON, for status and secret list. */
json_t *
ghapp_status_json(const struct secret_val *v)
{
	const struct ghapp_state *st = v->app;
	json_t *o;
	char t[32];

	if (st == NULL)
		return NULL;
	o = json_object();
	json_object_set_new(o, "fingerprint", json_string(v->value != NULL ? st->fp : ""));
	json_object_set_new(o, "repositories", st->repos != NULL ? json_deep_copy(st->repos) :
	    json_array());
	json_object_set_new(o, "permissions", st->perms != NULL ? json_deep_copy(st->perms) :
	    json_object());
	ghapp_time(v->value != NULL ? v->expires_at : 0, t, sizeof t);
	json_object_set_new(o, "expires_at", json_string(t));
	ghapp_time(st->last_refresh, t, sizeof t);
	json_object_set_new(o, "last_refresh", json_string(t));
	json_object_set_new(o, "last_result", json_string(st->last_result != NULL ?
	    st->last_result : "not minted yet"));
	json_object_set_new(o, "minting", json_boolean(v->refreshing));
	return o;
}

/* Release a mint state. */
void
ghapp_state_free(struct ghapp_state *st)
{
	if (st == NULL)
		return;
	json_decref(st->repos);
	json_decref(st->perms);
	free(st->last_result);
	free(st->sig);
	free(st);
}

/* Release a retired token (wiped). */
void
ghapp_old_free(struct ghapp_old *o)
{
	if (o == NULL)
		return;
	if (o->value != NULL)
		sodium_free(o->value);
	free(o->session);
	free(o->name);
	free(o->host);
	free(o->ca_file);
	json_decref(o->repos);
	json_decref(o->perms);
	free(o);
}

/* Take v's token out of service, to be revoked (see ghapp.h). */
struct ghapp_old *
ghapp_retire(struct secret_val *v, const struct secret_src *src, const char *session,
    const char *name, time_t revoke_at)
{
	struct ghapp_old *o;

	if (v->value == NULL || src->type != SECRET_GITHUB_APP)
		return NULL;
	o = xcalloc(1, sizeof *o);
	o->session = session != NULL ? xstrdup(session) : NULL;
	o->name = xstrdup(name);
	o->value = v->value;	/* transferred */
	o->len = v->len;
	v->value = NULL;
	v->len = 0;
	o->expires_at = v->expires_at;
	o->revoke_at = revoke_at;
	o->host = xstrdup(src->app.host);
	o->ca_file = src->app.ca_file != NULL ? xstrdup(src->app.ca_file) : NULL;
	if (v->app != NULL) {
		memcpy(o->fp, v->app->fp, sizeof o->fp);
		o->repos = v->app->repos != NULL ? json_incref(v->app->repos) : NULL;
		o->perms = v->app->perms != NULL ? json_incref(v->app->perms) : NULL;
	}
	return o;
}

/* A github_app source's private key must name a secret that is not itself an app. */
static int
ghapp_check_key(const struct config *c, const struct session *s,
    const struct secret_src *src, char **cause)
{
	const struct secret_src *pk = secret_resolve(c, s, src->app.private_key);

	if (pk == NULL) {
		xasprintf(cause, "secrets.%s: \"private_key\" names secret %s, which is not "
		    "defined", src->name, src->app.private_key);
		return -1;
	}
	if (pk->type == SECRET_GITHUB_APP) {
		xasprintf(cause, "secrets.%s: \"private_key\" names secret %s, another "
		    "github_app source; it must hold the PEM key (file, store, systemd, env or "
		    "command)", src->name, src->app.private_key);
		return -1;
	}
	return 0;
}

/* Whether two host[:port] names name the same host (ports may differ: API and git). */
static int
ghapp_same_host(const char *a, const char *b)
{
	size_t la = strcspn(a, ":"), lb = strcspn(b, ":");

	return la == lb && strncasecmp(a, b, la) == 0;
}

/* A session's use of secret name (by a tool on host, or git host): can it be minted? */
static int
ghapp_check_use(const struct config *c, const struct session *s, const char *name,
    const char *host, const char *what, const char *username, char **cause)
{
	const struct secret_src *src = secret_resolve(c, s, name);
	char *body, *why = NULL;

	if (src == NULL || src->type != SECRET_GITHUB_APP)
		return 0;
	if ((body = ghapp_mint_body(&src->app, s, &why)) == NULL) {
		xasprintf(cause, "secrets.%s (github_app): %s", name, why);
		free(why);
		return -1;
	}
	free(body);
	if (!ghapp_same_host(host, src->app.host)) {
		xasprintf(cause, "%s uses secret %s, a GitHub App on %s, for host %s: an app "
		    "token works only on its own host", what, name, src->app.host, host);
		return -1;
	}
	if (username != NULL && strcmp(username, "x-access-token") != 0) {
		xasprintf(cause, "%s uses secret %s, a GitHub App token: git must send it with "
		    "username \"x-access-token\" (remove \"username\": it is the default)", what,
		    name);
		return -1;
	}
	return ghapp_check_key(c, s, src, cause);
}

/* Cross-check every github_app source and its uses in a loaded config (see ghapp.h). */
int
ghapp_config_check(const struct config *c, char **cause)
{
	size_t i, j, k;
	char *what;
	int rc;

	for (i = 0; i < c->nsecrets; i++)
		if (c->secrets[i].type == SECRET_GITHUB_APP &&
		    ghapp_check_key(c, NULL, &c->secrets[i], cause) != 0)
			return -1;
	for (i = 0; i < c->nsessions; i++) {
		const struct session *s = &c->sessions[i];

		for (j = 0; j < s->nsecrets; j++)
			if (s->secrets[j].type == SECRET_GITHUB_APP &&
			    ghapp_check_key(c, s, &s->secrets[j], cause) != 0)
				return -1;
		for (j = 0; j < s->ntools; j++) {
			const struct tool *t = config_tool(c, s->tools[j]);

			if (strcmp(s->tools[j], "git") == 0) {
				for (k = 0; k < c->ngit_hosts; k++) {
					xasprintf(&what, "session %s: git host %s", s->name,
					    c->git_hosts[k].name);
					rc = ghapp_check_use(c, s, c->git_hosts[k].secret,
					    c->git_hosts[k].name, what, c->git_hosts[k].username,
					    cause);
					free(what);
					if (rc != 0)
						return -1;
				}
				continue;
			}
			for (k = 0; t != NULL && k < t->nsecrets; k++) {
				xasprintf(&what, "session %s: tool %s", s->name, t->name);
				rc = ghapp_check_use(c, s, t->secrets[k].secret, t->host != NULL ?
				    t->host : "github.com", what, NULL, cause);
				free(what);
				if (rc != 0)
					return -1;
			}
		}
	}
	return 0;
}
