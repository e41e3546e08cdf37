/*
 * Background renewals of command secret sources: one job per run, started by
 * the sweep before a value expires, never on a request's path.
 */
#ifndef SHIMBRIDGE_RENEW_H
#define SHIMBRIDGE_RENEW_H

struct config;
struct event_base;

/* Start due renewals of cfg's command sources; stop runs past their timeout. */
void	renew_sweep(struct event_base *, struct config *);
/* The daemon is stopping: kill, reap and finish every run under way. */
void	renew_stop_all(void);

#endif
