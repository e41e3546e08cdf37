/*
 * Process containment with cgroup v2 (Linux): every session's calls run in a
 * cgroup of their own, created below the daemon's own cgroup (under systemd the
 * unit's delegated subtree, Delegate=yes), and a child enters it as it is
 * cloned (clone3 CLONE_INTO_CGROUP), so nothing it forks can be outside it. A
 * session is torn down with cgroup.kill: the kernel kills every process in it,
 * fork bombs included, without a scan of /proc. Where no writable cgroup2
 * hierarchy is available the daemon keeps process groups, PID namespaces and
 * the orphan scan, and says so once at start (cgroup_init's message).
 */
#ifndef SHIMBRIDGE_CGROUP_H
#define SHIMBRIDGE_CGROUP_H

/*
 * Find a writable cgroup2 hierarchy and make the daemon's subtree in it
 * (OWN/shimbridged.PID; leftovers of dead daemons there are killed and removed).
 * Returns 1 when cgroups are in use, 0 when not; *msg (always set, the caller's
 * to free) says which path is in use and, if it is the fallback, why.
 */
int	cgroup_init(char **msg);
/* Whether cgroups are in use. */
int	cgroup_enabled(void);
/*
 * A new directory fd (O_PATH, > 2) of a session's cgroup (made on first use), for
 * CLONE_INTO_CGROUP; the caller closes it. 0 when cgroups are not in use;
 * -1 with *cause when they are and the cgroup cannot be made (the call must
 * then fail: never run it less contained than the daemon said).
 */
int	cgroup_session_fd(const char *session, char **cause);
/* Kill every process of a session's calls (cgroup.kill); how many were in it, or -1. */
int	cgroup_session_kill(const char *session);
/* Remove session cgroups that are empty and not in use; called from the sweep. */
void	cgroup_sweep(void);
/* Stopping: kill everything below the daemon's subtree and remove it. */
void	cgroup_shutdown(void);

#endif
