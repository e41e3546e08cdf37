/* shimbridged: the host daemon. Parses options, loads the config, runs the loop. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "config.h"
#include "inject.h"
#include "hygiene.h"
#include "profile.h"
#include "log.h"
#include "proto.h"
#include "keyring.h"
#include "server.h"
#include "spawn.h"
#include "util.h"

#define DEFAULT_CONFIG	"/etc/shimbridge/config.json"

/* Exit codes, documented in --help and the README. */
#define EX_OK		0
#define EX_CONFIG	1	/* invalid configuration */
#define EX_RUNTIME	2	/* could not start or run (socket, audit log, ...) */
#define EX_USAGE	64
#define EX_NOTROOT	77	/* started by a user other than root (sysexits EX_NOPERM) */

/*
 * How many descriptors from 3 up systemd passed us (LISTEN_FDS for our pid); they
 * must survive the start-up close. launchd's sockets are fetched later through
 * its API, so on macOS nothing beyond stdio is closed here.
 */
static int
main_listen_fds(void)
{
#if defined(__APPLE__)
	return 1 << 20;
#else
	const char *spid = getenv("LISTEN_PID"), *sfds = getenv("LISTEN_FDS");
	long n;

	if (spid == NULL || sfds == NULL || strtol(spid, NULL, 10) != (long)getpid())
		return 0;
	n = strtol(sfds, NULL, 10);
	return n >= 1 && n <= 16 ? (int)n : 0;
#endif
}

/* Print usage. */
static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: shimbridged [-d] [-c CONFIG] [--check]\n"
	    "       shimbridged --help | --version\n"
	    "\n"
	    "The shimbridge host daemon: runs allowlisted tools for sandbox session users,\n"
	    "jailed, as each session's runner user. gh and git never hold their token:\n"
	    "the daemon adds it to their HTTP requests. All output is redacted.\n"
	    "\n"
	    "  -c, --config PATH  main config file (default " DEFAULT_CONFIG ");\n"
	    "                     sessions are also read from sessions.d/ next to it\n"
	    "  --check            validate the config (and load its secrets), print every\n"
	    "                     problem with its file and location, then exit\n"
	    "  --check-no-secrets validate without loading secret values\n"
	    "  -d, --debug        verbose diagnostics on stderr\n"
	    "  --no-jail          run tools without the per-call jail (measurements only)\n"
	    "\n"
	    "Signals: SIGHUP reloads the config atomically (a bad config is rejected and\n"
	    "the running one keeps serving); SIGUSR1 reopens the audit log (rotation);\n"
	    "SIGTERM/SIGINT stop.\n"
	    "\n"
	    "Runs as root (--check may run as any user that can read the config): it\n"
	    "switches to the runner user for every tool and binds its socket in a\n"
	    "root-owned directory.\n"
	    "\n"
	    "Exit codes: 0 ok; 1 invalid configuration; 2 runtime failure (socket,\n"
	    "audit log, state directory); 64 usage; 77 not started as root.\n");
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, 'C' },
		{ "check-no-secrets", no_argument, NULL, 'N' },
		{ "debug", no_argument, NULL, 'd' },
		{ "no-jail", no_argument, NULL, 'J' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = DEFAULT_CONFIG;
	struct config *cfg;
	char *cause = NULL;
	struct keyring *kr;
	char **warn = NULL;
	int ch, check = 0, no_secrets = 0, debug = 0, rc;
	size_t i, nwarn = 0;

	util_progname = "shimbridged";
	/*
	 * Start-up hygiene, as shimbridge-git and the admin CLI: fds 0-2 open, and
	 * nothing inherited beyond them but the sockets the service manager hands us.
	 */
	if (hygiene_stdio() != 0)
		return EX_RUNTIME;
	hygiene_closefrom(3 + main_listen_fds());
	while ((ch = getopt_long(argc, argv, "c:dhV", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'C':
			check = 1;
			break;
		case 'N':
			check = 1;
			no_secrets = 1;
			break;
		case 'd':
			debug = 1;
			break;
		case 'J':
			server_no_jail();
			break;
		case 'h':
			usage(stdout);
			return EX_OK;
		case 'V':
			printf("shimbridged %s (protocol %d)\n", SHIMBRIDGE_VERSION, PROTO_VERSION);
			return EX_OK;
		default:
			usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return EX_USAGE;
	}
	log_init(debug);
	/*
	 * Before the config: loading it as a user fails on root-only files (store key,
	 * secrets) with a message that hides the real problem.
	 */
	if (!check && geteuid() != 0) {
		fprintf(stderr, "shimbridged: must run as root: it switches to the runner "
		    "user for every tool and binds its socket in a root-owned directory "
		    "(to validate a config as this user: shimbridged --check-no-secrets -c %s)\n",
		    path);
		return EX_NOTROOT;
	}
	if (sodium_init() < 0)
		die(EX_RUNTIME, "libsodium failed to initialise");
	/* Before any libevent allocation: libevent wipes what it frees (inject.h). */
	inject_memory_init();
	/* The daemon fills its own keyring below; --check loads secrets as a trial. */
	if ((cfg = config_load(path, check ? no_secrets : 1, &cause)) == NULL) {
		fprintf(stderr, "shimbridged: %s\n", cause);
		free(cause);
		return EX_CONFIG;
	}
	for (i = 0; i < cfg->nwarnings; i++)
		fprintf(stderr, "shimbridged: warning: %s\n", cfg->warnings[i]);
	if (check) {
		for (i = 0; i < cfg->ntools; i++) {
			char *w;

			if (cfg->tools[i].profile->version_warning == NULL)
				continue;
			if ((w = cfg->tools[i].profile->version_warning(cfg->tools[i].path)) != NULL) {
				fprintf(stderr, "shimbridged: warning: %s\n", w);
				free(w);
			}
		}
		printf("%s: ok (version %s, %zu tools, %zu sessions, %zu secrets)\n", path,
		    cfg->version, cfg->ntools, cfg->nsessions, cfg->nsecrets);
		config_unref(cfg);
		return EX_OK;
	}
	kr = keyring_new();
	keyring_load(kr, cfg, &warn, &nwarn);
	for (i = 0; i < nwarn; i++) {
		fprintf(stderr, "shimbridged: warning: %s\n", warn[i]);
		free(warn[i]);
	}
	free(warn);
	rc = EX_OK;
	if (server_run(cfg, kr, path, &cause) != 0) {
		fprintf(stderr, "shimbridged: %s\n", cause);
		free(cause);
		rc = EX_RUNTIME;
	}
	keyring_free(kr);
	return rc;
}
