/*
 * Everything that differs between Linux and macOS, one small function per concern.
 * A platform without kernel peer credentials does not build: there is no fallback.
 */
#ifndef SHIMBRIDGE_PLATFORM_H
#define SHIMBRIDGE_PLATFORM_H

#include <sys/types.h>

/* Peer credentials from the kernel. pid is -1 where the platform cannot tell. */
int	platform_peercred(int fd, uid_t *uid, gid_t *gid, pid_t *pid);
/* Make the process non-dumpable with core size 0 (secrets live in it). */
int	platform_harden_self(void);
/* Become the reaper of orphaned descendants, so detached grandchildren come back to us. */
int	platform_subreaper(void);
/* A tmpfs of at most mib MiB on dir, seen by the daemon and its children only. */
int	platform_private_tmpfs(const char *dir, int mib, char **cause);
/*
 * Kill every child of ours for which keep(pid) is 0 (escaped grandchildren).
 * Returns how many. Reads /proc/self/task/TID/children whole: the cost follows
 * our own children, not the host's processes.
 */
int	platform_kill_orphans(int (*keep)(pid_t));
/* SIGKILL every process owned by uid (leftovers of a killed daemon's runner). */
int	platform_kill_uid(uid_t uid);
/* Sockets launchd passes for "Listeners" (macOS; 0 elsewhere or when not launched by it). */
int	launchd_listen_fds(int **fds, char **cause);
/* Sockets handed over by the service manager (systemd LISTEN_FDS or launchd); count or -1. */
int	platform_listen_fds(int **fds, char **cause);
/* Tell the service manager we are ready / reloading / stopping (no-op without one). */
void	platform_notify(const char *state);
/* Count this process's open fds and resident memory (KiB); -1 when unknown. */
long	platform_fd_count(void);
long	platform_rss_kib(void);

#endif
