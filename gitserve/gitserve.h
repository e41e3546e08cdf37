/*
 * shimbridge-git: the host half of the git transport. The bridge runs it as the runner
 * user with stdin/stdout = the sandbox git's pack-protocol stream and an environment
 * built from nothing (see docs and the SHIMBRIDGE_* names in gitenv.c). It keeps a
 * runner-owned bare mirror per session and upstream, fetches upstream into it, serves
 * upload-pack/receive-pack from it and pushes accepted updates upstream from the
 * mirror's pre-receive hook. Host git never opens the sandbox's own repository.
 */
#ifndef SHIMBRIDGE_GITSERVE_H
#define SHIMBRIDGE_GITSERVE_H

#include <stddef.h>
#include <sys/types.h>

#include "gitcontract.h"

#ifndef SHIMBRIDGE_VERSION
#define SHIMBRIDGE_VERSION	"0.0.0-dev"
#endif

/* Exit codes: the contract's (common/gitcontract.h). */
#define GS_EXIT_OK		GITC_EXIT_OK
#define GS_EXIT_REFUSED		GITC_EXIT_REFUSED
#define GS_EXIT_USAGE		GITC_EXIT_USAGE
#define GS_EXIT_FATAL		GITC_EXIT_FATAL

/* Hard caps on what we read from git or from the sandbox's push. */
#define GITCRED_LINE_MAX	4096		/* one credential line, without newline */
#define GITCRED_LINES_MAX	64		/* lines in one credential request */
#define GITCRED_SECRET_MAX	4096		/* username or token length */
#define GITHOOK_LINE_MAX	4096		/* one "old new ref" line */
#define GITHOOK_REFS_MAX	1000		/* ref updates in one push */
#define GITRUN_OUT_MAX		(64 * 1024)	/* captured stdout of a small query */
#define GITRUN_ERR_MAX		(64 * 1024)	/* captured stderr kept for messages */
#define GITRUN_REC_MAX		(64 * 1024)	/* one streamed output record */

/* gitbuf.c: a growable byte buffer with a hard cap. */
struct gitbuf {
	char	*data;		/* NUL-terminated when non-NULL */
	size_t	 len;
	size_t	 size;
	size_t	 max;		/* cap on len; bytes past it are counted, not stored */
	size_t	 dropped;	/* bytes refused because of max */
};
void	 gitbuf_init(struct gitbuf *, size_t max);
/* Append; returns -1 (and counts the loss in dropped) if max would be passed. */
int	 gitbuf_add(struct gitbuf *, const void *, size_t);
/* Returns the contents as a string ("" when empty); never NULL. */
const char *gitbuf_str(const struct gitbuf *);
void	 gitbuf_free(struct gitbuf *);
/* Read fd to EOF; -1 with *cause on a read error or more than max bytes. */
int	 gitbuf_read_fd(struct gitbuf *, int fd, char **cause);

/* giturl.c: the upstream URL, restricted to what a GitHub-like host needs. */
struct giturl {
	char	*scheme;	/* "http" or "https" */
	char	*host;		/* host[:port] exactly as in the URL, as git's credential protocol sends it */
	char	*path;		/* without the leading '/', e.g. "owner/name.git" */
};
/* Parse url; returns 0, or -1 with *cause (caller frees) for anything unusual. */
int	 giturl_parse(const char *url, struct giturl *, char **cause);
void	 giturl_free(struct giturl *);
/* Whether two repository paths name the same repository, ignoring one trailing ".git". */
int	 giturl_path_eq(const char *, const char *);

/* gitenv.c: the environment contract with the bridge, and the one given to host git. */
struct gitlist {
	char		*raw;		/* the variable verbatim ("" when unset) */
	char	       **v;		/* its items */
	size_t		 n;
};
struct gitctx {
	char		*service;	/* "upload-pack" or "receive-pack" */
	char		*mirror;	/* absolute path of the bare mirror, "...name.git" */
	char		*upstream;	/* SHIMBRIDGE_UPSTREAM verbatim */
	struct giturl	 url;		/* ...parsed */
	char		*username;	/* NULL when no credential is given */
	char		*token;		/* wiped by gitenv_free(); NULL: host git gets none */
	struct gitlist	 no_push;	/* branches that take no direct push ("HEAD": default) */
	struct gitlist	 ff_only;	/* branches that take fast-forwards only */
	struct gitlist	 tags;		/* protected tag names or patterns */
	struct gitlist	 deny;		/* path prefixes */
	struct gitlist	 ask;		/* branch patterns whose updates wait for approval */
	char		*git;		/* absolute path of the git binary */
	char		*protocol;	/* "version=N" or NULL */
	char		*home;		/* private empty HOME, or NULL */
	char		*self;		/* absolute path of this program */
	int		 progress;	/* the sandbox's git asked for progress */
	int		 phases;	/* mark phases as "T" records on the refusal pipe */
	char		*upstream_refs;	/* SHIMBRIDGE_UPSTREAM_REFS (a FIFO), or NULL */
	int		 refusal_fd;	/* write end of the bridge's refusal pipe, or -1 */
	int		 adopts;	/* serve() reaps the hook's orphans (GS_ENV_ADOPTS) */
};
#define GITENV_SERVICE	0x01	/* SHIMBRIDGE_SERVICE, SHIMBRIDGE_GIT_PROTOCOL */
#define GITENV_MIRROR	0x02	/* SHIMBRIDGE_MIRROR */
#define GITENV_UPSTREAM	0x04	/* SHIMBRIDGE_UPSTREAM */
#define GITENV_CRED	0x08	/* SHIMBRIDGE_USERNAME, SHIMBRIDGE_TOKEN (both or neither) */
#define GITENV_POLICY	0x10	/* branch, tag, path and ask lists */
#define GITENV_GIT	0x20	/* SHIMBRIDGE_GIT (required), HOME, our own path */
#define GITENV_RELAY	0x40	/* SHIMBRIDGE_PROGRESS, SHIMBRIDGE_REFUSAL_FD */
/* Fill ctx from our environment; the flags name what must be present and valid. */
int	 gitenv_load(struct gitctx *, int flags, char **cause);
void	 gitenv_free(struct gitctx *);
/* Whether name is one of list's items. */
int	 gitenv_in_list(const struct gitlist *, const char *name);
/* Whether tag (without "refs/tags/") matches one of the protected tag patterns. */
int	 gitenv_tag_protected(const struct gitctx *, const char *tag);
/* Whether branch (without "refs/heads/") matches one of the ask patterns. */
int	 gitenv_branch_asks(const struct gitctx *, const char *branch);
/* Split a comma-separated list, dropping empty items and surrounding blanks. */
int	 gitenv_split(const char *, char ***items, size_t *n, char **cause);
/* Build a child's environment from nothing; free with gitenv_free_child(). */
char	**gitenv_child(const struct gitctx *, int runflags);
void	 gitenv_free_child(char **);

/* gitrun.c: running host git, always hardened, never through a shell. */
#define GITRUN_CRED	0x01	/* credential helper -c options + credential variables */
#define GITRUN_HOOK	0x02	/* everything the pre-receive hook needs */
#define GITRUN_QUARANTINE 0x04	/* pass receive-pack's quarantine variables through */
#define GITRUN_PROTOCOL	0x08	/* GIT_PROTOCOL from the client, if valid */
#define GITRUN_READONLY	0x10	/* GIT_OPTIONAL_LOCKS=0 */
#define GITRUN_REFUSAL	0x20	/* the refusal fd stays open as GITC_REFUSAL_FD */
#define GITRUN_NICE	0x40	/* at the lowest CPU priority (nice 19) */

#define GITRUN_NULL	(-1)	/* child fd is /dev/null */
#define GITRUN_PIPE	(-2)	/* child fd is a pipe; we keep the read end */

/* One running git child. */
struct gitproc {
	pid_t	pid;
	int	out;		/* our read end of its stdout, or -1 */
	int	err;		/* our read end of its stderr, or -1 */
};
/* Called for each stdout record (separator removed, NUL-terminated); -1 stops reading. */
typedef int (*gitrun_cb)(const char *rec, size_t len, void *arg);

/*
 * Start git with args (after the binary; NULL-terminated). in/out/err are fds to
 * give it (we keep ours), GITRUN_NULL, or for out/err GITRUN_PIPE (read end in gp).
 */
int	 gitrun_start(const struct gitctx *, int runflags, const char *const *args,
	     int in, int out, int err, struct gitproc *, char **cause);
/*
 * Read a child's pipes to EOF: stdout records (sep-terminated; sep < 0: raw chunks)
 * to cb, stderr into errbuf; either may be NULL. Returns 0, 1 if cb stopped us, or
 * -1 with *cause; the pipes are closed in every case, the child is not reaped.
 */
int	 gitrun_read(struct gitproc *, int sep, gitrun_cb, void *arg, struct gitbuf *errbuf,
	     char **cause);
/* The same with each chunk of stderr given to ecb (its return value is ignored). */
int	 gitrun_read_err(struct gitproc *, int sep, gitrun_cb, void *arg, gitrun_cb ecb,
	     void *earg, char **cause);
/* Reap pid; returns its exit status, 128+signal if killed, or -1 with *cause. */
int	 gitrun_wait(pid_t, char **cause);
/*
 * Wait for child pid at most ms milliseconds, then kill (SIGKILL) and reap it: 0 if
 * it exited 0 in time, else -1. For a child whose pipes, if any, we do not read.
 */
int	 gitrun_wait_ms(pid_t, int ms);
/* Kill (SIGKILL) and reap a child we give up on, closing our pipe ends. */
void	 gitrun_abort(struct gitproc *);
/*
 * Run git to completion with stdin /dev/null, capturing stdout (past out->max is an
 * error, not a truncation) and stderr (excess counted in err->dropped). Returns
 * git's status or -1 with *cause.
 */
int	 gitrun_cmd(const struct gitctx *, int runflags, const char *const *args,
	     struct gitbuf *out, struct gitbuf *err, char **cause);
/* The same with stderr given to ecb chunk by chunk as it comes. */
int	 gitrun_cmd_err(const struct gitctx *, int runflags, const char *const *args,
	     struct gitbuf *out, gitrun_cb ecb, void *earg, char **cause);
/*
 * Become the reaper of our descendants' orphans (Linux: PR_SET_CHILD_SUBREAPER), so a
 * child a hook leaves running stays ours to wait for; 0, or -1 where we cannot.
 */
int	 gitrun_adopt_orphans(void);
/* Quote s for /bin/sh with single quotes. */
char	*gitrun_shquote(const char *);
/* The absolute path of the running program, or NULL with *cause. */
char	*gitrun_self_path(char **cause);

/* gitmsg.c: messages for the sandboxed user (stderr), sanitized and redacted. */
void	 gitmsg_init(const char *secret);
/* Hand the lines said so far to the bridge, which audits a refused push. */
void	 gitmsg_record_refusal(const struct gitctx *);
/* Say lines to the bridge's pipe (fd), which shows them redacted; -1: to stderr. */
void	 gitmsg_divert(int fd);
/* Tell the bridge a phase of the call was reached ("T" record, GITC_PHASE_*). */
void	 gitmsg_phase(const struct gitctx *, const char *phase);
/* Tell the bridge the exit code the sandbox gets ("D" record); we go on after it. */
void	 gitmsg_answer(const struct gitctx *, int code);
/* Print "shimbridge: <message>" on one line. */
void	 gitmsg_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print each line of buf as "shimbridge: <prefix><line>" (as gitmsg_lines_say()). */
void	 gitmsg_relay(const char *prefix, const char *buf, size_t len);
/*
 * Lines said together, so that a secret split across them (and so across reads of
 * git's stderr, which is read whole first) is masked too: such lines are shown as
 * REDACT_MASK whole.
 */
struct gitmsg_lines {
	char	**prefix;
	char	**text;
	size_t	  n;
};
void	 gitmsg_lines_init(struct gitmsg_lines *);
void	 gitmsg_lines_add(struct gitmsg_lines *, const char *prefix, const char *text,
	     size_t len);
/* Say them all ("shimbridge: <prefix><text>") and empty the set. */
void	 gitmsg_lines_say(struct gitmsg_lines *);
/* Redact, then replace control bytes, in a copy of buf[0..len). */
char	*gitmsg_clean(const char *buf, size_t len);
/* The most useful line(s) of git's stderr, as one line of at most max bytes. */
char	*gitmsg_summary(const char *buf, size_t max);
/*
 * Relaying git's progress from a child's stderr as it comes: complete lines that are
 * git's own progress meters ("Receiving objects:  45% (9/20)") go to our stderr at once
 * (their "\r" kept, so they redraw), when on; everything else is kept in rest.
 */
struct gitmsg_progress {
	int		 on;
	struct gitbuf	 seg;		/* the line being read */
	struct gitbuf	*rest;		/* everything not relayed */
};
void	 gitmsg_progress_init(struct gitmsg_progress *, int on, struct gitbuf *rest);
/* A gitrun_cb for stderr chunks; always 0. */
int	 gitmsg_progress_feed(const char *buf, size_t len, void *arg);
/* Keep a trailing partial line in rest and release the state. */
void	 gitmsg_progress_done(struct gitmsg_progress *);
/* Whether one line (without terminator) is a git progress meter and nothing else. */
int	 gitmsg_is_progress(const char *line, size_t len);

/* gitcred.c: git's credential helper protocol. */
struct gitcred {
	char	*protocol;
	char	*host;
	char	*path;
	char	*username;
};
/* Parse a helper request (key=value lines); -1 with *cause on NULs, long lines, too many lines. */
int	 gitcred_parse(const char *buf, size_t len, struct gitcred *, char **cause);
void	 gitcred_free(struct gitcred *);
/* Whether the request names exactly this upstream (protocol, host:port, path +/- ".git"). */
int	 gitcred_match(const struct gitcred *, const struct giturl *, const char *username);
/* The "credential get|store|erase" mode; returns an exit code. */
int	 gitcred_helper(int argc, char **argv);
/* Zero memory in a way the compiler keeps. */
void	 gitcred_wipe(void *, size_t);

/* gitmirror.c: the runner-owned bare mirror. */
/* Check path is absolute, canonical, ends in ".git" and is not a symlink. */
int	 gitmirror_check_path(const char *path, char **cause);
/* Open and flock path.lock (LOCK_EX or LOCK_SH); returns the fd (close to unlock) or -1. */
int	 gitmirror_lock(const char *path, int how, char **cause);
/*
 * Create the mirror if missing, fetched and complete, atomically (*created = 1), and
 * repair its hook; needs LOCK_EX. -1 with a one-line *cause.
 */
int	 gitmirror_ensure(const struct gitctx *, int *created, char **cause);
/* Split buf (modified) into its non-empty lines, sorted, in *v (to free); how many. */
size_t	 gitmirror_split_lines(char *buf, char ***v);
/*
 * Upstream's heads and tags when the call began, as the bridge saw them
 * (SHIMBRIDGE_UPSTREAM_REFS): sorted "<oid> <ref>" lines into msg (initialised and
 * freed by the caller, as *lines). -1 when the bridge has no list to give.
 */
int	 gitmirror_upstream_refs(const struct gitctx *, struct gitbuf *msg, char ***lines,
	    size_t *n);
/* The mirror's own heads and tags, the same way (out and *lines to free); -1 if git fails. */
int	 gitmirror_own_refs(const struct gitctx *, struct gitbuf *out, char ***lines,
	    size_t *n);
/*
 * Whether upstream's heads and tags when the call began, as the bridge saw them
 * (SHIMBRIDGE_UPSTREAM_REFS), are exactly the mirror's, so that a fetch would
 * find nothing to do (needs the lock). 0 whenever it cannot tell.
 */
int	 gitmirror_fresh(const struct gitctx *);
/*
 * A push's warming fetch, which the pre-receive hook leaves running when serve()
 * adopts orphans (ctx->adopts): save says its pid (in the call's private HOME; 0,
 * or -1 when it cannot), take gives it back to serve() if it is a running child
 * of ours (else -1; the note is removed).
 */
int	 gitmirror_warm_save(const struct gitctx *, pid_t);
pid_t	 gitmirror_warm_take(const struct gitctx *);
/* How long a push's warming fetch may run on once the push is done (then it is stopped). */
#define GS_WARM_MS	5000
/* Set by serve() for the hook when it adopts orphans: the hook may leave the fetch. */
#define GS_ENV_ADOPTS	"SHIMBRIDGE_ADOPTS_ORPHANS"
/* Fetch upstream into the mirror with pruning (needs LOCK_EX); -1 and a one-line *cause. */
int	 gitmirror_fetch(const struct gitctx *, char **cause);
/*
 * Whether the mirror has passed git's own thresholds for an automatic gc (more
 * than gc.auto's 6,700 loose objects, estimated from objects/17 as git does, or
 * more than gc.autoPackLimit's 50 packs): two directories read, no git started.
 */
int	 gitmirror_needs_gc(const char *mirror);
/*
 * git gc --auto on the mirror, in the foreground (needs LOCK_EX); its messages
 * are kept from the agent. -1 with a one-line *cause if it failed.
 */
int	 gitmirror_gc(const struct gitctx *, char **cause);
/* The "maintain MIRROR" mode; returns an exit code. */
int	 gitmirror_maintain(int argc, char **argv);

/* gitpush.c: the push upstream as one smart-HTTP request of our own (no git push). */
#define GITPUSH_FALLBACK	1		/* not tried: nothing went upstream */
#define GITPUSH_PACK_MAX	(1024 * 1024)	/* larger packs go by git push (git's
						   http.postBuffer: one request either way) */
#define GITPUSH_RESULT_MAX	(1024 * 1024)	/* receive-pack's answer */
#define GITPUSH_ADV_MAX		2048		/* objects named by the advertisement */
#define GITPUSH_TIMEOUT		600		/* seconds without progress on the socket */
/* receive-pack's ref advertisement, as smart HTTP gives it. */
struct gitpush_adv {
	char	caps[1024];		/* the first line's capabilities */
	size_t	hexlen;			/* 40 (SHA-1) or 64 */
	char	oids[GITPUSH_ADV_MAX][65];
	size_t	n;
};
/* receive-pack's report, and what it said besides. */
struct gitpush_result {
	int		unpack_seen, unpack_ok, ended;
	size_t		ok, ng;
	struct gitbuf	unpack;		/* "ok" or why the pack was not taken */
	struct gitbuf	oks;		/* "<ref>\n" per accepted update */
	struct gitbuf	ngs;		/* "<ref> <reason>\n" per refused one */
	struct gitbuf	remote;		/* band 2: upstream's messages and meters */
	struct gitbuf	fatal;		/* band 3: why upstream gave up */
};
struct gitpush_update {
	const char	*old, *new, *ref;	/* hex (all zeros: none), full ref name */
};
/* Parse the answer to GET info/refs?service=git-receive-pack; -1 with *cause. */
int	 gitpush_parse_adv(const char *buf, size_t len, struct gitpush_adv *, char **cause);
/* Parse the answer to the POST (side-band-64k multiplexed or not); 0, or -1 if malformed. */
int	 gitpush_parse_result(const char *buf, size_t len, int sideband, struct gitpush_result *);
void	 gitpush_result_init(struct gitpush_result *);
void	 gitpush_result_free(struct gitpush_result *);
/*
 * Push the updates upstream in one request: 0 when upstream took them all, -1 when
 * it did not or the request failed (res, err and *cause say why), GITPUSH_FALLBACK
 * when nothing was sent and git push should do it. have: the mirror's "<oid> <ref>"
 * lines. Progress of the pack goes to stderr as git's would; the rest of
 * pack-objects' stderr to err.
 */
int	 gitpush_http(const struct gitctx *, const char *gitdir, const struct gitpush_update *,
	     size_t n, char **have, size_t nhave, struct gitpush_result *, struct gitbuf *err,
	     char **cause);
#define GITPUSH_WARM_MAX	(16 * 1024 * 1024)	/* a warming fetch's pack */
/*
 * Start the warming fetch of want (upstream's "<oid> <ref>" lines to take) as a child
 * of ours that asks upstream itself: 0 with *pid, or GITPUSH_FALLBACK (git fetch).
 * The child exits 0 once the mirror holds the objects and the refs moved.
 */
int	 gitpush_warm(const struct gitctx *, const char *gitdir, char **want, size_t nwant,
	     char **have, size_t nhave, pid_t *pid);
/* Split upload-pack's answer: band 1 into pack; 0, or -1 (malformed, too large, fatal). */
int	 gitpush_parse_fetch(const char *buf, size_t len, struct gitbuf *pack);

/* githook.c: the mirror's pre-receive hook. */
struct githook_update {
	char	*old;		/* hex object names; all zeros = none */
	char	*new;
	char	*ref;
};
/* Parse one "old new ref" line (no newline); -1 with *cause if malformed. */
int	 githook_parse_line(const char *line, size_t len, struct githook_update *, char **cause);
void	 githook_free_update(struct githook_update *);
/* The "hook pre-receive" mode; returns an exit code. */
int	 githook_pre_receive(int argc, char **argv);

#endif
