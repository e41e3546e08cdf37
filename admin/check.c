/*
 * shimbridge check: the config as the daemon loads it (with its warnings), then
 * the machine around it: users, socket, directories, tools, the secret store.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <libgen.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "admin.h"
#include "proc.h"
#include "config.h"
#include "keyring.h"
#include "platform.h"
#include "secret.h"
#include "profile.h"
#include "store.h"
#include "util.h"

#define CHECK_VERSION_TIMEOUT	10	/* seconds for a tool's --version */
#define CHECK_PROBE_TIMEOUT	10	/* seconds for one authenticated request */
#define CHECK_EXPIRY_WARN	(7 * 86400)	/* warn about a token expiring this soon */

static int check_failures;

/* Print one finding: "ok", "warning" or "FAIL", then the message. */
static void __attribute__((format(printf, 2, 3)))
check_say(const char *level, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	printf("%-8s ", level);
	adm_puts_safe(stdout, msg);
	putchar('\n');
	free(msg);
	if (strcmp(level, "FAIL") == 0)
		check_failures++;
}

/* A directory that must be root's and writable by nobody else; mode checked if want != 0. */
static void
check_root_dir(const char *what, const char *path, mode_t want, int may_be_missing)
{
	struct stat st;

	if (lstat(path, &st) != 0) {
		if (errno == ENOENT && may_be_missing)
			check_say("warning", "%s %s does not exist yet (shimbridged creates it "
			    "at start, root 0755; under systemd shimbridge.socket does)", what, path);
		else
			check_say("FAIL", "%s %s: %s", what, path, strerror(errno));
		return;
	}
	if (!S_ISDIR(st.st_mode))
		check_say("FAIL", "%s %s is not a directory", what, path);
	else if (st.st_uid != 0)
		check_say("FAIL", "%s %s is owned by uid %u, not root", what, path,
		    (unsigned)st.st_uid);
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		check_say("FAIL", "%s %s is writable by group or others (mode %04o)", what,
		    path, (unsigned)(st.st_mode & 07777));
	else if (want != 0 && (st.st_mode & 07777) != want)
		check_say("warning", "%s %s has mode %04o (expected %04o)", what, path,
		    (unsigned)(st.st_mode & 07777), (unsigned)want);
	else
		check_say("ok", "%s %s (mode %04o)", what, path, (unsigned)(st.st_mode & 07777));
}

/* Run "path --version" as the runner, clean environment, bounded; first output line. */
static char *
check_version(const char *path, uid_t uid, gid_t gid)
{
	static char *const envp[] = { "PATH=/usr/bin:/bin", "HOME=/nonexistent",
	    "LC_ALL=C", "GH_NO_UPDATE_NOTIFIER=1", NULL };
	char *const argv[] = { (char *)path, "--version", NULL };
	char buf[512], *nl, *cause = NULL;
	size_t len = 0;
	time_t deadline;
	struct proc_req r;
	struct proc p;
	pid_t pid;
	int status;

	/* Its own session (killed as a group at the deadline), as the runner, in /. */
	proc_req_init(&r, path, argv, envp);
	r.fd[1] = PROC_PIPE;
	r.fd[2] = PROC_STDOUT;
	r.flags = PROC_SETSID | PROC_DROP;
	r.uid = uid;
	r.gid = gid;
	r.cwd = "/";
	fflush(stdout);
	if (proc_spawn(&r, &p, &cause) != 0) {
		free(cause);
		return NULL;
	}
	pid = p.pid;
	deadline = time(NULL) + CHECK_VERSION_TIMEOUT;
	for (;;) {
		struct pollfd pfd = { p.fd[1], POLLIN, 0 };
		ssize_t n;

		if (time(NULL) >= deadline) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			break;
		}
		if (poll(&pfd, 1, 200) <= 0)
			continue;
		if (len >= sizeof buf - 1)
			break;
		n = read(p.fd[1], buf + len, sizeof buf - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	proc_close(&p);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	buf[len] = '\0';
	if ((nl = strchr(buf, '\n')) != NULL)
		*nl = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || buf[0] == '\0')
		return NULL;
	return xstrdup(buf);
}

/* An executable the daemon runs: root-owned, nobody else may write it. */
static void
check_exec(const char *what, const char *path, const struct config *c, int version)
{
	struct stat st;
	char *v;

	if (stat(path, &st) != 0) {
		check_say("FAIL", "%s %s: %s", what, path, strerror(errno));
		return;
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0) {
		check_say("FAIL", "%s %s is not an executable file", what, path);
		return;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		check_say("FAIL", "%s %s is writable by group or others", what, path);
		return;
	}
	if (st.st_uid != 0) {
		check_say("warning", "%s %s is owned by uid %u, who can change what runs",
		    what, path, (unsigned)st.st_uid);
		return;
	}
	if (!version) {
		check_say("ok", "%s %s", what, path);
		return;
	}
	if ((v = check_version(path, c->runner_uid, c->runner_gid)) == NULL)
		check_say("FAIL", "%s %s --version failed when run as %s", what, path,
		    c->runner);
	else
		check_say("ok", "%s %s: %s", what, path, v);
	free(v);
}

/* Whether user (name, primary gid) is a member of gid. */
static int
check_in_group(const char *user, gid_t primary, gid_t gid)
{
	gid_t groups[256];
	int n = 256, i;

	if (primary == gid)
		return 1;
	if (getgrouplist(user, primary, groups, &n) < 0)
		return 0;
	for (i = 0; i < n; i++) {
		if (groups[i] == gid)
			return 1;
	}
	return 0;
}

/* Users: the runner and every session's account. */
static void
check_users(const struct config *c)
{
	struct passwd *pw;
	size_t i;

	if ((pw = getpwnam(c->runner)) != NULL) {
		if (strstr(pw->pw_shell, "nologin") == NULL && strstr(pw->pw_shell, "false") == NULL)
			check_say("warning", "runner %s has a login shell (%s)", c->runner,
			    pw->pw_shell);
		else
			check_say("ok", "runner %s (uid %u)", c->runner, (unsigned)pw->pw_uid);
		if (c->socket_group != NULL && check_in_group(pw->pw_name, pw->pw_gid,
		    c->socket_gid))
			check_say("FAIL", "runner %s is in the socket group %s: tools could "
			    "call the bridge", c->runner, c->socket_group);
	}
	for (i = 0; i < c->nsessions; i++) {
		const struct session *s = &c->sessions[i];
		struct stat st;

		if ((pw = getpwuid(s->uid)) == NULL) {
			check_say("warning", "session %s: uid %u has no passwd entry", s->name,
			    (unsigned)s->uid);
			continue;
		}
		if (c->socket_group != NULL && !check_in_group(pw->pw_name, pw->pw_gid,
		    c->socket_gid))
			check_say("FAIL", "session %s: %s is not in the socket group %s and "
			    "cannot reach the bridge", s->name, pw->pw_name, c->socket_group);
		else
			check_say("ok", "session %s: user %s (uid %u)", s->name, pw->pw_name,
			    (unsigned)s->uid);
		if (s->workspace != NULL && (stat(s->workspace, &st) != 0 ||
		    st.st_uid != s->uid))
			check_say("warning", "session %s: workspace %s is not owned by %s",
			    s->name, s->workspace, pw->pw_name);
		/* Sharing the global runner is warned about with the config's findings. */
		if (!s->runner_own)
			continue;
		if ((pw = getpwnam(s->runner)) != NULL && c->socket_group != NULL &&
		    check_in_group(pw->pw_name, pw->pw_gid, c->socket_gid))
			check_say("FAIL", "session %s: runner %s is in the socket group %s: "
			    "tools could call the bridge", s->name, s->runner, c->socket_group);
		else
			check_say("ok", "session %s: runner %s (uid %u)", s->name, s->runner,
			    (unsigned)s->runner_uid);
	}
}

/* The socket's directory and, when it exists, the socket itself. */
static void
check_socket(const struct config *c)
{
	char *copy = xstrdup(c->socket_path);
	struct stat st;

	check_root_dir("socket directory", dirname(copy), 0, 1);
	free(copy);
	if (lstat(c->socket_path, &st) != 0) {
		check_say("warning", "socket %s does not exist (shimbridged not running?)",
		    c->socket_path);
		return;
	}
	if (!S_ISSOCK(st.st_mode))
		check_say("FAIL", "socket %s is not a socket", c->socket_path);
	else if (st.st_uid != 0 || (c->socket_group != NULL && st.st_gid != c->socket_gid))
		check_say("FAIL", "socket %s is owned by %u:%u, expected root:%s",
		    c->socket_path, (unsigned)st.st_uid, (unsigned)st.st_gid,
		    c->socket_group != NULL ? c->socket_group : "root");
	else if ((int)(st.st_mode & 0777) != c->socket_mode)
		check_say("FAIL", "socket %s has mode %04o, expected %04o", c->socket_path,
		    (unsigned)(st.st_mode & 0777), (unsigned)c->socket_mode);
	else
		check_say("ok", "socket %s (mode %04o)", c->socket_path,
		    (unsigned)(st.st_mode & 0777));
}

/* Audit log file and directory, state directory. */
static void
check_dirs(const struct config *c)
{
	char *copy = xstrdup(c->audit_path), *dir = dirname(copy);
	struct stat st, dst;
	struct group *gr;

	check_root_dir("audit directory", dir, 0, 0);
	if (stat(dir, &dst) != 0)
		dst.st_gid = 0;
	free(copy);
	if (lstat(c->audit_path, &st) == 0) {
		/* Group read only for the directory's group (shimbridge-audit), never root's. */
		if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 037) ||
		    ((st.st_mode & 040) && (st.st_gid == 0 || st.st_gid != dst.st_gid)))
			check_say("FAIL", "audit log %s must be a root-owned file, readable at "
			    "most by the group of its directory (mode %04o, group %u)",
			    c->audit_path, (unsigned)(st.st_mode & 07777), (unsigned)st.st_gid);
		else if (st.st_mode & 040) {
			gr = getgrgid(st.st_gid);
			check_say("ok", "audit log %s (readable by group %s)", c->audit_path,
			    gr != NULL ? gr->gr_name : "?");
		} else
			check_say("ok", "audit log %s", c->audit_path);
	}
	check_root_dir("state directory", c->state_dir, 0755, 0);
}

/* Tools of the config: executable, and --version for gh and git. */
static void
check_tools(const struct config *c)
{
	char *what;
	size_t i;

	for (i = 0; i < c->ntools; i++) {
		xasprintf(&what, "tool %s", c->tools[i].name);
		check_exec(what, c->tools[i].path, c,
		    c->tools[i].profile == &profile_gh || strcmp(c->tools[i].name, "gh") == 0 ||
		    strcmp(c->tools[i].name, "git") == 0);
		free(what);
	}
	if (c->git_path != NULL)
		check_exec("git", c->git_path, c, 1);
	if (c->git_helper != NULL)
		check_exec("git helper", c->git_helper, c, 0);
}

/* The secret store: key and file permissions, and that the key opens the store. */
static void
check_store(const struct admin *a)
{
	unsigned char *key = NULL;
	struct store *st = NULL;
	char *cause = NULL;

	if (access(a->key, F_OK) != 0) {
		check_say("ok", "no secret store key at %s (secret init makes one)", a->key);
		return;
	}
	if (store_key_load(a->key, &key, &cause) != 0) {
		check_say("FAIL", "%s", cause);
		free(cause);
		return;
	}
	if (access(a->store, F_OK) != 0)
		check_say("ok", "store key %s; no store at %s yet", a->key, a->store);
	else if (store_load(a->store, key, 0, &st, &cause) != 0) {
		check_say("FAIL", "%s", cause);
		free(cause);
	} else
		check_say("ok", "secret store %s: %zu secrets", a->store, store_count(st));
	store_free(st);
	sodium_free(key);
}

/* The shim directory sessions get in PATH. */
static void
check_shims(const struct admin *a)
{
	static const char *const names[] = { "shimbridge-shim", "gh", "git-remote-shimbridge",
	    NULL };
	char *path;
	size_t i;

	for (i = 0; names[i] != NULL; i++) {
		xasprintf(&path, "%s/%s", a->shim_dir, names[i]);
		if (access(path, X_OK) != 0)
			check_say("warning", "shim %s: %s", path, strerror(errno));
		else if (i == 0)
			check_say("ok", "shims in %s", a->shim_dir);
		free(path);
	}
}

/* The running daemon, compared with the config on disk. */
static void
check_daemon(const struct config *c)
{
	json_t *st = NULL, *v;
	char *cause = NULL;

	if (ctl_status(c->socket_path, &st, &cause) != 0) {
		check_say("warning", "%s", cause);
		free(cause);
		return;
	}
	v = json_object_get(st, "config_version");
	if (json_is_string(v) && strcmp(json_string_value(v), c->version) != 0)
		check_say("warning", "shimbridged (pid %lld) runs config version %s; the files "
		    "are version %s: run shimbridge reload",
		    (long long)json_integer_value(json_object_get(st, "pid")),
		    json_string_value(v), c->version);
	else
		check_say("ok", "shimbridged running (pid %lld), config version %s",
		    (long long)json_integer_value(json_object_get(st, "pid")), c->version);
	json_decref(st);
}

/* One probe target: a secret on a host, deduplicated by (source, url, CA file). */
struct check_probe {
	const struct secret_src	*src;
	char			*url;
	const char		*ca_file;
};

/* Whether (src, url, ca_file) was probed already; remembers it if not. */
static int
check_seen(struct check_probe **v, size_t *n, const struct secret_src *src, const char *url,
    const char *ca_file)
{
	size_t i;

	for (i = 0; i < *n; i++) {
		if ((*v)[i].src == src && strcmp((*v)[i].url, url) == 0 &&
		    ((*v)[i].ca_file == NULL ? ca_file == NULL :
		    ca_file != NULL && strcmp((*v)[i].ca_file, ca_file) == 0))
			return 1;
	}
	*v = xreallocarray(*v, *n + 1, sizeof **v);
	(*v)[*n].src = src;
	(*v)[*n].ca_file = ca_file;
	(*v)[(*n)++].url = xstrdup(url);
	return 0;
}

/* A tool's ca_file, else SSL_CERT_FILE from its env, else the caller's; NULL: system CAs. */
static const char *
check_ca_file(const struct tool *t)
{
	size_t i;

	if (t != NULL && t->ca_file != NULL)
		return t->ca_file;

	for (i = 0; t != NULL && i < t->nenv; i++) {
		if (strcmp(t->env[i].name, "SSL_CERT_FILE") == 0)
			return t->env[i].value;
	}
	return getenv("SSL_CERT_FILE");
}

/* Seconds until a token's expiry date, 0 when past, -1 when unknown. */
static long long
check_expiry(const char *v)
{
	return probehdr_expiry(v, time(NULL));
}

/* Whether the host says the token has expired: a past expiry, or a 401 saying so. */
static int
check_expired(const struct probe_result *r)
{
	if (r->status == 401 && r->body != NULL && strcasestr(r->body, "expired") != NULL)
		return 1;
	return check_expiry(r->expires) == 0;
}

/*
 * One authenticated request with a secret's value: report ok (with the token's
 * scopes and expiry when the host says them), rejected, or no answer. The value
 * lives in guarded memory here; it is never printed.
 */
static void
check_probe_one(const char *what, const struct secret_src *src, const struct secret_val *v,
    const char *url, const char *scheme, const char *username, const char *ca_file)
{
	struct probe_result r;
	unsigned char *cred = NULL;
	char *hdr = NULL;
	size_t clen, hlen, b64;

	if (v->value == NULL) {
		check_say("FAIL", "%s: secret %s has no value: %s", what, src->name,
		    v->error != NULL ? v->error : "not loaded");
		return;
	}
	if (strcmp(scheme, "Basic") == 0) {
		/* "user:secret" in base64, built in guarded memory. */
		clen = strlen(username) + 1 + v->len;
		b64 = sodium_base64_ENCODED_LEN(clen, sodium_base64_VARIANT_ORIGINAL);
		hlen = strlen("Authorization: Basic ") + b64;
		if ((cred = sodium_malloc(clen)) == NULL || (hdr = sodium_malloc(hlen)) == NULL)
			goto nomem;
		memcpy(cred, username, strlen(username));
		cred[strlen(username)] = ':';
		memcpy(cred + strlen(username) + 1, v->value, v->len);
		memcpy(hdr, "Authorization: Basic ", strlen("Authorization: Basic "));
		sodium_bin2base64(hdr + strlen("Authorization: Basic "), b64, cred, clen,
		    sodium_base64_VARIANT_ORIGINAL);
	} else {
		hlen = strlen("Authorization: token ") + v->len + 1;
		if ((hdr = sodium_malloc(hlen)) == NULL)
			goto nomem;
		memcpy(hdr, "Authorization: token ", strlen("Authorization: token "));
		memcpy(hdr + strlen("Authorization: token "), v->value, v->len);
		hdr[hlen - 1] = '\0';
	}
	if (memchr(v->value, '\n', v->len) != NULL || memchr(v->value, '\r', v->len) != NULL) {
		check_say("FAIL", "%s: secret %s holds a line break; it cannot be a token",
		    what, src->name);
		goto out;
	}
	if (probe_get(url, hdr, ca_file, CHECK_PROBE_TIMEOUT, &r) != 0)
		check_say("FAIL", "%s: no answer from %s within %d s: %s", what, url,
		    CHECK_PROBE_TIMEOUT, r.error);
	else if (check_expired(&r))
		check_say("FAIL", "%s: expired (HTTP %d%s%s): store a new token with "
		    "shimbridge secret set %s", what, r.status, r.expires != NULL ?
		    ", expiry " : "", r.expires != NULL ? r.expires : "", src->name);
	else if (r.status == 401)
		check_say("FAIL", "%s: rejected (HTTP 401): secret %s is wrong, revoked or "
		    "expired; store a valid token with shimbridge secret set %s", what,
		    src->name, src->name);
	else if (r.status == 403 || r.status == 404)
		check_say("warning", "%s: accepted, but HTTP %d for %s (the token may lack a "
		    "scope or access to the repository)", what, r.status, url);
	else if (r.status >= 200 && r.status < 300 && check_expiry(r.expires) >= 0 &&
	    check_expiry(r.expires) < CHECK_EXPIRY_WARN)
		check_say("warning", "%s: accepted (HTTP %d), but the token expires %s: "
		    "replace it soon with shimbridge secret set %s", what, r.status, r.expires,
		    src->name);
	else if (r.status >= 200 && r.status < 300)
		check_say("ok", "%s: accepted (HTTP %d)%s%s%s%s%s", what, r.status,
		    r.scopes != NULL ? ", scopes: " : "",
		    r.scopes != NULL ? (*r.scopes != '\0' ? r.scopes : "none") : "",
		    r.expires != NULL ? ", expires " : "", r.expires != NULL ? r.expires : "",
		    r.scopes == NULL && r.expires == NULL && strcmp(scheme, "token") == 0 ?
		    " (fine-grained token: no scope list)" : "");
	else
		check_say("FAIL", "%s: HTTP %d from %s", what, r.status, url);
	probe_result_free(&r);
	goto out;
nomem:
	check_say("FAIL", "%s: cannot allocate guarded memory", what);
out:
	if (cred != NULL)
		sodium_free(cred);
	if (hdr != NULL)
		sodium_free(hdr);
}

/*
 * Every secret that reaches a host, tried once there: gh tools' tokens with
 * GET /user (github.com's API) or /api/v3/user (GitHub Enterprise Server), git
 * hosts' tokens with the request `git ls-remote` makes first (info/refs of the
 * first repository a git session may use). Session overrides are tried too.
 */
static void
check_auth(const struct config *c, struct keyring *kr)
{
	struct check_probe *seen = NULL;
	const char *repo = NULL;
	char *url, *what;
	size_t nseen = 0, i, j, k;

	for (i = 0; i < c->ntools; i++) {
		const struct tool *t = &c->tools[i];
		const char *host = t->host != NULL ? t->host : "github.com";

		if (t->profile != &profile_gh)
			continue;
		if (strcmp(host, "github.com") == 0)
			url = xstrdup("https://api.github.com/user");
		else
			xasprintf(&url, "https://%s/api/v3/user", host);
		for (j = 0; j < t->nsecrets; j++) {
			for (k = 0; k <= c->nsessions; k++) {
				const struct session *s = k < c->nsessions ? &c->sessions[k] : NULL;
				const struct secret_src *src;

				if (s != NULL && !config_session_has_tool(s, t->name))
					continue;
				src = secret_resolve(c, s, t->secrets[j].secret);
				/* GitHub App sources: check_apps mints and revokes instead. */
				if (src == NULL || src->type == SECRET_GITHUB_APP ||
				    check_seen(&seen, &nseen, src, url,
				    check_ca_file(t)))
					continue;
				xasprintf(&what, "secret %s%s%s on %s (tool %s)", src->name,
				    s != NULL && src != secret_resolve(c, NULL, src->name) ?
				    " of session " : "", s != NULL &&
				    src != secret_resolve(c, NULL, src->name) ? s->name : "",
				    host, t->name);
				check_probe_one(what, src, &keyring_get(kr, s, src->name)->val, url,
				    "token", NULL, check_ca_file(t));
				free(what);
			}
		}
		free(url);
	}
	for (k = 0; k < c->nsessions && repo == NULL; k++) {
		if (config_session_has_tool(&c->sessions[k], "git") && c->sessions[k].nrepos > 0)
			repo = c->sessions[k].repos[0];
	}
	for (i = 0; i < c->ngit_hosts; i++) {
		const struct git_host *h = &c->git_hosts[i];
		const char *ca = h->ca_file != NULL ? h->ca_file : check_ca_file(NULL);
		size_t ul = strlen(h->upstream);

		if (repo == NULL) {
			check_say("warning", "git host %s: no session may use git with a "
			    "repository, so its secret %s was not tried", h->name, h->secret);
			continue;
		}
		xasprintf(&url, "%.*s/%s.git/info/refs?service=git-upload-pack",
		    (int)(ul > 0 && h->upstream[ul - 1] == '/' ? ul - 1 : ul), h->upstream, repo);
		for (k = 0; k <= c->nsessions; k++) {
			const struct session *s = k < c->nsessions ? &c->sessions[k] : NULL;
			const struct secret_src *src;

			if (s != NULL && !config_session_has_tool(s, "git"))
				continue;
			src = secret_resolve(c, s, h->secret);
			if (src == NULL || src->type == SECRET_GITHUB_APP ||
			    check_seen(&seen, &nseen, src, url, ca))
				continue;
			xasprintf(&what, "secret %s%s%s on git host %s (ls-remote %s)", src->name,
			    s != NULL && src != secret_resolve(c, NULL, src->name) ?
			    " of session " : "", s != NULL &&
			    src != secret_resolve(c, NULL, src->name) ? s->name : "",
			    h->name, repo);
			check_probe_one(what, src, &keyring_get(kr, s, src->name)->val, url,
			    "Basic", h->username, ca);
			free(what);
		}
		free(url);
	}
	for (i = 0; i < nseen; i++)
		free(seen[i].url);
	free(seen);
}

/* shimbridge check [--no-secrets] [--offline] */
int
check_cmd(struct admin *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ "no-secrets", no_argument, NULL, 'N' },
		{ "offline", no_argument, NULL, 'O' },
		{ NULL, 0, NULL, 0 },
	};
	struct config *c;
	struct keyring *kr = NULL;
	char *cause = NULL, **warn = NULL;
	int ch, no_secrets = 0, offline = 0;
	size_t i, nwarn = 0;

	adm_getopt_reset();
	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (ch == 'N')
			no_secrets = 1;
		else if (ch == 'O')
			offline = 1;
		else if (!adm_global_opt(a, ch, optarg)) {
			fprintf(stderr, "usage: shimbridge check [--no-secrets] [--offline]\n");
			return ADM_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "usage: shimbridge check [--no-secrets] [--offline]\n");
		return ADM_USAGE;
	}
	check_failures = 0;
	/* Secret values are loaded below: no core file, no ptrace by other root-less users. */
	(void)platform_harden_self();
	adm_store_paths(a);
	if (sodium_init() < 0) {
		fprintf(stderr, "shimbridge: libsodium failed to initialise\n");
		return ADM_FAIL;
	}
	/* Secret values go into a keyring (the config holds none), loaded once below. */
	if ((c = config_load(a->config, 1, &cause)) == NULL) {
		check_say("FAIL", "config %s", cause);
		free(cause);
		printf("1 problem: the configuration is invalid; shimbridged would refuse it\n");
		return ADM_INVALID;
	}
	check_say("ok", "config %s: version %s, %zu tools, %zu sessions, %zu secrets",
	    a->config, c->version, c->ntools, c->nsessions, c->nsecrets);
	for (i = 0; i < c->nwarnings; i++)
		check_say("warning", "%s", c->warnings[i]);
	if (!no_secrets) {
		kr = keyring_new();
		keyring_load(kr, c, &warn, &nwarn);
		for (i = 0; i < nwarn; i++) {
			check_say("warning", "%s", warn[i]);
			free(warn[i]);
		}
		free(warn);
	}
	check_users(c);
	check_socket(c);
	check_dirs(c);
	check_tools(c);
	check_store(a);
	check_shims(a);
	check_daemon(c);
	if (!no_secrets && !offline) {
		check_auth(c, kr);
		appcheck_run(c, kr, check_say);
	}
	keyring_free(kr);
	config_unref(c);
	if (check_failures > 0) {
		printf("%d problem%s found\n", check_failures, check_failures == 1 ? "" : "s");
		return ADM_INVALID;
	}
	printf("no problems found\n");
	return ADM_OK;
}
