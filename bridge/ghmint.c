/* Minting, refreshing and revoking GitHub App installation tokens (see ghmint.h). */
#include <sys/queue.h>

#include <arpa/inet.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <jansson.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "audit.h"
#include "config.h"
#include "ghapp.h"
#include "ghmint.h"
#include "inject.h"
#include "keyring.h"
#include "log.h"
#include "secret.h"
#include "util.h"

#define GHMINT_TIMEOUT	30	/* seconds for connect, TLS and the answer */
#define GHMINT_CALL_RETRY 5	/* a call without a token retries a failed mint after this */

enum ghmint_what {
	GHMINT_LOOKUP,		/* GET /app/installations, then a mint */
	GHMINT_MINT,		/* POST /app/installations/{id}/access_tokens */
	GHMINT_REVOKE,		/* DELETE /installation/token */
};

/* One HTTP exchange with GitHub. */
struct ghmint {
	TAILQ_ENTRY(ghmint)		 entry;
	enum ghmint_what		 what;
	char				*session;	/* the key (LOOKUP, MINT) */
	char				*name;
	char				*sig;		/* what the key was when it started */
	int				 refresh;	/* the key had a token: "refresh" */
	struct ghapp_old		*old;		/* REVOKE: in the keyring's list */
	struct evhttp_connection	*conn;
	SSL				*ssl;		/* owned by conn's bufferevent */
	struct event			*reap;		/* zero-timeout: free after the callback */
	int				 finished;
};

static TAILQ_HEAD(, ghmint) ghmint_all = TAILQ_HEAD_INITIALIZER(ghmint_all);
static struct event_base	*ghmint_base;
static struct keyring		*ghmint_kr;
static struct config		*ghmint_cfg;	/* the server's, as of the last call */
static struct evdns_base	*ghmint_dns;
static int			 ghmint_stopping;

static void	ghmint_start(struct key *, enum ghmint_what);

/* Free an exchange (never from inside its own request callback). */
static void
ghmint_free(struct ghmint *m)
{
	TAILQ_REMOVE(&ghmint_all, m, entry);
	if (m->conn != NULL)
		evhttp_connection_free(m->conn);
	if (m->reap != NULL)
		event_free(m->reap);
	free(m->session);
	free(m->name);
	free(m->sig);
	free(m);
}

/* Zero-timeout event: the exchange is finished. */
static void
ghmint_reap_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	ghmint_free(arg);
}

/* One audit record for a token's life: never the token, its fingerprint. */
static void
ghmint_audit(const char *action, const char *session, const char *name, const char *fp,
    json_t *repos, json_t *perms, time_t expires, const char *result)
{
	json_t *a = json_object();
	char t[32];

	json_object_set_new(a, "event", json_string("github_app"));
	json_object_set_new(a, "action", json_string(action));
	if (session != NULL)
		json_object_set_new(a, "session", json_string(session));
	json_object_set_new(a, "secret", json_string(name));
	json_object_set_new(a, "fingerprint", json_string(fp != NULL ? fp : ""));
	json_object_set_new(a, "repositories", repos != NULL ? json_deep_copy(repos) :
	    json_array());
	json_object_set_new(a, "permissions", perms != NULL ? json_deep_copy(perms) :
	    json_object());
	ghapp_time(expires, t, sizeof t);
	json_object_set_new(a, "expires_at", json_string(t));
	json_object_set_new(a, "result", json_string(result));
	audit_write(a, keyring_redactor(ghmint_kr));
}

/* The key an exchange is for, if it is still the one it started for. */
static struct key *
ghmint_key(const struct ghmint *m)
{
	struct key *k = keyring_find(ghmint_kr, m->session, m->name);

	if (k == NULL || k->src->type != SECRET_GITHUB_APP || k->val.app == NULL ||
	    !k->val.refreshing || strcmp(k->val.app->sig, m->sig) != 0)
		return NULL;
	return k;
}

/* A mint (or lookup) failed: keep the token while it is valid, back off, say why. */
static void
ghmint_failed(struct ghmint *m, const char *why)
{
	struct key *k = ghmint_key(m);
	struct ghapp_state *st;
	time_t now = time(NULL);

	if (k == NULL)
		return;
	st = k->val.app;
	k->val.refreshing = 0;
	st->failures++;
	st->last_refresh = now;
	free(st->last_result);
	st->last_result = xstrdup(why);
	k->val.retry_at = now + ghapp_backoff(st->failures);
	log_warnx("secret %s (github_app), session %s: %s %s; %s", m->name, m->session,
	    m->refresh ? "refreshing the token failed:" : "minting a token failed:", why,
	    secret_usable(k->src, &k->val) ? "the current token stays in use" :
	    "the session has no valid token");
	ghmint_audit(m->refresh ? "refresh" : "mint", m->session, m->name,
	    k->val.value != NULL ? st->fp : NULL, st->repos, st->perms,
	    k->val.value != NULL ? k->val.expires_at : 0, why);
}

/* Split "host[:port]" into a name and a port (443 if none). */
static int
ghmint_hostport(const char *hp, char *name, size_t namelen, int *port)
{
	const char *colon = strrchr(hp, ':');
	size_t n = colon != NULL ? (size_t)(colon - hp) : strlen(hp);

	*port = 443;
	if (colon != NULL) {
		char *end;
		long p = strtol(colon + 1, &end, 10);

		if (*end != '\0' || p < 1 || p > 65535)
			return -1;
		*port = (int)p;
	}
	if (n == 0 || n >= namelen)
		return -1;
	memcpy(name, hp, n);
	name[n] = '\0';
	return 0;
}

static void	ghmint_done_cb(struct evhttp_request *, void *);

/*
 * Send one request to host (api host[:port]) over verified TLS: auth is the
 * Authorization value (guarded; copied into libevent's wiped heap), body NULL or
 * JSON. 0, or -1 and *cause.
 */
static int
ghmint_http(struct ghmint *m, const char *host, const char *ca_file,
    enum evhttp_cmd_type cmd, const char *path, const char *auth, const char *body,
    char **cause)
{
	struct bufferevent *bev;
	struct evhttp_request *req;
	struct evkeyvalq *h;
	struct timeval tv = { GHMINT_TIMEOUT, 0 };
	struct in6_addr a6;
	SSL_CTX *ctx;
	char name[256], num[32];
	int port;

	if (ghmint_hostport(host, name, sizeof name, &port) != 0) {
		xasprintf(cause, "bad host %s", host);
		return -1;
	}
	if (ghmint_dns == NULL && (ghmint_dns = evdns_base_new(ghmint_base,
	    EVDNS_BASE_INITIALIZE_NAMESERVERS | EVDNS_BASE_DISABLE_WHEN_INACTIVE)) == NULL) {
		*cause = xstrdup("no DNS resolver available");
		return -1;
	}
	if ((ctx = inject_client_ctx(ca_file, cause)) == NULL)
		return -1;
	m->ssl = SSL_new(ctx);
	SSL_CTX_free(ctx);
	if (m->ssl == NULL)
		goto nomem;
	if (inet_pton(AF_INET, name, &a6) == 1 || inet_pton(AF_INET6, name, &a6) == 1) {
		if (!X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(m->ssl), name))
			goto nomem;
	} else if (!SSL_set_tlsext_host_name(m->ssl, name) || !SSL_set1_host(m->ssl, name))
		goto nomem;
	SSL_set_verify(m->ssl, SSL_VERIFY_PEER, NULL);
	bev = bufferevent_openssl_socket_new(ghmint_base, -1, m->ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (bev == NULL)
		goto nomem;
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	m->conn = evhttp_connection_base_bufferevent_new(ghmint_base, ghmint_dns, bev, name,
	    (unsigned short)port);
	if (m->conn == NULL) {
		bufferevent_free(bev);
		m->ssl = NULL;
		goto nomem;
	}
	evhttp_connection_set_timeout_tv(m->conn, &tv);
	evhttp_connection_set_retries(m->conn, 0);
	evhttp_connection_set_max_headers_size(m->conn, 64 * 1024);
	evhttp_connection_set_max_body_size(m->conn, GHAPP_MAX_RESPONSE);
	if ((req = evhttp_request_new(ghmint_done_cb, m)) == NULL)
		goto nomem;
	h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Host", host);
	evhttp_add_header(h, "Accept", "application/vnd.github+json");
	evhttp_add_header(h, "User-Agent", "shimbridge/" SHIMBRIDGE_VERSION);
	evhttp_add_header(h, "X-GitHub-Api-Version", "2022-11-28");
	evhttp_add_header(h, "Authorization", auth);
	evhttp_add_header(h, "Connection", "close");
	if (body != NULL) {
		evhttp_add_header(h, "Content-Type", "application/json");
		snprintf(num, sizeof num, "%zu", strlen(body));
		evhttp_add_header(h, "Content-Length", num);
		evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
	}
	if (evhttp_make_request(m->conn, req, cmd, path) != 0)
		goto nomem;	/* libevent freed req */
	return 0;
nomem:
	if (m->conn == NULL && m->ssl != NULL) {
		SSL_free(m->ssl);
		m->ssl = NULL;
	}
	*cause = xstrdup("could not set up the request (out of memory or bad TLS setup)");
	return -1;
}

/* Why a request got no answer: TLS verification, or connection and timeout. */
static char *
ghmint_no_answer(struct ghmint *m, const char *host)
{
	char *why;
	long v = m->ssl != NULL ? SSL_get_verify_result(m->ssl) : X509_V_OK;

	if (v != X509_V_OK)
		xasprintf(&why, "the TLS certificate of %s was not accepted: %s", host,
		    X509_verify_cert_error_string(v));
	else
		xasprintf(&why, "no answer from https://%s (connection refused, TLS failed "
		    "or timed out after %d s)", host, GHMINT_TIMEOUT);
	return why;
}

/* A mint's answer: install the token, or fail. */
static void
ghmint_minted(struct ghmint *m, int code, const unsigned char *body, size_t len)
{
	struct ghapp_token t;
	struct ghapp_state *st;
	struct key *k;
	char *cause = NULL, *msg, fp[9];
	time_t now = time(NULL), grace;

	if (code != 201) {
		msg = ghapp_error_message(body, len);
		xasprintf(&cause, "GitHub answered HTTP %d%s%s%s", code, msg != NULL ? " (" : "",
		    msg != NULL ? msg : "", msg != NULL ? ")" : "");
		free(msg);
		if (code == 401)
			xasprintf(&msg, "%s: the app's JWT was refused; check app_id and the "
			    "private key", cause);
		else if (code == 404 || code == 422)
			xasprintf(&msg, "%s: check installation_id/owner, that the app is "
			    "installed on the session's repositories, and its permissions", cause);
		else
			msg = xstrdup(cause);
		ghmint_failed(m, msg);
		free(msg);
		free(cause);
		return;
	}
	if (ghapp_parse_token(body, len, &t, &cause) != 0) {
		xasprintf(&msg, "GitHub's answer could not be read: %s", cause);
		ghmint_failed(m, msg);
		free(msg);
		free(cause);
		return;
	}
	ghapp_fingerprint(t.value, t.len, fp);
	if ((k = ghmint_key(m)) == NULL || ghmint_stopping) {
		/* Reconfigured (or stopping) meanwhile: nobody will use it, revoke it now. */
		struct ghapp_old *o = xcalloc(1, sizeof *o);

		o->session = xstrdup(m->session);
		o->name = xstrdup(m->name);
		o->value = t.value;	/* transferred */
		o->len = t.len;
		t.value = NULL;
		memcpy(o->fp, fp, sizeof o->fp);
		o->expires_at = t.expires_at;
		o->repos = t.repositories != NULL ? json_incref(t.repositories) : NULL;
		o->perms = t.permissions != NULL ? json_incref(t.permissions) : NULL;
		if (k != NULL && k->val.app != NULL) {
			o->host = xstrdup(k->src->app.host);
			o->ca_file = k->src->app.ca_file != NULL ?
			    xstrdup(k->src->app.ca_file) : NULL;
			k->val.refreshing = 0;
		} else {
			const struct secret_src *src = ghmint_cfg != NULL ?
			    secret_resolve(ghmint_cfg, config_session_by_name(ghmint_cfg,
			    m->session), m->name) : NULL;

			o->host = xstrdup(src != NULL && src->type == SECRET_GITHUB_APP ?
			    src->app.host : "github.com");
			o->ca_file = src != NULL && src->type == SECRET_GITHUB_APP &&
			    src->app.ca_file != NULL ? xstrdup(src->app.ca_file) : NULL;
		}
		keyring_retire(ghmint_kr, o);
		keyring_changed(ghmint_kr);
		ghmint_audit("mint", m->session, m->name, fp, t.repositories, t.permissions,
		    t.expires_at, "not used: the session or its secret changed meanwhile");
		ghapp_token_clear(&t);
		return;
	}
	st = k->val.app;
	/*
	 * The replaced token lives on briefly for requests that fetched it just now;
	 * then it is revoked (before it would expire anyway).
	 */
	grace = k->val.value != NULL ? (k->val.expires_at - now) / 2 : 0;
	if (grace > GHAPP_REVOKE_GRACE)
		grace = GHAPP_REVOKE_GRACE;
	keyring_retire(ghmint_kr, ghapp_retire(&k->val, k->src, k->session, k->name,
	    now + (grace > 0 ? grace : 0)));
	k->val.value = t.value;		/* transferred */
	k->val.len = t.len;
	t.value = NULL;
	k->val.expires_at = t.expires_at;
	k->val.loaded_at = now;
	k->val.refreshing = 0;
	k->val.retry_at = 0;
	free(k->val.error);
	k->val.error = NULL;
	memcpy(st->fp, fp, sizeof st->fp);
	json_decref(st->repos);
	json_decref(st->perms);
	st->repos = t.repositories != NULL ? json_incref(t.repositories) : NULL;
	st->perms = t.permissions != NULL ? json_incref(t.permissions) : NULL;
	st->minted_at = now;
	st->last_refresh = now;
	st->failures = 0;
	free(st->last_result);
	st->last_result = xstrdup("ok");
	keyring_changed(ghmint_kr);
	log_info("secret %s (github_app), session %s: token %s %s, expires in %lld s",
	    m->name, m->session, fp, m->refresh ? "refreshed" : "minted",
	    (long long)(t.expires_at - now));
	ghmint_audit(m->refresh ? "refresh" : "mint", m->session, m->name, fp, st->repos,
	    st->perms, t.expires_at, "ok");
	ghapp_token_clear(&t);
}

/* A lookup's answer: remember the installation, then mint. */
static void
ghmint_looked_up(struct ghmint *m, int code, const unsigned char *body, size_t len)
{
	struct key *k = ghmint_key(m);
	char *cause = NULL, *msg;
	long long id = 0;

	if (k == NULL)
		return;
	if (code != 200) {
		msg = ghapp_error_message(body, len);
		xasprintf(&cause, "looking up the installation of %s: GitHub answered HTTP %d%s%s%s",
		    k->src->app.owner, code, msg != NULL ? " (" : "", msg != NULL ? msg : "",
		    msg != NULL ? ")" : "");
		free(msg);
		ghmint_failed(m, cause);
		free(cause);
		return;
	}
	if (ghapp_parse_installations(body, len, k->src->app.owner, &id, &cause) != 0) {
		ghmint_failed(m, cause);
		free(cause);
		return;
	}
	k->val.app->installation_id = id;
	k->val.refreshing = 0;
	ghmint_start(k, GHMINT_MINT);
}

/* A revocation's answer: audit it; the token leaves the keyring either way. */
static void
ghmint_revoked(struct ghmint *m, int code)
{
	struct ghapp_old *o = m->old;
	size_t i;
	char res[64];

	if (code == 204)
		snprintf(res, sizeof res, "ok");
	else if (code == 0)
		snprintf(res, sizeof res, "no answer");
	else
		snprintf(res, sizeof res, "GitHub answered HTTP %d", code);
	ghmint_audit("revoke", o->session, o->name, o->fp, o->repos, o->perms, o->expires_at,
	    res);
	if (code != 204)
		log_warnx("secret %s (github_app), session %s: revoking token %s: %s", o->name,
		    o->session != NULL ? o->session : "-", o->fp, res);
	for (i = 0; i < keyring_retired_count(ghmint_kr); i++) {
		if (keyring_retired(ghmint_kr, i) == o) {
			keyring_retired_drop(ghmint_kr, i);
			break;
		}
	}
	m->old = NULL;
}

/* An answer (or none): act on it, then free the exchange from the loop. */
static void
ghmint_done_cb(struct evhttp_request *req, void *arg)
{
	struct ghmint *m = arg;
	struct evbuffer *b;
	const unsigned char *body = NULL;
	size_t len = 0;
	int code = req != NULL ? evhttp_request_get_response_code(req) : 0;
	char *why;

	if (code != 0) {
		b = evhttp_request_get_input_buffer(req);
		len = evbuffer_get_length(b);
		body = len > 0 ? evbuffer_pullup(b, -1) : NULL;
		if (body == NULL)
			len = 0;
	}
	if (m->what == GHMINT_REVOKE)
		ghmint_revoked(m, code);
	else if (code == 0) {
		struct key *k = ghmint_key(m);

		why = ghmint_no_answer(m, k != NULL ? ghapp_api_host(&k->src->app) : "GitHub");
		ghmint_failed(m, why);
		free(why);
	} else if (m->what == GHMINT_LOOKUP)
		ghmint_looked_up(m, code, body, len);
	else
		ghmint_minted(m, code, body, len);
	m->finished = 1;
	event_active(m->reap, EV_TIMEOUT, 1);
}

/* Start a revocation of a retired token. */
static void
ghmint_revoke(struct ghapp_old *o)
{
	struct secret_app a;
	struct ghmint *m = xcalloc(1, sizeof *m);
	char *auth, *cause = NULL, *path;
	size_t n = 6 + o->len + 1;
	size_t i;

	memset(&a, 0, sizeof a);
	a.host = o->host;
	m->what = GHMINT_REVOKE;
	m->old = o;
	TAILQ_INSERT_TAIL(&ghmint_all, m, entry);
	if ((m->reap = event_new(ghmint_base, -1, 0, ghmint_reap_cb, m)) == NULL ||
	    (auth = sodium_malloc(n)) == NULL)
		fatalx("out of memory");
	o->revoking = 1;
	memcpy(auth, "token ", 6);
	memcpy(auth + 6, o->value, o->len);
	auth[n - 1] = '\0';
	xasprintf(&path, "%s/installation/token", ghapp_api_prefix(&a));
	if (ghmint_http(m, ghapp_api_host(&a), o->ca_file, EVHTTP_REQ_DELETE, path, auth, NULL,
	    &cause) != 0) {
		ghmint_audit("revoke", o->session, o->name, o->fp, o->repos, o->perms,
		    o->expires_at, cause);
		for (i = 0; i < keyring_retired_count(ghmint_kr); i++)
			if (keyring_retired(ghmint_kr, i) == o)
				keyring_retired_drop(ghmint_kr, i);
		m->old = NULL;
		event_active(m->reap, EV_TIMEOUT, 1);
	}
	sodium_free(auth);
	free(path);
	free(cause);
}

/* Start a lookup or mint for k (its settings, its session's repositories). */
static void
ghmint_start(struct key *k, enum ghmint_what what)
{
	const struct secret_app *a = &k->src->app;
	const struct session *s = config_session_by_name(ghmint_cfg, k->session);
	const struct key *pk;
	struct ghmint *m;
	char *jwt = NULL, *auth = NULL, *body = NULL, *path = NULL, *cause = NULL;
	size_t n;

	m = xcalloc(1, sizeof *m);
	m->session = xstrdup(k->session);
	m->name = xstrdup(k->name);
	m->sig = xstrdup(k->val.app->sig);
	m->refresh = k->val.value != NULL;
	TAILQ_INSERT_TAIL(&ghmint_all, m, entry);
	if ((m->reap = event_new(ghmint_base, -1, 0, ghmint_reap_cb, m)) == NULL)
		fatalx("out of memory");
	k->val.refreshing = 1;
	if (what == GHMINT_MINT && k->val.app->installation_id == 0)
		what = GHMINT_LOOKUP;
	m->what = what;
	if (s == NULL) {
		cause = xstrdup("the session is not in the running configuration");
		goto fail;
	}
	pk = keyring_find(ghmint_kr, k->session, a->private_key);
	if (pk == NULL)
		pk = keyring_find(ghmint_kr, NULL, a->private_key);
	if (pk == NULL || !secret_usable(pk->src, &pk->val)) {
		xasprintf(&cause, "the app's private key (secret %s) is not available%s%s",
		    a->private_key, pk != NULL && pk->val.error != NULL ? ": " : "",
		    pk != NULL && pk->val.error != NULL ? pk->val.error : "");
		goto fail;
	}
	if ((jwt = ghapp_jwt(pk->val.value, pk->val.len, a->app_id, time(NULL), &cause)) ==
	    NULL)
		goto fail;
	n = 7 + strlen(jwt) + 1;
	if ((auth = sodium_malloc(n)) == NULL)
		fatalx("out of guarded memory");
	snprintf(auth, n, "Bearer %s", jwt);
	if (what == GHMINT_LOOKUP)
		xasprintf(&path, "%s/app/installations?per_page=100", ghapp_api_prefix(a));
	else {
		if ((body = ghapp_mint_body(a, s, &cause)) == NULL)
			goto fail;
		xasprintf(&path, "%s/app/installations/%lld/access_tokens", ghapp_api_prefix(a),
		    k->val.app->installation_id);
	}
	if (ghmint_http(m, ghapp_api_host(a), a->ca_file, what == GHMINT_LOOKUP ?
	    EVHTTP_REQ_GET : EVHTTP_REQ_POST, path, auth, body, &cause) != 0)
		goto fail;
	log_debug("secret %s (github_app), session %s: %s", k->name, k->session,
	    what == GHMINT_LOOKUP ? "looking up the installation" : "minting a token");
	goto out;
fail:
	ghmint_failed(m, cause);
	m->finished = 1;
	event_active(m->reap, EV_TIMEOUT, 1);
out:
	if (jwt != NULL)
		sodium_free(jwt);
	if (auth != NULL)
		sodium_free(auth);
	free(body);
	free(path);
	free(cause);
}

/* Remember the loop, keyring and config the exchanges work with. */
static void
ghmint_set(struct event_base *base, struct keyring *kr, struct config *cfg)
{
	ghmint_base = base;
	ghmint_kr = kr;
	/* Held: an answer may arrive after a reload has dropped this config. */
	if (cfg != NULL && cfg != ghmint_cfg) {
		config_ref(cfg);
		if (ghmint_cfg != NULL)
			config_unref(ghmint_cfg);
		ghmint_cfg = cfg;
	}
}

/* Whether k should be minted now: wanted, or its refresh time has come. */
static int
ghmint_due(const struct key *k, time_t now)
{
	const struct ghapp_state *st = k->val.app;

	if (k->src->type != SECRET_GITHUB_APP || st == NULL || k->val.refreshing ||
	    now < k->val.retry_at || ghmint_stopping)
		return 0;
	if (k->val.value != NULL && now < k->val.expires_at)
		return now >= ghapp_refresh_at(st->minted_at, k->val.expires_at,
		    k->src->app.refresh_before);
	return st->wanted;
}

/* Start due mints, refreshes and revocations (see ghmint.h). */
void
ghmint_sweep(struct event_base *base, struct keyring *kr, struct config *cfg)
{
	time_t now = time(NULL);
	size_t i;

	ghmint_set(base, kr, cfg);
	for (i = 0; i < keyring_count(kr); i++) {
		struct key *k = keyring_key(kr, i);

		if (ghmint_due(k, now))
			ghmint_start(k, GHMINT_MINT);
	}
	for (i = 0; i < keyring_retired_count(kr);) {
		struct ghapp_old *o = keyring_retired(kr, i);

		if (o->revoking || now < o->revoke_at) {
			i++;
			continue;
		}
		if (now >= o->expires_at) {
			ghmint_audit("revoke", o->session, o->name, o->fp, o->repos, o->perms,
			    o->expires_at, "expired already");
			keyring_retired_drop(kr, i);
			continue;
		}
		ghmint_revoke(o);	/* may drop it (a failed start) */
		if (i < keyring_retired_count(kr) && keyring_retired(kr, i) == o)
			i++;
	}
}

/* A call needs k (see ghmint.h). */
int
ghmint_want(struct event_base *base, struct keyring *kr, struct config *cfg, struct key *k)
{
	if (k->src->type != SECRET_GITHUB_APP || k->val.app == NULL)
		return secret_usable(k->src, &k->val);
	ghmint_set(base, kr, cfg);
	k->val.app->wanted = 1;
	if (secret_usable(k->src, &k->val))
		return 1;
	/*
	 * A call that finds no valid token does not wait out a long back-off: it tries
	 * again if the last attempt is GHMINT_CALL_RETRY seconds old.
	 */
	if (!k->val.refreshing && !ghmint_stopping &&
	    time(NULL) >= k->val.app->last_refresh + GHMINT_CALL_RETRY)
		k->val.retry_at = 0;
	if (ghmint_due(k, time(NULL)))
		ghmint_start(k, GHMINT_MINT);
	/*
	 * Only a session's first mint is waited for. After failures the call is refused
	 * at once with the last reason (ghmint_why) while the retry runs in the
	 * background: the agent learns why instead of waiting for another failure.
	 */
	return k->val.refreshing && k->val.app->failures == 0;
}

/* Why k has no usable token (for the agent). */
const char *
ghmint_why(const struct key *k)
{
	static char buf[512];
	const struct ghapp_state *st = k->val.app;

	if (st != NULL && st->last_result != NULL && strcmp(st->last_result, "ok") != 0)
		snprintf(buf, sizeof buf, "the bridge could not get a GitHub App token for this "
		    "session (%s)", st->last_result);
	else if (k->val.value != NULL)
		snprintf(buf, sizeof buf, "the session's GitHub App token has expired");
	else
		snprintf(buf, sizeof buf, "the session has no GitHub App token yet");
	return buf;
}

/* Timer: the stop's deadline. */
static void
ghmint_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	*(int *)arg = 1;
}

/* Stop: revoke every live token within seconds (see ghmint.h). */
void
ghmint_stop(struct event_base *base, struct keyring *kr, int seconds)
{
	struct timeval tv = { seconds, 0 };
	struct event *deadline;
	struct ghmint *m;
	int over = 0;
	size_t i;

	ghmint_base = base;
	ghmint_kr = kr;
	ghmint_stopping = 1;
	for (i = 0; i < keyring_count(kr); i++) {
		struct key *k = keyring_key(kr, i);

		if (k->src->type == SECRET_GITHUB_APP)
			keyring_retire(kr, ghapp_retire(&k->val, k->src, k->session, k->name, 0));
	}
	/* Tokens a refresh just replaced waited out a grace for requests in flight: no more. */
	for (i = 0; i < keyring_retired_count(kr); i++)
		keyring_retired(kr, i)->revoke_at = 0;
	deadline = evtimer_new(base, ghmint_deadline_cb, &over);
	if (deadline != NULL)
		evtimer_add(deadline, &tv);
	for (;;) {
		ghmint_sweep(base, kr, ghmint_cfg);	/* starts the revocations */
		if (TAILQ_EMPTY(&ghmint_all) || over || deadline == NULL)
			break;
		event_base_loop(base, EVLOOP_ONCE);
	}
	if (deadline != NULL)
		event_free(deadline);
	while ((m = TAILQ_FIRST(&ghmint_all)) != NULL) {
		if (m->what == GHMINT_REVOKE && m->old != NULL)
			log_warnx("secret %s (github_app): token %s not revoked in time "
			    "(it expires by itself)", m->old->name, m->old->fp);
		ghmint_free(m);
	}
	if (ghmint_dns != NULL) {
		evdns_base_free(ghmint_dns, 0);
		ghmint_dns = NULL;
	}
	if (ghmint_cfg != NULL)
		config_unref(ghmint_cfg);
	ghmint_cfg = NULL;
}
