/*
 * The control messages between the daemon and a jail's init (shimbridge-jail),
 * over a SOCK_STREAM socketpair that is the init's fd 0. See docs/JAIL.md.
 *
 * Each message is an 8-byte header (type and body length, both 32-bit little
 * endian) and a body of 32-bit little-endian integers and NUL-terminated strings:
 *
 *   SETUP  daemon -> init  uid gid net nbinds | root scratch {writable path}*nbinds
 *                          (net JAILMSG_NET_JOIN: the netns fd rides on the header)
 *   READY  init -> daemon  (empty) the jail is built, the init is the runner; a
 *                          descriptor of the jail's mount namespace rides on it
 *   RUN    daemon -> init  cpu_seconds nfds argc envc | path cwd argv*argc env*envc
 *                          (nfds 3 or 4 fds ride on the header: stdin, stdout,
 *                          stderr and the optional fd 3)
 *   EXEC   init -> daemon  (empty) the tool has exec'd
 *   ERROR  init -> daemon  message: the step that failed and why
 *
 * Between the daemon and its jail server (shimbridge-jail --server, which forks
 * every jail's init, see docs/JAIL.md), over another socketpair:
 *
 *   FORK   daemon -> server  flags options | the namespaces to make (CLONE_NEW*);
 *                            options: JAILMSG_FORK_CGROUP, a session cgroup's fd
 *                            follows the init's control socket on the header;
 *                            JAILMSG_FORK_TMPL, the init starts in a copy of the
 *                            template (below) and its SETUP brings the scratch dir
 *                            as a detached mount (open_tree) instead of binds
 *   TMPL   daemon -> server  root scratch_dir | build the template: a mount
 *                            namespace holding the filesystem every jail shares
 *                            (system dirs, /dev, the path to scratch_dir), once
 *   READY  server -> daemon  (empty) the template is built
 *   PID    server -> daemon  pid: the new init's pid (> 0), or -errno
 *   DROP   daemon -> server  (empty) a finished jail's mount namespace rides on the
 *                            header: the server closes it, and so tears the
 *                            jail's mounts down outside the daemon's thread
 *   ERROR  server -> daemon  message: why the template could not be built (the
 *                            server goes on without one), or why the server
 *                            cannot go on (it exits)
 *
 * The init trusts only the daemon, but parses defensively: every count, length and
 * terminator is checked, and a bad message makes it exit (the call fails).
 */
#ifndef SHIMBRIDGE_JAILMSG_H
#define SHIMBRIDGE_JAILMSG_H

#include <stddef.h>
#include <stdint.h>

#define JAILMSG_HDR		8
#define JAILMSG_MAX		(1024 * 1024)	/* body bytes */
#define JAILMSG_BINDS_MAX	16
#define JAILMSG_ARGS_MAX	2048
#define JAILMSG_ENV_MAX		512

enum jailmsg_type {
	JAILMSG_SETUP = 'S',
	JAILMSG_READY = 'K',
	JAILMSG_RUN = 'R',
	JAILMSG_EXEC = 'X',
	JAILMSG_ERROR = 'E',
	JAILMSG_FORK = 'F',
	JAILMSG_PID = 'P',
	JAILMSG_DROP = 'D',
	JAILMSG_TMPL = 'T',
};

/* FORK options (its second integer). */
#define JAILMSG_FORK_CGROUP	1u
#define JAILMSG_FORK_TMPL	2u

/* FORK and PID bodies: two and one 32-bit integers. */
#define JAILMSG_FORK_LEN	8
#define JAILMSG_PID_LEN		4

enum jailmsg_net {
	JAILMSG_NET_HOST = 0,	/* keep the daemon's network namespace */
	JAILMSG_NET_NEW = 1,	/* a new one (made by clone): lo stays down */
	JAILMSG_NET_NEW_LO = 2,	/* a new one with lo up (the daemon listens inside) */
	JAILMSG_NET_JOIN = 3,	/* join the namespace whose fd came with the message */
};

struct jailmsg_bind {
	const char	*path;
	int		 writable;
};

/* A decoded SETUP; strings point into the body. */
struct jailmsg_setup {
	uint32_t		 uid, gid;
	enum jailmsg_net	 net;
	const char		*root;		/* the mount point of the new root */
	const char		*scratch;	/* "" for none: HOME, TMPDIR, /tmp */
	size_t			 nbinds;
	struct jailmsg_bind	 binds[JAILMSG_BINDS_MAX];
};

/* A decoded RUN; strings point into the body, the arrays are the caller's to free. */
struct jailmsg_run {
	uint32_t	  cpu_seconds;
	uint32_t	  nfds;		/* 3, or 4 with the tool's fd 3 */
	const char	 *path;		/* absolute */
	const char	 *cwd;		/* absolute, inside the jail */
	char		**argv;		/* NULL-terminated */
	char		**envp;		/* NULL-terminated */
};

/*
 * Send an empty message of type on sock with fd riding on it (none when fd < 0):
 * the bytes sent (a header's, or fewer), or -1 and errno. flags go to sendmsg
 * with MSG_NOSIGNAL (a peer that is gone is an error, not a signal).
 */
long	jailmsg_send_empty(int sock, enum jailmsg_type, int fd, int flags);

/* Header: fill / read. jailmsg_get_header returns -1 for an unknown type or a body too large. */
void	jailmsg_put_header(unsigned char *hdr, enum jailmsg_type, uint32_t len);
int	jailmsg_get_header(const unsigned char *hdr, enum jailmsg_type *, uint32_t *len);

/*
 * Encoding into a buffer the caller sized with the matching _size function
 * (the daemon allocates it in guarded memory: a RUN carries the tool's secrets).
 * Both return the body length, or 0 if the message would break a limit.
 */
size_t	jailmsg_setup_size(const struct jailmsg_setup *);
size_t	jailmsg_setup_encode(unsigned char *, size_t, const struct jailmsg_setup *);
size_t	jailmsg_run_size(const char *path, const char *cwd, char *const *argv,
	    char *const *envp);
size_t	jailmsg_run_encode(unsigned char *, size_t, uint32_t cpu_seconds, uint32_t nfds,
	    const char *path, const char *cwd, char *const *argv, char *const *envp);

/*
 * Decoding of a whole body (len bytes, not NUL-terminated). 0, or -1 with *why.
 * jailmsg_run_decode allocates argv and envp (malloc): jailmsg_run_free releases them.
 */
int	jailmsg_setup_decode(const unsigned char *, size_t, struct jailmsg_setup *,
	    const char **why);
int	jailmsg_run_decode(const unsigned char *, size_t, struct jailmsg_run *,
	    const char **why);
void	jailmsg_run_free(struct jailmsg_run *);

/*
 * FORK: flags are the CLONE_NEW* bits of the jail; the server accepts only
 * allowed (a mask of those it may make) and needs every bit of required.
 * PID: a pid, or -errno. TMPL: the jails' root mount point and the scratch
 * directories' parent (strings point into the body). The decoders return 0, or
 * -1 with *why; jailmsg_tmpl_encode the body length, 0 if it does not fit.
 */
void	jailmsg_fork_encode(unsigned char body[JAILMSG_FORK_LEN], uint32_t flags, int cgroup,
	    int tmpl);
int	jailmsg_fork_decode(const unsigned char *, size_t, uint32_t allowed, uint32_t required,
	    uint32_t *flags, int *cgroup, int *tmpl, const char **why);
size_t	jailmsg_tmpl_encode(unsigned char *, size_t, const char *root, const char *scratch_dir);
int	jailmsg_tmpl_decode(const unsigned char *, size_t, const char **root,
	    const char **scratch_dir, const char **why);
void	jailmsg_pid_encode(unsigned char body[JAILMSG_PID_LEN], int32_t pid);
int	jailmsg_pid_decode(const unsigned char *, size_t, int32_t *pid, const char **why);

#endif
