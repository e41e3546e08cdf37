/*
 * The daemon's side of GitHub App tokens (docs/GITHUB-APP.md): minting a
 * session's token at its first need, refreshing it in the background before it
 * expires, revoking tokens taken out of service. All HTTP goes through libevent's
 * evhttp client over bufferevent_openssl with the injector's TLS contexts
 * (certificate and host name verified); nothing here blocks the loop.
 *
 * Keys are looked up again when an answer arrives (a reload may have replaced
 * them); a token minted for a key that changed meanwhile is revoked at once.
 */
#ifndef SHIMBRIDGE_GHMINT_H
#define SHIMBRIDGE_GHMINT_H

struct config;
struct event_base;
struct key;
struct keyring;

/*
 * Start due work: first mints of keys a call needed, refreshes (min(refresh_before,
 * lifetime/2) before expiry), retries after back-off, and revocations. Every second.
 */
void	ghmint_sweep(struct event_base *, struct keyring *, struct config *);
/*
 * A call needs k (a github_app key): mark it wanted and start a mint now if it has
 * no usable token and none is under way (after a failure: once the last attempt is
 * 5 s old). 1 if the token is usable or its first mint is under way (the call waits:
 * secret_pending), 0 otherwise (the last attempt failed: ghmint_why says why).
 */
int	ghmint_want(struct event_base *, struct keyring *, struct config *, struct key *k);
/*
 * The daemon is stopping: no new mints; every live token is revoked, waiting at
 * most seconds for the answers (the loop runs meanwhile), then everything is freed.
 */
void	ghmint_stop(struct event_base *, struct keyring *, int seconds);
/* Why k's token is not usable, for the agent (no secret in it); static storage. */
const char *ghmint_why(const struct key *k);

#endif
