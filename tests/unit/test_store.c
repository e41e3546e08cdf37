/* Unit tests for the encrypted secret store (bridge/store.c). Must run as root. */
#include <sys/types.h>
#include <sys/stat.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "store.h"
#include "util.h"

/* The largest legal file, as documented in store.c. */
#define FILE_MAX	(8 + 24 + 16 + 4 + (size_t)STORE_MAX_ENTRIES * \
			    (2 + STORE_NAME_MAX + 4 + STORE_VALUE_MAX))

struct fx {
	char		 dir[64];
	char		*store;		/* dir/secrets.store */
	char		*keyfile;	/* dir/store.key */
	unsigned char	 key[STORE_KEY_BYTES];
	unsigned char	 key2[STORE_KEY_BYTES];
};

/* A plaintext under construction, for store_decode tests. */
struct pt {
	unsigned char	buf[512];
	size_t		len;
};

/* Remove one file or directory during the teardown walk. */
static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		return rmdir(path);
	return unlink(path);
}

/* Make a temporary directory and two fixed keys for each test. */
static int
setup(void **state)
{
	struct fx	*f;

	f = xcalloc(1, sizeof *f);
	strcpy(f->dir, "/tmp/test_store.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	xasprintf(&f->store, "%s/secrets.store", f->dir);
	xasprintf(&f->keyfile, "%s/store.key", f->dir);
	memset(f->key, 0x5a, sizeof f->key);
	memset(f->key2, 0x5a, sizeof f->key2);
	f->key2[31] ^= 1;
	*state = f;
	return 0;
}

/* Remove the temporary directory and everything in it. */
static int
teardown(void **state)
{
	struct fx	*f = *state;
	int		 rv;

	rv = nftw(f->dir, rm_one, 16, FTW_DEPTH|FTW_PHYS);
	free(f->store);
	free(f->keyfile);
	free(f);
	return rv;
}

/* Path of name inside the test directory; caller frees. */
static char *
tpath(const struct fx *f, const char *name)
{
	char	*p;

	xasprintf(&p, "%s/%s", f->dir, name);
	return p;
}

/* Write a file with the given bytes and mode. */
static void
write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	int	fd;

	unlink(path);
	fd = open(path, O_WRONLY|O_CREAT|O_EXCL, 0600);
	assert_true(fd != -1);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(close(fd), 0);
}

/* Read a whole file into a malloc'd buffer. */
static unsigned char *
read_file(const char *path, size_t *len)
{
	struct stat	 st;
	unsigned char	*buf;
	int		 fd;

	fd = open(path, O_RDONLY);
	assert_true(fd != -1);
	assert_int_equal(fstat(fd, &st), 0);
	buf = xmalloc((size_t)st.st_size + 1);
	assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* Count the directory entries other than . and .. in dir. */
static int
count_dir(const char *dir)
{
	DIR		*d;
	struct dirent	*de;
	int		 n = 0;

	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	}
	closedir(d);
	return n;
}

/* Load an empty store (missing file, missing_ok). */
static struct store *
empty_store(const struct fx *f)
{
	struct store	*s = NULL;
	char		*cause = NULL;
	char		*p = tpath(f, "does-not-exist");

	assert_int_equal(store_load(p, f->key, 1, &s, &cause), 0);
	assert_non_null(s);
	assert_int_equal(store_count(s), 0);
	free(p);
	return s;
}

/* Set a string value, which must succeed. */
static void
set_str(struct store *s, const char *name, const char *val)
{
	char	*cause = NULL;

	if (store_set(s, name, (const unsigned char *)val, strlen(val),
	    &cause) != 0)
		fail_msg("store_set %s: %s", name, cause);
}

/* Assert that name holds exactly the given bytes. */
static void
assert_value(const struct store *s, const char *name, const void *val,
    size_t len)
{
	unsigned char	*v = NULL;
	size_t		 vlen = 0;

	assert_int_equal(store_get(s, name, &v, &vlen), 0);
	assert_int_equal(vlen, len);
	assert_memory_equal(v, val, len);
	sodium_free(v);
}

/* Save s with key and load it back. */
static struct store *
save_load(const struct fx *f, const struct store *s)
{
	struct store	*t = NULL;
	char		*cause = NULL;

	if (store_save(s, f->store, f->key, &cause) != 0)
		fail_msg("store_save: %s", cause);
	if (store_load(f->store, f->key, 0, &t, &cause) != 0)
		fail_msg("store_load: %s", cause);
	return t;
}

/* Expect store_load to fail with a cause containing want. */
static void
expect_load_fail(const char *path, const unsigned char *key, const char *want)
{
	struct store	*s = NULL;
	char		*cause = NULL;

	assert_int_equal(store_load(path, key, 0, &s, &cause), -1);
	assert_null(s);
	assert_non_null(cause);
	if (strstr(cause, want) == NULL)
		fail_msg("cause \"%s\" lacks \"%s\"", cause, want);
	free(cause);
}

/* Expect store_key_load to fail with a cause containing want. */
static void
expect_key_fail(const char *path, const char *want)
{
	unsigned char	*k = NULL;
	char		*cause = NULL;

	assert_int_equal(store_key_load(path, &k, &cause), -1);
	assert_null(k);
	assert_non_null(cause);
	if (strstr(cause, want) == NULL)
		fail_msg("cause \"%s\" lacks \"%s\"", cause, want);
	free(cause);
}

/* Expect store_key_load to succeed with the given key. */
static void
expect_key_ok(const char *path, const unsigned char *want)
{
	unsigned char	*k = NULL;
	char		*cause = NULL;

	if (store_key_load(path, &k, &cause) != 0)
		fail_msg("store_key_load %s: %s", path, cause);
	assert_memory_equal(k, want, STORE_KEY_BYTES);
	sodium_free(k);
}

/* Set, save, load and get, including binary values. */
static void
test_roundtrip(void **state)
{
	struct fx		*f = *state;
	struct store		*s, *t;
	static const unsigned char bin[] = { 0, 1, 0xff, '\n', 0, 0x80 };

	s = empty_store(f);
	set_str(s, "GH_TOKEN", "ghp_0123456789abcdef");
	assert_int_equal(store_set(s, "bin", bin, sizeof bin, NULL), 0);
	t = save_load(f, s);
	assert_int_equal(store_count(t), 2);
	assert_value(t, "GH_TOKEN", "ghp_0123456789abcdef", 20);
	assert_value(t, "bin", bin, sizeof bin);
	store_free(s);
	store_free(t);
}

/* Names come back in byte order whatever order they were set in. */
static void
test_list_sorted(void **state)
{
	struct fx	*f = *state;
	struct store	*s, *t;
	static const char *in[] = { "zeta", "alpha", "a.b", "Alpha", "_x",
	    "a-b", "0", "a" };
	static const char *want[] = { "0", "Alpha", "_x", "a", "a-b", "a.b",
	    "alpha", "zeta" };
	size_t		 i;

	s = empty_store(f);
	for (i = 0; i < sizeof in / sizeof in[0]; i++)
		set_str(s, in[i], "v");
	t = save_load(f, s);
	assert_int_equal(store_count(s), 8);
	assert_int_equal(store_count(t), 8);
	for (i = 0; i < 8; i++) {
		assert_string_equal(store_name(s, i), want[i]);
		assert_string_equal(store_name(t, i), want[i]);
	}
	assert_null(store_name(s, 8));
	assert_null(store_name(t, 8));
	store_free(s);
	store_free(t);
}

/* rm removes one name, and refuses a name that is not there. */
static void
test_rm(void **state)
{
	struct fx	*f = *state;
	struct store	*s, *t;
	unsigned char	*v = NULL;
	size_t		 len;

	s = empty_store(f);
	set_str(s, "a", "1");
	set_str(s, "b", "2");
	set_str(s, "c", "3");
	assert_int_equal(store_rm(s, "b"), 0);
	assert_int_equal(store_count(s), 2);
	assert_string_equal(store_name(s, 0), "a");
	assert_string_equal(store_name(s, 1), "c");
	errno = 0;
	assert_int_equal(store_get(s, "b", &v, &len), -1);
	assert_int_equal(errno, ENOENT);
	assert_null(v);
	assert_int_equal(store_rm(s, "b"), -1);
	assert_int_equal(store_rm(s, "nope"), -1);
	t = save_load(f, s);
	assert_int_equal(store_count(t), 2);
	assert_value(t, "a", "1", 1);
	assert_value(t, "c", "3", 1);
	assert_int_equal(store_rm(t, "a"), 0);
	assert_int_equal(store_rm(t, "c"), 0);
	assert_int_equal(store_count(t), 0);
	store_free(s);
	store_free(t);
}

/* set on an existing name replaces its value instead of adding an entry. */
static void
test_replace(void **state)
{
	struct fx	*f = *state;
	struct store	*s, *t;

	s = empty_store(f);
	set_str(s, "TOKEN", "first-and-longer");
	set_str(s, "TOKEN", "second");
	assert_int_equal(store_count(s), 1);
	assert_value(s, "TOKEN", "second", 6);
	t = save_load(f, s);
	assert_int_equal(store_count(t), 1);
	assert_value(t, "TOKEN", "second", 6);
	store_free(s);
	store_free(t);
}

/* store_get hands out a copy: changing it leaves the store alone. */
static void
test_get_copy(void **state)
{
	struct fx	*f = *state;
	struct store	*s;
	unsigned char	*v = NULL;
	size_t		 len = 0;

	s = empty_store(f);
	set_str(s, "T", "abc");
	assert_int_equal(store_get(s, "T", &v, &len), 0);
	v[0] = 'X';
	sodium_free(v);
	assert_value(s, "T", "abc", 3);
	store_free(s);
}

/* A different key fails authentication. */
static void
test_wrong_key(void **state)
{
	struct fx	*f = *state;
	struct store	*s;
	char		*cause = NULL;

	s = empty_store(f);
	set_str(s, "T", "value");
	assert_int_equal(store_save(s, f->store, f->key, &cause), 0);
	expect_load_fail(f->store, f->key2,
	    "failed authentication: wrong key or tampered file");
	store_free(s);
}

/* Flipping any bit pattern in any byte (magic, nonce, MAC, ciphertext) is refused. */
static void
test_flip_each_byte(void **state)
{
	struct fx	*f = *state;
	struct store	*s, *t;
	unsigned char	*orig, *buf;
	size_t		 len, i, m;
	static const unsigned char masks[] = { 0x01, 0x80, 0xff };

	s = empty_store(f);
	set_str(s, "A", "secret-a");
	set_str(s, "B", "secret-b");
	t = save_load(f, s);
	store_free(t);
	orig = read_file(f->store, &len);
	assert_int_equal(len, 8 + 24 + 16 + 4 + 2 * (2 + 1 + 4 + 8));
	buf = xmalloc(len);
	for (i = 0; i < len; i++) {
		for (m = 0; m < sizeof masks; m++) {
			memcpy(buf, orig, len);
			buf[i] ^= masks[m];
			write_file(f->store, buf, len, 0600);
			expect_load_fail(f->store, f->key, i < 8 ?
			    "bad magic" : "failed authentication");
		}
	}
	/* The untouched file still loads, so the failures were the flips. */
	write_file(f->store, orig, len, 0600);
	t = save_load(f, s);
	store_free(t);
	free(buf);
	free(orig);
	store_free(s);
}

/* Every truncation, and an appended byte, is refused. */
static void
test_truncated(void **state)
{
	struct fx	*f = *state;
	struct store	*s, *t = NULL;
	unsigned char	*orig, *buf;
	size_t		 len, i;
	char		*cause = NULL;

	s = empty_store(f);
	set_str(s, "A", "secret-a");
	assert_int_equal(store_save(s, f->store, f->key, &cause), 0);
	orig = read_file(f->store, &len);
	for (i = 0; i < len; i++) {
		write_file(f->store, orig, i, 0600);
		expect_load_fail(f->store, f->key, i < 52 ? "too short" :
		    "failed authentication");
	}
	buf = xmalloc(len + 1);
	memcpy(buf, orig, len);
	buf[len] = 0;
	write_file(f->store, buf, len + 1, 0600);
	expect_load_fail(f->store, f->key, "failed authentication");
	write_file(f->store, orig, len, 0600);
	assert_int_equal(store_load(f->store, f->key, 0, &t, &cause), 0);
	store_free(t);
	free(buf);
	free(orig);
	store_free(s);
}

/* A missing store is an error unless missing_ok, then an empty store. */
static void
test_missing(void **state)
{
	struct fx	*f = *state;
	struct store	*s = NULL;
	char		*cause = NULL;

	expect_load_fail(f->store, f->key, "No such file or directory");
	assert_int_equal(store_load(f->store, f->key, 1, &s, &cause), 0);
	assert_non_null(s);
	assert_int_equal(store_count(s), 0);
	store_free(s);
}

/* The store file itself must be a root-owned 0600 regular file. */
static void
test_store_file_checks(void **state)
{
	struct fx	*f = *state;
	struct store	*s, *t;
	char		*link = tpath(f, "link.store");
	char		*cause = NULL;

	s = empty_store(f);
	set_str(s, "A", "a");
	assert_int_equal(store_save(s, f->store, f->key, &cause), 0);

	assert_int_equal(chmod(f->store, 0640), 0);
	expect_load_fail(f->store, f->key, "mode 0640");
	assert_int_equal(chmod(f->store, 0600), 0);

	assert_int_equal(symlink(f->store, link), 0);
	expect_load_fail(link, f->key, "symbolic link");

	assert_int_equal(chown(f->store, 1, 0), 0);
	expect_load_fail(f->store, f->key, "not root");
	assert_int_equal(chown(f->store, 0, 0), 0);

	t = NULL;
	assert_int_equal(store_load(f->store, f->key, 0, &t, &cause), 0);
	store_free(t);
	store_free(s);
	free(link);
}

/* A file bigger than the largest legal store is refused before it is read. */
static void
test_store_too_large(void **state)
{
	struct fx	*f = *state;
	int		 fd;

	fd = open(f->store, O_WRONLY|O_CREAT|O_EXCL, 0600);
	assert_true(fd != -1);
	assert_int_equal(ftruncate(fd, (off_t)FILE_MAX + 1), 0);
	expect_load_fail(f->store, f->key, "too large");
	/* Sparse 1 TiB: reading it into memory first would abort the test. */
	assert_int_equal(ftruncate(fd, (off_t)1 << 40), 0);
	expect_load_fail(f->store, f->key, "too large");
	close(fd);
}

/* store_save leaves exactly one 0600 root file, with a fresh nonce each time. */
static void
test_save_atomic(void **state)
{
	struct fx	*f = *state;
	struct store	*s;
	struct stat	 st;
	unsigned char	*a, *b;
	size_t		 alen, blen;
	char		*cause = NULL;

	s = empty_store(f);
	set_str(s, "A", "a");
	umask(0277);	/* the mode is 0600 whatever the umask */
	assert_int_equal(store_save(s, f->store, f->key, &cause), 0);
	umask(022);
	assert_int_equal(count_dir(f->dir), 1);
	assert_int_equal(lstat(f->store, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_uid, 0);
	a = read_file(f->store, &alen);
	assert_memory_equal(a, "SHIMSTO1", 8);

	assert_int_equal(store_save(s, f->store, f->key, &cause), 0);
	assert_int_equal(count_dir(f->dir), 1);
	b = read_file(f->store, &blen);
	assert_int_equal(alen, blen);
	assert_memory_not_equal(a + 8, b + 8, 24);	/* nonce */
	assert_memory_not_equal(a + 32, b + 32, alen - 32);
	free(a);
	free(b);
	store_free(s);
}

/* A save that cannot complete reports it and leaves no temporary file behind. */
static void
test_save_fails_cleanly(void **state)
{
	struct fx	*f = *state;
	struct store	*s;
	char		*nodir = tpath(f, "nodir/secrets.store");
	char		*isdir = tpath(f, "isdir");
	char		*cause = NULL;

	s = empty_store(f);
	set_str(s, "A", "a");
	assert_int_equal(store_save(s, nodir, f->key, &cause), -1);
	assert_non_null(cause);
	assert_non_null(strstr(cause, "temporary"));
	free(cause);
	cause = NULL;

	assert_int_equal(mkdir(isdir, 0700), 0);
	assert_int_equal(store_save(s, isdir, f->key, &cause), -1);
	assert_non_null(cause);
	assert_non_null(strstr(cause, "rename"));
	free(cause);
	assert_int_equal(count_dir(f->dir), 1);	/* just isdir */
	free(nodir);
	free(isdir);
	store_free(s);
}

/* The file is exactly the documented format: magic, nonce, secretbox(plaintext). */
static void
test_file_format(void **state)
{
	struct fx	*f = *state;
	struct store	*s, *t = NULL;
	unsigned char	*file, *plain;
	size_t		 len;
	char		*cause = NULL;
	static const unsigned char want[] = {
		0, 0, 0, 2,
		0, 1, 'a', 0, 0, 0, 1, 'x',
		0, 2, 'b', 'b', 0, 0, 0, 2, 'y', 'z',
	};

	s = empty_store(f);
	set_str(s, "bb", "yz");
	set_str(s, "a", "x");
	assert_int_equal(store_save(s, f->store, f->key, &cause), 0);
	file = read_file(f->store, &len);
	assert_int_equal(len, 8 + 24 + 16 + sizeof want);
	assert_memory_equal(file, "SHIMSTO1", 8);
	plain = xmalloc(sizeof want);
	assert_int_equal(crypto_secretbox_open_easy(plain, file + 32,
	    len - 32, file + 8, f->key), 0);
	assert_memory_equal(plain, want, sizeof want);
	assert_int_equal(store_unseal(file, len, f->key, &t, &cause), 0);
	assert_int_equal(store_count(t), 2);
	store_free(t);
	free(plain);
	free(file);
	store_free(s);
}

/* Bad names, empty or oversized values and a full store are refused by set. */
static void
test_set_limits(void **state)
{
	struct fx		*f = *state;
	struct store		*s, *t;
	unsigned char		*big;
	char			 name[STORE_NAME_MAX + 2];
	char			*cause = NULL;
	size_t			 i;
	static const char	*bad[] = { "", ".x", "-x", "a b", "a/b",
	    "a=b", "\xc3\xa4", "a\n" };

	s = empty_store(f);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(store_set(s, bad[i],
		    (const unsigned char *)"v", 1, &cause), -1);
		assert_non_null(strstr(cause, "invalid secret name"));
		free(cause);
		cause = NULL;
	}
	memset(name, 'n', sizeof name);
	name[STORE_NAME_MAX + 1] = '\0';
	assert_int_equal(store_set(s, name, (const unsigned char *)"v", 1,
	    &cause), -1);
	free(cause);
	cause = NULL;
	name[STORE_NAME_MAX] = '\0';
	assert_int_equal(store_set(s, name, (const unsigned char *)"v", 1,
	    NULL), 0);
	assert_int_equal(store_set(s, "x.y-z_0", (const unsigned char *)"v",
	    1, NULL), 0);

	big = xcalloc(1, STORE_VALUE_MAX + 1);
	assert_int_equal(store_set(s, "E", big, 0, &cause), -1);
	assert_non_null(strstr(cause, "empty"));
	free(cause);
	cause = NULL;
	assert_int_equal(store_set(s, "E", big, STORE_VALUE_MAX + 1, &cause),
	    -1);
	assert_non_null(strstr(cause, "more than the limit"));
	free(cause);
	cause = NULL;
	big[STORE_VALUE_MAX - 1] = 0x42;
	assert_int_equal(store_set(s, "BIG", big, STORE_VALUE_MAX, NULL), 0);
	assert_int_equal(store_count(s), 3);

	t = save_load(f, s);
	assert_value(t, "BIG", big, STORE_VALUE_MAX);
	assert_value(t, name, "v", 1);
	store_free(t);
	free(big);
	store_free(s);
}

/* A store holds at most STORE_MAX_ENTRIES names, and a full store still round-trips. */
static void
test_max_entries(void **state)
{
	struct fx	*f = *state;
	struct store	*s, *t;
	char		 name[16];
	char		*cause = NULL;
	int		 i;

	s = empty_store(f);
	for (i = 0; i < STORE_MAX_ENTRIES; i++) {
		snprintf(name, sizeof name, "n%04d", i);
		set_str(s, name, name);
	}
	assert_int_equal(store_set(s, "one-more", (const unsigned char *)"v",
	    1, &cause), -1);
	assert_non_null(strstr(cause, "maximum"));
	free(cause);
	set_str(s, "n0007", "replaced");	/* replacing still works */
	t = save_load(f, s);
	assert_int_equal(store_count(t), STORE_MAX_ENTRIES);
	assert_value(t, "n0007", "replaced", 8);
	assert_value(t, "n1023", "n1023", 5);
	store_free(t);
	store_free(s);
}

/* Key files: 32 raw bytes, or 64 hex digits with an optional newline. */
static void
test_key_formats(void **state)
{
	struct fx	*f = *state;
	unsigned char	 raw[STORE_KEY_BYTES];
	char		 hex[2 * STORE_KEY_BYTES + 2];
	size_t		 i;

	for (i = 0; i < sizeof raw; i++)
		raw[i] = (unsigned char)(i * 7 + 1);
	sodium_bin2hex(hex, sizeof hex, raw, sizeof raw);
	write_file(f->keyfile, raw, 32, 0600);
	expect_key_ok(f->keyfile, raw);
	write_file(f->keyfile, hex, 64, 0600);
	expect_key_ok(f->keyfile, raw);
	hex[64] = '\n';
	write_file(f->keyfile, hex, 65, 0400);
	expect_key_ok(f->keyfile, raw);
	for (i = 0; i < 64; i++)
		if (hex[i] >= 'a' && hex[i] <= 'f')
			hex[i] = (char)(hex[i] - 'a' + 'A');
	write_file(f->keyfile, hex, 65, 0600);
	expect_key_ok(f->keyfile, raw);
}

/* Key files of any other size or content are refused. */
static void
test_key_bad_content(void **state)
{
	struct fx	*f = *state;
	char		 buf[80];
	unsigned char	 zero[STORE_KEY_BYTES], want[STORE_KEY_BYTES];
	static const size_t sizes[] = { 0, 1, 31, 33, 63, 66, 67, 80 };
	size_t		 i;

	memset(buf, 'a', sizeof buf);
	for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		write_file(f->keyfile, buf, sizes[i], 0600);
		expect_key_fail(f->keyfile, "wrong size");
	}
	buf[64] = 'a';					/* 65 without newline */
	write_file(f->keyfile, buf, 65, 0600);
	expect_key_fail(f->keyfile, "wrong size");
	buf[64] = '\n';
	buf[65] = '\n';					/* two newlines */
	write_file(f->keyfile, buf, 66, 0600);
	expect_key_fail(f->keyfile, "wrong size");
	buf[10] = 'g';					/* not hex */
	write_file(f->keyfile, buf, 65, 0600);
	expect_key_fail(f->keyfile, "hexadecimal");
	buf[10] = 'a';
	buf[63] = ' ';
	write_file(f->keyfile, buf, 64, 0600);
	expect_key_fail(f->keyfile, "hexadecimal");
	buf[63] = 'a';
	write_file(f->keyfile, buf, 65, 0600);		/* control: valid */
	memset(want, 0xaa, sizeof want);
	expect_key_ok(f->keyfile, want);

	memset(zero, 0, sizeof zero);
	write_file(f->keyfile, zero, sizeof zero, 0600);
	expect_key_fail(f->keyfile, "all zeros");
}

/* Key files readable or writable by group or others are refused. */
static void
test_key_mode(void **state)
{
	struct fx	*f = *state;
	static const mode_t bad[] = { 0644, 0640, 0604, 0610, 0601, 0620,
	    0602, 0660 };
	size_t		 i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		write_file(f->keyfile, f->key, sizeof f->key, bad[i]);
		expect_key_fail(f->keyfile, "lets group or others");
	}
	write_file(f->keyfile, f->key, sizeof f->key, 0600);
	expect_key_ok(f->keyfile, f->key);
	write_file(f->keyfile, f->key, sizeof f->key, 0400);
	expect_key_ok(f->keyfile, f->key);
}

/* A symbolic link to a good key file is refused. */
static void
test_key_symlink(void **state)
{
	struct fx	*f = *state;
	char		*link = tpath(f, "link.key");

	write_file(f->keyfile, f->key, sizeof f->key, 0600);
	assert_int_equal(symlink(f->keyfile, link), 0);
	expect_key_fail(link, "symbolic link");
	expect_key_ok(f->keyfile, f->key);
	free(link);
}

/* A key file not owned by root is refused. */
static void
test_key_not_root(void **state)
{
	struct fx	*f = *state;

	write_file(f->keyfile, f->key, sizeof f->key, 0600);
	assert_int_equal(chown(f->keyfile, 1, 1), 0);
	expect_key_fail(f->keyfile, "owned by uid 1, not root");
	assert_int_equal(chown(f->keyfile, 0, 1), 0);	/* group is not checked */
	expect_key_ok(f->keyfile, f->key);
}

/* A directory or FIFO is refused, and the FIFO does not hang the loader. */
static void
test_key_not_regular(void **state)
{
	struct fx	*f = *state;

	assert_int_equal(mkdir(f->keyfile, 0700), 0);
	expect_key_fail(f->keyfile, "not a regular file");
	assert_int_equal(rmdir(f->keyfile), 0);
	assert_int_equal(mkfifo(f->keyfile, 0600), 0);
	expect_key_fail(f->keyfile, "not a regular file");
	expect_key_fail(f->store, "No such file");
}

/* store_key_create makes a fresh loadable 0600 key and never replaces a file. */
static void
test_key_create(void **state)
{
	struct fx	*f = *state;
	struct stat	 st;
	unsigned char	*k1 = NULL, *k2 = NULL, *before, *after;
	size_t		 blen, alen;
	char		*other = tpath(f, "other.key");
	char		*link = tpath(f, "dangling.key");
	char		*target = tpath(f, "target.key");
	char		*cause = NULL;

	umask(0277);	/* the mode is 0600 whatever the umask */
	assert_int_equal(store_key_create(f->keyfile, &cause), 0);
	umask(022);
	assert_int_equal(lstat(f->keyfile, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_size, 65);
	assert_int_equal(store_key_load(f->keyfile, &k1, &cause), 0);

	before = read_file(f->keyfile, &blen);
	assert_int_equal(store_key_create(f->keyfile, &cause), -1);
	assert_non_null(strstr(cause, "File exists"));
	free(cause);
	cause = NULL;
	after = read_file(f->keyfile, &alen);
	assert_int_equal(alen, blen);
	assert_memory_equal(before, after, blen);

	assert_int_equal(store_key_create(other, &cause), 0);
	assert_int_equal(store_key_load(other, &k2, &cause), 0);
	assert_memory_not_equal(k1, k2, STORE_KEY_BYTES);

	/* A planted dangling symlink is not followed to create its target. */
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(store_key_create(link, &cause), -1);
	free(cause);
	assert_int_equal(access(target, F_OK), -1);

	free(before);
	free(after);
	sodium_free(k1);
	sodium_free(k2);
	free(other);
	free(link);
	free(target);
}

/* Open path and run store_check_file on it, returning its result. */
static int
check(const char *open_path, const char *check_path, int secret,
    const char *want)
{
	char	*cause = NULL;
	int	 fd, rv;

	fd = open(open_path, O_RDONLY);
	assert_true(fd != -1);
	rv = store_check_file(fd, check_path, secret, &cause);
	close(fd);
	if (rv == 0)
		assert_null(cause);
	else {
		assert_non_null(cause);
		assert_non_null(strstr(cause, check_path));
		if (want != NULL && strstr(cause, want) == NULL)
			fail_msg("cause \"%s\" lacks \"%s\"", cause, want);
		free(cause);
	}
	return rv;
}

/* Config mode refuses group/world-writable files but accepts readable ones. */
static void
test_check_file(void **state)
{
	struct fx	*f = *state;
	char		*conf = tpath(f, "bridge.conf");
	char		*other = tpath(f, "other.conf");
	char		*link = tpath(f, "link.conf");

	write_file(conf, "x", 1, 0644);
	assert_int_equal(check(conf, conf, 0, NULL), 0);
	assert_int_equal(check(conf, conf, 1, "mode 0644"), -1);
	assert_int_equal(chmod(conf, 0640), 0);
	assert_int_equal(check(conf, conf, 0, NULL), 0);
	assert_int_equal(chmod(conf, 0600), 0);
	assert_int_equal(check(conf, conf, 0, NULL), 0);
	assert_int_equal(check(conf, conf, 1, NULL), 0);
	assert_int_equal(chmod(conf, 0664), 0);
	assert_int_equal(check(conf, conf, 0, "mode 0664 lets group or "
	    "others write"), -1);
	assert_int_equal(chmod(conf, 0646), 0);
	assert_int_equal(check(conf, conf, 0, "write"), -1);
	assert_int_equal(chmod(conf, 0620), 0);
	assert_int_equal(check(conf, conf, 0, "write"), -1);
	assert_int_equal(chmod(conf, 0644), 0);

	assert_int_equal(chown(conf, 1, 0), 0);
	assert_int_equal(check(conf, conf, 0, "not root"), -1);
	assert_int_equal(chown(conf, 0, 0), 0);

	/* An fd opened through a symlink, checked by the link's path. */
	assert_int_equal(symlink(conf, link), 0);
	assert_int_equal(check(link, link, 0, "symbolic link"), -1);
	/* An fd that is not the file path names. */
	write_file(other, "y", 1, 0644);
	assert_int_equal(check(other, conf, 0, "replaced"), -1);
	assert_int_equal(check(f->dir, f->dir, 0, "not a regular file"), -1);

	free(conf);
	free(other);
	free(link);
}

/* Start a plaintext with an entry count. */
static void
pt_init(struct pt *p, uint32_t count)
{
	p->len = 0;
	p->buf[p->len++] = (unsigned char)(count >> 24);
	p->buf[p->len++] = (unsigned char)(count >> 16);
	p->buf[p->len++] = (unsigned char)(count >> 8);
	p->buf[p->len++] = (unsigned char)count;
}

/* Append raw bytes. */
static void
pt_raw(struct pt *p, const void *data, size_t len)
{
	assert_true(len <= sizeof p->buf - p->len);
	memcpy(p->buf + p->len, data, len);
	p->len += len;
}

/* Append an entry with explicit length fields (which may lie). */
static void
pt_entry_raw(struct pt *p, uint16_t nlen, const char *name, uint32_t vlen,
    const char *val)
{
	unsigned char	h[4];

	h[0] = (unsigned char)(nlen >> 8);
	h[1] = (unsigned char)nlen;
	pt_raw(p, h, 2);
	pt_raw(p, name, strlen(name));
	h[0] = (unsigned char)(vlen >> 24);
	h[1] = (unsigned char)(vlen >> 16);
	h[2] = (unsigned char)(vlen >> 8);
	h[3] = (unsigned char)vlen;
	pt_raw(p, h, 4);
	pt_raw(p, val, strlen(val));
}

/* Append an honest entry. */
static void
pt_entry(struct pt *p, const char *name, const char *val)
{
	pt_entry_raw(p, (uint16_t)strlen(name), name, (uint32_t)strlen(val),
	    val);
}

/* Expect decoding p to fail with want in the cause, no value in it, *out untouched. */
static void
decode_fail(const struct pt *p, const char *want)
{
	struct store	*sentinel = (struct store *)&sentinel;
	struct store	*s = sentinel;
	char		*cause = NULL;

	assert_int_equal(store_decode(p->buf, p->len, &s, &cause), -1);
	assert_ptr_equal(s, sentinel);
	assert_non_null(cause);
	if (strstr(cause, want) == NULL)
		fail_msg("cause \"%s\" lacks \"%s\"", cause, want);
	assert_null(strstr(cause, "SECRET"));
	free(cause);
}

/* Expect decoding p to succeed with n entries. */
static struct store *
decode_ok(const struct pt *p, size_t n)
{
	struct store	*s = NULL;
	char		*cause = NULL;

	if (store_decode(p->buf, p->len, &s, &cause) != 0)
		fail_msg("store_decode: %s", cause);
	assert_int_equal(store_count(s), n);
	return s;
}

/* Hand-made well-formed plaintexts decode. */
static void
test_decode_valid(void **state)
{
	struct pt	 p;
	struct store	*s;

	(void)state;
	pt_init(&p, 0);
	store_free(decode_ok(&p, 0));
	pt_init(&p, 2);
	pt_entry(&p, "a", "SECRET1");
	pt_entry(&p, "b", "SECRET2");
	s = decode_ok(&p, 2);
	assert_value(s, "a", "SECRET1", 7);
	assert_value(s, "b", "SECRET2", 7);
	store_free(s);
}

/* Hand-made malformed plaintexts are refused for the right reason. */
static void
test_decode_malformed(void **state)
{
	struct pt	 p;
	char		 n65[STORE_NAME_MAX + 2];

	(void)state;

	p.len = 0;
	decode_fail(&p, "too short");
	pt_init(&p, 0);
	p.len = 3;
	decode_fail(&p, "too short");

	/* count too large, and a count that claims more than is there */
	pt_init(&p, STORE_MAX_ENTRIES + 1);
	decode_fail(&p, "entry count 1025");
	pt_init(&p, 0xffffffffu);
	decode_fail(&p, "entry count");
	pt_init(&p, 2);
	pt_entry(&p, "a", "SECRET");
	decode_fail(&p, "entry 1: truncated before the name length");

	/* name length past the end, zero, too long */
	pt_init(&p, 1);
	pt_entry_raw(&p, 10, "abc", 0, "");
	p.len = 4 + 2 + 3;
	decode_fail(&p, "name runs past the end");
	pt_init(&p, 1);
	pt_entry_raw(&p, 0, "", 6, "SECRET");
	decode_fail(&p, "name length 0");
	memset(n65, 'n', sizeof n65);
	n65[STORE_NAME_MAX + 1] = '\0';
	pt_init(&p, 1);
	pt_entry(&p, n65, "SECRET");
	decode_fail(&p, "name length 65");
	n65[STORE_NAME_MAX] = '\0';
	pt_init(&p, 1);
	pt_entry(&p, n65, "SECRET");
	store_free(decode_ok(&p, 1));

	/* invalid names */
	pt_init(&p, 1);
	pt_entry(&p, "a b", "SECRET");
	decode_fail(&p, "invalid name");
	pt_init(&p, 1);
	pt_entry(&p, ".a", "SECRET");
	decode_fail(&p, "invalid name");
	pt_init(&p, 1);
	pt_entry(&p, "-a", "SECRET");
	decode_fail(&p, "invalid name");
	pt_init(&p, 1);					/* NUL in name */
	pt_raw(&p, "\0\2a\0\0\0\0\6SECRET", 13);
	decode_fail(&p, "invalid name");

	/* unsorted and duplicate names; sorted is fine */
	pt_init(&p, 2);
	pt_entry(&p, "b", "SECRET");
	pt_entry(&p, "a", "SECRET");
	decode_fail(&p, "entry 1: name is not after");
	pt_init(&p, 2);
	pt_entry(&p, "ab", "SECRET");
	pt_entry(&p, "a", "SECRET");
	decode_fail(&p, "not after");
	pt_init(&p, 2);
	pt_entry(&p, "a", "SECRET");
	pt_entry(&p, "a", "SECRET");
	decode_fail(&p, "duplicate");
	pt_init(&p, 2);
	pt_entry(&p, "a", "SECRET");
	pt_entry(&p, "ab", "SECRET");
	store_free(decode_ok(&p, 2));

	/* trailing bytes */
	pt_init(&p, 1);
	pt_entry(&p, "a", "SECRET");
	pt_raw(&p, "\0", 1);
	decode_fail(&p, "1 unexpected bytes after the last entry");
	pt_init(&p, 0);
	pt_raw(&p, "x", 1);
	decode_fail(&p, "unexpected bytes");

	/* values: zero length, too long, past the end, truncated length */
	pt_init(&p, 1);
	pt_entry(&p, "a", "");
	decode_fail(&p, "value length 0");
	pt_init(&p, 1);
	pt_entry_raw(&p, 1, "a", STORE_VALUE_MAX + 1, "SECRET");
	decode_fail(&p, "value length 65537");
	pt_init(&p, 1);
	pt_entry_raw(&p, 1, "a", 7, "SECRET");
	decode_fail(&p, "value runs past the end");
	pt_init(&p, 1);
	pt_entry_raw(&p, 1, "a", 0xffffffffu, "SECRET");
	decode_fail(&p, "value length");
	pt_init(&p, 1);
	pt_raw(&p, "\0\1a\0\0", 5);
	decode_fail(&p, "truncated before the value length");
}

/* Decoding fails the same way through store_unseal on a properly encrypted file. */
static void
test_unseal_malformed(void **state)
{
	struct fx	*f = *state;
	struct pt	 p;
	struct store	*s = NULL;
	unsigned char	 file[32 + 16 + sizeof p.buf];
	char		*cause = NULL;

	pt_init(&p, 2);
	pt_entry(&p, "b", "SECRET");
	pt_entry(&p, "a", "SECRET");
	memcpy(file, "SHIMSTO1", 8);
	randombytes_buf(file + 8, 24);
	assert_int_equal(crypto_secretbox_easy(file + 32, p.buf, p.len,
	    file + 8, f->key), 0);
	assert_int_equal(store_unseal(file, 32 + 16 + p.len, f->key, &s,
	    &cause), -1);
	assert_null(s);
	assert_non_null(strstr(cause, "corrupt contents: entry 1"));
	free(cause);
}

/*
 * Where a writer dies in test_killed_writer: 0 nowhere, 1 at the fsync of its
 * temporary file (written, not yet renamed), 2 at the fsync of the directory
 * (renamed). This definition takes the place of libc's fsync for store.c.
 */
static int kill_at_fsync;

int
fsync(int fd)
{
	struct stat	st;

	if (kill_at_fsync != 0 && fstat(fd, &st) == 0 &&
	    ((kill_at_fsync == 1 && S_ISREG(st.st_mode)) ||
	    (kill_at_fsync == 2 && S_ISDIR(st.st_mode))))
		raise(SIGKILL);
	return (int)syscall(SYS_fsync, fd);
}

/* In a child: lock, load, set name, save, unlock; exit 0 on success. */
static void
child_set(const struct fx *f, const char *name)
{
	struct store	*s = NULL;
	char		*cause = NULL;
	int		 lk;

	if ((lk = store_lock(f->store, &cause)) < 0 ||
	    store_load(f->store, f->key, 1, &s, &cause) != 0 ||
	    store_set(s, name, (const unsigned char *)"value", 5, &cause) != 0 ||
	    store_save(s, f->store, f->key, &cause) != 0) {
		fprintf(stderr, "child %s: %s\n", name, cause);
		_exit(1);
	}
	store_unlock(lk);
	store_free(s);
	_exit(0);
}

/* Fifty writers at once, each adding its own name: every one is kept. */
static void
test_lock_parallel_writers(void **state)
{
	struct fx	*f = *state;
	struct store	*s = NULL;
	char		*cause = NULL, name[16];
	pid_t		 pids[50];
	int		 i, status;

	for (i = 0; i < 50; i++) {
		snprintf(name, sizeof name, "w%02d", i);
		pids[i] = fork();
		assert_true(pids[i] != -1);
		if (pids[i] == 0)
			child_set(f, name);
	}
	for (i = 0; i < 50; i++) {
		assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	assert_int_equal(store_load(f->store, f->key, 0, &s, &cause), 0);
	assert_int_equal(store_count(s), 50);
	for (i = 0; i < 50; i++) {
		snprintf(name, sizeof name, "w%02d", i);
		assert_string_equal(store_name(s, (size_t)i), name);
	}
	store_free(s);
	/* Only the store and its lock file are left: no temporary file. */
	assert_int_equal(count_dir(f->dir), 2);
}

/* The lock is exclusive: a second taker waits until the first releases it. */
static void
test_lock_exclusive(void **state)
{
	struct fx	*f = *state;
	char		*cause = NULL, *lpath;
	int		 lk, fd;

	lk = store_lock(f->store, &cause);
	assert_true(lk >= 0);
	lpath = tpath(f, "secrets.store.lock");
	fd = open(lpath, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), -1);
	assert_int_equal(errno, EWOULDBLOCK);
	store_unlock(lk);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	close(fd);
	/* A symbolic link in place of the lock file is refused. */
	unlink(lpath);
	assert_int_equal(symlink("/etc/passwd", lpath), 0);
	assert_int_equal(store_lock(f->store, &cause), -1);
	assert_non_null(strstr(cause, "symbolic link"));
	free(cause);
	free(lpath);
}

/*
 * A writer killed after writing its temporary file but before the rename leaves
 * the previous store readable and unchanged; the next writer's lock removes the
 * left-over file. Killed after the rename, the new store is complete.
 */
static void
test_killed_writer(void **state)
{
	struct fx	*f = *state;
	struct store	*s = NULL;
	char		*cause = NULL;
	pid_t		 pid;
	int		 status, lk;

	pid = fork();
	assert_true(pid != -1);
	if (pid == 0)
		child_set(f, "first");
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	kill_at_fsync = 1;
	pid = fork();
	if (pid == 0)
		child_set(f, "second");
	kill_at_fsync = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* store, lock, and the dead writer's temporary file */
	assert_int_equal(count_dir(f->dir), 3);
	assert_int_equal(store_load(f->store, f->key, 0, &s, &cause), 0);
	assert_int_equal(store_count(s), 1);
	assert_string_equal(store_name(s, 0), "first");
	store_free(s);
	s = NULL;
	lk = store_lock(f->store, &cause);
	assert_true(lk >= 0);
	assert_int_equal(count_dir(f->dir), 2);
	store_unlock(lk);

	kill_at_fsync = 2;
	pid = fork();
	if (pid == 0)
		child_set(f, "third");
	kill_at_fsync = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	assert_int_equal(store_load(f->store, f->key, 0, &s, &cause), 0);
	assert_int_equal(store_count(s), 2);
	assert_string_equal(store_name(s, 1), "third");
	store_free(s);
}

/* Run every test, each in its own temporary directory. */
int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_roundtrip),
		T(test_list_sorted),
		T(test_rm),
		T(test_replace),
		T(test_get_copy),
		T(test_wrong_key),
		T(test_flip_each_byte),
		T(test_truncated),
		T(test_missing),
		T(test_store_file_checks),
		T(test_store_too_large),
		T(test_save_atomic),
		T(test_save_fails_cleanly),
		T(test_file_format),
		T(test_set_limits),
		T(test_max_entries),
		T(test_key_formats),
		T(test_key_bad_content),
		T(test_key_mode),
		T(test_key_symlink),
		T(test_key_not_root),
		T(test_key_not_regular),
		T(test_key_create),
		T(test_check_file),
		T(test_decode_valid),
		T(test_decode_malformed),
		T(test_unseal_malformed),
		T(test_lock_parallel_writers),
		T(test_lock_exclusive),
		T(test_killed_writer),
#undef T
	};

	if (geteuid() != 0) {
		fprintf(stderr, "test_store: must run as root (it checks file "
		    "ownership)\n");
		return 1;
	}
	if (sodium_init() < 0)
		return 1;
	umask(022);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
