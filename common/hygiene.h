/*
 * Process hygiene, written once for every program (daemon, admin CLI,
 * shimbridge-git): descriptors, privilege drop, root-owned directories.
 */
#ifndef SHIMBRIDGE_HYGIENE_H
#define SHIMBRIDGE_HYGIENE_H

#include <sys/resource.h>
#include <sys/types.h>

/*
 * Close every descriptor from lowfd up: close_range(2), else a loop to the
 * descriptor limit. Async-signal-safe (no allocation): usable between vfork or
 * fork and exec.
 */
void		 hygiene_closefrom(int lowfd);
/*
 * Every signal's disposition back to the default, including the C library's
 * internal ones where the kernel allows it (an ignored signal survives exec).
 * Async-signal-safe, vfork-safe; the signal mask is left to the caller.
 */
void		 hygiene_signals_default(void);
/*
 * Start-up: make sure fds 0, 1 and 2 are open (on /dev/null when they are not,
 * so no pipe or file opened later becomes one of them and is handed to a child
 * as its stdio). Returns 0, or -1 if /dev/null cannot be opened. Callers then
 * close what they inherited beyond (hygiene_closefrom).
 */
int		 hygiene_stdio(void);
/*
 * Let go of our stdio: fds 0, 1 and 2 become /dev/null, so whoever reads our
 * stdout or stderr sees them end while we go on. Returns 0, or -1 (errno set).
 */
int		 hygiene_stdio_null(void);
/*
 * Drop to uid:gid for good: supplementary groups (none, or name's with
 * initgroups when name is not NULL), gid, uid; then verify that real, effective
 * and saved ids all changed and that root cannot be had back. Refuses uid 0.
 * Returns NULL, or the step that failed ("setgroups", "setresuid", "verify",
 * ...) with errno set: a static string, so it is safe in a vfork child (with
 * name NULL).
 */
const char	*hygiene_drop_privileges(uid_t, gid_t, const char *name);
/*
 * The resource limits of every tool a request runs, jailed or not: no core
 * file, cpu_seconds of CPU (SIGXCPU, then SIGKILL 5 s later), 8 GiB of address
 * space, 4 GiB files, 1024 descriptors, 8192 processes of its uid. A limit
 * above the hard one we have is set to that (only root may raise it). Returns
 * NULL, or the step that failed ("setrlimit cpu", ...) with errno set: system
 * calls only, so it is safe in a vfork child.
 */
const char	*hygiene_tool_limits(rlim_t cpu_seconds);
/*
 * mkdir path with mode (chmod'ed: the umask does not apply), or accept an
 * existing directory that is root's and not a symbolic link. An existing one is
 * set to mode when enforce_mode is set, else it must be writable by nobody but
 * root and keeps its mode. Returns 0 or -1 with *cause.
 */
int		 hygiene_mkdir_root(const char *path, mode_t mode, int enforce_mode,
		    char **cause);

#endif
