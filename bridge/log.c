/* Daemon diagnostics. */
#include <sys/stat.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"

/* sd-daemon(3) priority prefixes, understood by journald on a stream. */
#define LOG_PRI_CRIT	"<2>"
#define LOG_PRI_WARNING	"<4>"
#define LOG_PRI_INFO	"<6>"
#define LOG_PRI_DEBUG	"<7>"

static int log_debug_on;
static int log_journal = -1;	/* -1: not checked yet */

/*
 * Whether stderr is the journal: systemd sets JOURNAL_STREAM=DEV:INO for the
 * stream it connects, and only that stream (not a redirection made later by a
 * wrapper or a test) gets priority prefixes.
 */
static int
log_is_journal(void)
{
	unsigned long long dev, ino;
	const char *js = getenv("JOURNAL_STREAM");
	struct stat st;
	char tail;

	if (js == NULL || sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) != 2)
		return 0;
	if (fstat(STDERR_FILENO, &st) != 0)
		return 0;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* Choose whether debug lines are printed; find out where stderr goes. */
void
log_init(int debug)
{
	log_debug_on = debug;
	log_journal = log_is_journal();
}

/* Print one line: "<N>text" to the journal, "shimbridged: level: text" elsewhere. */
static void __attribute__((format(printf, 3, 0)))
log_vline(const char *pri, const char *level, const char *fmt, va_list ap)
{
	if (log_journal < 0)
		log_journal = log_is_journal();
	if (log_journal)
		fprintf(stderr, "%s%s", pri, level);
	else
		fprintf(stderr, "shimbridged: %s", level);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	fflush(stderr);
}

/* Debug detail, printed only with -d. */
void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (!log_debug_on)
		return;
	va_start(ap, fmt);
	log_vline(LOG_PRI_DEBUG, "debug: ", fmt, ap);
	va_end(ap);
}

/* Normal operation. */
void
log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(LOG_PRI_INFO, "", fmt, ap);
	va_end(ap);
}

/* Something went wrong but the daemon carries on. */
void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(LOG_PRI_WARNING, "warning: ", fmt, ap);
	va_end(ap);
}

/* Internal invariant broken. */
void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(LOG_PRI_CRIT, "fatal: ", fmt, ap);
	va_end(ap);
	abort();
}
