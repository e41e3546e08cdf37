/* Talking to the running daemon: the status op over its socket, and SIGHUP reloads. */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "admin.h"
#include "platform.h"
#include "proto.h"
#include "util.h"

#define CTL_IO_TIMEOUT		5	/* seconds for one status exchange */
#define CTL_RELOAD_WAIT_MS	10000	/* how long a reload may take to show */
#define CTL_STATUS_MAX		(1024 * 1024)

/* Write all of buf. */
static int
ctl_write_all(int fd, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read exactly len bytes; 0, or -1 (errno 0 at a clean end of file). */
static int
ctl_read_all(int fd, void *buf, size_t len)
{
	unsigned char *p = buf;
	ssize_t n;

	while (len > 0) {
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			errno = 0;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Send one frame. */
static int
ctl_send(int fd, uint8_t type, const char *payload)
{
	unsigned char hdr[FRAME_HDR];
	size_t len = strlen(payload);

	frame_put_header(hdr, type, (uint32_t)len);
	if (ctl_write_all(fd, hdr, sizeof hdr) != 0 || ctl_write_all(fd, payload, len) != 0)
		return -1;
	return 0;
}

/* A string member of a small JSON payload, for error messages. */
static char *
ctl_payload_str(const char *buf, size_t len, const char *key)
{
	json_t *j = json_loadb(buf, len, 0, NULL), *v;
	char *s = NULL;

	if (j != NULL && json_is_string(v = json_object_get(j, key)))
		s = adm_safe(json_string_value(v));
	json_decref(j);
	return s;
}

/*
 * Connect, say HELLO, send one root-only request and collect what it prints on
 * stdout and its exit code (see admin.h).
 */
int
ctl_call(const char *socket_path, const char *request, int timeout, char **text_out,
    int *code, char **cause)
{
	struct timeval tv = { timeout, 0 };
	struct sockaddr_un sun;
	unsigned char hdr[FRAME_HDR];
	char *text = NULL, *buf = NULL, hello[128];
	size_t tlen = 0;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	int fd = -1, rc = -1, done = 0;

	*text_out = NULL;
	*code = -1;
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strcpy_checked(sun.sun_path, sizeof sun.sun_path, socket_path) != 0) {
		xasprintf(cause, "socket path too long: %s", socket_path);
		return -1;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		xasprintf(cause, "socket: %s", strerror(errno));
		return -1;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
		xasprintf(cause, "shimbridged is not running (cannot connect to %s: %s)",
		    socket_path, strerror(errno));
		goto out;
	}
	/* Whoever listens there must be root, or we would be talking to an impostor. */
	if (platform_peercred(fd, &uid, &gid, &pid) != 0 || uid != 0) {
		xasprintf(cause, "%s is not served by root; refusing to talk to it", socket_path);
		goto out;
	}
	snprintf(hello, sizeof hello, "{\"proto\":%d,\"client\":\"shimbridge %s\"}",
	    PROTO_VERSION, SHIMBRIDGE_VERSION);
	if (ctl_send(fd, FRAME_HELLO, hello) != 0 ||
	    ctl_send(fd, FRAME_REQUEST, request) != 0) {
		xasprintf(cause, "cannot talk to shimbridged at %s: %s", socket_path,
		    strerror(errno));
		goto out;
	}
	while (!done) {
		const char *why;
		uint8_t type;
		uint32_t len;

		if (ctl_read_all(fd, hdr, sizeof hdr) != 0) {
			xasprintf(cause, "shimbridged at %s closed the connection early%s%s",
			    socket_path, errno != 0 ? ": " : "", errno != 0 ? strerror(errno) : "");
			goto out;
		}
		if (frame_parse_header(hdr, &type, &len, &why) != 0) {
			xasprintf(cause, "protocol error from shimbridged: %s", why);
			goto out;
		}
		free(buf);
		buf = xmalloc((size_t)len + 1);
		if (ctl_read_all(fd, buf, len) != 0) {
			xasprintf(cause, "shimbridged at %s closed the connection early",
			    socket_path);
			goto out;
		}
		buf[len] = '\0';
		switch (type) {
		case FRAME_HELLO:
			break;
		case FRAME_STDOUT:
			if (tlen + len > CTL_STATUS_MAX) {
				xasprintf(cause, "the reply from shimbridged is too large");
				goto out;
			}
			text = xreallocarray(text, tlen + len + 1, 1);
			memcpy(text + tlen, buf, len);
			tlen += len;
			text[tlen] = '\0';
			break;
		case FRAME_STDERR:
			break;
		case FRAME_ERROR: {
			char *msg = ctl_payload_str(buf, len, "message");

			xasprintf(cause, "shimbridged refused the request: %s",
			    msg != NULL ? msg : "no reason given");
			free(msg);
			goto out;
		}
		case FRAME_EXIT: {
			json_t *ej = json_loadb(buf, len, 0, NULL);

			*code = json_is_integer(json_object_get(ej, "code")) ?
			    (int)json_integer_value(json_object_get(ej, "code")) : 1;
			json_decref(ej);
			done = 1;
			break;
		}
		default:
			xasprintf(cause, "unexpected frame 0x%02x from shimbridged", type);
			goto out;
		}
	}
	*text_out = text != NULL ? text : xstrdup("");
	text = NULL;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(text);
	return rc;
}

/* Ask the daemon for its status (root only). */
int
ctl_status(const char *socket_path, json_t **out, char **cause)
{
	char *text = NULL;
	int code;

	*out = NULL;
	if (ctl_call(socket_path, "{\"op\":\"status\"}", CTL_IO_TIMEOUT, &text, &code,
	    cause) != 0)
		return -1;
	if ((*out = json_loads(text, 0, NULL)) == NULL || !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		free(text);
		xasprintf(cause, "shimbridged sent an unreadable status");
		return -1;
	}
	free(text);
	return 0;
}

/* A string member or "". */
static const char *
ctl_str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : "";
}

/* An integer member or 0. */
static long long
ctl_int(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

/* Whether pid is a shimbridged process (so a recycled pid is never signalled). */
static int
ctl_is_daemon(pid_t pid)
{
	char path[64], comm[64];
	FILE *f;
	int ok = 0;

	if (pid <= 1)
		return 0;
	snprintf(path, sizeof path, "/proc/%ld/comm", (long)pid);
	if ((f = fopen(path, "re")) == NULL)
		return kill(pid, 0) == 0;	/* no /proc (macOS): trust the daemon's word */
	if (fgets(comm, sizeof comm, f) != NULL) {
		comm[strcspn(comm, "\n")] = '\0';
		ok = strcmp(comm, "shimbridged") == 0;
	}
	fclose(f);
	return ok;
}

/* Size of a file, or 0 when it cannot be read. */
static off_t
ctl_file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : 0;
}

/*
 * Look for the daemon's "reload" audit record written after offset. Returns 1 with
 * *rec (and *lineno) when found, 0 when not (yet).
 */
static int
ctl_find_reload(const char *audit, off_t offset, json_t **rec, long *lineno)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	long no = 0;
	off_t pos = 0;
	FILE *f;
	int found = 0;

	if ((f = fopen(audit, "re")) == NULL)
		return 0;
	while ((n = getline(&line, &cap, f)) > 0) {
		json_t *j, *ev;

		no++;
		pos += n;
		if (pos <= offset || line[n - 1] != '\n')
			continue;
		j = json_loadb(line, (size_t)n, 0, NULL);
		ev = j != NULL ? json_object_get(j, "event") : NULL;
		if (json_is_string(ev) && strcmp(json_string_value(ev), "reload") == 0) {
			json_decref(*rec);
			*rec = j;
			*lineno = no;
			found = 1;
			break;
		}
		json_decref(j);
	}
	free(line);
	fclose(f);
	return found;
}

/* Sleep for ms milliseconds. */
static void
ctl_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * Reload: SIGHUP the daemon found through the status op, then wait for its audit
 * record of the reload (it says ok or why not). Without a readable audit log,
 * fall back to watching the config version in the status.
 */
int
ctl_reload(const struct admin *a, int quiet_if_down)
{
	struct adm_paths p, dp;
	json_t *st = NULL, *st2 = NULL, *rec = NULL;
	char *cause = NULL, *old = NULL, *audit = NULL;
	const char *dconfig;
	long lineno = 0, waited;
	off_t offset;
	pid_t pid;
	int rc = ADM_FAIL;

	if (adm_paths_load(a->config, &p, &cause) != 0) {
		adm_paths_warn(cause);
		free(cause);
		cause = NULL;
	}
	if (ctl_status(p.socket, &st, &cause) != 0) {
		if (quiet_if_down) {
			printf("shimbridged is not running; the change takes effect when it "
			    "starts\n");
			rc = ADM_OK;
		} else
			fprintf(stderr, "shimbridge: %s\n", cause);
		goto out;
	}
	pid = (pid_t)ctl_int(st, "pid");
	old = xstrdup(ctl_str(st, "config_version"));
	dconfig = ctl_str(st, "config");
	audit = xstrdup(p.audit);
	if (*dconfig != '\0' && strcmp(dconfig, a->config) != 0) {
		fprintf(stderr, "shimbridge: warning: the daemon runs with %s, not %s; it "
		    "reloads its own file\n", dconfig, a->config);
		(void)adm_paths_load(dconfig, &dp, &cause);
		free(audit);
		audit = xstrdup(dp.audit);
		adm_paths_free(&dp);
		free(cause);
		cause = NULL;
	}
	if (!ctl_is_daemon(pid)) {
		fprintf(stderr, "shimbridge: the status names pid %ld, which is not "
		    "shimbridged; not signalling it\n", (long)pid);
		goto out;
	}
	offset = ctl_file_size(audit);
	if (kill(pid, SIGHUP) != 0) {
		fprintf(stderr, "shimbridge: cannot signal shimbridged (pid %ld): %s\n",
		    (long)pid, strerror(errno));
		goto out;
	}
	for (waited = 0; waited < CTL_RELOAD_WAIT_MS; waited += 50) {
		if (ctl_find_reload(audit, offset, &rec, &lineno))
			break;
		ctl_sleep_ms(50);
	}
	if (rec != NULL) {
		json_t *ok = json_object_get(rec, "ok");

		if (json_is_true(ok)) {
			const char *nv = ctl_str(rec, "config_version");

			if (strcmp(nv, old) == 0)
				printf("reloaded shimbridged (pid %ld): configuration version %s "
				    "unchanged, secrets re-read\n", (long)pid, nv);
			else
				printf("reloaded shimbridged (pid %ld): configuration version %s "
				    "(was %s)\n", (long)pid, nv, old);
			rc = ADM_OK;
		} else {
			char *why = adm_safe(ctl_str(rec, "reason"));

			fprintf(stderr, "shimbridge: reload rejected; shimbridged keeps "
			    "configuration version %s: %s (audit log %s line %ld)\n", old, why,
			    audit, lineno);
			free(why);
		}
		goto out;
	}
	/* No audit record seen: the version in the status is the only evidence. */
	if (ctl_status(p.socket, &st2, &cause) == 0 &&
	    strcmp(ctl_str(st2, "config_version"), old) != 0) {
		printf("reloaded shimbridged (pid %ld): configuration version %s (was %s)\n",
		    (long)pid, ctl_str(st2, "config_version"), old);
		rc = ADM_OK;
	} else
		fprintf(stderr, "shimbridge: sent SIGHUP to shimbridged (pid %ld) but saw no "
		    "reload record in %s within %d s; check the daemon's log\n", (long)pid,
		    audit, CTL_RELOAD_WAIT_MS / 1000);
out:
	json_decref(st);
	json_decref(st2);
	json_decref(rec);
	free(old);
	free(audit);
	free(cause);
	adm_paths_free(&p);
	return rc;
}

/* "3d 4h", "5m 2s". */
static void
ctl_duration(long long s, char *buf, size_t len)
{
	if (s >= 86400)
		snprintf(buf, len, "%lldd %lldh", s / 86400, s % 86400 / 3600);
	else if (s >= 3600)
		snprintf(buf, len, "%lldh %lldm", s / 3600, s % 3600 / 60);
	else if (s >= 60)
		snprintf(buf, len, "%lldm %llds", s / 60, s % 60);
	else
		snprintf(buf, len, "%llds", s);
}

/* "a,b" of a JSON array of strings, or "k:v,k:v" of an object of strings, into buf. */
static const char *
ctl_join(json_t *v, char *buf, size_t len)
{
	const char *k;
	json_t *e;
	size_t i, off = 0;

	buf[0] = '\0';
	if (json_is_array(v)) {
		json_array_foreach(v, i, e)
			if (json_is_string(e) && off < len)
				off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "," : "",
				    json_string_value(e));
	} else if (json_is_object(v)) {
		json_object_foreach(v, k, e)
			if (json_is_string(e) && off < len)
				off += (size_t)snprintf(buf + off, len - off, "%s%s:%s", off ? "," :
				    "", k, json_string_value(e));
	}
	return buf[0] != '\0' ? buf : "-";
}

/* The GitHub App tokens of a status, one entry per session and secret (see admin.h). */
json_t *
ctl_app_tokens(json_t *st)
{
	json_t *out = json_array(), *sess = json_object_get(st, "sessions"), *e, *a, *o;
	size_t i, j;

	json_array_foreach(sess, i, e) {
		json_array_foreach(json_object_get(e, "github_app"), j, a) {
			o = json_object();
			json_object_set_new(o, "name", json_string(ctl_str(a, "secret")));
			json_object_set_new(o, "source", json_string("github_app"));
			json_object_set_new(o, "session", json_string(ctl_str(e, "name")));
			json_object_update_missing(o, a);
			json_object_del(o, "secret");
			json_array_append_new(out, o);
		}
	}
	return out;
}

/* Print the GitHub App tokens of a status, one line each (see admin.h). */
void
ctl_print_app_tokens(json_t *st, const char *indent)
{
	json_t *toks = ctl_app_tokens(st), *t;
	char repos[512], perms[512];
	size_t i;

	json_array_foreach(toks, i, t) {
		printf("%s%s (session %s): token %s, expires %s, repositories %s, permissions "
		    "%s; last refresh %s: %s%s\n", indent, ctl_str(t, "name"),
		    ctl_str(t, "session"), ctl_str(t, "fingerprint")[0] ? ctl_str(t,
		    "fingerprint") : "none", ctl_str(t, "expires_at"),
		    ctl_join(json_object_get(t, "repositories"), repos, sizeof repos),
		    ctl_join(json_object_get(t, "permissions"), perms, sizeof perms),
		    ctl_str(t, "last_refresh"), ctl_str(t, "last_result"),
		    json_is_true(json_object_get(t, "minting")) ? " (minting now)" : "");
	}
	json_decref(toks);
}

/* shimbridge status [--json] */
int
ctl_cmd_status(struct admin *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct adm_paths p;
	json_t *st = NULL, *sess, *e;
	char *cause = NULL, up[64];
	int ch, json = 0, rc = ADM_FAIL;
	size_t i;

	adm_getopt_reset();
	while ((ch = getopt_long(argc, argv, "+c:j", longopts, NULL)) != -1) {
		if (ch == 'j')
			json = 1;
		else if (!adm_global_opt(a, ch, optarg))
			return ADM_USAGE;
	}
	if (optind != argc) {
		fprintf(stderr, "usage: shimbridge status [--json]\n");
		return ADM_USAGE;
	}
	if (adm_paths_load(a->config, &p, &cause) != 0) {
		adm_paths_warn(cause);
		free(cause);
		cause = NULL;
	}
	if (ctl_status(p.socket, &st, &cause) != 0) {
		if (json) {
			json_t *o = json_object();
			char *s;

			json_object_set_new(o, "up", json_false());
			json_object_set_new(o, "socket", json_string(p.socket));
			s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
			printf("%s\n", s);
			free(s);
			json_decref(o);
		}
		fprintf(stderr, "shimbridge: %s\n", cause);
		goto out;
	}
	rc = ADM_OK;
	if (json) {
		char *s;

		json_object_set_new(st, "up", json_true());
		s = json_dumps(st, JSON_COMPACT | JSON_PRESERVE_ORDER);
		printf("%s\n", s);
		free(s);
		goto out;
	}
	ctl_duration(ctl_int(st, "uptime"), up, sizeof up);
	printf("shimbridged %s (protocol %lld) running, pid %lld, up %s\n",
	    ctl_str(st, "version"), ctl_int(st, "protocol"), ctl_int(st, "pid"), up);
	printf("  socket:      %s\n", p.socket);
	printf("  config:      %s, version %s\n", ctl_str(st, "config"),
	    ctl_str(st, "config_version"));
	printf("  in flight:   %lld connections, %lld running requests\n",
	    ctl_int(st, "connections"), ctl_int(st, "running"));
	printf("  counters:    %lld accepted, %lld refused, %lld allowed, %lld denied, "
	    "%lld completed, %lld errors\n", ctl_int(st, "accepted"), ctl_int(st, "refused"),
	    ctl_int(st, "allowed"), ctl_int(st, "denied"), ctl_int(st, "completed"),
	    ctl_int(st, "errors"));
	printf("  resources:   %lld fds, %lld KiB resident\n", ctl_int(st, "fds"),
	    ctl_int(st, "rss_kib"));
	sess = json_object_get(st, "sessions");
	printf("  sessions:    %zu\n", json_is_array(sess) ? json_array_size(sess) : 0);
	json_array_foreach(sess, i, e) {
		printf("    %-20s uid %-8lld %lld running\n", ctl_str(e, "name"),
		    ctl_int(e, "uid"), ctl_int(e, "running"));
	}
	{
		json_t *toks = ctl_app_tokens(st);

		if (json_array_size(toks) > 0) {
			printf("  github app tokens:\n");
			ctl_print_app_tokens(st, "    ");
		}
		json_decref(toks);
	}
out:
	json_decref(st);
	free(cause);
	adm_paths_free(&p);
	return rc;
}

/* shimbridge reload */
int
ctl_cmd_reload(struct admin *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	adm_getopt_reset();
	while ((ch = getopt_long(argc, argv, "+c:", longopts, NULL)) != -1) {
		if (!adm_global_opt(a, ch, optarg))
			return ADM_USAGE;
	}
	if (optind != argc) {
		fprintf(stderr, "usage: shimbridge reload\n");
		return ADM_USAGE;
	}
	return ctl_reload(a, 0);
}
