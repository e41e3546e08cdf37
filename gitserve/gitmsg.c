/*
 * Messages for the sandboxed user. Everything we print to stderr reaches the sandbox
 * (as "remote: ..." lines during a push), so it is redacted here as a second line of
 * defence and stripped of control bytes; the first line is that no secret is ever
 * put where git could print it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "redact.h"
#include "util.h"
#include "gitserve.h"

#define GITMSG_LOG_MAX	2048	/* what a refusal record keeps */

static struct redact *gitmsg_redact;	/* every encoding of the token; NULL = none */
static size_t gitmsg_patmax;		/* bound on the length of any of its patterns */
static int gitmsg_divert_fd = -1;	/* say to the bridge's pipe instead of stderr */
static size_t gitmsg_diverted;		/* bytes sent there so far */
static char gitmsg_log[GITMSG_LOG_MAX];	/* lines said so far, for gitmsg_record_refusal */
static size_t gitmsg_loglen;

/*
 * Set (or clear, with NULL) the secret that must never be printed. Messages are
 * redacted with the bridge's redactor: the token raw, in base64 at every offset,
 * URL-encoded, JSON-escaped and hex, so an upstream that echoes a credential in
 * any of those forms is masked too.
 */
void
gitmsg_init(const char *secret)
{
	struct redact_secret rs;

	redact_free(gitmsg_redact);
	gitmsg_redact = NULL;
	if (secret == NULL || *secret == '\0')
		return;
	rs.value = (const unsigned char *)secret;
	rs.len = strlen(secret);
	/* The longest encoding is JSON's \u00XX for every byte: six bytes per byte. */
	gitmsg_patmax = 6 * rs.len + 16;
	if ((gitmsg_redact = redact_new(&rs, 1)) == NULL)
		die(GS_EXIT_FATAL, "cannot set up redaction");
}

/*
 * Copy buf with every form of the secret masked and control bytes turned into '?'.
 * Redaction comes first, so it sees escape sequences and line breaks between a
 * secret's characters for what they are (redact.h, Views); only NUL goes before.
 */
char *
gitmsg_clean(const char *buf, size_t len)
{
	struct gitbuf	 b;
	size_t		 i;
	char		*out, c, *p;

	gitbuf_init(&b, (size_t)-1);
	for (i = 0; i < len; i++) {
		c = buf[i] == '\0' ? '?' : buf[i];
		gitbuf_add(&b, &c, 1);
	}
	if (gitmsg_redact != NULL) {
		out = redact_string(gitmsg_redact, gitbuf_str(&b));
		if (out == NULL)
			die(GS_EXIT_FATAL, "redaction failed");
	} else
		out = xstrdup(gitbuf_str(&b));
	for (p = out; *p != '\0'; p++) {
		if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
			*p = '?';
	}
	if (b.data != NULL)
		gitcred_wipe(b.data, b.len);
	gitbuf_free(&b);
	return out;
}

/*
 * Hand what was said so far to the bridge, so it can audit a push the policy
 * refused (receive-pack itself exits 0 when its hook refuses): through the refusal
 * pipe of the contract (common/gitcontract.h), in one write of at most
 * GITC_REFUSAL_MAX bytes. Without a pipe (run by hand) there is no one to tell.
 */
void
gitmsg_record_refusal(const struct gitctx *ctx)
{
	char	 rec[GITC_REFUSAL_MAX + 1];
	size_t	 len = 0, off = 0, i;
	ssize_t	 n;

	if (ctx->refusal_fd == -1)
		return;
	/* Each line as "R <line>", within GITC_REFUSAL_MAX bytes in all. */
	for (i = 0; i < gitmsg_loglen && len + 3 < sizeof rec - 1; i++) {
		if (i == 0 || gitmsg_log[i - 1] == '\n') {
			rec[len++] = 'R';
			rec[len++] = ' ';
		}
		rec[len++] = gitmsg_log[i];
	}
	if (len > 0 && rec[len - 1] != '\n')
		rec[len - 1] = '\n';
	while (off < len) {
		n = write(ctx->refusal_fd, rec + off, len - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
}

/*
 * Write "T <phase> <ns>" to the bridge's pipe: when a phase of the call was
 * reached, on the CLOCK_MONOTONIC clock the bridge shares, for its audit log.
 */
void
gitmsg_phase(const struct gitctx *ctx, const char *phase)
{
	struct timespec	 ts;
	char		 rec[64];
	int		 len;

	if (!ctx->phases || ctx->refusal_fd == -1 || clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return;
	len = snprintf(rec, sizeof rec, "T %s %llu\n", phase,
	    (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
	if (len > 0 && (size_t)len < sizeof rec)
		(void)!write(ctx->refusal_fd, rec, (size_t)len);
}

/*
 * Tell the bridge the call's answer is known ("D <code>" record): once our stdout
 * and stderr are closed it gives the sandbox the exit code and lets us finish what
 * is left (the mirror's warming fetch) on our own time. Without a refusal pipe
 * (run by hand) there is nobody to tell.
 */
void
gitmsg_answer(const struct gitctx *ctx, int code)
{
	char	rec[16];
	int	len;

	if (ctx->refusal_fd == -1 || code < 0 || code > 255)
		return;
	len = snprintf(rec, sizeof rec, "D %d\n", code);
	if (len > 0 && (size_t)len < sizeof rec)
		(void)!write(ctx->refusal_fd, rec, (size_t)len);
}

/*
 * Send what is said from now on to the bridge's pipe as "M <line>" records (the
 * bridge redacts them and shows them on the sandbox's stderr) instead of our
 * stderr; fd -1 ends that. For upstream's words in the pre-receive hook when we
 * hold no credential: our stderr there is receive-pack's sideband, inside the pack
 * protocol, which the bridge cannot redact, and we have no secret to redact with.
 */
void
gitmsg_divert(int fd)
{
	gitmsg_divert_fd = fd;
}

/* Write one "M" record to the diverted pipe, within GITC_PIPE_MAX bytes in all. */
static void
gitmsg_divert_line(const char *line, size_t len)
{
	char	*rec;
	size_t	 n, off = 0;
	ssize_t	 w;

	n = (size_t)xasprintf(&rec, "M shimbridge: %.*s\n", (int)len, line);
	if (gitmsg_diverted + n > GITC_PIPE_MAX) {
		free(rec);
		return;
	}
	gitmsg_diverted += n;
	while (off < n) {
		w = write(gitmsg_divert_fd, rec + off, n - off);
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	free(rec);
}

/* Print one message line. */
void
gitmsg_say(const char *fmt, ...)
{
	va_list	 ap;
	char	*raw, *clean;
	int	 n;
	size_t	 len;

	va_start(ap, fmt);
	n = xvasprintf(&raw, fmt, ap);
	va_end(ap);
	clean = gitmsg_clean(raw, n);
	len = strlen(clean);
	while (len > 0 && (clean[len - 1] == ' ' || clean[len - 1] == '\t'))
		clean[--len] = '\0';
	if (gitmsg_divert_fd != -1) {
		gitmsg_divert_line(clean, len);
		gitcred_wipe(raw, n);
		free(raw);
		free(clean);
		return;
	}
	fprintf(stderr, "shimbridge: %s\n", clean);
	fflush(stderr);
	if (gitmsg_loglen + len + 2 < sizeof gitmsg_log) {
		memcpy(gitmsg_log + gitmsg_loglen, clean, len);
		gitmsg_loglen += len;
		gitmsg_log[gitmsg_loglen++] = '\n';
	}
	gitcred_wipe(raw, n);
	free(raw);
	free(clean);
}

/* Redact s; die if that fails (it only fails for lack of memory). */
static char *
gitmsg_redacted(const char *s)
{
	char	*r;

	if ((r = redact_string(gitmsg_redact, s)) == NULL)
		die(GS_EXIT_FATAL, "redaction failed");
	return r;
}

/*
 * Whether joining line a to lines a+1..b (without separators) makes the redactor
 * find something it does not find in line a alone and in a+1..b joined: then an
 * occurrence runs from line a into the next lines.
 */
static int
gitmsg_cross_one(char *const *text, size_t a, size_t b)
{
	struct gitbuf	 joined, tail;
	char		*r1, *r2, *r3;
	size_t		 k;
	int		 differ;

	gitbuf_init(&joined, (size_t)-1);
	gitbuf_init(&tail, (size_t)-1);
	gitbuf_add(&joined, text[a], strlen(text[a]));
	for (k = a + 1; k <= b; k++) {
		gitbuf_add(&joined, text[k], strlen(text[k]));
		gitbuf_add(&tail, text[k], strlen(text[k]));
	}
	r1 = gitmsg_redacted(gitbuf_str(&joined));
	r2 = gitmsg_redacted(text[a]);
	r3 = gitmsg_redacted(gitbuf_str(&tail));
	differ = strlen(r1) != strlen(r2) + strlen(r3) || strncmp(r1, r2, strlen(r2)) != 0 ||
	    strcmp(r1 + strlen(r2), r3) != 0;
	free(r1);
	free(r2);
	free(r3);
	gitbuf_free(&joined);
	gitbuf_free(&tail);
	return differ;
}

/*
 * Mark the lines that hold part of a secret split across lines ("remote: ghs_ab" then
 * "remote: cd..."), which redacting each line alone cannot see. For each line i the
 * window i..j reaches as far as a pattern starting in line i can (the lines strictly
 * inside a pattern are shorter than it together); if an occurrence runs from line i
 * into that window, the lines from i to the shortest such end are masked whole.
 */
static void
gitmsg_cross_mask(char *const *text, size_t n, int *masked)
{
	size_t	i, j, k, mid;

	if (gitmsg_redact == NULL || n < 2)
		return;
	for (i = 0; i + 1 < n; i++) {
		for (j = i + 1, mid = 0; j + 1 < n && mid + strlen(text[j]) < gitmsg_patmax; j++)
			mid += strlen(text[j]);
		if (!gitmsg_cross_one(text, i, j))
			continue;
		for (k = i + 1; k < j && !gitmsg_cross_one(text, i, k); k++)
			;
		for (; k > i; k--)
			masked[k] = 1;
		masked[i] = 1;
	}
}

/* Start an empty set of lines. */
void
gitmsg_lines_init(struct gitmsg_lines *l)
{
	memset(l, 0, sizeof *l);
}

/* Add a line (len bytes of text, shown after prefix) to be said with the others. */
void
gitmsg_lines_add(struct gitmsg_lines *l, const char *prefix, const char *text, size_t len)
{
	l->prefix = xreallocarray(l->prefix, l->n + 1, sizeof *l->prefix);
	l->text = xreallocarray(l->text, l->n + 1, sizeof *l->text);
	/* git pads remote lines with blanks; they would separate the parts of a secret. */
	while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t'))
		len--;
	l->prefix[l->n] = xstrdup(prefix);
	l->text[l->n] = xstrndup(text, len);
	l->n++;
}

/* Say every line, masking secrets within lines and across them, and free them. */
void
gitmsg_lines_say(struct gitmsg_lines *l)
{
	int	*masked;
	size_t	 i;

	masked = xcalloc(l->n + 1, sizeof *masked);
	gitmsg_cross_mask(l->text, l->n, masked);
	for (i = 0; i < l->n; i++) {
		gitmsg_say("%s%s", l->prefix[i], masked[i] ? REDACT_MASK : l->text[i]);
		gitcred_wipe(l->text[i], strlen(l->text[i]));
		free(l->text[i]);
		free(l->prefix[i]);
	}
	free(masked);
	free(l->text);
	free(l->prefix);
	memset(l, 0, sizeof *l);
}

/* Print each non-empty line of buf with a prefix. */
void
gitmsg_relay(const char *prefix, const char *buf, size_t len)
{
	struct gitmsg_lines	 l;
	const char		*p = buf, *end = buf + len, *eol;

	gitmsg_lines_init(&l);
	while (p < end) {
		for (eol = p; eol < end && *eol != '\n' && *eol != '\r'; eol++)
			;
		if (eol > p)
			gitmsg_lines_add(&l, prefix, p, eol - p);
		p = eol + 1;
	}
	gitmsg_lines_say(&l);
}

/* Whether line starts with prefix; if so, point *rest after it and any blanks. */
static int
gitmsg_strip(const char *line, const char *prefix, const char **rest)
{
	size_t	n = strlen(prefix);

	if (strncmp(line, prefix, n) != 0)
		return 0;
	line += n;
	while (*line == ' ' || *line == '\t')
		line++;
	*rest = line;
	return 1;
}

/*
 * Condense git's stderr into one line: the upstream's own words ("remote:" lines)
 * and git's verdict ("fatal:"/"error:" lines), else every line. Longer results are
 * cut with a visible " [...]".
 */
char *
gitmsg_summary(const char *buf, size_t max)
{
	struct gitbuf	 b;
	char		*copy, *line, *next, *clean, *out, **texts = NULL;
	const char	*rest;
	int		 pass, took, *masked;
	size_t		 cut, n = 0, i;

	gitbuf_init(&b, (size_t)-1);
	for (pass = 0; pass < 2 && n == 0; pass++) {
		copy = xstrdup(buf);
		for (line = copy; line != NULL; line = next) {
			next = strpbrk(line, "\r\n");
			if (next != NULL)
				*next++ = '\0';
			took = 0;
			if (gitmsg_strip(line, "remote:", &rest) ||
			    gitmsg_strip(line, "fatal:", &rest) ||
			    gitmsg_strip(line, "error:", &rest))
				took = 1;
			else if (pass == 1) {
				rest = line;
				took = 1;
			}
			if (!took || *rest == '\0')
				continue;
			texts = xreallocarray(texts, n + 1, sizeof *texts);
			texts[n] = xstrdup(rest);
			for (cut = strlen(texts[n]); cut > 0 && (texts[n][cut - 1] == ' ' ||
			    texts[n][cut - 1] == '\t'); cut--)
				texts[n][cut - 1] = '\0';
			n++;
		}
		gitcred_wipe(copy, strlen(buf));
		free(copy);
	}
	/* A secret split across the lines we join is masked as well. */
	masked = xcalloc(n + 1, sizeof *masked);
	gitmsg_cross_mask(texts, n, masked);
	for (i = 0; i < n; i++) {
		clean = masked[i] ? xstrdup(REDACT_MASK) : gitmsg_clean(texts[i], strlen(texts[i]));
		if (b.len > 0)
			gitbuf_add(&b, " / ", 3);
		gitbuf_add(&b, clean, strlen(clean));
		free(clean);
		gitcred_wipe(texts[i], strlen(texts[i]));
		free(texts[i]);
	}
	free(texts);
	free(masked);
	if (b.len == 0)
		out = xstrdup("no message");
	else if (b.len > max && max > 6) {
		cut = max - 6;
		xasprintf(&out, "%.*s [...]", (int)cut, gitbuf_str(&b));
	} else
		out = xstrdup(gitbuf_str(&b));
	gitbuf_free(&b);
	return out;
}

/* Words git's progress meters use besides numbers (see git's progress.c and pack code). */
static const char *const gitmsg_progress_words[] = {
	"done", "bytes", "KiB", "MiB", "GiB", "bytes/s", "KiB/s", "MiB/s", "GiB/s",
	"delta", "reused", "pack-reused", "completed", "with", "local", "object", "objects",
	NULL
};

/* The titles git's progress meters start with. */
static const char *const gitmsg_progress_titles[] = {
	"Enumerating objects:", "Counting objects:", "Compressing objects:",
	"Writing objects:", "Receiving objects:", "Resolving deltas:", "Unpacking objects:",
	"Checking objects:", "Checking connectivity:", "Total ", NULL
};

/*
 * Whether a line is one of git's progress meters and nothing else: a known title,
 * then only numbers, punctuation and the meters' own words. Anything upstream could
 * fill with text of its choosing (hook output, messages) is not one, so it goes the
 * slow way, through the relay that sees whole messages.
 */
int
gitmsg_is_progress(const char *line, size_t len)
{
	const char	*p = line, *end = line + len, *tok, *te;
	size_t		 i, n;
	int		 ok;

	if (len > 7 && memcmp(p, "remote:", 7) == 0)
		for (p += 7; p < end && *p == ' '; p++)
			;
	for (i = 0; gitmsg_progress_titles[i] != NULL; i++) {
		n = strlen(gitmsg_progress_titles[i]);
		if ((size_t)(end - p) >= n && memcmp(p, gitmsg_progress_titles[i], n) == 0)
			break;
	}
	if (gitmsg_progress_titles[i] == NULL)
		return 0;
	for (p += n; p < end; p = te) {
		for (; p < end && *p == ' '; p++)
			;
		for (te = p; te < end && *te != ' '; te++)
			;
		/* One token, without the punctuation around it. */
		for (tok = p; tok < te && *tok != '\0' && strchr("()[],:|%", *tok) != NULL;
		    tok++)
			;
		for (n = te - tok; n > 0 && tok[n - 1] != '\0' &&
		    strchr("()[],.:|%", tok[n - 1]) != NULL; n--)
			;
		if (n == 0)
			continue;
		for (i = 0; i < n && strchr("0123456789./", tok[i]) != NULL && tok[i] != '\0';
		    i++)
			;
		ok = i == n;
		for (i = 0; !ok && gitmsg_progress_words[i] != NULL; i++)
			ok = strlen(gitmsg_progress_words[i]) == n &&
			    memcmp(gitmsg_progress_words[i], tok, n) == 0;
		if (!ok)
			return 0;
	}
	return 1;
}

/* Start relaying progress (on) or just collecting (off) into rest. */
void
gitmsg_progress_init(struct gitmsg_progress *gp, int on, struct gitbuf *rest)
{
	gp->on = on;
	gp->rest = rest;
	gitbuf_init(&gp->seg, GITRUN_REC_MAX);
}

/* One complete line with its terminator: relay it if it is progress, else keep it. */
static void
gitmsg_progress_line(struct gitmsg_progress *gp, const char *line, size_t len, char term)
{
	char	*clean;

	if (gitmsg_is_progress(line, len)) {
		clean = gitmsg_clean(line, len);
		fprintf(stderr, "shimbridge: %s%c", clean, term);
		fflush(stderr);
		free(clean);
		return;
	}
	if (gp->rest != NULL) {
		gitbuf_add(gp->rest, line, len);
		gitbuf_add(gp->rest, "\n", 1);
	}
}

/* Take a chunk of stderr. */
int
gitmsg_progress_feed(const char *buf, size_t len, void *arg)
{
	struct gitmsg_progress	*gp = arg;
	const char		*p = buf, *end = buf + len, *eol;

	if (!gp->on) {
		if (gp->rest != NULL)
			gitbuf_add(gp->rest, buf, len);
		return 0;
	}
	while (p < end) {
		for (eol = p; eol < end && *eol != '\n' && *eol != '\r'; eol++)
			;
		if (eol == end) {
			/* An overlong line is not progress: keep what fits, as before. */
			if (gitbuf_add(&gp->seg, p, end - p) != 0) {
				gitmsg_progress_line(gp, gitbuf_str(&gp->seg), gp->seg.len, '\n');
				gitbuf_free(&gp->seg);
				gitbuf_init(&gp->seg, GITRUN_REC_MAX);
			}
			break;
		}
		if (gp->seg.len > 0) {
			gitbuf_add(&gp->seg, p, eol - p);
			gitmsg_progress_line(gp, gitbuf_str(&gp->seg), gp->seg.len, *eol);
			gitbuf_free(&gp->seg);
			gitbuf_init(&gp->seg, GITRUN_REC_MAX);
		} else if (eol > p)
			gitmsg_progress_line(gp, p, eol - p, *eol);
		p = eol + 1;
	}
	return 0;
}

/* Flush a trailing partial line into rest. */
void
gitmsg_progress_done(struct gitmsg_progress *gp)
{
	if (gp->seg.len > 0 && gp->rest != NULL)
		gitbuf_add(gp->rest, gitbuf_str(&gp->seg), gp->seg.len);
	gitbuf_free(&gp->seg);
}
