/* The audit log's hash chain: sealing, signing, parsing, verifying records (auditchain.h). */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "auditchain.h"
#include "util.h"

#define AUDITCHAIN_HEXLEN	(2 * AUDITCHAIN_HASH)
#define AUDITCHAIN_SIGHEX	(2 * AUDITCHAIN_SIG)
/* ,"sig":"<128 hex>"} */
#define AUDITCHAIN_SIGTAIL	(8 + AUDITCHAIN_SIGHEX + 2)

/* The hash of a line. */
void
auditchain_hash(const void *line, size_t len, unsigned char out[AUDITCHAIN_HASH])
{
	crypto_generichash(out, AUDITCHAIN_HASH, line, len, NULL, 0);
}

/* Lowercase hex. */
void
auditchain_hex(const unsigned char *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

/* Exactly 2n lowercase or uppercase hex digits into n bytes. */
int
auditchain_unhex(const char *s, size_t slen, unsigned char *b, size_t n)
{
	size_t i;
	int hi, lo;

	if (slen != 2 * n)
		return -1;
	for (i = 0; i < n; i++) {
		if ((hi = util_hexval((unsigned char)s[2 * i])) < 0 ||
		    (lo = util_hexval((unsigned char)s[2 * i + 1])) < 0)
			return -1;
		b[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

/* A string member of exactly want bytes, decoded as hex into b; 1 found, 0 absent, -1 bad. */
static int
auditchain_hexmember(json_t *o, const char *key, unsigned char *b, size_t n)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL)
		return 0;
	if (!json_is_string(v) || auditchain_unhex(json_string_value(v),
	    json_string_length(v), b, n) != 0)
		return -1;
	return 1;
}

/* Parse one line and its chain members. */
int
auditchain_parse(const char *line, size_t len, struct auditchain_rec *r, char **cause)
{
	static const unsigned char zero[AUDITCHAIN_HASH];
	char tail[128 + AUDITCHAIN_HEXLEN], hex[AUDITCHAIN_HEXLEN + 1];
	json_t *o = NULL, *v;
	const char *event, *reason;
	size_t tlen, bend;
	int rc = -1, hs, hp, hk;

	memset(r, 0, sizeof r[0]);
	if (len > AUDITCHAIN_LINE_MAX) {
		*cause = xstrdup("the line is too long to be a record");
		goto out;
	}
	auditchain_hash(line, len, r->hash);
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (o == NULL || !json_is_object(o)) {
		*cause = xstrdup("not a JSON object");
		goto out;
	}
	v = json_object_get(o, "seq");
	hp = auditchain_hexmember(o, "prev", r->prev, AUDITCHAIN_HASH);
	hs = auditchain_hexmember(o, "sig", r->sig, AUDITCHAIN_SIG);
	hk = auditchain_hexmember(o, "key", r->key, AUDITCHAIN_PK);
	event = json_string_value(json_object_get(o, "event"));
	r->checkpoint = event != NULL && strcmp(event, AUDITCHAIN_EVENT) == 0;
	if (v == NULL && hp == 0 && hs == 0) {
		rc = 0;		/* an unchained record */
		goto out;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 1 || hp != 1 || hs < 0) {
		*cause = xstrdup("malformed chain members (seq, prev, sig)");
		goto out;
	}
	r->seq = (unsigned long long)json_integer_value(v);
	r->has_sig = hs == 1;
	if (r->has_sig && !r->checkpoint) {
		*cause = xstrdup("a signature on a record that is not a checkpoint");
		goto out;
	}
	/* The members must be the last ones, in the canonical form the writer made. */
	if (line[len - 1] != '}') {
		*cause = xstrdup("the record does not end with '}'");
		goto out;
	}
	bend = len - 1;		/* where the unsigned line has its '}' */
	if (r->has_sig) {
		if (len < AUDITCHAIN_SIGTAIL + 1 || memcmp(line + len - AUDITCHAIN_SIGTAIL,
		    ",\"sig\":\"", 8) != 0 || line[len - 2] != '"') {
			*cause = xstrdup("the signature is not the last member");
			goto out;
		}
		bend = r->signed_len = len - AUDITCHAIN_SIGTAIL;
	}
	auditchain_hex(r->prev, AUDITCHAIN_HASH, hex);
	tlen = (size_t)snprintf(tail, sizeof tail, ",\"seq\":%llu,\"prev\":\"%s\"", r->seq, hex);
	if (bend < tlen + 1 || memcmp(line + bend - tlen, tail, tlen) != 0) {
		*cause = xstrdup("the chain members are not the last ones or not in canonical form");
		goto out;
	}
	r->chained = 1;
	if (r->checkpoint) {
		r->genesis = memcmp(r->prev, zero, sizeof zero) == 0;
		if (hk < 0) {
			*cause = xstrdup("malformed key member");
			goto out;
		}
		r->has_key = hk == 1;
		if ((reason = json_string_value(json_object_get(o, "reason"))) != NULL &&
		    strlen(reason) < sizeof r->reason)
			memcpy(r->reason, reason, strlen(reason) + 1);
	}
	rc = 0;
out:
	json_decref(o);
	return rc;
}

/* obj + ,"seq":N,"prev":"hex"}. */
int
auditchain_seal(const char *obj, size_t len, unsigned long long seq,
    const unsigned char prev[AUDITCHAIN_HASH], char **out, size_t *outlen)
{
	char hex[AUDITCHAIN_HEXLEN + 1];
	size_t i;

	if (len < 2 || obj[0] != '{' || obj[len - 1] != '}')
		return -1;
	for (i = 1; i < len - 1; i++) {
		if (obj[i] != ' ')
			break;
	}
	if (i == len - 1)
		return -1;	/* {}: no member to follow */
	auditchain_hex(prev, AUDITCHAIN_HASH, hex);
	*outlen = (size_t)xasprintf(out, "%.*s,\"seq\":%llu,\"prev\":\"%s\"}", (int)(len - 1),
	    obj, seq, hex);
	return 0;
}

/* The message a checkpoint signature covers: context, then the line without its sig member. */
static unsigned char *
auditchain_sigmsg(const char *line, size_t signed_len, size_t *mlen)
{
	size_t clen = sizeof AUDITCHAIN_SIG_CONTEXT - 1;
	unsigned char *m = xmalloc(clen + signed_len + 1);

	memcpy(m, AUDITCHAIN_SIG_CONTEXT, clen);
	memcpy(m + clen, line, signed_len);
	m[clen + signed_len] = '}';
	*mlen = clen + signed_len + 1;
	return m;
}

/* Sign a sealed line: replace its closing '}' by ,"sig":"hex"}. */
void
auditchain_sign(char **line, size_t *len, const unsigned char *sk)
{
	unsigned char sig[AUDITCHAIN_SIG], *m;
	char hex[AUDITCHAIN_SIGHEX + 1], *n;
	size_t mlen;

	m = auditchain_sigmsg(*line, *len - 1, &mlen);
	crypto_sign_detached(sig, NULL, m, mlen, sk);
	free(m);
	auditchain_hex(sig, sizeof sig, hex);
	*len = (size_t)xasprintf(&n, "%.*s,\"sig\":\"%s\"}", (int)(*len - 1), *line, hex);
	free(*line);
	*line = n;
}

/* Verify a parsed checkpoint's signature. */
int
auditchain_sig_ok(const char *line, const struct auditchain_rec *r,
    const unsigned char pk[AUDITCHAIN_PK])
{
	unsigned char *m;
	size_t mlen;
	int ok;

	if (!r->has_sig)
		return 0;
	m = auditchain_sigmsg(line, r->signed_len, &mlen);
	ok = crypto_sign_verify_detached(r->sig, m, mlen, pk) == 0;
	free(m);
	return ok;
}

/* Read the signing key file (64 hex digits of the seed). */
int
auditchain_load_key(const char *path, unsigned char *sk, unsigned char pk[AUDITCHAIN_PK],
    char **cause)
{
	unsigned char *seed = NULL;
	char *buf = NULL;
	struct stat st;
	ssize_t n;
	size_t len;
	int fd = -1, rc = -1;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		xasprintf(cause, "cannot open the audit signing key %s: %s", path, strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077) != 0) {
		xasprintf(cause, "the audit signing key %s must be a regular file that only its "
		    "owner may read (chmod 0600)", path);
		goto out;
	}
	buf = sodium_malloc(256);
	seed = sodium_malloc(crypto_sign_SEEDBYTES);
	if (buf == NULL || seed == NULL) {
		xasprintf(cause, "cannot allocate guarded memory for the audit signing key");
		goto out;
	}
	n = read(fd, buf, 255);
	len = n > 0 ? (size_t)n : 0;
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (n < 0 || auditchain_unhex(buf, len, seed, crypto_sign_SEEDBYTES) != 0) {
		xasprintf(cause, "the audit signing key %s must hold 64 hex digits (shimbridge "
		    "audit keygen makes one)", path);
		goto out;
	}
	crypto_sign_seed_keypair(pk, sk, seed);
	rc = 0;
out:
	if (buf != NULL)
		sodium_free(buf);
	if (seed != NULL)
		sodium_free(seed);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The key file from the config (a path or a systemd credential). */
char *
auditchain_key_path(const char *file, const char *credential, char **cause)
{
	const char *dir;
	char *p;

	*cause = NULL;
	if (credential != NULL) {
		if ((dir = getenv("CREDENTIALS_DIRECTORY")) == NULL || dir[0] != '/') {
			xasprintf(cause, "audit.sign_key_credential %s: CREDENTIALS_DIRECTORY is "
			    "not set (start the daemon with LoadCredential=)", credential);
			return NULL;
		}
		xasprintf(&p, "%s/%s", dir, credential);
		return p;
	}
	return file != NULL ? xstrdup(file) : NULL;
}

/* The last record of an open file. */
int
auditchain_tail(int fd, unsigned long long *seq, unsigned char hash[AUDITCHAIN_HASH],
    int *torn)
{
	struct auditchain_rec r;
	struct stat st;
	char *buf = NULL, *cause = NULL;
	size_t n, got = 0, end, start;
	off_t off;
	ssize_t k;
	int rc = -1;

	*torn = 0;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return -1;
	if (st.st_size == 0)
		return 0;
	n = (size_t)st.st_size < AUDITCHAIN_TAIL_MAX ? (size_t)st.st_size : AUDITCHAIN_TAIL_MAX;
	off = st.st_size - (off_t)n;
	buf = xmalloc(n);
	while (got < n) {
		k = pread(fd, buf + got, n - got, off + (off_t)got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			goto out;
		got += (size_t)k;
	}
	end = n;
	if (buf[end - 1] != '\n') {
		*torn = 1;
		while (end > 0 && buf[end - 1] != '\n')
			end--;
		if (end == 0)
			goto out;
	}
	end--;		/* at the newline ending the last complete line */
	start = end;
	while (start > 0 && buf[start - 1] != '\n')
		start--;
	if (start == 0 && off != 0)
		goto out;	/* the line begins before what was read */
	if (auditchain_parse(buf + start, end - start, &r, &cause) != 0 || !r.chained)
		goto out;
	*seq = r.seq;
	memcpy(hash, r.hash, AUDITCHAIN_HASH);
	rc = 1;
out:
	free(cause);
	free(buf);
	return rc;
}

/* One word for a kind. */
const char *
auditchain_kind_name(enum auditchain_kind k)
{
	switch (k) {
	case AUDITCHAIN_OK:		return "ok";
	case AUDITCHAIN_GARBLED:	return "garbled";
	case AUDITCHAIN_EDITED:		return "edited";
	case AUDITCHAIN_GAP:		return "deleted";
	case AUDITCHAIN_INSERTED:	return "inserted";
	case AUDITCHAIN_REORDERED:	return "reordered";
	case AUDITCHAIN_DUPLICATED:	return "duplicated";
	case AUDITCHAIN_TRUNCATED_HEAD:	return "truncated-head";
	case AUDITCHAIN_RESTARTED:	return "restarted";
	case AUDITCHAIN_BAD_SIG:	return "bad-signature";
	case AUDITCHAIN_UNSIGNED:	return "unsigned";
	case AUDITCHAIN_TORN:		return "torn";
	}
	return "?";
}

/* Start a verifier. */
void
auditchain_verify_init(struct auditchain_verify *v, const unsigned char *pk)
{
	memset(v, 0, sizeof *v);
	v->pk = pk;
}

/* Free what a verifier holds. */
void
auditchain_verify_free(struct auditchain_verify *v)
{
	free(v->why);
	v->why = NULL;
}

/* Record a broken link; always -1. */
static int
auditchain_broken(struct auditchain_verify *v, enum auditchain_kind k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int
auditchain_broken(struct auditchain_verify *v, enum auditchain_kind k, const char *fmt, ...)
{
	va_list ap;

	free(v->why);
	va_start(ap, fmt);
	xvasprintf(&v->why, fmt, ap);
	va_end(ap);
	v->kind = k;
	return -1;
}

/* A checkpoint's signature: checked against the required key, else the key it names. */
static int
auditchain_verify_sig(struct auditchain_verify *v, const char *line,
    const struct auditchain_rec *r)
{
	const unsigned char *key = v->pk;

	if (r->has_key && !v->pk) {
		if (v->seen_key_set && memcmp(v->seen_key, r->key, AUDITCHAIN_PK) != 0)
			v->keys_differ = 1;
		memcpy(v->seen_key, r->key, AUDITCHAIN_PK);
		v->seen_key_set = 1;
	}
	if (!r->has_sig) {
		if (v->pk != NULL)
			return auditchain_broken(v, AUDITCHAIN_UNSIGNED, "checkpoint seq %llu has "
			    "no signature, but a public key was given", r->seq);
		return 0;
	}
	if (key == NULL && r->has_key)
		key = r->key;
	if (key == NULL)
		return 0;
	if (!auditchain_sig_ok(line, r, key))
		return auditchain_broken(v, AUDITCHAIN_BAD_SIG, "checkpoint seq %llu: the "
		    "signature does not verify%s", r->seq, v->pk != NULL ? " with the given "
		    "public key" : " with the key the checkpoint names");
	v->signed_ok++;
	return 0;
}

/* Check the next line. */
int
auditchain_verify_line(struct auditchain_verify *v, const char *line, size_t len,
    int first_file)
{
	struct auditchain_rec r;
	char *cause = NULL;
	int rc;

	if (auditchain_parse(line, len, &r, &cause) != 0) {
		rc = auditchain_broken(v, AUDITCHAIN_GARBLED, "%s", cause);
		free(cause);
		return rc;
	}
	if (!r.chained) {
		if (!v->started && first_file) {
			v->legacy++;
			return 0;
		}
		return auditchain_broken(v, AUDITCHAIN_INSERTED, "a record without chain "
		    "members (seq, prev) inside the chain: added afterwards, or its members "
		    "were removed");
	}
	if (!v->started) {
		if (!r.checkpoint)
			return auditchain_broken(v, AUDITCHAIN_TRUNCATED_HEAD, "the chain starts "
			    "at seq %llu with an ordinary record, not with the checkpoint that "
			    "opens every file: the head of the file was cut", r.seq);
		v->continues = !r.genesis;
		v->first_seq = r.seq;
	} else if (r.checkpoint && r.genesis)
		return auditchain_broken(v, AUDITCHAIN_RESTARTED, "a new chain begins here "
		    "(seq %llu) after seq %llu: the daemon found no earlier record when it "
		    "opened the log, or the records before were replaced", r.seq, v->last_seq);
	else if (r.seq == v->last_seq + 1) {
		if (memcmp(r.prev, v->last, AUDITCHAIN_HASH) != 0)
			return auditchain_broken(v, AUDITCHAIN_EDITED, "the record before "
			    "(seq %llu) does not match the hash this record (seq %llu) holds: it "
			    "was changed after it was written", v->last_seq, r.seq);
	} else if (r.seq > v->last_seq + 1) {
		v->missing_from = v->last_seq + 1;
		v->missing_to = r.seq - 1;
		return auditchain_broken(v, AUDITCHAIN_GAP, "seq jumps from %llu to %llu: "
		    "%llu record(s) missing", v->last_seq, r.seq, r.seq - v->last_seq - 1);
	} else if (r.seq == v->last_seq && memcmp(r.hash, v->last, AUDITCHAIN_HASH) == 0)
		return auditchain_broken(v, AUDITCHAIN_DUPLICATED, "seq %llu appears twice",
		    r.seq);
	else if (v->have_before && memcmp(r.prev, v->before, AUDITCHAIN_HASH) == 0)
		return auditchain_broken(v, AUDITCHAIN_INSERTED, "the line before this one is "
		    "not part of the chain: this record (seq %llu) follows the record before it",
		    r.seq);
	else
		return auditchain_broken(v, AUDITCHAIN_REORDERED, "seq goes back from %llu to "
		    "%llu", v->last_seq, r.seq);
	if (r.checkpoint) {
		v->checkpoints++;
		if (auditchain_verify_sig(v, line, &r) != 0)
			return -1;
	}
	v->last_stop = r.checkpoint && strcmp(r.reason, "stop") == 0;
	memcpy(v->before, v->last, AUDITCHAIN_HASH);
	v->have_before = v->started;
	memcpy(v->last, r.hash, AUDITCHAIN_HASH);
	v->last_seq = r.seq;
	v->started = 1;
	v->records++;
	return 0;
}
