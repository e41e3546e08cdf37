/*
 * shimbridge audit: the audit log's JSON lines as a table. Much of a record comes
 * from a sandbox (argv, cwd, reasons quoting it), so everything printed goes
 * through adm_safe: no escape sequence reaches the administrator's terminal.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <grp.h>
#include <libgen.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "admin.h"
#include "auditchain.h"
#include "util.h"

#define AUDITVIEW_POLL_MS	250

/* A string member or NULL. */
static const char *
auditview_str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The outcome column of a record. */
static char *
auditview_result(json_t *o, const char *event)
{
	const char *reason = auditview_str(o, "reason"), *rule = auditview_str(o, "rule");
	json_t *v;
	char *r;

	if (strcmp(event, "done") == 0) {
		char extra[64] = "";

		if (json_is_number(v = json_object_get(o, "duration")))
			snprintf(extra, sizeof extra, " in %.2fs", json_number_value(v));
		if (auditview_str(o, "killed") != NULL)
			xasprintf(&r, "killed (%s)%s", auditview_str(o, "killed"), extra);
		else if (auditview_str(o, "signal") != NULL)
			xasprintf(&r, "signal %s%s", auditview_str(o, "signal"), extra);
		else if (json_is_integer(v = json_object_get(o, "exit")))
			xasprintf(&r, "exit %lld%s", (long long)json_integer_value(v), extra);
		else
			xasprintf(&r, "done%s", extra);
		return r;
	}
	if (strcmp(event, "reload") == 0) {
		if (json_is_true(json_object_get(o, "ok")))
			xasprintf(&r, "ok, config version %s",
			    auditview_str(o, "config_version") != NULL ?
			    auditview_str(o, "config_version") : "?");
		else
			xasprintf(&r, "rejected: %s", reason != NULL ? reason : "?");
		return r;
	}
	if (strcmp(event, AUDITCHAIN_EVENT) == 0) {
		v = json_object_get(o, "seq");
		xasprintf(&r, "%s, seq %lld%s%s", reason != NULL ? reason : "?",
		    json_is_integer(v) ? (long long)json_integer_value(v) : -1LL,
		    json_is_string(json_object_get(o, "sig")) ? ", signed" : "",
		    auditview_str(o, "chain") != NULL &&
		    strcmp(auditview_str(o, "chain"), "new") == 0 ? ", new chain" : "");
		return r;
	}
	if (strcmp(event, "allowed") == 0)
		return xstrdup(rule != NULL ? rule : "");
	if (reason != NULL)
		return xstrdup(reason);
	return xstrdup("");
}

/* --json: print a record as one compact JSON line (ASCII: nothing raw reaches a terminal). */
static void
auditview_json(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);

	if (s != NULL)
		printf("%s\n", s);
	free(s);
}

/* Print one record (a raw line when it is not JSON). */
static void
auditview_line(const char *line, size_t len, const char *session, int json)
{
	json_t *o = json_loadb(line, len, 0, NULL);
	const char *time, *sess, *event, *tool;
	char *argv, *result, *row, who[96];

	if (o == NULL || !json_is_object(o)) {
		json_decref(o);
		if (session != NULL)
			return;
		if (json) {
			row = xstrndup(line, len);
			row[strcspn(row, "\n")] = '\0';
			o = json_object();
			json_object_set_new(o, "unparsed", json_stringn(row, strlen(row)));
			if (json_object_get(o, "unparsed") == NULL)	/* not UTF-8 */
				json_object_set_new(o, "unparsed", json_string("(not UTF-8)"));
			auditview_json(o);
			json_decref(o);
			free(row);
			return;
		}
		row = xstrndup(line, len);
		row[strcspn(row, "\n")] = '\0';
		fputs("? ", stdout);
		adm_puts_safe(stdout, row);
		putchar('\n');
		free(row);
		return;
	}
	sess = auditview_str(o, "session");
	if (session != NULL && (sess == NULL || strcmp(sess, session) != 0)) {
		json_decref(o);
		return;
	}
	if (json) {
		auditview_json(o);
		json_decref(o);
		return;
	}
	time = auditview_str(o, "time");
	event = auditview_str(o, "event");
	tool = auditview_str(o, "tool");
	if (event == NULL)
		event = "?";
	argv = adm_argv_join(json_object_get(o, "argv"));
	result = auditview_result(o, event);
	if (sess == NULL && json_is_integer(json_object_get(o, "uid")) &&
	    strcmp(event, "reload") != 0)
		snprintf(who, sizeof who, "uid %lld",
		    (long long)json_integer_value(json_object_get(o, "uid")));
	else
		snprintf(who, sizeof who, "%s", sess != NULL ? sess : "-");
	xasprintf(&row, "%-24s %-12s %-14s %-6s %s%s%s", time != NULL ? time : "?", who,
	    event, tool != NULL ? tool : "-", argv, *argv != '\0' ? "  => " : "", result);
	adm_puts_safe(stdout, row);
	putchar('\n');
	free(row);
	free(argv);
	free(result);
	json_decref(o);
}

/* Sleep a little between polls. */
static void
auditview_nap(void)
{
	struct timespec ts = { 0, AUDITVIEW_POLL_MS * 1000000L };

	nanosleep(&ts, NULL);
}

/* After EACCES: say who may read the log (root and the group of its directory). */
static void
auditview_who(const char *path)
{
	char *copy = xstrdup(path);
	struct group *gr;
	struct stat st;

	if (stat(dirname(copy), &st) == 0 && st.st_gid != 0 &&
	    (gr = getgrgid(st.st_gid)) != NULL)
		fprintf(stderr, "shimbridge: the audit log is readable by root and the members "
		    "of the group %s (usermod -a -G %s USER, then log in again)\n", gr->gr_name,
		    gr->gr_name);
	else
		fprintf(stderr, "shimbridge: only root may read this audit log; the installer "
		    "lets the group " ADM_AUDIT_GROUP " read it (its directory root:"
		    ADM_AUDIT_GROUP ", mode 0750)\n");
	free(copy);
}

/* shimbridge audit [--session S] [--follow] [--file PATH] [--json] */
int
auditview_cmd(struct admin *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ "session", required_argument, NULL, 's' },
		{ "follow", no_argument, NULL, 'f' },
		{ "file", required_argument, NULL, 'F' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *session = NULL, *file = NULL;
	struct adm_paths p;
	struct stat st;
	char *line = NULL, *cause = NULL, *path;
	size_t cap = 0, pend = 0;
	char *partial = NULL;
	ino_t ino;
	FILE *f;
	int ch, follow = 0, json = 0;

	if ((ch = auditverify_cmd(a, argc, argv)) >= 0)
		return ch;	/* verify, pubkey, keygen */
	adm_getopt_reset();
	while ((ch = getopt_long(argc, argv, "c:s:f", longopts, NULL)) != -1) {
		if (ch == 's')
			session = optarg;
		else if (ch == 'f')
			follow = 1;
		else if (ch == 'F')
			file = optarg;
		else if (ch == 'j')
			json = 1;
		else if (!adm_global_opt(a, ch, optarg))
			goto usage;
	}
	if (optind != argc)
		goto usage;
	memset(&p, 0, sizeof p);
	if (file == NULL) {
		if (adm_paths_load(a->config, &p, &cause) != 0) {
			adm_paths_warn(cause);
			free(cause);
		}
		path = xstrdup(p.audit);
	} else
		path = xstrdup(file);
	adm_paths_free(&p);
	if ((f = fopen(path, "re")) == NULL) {
		int e = errno;

		fprintf(stderr, "shimbridge: cannot open the audit log %s: %s\n", path,
		    strerror(e));
		if (e == EACCES)
			auditview_who(path);
		errno = e;
		free(path);
		return errno == ENOENT ? ADM_INVALID : ADM_FAIL;
	}
	ino = fstat(fileno(f), &st) == 0 ? st.st_ino : 0;
	if (follow)
		setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		ssize_t n;

		while ((n = getline(&line, &cap, f)) > 0) {
			if (line[n - 1] != '\n') {
				/* A line still being written: keep it for the next round. */
				partial = xreallocarray(partial, pend + (size_t)n + 1, 1);
				memcpy(partial + pend, line, (size_t)n);
				pend += (size_t)n;
				partial[pend] = '\0';
				continue;
			}
			if (pend > 0) {
				partial = xreallocarray(partial, pend + (size_t)n + 1, 1);
				memcpy(partial + pend, line, (size_t)n + 1);
				auditview_line(partial, pend + (size_t)n, session, json);
				pend = 0;
			} else
				auditview_line(line, (size_t)n, session, json);
		}
		if (!follow)
			break;
		clearerr(f);
		auditview_nap();
		/* Rotated (a new file at the path) or truncated: start over on it. */
		if (stat(path, &st) == 0 && (st.st_ino != ino || st.st_size < ftello(f))) {
			FILE *nf = fopen(path, "re");

			if (nf != NULL) {
				fclose(f);
				f = nf;
				ino = st.st_ino;
				pend = 0;
			}
		}
	}
	if (pend > 0 && session == NULL)
		auditview_line(partial, pend, session, json);
	fclose(f);
	free(line);
	free(partial);
	free(path);
	return ADM_OK;
usage:
	fprintf(stderr, "usage: shimbridge audit [--session NAME] [--follow] [--file PATH] "
	    "[--json]\n       shimbridge audit verify [--pubkey HEX|FILE] [FILE...]\n"
	    "       shimbridge audit pubkey [KEYFILE]\n"
	    "       shimbridge audit keygen [KEYFILE]\n");
	return ADM_USAGE;
}
