/*
 * The contract between the bridge (bridge/profile-git.c, the daemon's git op) and
 * shimbridge-git (gitserve/): the environment the bridge builds for it, the fd it
 * may hand over, and the exit codes it returns. docs/PROTOCOL.md ("The git helper
 * contract") is the prose half of this header; change both together, and bump
 * GITC_VERSION when a side could misread the other.
 *
 * The bridge starts shimbridge-git as the runner with an environment built from
 * nothing: exactly the variables below (those marked "optional" only when they
 * apply) plus HOME (a private, per-call empty directory), PATH and LANG.
 */
#ifndef SHIMBRIDGE_GITCONTRACT_H
#define SHIMBRIDGE_GITCONTRACT_H

/*
 * The contract's version. 2: the refusal channel is a socket both ways, for
 * approval ("A" and "W" records, "Y"/"N" answers). The bridge names it in
 * GITC_ENV_VERSION; shimbridge-git refuses to run under another one.
 */
#define GITC_VERSION		2
#define GITC_ENV_VERSION	"SHIMBRIDGE_CONTRACT"

/* "upload-pack" or "receive-pack" (a "git-" prefix is accepted). */
#define GITC_ENV_SERVICE	"SHIMBRIDGE_SERVICE"
/* Absolute, canonical path of the session's bare mirror, ".../NAME.git". */
#define GITC_ENV_MIRROR		"SHIMBRIDGE_MIRROR"
/* http(s)://host[:port]/owner/name[.git]: where the mirror fetches from and pushes to. */
#define GITC_ENV_UPSTREAM	"SHIMBRIDGE_UPSTREAM"
/* Optional: user name and token for upstream (git's credential protocol answers with
 * them for the exact upstream only). Absent when the upstream URL is the daemon's
 * loopback injector, which adds the credential itself: then host git holds none. */
#define GITC_ENV_USERNAME	"SHIMBRIDGE_USERNAME"
#define GITC_ENV_TOKEN		"SHIMBRIDGE_TOKEN"
/* Comma-separated branch names (without refs/heads/) that take no direct push at all.
 * "HEAD" stands for upstream's default branch. */
#define GITC_ENV_NO_PUSH	"SHIMBRIDGE_NO_PUSH"
/* Comma-separated branch names that take fast-forwards only: no force, no delete. */
#define GITC_ENV_FF_ONLY	"SHIMBRIDGE_FF_ONLY"
/* Comma-separated tag names or fnmatch(3) patterns ("*" = every tag) that may be
 * created but never moved or deleted once they exist. */
#define GITC_ENV_TAGS		"SHIMBRIDGE_PROTECTED_TAGS"
/* Optional: comma-separated branch names or fnmatch(3) patterns (without refs/heads/):
 * an update of a matching branch that the policy allows waits for the operator's
 * approval, asked for on the refusal channel ("A"/"W" records). */
#define GITC_ENV_ASK		"SHIMBRIDGE_ASK_BRANCHES"
/* Comma-separated path prefixes a push may not change. */
#define GITC_ENV_DENY_PATHS	"SHIMBRIDGE_DENY_PATHS"
/* Absolute path of host git. */
#define GITC_ENV_GIT		"SHIMBRIDGE_GIT"
/* Optional: the client's GIT_PROTOCOL, "version=0", "version=1" or "version=2". */
#define GITC_ENV_PROTOCOL	"SHIMBRIDGE_GIT_PROTOCOL"
/* Optional: "1" when the sandbox's git asked for progress (option progress true). */
#define GITC_ENV_PROGRESS	"SHIMBRIDGE_PROGRESS"
/*
 * Optional: the absolute path of a FIFO on which the bridge says what upstream's
 * heads and tags were when the call began (the ref list it prefetched): "refs\n",
 * then "<oid> <ref>\n" for each, then "end\n"; or "none\n" when it cannot say.
 * When they are exactly the mirror's, shimbridge-git skips its pre-fetch (git
 * fetch would find nothing to do). A push does not fetch first: its pre-receive
 * hook checks each update against this list, then fetches what else moved.
 */
#define GITC_ENV_UPSTREAM_REFS	"SHIMBRIDGE_UPSTREAM_REFS"
#define GITC_REFS_MAX		(60 * 1024)	/* the whole message fits in a pipe */
/* Optional: "1" to mark the call's phases as "T" records on the refusal pipe. */
#define GITC_ENV_PHASES		"SHIMBRIDGE_PHASES"
/* Optional: the decimal number of the refusal fd (GITC_REFUSAL_FD) when one is given. */
#define GITC_ENV_REFUSAL_FD	"SHIMBRIDGE_REFUSAL_FD"

/*
 * The refusal channel. receive-pack exits 0 when its pre-receive hook refuses a push,
 * so the exit status cannot tell the bridge that the policy refused one. The bridge
 * makes a connected pair of Unix stream sockets, gives one end to shimbridge-git as
 * this fd (and names it in GITC_ENV_REFUSAL_FD), and reads the other end while the
 * child runs and once it is gone. shimbridge-git and its hook write records there,
 * one a line, UTF-8:
 *   "R <text>"  what it told the agent when the policy refused the push, for the
 *               audit log (at most GITC_REFUSAL_MAX bytes of such records);
 *   "M <text>"  a message for the agent that holds upstream's words, written
 *               instead of to stderr when shimbridge-git holds no credential (its
 *               hook's stderr travels inside the pack protocol, which cannot be
 *               redacted): the bridge redacts it and shows it on the sandbox's
 *               stderr (at most GITC_PIPE_MAX bytes in all);
 *   "T <phase> <ns>"  the CLOCK_MONOTONIC time (nanoseconds, decimal) at which a
 *               phase of the call was reached, for the audit log's "git-phases"
 *               record: one of the GITC_PHASE_* names, each at most once; only
 *               when GITC_ENV_PHASES is "1";
 *   "A <kind> <old> <new> <ref>"  a ref update the policy allows that waits for
 *               approval (its branch matches GITC_ENV_ASK): kind is one of the
 *               GITC_ASK_* words, old and new hex object names of the same length
 *               (40 or 64; all zeros = none), ref "refs/heads/NAME"; at most
 *               GITC_ASK_REFS_MAX of them, each at most GITC_ASK_LINE_MAX bytes;
 *   "W"         the question is complete: the hook waits for the answer. At most
 *               one question per call;
 *   "D <code>"  the sandbox's answer is known: shimbridge-git will exit with code
 *               (0-255) and has closed its stdout and stderr, but has work left
 *               that the sandbox need not wait for (the mirror's warming fetch
 *               after a push). Once both streams have ended the bridge sends the
 *               sandbox EXIT with code and keeps the call (its jail, injector,
 *               limits) until the child is gone; at most one per call. A bridge
 *               that ignores it only answers later.
 * The bridge answers a question with one line on the same socket: "Y" (approved:
 * push it) or "N <reason>" (not approved; the bridge has told the agent why;
 * reason at most GITC_ANSWER_MAX bytes, for the hook's own message). EOF instead
 * of an answer is a refusal.
 * Only the processes of this one call hold the child's end, so no other process of
 * the runner can forge a record or read an answer.
 */
#define GITC_REFUSAL_FD		3
#define GITC_REFUSAL_MAX	2048
#define GITC_PIPE_MAX		(32 * 1024)
#define GITC_ASK_REFS_MAX	32
#define GITC_ASK_LINE_MAX	1200
#define GITC_ANSWER_MAX		512
/* The kinds of an "A" record (git's own push syntax shows them as BRANCH, +BRANCH, :BRANCH). */
#define GITC_ASK_UPDATE		"update"	/* fast-forward */
#define GITC_ASK_CREATE		"create"	/* a new branch */
#define GITC_ASK_FORCE		"force"		/* not a fast-forward */
#define GITC_ASK_DELETE		"delete"

/* The phases of a call shimbridge-git marks with "T" records, in order. */
#define GITC_PHASE_START	"start"		/* shimbridge-git runs (the jail is up) */
#define GITC_PHASE_GC		"gc"		/* the mirror was due a gc, and had it */
#define GITC_PHASE_MIRROR	"mirror"	/* mirror locked, created or refreshed */
#define GITC_PHASE_HOOK		"hook"		/* push: the pack is in the quarantine */
#define GITC_PHASE_POLICY	"policy"	/* push: every policy check passed */
#define GITC_PHASE_APPROVED	"approved"	/* push: the operator approved it (ask) */
#define GITC_PHASE_UPSTREAM	"upstream"	/* push: upstream took the push */
#define GITC_PHASE_END		"end"		/* upload-pack/receive-pack exited */
#define GITC_PHASE_WARM		"warm"		/* push: the mirror's warming fetch, after "D" */

/* Exit codes of shimbridge-git (git's own conventions where they exist); any other
 * status is that of git upload-pack/receive-pack. */
#define GITC_EXIT_OK		0	/* done */
#define GITC_EXIT_REFUSED	1	/* push refused by policy or by upstream */
#define GITC_EXIT_USAGE		2	/* bad argv */
#define GITC_EXIT_FATAL		128	/* upstream unreachable, bad environment, internal */

#endif
