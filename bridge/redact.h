/*
 * Streaming redaction of secrets from the output of host-side tools.
 *
 * The bridge streams a child's stdout and stderr back to a hostile sandbox. Tools
 * should never print a token, but some can be made to (debug output, error messages
 * echoing a URL, an API that reflects a header), so every byte is passed through
 * this filter first: defence in depth, not the first line (THREATS.md).
 *
 * Patterns. For each secret S of at least REDACT_MIN_LEN bytes the filter looks for:
 *   - S itself;
 *   - base64 of S, standard (+/) and URL-safe (-_) alphabets, at each of the three
 *     byte offsets S can have in a longer encoded stream: for k = 0, 1, 2 encode
 *     k filler bytes followed by S and keep only the characters whose six bits all
 *     come from S (no padding, nothing mixed with the filler or with what follows);
 *   - URL encoding: every byte outside A-Za-z0-9-._~ as %XX, upper-case hex and
 *     lower-case hex; every byte as %XX (both cases); form encoding
 *     (application/x-www-form-urlencoded: a space as '+', the rest as above);
 *   - JSON string body: \" \\, \b \f \n \r \t, other bytes below 0x20 as \u00XX,
 *     in four variants ('/' as is or as \/, times \u00XX hex upper or lower case)
 *     plus Go's encoding/json form (also < > & as \u003c \u003e \u0026, which gh,
 *     a Go program, emits by default), and for secrets with non-ASCII characters
 *     the ASCII-only form (every non-ASCII character as \uXXXX, upper and lower
 *     case, surrogate pairs beyond U+FFFF: jansson's JSON_ENSURE_ASCII, Python's
 *     json.dumps); and every character, ASCII too, as \uXXXX (both cases; a secret
 *     that is not UTF-8 has each byte as \u00XX);
 *   - hex, lower and upper case.
 * Identical patterns are kept once; patterns shorter than REDACT_MIN_LEN are dropped.
 *
 * Views. The patterns are also sought in two views of the input. View 0 drops what
 * a terminal or a line wrap puts between characters: escape sequences (CSI: ESC [
 * parameters, intermediates, final byte, e.g. SGR colours; OSC: ESC ] text ended by
 * BEL or ESC \; other ESC sequences: ESC intermediates final), a lone ESC before a
 * control byte, CR and LF. View 1 does the same and decodes each %XX (either case,
 * each digit on its own) to its byte, so a secret with only some of its bytes
 * %-encoded is found. So escapes between the characters of any encoding above,
 * base64 wrapped at any width with LF or CRLF, and partly URL-encoded secrets are
 * masked. A match in a view masks the whole input span from its first unit to its
 * last, the junk inside included. More than REDACT_MAXGAP junk bytes in a row
 * separate. Not seen: '+' for a space in partly form-encoded text, junk inside a
 * %XX unit, and a lone ESC just before a character that completes a two-byte
 * sequence with it ("ESC g" takes the g, as a terminal would).
 *
 * Output. Every input byte covered by at least one occurrence of any pattern is
 * masked; each maximal run of consecutive covered bytes becomes exactly one
 * REDACT_MASK. Every other byte passes through unchanged and in order. Occurrences
 * split across redact_feed() calls at any position are caught.
 *
 * Delay. Bytes that may still turn out to be part of a match must be held back
 * until more input or the end of the stream decides. Which bytes those are depends
 * on the secrets, so the amount held must not: a sandbox that can make a tool end
 * its output with text of its choosing (a file it committed, fetched raw) would
 * otherwise see from frame boundaries or timing whether that text is a prefix of a
 * secret's pattern, and learn a token a character at a time. So by default
 * (REDACT_HOLD_SAFE) a stream holds the trailing run of "pattern-like" bytes, up to
 * a length that depends only on the longest pattern rounded up to REDACT_HOLD_ROUND:
 * letters, digits, + / - _ . ~ % \ " and any other byte that occurs in a pattern
 * (so only unusual bytes in a secret, such as a space, are revealed by the policy).
 * Junk (escape sequences, CR, LF) does not end such a run: a line's holdable tail
 * of REDACT_WRAP_MIN bytes or more is held until the next line shows whether a
 * secret wrapped or split there goes on. A shorter one goes out at once, so a tool
 * that prints "ready" and waits is seen waiting; if the next line, in a later feed,
 * does carry on a secret, the rest of it is masked but those few bytes were shown.
 * Output that ends in a space, a colon and the like, as prompts do, goes out at
 * once, and so does a line ending in such a byte. REDACT_HOLD_MINIMAL holds exactly
 * the longest suffix
 * of the input that is a proper prefix of a pattern: lowest latency, but it is
 * that oracle; use it only where the sandbox cannot choose the end of the output.
 * Under either policy, leading bytes of the held part already known to be covered
 * are not held: as soon as the first byte of a covered run is settled, REDACT_MASK
 * is written, and later bytes of the same run are absorbed into it, even if the
 * run goes on in a later call. Everything not held is written before redact_feed()
 * returns.
 *
 * Objects. redact_new() builds the automaton (one per request) together with a
 * first stream; redact_new_stream() adds further streams (stdout, stderr) that share
 * the automaton, read-only, by reference count. A stream is not reentrant: one
 * thread at a time, and never from inside its own sink. Distinct streams sharing an
 * automaton may be used from different threads.
 *
 * Memory. Patterns and the automaton (which spells them out) live in sodium_malloc()
 * memory (guard pages, not dumped, mlocked as far as RLIMIT_MEMLOCK allows) and are
 * wiped when the last stream is freed; so are the bytes a stream holds back. The
 * automaton is a dense table over byte classes: (N + 1) * (C + 2) * 4 bytes plus
 * 64 KiB, where N is the number of distinct prefixes of the patterns (at most their
 * total length, typically about 22 times the secret length for a token of letters
 * and digits) and C the number of distinct bytes they use plus one (about 70 for
 * such tokens). Measured: 332 KiB for one 40-byte GitHub token, 5.2 MiB for sixteen
 * tokens of 20 to 93 bytes (built in about 9 ms; the every-character \uXXXX forms,
 * six bytes per character, are most of it); building needs about as much
 * again, briefly. A stream holds back at most safecap * (3 + REDACT_MAXGAP) +
 * 2 * REDACT_MAXGAP + 8 bytes (safecap: the longest pattern rounded up to
 * REDACT_HOLD_ROUND, less one) and has room for the covered intervals in them and
 * two offset maps for the views: about 54 KiB for one 40-byte token, 118 KiB for the
 * sixteen tokens above. redact_new() refuses (E2BIG) an
 * automaton whose bound exceeds REDACT_MAX_AUTOMATON. Secrets that stay the same
 * across requests can share one automaton: keep the redact_new() object and give
 * each request redact_new_stream().
 *
 * Speed. One pass over the input whatever the number of patterns: a bigram filter
 * skips bytes that cannot start a pattern, an Aho-Corasick automaton runs where
 * they can. The same filter flags where the views have work (ESC, CR, LF, %XX);
 * there they run byte by byte in step with the input, and go back to sleep as soon
 * as they are in the input's state (at a line break outside a match, at once). No
 * allocation after construction. Measured on a loaded 2-core machine (the numbers
 * before the views in brackets): random printable text 2.4 GB/s with one secret,
 * 2.0 with sixteen (3.6, 2.8); the same in lines of 80, 1.2 and 1.0 (3.8, 2.8);
 * coloured output (an SGR sequence every 16 bytes) 0.2 (3.1, masking nothing); text
 * built to look like the patterns (hex digits, prefixes of the secrets) runs at
 * automaton speed, 0.3-0.9 GB/s. See bench/bench_redact.c.
 */
#ifndef SHIMBRIDGE_REDACT_H
#define SHIMBRIDGE_REDACT_H

#include <stddef.h>

/* What a covered run of bytes is replaced with. */
#define REDACT_MASK		"[REDACTED]"

/*
 * Secrets, and patterns derived from them, shorter than this are ignored: a value of
 * one to three bytes occurs by chance all over ordinary output, so masking it would
 * destroy the output while hiding nothing a guess could not find.
 */
#define REDACT_MIN_LEN		4

/*
 * Junk (escape sequences, CR, LF) allowed between two characters of a pattern in
 * the views (see Views above); more than this many bytes of it in a row separates.
 */
#define REDACT_MAXGAP		32

/*
 * Under REDACT_HOLD_SAFE, a line that ends a feed with a holdable tail shorter than
 * this goes out at once rather than waiting for the next line (see Delay above).
 */
#define REDACT_WRAP_MIN		8

/* The largest automaton redact_new() will build, in bytes (see Memory above). */
#define REDACT_MAX_AUTOMATON	((size_t)64 << 20)

/* Hold policies for redact_set_hold(); see Delay above. */
enum redact_hold {
	REDACT_HOLD_SAFE = 0,	/* default: amount held independent of the secrets */
	REDACT_HOLD_MINIMAL,	/* only possible prefixes: a prefix oracle */
};

/* The safe hold is at most the longest pattern rounded up to a multiple of this, less one. */
#define REDACT_HOLD_ROUND	64

struct redact_secret {
	const unsigned char	*value;	/* caller keeps ownership; copied as patterns */
	size_t			 len;
};

/*
 * Receives redacted output, in order, in pieces of at least one byte. buf is valid
 * only during the call. Return 0, or -1 to abort the stream.
 */
typedef int (*redact_sink)(void *arg, const void *buf, size_t len);

struct redact;

/*
 * Build the automaton for secrets[0..n) and a first, empty stream on it. n == 0
 * (or only short secrets) gives a pass-through filter. Only encoded copies of the
 * secrets are kept (in secure memory); the caller's buffers may go at once.
 * Returns NULL and sets errno on failure: EINVAL (a NULL value with a non-zero
 * length), E2BIG (automaton over REDACT_MAX_AUTOMATON), ENOMEM.
 */
struct redact	*redact_new(const struct redact_secret *secrets, size_t n);

/*
 * A new, empty stream sharing r's automaton (r's own stream state is not copied).
 * Free each stream with redact_free(); the automaton goes with the last one.
 * Returns NULL and sets errno (ENOMEM) on failure.
 */
struct redact	*redact_new_stream(const struct redact *r);

/* Choose a stream's hold policy (default REDACT_HOLD_SAFE); may change at any time. */
void		 redact_set_hold(struct redact *r, enum redact_hold how);

/* Free a stream, and its automaton if no other stream uses it; wipes. NULL is fine. */
void		 redact_free(struct redact *r);

/*
 * Filter len bytes of a stream (any bytes, NULs included) and pass what is settled
 * to sink. Returns 0, or -1 if the sink returned -1 (errno as the sink left it) or
 * the stream passed 2^64 bytes (EOVERFLOW). After -1 the stream is dead: further
 * feeds and flushes return -1 (EIO); only redact_free() is useful.
 */
int		 redact_feed(struct redact *r, const void *in, size_t len, redact_sink sink,
		     void *arg);

/*
 * End of the stream: write what was held back (masked where covered, raw elsewhere).
 * The stream is then empty again and can carry a new, unrelated stream.
 * Returns 0, or -1 as for redact_feed().
 */
int		 redact_flush(struct redact *r, redact_sink sink, void *arg);

/* Bytes fed to the stream but not yet written to a sink, raw or inside a mask. */
size_t		 redact_held(const struct redact *r);

/*
 * Redact a whole string at once (audit lines, error messages) with r's automaton,
 * without touching r's stream state. r may be NULL: the result is then a copy.
 * Returns a malloc'd string for the caller to free, or NULL (ENOMEM, or EINVAL for
 * a NULL s).
 */
char		*redact_string(const struct redact *r, const char *s);

/* Number of distinct patterns in r's automaton (0 for a pass-through filter). */
size_t		 redact_patterns(const struct redact *r);

/* Bytes of secure memory used by r's automaton (shared by all its streams). */
size_t		 redact_automaton_size(const struct redact *r);

#endif
