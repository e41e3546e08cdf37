/*
 * shimbridge check, GitHub App sources (docs/GITHUB-APP.md): sign the app's JWT,
 * mint a throw-away installation token for the first session that uses the
 * source (its repositories, the configured permissions) and revoke it at once.
 * HTTP and TLS through libcurl (certificate and host name verified); the JWT and
 * the token stay in guarded memory and are never printed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "admin.h"
#include "config.h"
#include "ghapp.h"
#include "keyring.h"
#include "secret.h"
#include "util.h"

#define APPCHECK_TIMEOUT	10	/* seconds per request */

/* An answer: status and body (guarded memory: a mint's answer holds the token). */
struct appcheck_resp {
	long		 status;
	unsigned char	*body;
	size_t		 len;
	int		 toolong;
	char		 error[CURL_ERROR_SIZE];
};

/* libcurl's body callback: keep up to GHAPP_MAX_RESPONSE bytes. */
static size_t
appcheck_body(char *buf, size_t size, size_t n, void *arg)
{
	struct appcheck_resp *r = arg;
	size_t take = size * n;

	if (r->body == NULL && (r->body = sodium_malloc(GHAPP_MAX_RESPONSE)) == NULL)
		return 0;
	if (take > GHAPP_MAX_RESPONSE - r->len) {
		r->toolong = 1;
		return 0;
	}
	memcpy(r->body + r->len, buf, take);
	r->len += take;
	return size * n;
}

/* One request: method to url with an Authorization value and an optional JSON body. */
static int
appcheck_http(const char *method, const char *url, const char *auth, const char *body,
    const char *ca_file, struct appcheck_resp *r)
{
	struct curl_slist *hdrs = NULL, *h;
	char *authhdr = NULL;
	size_t n = strlen("Authorization: ") + strlen(auth) + 1;
	CURLcode cc;
	CURL *curl;
	int rc = -1;

	memset(r, 0, sizeof *r);
	if ((curl = curl_easy_init()) == NULL || (authhdr = sodium_malloc(n)) == NULL) {
		snprintf(r->error, sizeof r->error, "out of memory");
		goto out;
	}
	snprintf(authhdr, n, "Authorization: %s", auth);
	hdrs = curl_slist_append(hdrs, authhdr);
	if (hdrs != NULL)
		hdrs = curl_slist_append(hdrs, "Accept: application/vnd.github+json");
	if (hdrs != NULL)
		hdrs = curl_slist_append(hdrs, "X-GitHub-Api-Version: 2022-11-28");
	if (hdrs != NULL && body != NULL)
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	if (hdrs == NULL) {
		snprintf(r->error, sizeof r->error, "out of memory");
		goto out;
	}
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	if (body != NULL)
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "shimbridge/" SHIMBRIDGE_VERSION);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https");
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(curl, CURLOPT_PROXY, "");	/* never a proxy from the environment */
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 5L);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT, (long)APPCHECK_TIMEOUT);
	curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
	if (ca_file != NULL)
		curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, appcheck_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, r->error);
	if ((cc = curl_easy_perform(curl)) != CURLE_OK) {
		if (r->toolong)
			snprintf(r->error, sizeof r->error, "the answer is too large");
		else if (r->error[0] == '\0')
			snprintf(r->error, sizeof r->error, "%s", curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->status);
	rc = 0;
out:
	for (h = hdrs; h != NULL; h = h->next)
		sodium_memzero(h->data, strlen(h->data));
	curl_slist_free_all(hdrs);
	if (authhdr != NULL)
		sodium_free(authhdr);
	if (curl != NULL)
		curl_easy_cleanup(curl);
	return rc;
}

/* Release an answer (wiped). */
static void
appcheck_resp_free(struct appcheck_resp *r)
{
	if (r->body != NULL)
		sodium_free(r->body);
	r->body = NULL;
}

/* " (GitHub's message)" of an error answer, or "". */
static char *
appcheck_msg(const struct appcheck_resp *r)
{
	char *m = ghapp_error_message(r->body, r->len), *out;

	if (m == NULL)
		return xstrdup("");
	xasprintf(&out, ": %s", m);
	free(m);
	return out;
}

/* The first session that uses src (a tool's secret or a git host's), or NULL. */
static const struct session *
appcheck_session(const struct config *c, const struct secret_src *src)
{
	size_t i, j, k;

	for (i = 0; i < c->nsessions; i++) {
		const struct session *s = &c->sessions[i];

		for (j = 0; j < s->ntools; j++) {
			const struct tool *t = config_tool(c, s->tools[j]);

			if (strcmp(s->tools[j], "git") == 0) {
				for (k = 0; k < c->ngit_hosts; k++)
					if (secret_resolve(c, s, c->git_hosts[k].secret) == src)
						return s;
				continue;
			}
			for (k = 0; t != NULL && k < t->nsecrets; k++)
				if (secret_resolve(c, s, t->secrets[k].secret) == src)
					return s;
		}
	}
	return NULL;
}

/* Check one source: JWT, installation, a throw-away token, its revocation. */
static void
appcheck_one(const struct config *c, struct keyring *kr, const struct secret_src *src,
    const struct session *owner_session, appcheck_say_fn say)
{
	const struct secret_app *a = &src->app;
	const struct session *s = appcheck_session(c, src);
	const struct key *pk;
	struct appcheck_resp r;
	struct ghapp_token t;
	char *jwt = NULL, *auth = NULL, *url = NULL, *body = NULL, *cause = NULL, *m = NULL;
	char what[512], fp[9], exp[32], base[512];
	long long id = a->installation_id;
	size_t n;

	memset(&r, 0, sizeof r);
	memset(&t, 0, sizeof t);
	snprintf(what, sizeof what, "secret %s (github_app, app %s%s%s)", src->name, a->app_id,
	    owner_session != NULL ? ", session " : "",
	    owner_session != NULL ? owner_session->name : "");
	snprintf(base, sizeof base, "https://%s%s", ghapp_api_host(a), ghapp_api_prefix(a));
	pk = keyring_get(kr, s, a->private_key);
	if (pk == NULL || pk->val.value == NULL) {
		say("FAIL", "%s: its private key (secret %s) has no value: %s", what,
		    a->private_key, pk != NULL && pk->val.error != NULL ? pk->val.error :
		    "not loaded");
		return;
	}
	if ((jwt = ghapp_jwt(pk->val.value, pk->val.len, a->app_id, time(NULL), &cause)) ==
	    NULL) {
		say("FAIL", "%s: secret %s: %s", what, a->private_key, cause);
		goto out;
	}
	n = 7 + strlen(jwt) + 1;
	if ((auth = sodium_malloc(n)) == NULL)
		goto nomem;
	snprintf(auth, n, "Bearer %s", jwt);
	if (id == 0) {
		xasprintf(&url, "%s/app/installations?per_page=100", base);
		if (appcheck_http("GET", url, auth, NULL, a->ca_file, &r) != 0) {
			say("FAIL", "%s: no answer from %s: %s", what, base, r.error);
			goto out;
		}
		if (r.status != 200) {
			m = appcheck_msg(&r);
			say("FAIL", "%s: GitHub refused the app's JWT (HTTP %ld%s): check app_id "
			    "%s and that secret %s holds this app's private key", what, r.status, m,
			    a->app_id, a->private_key);
			goto out;
		}
		if (ghapp_parse_installations(r.body, r.len, a->owner, &id, &cause) != 0) {
			say("FAIL", "%s: %s", what, cause);
			goto out;
		}
		appcheck_resp_free(&r);
		free(url);
	}
	/* No session uses it yet: a token for the installation's repositories proves the setup. */
	if (s == NULL)
		body = ghapp_mint_body_all(a);
	else if ((body = ghapp_mint_body(a, s, &cause)) == NULL) {
		say("FAIL", "%s: %s", what, cause);
		goto out;
	}
	xasprintf(&url, "%s/app/installations/%lld/access_tokens", base, id);
	if (appcheck_http("POST", url, auth, body, a->ca_file, &r) != 0) {
		say("FAIL", "%s: no answer from %s: %s", what, base, r.error);
		goto out;
	}
	if (r.status == 401) {
		m = appcheck_msg(&r);
		say("FAIL", "%s: GitHub refused the app's JWT (HTTP 401%s): check app_id %s and "
		    "that secret %s holds this app's private key", what, m, a->app_id,
		    a->private_key);
		goto out;
	}
	if (r.status != 201) {
		m = appcheck_msg(&r);
		say("FAIL", "%s: minting a token for %s%s failed (HTTP %ld%s): check the "
		    "installation (%lld), that it covers the session's repositories, and the "
		    "permissions", what, s != NULL ? "session " : "the installation",
		    s != NULL ? s->name : "", r.status, m, id);
		goto out;
	}
	if (ghapp_parse_token(r.body, r.len, &t, &cause) != 0) {
		say("FAIL", "%s: GitHub's answer could not be read: %s", what, cause);
		goto out;
	}
	appcheck_resp_free(&r);
	ghapp_fingerprint(t.value, t.len, fp);
	ghapp_time(t.expires_at, exp, sizeof exp);
	sodium_free(auth);
	n = 6 + t.len + 1;
	if ((auth = sodium_malloc(n)) == NULL)
		goto nomem;
	memcpy(auth, "token ", 6);
	memcpy(auth + 6, t.value, t.len);
	auth[n - 1] = '\0';
	free(url);
	xasprintf(&url, "%s/installation/token", base);
	if (appcheck_http("DELETE", url, auth, NULL, a->ca_file, &r) != 0 || r.status != 204)
		say("warning", "%s: minted token %s for %s%s, but revoking it failed (%s); "
		    "it expires by itself at %s", what, fp, s != NULL ? "session " :
		    "the installation", s != NULL ? s->name : "", r.error[0] != '\0' ?
		    r.error : "HTTP status not 204", exp);
	else
		say("ok", "%s: minted token %s for %s%s (installation %lld, expires %s) and "
		    "revoked it%s", what, fp, s != NULL ? "session " : "the installation",
		    s != NULL ? s->name : "", id, exp, s == NULL ? " (no session uses it yet)" :
		    "");
	goto out;
nomem:
	say("FAIL", "%s: cannot allocate guarded memory", what);
out:
	appcheck_resp_free(&r);
	ghapp_token_clear(&t);
	if (jwt != NULL)
		sodium_free(jwt);
	if (auth != NULL)
		sodium_free(auth);
	free(url);
	free(body);
	free(cause);
	free(m);
}

/* Every github_app source, host-wide and session overrides (see admin.h). */
void
appcheck_run(const struct config *c, struct keyring *kr, appcheck_say_fn say)
{
	size_t i, j;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		say("FAIL", "libcurl failed to initialise");
		return;
	}
	for (i = 0; i < c->nsecrets; i++)
		if (c->secrets[i].type == SECRET_GITHUB_APP)
			appcheck_one(c, kr, &c->secrets[i], NULL, say);
	for (i = 0; i < c->nsessions; i++)
		for (j = 0; j < c->sessions[i].nsecrets; j++)
			if (c->sessions[i].secrets[j].type == SECRET_GITHUB_APP)
				appcheck_one(c, kr, &c->sessions[i].secrets[j], &c->sessions[i],
				    say);
}
