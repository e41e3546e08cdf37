/*
 * The encrypted secret store.
 *
 * File format (integers big-endian):
 *
 *	offset	length	field
 *	0	8	magic "SHIMSTO1"
 *	8	24	nonce
 *	32	16	Poly1305 tag	} crypto_secretbox_easy(plaintext, nonce, key):
 *	48	n	ciphertext	} XSalsa20-Poly1305, no associated data
 *
 * Plaintext (n bytes, only ever held in sodium_malloc'd memory):
 *
 *	u32	count		0 to STORE_MAX_ENTRIES
 *	then count entries:
 *	u16	name length	1 to STORE_NAME_MAX
 *	...	name		[A-Za-z0-9_.-], not starting with '.' or '-'
 *	u32	value length	1 to STORE_VALUE_MAX
 *	...	value		raw bytes
 *
 * Names are strictly increasing in byte order (sorted, no duplicates) and nothing
 * follows the last entry, so a store has exactly one encoding and the decoder can
 * refuse everything else. The file size is capped at what the largest legal store
 * needs (STORE_FILE_MAX, about 64 MiB).
 *
 * The nonce is drawn at random for every save. XSalsa20's nonce is 192 bits, so
 * random nonces will not repeat under one key in any realistic number of saves,
 * and no counter has to be kept in step with the file (which would break on a
 * restore from backup or a copy between hosts). The magic is outside the MAC,
 * since secretbox takes no associated data; it only names the format and is
 * compared exactly, so altering it is still refused.
 */
#include <sys/file.h>
#include <sys/types.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "store.h"
#include "util.h"

#define STORE_MAGIC		"SHIMSTO1"
#define STORE_MAGIC_LEN		8
#define STORE_NONCE_LEN		crypto_secretbox_NONCEBYTES
#define STORE_MAC_LEN		crypto_secretbox_MACBYTES
#define STORE_HDR_LEN		(STORE_MAGIC_LEN + STORE_NONCE_LEN)
#define STORE_ENTRY_MAX		(2 + STORE_NAME_MAX + 4 + STORE_VALUE_MAX)
#define STORE_PLAIN_MIN		4
#define STORE_PLAIN_MAX		(4 + (size_t)STORE_MAX_ENTRIES * STORE_ENTRY_MAX)
#define STORE_FILE_MIN		(STORE_HDR_LEN + STORE_MAC_LEN + STORE_PLAIN_MIN)
#define STORE_FILE_MAX		(STORE_HDR_LEN + STORE_MAC_LEN + STORE_PLAIN_MAX)
#define STORE_KEY_HEX_LEN	(2 * STORE_KEY_BYTES)

_Static_assert(STORE_KEY_BYTES == crypto_secretbox_KEYBYTES, "key size");
_Static_assert(STORE_NONCE_LEN == 24, "nonce size");
_Static_assert(STORE_NAME_MAX <= UINT16_MAX, "name length field");
_Static_assert(STORE_VALUE_MAX <= UINT32_MAX, "value length field");

struct store_entry {
	char		*name;	/* NUL-terminated, ordinary heap: not secret */
	size_t		 namelen;
	unsigned char	*value;	/* sodium_malloc'd */
	size_t		 len;
};

struct store {
	struct store_entry	*entries;	/* sorted by name, byte order */
	size_t			 n;
};

static void store_fail(char **, const char *, ...)
    __attribute__((format(printf, 2, 3)));

/* Set *cause (if the caller wants one) to a formatted message. */
static void
store_fail(char **cause, const char *fmt, ...)
{
	va_list ap;

	if (cause == NULL)
		return;
	va_start(ap, fmt);
	xvasprintf(cause, fmt, ap);
	va_end(ap);
}

/* Make sure libsodium is initialised; sodium_init is idempotent and thread-safe. */
static int
store_sodium(char **cause)
{
	if (sodium_init() < 0) {
		store_fail(cause, "libsodium initialisation failed");
		return -1;
	}
	return 0;
}

/* Read a big-endian u16. */
static size_t
store_get16(const unsigned char *p)
{
	return ((size_t)p[0] << 8) | p[1];
}

/* Read a big-endian u32. */
static size_t
store_get32(const unsigned char *p)
{
	return ((size_t)p[0] << 24) | ((size_t)p[1] << 16) |
	    ((size_t)p[2] << 8) | p[3];
}

/* Write a big-endian u16. */
static void
store_put16(unsigned char *p, size_t v)
{
	p[0] = (v >> 8) & 0xff;
	p[1] = v & 0xff;
}

/* Write a big-endian u32. */
static void
store_put32(unsigned char *p, size_t v)
{
	p[0] = (v >> 24) & 0xff;
	p[1] = (v >> 16) & 0xff;
	p[2] = (v >> 8) & 0xff;
	p[3] = v & 0xff;
}

/* Tell whether len bytes at name form a legal secret name. */
static int
store_name_valid(const char *name, size_t len)
{
	size_t		i;
	unsigned char	c;

	if (len == 0 || len > STORE_NAME_MAX)
		return 0;
	if (name[0] == '.' || name[0] == '-')
		return 0;
	for (i = 0; i < len; i++) {
		c = (unsigned char)name[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-')
			continue;
		return 0;
	}
	return 1;
}

/* Compare two names in byte order, as strcmp would. */
static int
store_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int	r;

	r = memcmp(a, b, alen < blen ? alen : blen);
	if (r != 0)
		return r;
	if (alen == blen)
		return 0;
	return alen < blen ? -1 : 1;
}

/* Find name: 1 and its index, or 0 and the index where it would go. */
static int
store_find(const struct store *s, const char *name, size_t namelen,
    size_t *pos)
{
	size_t	lo = 0, hi = s->n, mid;
	int	r;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		r = store_cmp(s->entries[mid].name, s->entries[mid].namelen,
		    name, namelen);
		if (r == 0) {
			*pos = mid;
			return 1;
		}
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*pos = lo;
	return 0;
}

/* Allocate an empty store. */
static struct store *
store_alloc(void)
{
	return xcalloc(1, sizeof(struct store));
}

/* Wipe and release one entry's name and value. */
static void
store_entry_clear(struct store_entry *e)
{
	sodium_free(e->value);	/* wipes before unmapping */
	if (e->name != NULL) {
		sodium_memzero(e->name, e->namelen);
		free(e->name);
	}
	memset(e, 0, sizeof *e);
}

/* Insert an entry at index pos, taking ownership of value. */
static void
store_insert(struct store *s, size_t pos, const char *name, size_t namelen,
    unsigned char *value, size_t len)
{
	struct store_entry	*e;

	s->entries = xreallocarray(s->entries, s->n + 1, sizeof *s->entries);
	memmove(&s->entries[pos + 1], &s->entries[pos],
	    (s->n - pos) * sizeof *s->entries);
	e = &s->entries[pos];
	e->name = xstrndup(name, namelen);
	e->namelen = namelen;
	e->value = value;	/* transferred */
	e->len = len;
	s->n++;
}

/* Wipe and free a store. */
void
store_free(struct store *s)
{
	size_t	i;

	if (s == NULL)
		return;
	for (i = 0; i < s->n; i++)
		store_entry_clear(&s->entries[i]);
	free(s->entries);
	free(s);
}

/* Number of entries. */
size_t
store_count(const struct store *s)
{
	return s->n;
}

/* Name of entry i in sorted order. */
const char *
store_name(const struct store *s, size_t i)
{
	if (i >= s->n)
		return NULL;
	return s->entries[i].name;
}

/* Copy a value out into fresh secure memory. */
int
store_get(const struct store *s, const char *name, unsigned char **val,
    size_t *len)
{
	const struct store_entry	*e;
	unsigned char			*v = NULL;
	size_t				 pos;

	if (store_sodium(NULL) != 0) {
		errno = ENOMEM;
		return -1;
	}
	if (!store_find(s, name, strnlen(name, STORE_NAME_MAX + 1), &pos)) {
		errno = ENOENT;
		return -1;
	}
	e = &s->entries[pos];
	if ((v = sodium_malloc(e->len)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	memcpy(v, e->value, e->len);
	*val = v;	/* transferred */
	*len = e->len;
	return 0;
}

/* Add or replace a value. */
int
store_set(struct store *s, const char *name, const unsigned char *val,
    size_t len, char **cause)
{
	unsigned char	*v = NULL;
	size_t		 namelen, pos;
	int		 found, rv = -1;

	if (store_sodium(cause) != 0)
		goto out;
	namelen = strnlen(name, STORE_NAME_MAX + 1);
	if (!store_name_valid(name, namelen)) {
		store_fail(cause, "invalid secret name: a name is 1-%d "
		    "characters from A-Z a-z 0-9 _ . - and does not start "
		    "with '.' or '-'", STORE_NAME_MAX);
		goto out;
	}
	if (len == 0 || val == NULL) {
		store_fail(cause, "secret %s: the value is empty", name);
		goto out;
	}
	if (len > STORE_VALUE_MAX) {
		store_fail(cause, "secret %s: the value is %zu bytes, more "
		    "than the limit of %d", name, len, STORE_VALUE_MAX);
		goto out;
	}
	found = store_find(s, name, namelen, &pos);
	if (!found && s->n >= STORE_MAX_ENTRIES) {
		store_fail(cause, "secret %s: the store already holds the "
		    "maximum of %d secrets", name, STORE_MAX_ENTRIES);
		goto out;
	}
	if ((v = sodium_malloc(len)) == NULL) {
		store_fail(cause, "secret %s: out of secure memory", name);
		goto out;
	}
	memcpy(v, val, len);
	if (found) {
		sodium_free(s->entries[pos].value);
		s->entries[pos].value = v;	/* transferred */
		s->entries[pos].len = len;
	} else
		store_insert(s, pos, name, namelen, v, len);	/* transferred */
	v = NULL;
	rv = 0;
out:
	sodium_free(v);
	return rv;
}

/* Remove an entry. */
int
store_rm(struct store *s, const char *name)
{
	size_t	pos;

	if (!store_find(s, name, strnlen(name, STORE_NAME_MAX + 1), &pos))
		return -1;
	store_entry_clear(&s->entries[pos]);
	memmove(&s->entries[pos], &s->entries[pos + 1],
	    (s->n - pos - 1) * sizeof *s->entries);
	s->n--;
	return 0;
}

/* Decode a plaintext, trusting nothing in it. */
int
store_decode(const unsigned char *plain, size_t len, struct store **out,
    char **cause)
{
	struct store	*s = NULL;
	unsigned char	*v = NULL;
	const char	*name, *prev = NULL;
	size_t		 pos, i, count, namelen, prevlen = 0, vlen;
	int		 rv = -1;

	if (store_sodium(cause) != 0)
		goto out;
	if (len < 4) {
		store_fail(cause, "truncated: %zu bytes, too short for the "
		    "entry count", len);
		goto out;
	}
	count = store_get32(plain);
	pos = 4;
	if (count > STORE_MAX_ENTRIES) {
		store_fail(cause, "entry count %zu is more than the limit "
		    "of %d", count, STORE_MAX_ENTRIES);
		goto out;
	}
	s = store_alloc();

	for (i = 0; i < count; i++) {
		if (len - pos < 2) {
			store_fail(cause, "entry %zu: truncated before the "
			    "name length", i);
			goto out;
		}
		namelen = store_get16(plain + pos);
		pos += 2;
		if (namelen == 0 || namelen > STORE_NAME_MAX) {
			store_fail(cause, "entry %zu: name length %zu is "
			    "outside 1-%d", i, namelen, STORE_NAME_MAX);
			goto out;
		}
		if (len - pos < namelen) {
			store_fail(cause, "entry %zu: name runs past the "
			    "end", i);
			goto out;
		}
		name = (const char *)plain + pos;
		if (!store_name_valid(name, namelen)) {
			store_fail(cause, "entry %zu: invalid name", i);
			goto out;
		}
		if (prev != NULL &&
		    store_cmp(prev, prevlen, name, namelen) >= 0) {
			store_fail(cause, "entry %zu: name is not after the "
			    "previous one (unsorted or duplicate)", i);
			goto out;
		}
		pos += namelen;

		if (len - pos < 4) {
			store_fail(cause, "entry %zu: truncated before the "
			    "value length", i);
			goto out;
		}
		vlen = store_get32(plain + pos);
		pos += 4;
		if (vlen == 0 || vlen > STORE_VALUE_MAX) {
			store_fail(cause, "entry %zu: value length %zu is "
			    "outside 1-%d", i, vlen, STORE_VALUE_MAX);
			goto out;
		}
		if (len - pos < vlen) {
			store_fail(cause, "entry %zu: value runs past the "
			    "end", i);
			goto out;
		}
		if ((v = sodium_malloc(vlen)) == NULL) {
			store_fail(cause, "entry %zu: out of secure memory", i);
			goto out;
		}
		memcpy(v, plain + pos, vlen);
		pos += vlen;

		/* Appending keeps the order: the name was checked above. */
		store_insert(s, s->n, name, namelen, v, vlen);	/* transferred */
		v = NULL;
		prev = name;
		prevlen = namelen;
	}
	if (pos != len) {
		store_fail(cause, "%zu unexpected bytes after the last entry",
		    len - pos);
		goto out;
	}
	*out = s;	/* transferred */
	s = NULL;
	rv = 0;
out:
	sodium_free(v);
	store_free(s);
	return rv;
}

/* Encode a store into sodium_malloc'd plaintext. */
static int
store_encode(const struct store *s, unsigned char **plain, size_t *plen,
    char **cause)
{
	const struct store_entry	*e;
	unsigned char			*p = NULL;
	size_t				 len = 4, pos = 4, i;

	for (i = 0; i < s->n; i++)
		len += 2 + s->entries[i].namelen + 4 + s->entries[i].len;
	if ((p = sodium_malloc(len)) == NULL) {
		store_fail(cause, "out of secure memory");
		return -1;
	}
	store_put32(p, s->n);
	for (i = 0; i < s->n; i++) {
		e = &s->entries[i];
		store_put16(p + pos, e->namelen);
		pos += 2;
		memcpy(p + pos, e->name, e->namelen);
		pos += e->namelen;
		store_put32(p + pos, e->len);
		pos += 4;
		memcpy(p + pos, e->value, e->len);
		pos += e->len;
	}
	*plain = p;	/* transferred */
	*plen = len;
	return 0;
}

/* Encrypt a store into a whole file image on the ordinary heap (it is ciphertext). */
static int
store_seal(const struct store *s, const unsigned char *key,
    unsigned char **file, size_t *flen, char **cause)
{
	unsigned char	*plain = NULL, *f = NULL;
	size_t		 plen = 0;
	int		 rv = -1;

	if (store_encode(s, &plain, &plen, cause) != 0)
		goto out;
	f = xmalloc(STORE_HDR_LEN + STORE_MAC_LEN + plen);
	memcpy(f, STORE_MAGIC, STORE_MAGIC_LEN);
	randombytes_buf(f + STORE_MAGIC_LEN, STORE_NONCE_LEN);
	if (crypto_secretbox_easy(f + STORE_HDR_LEN, plain, plen,
	    f + STORE_MAGIC_LEN, key) != 0) {
		store_fail(cause, "encryption failed");
		goto out;
	}
	*file = f;	/* transferred */
	*flen = STORE_HDR_LEN + STORE_MAC_LEN + plen;
	f = NULL;
	rv = 0;
out:
	free(f);
	sodium_free(plain);	/* wipes */
	return rv;
}

/* Check, decrypt and decode a whole file image. */
int
store_unseal(const unsigned char *file, size_t len, const unsigned char *key,
    struct store **out, char **cause)
{
	unsigned char	*plain = NULL;
	char		*why = NULL;
	size_t		 plen;
	int		 rv = -1;

	if (store_sodium(cause) != 0)
		goto out;
	if (len < STORE_FILE_MIN) {
		store_fail(cause, "too short (%zu bytes): truncated or not a "
		    "secret store", len);
		goto out;
	}
	if (len > STORE_FILE_MAX) {
		store_fail(cause, "too large (%zu bytes, the limit is %zu)",
		    len, (size_t)STORE_FILE_MAX);
		goto out;
	}
	if (memcmp(file, STORE_MAGIC, STORE_MAGIC_LEN) != 0) {
		store_fail(cause, "not a secret store (bad magic)");
		goto out;
	}
	plen = len - STORE_HDR_LEN - STORE_MAC_LEN;
	if ((plain = sodium_malloc(plen)) == NULL) {
		store_fail(cause, "out of secure memory");
		goto out;
	}
	if (crypto_secretbox_open_easy(plain, file + STORE_HDR_LEN,
	    len - STORE_HDR_LEN, file + STORE_MAGIC_LEN, key) != 0) {
		store_fail(cause, "failed authentication: wrong key or "
		    "tampered file");
		goto out;
	}
	if (store_decode(plain, plen, out, &why) != 0) {
		store_fail(cause, "corrupt contents: %s", why);
		goto out;
	}
	rv = 0;
out:
	free(why);
	sodium_free(plain);	/* wipes */
	return rv;
}

/* Read from fd until EOF or until want bytes; *got is how many arrived. */
static int
store_read_full(int fd, unsigned char *buf, size_t want, size_t *got)
{
	size_t	done = 0;
	ssize_t	n;

	while (done < want) {
		n = read(fd, buf + done, want - done);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return -1;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*got = done;
	return 0;
}

/* Write all of buf to fd. */
static int
store_write_full(int fd, const unsigned char *buf, size_t len)
{
	size_t	done = 0;
	ssize_t	n;

	while (done < len) {
		n = write(fd, buf + done, len - done);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

/* Describe an open(2) failure, naming a refused symbolic link plainly. */
static void
store_open_fail(char **cause, const char *what, const char *path, int error)
{
	if (error == ELOOP) {
		store_fail(cause, "%s %s: is a symbolic link (refused) or "
		    "has too many levels of links", what, path);
	} else
		store_fail(cause, "%s %s: %s", what, path, strerror(error));
}

/* fsync the directory holding path, so a create or rename in it is durable. */
static int
store_fsync_dir(const char *path, char **cause)
{
	char		*dir = NULL;
	const char	*slash;
	int		 fd = -1, rv = -1;

	if ((slash = strrchr(path, '/')) == NULL)
		dir = xstrdup(".");
	else if (slash == path)
		dir = xstrdup("/");
	else
		dir = xstrndup(path, (size_t)(slash - path));
	if ((fd = open(dir, O_RDONLY|O_DIRECTORY|O_CLOEXEC)) == -1 ||
	    fsync(fd) == -1) {
		store_fail(cause, "directory %s: %s", dir, strerror(errno));
		goto out;
	}
	rv = 0;
out:
	if (fd != -1)
		close(fd);
	free(dir);
	return rv;
}

/* Check the type, owner and mode of a file holding secrets or configuration. */
int
store_check_file(int fd, const char *path, int secret, char **cause)
{
	struct stat	fst, lst;
	unsigned int	mode;

	if (fstat(fd, &fst) == -1) {
		store_fail(cause, "%s: fstat: %s", path, strerror(errno));
		return -1;
	}
	if (lstat(path, &lst) == -1) {
		store_fail(cause, "%s: lstat: %s", path, strerror(errno));
		return -1;
	}
	if (S_ISLNK(lst.st_mode)) {
		store_fail(cause, "%s: is a symbolic link; refusing to "
		    "follow it", path);
		return -1;
	}
	if (lst.st_dev != fst.st_dev || lst.st_ino != fst.st_ino) {
		store_fail(cause, "%s: was replaced while being opened", path);
		return -1;
	}
	if (!S_ISREG(fst.st_mode)) {
		store_fail(cause, "%s: is not a regular file", path);
		return -1;
	}
	if (fst.st_uid != 0) {
		store_fail(cause, "%s: is owned by uid %ju, not root", path,
		    (uintmax_t)fst.st_uid);
		return -1;
	}
	mode = (unsigned int)(fst.st_mode & 07777);
	if (secret && (mode & 077) != 0) {
		store_fail(cause, "%s: mode %04o lets group or others access "
		    "it; a file holding secrets must be mode 0600 or stricter "
		    "(chmod 600 %s)", path, mode, path);
		return -1;
	}
	if (!secret && (mode & 022) != 0) {
		store_fail(cause, "%s: mode %04o lets group or others write "
		    "it (chmod go-w %s)", path, mode, path);
		return -1;
	}
	return 0;
}

/* Read and check a key file. */
int
store_key_load(const char *path, unsigned char **key, char **cause)
{
	unsigned char	*buf = NULL, *k = NULL;
	size_t		 got = 0, binlen = 0;
	int		 fd = -1, rv = -1;

	if (store_sodium(cause) != 0)
		goto out;
	fd = open(path, O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC);
	if (fd == -1) {
		store_open_fail(cause, "key file", path, errno);
		goto out;
	}
	if (store_check_file(fd, path, 1, cause) != 0)
		goto out;
	/* One byte more than the longest legal file, to see an overlong one. */
	if ((buf = sodium_malloc(STORE_KEY_HEX_LEN + 2)) == NULL ||
	    (k = sodium_malloc(STORE_KEY_BYTES)) == NULL) {
		store_fail(cause, "key file %s: out of secure memory", path);
		goto out;
	}
	if (store_read_full(fd, buf, STORE_KEY_HEX_LEN + 2, &got) != 0) {
		store_fail(cause, "key file %s: %s", path, strerror(errno));
		goto out;
	}
	if (got == STORE_KEY_BYTES)
		memcpy(k, buf, STORE_KEY_BYTES);
	else if (got == STORE_KEY_HEX_LEN ||
	    (got == STORE_KEY_HEX_LEN + 1 && buf[STORE_KEY_HEX_LEN] == '\n')) {
		if (sodium_hex2bin(k, STORE_KEY_BYTES, (const char *)buf,
		    STORE_KEY_HEX_LEN, NULL, &binlen, NULL) != 0 ||
		    binlen != STORE_KEY_BYTES) {
			store_fail(cause, "key file %s: not 64 hexadecimal "
			    "digits", path);
			goto out;
		}
	} else {
		store_fail(cause, "key file %s: wrong size; a key file holds "
		    "exactly %d raw bytes, or %d hexadecimal digits and an "
		    "optional newline", path, STORE_KEY_BYTES,
		    STORE_KEY_HEX_LEN);
		goto out;
	}
	if (sodium_is_zero(k, STORE_KEY_BYTES)) {
		store_fail(cause, "key file %s: the key is all zeros", path);
		goto out;
	}
	*key = k;	/* transferred */
	k = NULL;
	rv = 0;
out:
	sodium_free(buf);	/* wipes */
	sodium_free(k);
	if (fd != -1)
		close(fd);
	return rv;
}

/* Create a key file with a new random key. */
int
store_key_create(const char *path, char **cause)
{
	unsigned char	*k = NULL;
	char		*hex = NULL;
	int		 fd = -1, created = 0, rv = -1;

	if (store_sodium(cause) != 0)
		goto out;
	fd = open(path, O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0600);
	if (fd == -1) {
		store_open_fail(cause, "key file", path, errno);
		goto out;
	}
	created = 1;
	if (fchmod(fd, 0600) == -1) {
		store_fail(cause, "key file %s: %s", path, strerror(errno));
		goto out;
	}
	if (store_check_file(fd, path, 1, cause) != 0)
		goto out;
	if ((k = sodium_malloc(STORE_KEY_BYTES)) == NULL ||
	    (hex = sodium_malloc(STORE_KEY_HEX_LEN + 1)) == NULL) {
		store_fail(cause, "key file %s: out of secure memory", path);
		goto out;
	}
	randombytes_buf(k, STORE_KEY_BYTES);
	sodium_bin2hex(hex, STORE_KEY_HEX_LEN + 1, k, STORE_KEY_BYTES);
	hex[STORE_KEY_HEX_LEN] = '\n';	/* replaces the NUL */
	if (store_write_full(fd, (unsigned char *)hex,
	    STORE_KEY_HEX_LEN + 1) != 0 || fsync(fd) == -1) {
		store_fail(cause, "key file %s: %s", path, strerror(errno));
		goto out;
	}
	if (close(fd) == -1) {
		fd = -1;
		store_fail(cause, "key file %s: %s", path, strerror(errno));
		goto out;
	}
	fd = -1;
	if (store_fsync_dir(path, cause) != 0)
		goto out;
	rv = 0;
out:
	if (fd != -1)
		close(fd);
	if (rv != 0 && created)
		unlink(path);
	sodium_free(hex);	/* wipes */
	sodium_free(k);
	return rv;
}

/* Load and decrypt a store file. */
int
store_load(const char *path, const unsigned char *key, int missing_ok,
    struct store **out, char **cause)
{
	struct stat	 st;
	unsigned char	*file = NULL;
	char		*why = NULL;
	size_t		 size, got = 0;
	int		 fd = -1, rv = -1;

	if (store_sodium(cause) != 0)
		goto out;
	fd = open(path, O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC);
	if (fd == -1) {
		if (errno == ENOENT && missing_ok) {
			*out = store_alloc();
			rv = 0;
			goto out;
		}
		store_open_fail(cause, "secret store", path, errno);
		goto out;
	}
	if (store_check_file(fd, path, 1, cause) != 0)
		goto out;
	if (fstat(fd, &st) == -1) {
		store_fail(cause, "secret store %s: fstat: %s", path,
		    strerror(errno));
		goto out;
	}
	if (st.st_size < 0 || (uintmax_t)st.st_size > STORE_FILE_MAX) {
		store_fail(cause, "secret store %s: too large (%jd bytes, the "
		    "limit is %zu)", path, (intmax_t)st.st_size,
		    (size_t)STORE_FILE_MAX);
		goto out;
	}
	size = (size_t)st.st_size;
	/* One byte more than fstat said, to notice a file that grew. */
	file = xmalloc(size + 1);
	if (store_read_full(fd, file, size + 1, &got) != 0) {
		store_fail(cause, "secret store %s: %s", path, strerror(errno));
		goto out;
	}
	if (got != size) {
		store_fail(cause, "secret store %s: changed size while being "
		    "read", path);
		goto out;
	}
	if (store_unseal(file, size, key, out, &why) != 0) {
		store_fail(cause, "secret store %s: %s", path, why);
		goto out;
	}
	rv = 0;
out:
	free(why);
	free(file);
	if (fd != -1)
		close(fd);
	return rv;
}

/* Encrypt and atomically replace a store file. */
int
store_save(const struct store *s, const char *path, const unsigned char *key,
    char **cause)
{
	unsigned char	*file = NULL;
	char		*tmp = NULL, *why = NULL;
	size_t		 flen = 0;
	int		 fd = -1, created = 0, rv = -1;

	if (store_sodium(cause) != 0)
		goto out;
	if (store_seal(s, key, &file, &flen, &why) != 0) {
		store_fail(cause, "secret store %s: %s", path, why);
		goto out;
	}
	xasprintf(&tmp, "%s.XXXXXX", path);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1) {	/* O_EXCL, 0600 */
		store_fail(cause, "secret store %s: cannot create a temporary "
		    "file: %s", path, strerror(errno));
		goto out;
	}
	created = 1;
	if (fchmod(fd, 0600) == -1 ||
	    store_write_full(fd, file, flen) != 0 ||
	    fsync(fd) == -1) {
		store_fail(cause, "secret store %s: writing %s: %s", path, tmp,
		    strerror(errno));
		goto out;
	}
	if (close(fd) == -1) {
		fd = -1;
		store_fail(cause, "secret store %s: writing %s: %s", path, tmp,
		    strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) == -1) {
		store_fail(cause, "secret store %s: rename from %s: %s", path,
		    tmp, strerror(errno));
		goto out;
	}
	created = 0;
	if (store_fsync_dir(path, &why) != 0) {
		store_fail(cause, "secret store %s: written, but may not "
		    "survive a crash: %s", path, why);
		goto out;
	}
	rv = 0;
out:
	if (fd != -1)
		close(fd);
	if (created)
		unlink(tmp);
	free(tmp);
	free(why);
	free(file);
	return rv;
}

/* Whether name is base followed by '.' and mkostemp's six letters or digits. */
static int
store_is_temp(const char *name, const char *base)
{
	size_t	n = strlen(base), i;

	if (strncmp(name, base, n) != 0 || name[n] != '.' || strlen(name + n + 1) != 6)
		return 0;
	for (i = n + 1; name[i] != '\0'; i++) {
		if (!((name[i] >= 'a' && name[i] <= 'z') ||
		    (name[i] >= 'A' && name[i] <= 'Z') ||
		    (name[i] >= '0' && name[i] <= '9')))
			return 0;
	}
	return 1;
}

/* Remove the temporary files of writers that died before their rename. */
static void
store_clean_temps(const char *path)
{
	char		*dir, *base;
	const char	*slash;
	struct dirent	*de;
	struct stat	 st;
	DIR		*d;
	int		 dfd;

	if ((slash = strrchr(path, '/')) == NULL) {
		dir = xstrdup(".");
		base = xstrdup(path);
	} else {
		dir = slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path));
		base = xstrdup(slash + 1);
	}
	if ((d = opendir(dir)) == NULL)
		goto out;
	dfd = dirfd(d);
	while ((de = readdir(d)) != NULL) {
		if (!store_is_temp(de->d_name, base))
			continue;
		/* Only what a writer (root, 0600) made; never follow a link. */
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && st.st_uid == geteuid())
			(void)unlinkat(dfd, de->d_name, 0);
	}
	closedir(d);
out:
	free(dir);
	free(base);
}

/* Take the writers' lock: flock on PATH.lock. */
int
store_lock(const char *path, char **cause)
{
	char		*lpath = NULL;
	struct stat	 st;
	int		 fd = -1;

	xasprintf(&lpath, "%s.lock", path);
	fd = open(lpath, O_RDWR|O_CREAT|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC, 0600);
	if (fd == -1) {
		store_open_fail(cause, "secret store lock", lpath, errno);
		goto out;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		store_fail(cause, "secret store lock %s: not a regular file of uid %ju",
		    lpath, (uintmax_t)geteuid());
		goto fail;
	}
	while (flock(fd, LOCK_EX) == -1) {
		if (errno != EINTR) {
			store_fail(cause, "secret store lock %s: %s", lpath,
			    strerror(errno));
			goto fail;
		}
	}
	store_clean_temps(path);
	goto out;
fail:
	close(fd);
	fd = -1;
out:
	free(lpath);
	return fd;
}

/* Release the writers' lock. */
void
store_unlock(int fd)
{
	if (fd != -1)
		close(fd);
}
