/*
 * Unit tests: GitHub App tokens (ghapp.c): the RS256 JWT (checked with the public
 * key through OpenSSL), the request body, GitHub's answers, the refresh schedule,
 * fingerprints, and the parsing of the source in the config.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <sodium.h>

#include "config.h"
#include "ghapp.h"
#include "keyring.h"
#include "secret.h"

static EVP_PKEY *test_key;
static char *test_pem;		/* PKCS#1 "BEGIN RSA PRIVATE KEY", as GitHub gives it */
static size_t test_pem_len;

/* One RSA key for the whole run (generating one takes a moment). */
static int
setup_key(void **state)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *p;
	long n;

	(void)state;
	if (sodium_init() < 0)
		return -1;
	test_key = EVP_RSA_gen(2048);
	if (test_key == NULL || b == NULL ||
	    PEM_write_bio_PrivateKey_traditional(b, test_key, NULL, NULL, 0, NULL, NULL) != 1)
		return -1;
	n = BIO_get_mem_data(b, &p);
	test_pem = malloc((size_t)n);
	memcpy(test_pem, p, (size_t)n);
	test_pem_len = (size_t)n;
	BIO_free(b);
	return 0;
}

static int
teardown_key(void **state)
{
	(void)state;
	EVP_PKEY_free(test_key);
	free(test_pem);
	return 0;
}

/* Decode one base64url part (no padding allowed) into a NUL-terminated malloc'd buffer. */
static unsigned char *
b64url(const char *s, size_t len, size_t *outlen)
{
	unsigned char *out = malloc(len + 1);
	size_t i;

	for (i = 0; i < len; i++)
		assert_non_null(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		    "0123456789-_", s[i]));
	assert_int_equal(sodium_base642bin(out, len + 1, s, len, NULL, outlen, NULL,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING), 0);
	out[*outlen] = '\0';
	return out;
}

static void
test_jwt_signed_and_claims(void **state)
{
	char *cause = NULL, *jwt, *dot1, *dot2;
	unsigned char *h, *c, *sig;
	size_t hl, cl, sl;
	json_t *hj, *cj;
	EVP_MD_CTX *md;

	(void)state;
	jwt = ghapp_jwt((unsigned char *)test_pem, test_pem_len, "12345", 1700000000, &cause);
	assert_non_null(jwt);
	assert_null(cause);
	dot1 = strchr(jwt, '.');
	assert_non_null(dot1);
	dot2 = strchr(dot1 + 1, '.');
	assert_non_null(dot2);
	assert_null(strchr(dot2 + 1, '.'));
	assert_null(strchr(jwt, '='));
	h = b64url(jwt, (size_t)(dot1 - jwt), &hl);
	c = b64url(dot1 + 1, (size_t)(dot2 - dot1 - 1), &cl);
	sig = b64url(dot2 + 1, strlen(dot2 + 1), &sl);
	hj = json_loads((char *)h, 0, NULL);
	cj = json_loads((char *)c, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(hj, "alg")), "RS256");
	assert_string_equal(json_string_value(json_object_get(hj, "typ")), "JWT");
	assert_int_equal(json_integer_value(json_object_get(cj, "iat")), 1700000000 - 60);
	assert_int_equal(json_integer_value(json_object_get(cj, "exp")), 1700000000 + 540);
	assert_string_equal(json_string_value(json_object_get(cj, "iss")), "12345");
	assert_int_equal(json_object_size(cj), 3);
	/* RS256: RSASSA-PKCS1-v1_5 with SHA-256 over "header.claims", checked with the public key. */
	assert_int_equal(sl, 256);
	md = EVP_MD_CTX_new();
	assert_int_equal(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, test_key), 1);
	assert_int_equal(EVP_DigestVerify(md, sig, sl, (unsigned char *)jwt,
	    (size_t)(dot2 - jwt)), 1);
	/* A changed claim no longer verifies. */
	jwt[dot1 - jwt + 3] ^= 1;
	assert_int_not_equal(EVP_DigestVerify(md, sig, sl, (unsigned char *)jwt,
	    (size_t)(dot2 - jwt)), 1);
	EVP_MD_CTX_free(md);
	json_decref(hj);
	json_decref(cj);
	free(h);
	free(c);
	free(sig);
	sodium_free(jwt);
}

static void
test_jwt_bad_keys(void **state)
{
	char *cause = NULL;
	EVP_PKEY *ec;
	BIO *b;
	char *p;
	long n;

	(void)state;
	assert_null(ghapp_jwt((unsigned char *)"not a key", 9, "1", 1, &cause));
	assert_non_null(strstr(cause, "not a PEM RSA private key"));
	free(cause);
	cause = NULL;
	/* Cut short. */
	assert_null(ghapp_jwt((unsigned char *)test_pem, test_pem_len / 2, "1", 1, &cause));
	assert_non_null(cause);
	free(cause);
	cause = NULL;
	/* An EC key is a key, but not the RSA key RS256 needs. */
	ec = EVP_EC_gen("P-256");
	b = BIO_new(BIO_s_mem());
	PEM_write_bio_PrivateKey(b, ec, NULL, NULL, 0, NULL, NULL);
	n = BIO_get_mem_data(b, &p);
	assert_null(ghapp_jwt((unsigned char *)p, (size_t)n, "1", 1, &cause));
	assert_non_null(strstr(cause, "RSA"));
	free(cause);
	BIO_free(b);
	EVP_PKEY_free(ec);
}

/* A session with repositories. */
static void
make_session(struct session *s, char **repos, size_t n)
{
	memset(s, 0, sizeof *s);
	s->name = "alice";
	s->repos = repos;
	s->nrepos = n;
}

static void
test_mint_body(void **state)
{
	struct secret_app a;
	struct session s;
	char *r1[] = { "octo/repo", "Octo/other" }, *r2[] = { "octo/repo", "other/repo" };
	char *cause = NULL, *body;

	(void)state;
	memset(&a, 0, sizeof a);
	a.host = "github.com";
	a.permissions = json_pack("{s:s,s:s}", "contents", "write", "issues", "read");
	make_session(&s, r1, 2);
	body = ghapp_mint_body(&a, &s, &cause);
	assert_string_equal(body, "{\"permissions\":{\"contents\":\"write\",\"issues\":\"read\"},"
	    "\"repositories\":[\"repo\",\"other\"]}");
	free(body);
	/* The configured owner must be theirs (case-insensitively). */
	a.owner = "OCTO";
	body = ghapp_mint_body(&a, &s, &cause);
	assert_non_null(body);
	free(body);
	a.owner = "someone";
	assert_null(ghapp_mint_body(&a, &s, &cause));
	assert_non_null(strstr(cause, "not to the app installation's owner someone"));
	free(cause);
	a.owner = NULL;
	make_session(&s, r2, 2);
	assert_null(ghapp_mint_body(&a, &s, &cause));
	assert_non_null(strstr(cause, "different owners"));
	free(cause);
	make_session(&s, r2, 0);
	assert_null(ghapp_mint_body(&a, &s, &cause));
	assert_non_null(strstr(cause, "allows no repository"));
	free(cause);
	json_decref(a.permissions);
	a.permissions = NULL;
	make_session(&s, r1, 1);
	body = ghapp_mint_body(&a, &s, &cause);
	assert_string_equal(body, "{\"repositories\":[\"repo\"]}");
	free(body);
	assert_string_equal(ghapp_api_host(&a), "api.github.com");
	assert_string_equal(ghapp_api_prefix(&a), "");
	a.host = "ghe.example.com:8443";
	assert_string_equal(ghapp_api_host(&a), "ghe.example.com:8443");
	assert_string_equal(ghapp_api_prefix(&a), "/api/v3");
}

static void
test_parse_token(void **state)
{
	static const char ok[] = "{\"token\":\"ghs_16C7e42F292c6912E7710c838347Ae178B4a\","
	    "\"expires_at\":\"2026-11-25T07:00:00Z\",\"permissions\":{\"contents\":\"write\","
	    "\"metadata\":\"read\"},\"repository_selection\":\"selected\",\"repositories\":"
	    "[{\"id\":1,\"name\":\"repo\",\"full_name\":\"octo/repo\"}]}";
	static const char *const bad[] = {
		"", "[]", "{}", "{\"token\":5,\"expires_at\":\"2026-11-25T07:00:00Z\"}",
		"{\"token\":\"\",\"expires_at\":\"2026-11-25T07:00:00Z\"}",
		"{\"token\":\"a b\",\"expires_at\":\"2026-11-25T07:00:00Z\"}",
		"{\"token\":\"a\\nb\",\"expires_at\":\"2026-11-25T07:00:00Z\"}",
		"{\"token\":\"abc\"}", "{\"token\":\"abc\",\"expires_at\":\"tomorrow\"}",
		"{\"token\":\"abc\",\"expires_at\":\"2026-11-25T07:00:00+01:00\"}",
		"{\"token\":\"abc\",\"expires_at\":\"2026-11-25T07:00:00Z\",\"permissions\":[]}",
		"{\"token\":\"abc\",\"expires_at\":\"2026-11-25T07:00:00Z\",\"repositories\":{}}",
		"{\"token\":\"abc\",\"token\":\"def\",\"expires_at\":\"2026-11-25T07:00:00Z\"}",
	};
	struct ghapp_token t;
	char *cause = NULL;
	size_t i;

	(void)state;
	assert_int_equal(ghapp_parse_token((const unsigned char *)ok, sizeof ok - 1, &t,
	    &cause), 0);
	assert_int_equal(t.len, 40);
	assert_memory_equal(t.value, "ghs_16C7e42F292c6912E7710c838347Ae178B4a", 40);
	assert_int_equal(t.expires_at, 1795590000);	/* 2026-11-25T07:00:00Z */
	assert_string_equal(json_string_value(json_object_get(t.permissions, "contents")),
	    "write");
	assert_int_equal(json_array_size(t.repositories), 1);
	assert_string_equal(json_string_value(json_array_get(t.repositories, 0)), "octo/repo");
	ghapp_token_clear(&t);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cause = NULL;
		assert_int_equal(ghapp_parse_token((const unsigned char *)bad[i], strlen(bad[i]),
		    &t, &cause), -1);
		assert_non_null(cause);
		assert_null(strstr(cause, "abc"));	/* never the token */
		assert_null(t.value);
		free(cause);
	}
}

static void
test_parse_installations(void **state)
{
	static const char list[] = "[{\"id\":5,\"account\":{\"login\":\"someone\"}},"
	    "{\"id\":678,\"account\":{\"login\":\"Octo\"}},{\"account\":null}]";
	char *cause = NULL;
	long long id = 0;

	(void)state;
	assert_int_equal(ghapp_parse_installations((const unsigned char *)list, sizeof list - 1,
	    "octo", &id, &cause), 0);
	assert_int_equal(id, 678);
	assert_int_equal(ghapp_parse_installations((const unsigned char *)list, sizeof list - 1,
	    "nobody", &id, &cause), -1);
	assert_non_null(strstr(cause, "not installed on nobody"));
	free(cause);
	assert_int_equal(ghapp_parse_installations((const unsigned char *)"{}", 2, "octo", &id,
	    &cause), -1);
	free(cause);
	assert_int_equal(ghapp_parse_installations((const unsigned char *)
	    "[{\"id\":\"7\",\"account\":{\"login\":\"octo\"}}]", 43, "octo", &id, &cause), -1);
	free(cause);
}

static void
test_error_message(void **state)
{
	char *m;

	(void)state;
	m = ghapp_error_message((const unsigned char *)"{\"message\":\"Bad\\ncredentials\"}",
	    30);
	assert_string_equal(m, "Bad credentials");
	free(m);
	assert_null(ghapp_error_message((const unsigned char *)"<html>", 6));
	assert_null(ghapp_error_message((const unsigned char *)"{}", 2));
}

static void
test_schedule(void **state)
{
	(void)state;
	/* An hour's token with the default 600 s: refreshed 10 minutes before it expires. */
	assert_int_equal(ghapp_refresh_at(1000, 4600, 600), 4000);
	/* A short-lived token: at half its life. */
	assert_int_equal(ghapp_refresh_at(1000, 1020, 600), 1010);
	assert_int_equal(ghapp_refresh_at(1000, 1021, 5), 1016);
	/* Nonsense from the host (expired already): refresh now. */
	assert_int_equal(ghapp_refresh_at(1000, 900, 600), 900);
	assert_int_equal(ghapp_backoff(0), 0);
	assert_int_equal(ghapp_backoff(1), 2);
	assert_int_equal(ghapp_backoff(2), 4);
	assert_int_equal(ghapp_backoff(5), 32);
	assert_int_equal(ghapp_backoff(6), 60);
	assert_int_equal(ghapp_backoff(1000), 60);
}

static void
test_fingerprint_and_time(void **state)
{
	char fp[9], t[32];

	(void)state;
	ghapp_fingerprint((const unsigned char *)"abc", 3, fp);
	assert_string_equal(fp, "ba7816bf");	/* SHA-256("abc") */
	ghapp_time(1795590000, t, sizeof t);
	assert_string_equal(t, "2026-11-25T07:00:00Z");
	ghapp_time(0, t, sizeof t);
	assert_string_equal(t, "-");
}

/* Parse a source object given as JSON text. */
static int
parse(const char *text, struct secret_src *s, char **cause)
{
	json_t *o = json_loads(text, 0, NULL);
	int rc;

	assert_non_null(o);
	*cause = NULL;
	rc = secret_parse(o, "github", "secrets.github", s, cause);
	json_decref(o);
	return rc;
}

static void
test_source_parse(void **state)
{
	static const char *const bad[] = {
		"{\"source\":\"github_app\",\"installation_id\":1,\"private_key\":\"k\"}",
		"{\"source\":\"github_app\",\"app_id\":\"x1\",\"installation_id\":1,\"private_key\":\"k\"}",
		"{\"source\":\"github_app\",\"app_id\":1,\"private_key\":\"k\"}",
		"{\"source\":\"github_app\",\"app_id\":1,\"installation_id\":1,\"owner\":\"o\",\"private_key\":\"k\"}",
		"{\"source\":\"github_app\",\"app_id\":1,\"installation_id\":1}",
		"{\"source\":\"github_app\",\"app_id\":1,\"installation_id\":1,\"private_key\":\"-----BEGIN RSA\"}",
		"{\"source\":\"github_app\",\"app_id\":1,\"installation_id\":1,\"private_key\":\"github\"}",
		"{\"source\":\"github_app\",\"app_id\":1,\"installation_id\":1,\"private_key\":\"k\",\"permissions\":{\"contents\":\"all\"}}",
		"{\"source\":\"github_app\",\"app_id\":1,\"installation_id\":1,\"private_key\":\"k\",\"host\":\"a/b\"}",
		"{\"source\":\"github_app\",\"app_id\":1,\"installation_id\":1,\"private_key\":\"k\",\"ca_file\":\"rel.pem\"}",
		"{\"source\":\"github_app\",\"app_id\":1,\"installation_id\":1,\"private_key\":\"k\",\"refresh_before\":0}",
		"{\"source\":\"github_app\",\"app_id\":1,\"installation_id\":1,\"private_key\":\"k\",\"path\":\"/x\"}",
		"{\"source\":\"github_app\",\"app_id\":1,\"owner\":\"bad owner\",\"private_key\":\"k\"}",
	};
	struct secret_src s;
	char *cause;
	size_t i;

	(void)state;
	assert_int_equal(parse("{\"source\":\"github_app\",\"app_id\":12345,\"installation_id\":678,"
	    "\"private_key\":\"app-key\",\"permissions\":{\"contents\":\"write\"},\"host\":"
	    "\"localhost:8443\",\"ca_file\":\"/etc/ca.pem\",\"refresh_before\":300}", &s, &cause),
	    0);
	assert_int_equal(s.type, SECRET_GITHUB_APP);
	assert_string_equal(s.app.app_id, "12345");
	assert_int_equal(s.app.installation_id, 678);
	assert_null(s.app.owner);
	assert_string_equal(s.app.private_key, "app-key");
	assert_string_equal(s.app.host, "localhost:8443");
	assert_string_equal(s.app.ca_file, "/etc/ca.pem");
	assert_int_equal(s.app.refresh_before, 300);
	secret_clear(&s);
	assert_int_equal(parse("{\"source\":\"github_app\",\"app_id\":\"7\",\"owner\":\"octo\","
	    "\"private_key\":\"k\"}", &s, &cause), 0);
	assert_string_equal(s.app.app_id, "7");
	assert_string_equal(s.app.owner, "octo");
	assert_string_equal(s.app.host, "github.com");
	assert_int_equal(s.app.refresh_before, 600);
	assert_null(s.app.permissions);
	secret_clear(&s);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(parse(bad[i], &s, &cause), -1);
		assert_non_null(cause);
		free(cause);
		secret_clear(&s);
	}
}

/* A github_app value is usable until its expiry and pending while a mint is under way. */
static void
test_usable(void **state)
{
	struct secret_src s;
	struct secret_val v;

	(void)state;
	memset(&s, 0, sizeof s);
	memset(&v, 0, sizeof v);
	s.type = SECRET_GITHUB_APP;
	assert_false(secret_usable(&s, &v));
	assert_false(secret_pending(&s, &v));
	v.refreshing = 1;
	assert_true(secret_pending(&s, &v));
	v.value = sodium_malloc(4);
	memcpy(v.value, "tokn", 4);
	v.len = 4;
	v.expires_at = time(NULL) + 60;
	assert_true(secret_usable(&s, &v));
	v.expires_at = time(NULL) - 1;
	assert_false(secret_usable(&s, &v));
	/* Nothing else waits. */
	s.type = SECRET_FILE;
	assert_false(secret_pending(&s, &v));
	secret_val_clear(&v);
}

/* A config with one github_app source and sessions alice (repos ra) and bob. */
static void
make_config(struct config *c, struct secret_src *src, struct session *ss, char **ra,
    size_t nra, char **rb)
{
	memset(c, 0, sizeof *c);
	memset(src, 0, sizeof *src);
	src->name = "github";
	src->type = SECRET_GITHUB_APP;
	src->app.app_id = "1";
	src->app.installation_id = 2;
	src->app.private_key = "app-key";
	src->app.host = "github.com";
	src->app.refresh_before = 600;
	make_session(&ss[0], ra, nra);
	make_session(&ss[1], rb, 1);
	ss[1].name = "bob";
	c->secrets = src;
	c->nsecrets = 1;
	c->sessions = ss;
	c->nsessions = 2;
}

/* Give a key a token, as a mint would. */
static void
give_token(struct key *k, const char *tok)
{
	k->val.value = sodium_malloc(strlen(tok));
	memcpy(k->val.value, tok, strlen(tok));
	k->val.len = strlen(tok);
	k->val.expires_at = time(NULL) + 3600;
	ghapp_fingerprint(k->val.value, k->val.len, k->val.app->fp);
}

/*
 * The keyring keeps one key per session for a host github_app source; a reload
 * keeps a token whose session and settings did not change, and retires (for
 * revocation, still redacted) one whose repositories changed or whose session went.
 */
static void
test_keyring_per_session(void **state)
{
	struct config c1, c2, c3;
	struct secret_src s1, s2, s3;
	struct session ss1[2], ss2[2], ss3[2];
	char *ra[] = { "octo/repo", "octo/more" }, *rb[] = { "octo/b" };
	struct keyring *kr = keyring_new();
	char **w = NULL;
	size_t nw = 0;
	struct key *a, *b;

	(void)state;
	make_config(&c1, &s1, ss1, ra, 1, rb);
	keyring_load(kr, &c1, &w, &nw);
	a = keyring_find(kr, "alice", "github");
	b = keyring_find(kr, "bob", "github");
	assert_non_null(a);
	assert_non_null(b);
	assert_ptr_equal(keyring_get(kr, &ss1[0], "github"), a);
	assert_null(a->val.value);
	give_token(a, "ghs_alice_token");
	give_token(b, "ghs_bob_token");
	keyring_changed(kr);
	/* Same settings: both tokens stay. */
	make_config(&c2, &s2, ss2, ra, 1, rb);
	keyring_load(kr, &c2, &w, &nw);
	a = keyring_find(kr, "alice", "github");
	assert_non_null(a->val.value);
	assert_memory_equal(a->val.value, "ghs_alice_token", 15);
	assert_int_equal(keyring_retired_count(kr), 0);
	/* alice gains a repository: her token is retired, bob's stays. */
	make_config(&c3, &s3, ss3, ra, 2, rb);
	keyring_load(kr, &c3, &w, &nw);
	a = keyring_find(kr, "alice", "github");
	b = keyring_find(kr, "bob", "github");
	assert_null(a->val.value);
	assert_non_null(b->val.value);
	assert_int_equal(keyring_retired_count(kr), 1);
	assert_string_equal(keyring_retired(kr, 0)->session, "alice");
	assert_memory_equal(keyring_retired(kr, 0)->value, "ghs_alice_token", 15);
	assert_string_equal(keyring_retired(kr, 0)->host, "github.com");
	/* Bob's session goes: his token too. */
	c3.nsessions = 1;
	keyring_load(kr, &c3, &w, &nw);
	assert_null(keyring_find(kr, "bob", "github"));
	assert_int_equal(keyring_retired_count(kr), 2);
	assert_string_equal(keyring_retired(kr, 1)->session, "bob");
	keyring_retired_drop(kr, 0);
	assert_int_equal(keyring_retired_count(kr), 1);
	assert_string_equal(keyring_retired(kr, 0)->session, "bob");
	keyring_free(kr);
	free(w);
}

/*
 * A reload while a token a refresh replaced is still in its grace (ghmint keeps it
 * for requests that fetched it just now). The keyring also holds the host's key of
 * the source (no session): the reload looked for that key's older tokens with
 * strcmp(session, NULL), and the daemon died of SIGSEGV (ghapp.bats, twice in CI).
 * The grace token of a session that stays keeps its grace; a session that goes
 * has its tokens revoked at once, the one in its grace too.
 */
static void
test_keyring_reload_in_grace(void **state)
{
	struct config c1;
	struct secret_src s1;
	struct session ss1[2];
	char *ra[] = { "octo/repo" }, *rb[] = { "octo/b" };
	struct keyring *kr = keyring_new();
	struct key *a, *b;
	char **w = NULL;
	size_t nw = 0, i;
	time_t now = time(NULL);

	(void)state;
	make_config(&c1, &s1, ss1, ra, 1, rb);
	keyring_load(kr, &c1, &w, &nw);
	assert_non_null(keyring_find(kr, NULL, "github"));	/* the host's key */
	a = keyring_find(kr, "alice", "github");
	b = keyring_find(kr, "bob", "github");
	/* Each session's token was refreshed just now: the old ones wait out a grace. */
	give_token(a, "ghs_alice_old");
	give_token(b, "ghs_bob_old");
	keyring_retire(kr, ghapp_retire(&a->val, a->src, a->session, a->name, now + 10));
	keyring_retire(kr, ghapp_retire(&b->val, b->src, b->session, b->name, now + 10));
	give_token(a, "ghs_alice_new");
	give_token(b, "ghs_bob_new");
	keyring_changed(kr);
	assert_int_equal(keyring_retired_count(kr), 2);
	/* The same config again: both sessions stay, nothing changes. */
	keyring_load(kr, &c1, &w, &nw);
	assert_int_equal(keyring_retired_count(kr), 2);
	for (i = 0; i < 2; i++)
		assert_true(keyring_retired(kr, i)->revoke_at == now + 10);
	/* Bob's session goes: his token and the one in its grace are revoked now. */
	c1.nsessions = 1;
	keyring_load(kr, &c1, &w, &nw);
	assert_null(keyring_find(kr, "bob", "github"));
	assert_int_equal(keyring_retired_count(kr), 3);
	for (i = 0; i < 3; i++) {
		struct ghapp_old *o = keyring_retired(kr, i);

		if (strcmp(o->session, "bob") == 0)
			assert_true(o->revoke_at <= time(NULL));
		else
			assert_true(o->revoke_at == now + 10);
	}
	keyring_free(kr);
	free(w);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jwt_signed_and_claims),
		cmocka_unit_test(test_jwt_bad_keys),
		cmocka_unit_test(test_mint_body),
		cmocka_unit_test(test_parse_token),
		cmocka_unit_test(test_parse_installations),
		cmocka_unit_test(test_error_message),
		cmocka_unit_test(test_schedule),
		cmocka_unit_test(test_fingerprint_and_time),
		cmocka_unit_test(test_source_parse),
		cmocka_unit_test(test_usable),
		cmocka_unit_test(test_keyring_per_session),
		cmocka_unit_test(test_keyring_reload_in_grace),
	};

	return cmocka_run_group_tests(tests, setup_key, teardown_key);
}
