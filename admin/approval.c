/*
 * shimbridge pending | approve ID [--for DURATION] | deny ID [--why TEXT] |
 * explain --session S [--cwd DIR] [--json] -- TOOL [ARG...]: the operator's side of
 * approval (bridge/pending.h) and the policy explained, over the daemon's socket.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "admin.h"
#include "util.h"

#define APPROVAL_TIMEOUT	10	/* seconds of silence from the daemon */

/* The daemon's socket from the config (lenient: a broken config still names it). */
static char *
approval_socket(const struct admin *a)
{
	struct adm_paths p;
	char *cause = NULL, *s;

	if (adm_paths_load(a->config, &p, &cause) != 0) {
		adm_paths_warn(cause);
		free(cause);
	}
	s = xstrdup(p.socket);
	adm_paths_free(&p);
	return s;
}

/* Send req (consumed) and parse the JSON line the daemon prints; NULL on failure. */
static json_t *
approval_call(const struct admin *a, json_t *req, int *code)
{
	char *sock = approval_socket(a), *r, *text = NULL, *cause = NULL;
	json_t *out = NULL;

	r = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (ctl_call(sock, r, APPROVAL_TIMEOUT, &text, code, &cause) != 0) {
		fprintf(stderr, "shimbridge: %s\n", cause);
		free(cause);
	} else if ((out = json_loads(text, 0, NULL)) == NULL)
		fprintf(stderr, "shimbridge: shimbridged sent an unreadable answer\n");
	free(r);
	free(text);
	free(sock);
	return out;
}

/* An integer member or 0. */
static long long
approval_int(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

/* A string member or "". */
static const char *
approval_str(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_string(v) ? json_string_value(v) : "";
}

/* shimbridge pending [--json]. */
static int
approval_pending(struct admin *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	json_t *arr, *e;
	int ch, json = 0, code;
	size_t i;
	char *cmd, *sess, *rule;

	adm_getopt_reset();
	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (ch == 'j')
			json = 1;
		else if (!adm_global_opt(a, ch, optarg))
			return ADM_USAGE;
	}
	if (optind != argc)
		return ADM_USAGE;
	if ((arr = approval_call(a, json_pack("{s:s}", "op", "pending"), &code)) == NULL)
		return ADM_FAIL;
	if (!json_is_array(arr)) {
		json_decref(arr);
		fprintf(stderr, "shimbridge: shimbridged sent an unreadable list\n");
		return ADM_FAIL;
	}
	if (json) {
		json_dumpf(arr, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
		putchar('\n');
	} else if (json_array_size(arr) == 0)
		printf("no requests wait for approval\n");
	else {
		printf("%-5s %-16s %6s %8s  %-40s %s\n", "ID", "SESSION", "AGE", "EXPIRES",
		    "COMMAND", "RULE");
		json_array_foreach(arr, i, e) {
			/* The command is the agent's: shown escaped. */
			cmd = adm_safe(approval_str(e, "command"));
			sess = adm_safe(approval_str(e, "session"));
			rule = adm_safe(approval_str(e, "rule"));
			printf("%-5lld %-16s %5llds %7llds  %-40s %s%s\n", approval_int(e, "id"),
			    sess, approval_int(e, "age"), approval_int(e, "expires_in"), cmd,
			    rule, json_is_true(json_object_get(e, "approver")) ?
			    " (approver running)" : "");
			free(cmd);
			free(sess);
			free(rule);
		}
	}
	json_decref(arr);
	return ADM_OK;
}

/* Parse a request id. */
static int
approval_id(const char *s, long long *id)
{
	char *end;

	errno = 0;
	*id = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || *id <= 0 || s[0] == '-' || s[0] == '+') {
		fprintf(stderr, "shimbridge: %s is not a request id (see shimbridge pending)\n",
		    s);
		return -1;
	}
	return 0;
}

/* shimbridge approve ID [--for DURATION] | deny ID [--why TEXT]. */
static int
approval_decide(struct admin *a, int argc, char **argv, int approve)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ "for", required_argument, NULL, 'f' },
		{ "why", required_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dur = NULL, *why = NULL;
	json_t *req, *res;
	long long id;
	int ch, code, rc;

	adm_getopt_reset();
	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (ch == 'f' && approve)
			dur = optarg;
		else if (ch == 'w' && !approve)
			why = optarg;
		else if (!adm_global_opt(a, ch, optarg))
			return ADM_USAGE;
	}
	if (optind != argc - 1)
		return ADM_USAGE;
	if (approval_id(argv[optind], &id) != 0)
		return ADM_USAGE;
	req = json_pack("{s:s, s:I}", "op", approve ? "approve" : "deny", "id", (json_int_t)id);
	if (dur != NULL)
		json_object_set_new(req, "for", json_string(dur));
	if (why != NULL) {
		json_t *w = json_string(why);

		if (w == NULL || strlen(why) > 1024) {
			json_decref(req);
			json_decref(w);
			fprintf(stderr, "shimbridge: --why must be UTF-8 text of at most 1024 "
			    "bytes\n");
			return ADM_USAGE;
		}
		json_object_set_new(req, "why", w);
	}
	if ((res = approval_call(a, req, &code)) == NULL)
		return ADM_FAIL;
	if (json_is_true(json_object_get(res, "ok"))) {
		if (approve && approval_int(res, "for") > 0)
			printf("approved request %lld, and identical calls of that session for "
			    "%lld seconds\n", id, approval_int(res, "for"));
		else
			printf("%s request %lld\n", approve ? "approved" : "denied", id);
		rc = ADM_OK;
	} else {
		fprintf(stderr, "shimbridge: %s\n", approval_str(res, "error"));
		rc = ADM_INVALID;
	}
	json_decref(res);
	return rc;
}

/* Print a JSON array of strings on one line, escaped. */
static void
approval_names(const char *label, json_t *arr)
{
	json_t *v;
	size_t i;
	char *s;

	printf("%-10s", label);
	json_array_foreach(arr, i, v) {
		s = adm_safe(json_is_string(v) ? json_string_value(v) : "?");
		printf("%s%s", i > 0 ? " " : "", s);
		free(s);
	}
	printf("%s\n", json_array_size(arr) == 0 ? "none" : "");
}

/* One labelled line, escaped. */
static void
approval_line(const char *label, const char *text)
{
	char *s = adm_safe(text);

	printf("%-10s%s\n", label, s);
	free(s);
}

/* The human-readable explanation. */
static void
approval_explain_print(json_t *o)
{
	json_t *v, *jail = json_object_get(o, "jail"), *e;
	const char *verdict = approval_str(o, "verdict");
	char *s, buf[256];
	size_t i;

	if (json_is_array(v = json_object_get(o, "argv"))) {
		s = adm_argv_join(v);
		printf("session %s: %s %s\n", approval_str(o, "session"), approval_str(o, "tool"),
		    s);
		free(s);
	}
	if (strcmp(verdict, "ask") == 0) {
		snprintf(buf, sizeof buf, "ask (waits up to %lld s for the operator; no answer "
		    "= refused)", approval_int(o, "ask_timeout"));
		approval_line("verdict:", buf);
	} else
		approval_line("verdict:", verdict);
	if (*approval_str(o, "rule") != '\0')
		approval_line("rule:", approval_str(o, "rule"));
	approval_line("reason:", approval_str(o, "reason"));
	if (*approval_str(o, "message") != '\0')
		approval_line("agent sees:", approval_str(o, "message"));
	if (json_is_array(v = json_object_get(o, "argv_run"))) {
		s = adm_argv_join(v);
		printf("%-10s%s %s\n", "runs:", approval_str(o, "path"), s);
		free(s);
	}
	if (*approval_str(o, "upstream") != '\0')
		approval_line("upstream:", approval_str(o, "upstream"));
	if (json_is_array(v = json_object_get(o, "ask_branches")))
		approval_names("asks for:", v);
	if (json_is_array(v = json_object_get(o, "env")))
		approval_names("env:", v);
	if (json_is_array(v = json_object_get(o, "secrets"))) {
		if (json_array_size(v) == 0)
			approval_line("secrets:", "none");
		json_array_foreach(v, i, e) {
			snprintf(buf, sizeof buf, "%s%s%s: %s", approval_str(e, "secret"),
			    *approval_str(e, "variable") ? " as " : "", approval_str(e, "variable"),
			    approval_str(e, "delivery"));
			approval_line(i == 0 ? "secrets:" : "", buf);
		}
	}
	if (json_is_array(v = json_object_get(o, "files_from_sandbox")) &&
	    json_array_size(v) > 0)
		approval_names("files:", v);
	if (json_is_object(jail)) {
		if (!json_is_true(json_object_get(jail, "enabled")))
			approval_line("jail:", "none (the daemon runs with --no-jail)");
		else {
			printf("%-10s", "jail:");
			printf("namespaces");
			json_array_foreach(json_object_get(jail, "namespaces"), i, e)
				printf(" %s", json_string_value(e));
			printf("; network %s; runner %s (uid %lld)\n", approval_str(jail, "network"),
			    approval_str(jail, "runner"), approval_int(jail, "runner_uid"));
		}
		json_array_foreach(json_object_get(jail, "binds"), i, e) {
			snprintf(buf, sizeof buf, "%s (%s, %s)", approval_str(e, "path"),
			    approval_str(e, "mode"), approval_str(e, "what"));
			approval_line(i == 0 ? "binds:" : "", buf);
		}
	}
	if (json_object_get(o, "timeout") != NULL)
		printf("%-10s%lld s\n", "timeout:", approval_int(o, "timeout"));
	printf("Nothing was run.\n");
}

/* shimbridge explain --session S [--cwd DIR] [--json] -- TOOL [ARG...]. */
static int
approval_explain(struct admin *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ "session", required_argument, NULL, 's' },
		{ "cwd", required_argument, NULL, 'd' },
		{ "remote-url", required_argument, NULL, 'u' },
		{ "branch", required_argument, NULL, 'b' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *session = NULL, *cwd = NULL, *url = NULL, *branch = NULL;
	json_t *req, *jargv, *res, *ctx;
	int ch, json = 0, code, i;

	adm_getopt_reset();
	/* '+': TOOL and its arguments after "--" (or the first operand) are not ours. */
	while ((ch = getopt_long(argc, argv, "+c:s:", longopts, NULL)) != -1) {
		if (ch == 's')
			session = optarg;
		else if (ch == 'd')
			cwd = optarg;
		else if (ch == 'u')
			url = optarg;
		else if (ch == 'b')
			branch = optarg;
		else if (ch == 'j')
			json = 1;
		else if (!adm_global_opt(a, ch, optarg))
			return ADM_USAGE;
	}
	if (session == NULL || optind >= argc)
		return ADM_USAGE;
	jargv = json_array();
	for (i = optind + 1; i < argc; i++) {
		json_t *s = json_string(argv[i]);

		if (s == NULL) {
			json_decref(jargv);
			fprintf(stderr, "shimbridge: arguments must be UTF-8\n");
			return ADM_USAGE;
		}
		json_array_append_new(jargv, s);
	}
	req = json_pack("{s:s, s:s, s:s, s:o}", "op", "explain", "session", session, "tool",
	    argv[optind], "argv", jargv);
	if (req == NULL) {
		fprintf(stderr, "shimbridge: the session and tool must be UTF-8\n");
		return ADM_USAGE;
	}
	if (cwd != NULL)
		json_object_set_new(req, "cwd", json_string(cwd));
	if (url != NULL || branch != NULL) {
		ctx = json_object();
		if (url != NULL)
			json_object_set_new(ctx, "remote_url", json_string(url));
		if (branch != NULL)
			json_object_set_new(ctx, "branch", json_string(branch));
		json_object_set_new(req, "context", ctx);
	}
	if ((res = approval_call(a, req, &code)) == NULL)
		return ADM_FAIL;
	if (json) {
		json_dumpf(res, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
		putchar('\n');
	} else
		approval_explain_print(res);
	code = json_object_get(res, "error") != NULL ? ADM_INVALID : ADM_OK;
	if (code != ADM_OK)
		fprintf(stderr, "shimbridge: no session %s\n", session);
	json_decref(res);
	return code;
}

/* Dispatch pending, approve, deny and explain; -1 for another command. */
int
approval_cmd(struct admin *a, int argc, char **argv)
{
	int rc;

	if (strcmp(argv[0], "pending") == 0)
		rc = approval_pending(a, argc, argv);
	else if (strcmp(argv[0], "approve") == 0)
		rc = approval_decide(a, argc, argv, 1);
	else if (strcmp(argv[0], "deny") == 0)
		rc = approval_decide(a, argc, argv, 0);
	else if (strcmp(argv[0], "explain") == 0)
		rc = approval_explain(a, argc, argv);
	else
		return -1;
	if (rc == ADM_USAGE)
		fprintf(stderr, "usage: shimbridge pending [--json]\n"
		    "       shimbridge approve ID [--for DURATION]\n"
		    "       shimbridge deny ID [--why TEXT]\n"
		    "       shimbridge explain --session S [--cwd DIR] [--remote-url URL] "
		    "[--branch B] [--json] -- TOOL [ARG...]\n");
	return rc;
}
