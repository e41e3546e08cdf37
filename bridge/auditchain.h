/*
 * The audit log's hash chain, shared by the daemon (audit.c writes it) and the
 * administrator's `shimbridge audit verify` (which checks it). Every record ends
 * with two members the writer appends after redaction:
 *
 *	...,"seq":N,"prev":"<64 hex>"}
 *
 * seq counts records from 1; prev is the BLAKE2b-256 (crypto_generichash) of the
 * previous record's line, without its newline, in lowercase hex (all zeros before
 * the first record of a chain). Checkpoint records ("event":"audit-checkpoint",
 * written at every open of the file and at stop) may end with a third member,
 *
 *	...,"seq":N,"prev":"<64 hex>","sig":"<128 hex>"}
 *
 * an Ed25519 signature (crypto_sign_detached) over AUDITCHAIN_SIG_CONTEXT followed
 * by the line with the ,"sig":"..." member removed. The format is in docs/CONFIG.md.
 */
#ifndef SHIMBRIDGE_AUDITCHAIN_H
#define SHIMBRIDGE_AUDITCHAIN_H

#include <stddef.h>

#define AUDITCHAIN_HASH		32			/* bytes of a record hash */
#define AUDITCHAIN_PK		32			/* Ed25519 public key */
#define AUDITCHAIN_SK		64			/* Ed25519 secret key (libsodium form) */
#define AUDITCHAIN_SIG		64			/* Ed25519 signature */
#define AUDITCHAIN_LINE_MAX	(4 * 1024 * 1024)	/* longer lines are not records */
#define AUDITCHAIN_TAIL_MAX	(4 * 1024 * 1024)	/* bytes read back at open */
#define AUDITCHAIN_EVENT	"audit-checkpoint"
#define AUDITCHAIN_SIG_CONTEXT	"shimbridge audit checkpoint v1\n"

/* What one line says about the chain. */
struct auditchain_rec {
	int		 chained;	/* ends with seq and prev */
	int		 checkpoint;	/* "event": "audit-checkpoint" */
	int		 genesis;	/* a checkpoint that starts a new chain (prev all zeros) */
	int		 has_sig;	/* ends with a signature */
	unsigned long long seq;
	unsigned char	 prev[AUDITCHAIN_HASH];
	unsigned char	 hash[AUDITCHAIN_HASH];	/* of this line */
	unsigned char	 sig[AUDITCHAIN_SIG];
	unsigned char	 key[AUDITCHAIN_PK];	/* the "key" member of a checkpoint */
	int		 has_key;
	size_t		 signed_len;	/* bytes of the line before ,"sig": */
	char		 reason[16];	/* a checkpoint's "reason" (start, reopen, stop) */
};

/* The hash of a line (without its newline). */
void	auditchain_hash(const void *line, size_t len, unsigned char out[AUDITCHAIN_HASH]);
/* Lowercase hex of n bytes into out (2n + 1 bytes). */
void	auditchain_hex(const unsigned char *b, size_t n, char *out);
/*
 * Parse one line (without its newline). 0: a JSON object (r filled; r->chained
 * says whether it carries the chain members). -1: not a JSON object, or chain
 * members that are malformed or not where they must be; *cause says what.
 */
int	auditchain_parse(const char *line, size_t len, struct auditchain_rec *r,
	    char **cause);
/*
 * A record line made from obj (a JSON object's text ending in '}', len bytes)
 * with seq and prev appended; a new NUL-terminated string, its length in *outlen.
 * -1 if obj does not end in '}' or is the empty object.
 */
int	auditchain_seal(const char *obj, size_t len, unsigned long long seq,
	    const unsigned char prev[AUDITCHAIN_HASH], char **out, size_t *outlen);
/* Append a signature by sk (line consumed, replaced by a new string). */
void	auditchain_sign(char **line, size_t *len, const unsigned char *sk);
/* Whether a parsed checkpoint's signature is valid for pk: 1 yes, 0 no. */
int	auditchain_sig_ok(const char *line, const struct auditchain_rec *r,
	    const unsigned char pk[AUDITCHAIN_PK]);
/* Decode exactly 2n hex digits of s (length slen) into b; 0 or -1. */
int	auditchain_unhex(const char *s, size_t slen, unsigned char *b, size_t n);
/*
 * Read an Ed25519 signing key file: 64 hex digits (the seed), an optional
 * newline. The file must be a regular file that only its owner may read or
 * write. sk (AUDITCHAIN_SK bytes, guarded memory of the caller) and pk are filled.
 */
int	auditchain_load_key(const char *path, unsigned char *sk,
	    unsigned char pk[AUDITCHAIN_PK], char **cause);
/*
 * The signing key's path from the config's audit.sign_key (a file) or
 * audit.sign_key_credential (a systemd credential name): a new string, NULL
 * (no key configured, *cause NULL) or NULL and *cause.
 */
char	*auditchain_key_path(const char *file, const char *credential, char **cause);
/*
 * The last complete record of the file open on fd (at most AUDITCHAIN_TAIL_MAX
 * bytes read from its end): 1 and *seq, hash when it is a chained record, 0 when
 * the file is empty, -1 when its last line is not a chained record (or cannot be
 * read). *torn is set when the file does not end with a newline.
 */
int	auditchain_tail(int fd, unsigned long long *seq, unsigned char hash[AUDITCHAIN_HASH],
	    int *torn);

/* The first broken link a verifier found. */
enum auditchain_kind {
	AUDITCHAIN_OK = 0,
	AUDITCHAIN_GARBLED,	/* not a JSON record, or malformed chain members */
	AUDITCHAIN_EDITED,	/* a record's content no longer matches the hash its successor holds */
	AUDITCHAIN_GAP,		/* sequence numbers skip: records deleted or moved (caller decides) */
	AUDITCHAIN_INSERTED,	/* a record that is not part of the chain */
	AUDITCHAIN_REORDERED,	/* a sequence number goes backwards */
	AUDITCHAIN_DUPLICATED,	/* the same record twice */
	AUDITCHAIN_TRUNCATED_HEAD, /* the first file does not start with a checkpoint */
	AUDITCHAIN_RESTARTED,	/* a new chain begins after the first record */
	AUDITCHAIN_BAD_SIG,	/* a checkpoint's signature does not verify */
	AUDITCHAIN_UNSIGNED,	/* a checkpoint without a signature while a key is required */
	AUDITCHAIN_TORN,	/* the last line has no newline (cut in the middle) */
};

/* Streaming verifier: feed lines in order, across files. */
struct auditchain_verify {
	const unsigned char *pk;	/* required signer, or NULL */
	int		 started;	/* a chained record was seen */
	unsigned long long records, checkpoints, signed_ok, legacy;
	unsigned long long first_seq, last_seq;
	unsigned char	 last[AUDITCHAIN_HASH];		/* hash of the last record */
	unsigned char	 before[AUDITCHAIN_HASH];	/* hash of the one before */
	int		 have_before;
	unsigned long long missing_from, missing_to;	/* AUDITCHAIN_GAP: seq range */
	unsigned char	 seen_key[AUDITCHAIN_PK];	/* key named by checkpoints */
	int		 seen_key_set, keys_differ, last_stop, continues;
	enum auditchain_kind kind;
	char		*why;		/* the broken link, explained (owned) */
};

/*
 * Start verifying; pk is the required signer (NULL: signatures are checked
 * against the key the checkpoints name).
 */
void	auditchain_verify_init(struct auditchain_verify *, const unsigned char *pk);
/*
 * Check the next line (without newline; first_file is 1 while reading the first
 * file, where records older than the chain are counted in v->legacy). 0 ok, -1
 * broken link: v->kind and v->why describe it (the line given is where it shows).
 */
int	auditchain_verify_line(struct auditchain_verify *, const char *line, size_t len,
	    int first_file);
void	auditchain_verify_free(struct auditchain_verify *);
/* One word for a kind: "edited", "deleted", ... */
const char *auditchain_kind_name(enum auditchain_kind);

#endif
