/*
 * Per-call jail for host-side children (Linux): new PID, mount, IPC, UTS and
 * network namespaces, and a root filesystem built from nothing: a tmpfs holding
 * read-only binds of the system directories, a /proc of the child's own PID
 * namespace, a minimal /dev, and the binds the caller names (the call's scratch
 * directory read-write at its own path). Nothing else of the host is visible.
 * See docs/JAIL.md.
 */
#ifndef SHIMBRIDGE_JAIL_H
#define SHIMBRIDGE_JAIL_H

#include <sys/types.h>
#include <stddef.h>

#define JAIL_NET_NEW	(-1)	/* a new netns: only loopback, and that down */
#define JAIL_NET_HOST	(-2)	/* the daemon's own network (tools that need it) */
#define JAIL_NET_NEW_LO	(-3)	/* a new netns with loopback up (the daemon listens inside) */

struct spawn_jail;

struct jail_bind {
	const char	*path;		/* absolute; mounted at the same path inside */
	int		 writable;	/* 0: read-only */
};

struct jail {
	/*
	 * An existing empty directory the child mounts its new root on. The mount
	 * happens in the child's own mount namespace only; the host never sees it.
	 */
	const char		*root;
	int			 netns_fd;	/* JAIL_NET_NEW, JAIL_NET_HOST, or an
						   fd of a netns to join */
	const struct jail_bind	*binds;		/* scratch dir, mirror, workspace, tool */
	size_t			 nbinds;
	const char		*tmp;		/* the call's scratch dir: /tmp is a symlink
						   to it (unless a bind is below /tmp), or NULL */
	/*
	 * A pre-built jail of this shape (bridge/zygote.c) whose scratch dir is tmp,
	 * or NULL: spawn_child then starts a fresh one. spawn_child consumes it.
	 */
	struct spawn_jail	*warm;
};

/* A jail with room for its binds, filled in by the caller for one request. */
#define JAIL_SPEC_BINDS	16
struct jail_spec {
	struct jail		j;
	struct jail_bind	b[JAIL_SPEC_BINDS];
};

/* Start a spec (no binds yet); root, tmp must outlive it. */
void		jail_spec_init(struct jail_spec *, const char *root, int netns_fd,
		    const char *tmp);
/*
 * Add a bind of path (kept by pointer). Read-only paths inside the system
 * directories are skipped: every jail has them. -1 when the spec is full.
 */
int		jail_spec_bind(struct jail_spec *, const char *path, int writable);

/* Whether path is inside the system directories every jail has (no bind needed). */
int		jail_is_system_path(const char *path);

/* The clone(2) flags that create the jail's namespaces. */
int		jail_clone_flags(const struct jail *);

/*
 * In the jail's init (shimbridge-jail, PID 1 of its namespaces, still root): join
 * the netns if one is given, build the filesystem and pivot into it. Only system
 * calls, no allocation. Returns NULL, or the step that failed (errno is set).
 */
const char	*jail_enter(const struct jail *);

/*
 * The template (docs/JAIL.md): in a fresh mount namespace of the caller (the
 * jail server's helper, root), build what every jail shares on a tmpfs at root
 * (system dirs, /dev, /proc's mount point, the path to scratch_dir, /tmp) and
 * pivot into it, read-only. NULL, or the step that failed (errno is set).
 */
const char	*jail_template_build(const char *root, const char *scratch_dir);

/*
 * In the init of a jail cloned from the template (still root): j->tmp, the
 * scratch dir, must lie directly in the template's scratch_dir; tree is its
 * detached mount (jail_tree_open); j has no binds but the scratch dir, and no
 * network namespace to join. NULL, or the step that failed (errno is set).
 */
const char	*jail_enter_template(const struct jail *, int tree);

/* From the daemon: a detached copy of the mount at path (open_tree), or -1 and errno. */
int		jail_tree_open(const char *path);

/* Bring loopback up in the calling thread's network namespace (0, or -1 and errno). */
int		jail_lo_up(void);

/*
 * From the daemon: a new network namespace with loopback up and a TCP listener
 * on 127.0.0.1:<ephemeral> inside it. The calling thread returns to its own
 * netns before this returns. *netns_fd and *listen_fd (non-blocking,
 * close-on-exec) are the caller's to close. 0, or -1 with *cause.
 */
int		jail_netns_listen(int *netns_fd, int *listen_fd, int *port, char **cause);
/*
 * The same inside the existing network namespace ns (an fd: a pre-built jail's,
 * which the daemon made with jail_netns_new); *netns_fd is a copy of ns.
 */
int		jail_netns_listen_in(int ns, int *netns_fd, int *listen_fd, int *port,
		    char **cause);
/*
 * From the daemon: a new network namespace with loopback up, held by *netns_fd
 * (close-on-exec, the caller's). 0, or -1 with *cause.
 */
int		jail_netns_new(int *netns_fd, char **cause);

#endif
