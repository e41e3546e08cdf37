/* Secret sources: loading values into guarded memory, never into ordinary heap. */
#include <sys/stat.h>

#include <sys/wait.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "config.h"
#include "ghapp.h"
#include "secret.h"
#include "spawn.h"
#include "store.h"
#include "util.h"

#define SECRET_MAX_BYTES	(64 * 1024)

/* Name of a source type. */
const char *
secret_type_name(enum secret_type t)
{
	switch (t) {
	case SECRET_FILE:	return "file";
	case SECRET_ENV:	return "env";
	case SECRET_SYSTEMD:	return "systemd";
	case SECRET_COMMAND:	return "command";
	case SECRET_STORE:	return "store";
	case SECRET_GITHUB_APP:	return "github_app";
	}
	return "?";
}

/* Parse {"source": "github_app", "app_id": ..., ...} (docs/GITHUB-APP.md). */
static int
secret_parse_app(json_t *obj, struct secret_src *s, char **cause)
{
	static const char *const keys[] = { "source", "app_id", "installation_id", "owner",
	    "private_key", "permissions", "host", "ca_file", "refresh_before", NULL };
	struct secret_app *a = &s->app;
	const char *key, *pv;
	json_t *v, *pk;
	size_t i;

	s->type = SECRET_GITHUB_APP;
	json_object_foreach(obj, key, v) {
		for (i = 0; keys[i] != NULL && strcmp(keys[i], key) != 0; i++)
			;
		if (keys[i] == NULL) {
			xasprintf(cause, "unknown key \"%s\" for source \"github_app\"", key);
			return -1;
		}
	}
	v = json_object_get(obj, "app_id");
	if (json_is_integer(v) && json_integer_value(v) > 0)
		xasprintf(&a->app_id, "%lld", (long long)json_integer_value(v));
	else if (json_is_string(v) && json_string_length(v) > 0 && json_string_length(v) <= 20 &&
	    strspn(json_string_value(v), "0123456789") == json_string_length(v))
		a->app_id = xstrdup(json_string_value(v));
	else {
		*cause = xstrdup("\"app_id\" must be the GitHub App's numeric id");
		return -1;
	}
	v = json_object_get(obj, "installation_id");
	pk = json_object_get(obj, "owner");
	if ((v == NULL) == (pk == NULL)) {
		*cause = xstrdup("give exactly one of \"installation_id\" and \"owner\"");
		return -1;
	}
	if (v != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) <= 0) {
			*cause = xstrdup("\"installation_id\" must be a positive integer");
			return -1;
		}
		a->installation_id = (long long)json_integer_value(v);
	} else {
		if (!json_is_string(pk) || json_string_length(pk) == 0 ||
		    json_string_length(pk) > 39 || strspn(json_string_value(pk),
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-") !=
		    json_string_length(pk)) {
			*cause = xstrdup("\"owner\" must be a GitHub user or organisation name");
			return -1;
		}
		a->owner = xstrdup(json_string_value(pk));
	}
	v = json_object_get(obj, "private_key");
	if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 256 ||
	    strchr(json_string_value(v), '\n') != NULL ||
	    strncmp(json_string_value(v), "-----", 5) == 0) {
		*cause = xstrdup("\"private_key\" must be the name of another secret that "
		    "holds the app's PEM key (never the key itself)");
		return -1;
	}
	a->private_key = xstrdup(json_string_value(v));
	if (strcmp(a->private_key, s->name) == 0) {
		*cause = xstrdup("\"private_key\" names this secret itself");
		return -1;
	}
	if ((v = json_object_get(obj, "permissions")) != NULL) {
		if (!json_is_object(v) || json_object_size(v) > 64) {
			*cause = xstrdup("\"permissions\" must be an object such as "
			    "{\"contents\": \"write\"}");
			return -1;
		}
		json_object_foreach(v, key, pk) {
			pv = json_string_value(pk);
			if (pv == NULL || (strcmp(pv, "read") != 0 && strcmp(pv, "write") != 0 &&
			    strcmp(pv, "admin") != 0) || key[0] == '\0' || strlen(key) > 64 ||
			    strspn(key, "abcdefghijklmnopqrstuvwxyz_") != strlen(key)) {
				xasprintf(cause, "\"permissions\": \"%.64s\" must be a permission "
				    "name mapped to \"read\", \"write\" or \"admin\"", key);
				return -1;
			}
		}
		a->permissions = json_deep_copy(v);
	}
	v = json_object_get(obj, "host");
	if (v != NULL && (!json_is_string(v) || json_string_length(v) == 0 ||
	    json_string_length(v) > 255 || strspn(json_string_value(v),
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-:") !=
	    json_string_length(v))) {
		*cause = xstrdup("\"host\" must be a host name such as github.com or "
		    "ghe.example.com:8443");
		return -1;
	}
	a->host = xstrdup(v != NULL ? json_string_value(v) : "github.com");
	if ((v = json_object_get(obj, "ca_file")) != NULL) {
		if (!json_is_string(v) || json_string_value(v)[0] != '/' ||
		    json_string_length(v) > 4096) {
			*cause = xstrdup("\"ca_file\" must be an absolute path");
			return -1;
		}
		a->ca_file = xstrdup(json_string_value(v));
	}
	a->refresh_before = 600;
	if ((v = json_object_get(obj, "refresh_before")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 3000) {
			*cause = xstrdup("\"refresh_before\" must be seconds from 1 to 3000");
			return -1;
		}
		a->refresh_before = (int)json_integer_value(v);
	}
	return 0;
}

/* Parse {"source": "file", "path": ...} and friends. */
int
secret_parse(json_t *obj, const char *name, const char *where, struct secret_src *s,
    char **cause)
{
	json_t *src, *arg;
	const char *type, *key;
	const char *argkey = NULL;
	size_t allowed;

	(void)where;
	memset(s, 0, sizeof *s);
	s->name = xstrdup(name);
	if (!json_is_object(obj) || !json_is_string(src = json_object_get(obj, "source"))) {
		*cause = xstrdup("expected an object with a \"source\" string");
		return -1;
	}
	type = json_string_value(src);
	if (strcmp(type, "github_app") == 0)
		return secret_parse_app(obj, s, cause);
	if (strcmp(type, "file") == 0) {
		s->type = SECRET_FILE;
		argkey = "path";
	} else if (strcmp(type, "env") == 0) {
		s->type = SECRET_ENV;
		argkey = "variable";
	} else if (strcmp(type, "systemd") == 0) {
		s->type = SECRET_SYSTEMD;
		argkey = "credential";
	} else if (strcmp(type, "store") == 0) {
		s->type = SECRET_STORE;
		argkey = "entry";
	} else if (strcmp(type, "command") == 0) {
		s->type = SECRET_COMMAND;
		argkey = "command";
	} else {
		xasprintf(cause, "unknown source \"%s\" (file, env, systemd, store, command, "
		    "github_app)", type);
		return -1;
	}
	allowed = 2;
	arg = json_object_get(obj, argkey);
	if (s->type == SECRET_COMMAND) {
		json_t *e, *ttl, *to;
		size_t i;

		if (!json_is_array(arg) || json_array_size(arg) == 0 || json_array_size(arg) > 64) {
			*cause = xstrdup("\"command\" must be an array: absolute program path, then arguments");
			return -1;
		}
		s->argv = xcalloc(json_array_size(arg) + 1, sizeof *s->argv);
		json_array_foreach(arg, i, e) {
			if (!json_is_string(e)) {
				*cause = xstrdup("\"command\" entries must be strings");
				return -1;
			}
			s->argv[s->nargv++] = xstrdup(json_string_value(e));
		}
		if (s->argv[0][0] != '/') {
			*cause = xstrdup("\"command\" must start with an absolute program path");
			return -1;
		}
		s->ttl = 300;
		s->timeout = 30;
		if ((ttl = json_object_get(obj, "ttl")) != NULL) {
			if (!json_is_integer(ttl) || json_integer_value(ttl) < 1 ||
			    json_integer_value(ttl) > 86400 * 30) {
				*cause = xstrdup("\"ttl\" must be seconds from 1 to 2592000");
				return -1;
			}
			s->ttl = (int)json_integer_value(ttl);
			allowed++;
		}
		if ((to = json_object_get(obj, "timeout")) != NULL) {
			if (!json_is_integer(to) || json_integer_value(to) < 1 ||
			    json_integer_value(to) > 600) {
				*cause = xstrdup("\"timeout\" must be seconds from 1 to 600");
				return -1;
			}
			s->timeout = (int)json_integer_value(to);
			allowed++;
		}
	} else {
		if (!json_is_string(arg) || json_string_length(arg) == 0 ||
		    json_string_length(arg) > 4096) {
			xasprintf(cause, "source \"%s\" needs a \"%s\" string", type, argkey);
			return -1;
		}
		s->arg = xstrdup(json_string_value(arg));
		if (s->type == SECRET_FILE && s->arg[0] != '/') {
			*cause = xstrdup("\"path\" must be absolute");
			return -1;
		}
		if (s->type == SECRET_SYSTEMD && strchr(s->arg, '/') != NULL) {
			*cause = xstrdup("\"credential\" is a credential name, not a path");
			return -1;
		}
	}
	if (json_object_size(obj) != allowed) {
		json_t *v;

		json_object_foreach(obj, key, v) {
			if (strcmp(key, "source") != 0 && strcmp(key, argkey) != 0 &&
			    strcmp(key, "ttl") != 0 && strcmp(key, "timeout") != 0)
				break;
		}
		xasprintf(cause, "unknown key \"%s\" for source \"%s\"", key ? key : "?", type);
		return -1;
	}
	return 0;
}

/* Keep a failure message for the secret (naming it, never holding its value). */
static void __attribute__((format(printf, 3, 4)))
secret_fail(const struct secret_src *s, struct secret_val *v, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	free(v->error);
	xasprintf(&v->error, "secret %s (%s): %s", s->name, secret_type_name(s->type), msg);
	free(msg);
}

/* Copy a value into guarded memory, dropping one trailing newline. */
static int
secret_set(const struct secret_src *s, struct secret_val *v, const unsigned char *in,
    size_t len)
{
	if (len > 0 && in[len - 1] == '\n')
		len--;
	if (len > 0 && in[len - 1] == '\r')
		len--;
	if (len == 0) {
		secret_fail(s, v, "the value is empty");
		return -1;
	}
	if ((v->value = sodium_malloc(len)) == NULL) {
		secret_fail(s, v, "cannot allocate guarded memory");
		return -1;
	}
	memcpy(v->value, in, len);
	sodium_mprotect_readonly(v->value);
	v->len = len;
	v->loaded_at = time(NULL);
	return 0;
}

/* Read a root-owned, owner-only file into guarded memory. */
static int
secret_read_file(const struct secret_src *s, struct secret_val *v, const char *path)
{
	unsigned char *buf = NULL;
	struct stat st;
	size_t off = 0;
	ssize_t n;
	int fd, rc = -1;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) < 0) {
		secret_fail(s, v, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		secret_fail(s, v, "%s is not a regular file", path);
		goto out;
	}
	if (st.st_uid != 0 || (st.st_mode & 077) != 0) {
		secret_fail(s, v, "%s must be owned by root with mode 0600 or stricter "
		    "(owner uid %u, mode %04o)", path, (unsigned)st.st_uid,
		    (unsigned)(st.st_mode & 07777));
		goto out;
	}
	if (st.st_size > SECRET_MAX_BYTES) {
		secret_fail(s, v, "%s is larger than %d bytes", path, SECRET_MAX_BYTES);
		goto out;
	}
	if ((buf = sodium_malloc((size_t)st.st_size + 1)) == NULL) {
		secret_fail(s, v, "cannot allocate guarded memory");
		goto out;
	}
	while (off < (size_t)st.st_size) {
		n = read(fd, buf + off, (size_t)st.st_size - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	rc = secret_set(s, v, buf, off);
out:
	if (buf != NULL)
		sodium_free(buf);
	close(fd);
	return rc;
}

/* Start a command source's program as the runner, with an empty environment. */
int
secret_command_spawn(const struct secret_src *s, const struct config *c, struct child *ch,
    char **cause)
{
	static char *envp[] = { "PATH=/usr/bin:/bin", "HOME=/", "LANG=C.UTF-8", NULL };
	struct spawn_req r;

	if (c == NULL) {
		*cause = xstrdup("no runner to run the command as");
		return -1;
	}
	memset(&r, 0, sizeof r);
	r.path = s->argv[0];
	r.argv = s->argv;
	r.envp = envp;
	r.uid = c->runner_uid;
	r.gid = c->runner_gid;
	r.cwd_fd = -1;
	r.cwd = "/";
	r.cpu_seconds = s->timeout;
	if (spawn_child(&r, ch, cause) != 0)
		return -1;
	close(ch->in);
	ch->in = -1;
	return 0;
}

/*
 * A command run ended: status 0 makes its output the new value; otherwise the
 * failure is recorded and the source backs off for min(ttl, 30 s). A value that
 * is still within its ttl is kept on failure: an expiring token beats none.
 */
void
secret_command_done(const struct secret_src *s, struct secret_val *v,
    const unsigned char *buf, size_t len, int status, const char *why)
{
	time_t now = time(NULL);
	unsigned char *old = v->value;
	time_t old_at = v->loaded_at;
	size_t old_len = v->len;

	free(v->error);
	v->error = NULL;
	if (why == NULL && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		v->value = NULL;
		if (secret_set(s, v, buf, len) == 0) {
			/*
			 * The replaced value may still be valid upstream, and requests started
			 * with it may still be running: keep masking it in audit lines.
			 */
			secret_val_push_prev(v, old, old_len);
			v->retry_at = 0;
			return;
		}
		v->value = old;	/* secret_set recorded why */
		v->len = old_len;
		v->loaded_at = old_at;
	} else if (why != NULL)
		secret_fail(s, v, "%s %s", s->argv[0], why);
	else
		secret_fail(s, v, "%s failed (status %d)", s->argv[0], WIFEXITED(status) ?
		    WEXITSTATUS(status) : 128 + WTERMSIG(status));
	v->retry_at = now + (s->ttl < 30 ? s->ttl : 30);
	if (v->value != NULL && now - v->loaded_at >= s->ttl) {
		sodium_free(v->value);
		v->value = NULL;
		v->len = 0;
	}
}

/* Run a command source to completion (config loading, admin-driven): bounded by its timeout. */
static void
secret_run(const struct secret_src *s, struct secret_val *v, const struct config *c)
{
	struct child ch;
	struct pollfd pfd;
	unsigned char *buf = NULL;
	size_t off = 0, elen = 0;
	char *cause = NULL, err[256], *why = NULL;
	struct timespec start, now;
	int status = 0, done = 0;
	ssize_t n;

	err[0] = '\0';
	if (secret_command_spawn(s, c, &ch, &cause) != 0) {
		secret_fail(s, v, "%s", cause);
		free(cause);
		return;
	}
	if ((buf = sodium_malloc(SECRET_MAX_BYTES + 1)) == NULL) {
		why = xstrdup("could not get guarded memory");
		kill(-ch.pid, SIGKILL);
		goto reap;
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!done) {
		int left;

		clock_gettime(CLOCK_MONOTONIC, &now);
		left = s->timeout * 1000 - (int)((now.tv_sec - start.tv_sec) * 1000 +
		    (now.tv_nsec - start.tv_nsec) / 1000000);
		if (left <= 0) {
			kill(-ch.pid, SIGKILL);
			xasprintf(&why, "did not finish within %d seconds", s->timeout);
			goto reap;
		}
		pfd.fd = ch.out;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, left > 1000 ? 1000 : left) < 0 && errno != EINTR)
			break;
		if (!(pfd.revents & (POLLIN | POLLHUP)))
			continue;
		n = read(ch.out, buf + off, SECRET_MAX_BYTES - off);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			done = 1;
		else if ((off += (size_t)n) == SECRET_MAX_BYTES) {
			kill(-ch.pid, SIGKILL);
			xasprintf(&why, "printed more than %d bytes", SECRET_MAX_BYTES);
			goto reap;
		}
	}
	/* Keep a little of stderr for the admin's error message. */
	while (elen < sizeof err - 1 && (n = read(ch.err, err + elen, sizeof err - 1 - elen)) > 0)
		elen += (size_t)n;
	err[elen] = '\0';
reap:
	while (waitpid(ch.pid, &status, 0) < 0 && errno == EINTR)
		;
	kill(-ch.pid, SIGKILL);
	close(ch.out);
	close(ch.err);
	if (why == NULL && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
		char *nl = strchr(err, '\n');

		if (nl != NULL)
			*nl = '\0';
		xasprintf(&why, "failed (status %d)%s%.200s", WIFEXITED(status) ?
		    WEXITSTATUS(status) : 128 + WTERMSIG(status), err[0] ? ": " : "", err);
	}
	secret_command_done(s, v, buf, off, status, why);
	free(why);
	if (buf != NULL)
		sodium_free(buf);
}

/* Load (or reload) a value. Store and command sources are handled by their modules. */
void
secret_load(const struct secret_src *s, struct secret_val *v, const struct config *c,
    const struct store *st, const char *store_error)
{
	const char *ev, *dir;
	char *path;

	if (v->value != NULL) {
		sodium_free(v->value);
		v->value = NULL;
		v->len = 0;
	}
	free(v->error);
	v->error = NULL;
	switch (s->type) {
	case SECRET_FILE:
		secret_read_file(s, v, s->arg);
		break;
	case SECRET_ENV:
		if ((ev = getenv(s->arg)) == NULL) {
			secret_fail(s, v, "variable %s is not set in the daemon's environment", s->arg);
			break;
		}
		if (strlen(ev) > SECRET_MAX_BYTES) {
			secret_fail(s, v, "variable %s is too long", s->arg);
			break;
		}
		secret_set(s, v, (const unsigned char *)ev, strlen(ev));
		break;
	case SECRET_SYSTEMD:
		if ((dir = getenv("CREDENTIALS_DIRECTORY")) == NULL || dir[0] != '/') {
			secret_fail(s, v, "CREDENTIALS_DIRECTORY is not set: add LoadCredential=%s:... "
			    "to the service", s->arg);
			break;
		}
		xasprintf(&path, "%s/%s", dir, s->arg);
		secret_read_file(s, v, path);
		free(path);
		break;
	case SECRET_STORE:
		if (st == NULL) {
			secret_fail(s, v, "%s", store_error != NULL ? store_error :
			    "the secret store is not open");
			break;
		}
		{
			unsigned char *val;
			size_t len;

			if (store_get(st, s->arg, &val, &len) != 0) {
				secret_fail(s, v, "no entry %s in the store (add it with `shimbridge "
				    "secret set %s`)", s->arg, s->arg);
				break;
			}
			secret_set(s, v, val, len);
			sodium_free(val);
		}
		break;
	case SECRET_COMMAND:
		secret_run(s, v, c);
		break;
	case SECRET_GITHUB_APP:
		/* Minted per session at its first need, by the daemon (ghmint.c). */
		break;
	}
}

/* Whether a command source should run again in the background (see secret.h). */
int
secret_due(const struct secret_src *s, const struct secret_val *v)
{
	time_t now = time(NULL);

	if (s->type != SECRET_COMMAND || v->refreshing)
		return 0;
	if (now < v->retry_at)
		return 0;
	/* Refresh ahead of expiry (by a fifth, at least 1 s), so requests never wait. */
	return v->value == NULL || now - v->loaded_at >= s->ttl - (s->ttl >= 10 ? s->ttl / 5 : 1);
}

/* Whether the value may be used now: loaded, and for commands not past its ttl. */
int
secret_usable(const struct secret_src *s, const struct secret_val *v)
{
	if (v->value == NULL)
		return 0;
	if (s->type == SECRET_GITHUB_APP)
		return time(NULL) < v->expires_at;
	return s->type != SECRET_COMMAND || time(NULL) - v->loaded_at < s->ttl;
}

/* Whether an unusable value is being fetched (a github_app mint under way). */
int
secret_pending(const struct secret_src *s, const struct secret_val *v)
{
	return s->type == SECRET_GITHUB_APP && v->refreshing;
}

/* Release a definition. */
void
secret_clear(struct secret_src *s)
{
	size_t i;

	for (i = 0; i < s->nargv; i++)
		free(s->argv[i]);
	free(s->argv);
	free(s->name);
	free(s->arg);
	free(s->app.app_id);
	free(s->app.owner);
	free(s->app.private_key);
	json_decref(s->app.permissions);
	free(s->app.host);
	free(s->app.ca_file);
	memset(s, 0, sizeof *s);
}

/* Wipe and release a value and its state. */
void
secret_val_clear(struct secret_val *v)
{
	size_t i;

	if (v->value != NULL)
		sodium_free(v->value);
	for (i = 0; i < v->nprev; i++)
		sodium_free(v->prev[i]);
	free(v->error);
	ghapp_state_free(v->app);
	memset(v, 0, sizeof *v);
}

/* A replaced value, newest first; the oldest beyond SECRET_PREV_MAX goes. */
void
secret_val_push_prev(struct secret_val *v, unsigned char *value, size_t len)
{
	if (value == NULL)
		return;
	if (v->nprev == SECRET_PREV_MAX)
		sodium_free(v->prev[--v->nprev]);
	memmove(v->prev + 1, v->prev, v->nprev * sizeof v->prev[0]);
	memmove(v->prev_len + 1, v->prev_len, v->nprev * sizeof v->prev_len[0]);
	v->prev[0] = value;
	v->prev_len[0] = len;
	v->nprev++;
}

/* The session's override of a secret, else the host's definition. */
const struct secret_src *
secret_resolve(const struct config *c, const struct session *s, const char *name)
{
	size_t i;

	if (s != NULL) {
		for (i = 0; i < s->nsecrets; i++) {
			if (strcmp(s->secrets[i].name, name) == 0)
				return &s->secrets[i];
		}
	}
	for (i = 0; i < c->nsecrets; i++) {
		if (strcmp(c->secrets[i].name, name) == 0)
			return &c->secrets[i];
	}
	return NULL;
}
