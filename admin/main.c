/* shimbridge: the administrator's command line. Parses global options, dispatches. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin.h"
#include "proto.h"
#include "util.h"

/* Print usage. */
static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: shimbridge [-c CONFIG] COMMAND [ARGS]\n"
	    "       shimbridge --help | --version\n"
	    "\n"
	    "Administer shimbridge: secrets, sandbox sessions and the daemon shimbridged.\n"
	    "Run as root.\n"
	    "\n"
	    "Commands:\n"
	    "  status [--json]            whether shimbridged runs; version, config version,\n"
	    "                             sessions, requests in flight, counters\n"
	    "  check [--no-secrets] [--offline]\n"
	    "                             validate the config as the daemon would, then users,\n"
	    "                             socket, directories, tools (--version), store, shims;\n"
	    "                             then one authenticated request per secret and host\n"
	    "                             (skipped with --offline or --no-secrets)\n"
	    "  reload                     SIGHUP the daemon and report whether it took the new\n"
	    "                             config (a rejected one is named with its audit line)\n"
	    "  audit [--session S] [--follow] [--file PATH] [--json]\n"
	    "                             the audit log, one readable line per record (root or\n"
	    "                             a member of the group " ADM_AUDIT_GROUP ")\n"
	    "  audit verify [--pubkey HEX|FILE] [FILE...]\n"
	    "                             check the audit log's hash chain and checkpoint\n"
	    "                             signatures (default: the log and its rotated files,\n"
	    "                             oldest first); prints OK or the first broken link\n"
	    "                             as FILE:LINE: KIND: why; exit 0 intact, 2 broken\n"
	    "  audit pubkey [KEYFILE]     the public key of the checkpoint signing key\n"
	    "  audit keygen [KEYFILE]     create the signing key (audit.sign_key) if missing\n"
	    "  secret init                create the store key file if it is missing\n"
	    "  secret set NAME            store a secret; the value is read from standard input\n"
	    "                             (one trailing newline dropped; never from argv)\n"
	    "  secret list [--json]       secret names, one a line (never values)\n"
	    "  secret rm NAME             delete a secret\n"
	    "  session add NAME [--user USER] [--workspace DIR] [--tools gh,git]\n"
	    "              [--repo OWNER/NAME]...\n"
	    "                             create a locked system user (default sb-NAME), its\n"
	    "                             home and workspace (0700), PATH and git config for\n"
	    "                             every configured git host, and sessions.d/NAME.json;\n"
	    "                             then reload the daemon\n"
	    "  session list [--json]      sessions with user, uid, tools, repos, running\n"
	    "  session remove NAME [--keep-workspace] [--keep-mirrors]\n"
	    "                             kill the user's processes, delete the user (only if\n"
	    "                             session add created it), its home, the drop-in and\n"
	    "                             the session's git mirrors\n"
	    "  session exec NAME [--] [CMD...]\n"
	    "                             run CMD (default: a login shell) as the session user\n"
	    "                             in its workspace with a clean environment; exits with\n"
	    "                             CMD's status. On a terminal it gets its own pty.\n"
	    "  mirror list [--session S] [--json]\n"
	    "                             git mirrors with size and last change\n"
	    "  mirror prune [--session S] [--older-than DAYS]\n"
	    "                             delete mirrors (they are caches)\n"
	    "  pending [--json]           requests waiting for approval (\"ask\" rules): id,\n"
	    "                             session, age, command, rule\n"
	    "  approve ID [--for DURATION]\n"
	    "                             let request ID run; --for 10m also approves identical\n"
	    "                             calls of that session for that long (s, m, h, d)\n"
	    "  deny ID [--why TEXT]       refuse request ID; the agent sees TEXT\n"
	    "  explain --session S [--cwd DIR] [--remote-url URL] [--branch B] [--json]\n"
	    "          -- TOOL [ARG...]   what the policy would do with that call: verdict,\n"
	    "                             rule, environment names, secrets by name, jail.\n"
	    "                             Nothing runs. TOOL git: git push|fetch URL [BRANCH]\n"
	    "\n"
	    "Options (before or after the command):\n"
	    "  -c, --config PATH  main config file (default " ADM_CONFIG ")\n"
	    "  --store PATH       secret store (default: the config's store.path, else\n"
	    "                     " ADM_STORE ")\n"
	    "  --key PATH         store key file (default: store.key, else " ADM_KEY ")\n"
	    "  --shim-dir DIR     shim directory put first in session PATHs\n"
	    "                     (default PREFIX/libexec/shimbridge/shims)\n"
	    "  --no-reload        secret set/rm, session add/remove: do not reload the daemon\n"
	    "\n"
	    "--json output is one JSON document (audit: one JSON object a line); the\n"
	    "schemas are in docs/CLI.md. status, session list, audit and mirror list also\n"
	    "work on a broken config: they name the file, line and column and show what\n"
	    "they can.\n"
	    "\n"
	    "Exit codes: 0 ok; 1 failure (system error, daemon not running, reload\n"
	    "rejected, permission denied); 2 not found or invalid (unknown session or\n"
	    "secret, invalid config, check found problems, no such pending request);\n"
	    "64 usage. session exec exits with the command's status.\n");
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct admin a;
	const char *cmd;
	int ch, rc;

	util_progname = "shimbridge";
	memset(&a, 0, sizeof a);
	a.config = ADM_CONFIG;
	a.store = NULL;		/* resolved by adm_store_paths */
	a.key = NULL;
	a.shim_dir = NULL;
	/* '+': stop at the command word; each command parses what follows it. */
	while ((ch = getopt_long(argc, argv, "+c:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 'h':
			usage(stdout);
			return ADM_OK;
		case 'V':
			printf("shimbridge %s (protocol %d)\n", SHIMBRIDGE_VERSION, PROTO_VERSION);
			return ADM_OK;
		default:
			if (!adm_global_opt(&a, ch, optarg)) {
				usage(stderr);
				return ADM_USAGE;
			}
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		usage(stderr);
		return ADM_USAGE;
	}
	if (a.shim_dir == NULL)
		a.shim_dir = adm_default_shim_dir();
	cmd = argv[0];
	if (strcmp(cmd, "help") == 0) {
		usage(stdout);
		return ADM_OK;
	}
	if (geteuid() != 0 && strcmp(cmd, "audit") != 0) {
		fprintf(stderr, "shimbridge: %s must run as root\n", cmd);
		return ADM_FAIL;
	}
	if (strcmp(cmd, "status") == 0)
		rc = ctl_cmd_status(&a, argc, argv);
	else if (strcmp(cmd, "reload") == 0)
		rc = ctl_cmd_reload(&a, argc, argv);
	else if (strcmp(cmd, "check") == 0)
		rc = check_cmd(&a, argc, argv);
	else if (strcmp(cmd, "audit") == 0)
		rc = auditview_cmd(&a, argc, argv);
	else if (strcmp(cmd, "secret") == 0 || strcmp(cmd, "secrets") == 0)
		rc = secrets_cmd(&a, argc, argv);
	else if (strcmp(cmd, "session") == 0 || strcmp(cmd, "sessions") == 0)
		rc = sessions_cmd(&a, argc, argv);
	else if (strcmp(cmd, "mirror") == 0 || strcmp(cmd, "mirrors") == 0)
		rc = mirrors_cmd(&a, argc, argv);
	else if (strcmp(cmd, "pending") == 0 || strcmp(cmd, "approve") == 0 ||
	    strcmp(cmd, "deny") == 0 || strcmp(cmd, "explain") == 0)
		rc = approval_cmd(&a, argc, argv);
	else
		rc = -1;
	adm_free(&a);
	if (rc >= 0)
		return rc;
	fprintf(stderr, "shimbridge: unknown command %s (see shimbridge --help)\n", cmd);
	return ADM_USAGE;
}
