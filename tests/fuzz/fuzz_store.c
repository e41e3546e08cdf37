/*
 * libFuzzer target for the secret store: the plaintext decoder and the whole
 * decrypt path. The first input byte picks the mode (mod 3), the rest is the data:
 *
 *	0	data is a plaintext: store_decode
 *	1	data is a store file: store_unseal with a fixed key
 *	2	data is a plaintext, sealed here with the fixed key: store_unseal,
 *		which must agree with store_decode on the same bytes
 *
 * Whatever decodes must re-encode (by an encoder written here from the format
 * description, not store.c's) to exactly the input, since the format allows
 * one encoding per store; and must stay sorted through a set and an rm.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "store.h"

#define FUZZ_HDR	(8 + crypto_secretbox_NONCEBYTES)

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const unsigned char fuzz_key[STORE_KEY_BYTES] = {
	0x73, 0x68, 0x69, 0x6d, 0x62, 0x72, 0x69, 0x64,
	0x67, 0x65, 0x2d, 0x66, 0x75, 0x7a, 0x7a, 0x2d,
	0x6b, 0x65, 0x79, 0x2d, 0x30, 0x31, 0x32, 0x33,
	0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x61, 0x62,
};

/* Check that s encodes to exactly plain[0..len). */
static void
fuzz_canonical(const struct store *s, const unsigned char *plain, size_t len)
{
	const char	*name;
	unsigned char	*v = NULL, hdr[4];
	size_t		 i, pos = 4, nlen, vlen;

	if (len < 4 || store_get(s, "", &v, &vlen) != -1)
		abort();
	hdr[0] = (unsigned char)(store_count(s) >> 24);
	hdr[1] = (unsigned char)(store_count(s) >> 16);
	hdr[2] = (unsigned char)(store_count(s) >> 8);
	hdr[3] = (unsigned char)store_count(s);
	if (memcmp(plain, hdr, 4) != 0)
		abort();
	for (i = 0; i < store_count(s); i++) {
		name = store_name(s, i);
		nlen = strlen(name);
		if (i > 0 && strcmp(store_name(s, i - 1), name) >= 0)
			abort();
		if (len - pos < 2 + nlen ||
		    plain[pos] != (nlen >> 8) || plain[pos + 1] != (nlen & 0xff) ||
		    memcmp(plain + pos + 2, name, nlen) != 0)
			abort();
		pos += 2 + nlen;
		if (store_get(s, name, &v, &vlen) != 0 || vlen == 0 ||
		    vlen > STORE_VALUE_MAX || len - pos < 4 + vlen)
			abort();
		hdr[0] = (unsigned char)(vlen >> 24);
		hdr[1] = (unsigned char)(vlen >> 16);
		hdr[2] = (unsigned char)(vlen >> 8);
		hdr[3] = (unsigned char)vlen;
		if (memcmp(plain + pos, hdr, 4) != 0 ||
		    memcmp(plain + pos + 4, v, vlen) != 0)
			abort();
		pos += 4 + vlen;
		sodium_free(v);
		v = NULL;
	}
	if (pos != len || store_name(s, i) != NULL)
		abort();
}

/* Add and remove an entry, checking the order and count hold. */
static void
fuzz_modify(struct store *s)
{
	static const unsigned char val[] = "v";
	size_t		 n = store_count(s), i;
	char		*cause = NULL;
	int		 rv;

	rv = store_set(s, "m", val, 1, &cause);
	if (rv != 0) {
		if (n != STORE_MAX_ENTRIES)
			abort();
		free(cause);
		return;
	}
	for (i = 1; i < store_count(s); i++) {
		if (strcmp(store_name(s, i - 1), store_name(s, i)) >= 0)
			abort();
	}
	if (store_rm(s, "m") != 0 || store_rm(s, "m") != -1)
		abort();
	/* "m" may have been there before: then one fewer now. */
	if (store_count(s) != n && store_count(s) != n - 1)
		abort();
}

/* Decode plain and check what comes out. */
static int
fuzz_decode(const unsigned char *plain, size_t len)
{
	struct store	*s = NULL;
	char		*cause = NULL;

	if (store_decode(plain, len, &s, &cause) != 0) {
		if (cause == NULL || s != NULL)
			abort();
		free(cause);
		return -1;
	}
	if (cause != NULL)
		abort();
	fuzz_canonical(s, plain, len);
	fuzz_modify(s);
	store_free(s);
	return 0;
}

/* Unseal file and, if it opens, check its plaintext decodes identically. */
static int
fuzz_unseal(const unsigned char *file, size_t len)
{
	struct store	*s = NULL;
	unsigned char	*plain = NULL;
	char		*cause = NULL;
	size_t		 plen;

	if (store_unseal(file, len, fuzz_key, &s, &cause) != 0) {
		if (cause == NULL || s != NULL)
			abort();
		free(cause);
		return -1;
	}
	if (len < FUZZ_HDR + crypto_secretbox_MACBYTES)
		abort();
	plen = len - FUZZ_HDR - crypto_secretbox_MACBYTES;
	plain = malloc(plen + 1);
	if (plain == NULL || crypto_secretbox_open_easy(plain, file + FUZZ_HDR,
	    len - FUZZ_HDR, file + 8, fuzz_key) != 0)
		abort();
	fuzz_canonical(s, plain, plen);
	store_free(s);
	free(plain);
	return 0;
}

/* Seal plain under the fixed key (fixed nonce: fuzzing only) and unseal it. */
static void
fuzz_sealed(const unsigned char *plain, size_t len)
{
	unsigned char	*file;
	int		 a, b;

	file = malloc(FUZZ_HDR + crypto_secretbox_MACBYTES + len);
	if (file == NULL)
		abort();
	memcpy(file, "SHIMSTO1", 8);
	memset(file + 8, 0x11, crypto_secretbox_NONCEBYTES);
	if (crypto_secretbox_easy(file + FUZZ_HDR, plain, len, file + 8,
	    fuzz_key) != 0)
		abort();
	a = fuzz_unseal(file, FUZZ_HDR + crypto_secretbox_MACBYTES + len);
	b = fuzz_decode(plain, len);
	if (a != b)
		abort();
	free(file);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (sodium_init() < 0)
		abort();
	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0:
		fuzz_decode(data + 1, size - 1);
		break;
	case 1:
		fuzz_unseal(data + 1, size - 1);
		break;
	case 2:
		fuzz_sealed(data + 1, size - 1);
		break;
	}
	return 0;
}
