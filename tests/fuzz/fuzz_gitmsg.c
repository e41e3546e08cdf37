/*
 * libFuzzer target for what shimbridge-git relays from upstream's stderr to the
 * sandbox (gitserve/gitmsg.c): the progress-meter recogniser, the streaming
 * progress splitter and the masking of a secret split across lines.
 *
 * The input's first byte picks a split point; the rest is upstream's stderr.
 * Checks:
 *   - gitmsg_is_progress() accepts only lines whose words (runs of letters) are
 *     git's own meter words, so upstream cannot send text of its choosing that way;
 *   - feeding stderr to gitmsg_progress_feed() in two chunks, split anywhere, gives
 *     the same relayed output and the same kept rest as one chunk;
 *   - the lines said with gitmsg_lines_say(), with their "shimbridge: " prefixes and
 *     newlines removed and joined, never contain the secret, wherever the input
 *     splits it across lines (the input may contain it whole, too).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../gitserve/gitserve.h"	/* not on the fuzz build's -I path */

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FUZZ_SECRET	"ghs_FuzzSecret0123456789"

/* git's meter words: the only letter runs a progress line may hold. */
static const char *const fuzz_words[] = {
	"remote", "Enumerating", "Counting", "Compressing", "Writing", "Receiving",
	"Resolving", "Unpacking", "Checking", "objects", "object", "deltas", "delta",
	"connectivity", "Total", "done", "bytes", "KiB", "MiB", "GiB", "s", "reused", "pack",
	"completed", "with", "local", NULL
};

/* Whether every run of letters in line[0..len) is a meter word. */
static int
fuzz_words_ok(const char *line, size_t len)
{
	size_t i = 0, j, k;

	while (i < len) {
		if (!((line[i] >= 'a' && line[i] <= 'z') || (line[i] >= 'A' && line[i] <= 'Z'))) {
			i++;
			continue;
		}
		for (j = i; j < len && ((line[j] >= 'a' && line[j] <= 'z') ||
		    (line[j] >= 'A' && line[j] <= 'Z')); j++)
			;
		for (k = 0; fuzz_words[k] != NULL; k++) {
			if (strlen(fuzz_words[k]) == j - i &&
			    memcmp(fuzz_words[k], line + i, j - i) == 0)
				break;
		}
		if (fuzz_words[k] == NULL)
			return 0;
		i = j;
	}
	return 1;
}

/* Run the progress splitter over buf, in one chunk or two; fill out and rest. */
static void
fuzz_progress(const char *buf, size_t len, size_t split, char **out, size_t *outlen,
    struct gitbuf *rest)
{
	struct gitmsg_progress	 gp;
	FILE			*saved = stderr;

	stderr = open_memstream(out, outlen);
	if (stderr == NULL)
		abort();
	gitbuf_init(rest, (size_t)-1);
	gitmsg_progress_init(&gp, 1, rest);
	if (split > 0 && split < len) {
		gitmsg_progress_feed(buf, split, &gp);
		gitmsg_progress_feed(buf + split, len - split, &gp);
	} else
		gitmsg_progress_feed(buf, len, &gp);
	gitmsg_progress_done(&gp);
	fclose(stderr);
	stderr = saved;
}

/* Say buf's lines together; the joined text of what was said must not hold the secret. */
static void
fuzz_lines(const char *buf, size_t len)
{
	struct gitmsg_lines	 l;
	const char		*p = buf, *end = buf + len, *eol, *q, *qe;
	char			*out = NULL, *joined;
	size_t			 outlen = 0, n = 0;
	FILE			*saved = stderr;

	gitmsg_lines_init(&l);
	while (p < end) {
		for (eol = p; eol < end && *eol != '\n'; eol++)
			;
		gitmsg_lines_add(&l, "", p, (size_t)(eol - p));
		p = eol + 1;
	}
	stderr = open_memstream(&out, &outlen);
	if (stderr == NULL)
		abort();
	gitmsg_lines_say(&l);
	fclose(stderr);
	stderr = saved;

	joined = malloc(outlen + 1);
	for (q = out; q < out + outlen; q = qe + 1) {
		qe = memchr(q, '\n', (size_t)(out + outlen - q));
		if (qe == NULL)
			qe = out + outlen;
		if ((size_t)(qe - q) >= 12 && memcmp(q, "shimbridge: ", 12) == 0)
			q += 12;
		memcpy(joined + n, q, (size_t)(qe - q));
		n += (size_t)(qe - q);
	}
	joined[n] = '\0';
	if (memmem(joined, n, FUZZ_SECRET, strlen(FUZZ_SECRET)) != NULL)
		abort();
	free(joined);
	free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int	 init;
	const char	*buf, *p, *eol;
	char		*out1 = NULL, *out2 = NULL, *nul;
	size_t		 len, split, o1 = 0, o2 = 0;
	struct gitbuf	 r1, r2;

	if (!init) {
		gitmsg_init(FUZZ_SECRET);
		init = 1;
	}
	if (size < 1 || size > 8192)
		return 0;
	split = data[0];
	buf = (const char *)data + 1;
	len = size - 1;

	for (p = buf; p < buf + len; p = eol + 1) {
		for (eol = p; eol < buf + len && *eol != '\n' && *eol != '\r'; eol++)
			;
		if (gitmsg_is_progress(p, (size_t)(eol - p)) && !fuzz_words_ok(p, (size_t)(eol - p)))
			abort();
	}

	fuzz_progress(buf, len, 0, &out1, &o1, &r1);
	fuzz_progress(buf, len, split % (len + 1), &out2, &o2, &r2);
	if (o1 != o2 || memcmp(out1, out2, o1) != 0 || r1.len != r2.len ||
	    memcmp(gitbuf_str(&r1), gitbuf_str(&r2), r1.len) != 0)
		abort();
	free(out1);
	free(out2);
	gitbuf_free(&r1);
	gitbuf_free(&r2);

	/* gitmsg_lines_add() takes strings: stop at a NUL as git's messages would. */
	nul = memchr(buf, '\0', len);
	fuzz_lines(buf, nul != NULL ? (size_t)(nul - buf) : len);
	return 0;
}
