/*
 * launchd socket activation (macOS): the sockets the LaunchDaemon plist declares
 * under Sockets -> Listeners. Compiled everywhere; elsewhere there are none.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__APPLE__)
#include <launch.h>
#endif

#include "platform.h"
#include "util.h"

/*
 * Sockets launchd passes for the "Listeners" entry. Returns their count with *fds
 * malloc'd (caller frees), 0 when the process is not managed by launchd (or on
 * another platform), -1 with *cause when launchd knows the job but the sockets
 * cannot be had.
 */
int
launchd_listen_fds(int **fds, char **cause)
{
#if defined(__APPLE__)
	size_t n = 0, i;
	int *lfds = NULL, rc;

	*fds = NULL;
	rc = launch_activate_socket("Listeners", &lfds, &n);
	if (rc == ESRCH)
		return 0;	/* not started by launchd: bind the socket ourselves */
	if (rc != 0) {
		xasprintf(cause, "launch_activate_socket(\"Listeners\"): %s%s", strerror(rc),
		    rc == ENOENT ? " (the plist has no Sockets/Listeners entry)" : "");
		return -1;
	}
	if (n == 0 || n > 16) {
		for (i = 0; i < n; i++)
			(void)close(lfds[i]);
		free(lfds);
		xasprintf(cause, "launchd passed %zu sockets; expected 1 to 16", n);
		return -1;
	}
	*fds = xcalloc(n, sizeof **fds);
	memcpy(*fds, lfds, n * sizeof **fds);
	free(lfds);
	return (int)n;
#else
	(void)cause;
	*fds = NULL;
	return 0;
#endif
}
