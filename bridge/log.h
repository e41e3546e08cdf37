/* Daemon diagnostics: one line per event to stderr (journald or the launchd log). */
#ifndef SHIMBRIDGE_LOG_H
#define SHIMBRIDGE_LOG_H

void	log_init(int debug);
void	log_debug(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *, ...) __attribute__((format(printf, 1, 2)));
/* A broken internal invariant: log and abort. Never for peer or config errors. */
void	fatalx(const char *, ...) __attribute__((noreturn, format(printf, 1, 2)));

#endif
