/*
 * Background renewals of command secret sources: one job per run, started by
 * the sweep before a value expires, never on a request's path.
 */
#ifndef SHIMBRIDGE_RENEW_H
#define SHIMBRIDGE_RENEW_H

struct config;
struct event_base;
struct keyring;

/*
 * Start due renewals of the keyring's command sources as cfg's runner; stop runs
 * past their timeout. A result is stored only if its key is still the one that
 * was renewed (a reload may have changed or removed the source meanwhile).
 */
void	renew_sweep(struct event_base *, struct keyring *, struct config *);
/* The daemon is stopping: kill, reap and finish every run under way. */
void	renew_stop_all(void);

#endif
