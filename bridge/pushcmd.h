/*
 * The ref updates of a git push, read from the body of its POST .../git-receive-pack
 * (smart HTTP, protocol v0/v1: pkt-lines "<old> <new> <ref>", the first with the
 * capabilities after a NUL, ended by a flush; "shallow" lines may come first). The
 * injector reads them so that the daemon, not the jailed shimbridge-git that sends
 * them, has the last word on which refs a push may move (docs/INJECTOR.md).
 */
#ifndef SHIMBRIDGE_PUSHCMD_H
#define SHIMBRIDGE_PUSHCMD_H

#include <stddef.h>

#define PUSHCMD_MAX	1000	/* updates in one push */
#define PUSHCMD_REF_MAX	1024	/* bytes of a ref name */

struct pushcmd {
	char	old[65];	/* lowercase hex (40 or 64 digits); all zeros: create */
	char	new[65];	/* all zeros: delete */
	char	ref[PUSHCMD_REF_MAX + 1];
};

/*
 * Read the updates at the start of body: 0 with *out (free with free()) and *n, or
 * -1 with *why (static text) when the list is malformed, incomplete, too long, or
 * signed (push certificates are not relayed). A list of none (*n 0, *out NULL) is
 * what git sends to probe before a push too large for one buffer: it changes nothing.
 */
int	pushcmd_parse(const unsigned char *body, size_t len, struct pushcmd **out,
	    size_t *n, const char **why);
/* Whether a hex object name is all zeros. */
int	pushcmd_zero(const char *oid);

#endif
