/*
 * The encrypted secret store: named secret values kept in one file encrypted with
 * libsodium's crypto_secretbox (XSalsa20-Poly1305) under a 32-byte key read from a
 * root-only key file. The file format is documented at the top of store.c.
 *
 * Every function that can fail returns -1 and, where it takes one, sets *cause to
 * a malloc'd message (caller frees) naming the file and the problem. No message
 * ever contains a secret value or key material.
 */
#ifndef SHIMBRIDGE_STORE_H
#define SHIMBRIDGE_STORE_H

#include <stddef.h>

#define STORE_KEY_BYTES		32		/* crypto_secretbox_KEYBYTES */
#define STORE_NAME_MAX		64		/* bytes in a secret name */
#define STORE_VALUE_MAX		(64 * 1024)	/* bytes in a secret value */
#define STORE_MAX_ENTRIES	1024		/* secrets in one store */

/*
 * A decoded store: a set of (name, value) pairs kept sorted by name (byte order).
 * Names live on the ordinary heap (they are not secret); values live only in
 * sodium_malloc'd memory. store_free wipes both.
 */
struct store;

/*
 * Check that the file open on fd, reached by path, is safe to take secrets or
 * configuration from: path is not a symbolic link (lstat) and names the same
 * file as fd; it is a regular file owned by uid 0; and its mode has no group or
 * other bits at all when secret is non-zero (mode & 077 == 0), or no group or
 * other write bit otherwise (mode & 022 == 0). Open fd with O_NOFOLLOW (and
 * O_NONBLOCK, so a FIFO cannot hang the opener). Returns 0, or -1 with *cause
 * naming the path and the problem.
 */
int	 store_check_file(int fd, const char *path, int secret, char **cause);

/*
 * Read a key file: exactly 32 raw bytes, or 64 hex digits with an optional
 * trailing newline; an all-zero key is refused. The file must pass
 * store_check_file(secret = 1). On success *key is STORE_KEY_BYTES of
 * sodium_malloc'd memory that the caller releases with sodium_free.
 */
int	 store_key_load(const char *path, unsigned char **key, char **cause);

/*
 * Create a new key file holding a fresh random key as 64 hex digits and a
 * newline: O_EXCL (never replaces an existing file), mode 0600, fsync'd along
 * with its directory. Fails, leaving no file, unless the result would pass
 * store_key_load (so the caller must be root).
 */
int	 store_key_create(const char *path, char **cause);

/*
 * Load and decrypt the store at path with key (STORE_KEY_BYTES). The file must
 * pass store_check_file(secret = 1). If the file does not exist, *out is an empty
 * store when missing_ok is non-zero, an error otherwise. A wrong key or any change
 * to the file fails with "secret store PATH: failed authentication: wrong key or
 * tampered file". On success the caller owns *out (store_free). An empty new
 * store is had by loading a missing path with missing_ok set.
 */
int	 store_load(const char *path, const unsigned char *key, int missing_ok,
	     struct store **out, char **cause);

/*
 * Decrypt a whole store file already in memory (magic, nonce, ciphertext) with
 * key and decode it. Used by store_load and by the fuzzer; *cause does not name
 * a file.
 */
int	 store_unseal(const unsigned char *file, size_t len,
	     const unsigned char *key, struct store **out, char **cause);

/*
 * Decode a decrypted plaintext. Hostile-input proof: every count and length is
 * checked, names must be valid and strictly increasing, and no byte may follow
 * the last entry. Used by store_unseal and by the fuzzer. On success the caller
 * owns *out; on failure *out is untouched. plain is not modified or wiped.
 */
int	 store_decode(const unsigned char *plain, size_t len, struct store **out,
	     char **cause);

/*
 * Copy the value of name into new sodium_malloc'd memory: *val (caller frees
 * with sodium_free) and *len. Returns -1 with errno ENOENT if there is no such
 * name, ENOMEM if secure memory cannot be had.
 */
int	 store_get(const struct store *, const char *name, unsigned char **val,
	     size_t *len);

/*
 * Set name to a copy of val (len bytes), replacing any earlier value. Names are
 * 1-STORE_NAME_MAX characters from [A-Za-z0-9_.-] not starting with '.' or '-';
 * values are 1-STORE_VALUE_MAX bytes; a new name beyond STORE_MAX_ENTRIES is
 * refused. The caller keeps val and should wipe it.
 */
int	 store_set(struct store *, const char *name, const unsigned char *val,
	     size_t len, char **cause);

/* Remove name and wipe its value. Returns -1 if there is no such name. */
int	 store_rm(struct store *, const char *name);

/* Number of entries. */
size_t	 store_count(const struct store *);

/* Name of entry i (0 <= i < store_count, sorted by name), or NULL past the end. */
const char *store_name(const struct store *, size_t i);

/*
 * Encrypt under key with a fresh random nonce and replace path atomically: write
 * a temporary file in the same directory (O_EXCL, mode 0600), fsync it, rename it
 * over path, fsync the directory. On failure the temporary file is removed and
 * path is unchanged, except when only the final directory fsync fails: then the
 * new file is in place but may not survive a crash, and the cause says so.
 */
int	 store_save(const struct store *, const char *path,
	     const unsigned char *key, char **cause);

/*
 * Take the writers' lock of the store at path before a read-modify-write
 * (load, change, save): an exclusive flock(2) on PATH.lock, created mode 0600
 * next to the store and never followed through a symbolic link. Blocks until
 * the lock is free. With the lock held, temporary files a killed writer left
 * (PATH.XXXXXX) are removed. Returns the lock's fd (release it with
 * store_unlock), or -1 with *cause. Readers need no lock: a save replaces the
 * file with one rename, so a reader sees the old store or the new one.
 */
int	 store_lock(const char *path, char **cause);

/* Release a lock from store_lock; -1 is allowed. */
void	 store_unlock(int fd);

/* Wipe and free a store and all its names and values; NULL is allowed. */
void	 store_free(struct store *);

#endif
