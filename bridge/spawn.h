/*
 * Children are built from nothing: environment from scratch, absolute path,
 * fds 0-2 only (pipes back to the daemon), runner uid/gid with supplementary
 * groups cleared and verified, no-new-privs, new session, rlimits, core = 0.
 */
#ifndef SHIMBRIDGE_SPAWN_H
#define SHIMBRIDGE_SPAWN_H

#include <sys/types.h>
#include <stddef.h>

struct envbuild;
struct jail;

struct spawn_req {
	const char	 *path;		/* absolute program path */
	char *const	 *argv;		/* argv[0] is the tool name */
	char *const	 *envp;
	uid_t		  uid;
	gid_t		  gid;
	int		  cwd_fd;	/* directory to fchdir into, or -1 */
	const char	 *cwd;		/* else a path to chdir into */
	int		  cpu_seconds;	/* RLIMIT_CPU */
	int		  extra_fd;	/* > 2: given to the child as its fd 3 (not
					   close-on-exec); 0: none */
	/*
	 * NULL, or run jailed (bridge/jail.h): the child is then a small init, PID 1
	 * of its own namespaces, which starts the tool, reaps, forwards SIGTERM,
	 * SIGINT and SIGHUP to the tool's process group, and exits with the tool's
	 * status (128+N when a signal killed it; spawn_wait_status maps that back).
	 * Its exit makes the kernel kill whatever else is left in the namespace. With
	 * a jail cwd_fd must be -1: give cwd as a path visible inside the jail.
	 * jail->warm, when set, is a pre-built jail of the same shape to use (and is
	 * consumed either way); if it broke before the tool, a fresh one is made.
	 */
	const struct jail *jail;
	/*
	 * > 2: a cgroup's directory fd (bridge/cgroup.h); the child is cloned
	 * straight into it (clone3 CLONE_INTO_CGROUP), so it and everything it
	 * forks are inside from the first instruction. 0: the daemon's cgroup.
	 */
	int		  cgroup_fd;
};

struct child {
	pid_t		pid;		/* also the process group and session id */
	int		in;		/* write end of the child's stdin */
	int		out;		/* read end of its stdout */
	int		err;		/* read end of its stderr */
	int		jailed;		/* pid is the jail's init */
	/*
	 * Jailed: -1, or a descriptor of the jail's mount namespace, which its init
	 * sent with READY (no /proc/PID/ns/mnt, so no CAP_SYS_PTRACE). Holding it makes the namespace's teardown (its mounts
	 * unmounted, an RCU grace period) happen when it is closed instead of when
	 * the init exits, so the exit status arrives without waiting for it. The
	 * owner closes it once the call has been answered (job_free does).
	 */
	int		mntns;
};

/*
 * Fork and exec. Returns 0 once the child has exec'd (the parent ends are
 * non-blocking and close-on-exec), or -1 with *cause if anything before or at
 * exec failed (the child is reaped in that case).
 */
int	spawn_child(const struct spawn_req *, struct child *, char **cause);
/*
 * The tool's wait status from what waitpid reported for a child's pid: for a
 * jailed child an init exit of 128+N (N a signal) reads as "killed by N", the
 * way a shell reports it.
 */
int	spawn_wait_status(int jailed, int wstatus);

/*
 * Environment building. Values that are secrets are kept in guarded memory and
 * wiped by envbuild_free; set replaces an earlier value of the same name.
 */
struct envbuild	*envbuild_new(void);
int		 envbuild_set(struct envbuild *, const char *name, const char *value,
		    size_t vlen, int secret);
const char	*envbuild_get(const struct envbuild *, const char *name);
char *const	*envbuild_array(struct envbuild *);	/* NULL-terminated, owned */
size_t		 envbuild_count(const struct envbuild *);
void		 envbuild_free(struct envbuild *);

/*
 * Jails (docs/JAIL.md). Each jail's init is forked in the jail's new namespaces
 * by the jail server, the program shimbridge-jail exec'd once (from a
 * clone(CLONE_VM|CLONE_VFORK) child), so no copy of the daemon's memory exists
 * in any jail.
 */
struct spawn_jail {
	pid_t	pid;		/* the init, a child of the daemon; -1: none */
	int	ctl;		/* the daemon's end of its control socket */
	int	netns;		/* JAIL_NET_NEW_LO: its network namespace, made and
				   held by the daemon (jail_netns_new); else -1 */
};

#define SPAWN_JAIL_NONE	{ -1, -1, -1 }

/*
 * Find and open shimbridge-jail at start: path, or with NULL next to the daemon
 * or in ../libexec/shimbridge/ from it. Root-owned, writable by nobody else.
 * 0, or -1 and *cause.
 */
int	 spawn_jail_find(const char *path, char **cause);
/*
 * Start an init for the jail j (its binds, network, scratch dir as tmp) that
 * becomes uid:gid (in the cgroup of cgroup_fd when > 2, see spawn_req), and
 * send it the jail to build. It does not wait: the init
 * builds the jail and waits for the tool (spawn_child with j->warm). 0, or -1.
 */
int	 spawn_jail_start(const struct jail *j, uid_t, gid_t, int cgroup_fd,
	    struct spawn_jail *, char **cause);
/* Kill a started init that will run nothing; the SIGCHLD reaper collects it. */
void	 spawn_jail_discard(struct spawn_jail *);
/*
 * The jail server that forks the inits (shimbridge-jail --server, a child of
 * the daemon): start it (the first jail does if this was not called: 0, or -1
 * and *cause); whether pid is it or the template server; and, for the reaper,
 * 1 if the pid it reaped was the jail server, 2 if the template server (the
 * next jail that needs it starts a new one), else 0.
 */
int	 spawn_jail_server_start(char **cause);
/* Let go of a finished jail's mount namespace (struct child mntns; -1: nothing). */
void	 spawn_jail_drop(int mntns);
int	 spawn_jail_server_is(pid_t);
int	 spawn_jail_server_reaped(pid_t);
/*
 * The template (docs/JAIL.md): jails whose only bind is their scratch dir, a
 * directory of scratch_dir, with no network namespace to join, are copies of a
 * mount namespace built once on root by the template server (the jail server
 * starts it). Set what it holds and start it: 0, or -1 and *cause (those jails
 * are then built from nothing, as every other; a later jail tries again after a
 * minute).
 */
int	 spawn_jail_template(const char *root, const char *scratch_dir, char **cause);
/* A fresh private directory under parent, owned by uid:gid, mode 0700. */
char	*spawn_scratch_create(const char *parent, uid_t, gid_t, char **cause);
/* Remove a tree without following symlinks. */
int	 spawn_rmtree(const char *path);
/* Open dir (absolute) beneath root without following any symlink; -1 and errno. */
int	 spawn_open_beneath(const char *root, const char *dir);

#endif
