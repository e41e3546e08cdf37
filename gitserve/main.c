/*
 * shimbridge-git: serve one git network operation of a sandbox from a runner-owned
 * mirror of its upstream repository. See gitserve.h for the pieces.
 */
#include <sys/file.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "gitserve.h"
#include "hygiene.h"

/* Print the usage text to f. */
static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: shimbridge-git [serve]              serve SHIMBRIDGE_SERVICE on stdin/stdout\n"
	    "       shimbridge-git hook pre-receive     the mirror's pre-receive hook\n"
	    "       shimbridge-git credential get|store|erase\n"
	    "       shimbridge-git maintain MIRROR      gc a mirror under its lock\n"
	    "       shimbridge-git --help | --version\n"
	    "\n"
	    "Run by shimbridged as the runner user with only these variables\n"
	    "(the contract: common/gitcontract.h, docs/PROTOCOL.md):\n"
	    "  SHIMBRIDGE_SERVICE      upload-pack or receive-pack (git- prefix allowed)\n"
	    "  SHIMBRIDGE_MIRROR       absolute path of the session's bare mirror (NAME.git)\n"
	    "  SHIMBRIDGE_UPSTREAM     http(s)://host[:port]/owner/name[.git]\n"
	    "  SHIMBRIDGE_USERNAME     optional: upstream user name (e.g. x-access-token)\n"
	    "  SHIMBRIDGE_TOKEN        optional: upstream token (never written anywhere);\n"
	    "                          without it host git gets no credential at all\n"
	    "  SHIMBRIDGE_NO_PUSH      branches that take no direct push (HEAD = default branch)\n"
	    "  SHIMBRIDGE_FF_ONLY      branches that take fast-forwards only\n"
	    "  SHIMBRIDGE_PROTECTED_TAGS tags (or patterns) never moved or deleted\n"
	    "  SHIMBRIDGE_DENY_PATHS   path prefixes a push may not change\n"
	    "  SHIMBRIDGE_ASK_BRANCHES optional: branches (or patterns) whose updates wait\n"
	    "                          for the operator's approval (asked on fd 3)\n"
	    "  SHIMBRIDGE_CONTRACT     optional: the bridge's contract version (must be 2)\n"
	    "  SHIMBRIDGE_GIT          absolute path of git\n"
	    "  SHIMBRIDGE_GIT_PROTOCOL optional: version=0, version=1 or version=2\n"
	    "  SHIMBRIDGE_PROGRESS     optional: 1 to relay upstream progress\n"
	    "  SHIMBRIDGE_REFUSAL_FD   optional: 3, a socket (or pipe) for the bridge's records\n"
	    "  SHIMBRIDGE_PHASES       optional: 1 to write phase times (T records) there\n"
	    "  SHIMBRIDGE_UPSTREAM_REFS optional: a FIFO with upstream's heads and tags\n"
	    "  HOME                    a private empty directory\n"
	    "\n"
	    "Exit status: 0 done, 1 push refused, 2 usage, 128 upstream or setup failure;\n"
	    "otherwise that of git upload-pack/receive-pack.\n");
}

/*
 * Make sure fds 0-2 are open, so that no pipe or file we open later lands on one
 * of them and is handed to a child as its stdio by accident.
 */
static void
sanitise_stdfd(void)
{
	if (hygiene_stdio() != 0)
		_exit(GS_EXIT_FATAL);
}

/* Serve upload-pack or receive-pack from the refreshed mirror. */
static int
serve(void)
{
	struct gitctx	 ctx;
	struct gitproc	 gp;
	char		*cause = NULL;
	const char	*args[4];
	int		 fd = -1, rc = GS_EXIT_FATAL, status, runflags, created;
	pid_t		 warm;

	if (gitenv_load(&ctx, GITENV_SERVICE | GITENV_MIRROR | GITENV_UPSTREAM | GITENV_CRED |
	    GITENV_POLICY | GITENV_GIT | GITENV_RELAY, &cause) != 0)
		goto out;
	gitmsg_phase(&ctx, GITC_PHASE_START);
	if (chdir("/") != 0) {
		xasprintf(&cause, "chdir /: %s", strerror(errno));
		goto out;
	}

	/* Exclusive while we create the mirror, fetch into it, or receive a push. */
	if ((fd = gitmirror_lock(ctx.mirror, LOCK_EX, &cause)) == -1)
		goto out;
	if (gitmirror_ensure(&ctx, &created, &cause) != 0)
		goto out;
	/*
	 * A fetch refreshes the mirror first, unless upstream's heads and tags are the
	 * mirror's (the bridge's list). A push does not: upstream takes each update
	 * only from the value the sandbox saw (githook_push leases it), and the hook
	 * compares that value with upstream's before anything is sent
	 * (githook_check_upstream). So a push costs no fetch of what others pushed.
	 */
	if (!created && strcmp(ctx.service, "upload-pack") == 0 && !gitmirror_fresh(&ctx) &&
	    gitmirror_fetch(&ctx, &cause) != 0)
		goto out;
	/*
	 * Every push leaves loose objects in the mirror and larger fetches leave packs;
	 * when git's own thresholds are passed, gc now, under the exclusive lock. A
	 * failed gc does not fail the call: the next call tries again.
	 */
	if (gitmirror_needs_gc(ctx.mirror)) {
		char *gcwhy = NULL;

		if (gitmirror_gc(&ctx, &gcwhy) == 0)
			gitmsg_phase(&ctx, GITC_PHASE_GC);
		free(gcwhy);
	}
	gitmsg_phase(&ctx, GITC_PHASE_MIRROR);

	if (strcmp(ctx.service, "upload-pack") == 0) {
		/* Readers share; a writer waiting in between just goes first. */
		if (flock(fd, LOCK_SH) != 0) {
			xasprintf(&cause, "lock: %s", strerror(errno));
			goto out;
		}
		args[0] = "upload-pack";
		args[1] = "--strict";
		args[2] = ctx.mirror;
		args[3] = NULL;
		runflags = GITRUN_PROTOCOL;
	} else {
		args[0] = "receive-pack";
		args[1] = ctx.mirror;
		args[2] = NULL;
		runflags = GITRUN_PROTOCOL | GITRUN_HOOK | GITRUN_REFUSAL;
		/* The hook may then leave its warming fetch to us (see below). */
		ctx.adopts = ctx.home != NULL && gitrun_adopt_orphans() == 0;
	}
	if (gitrun_start(&ctx, runflags, args, STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO, &gp,
	    &cause) != 0)
		goto out;
	if ((status = gitrun_wait(gp.pid, &cause)) == -1)
		goto out;
	gitmsg_phase(&ctx, GITC_PHASE_END);
	rc = status;
	/*
	 * A push whose hook left its warming fetch running (githook.c): the sandbox has
	 * its answer now; then, still under the lock, we wait for the fetch.
	 */
	if (status == GS_EXIT_OK && ctx.adopts && (warm = gitmirror_warm_take(&ctx)) > 0) {
		gitmsg_answer(&ctx, rc);
		if (hygiene_stdio_null() != 0)
			_exit(rc);
		if (gitrun_wait_ms(warm, GS_WARM_MS) == 0)
			gitmsg_phase(&ctx, GITC_PHASE_WARM);
	}

out:
	if (cause != NULL) {
		gitmsg_say("%s", cause);
		free(cause);
	}
	if (fd != -1)
		close(fd);
	gitenv_free(&ctx);
	return rc;
}

/* Dispatch on the mode in argv[1]. */
int
main(int argc, char **argv)
{
	util_progname = "shimbridge";
	sanitise_stdfd();
	umask(077);
	/* We must outlive a vanished client to reap our children; they get SIG_DFL back. */
	signal(SIGPIPE, SIG_IGN);

	if (argc < 2 || (strcmp(argv[1], "serve") == 0 && argc == 2))
		return serve();
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return GS_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("shimbridge-git %s\n", SHIMBRIDGE_VERSION);
		return GS_EXIT_OK;
	}
	if (strcmp(argv[1], "hook") == 0)
		return githook_pre_receive(argc, argv);
	if (strcmp(argv[1], "credential") == 0)
		return gitcred_helper(argc, argv);
	if (strcmp(argv[1], "maintain") == 0)
		return gitmirror_maintain(argc, argv);
	usage(stderr);
	return GS_EXIT_USAGE;
}
