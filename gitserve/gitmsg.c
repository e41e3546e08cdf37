/*
 * Messages for the sandboxed user. Everything we print to stderr reaches the sandbox
 * (as "remote: ..." lines during a push), so it is redacted here as a second line of
 * defence and stripped of control bytes; the first line is that no secret is ever
 * put where git could print it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "gitserve.h"

#define GITMSG_REDACTED	"[redacted]"

static const char *gitmsg_secret;	/* not owned; NULL or "" = nothing to redact */

/* Set (or clear, with NULL) the secret that must never be printed. */
void
gitmsg_init(const char *secret)
{
	gitmsg_secret = secret;
}

/* Copy buf with the secret replaced and control bytes turned into '?'. */
char *
gitmsg_clean(const char *buf, size_t len)
{
	struct gitbuf	 b;
	size_t		 slen = 0, i;
	char		*out, c;

	if (gitmsg_secret != NULL)
		slen = strlen(gitmsg_secret);
	gitbuf_init(&b, (size_t)-1);
	for (i = 0; i < len; i++) {
		if (slen > 0 && len - i >= slen && memcmp(buf + i, gitmsg_secret, slen) == 0) {
			gitbuf_add(&b, GITMSG_REDACTED, strlen(GITMSG_REDACTED));
			i += slen - 1;
			continue;
		}
		c = buf[i];
		if ((unsigned char)c < 0x20 && c != '\t')
			c = '?';
		else if (c == 0x7f)
			c = '?';
		gitbuf_add(&b, &c, 1);
	}
	out = xstrdup(gitbuf_str(&b));
	gitbuf_free(&b);
	return out;
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
