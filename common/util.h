/* Small helpers shared by every program: checked allocation, bounded copies. */
#ifndef SHIMBRIDGE_UTIL_H
#define SHIMBRIDGE_UTIL_H

#include <stdarg.h>
#include <stddef.h>

/* Allocation that never returns NULL: aborts with a message on exhaustion. */
void	*xmalloc(size_t);
void	*xcalloc(size_t, size_t);
void	*xreallocarray(void *, size_t, size_t);
char	*xstrdup(const char *);
char	*xstrndup(const char *, size_t);
int	 xasprintf(char **, const char *, ...) __attribute__((format(printf, 2, 3)));
int	 xvasprintf(char **, const char *, va_list) __attribute__((format(printf, 2, 0)));

/* Copy src into dst of size dstsz; returns -1 (ENAMETOOLONG) instead of truncating. */
int	 strcpy_checked(char *dst, size_t dstsz, const char *src);
/* Value of a hex digit (0-9, a-f, A-F), or -1. */
int	 util_hexval(int c);

/*
 * pipe(2) with both ends close-on-exec, and non-blocking when nonblock is set
 * (pipe2() where the platform has it, else pipe() and fcntl() before returning).
 */
int	 util_pipe(int p[2], int nonblock);
/* dup2(from, to) with to close-on-exec (dup3() where the platform has it). */
int	 util_dup_cloexec(int from, int to);

/* Print "prog: message" to stderr and exit(code); never returns. */
void	 die(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));

/* Program name for messages (set once from argv[0]). */
extern const char *util_progname;

#endif
