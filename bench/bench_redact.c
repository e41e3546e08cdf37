/*
 * Throughput of the streaming redactor: 256 MiB of pseudo-random printable bytes fed
 * in 64 KiB pieces (the size of a data frame) with 0, 1 and 16 secrets; median of
 * five runs each, with the default (safe) hold policy. Harder inputs follow for
 * comparison: the same text in lines of 80 (each line break wakes the redactor's
 * views), coloured terminal output (SGR sequences and line breaks), hex text, and
 * text made of near-misses (prefixes of the secrets), which keep the automaton busy. "build ms" is redact_new(); "table KiB" its memory.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "redact.h"

#define DATA_LEN	((size_t)256 << 20)
#define CHUNK		((size_t)64 << 10)
#define RUNS		5
#define NSECRETS	16

static uint64_t rng_state = 0x243f6a8885a308d3ULL;

/* xorshift64*: deterministic, fast, good enough for test data. */
static uint64_t
rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

/* Sink that only counts, so the measurement is the redactor's. */
static int
count_sink(void *arg, const void *buf, size_t len)
{
	(void)buf;
	*(size_t *)arg += len;
	return 0;
}

/* Seconds on the monotonic clock. */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* For qsort: ascending doubles. */
static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Fill s with a token of length len: prefix, then characters from alphabet. */
static void
make_token(unsigned char *s, size_t len, const char *prefix, const char *alphabet)
{
	size_t i, pl = strlen(prefix), al = strlen(alphabet);

	memcpy(s, prefix, pl);
	for (i = pl; i < len; i++)
		s[i] = (unsigned char)alphabet[rng() % al];
}

/* Median seconds to redact data[0..len) in CHUNK pieces; *out gets the output size. */
static double
measure(const struct redact_secret *secrets, size_t n, const unsigned char *data,
    size_t len, size_t *out, size_t *patterns, size_t *memsize, double *build)
{
	double t[RUNS], t0;
	struct redact *r = NULL;
	size_t off, run;

	for (run = 0; run < RUNS; run++) {
		redact_free(r);
		t0 = now();
		if ((r = redact_new(secrets, n)) == NULL) {
			perror("redact_new");
			exit(1);
		}
		t[run] = now() - t0;
	}
	qsort(t, RUNS, sizeof t[0], cmp_double);
	*build = t[RUNS / 2];
	*patterns = redact_patterns(r);
	*memsize = redact_automaton_size(r);
	for (run = 0; run < RUNS; run++) {
		*out = 0;
		t0 = now();
		for (off = 0; off < len; off += CHUNK) {
			size_t c = len - off < CHUNK ? len - off : CHUNK;

			if (redact_feed(r, data + off, c, count_sink, out) != 0) {
				perror("redact_feed");
				exit(1);
			}
		}
		if (redact_flush(r, count_sink, out) != 0) {
			perror("redact_flush");
			exit(1);
		}
		t[run] = now() - t0;
	}
	redact_free(r);
	qsort(t, RUNS, sizeof t[0], cmp_double);
	return t[RUNS / 2];
}

/* Print one row of the table. */
static void
row(const char *input, const struct redact_secret *secrets, size_t n,
    const unsigned char *data, size_t len)
{
	size_t out, patterns, memsize;
	double build, sec;

	sec = measure(secrets, n, data, len, &out, &patterns, &memsize, &build);
	printf("%-12s %7zu %9zu %10.1f %9.3f %8.2f %12zu\n", input, n, patterns,
	    (double)memsize / 1024, build * 1e3, (double)len / sec / 1e9, out);
	fflush(stdout);
}

/* Benchmark entry point: builds the inputs, prints the table. */
int
main(void)
{
	static const char alnum[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	static const char b64[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static const char upnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
	unsigned char tokens[NSECRETS][96], *data;
	struct redact_secret secrets[NSECRETS];
	size_t i, j, len;

	/* A realistic mix: classic and fine-grained GitHub tokens, AWS-style keys. */
	for (i = 0; i < NSECRETS; i++) {
		switch (i % 4) {
		case 0:
			len = 40;
			make_token(tokens[i], len, "ghp_", alnum);
			break;
		case 1:
			len = 93;
			make_token(tokens[i], len, "github_pat_", alnum);
			break;
		case 2:
			len = 20;
			make_token(tokens[i], len, "AKIA", upnum);
			break;
		default:
			len = 40;
			make_token(tokens[i], len, "", b64);
			break;
		}
		secrets[i].value = tokens[i];
		secrets[i].len = len;
	}

	if ((data = malloc(DATA_LEN)) == NULL) {
		perror("malloc");
		return 1;
	}
	printf("redact throughput: %zu MiB in %zu KiB feeds, median of %d runs\n",
	    DATA_LEN >> 20, CHUNK >> 10, RUNS);
	printf("%-12s %7s %9s %10s %9s %8s %12s\n", "input", "secrets", "patterns",
	    "table KiB", "build ms", "GB/s", "output");

	for (i = 0; i < DATA_LEN; i++)
		data[i] = (unsigned char)(0x20 + rng() % 95);
	row("printable", secrets, 0, data, DATA_LEN);
	row("printable", secrets, 1, data, DATA_LEN);
	row("printable", secrets, NSECRETS, data, DATA_LEN);

	/* Lines of 80: each line break wakes the views (a secret may be wrapped). */
	for (i = 0; i < DATA_LEN; i++)
		data[i] = i % 81 == 80 ? '\n' : (unsigned char)(0x20 + rng() % 95);
	row("lines", secrets, 1, data, DATA_LEN);
	row("lines", secrets, NSECRETS, data, DATA_LEN);

	/*
	 * The relay's text (bench/exec_bench.c): lines of 80 of letters, digits and few
	 * separators, so most bytes could belong to a token and runs are long.
	 */
	for (i = 0; i < DATA_LEN; i++) {
		static const char tool[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "0123456789 ._-/:";

		data[i] = i % 80 == 79 ? '\n' : (unsigned char)tool[rng() % (sizeof tool - 1)];
	}
	row("tool-lines", secrets, 1, data, DATA_LEN);
	row("tool-lines", secrets, NSECRETS, data, DATA_LEN);

	/* Coloured terminal output: an SGR sequence every 16 bytes, a line break every 80. */
	for (i = 0; i < DATA_LEN; ) {
		static const char sgr[] = "\033[1;32m";

		if (i % 16 == 0 && DATA_LEN - i > sizeof sgr) {
			memcpy(data + i, sgr, sizeof sgr - 1);
			i += sizeof sgr - 1;
		}
		data[i] = i % 81 == 80 ? '\n' : (unsigned char)(0x20 + rng() % 95);
		i++;
	}
	row("sgr+lines", secrets, NSECRETS, data, DATA_LEN);

	for (i = 0; i < DATA_LEN; i++)
		data[i] = (unsigned char)"0123456789abcdef"[rng() % 16];
	row("hex", secrets, NSECRETS, data, DATA_LEN);

	/* Near-misses: prefixes (up to all but one byte) of the raw secrets. */
	for (i = 0; i < DATA_LEN; ) {
		const struct redact_secret *s = &secrets[rng() % NSECRETS];
		size_t l = 1 + rng() % (s->len - 1);

		for (j = 0; j < l && i < DATA_LEN; j++)
			data[i++] = s->value[j];
	}
	row("near-miss", secrets, NSECRETS, data, DATA_LEN);

	free(data);
	return 0;
}
