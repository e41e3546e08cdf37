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
#include <unistd.h>

#include "redact.h"
#include "util.h"
#include "gitserve.h"

#define GITMSG_LOG_MAX	2048	/* what a refusal record keeps */

static struct redact *gitmsg_redact;	/* every encoding of the token; NULL = none */
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
	if ((gitmsg_redact = redact_new(&rs, 1)) == NULL)
		die(GS_EXIT_FATAL, "cannot set up redaction");
}

/* Copy buf with control bytes turned into '?' and every form of the secret masked. */
char *
gitmsg_clean(const char *buf, size_t len)
{
	struct gitbuf	 b;
	size_t		 i;
	char		*out, c;

	gitbuf_init(&b, (size_t)-1);
	for (i = 0; i < len; i++) {
		c = buf[i];
		if ((unsigned char)c < 0x20 && c != '\t')
			c = '?';
		else if (c == 0x7f)
			c = '?';
		gitbuf_add(&b, &c, 1);
	}
	if (gitmsg_redact != NULL) {
		out = redact_string(gitmsg_redact, gitbuf_str(&b));
		if (out == NULL)
			die(GS_EXIT_FATAL, "redaction failed");
	} else
		out = xstrdup(gitbuf_str(&b));
	gitbuf_free(&b);
	return out;
}

/*
 * Write what was said so far to $HOME/.shimbridge-refused, so the bridge can audit
 * a push the policy refused (receive-pack itself exits 0 when its hook refuses).
 * HOME is the per-call private directory the bridge made.
 */
void
gitmsg_record_refusal(void)
{
	const char *home = getenv("HOME");
	char *path;
	int fd;

	if (home == NULL || home[0] != '/')
		return;
	xasprintf(&path, "%s/.shimbridge-refused", home);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	free(path);
	if (fd < 0)
		return;
	(void)!write(fd, gitmsg_log, gitmsg_loglen);
	close(fd);
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

/* Print each non-empty line of buf with a prefix. */
void
gitmsg_relay(const char *prefix, const char *buf, size_t len)
{
	const char	*p = buf, *end = buf + len, *eol;

	while (p < end) {
		for (eol = p; eol < end && *eol != '\n' && *eol != '\r'; eol++)
			;
		if (eol > p)
			gitmsg_say("%s%.*s", prefix, (int)(eol - p), p);
		p = eol + 1;
	}
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
	char		*copy, *line, *next, *clean, *out;
	const char	*rest;
	int		 pass, took;
	size_t		 cut;

	gitbuf_init(&b, (size_t)-1);
	for (pass = 0; pass < 2 && b.len == 0; pass++) {
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
			clean = gitmsg_clean(rest, strlen(rest));
			if (b.len > 0)
				gitbuf_add(&b, " / ", 3);
			gitbuf_add(&b, clean, strlen(clean));
			free(clean);
		}
		free(copy);
	}
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
