/*
 * GitHub App installation tokens (docs/GITHUB-APP.md): the parts without I/O,
 * shared by the daemon (ghmint.c mints, refreshes and revokes over the network)
 * and the admin CLI (`shimbridge check`): the RS256 JWT, the request body, the
 * parsers of GitHub's answers, the refresh arithmetic, fingerprints, status.
 *
 * Tokens and JWTs live only in libsodium guarded memory. The private key is read
 * from its secret's guarded value into an OpenSSL key for one signature and freed
 * at once (libsodium has no RSA; libcrypto's EVP_DigestSign does the signing).
 */
#ifndef SHIMBRIDGE_GHAPP_H
#define SHIMBRIDGE_GHAPP_H

#include <stddef.h>
#include <time.h>

#include <jansson.h>

struct config;
struct secret_app;
struct secret_src;
struct secret_val;
struct session;

#define GHAPP_MAX_RESPONSE	(1024 * 1024)	/* bytes of an answer we read */
#define GHAPP_JWT_LIFETIME	540		/* exp - now; GitHub allows 600 */
#define GHAPP_JWT_BACKDATE	60		/* now - iat: clock drift */
#define GHAPP_REVOKE_GRACE	10		/* seconds a replaced token lives on */

/* A github_app key's mint state (struct secret_val's app), owned by the keyring. */
struct ghapp_state {
	char		 fp[9];		/* fingerprint of the current token, or "" */
	json_t		*repos;		/* repositories the token was granted (full names) */
	json_t		*perms;		/* permissions it was granted */
	time_t		 minted_at;	/* of the current token */
	time_t		 last_refresh;	/* the last attempt's end, or 0 */
	char		*last_result;	/* "ok" or why it failed, or NULL */
	int		 failures;	/* in a row, for the back-off */
	int		 wanted;	/* a call needed it: keep it minted */
	long long	 installation_id;	/* configured or looked up once; 0: unknown */
	char		*sig;		/* what it was minted for (ghapp_signature) */
};

/* A token taken out of service (refreshed, reloaded away, stopping): to be revoked. */
struct ghapp_old {
	char		*session;
	char		*name;
	unsigned char	*value;		/* guarded */
	size_t		 len;
	char		 fp[9];
	time_t		 expires_at;
	time_t		 revoke_at;	/* not before */
	char		*host;		/* the source's host and CA file */
	char		*ca_file;
	json_t		*repos;
	json_t		*perms;
	int		 revoking;	/* a DELETE is under way */
};

/* A parsed POST /app/installations/{id}/access_tokens answer. */
struct ghapp_token {
	unsigned char	*value;		/* guarded, not NUL-terminated */
	size_t		 len;
	time_t		 expires_at;
	json_t		*permissions;	/* as granted, or NULL */
	json_t		*repositories;	/* array of "owner/name", or NULL */
};

/* API host ("api.github.com" or the GHE host[:port]) and path prefix ("" or "/api/v3"). */
const char	*ghapp_api_host(const struct secret_app *);
const char	*ghapp_api_prefix(const struct secret_app *);
/*
 * The app's JWT: RS256 over {"iat": now-60, "exp": now+540, "iss": app_id}, signed
 * with the PEM RSA private key pem (len bytes). NUL-terminated in guarded memory
 * (sodium_free it), or NULL and *cause (never quoting the key).
 */
char		*ghapp_jwt(const unsigned char *pem, size_t len, const char *app_id, time_t now,
		    char **cause);
/*
 * The access_tokens request body for a session: {"repositories": [bare names],
 * "permissions": {...}}. NULL and *cause if the session has no repository or its
 * repositories have different owners (or not the configured owner).
 */
char		*ghapp_mint_body(const struct secret_app *, const struct session *, char **cause);
/* The body without "repositories" (shimbridge check, when no session uses the source). */
char		*ghapp_mint_body_all(const struct secret_app *);
/* What a token is minted for (source settings, session repositories): equal means reusable. */
char		*ghapp_signature(const struct secret_src *, const struct session *);
/*
 * Cross-check a loaded config's github_app sources: the private key names a
 * secret that holds a key; every session that uses one (a tool's secret, a git
 * host's) has repositories of one owner (the configured owner, if any), on the
 * app's host; git sends it as "x-access-token". -1 and *cause (no location).
 */
int		 ghapp_config_check(const struct config *, char **cause);
/* Parse a 201 answer; 0, or -1 and *cause. The token never appears in *cause. */
int		 ghapp_parse_token(const unsigned char *body, size_t len, struct ghapp_token *,
		    char **cause);
void		 ghapp_token_clear(struct ghapp_token *);
/* Find owner's installation in a GET /app/installations answer (login case-insensitive). */
int		 ghapp_parse_installations(const unsigned char *body, size_t len,
		    const char *owner, long long *id, char **cause);
/* GitHub's {"message": ...} of an error answer, printable and short, or NULL. */
char		*ghapp_error_message(const unsigned char *body, size_t len);
/* When to refresh: min(refresh_before, lifetime/2) before expires. */
time_t		 ghapp_refresh_at(time_t minted, time_t expires, int refresh_before);
/* Seconds to wait after the n-th failure in a row (n >= 1): 2, 4, 8, ... up to 60. */
int		 ghapp_backoff(int failures);
/* First 8 hex digits of the token's SHA-256 hash: names a token without revealing it. */
void		 ghapp_fingerprint(const unsigned char *, size_t, char out[9]);
/* "2026-11-25T07:00:00Z" for t (out: 21 bytes or more). */
void		 ghapp_time(time_t, char *out, size_t outlen);
/* A key's state for status and secret list (no secret in it); NULL if not github_app. */
json_t		*ghapp_status_json(const struct secret_val *);
void		 ghapp_state_free(struct ghapp_state *);
void		 ghapp_old_free(struct ghapp_old *);
/*
 * Take v's token out of service (v loses it; NULL if it has none): for session,
 * name, with the source's host, to be revoked from revoke_at on.
 */
struct ghapp_old *ghapp_retire(struct secret_val *v, const struct secret_src *,
		    const char *session, const char *name, time_t revoke_at);

#endif
