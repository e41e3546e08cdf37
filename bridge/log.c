/* Daemon diagnostics. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

static int log_debug_on;

/* Choose whether debug lines are printed. */
void
log_init(int debug)
{
	log_debug_on = debug;
}

/* Print one line with a level prefix. */
static void __attribute__((format(printf, 2, 0)))
log_vline(const char *level, const char *fmt, va_list ap)
{
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
	log_vline("debug: ", fmt, ap);
	va_end(ap);
}

/* Normal operation. */
void
log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline("", fmt, ap);
	va_end(ap);
}

/* Something went wrong but the daemon carries on. */
void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline("warning: ", fmt, ap);
	va_end(ap);
}

/* Internal invariant broken. */
void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline("fatal: ", fmt, ap);
	va_end(ap);
	abort();
}
