/* Helpers shared by the admin commands: options, safe output, files, child programs. */
#include <sys/stat.h>
#include <sys/types.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "admin.h"
#include "hygiene.h"
#include "proc.h"
#include "util.h"
#include "valid.h"

/* Global options a command may also take after its own name. */
int
adm_global_opt(struct admin *a, int ch, const char *arg)
{
	switch (ch) {
	case 'c':
		a->config = arg;
		return 1;
	case ADM_OPT_STORE:
		a->store = arg;
		return 1;
	case ADM_OPT_KEY:
		a->key = arg;
		return 1;
	case ADM_OPT_SHIM_DIR:
		a->shim_dir = arg;
		return 1;
	case ADM_OPT_NO_RELOAD:
		a->no_reload = 1;
		return 1;
	}
	return 0;
}

/* Make the next getopt_long call start afresh at argv[1]. */
void
adm_getopt_reset(void)
{
#if defined(__GLIBC__)
	optind = 0;		/* glibc: full re-initialisation */
#else
	optind = 1;
	optreset = 1;
#endif
}

/* A copy of a string member, or of def when absent or not a string. */
static char *
adm_json_str(json_t *obj, const char *key, const char *def)
{
	json_t *v = obj != NULL ? json_object_get(obj, key) : NULL;

	if (json_is_string(v) && json_string_length(v) > 0)
		return xstrdup(json_string_value(v));
	return def != NULL ? xstrdup(def) : NULL;
}

/*
 * A string member found in JSON text that does not parse: the value of the first
 * "key": "..." after the first match of the extended regular expression before
 * (NULL: anywhere). Good enough to find a path in a config with a typo elsewhere.
 */
static char *
adm_salvage(const char *text, const char *before, const char *key)
{
	regex_t re;
	regmatch_t m[2];
	char *pat, *v = NULL;

	xasprintf(&pat, "%s\"%s\"[[:space:]]*:[[:space:]]*\"([^\"\\\n]+)\"",
	    before != NULL ? before : "", key);
	if (regcomp(&re, pat, REG_EXTENDED) == 0) {
		if (regexec(&re, text, 2, m, 0) == 0 && m[1].rm_so >= 0)
			v = xstrndup(text + m[1].rm_so, (size_t)(m[1].rm_eo - m[1].rm_so));
		regfree(&re);
	}
	free(pat);
	return v;
}

/* Replace *slot by v when v is not NULL. */
static void
adm_take(char **slot, char *v)
{
	if (v != NULL) {
		free(*slot);
		*slot = v;
	}
}

/*
 * The daemon's paths from a config, read without validation: status, reload and
 * audit must work while the config on disk is broken (that is when they matter).
 * A config that does not parse still yields every path that can be found in its
 * text, and the defaults for the rest.
 */
int
adm_paths_load(const char *config, struct adm_paths *p, char **cause)
{
	json_error_t je;
	json_t *root, *sock, *st;
	char *copy, *text = NULL;
	long len;
	FILE *f;
	int rc = 0;

	memset(p, 0, sizeof *p);
	root = json_load_file(config, 0, &je);
	if (root == NULL || !json_is_object(root)) {
		if (root == NULL && je.line > 0)
			xasprintf(cause, "%s:%d:%d: %s", config, je.line, je.column, je.text);
		else if (root == NULL)
			xasprintf(cause, "%s: %s", config, je.text);
		else
			xasprintf(cause, "%s:1:1: the top level is not a JSON object", config);
		json_decref(root);
		root = NULL;
		rc = 1;
	}
	sock = json_object_get(root, "socket");
	p->socket = adm_json_str(sock, "path", ADM_SOCKET);
	p->group = adm_json_str(sock, "group", NULL);
	p->audit = adm_json_str(root, "audit_log", ADM_AUDIT);
	p->state = adm_json_str(root, "state_dir", ADM_STATE);
	st = json_object_get(root, "store");
	p->store = adm_json_str(st, "path", ADM_STORE);
	p->key = json_is_string(json_object_get(st, "key_credential")) ? NULL :
	    adm_json_str(st, "key", ADM_KEY);
	copy = xstrdup(config);
	xasprintf(&p->sessions_dir, "%s/sessions.d", dirname(copy));
	free(copy);
	if (json_is_string(json_object_get(root, "sessions_dir"))) {
		free(p->sessions_dir);
		p->sessions_dir = adm_json_str(root, "sessions_dir", NULL);
	}
	if (rc != 0 && (f = fopen(config, "re")) != NULL) {
		/* Broken JSON: take what paths its text still names (first 1 MiB). */
		text = xmalloc(1024 * 1024 + 1);
		len = (long)fread(text, 1, 1024 * 1024, f);
		fclose(f);
		text[len] = '\0';
		adm_take(&p->socket, adm_salvage(text, "\"socket\"[[:space:]]*:[[:space:]]*\\{[^}]*",
		    "path"));
		adm_take(&p->group, adm_salvage(text, "\"socket\"[[:space:]]*:[[:space:]]*\\{[^}]*",
		    "group"));
		adm_take(&p->audit, adm_salvage(text, NULL, "audit_log"));
		adm_take(&p->state, adm_salvage(text, NULL, "state_dir"));
		adm_take(&p->sessions_dir, adm_salvage(text, NULL, "sessions_dir"));
		adm_take(&p->store, adm_salvage(text, "\"store\"[[:space:]]*:[[:space:]]*\\{[^}]*",
		    "path"));
		adm_take(&p->key, adm_salvage(text, "\"store\"[[:space:]]*:[[:space:]]*\\{[^}]*",
		    "key"));
		free(text);
	}
	json_decref(root);
	return rc;
}

/* Say that the config is broken and that a read-only command goes on without it. */
void
adm_paths_warn(const char *cause)
{
	fprintf(stderr, "shimbridge: warning: ");
	adm_puts_safe(stderr, cause);
	fprintf(stderr, "\nshimbridge: going on with the paths the config still names and "
	    "the defaults (shimbridge check shows every problem)\n");
}

/* Free what adm_paths_load filled in. */
void
adm_paths_free(struct adm_paths *p)
{
	free(p->socket);
	free(p->audit);
	free(p->state);
	free(p->sessions_dir);
	free(p->group);
	free(p->store);
	free(p->key);
	memset(p, 0, sizeof *p);
}

/* Length of a valid UTF-8 sequence at s, or 0. */
static size_t
adm_utf8_len(const unsigned char *s)
{
	size_t n, i;
	unsigned int cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4;
		cp = s[0] & 0x07;
	} else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp < 0xa0))
		return 0;
	return n;
}

/*
 * A printable copy of s: control characters (C0, DEL, C1) and invalid UTF-8 become
 * \xNN, so text a sandbox chose (argv in the audit log) cannot drive the terminal.
 */
char *
adm_safe(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s), o = 0, n;
	char *out = xmalloc(len * 4 + 1);

	while (*p != '\0') {
		n = adm_utf8_len(p);
		if (n == 1 && (*p < 0x20 || *p == 0x7f))
			n = 0;
		if (n == 0) {
			o += (size_t)snprintf(out + o, 5, "\\x%02x", *p);
			p++;
			continue;
		}
		memcpy(out + o, p, n);
		o += n;
		p += n;
	}
	out[o] = '\0';
	return out;
}

/* Print a string made safe for a terminal. */
void
adm_puts_safe(FILE *f, const char *s)
{
	char *safe = adm_safe(s);

	fputs(safe, f);
	free(safe);
}

/* Whether a word needs quoting to read back as one shell word. */
static int
adm_needs_quote(const char *s)
{
	if (*s == '\0')
		return 1;
	for (; *s != '\0'; s++) {
		if (!isalnum((unsigned char)*s) && strchr("-_./=:,@%+", *s) == NULL)
			return 1;
	}
	return 0;
}

/* argv from an audit record as one line: words quoted where needed, escapes shown. */
char *
adm_argv_join(json_t *argv)
{
	char *out = xstrdup(""), *tmp, *safe, *q;
	json_t *e;
	size_t i;

	if (!json_is_array(argv))
		return out;
	json_array_foreach(argv, i, e) {
		const char *w = json_is_string(e) ? json_string_value(e) : "?";

		safe = adm_safe(w);
		if (adm_needs_quote(safe)) {
			/* 'it'\''s' quoting, done on the already escaped text. */
			size_t n = 2, k, o = 0;

			for (k = 0; safe[k] != '\0'; k++)
				n += safe[k] == '\'' ? 4 : 1;
			q = xmalloc(n + 1);
			q[o++] = '\'';
			for (k = 0; safe[k] != '\0'; k++) {
				if (safe[k] == '\'') {
					memcpy(q + o, "'\\''", 4);
					o += 4;
				} else
					q[o++] = safe[k];
			}
			q[o++] = '\'';
			q[o] = '\0';
			free(safe);
			safe = q;
		}
		xasprintf(&tmp, "%s%s%s", out, i > 0 ? " " : "", safe);
		free(out);
		free(safe);
		out = tmp;
	}
	return out;
}

/*
 * Store and key paths: options first, then the config's "store" section, then the
 * defaults. The strings live until exit (the command is short-lived).
 */
void
adm_store_paths(struct admin *a)
{
	struct adm_paths p;
	char *cause = NULL;

	if (a->store != NULL && a->key != NULL)
		return;
	if (adm_paths_load(a->config, &p, &cause) != 0) {
		/* The store still works: at the path the broken file names, or the default. */
		if (access(a->config, F_OK) == 0)
			adm_paths_warn(cause);
		free(cause);
	}
	if (a->store == NULL)
		a->store = a->owned[0] = xstrdup(p.store);
	if (a->key == NULL) {
		if (p.key == NULL) {
			fprintf(stderr, "shimbridge: the config reads the store key from a systemd "
			    "credential; pass --key PATH to reach it\n");
			a->key = ADM_KEY;
		} else
			a->key = a->owned[1] = xstrdup(p.key);
	}
	adm_paths_free(&p);
}

/* Free the copies the context owns. */
void
adm_free(struct admin *a)
{
	free(a->owned[0]);
	free(a->owned[1]);
	a->owned[0] = a->owned[1] = NULL;
}

/* 1536 -> "1.5K". */
void
adm_human_size(unsigned long long bytes, char *buf, size_t len)
{
	static const char units[] = "BKMGTP";
	double v = (double)bytes;
	size_t u = 0;

	while (v >= 1024 && u < sizeof units - 2) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%lluB", bytes);
	else
		snprintf(buf, len, "%.1f%c", v, units[u]);
}

/* fsync a directory so a rename in it survives a crash. */
static int
adm_fsync_dir(const char *dir)
{
	int fd, rc;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

/* Write a file by temporary copy and rename, so readers see the old or the new file. */
int
adm_write_atomic(const char *dir, const char *name, const char *data, size_t len,
    mode_t mode, char **cause)
{
	char *tmp = NULL, *path = NULL;
	size_t off = 0;
	ssize_t n;
	int fd = -1, rc = -1;

	xasprintf(&path, "%s/%s", dir, name);
	xasprintf(&tmp, "%s/.%s.XXXXXX", dir, name);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		xasprintf(cause, "cannot create a file in %s: %s", dir, strerror(errno));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	if (fchmod(fd, mode) != 0) {
		xasprintf(cause, "chmod %s: %s", tmp, strerror(errno));
		goto out;
	}
	while (off < len) {
		n = write(fd, data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			xasprintf(cause, "write %s: %s", tmp, strerror(errno));
			goto out;
		}
		off += (size_t)n;
	}
	if (fsync(fd) != 0 || close(fd) != 0) {
		fd = -1;
		xasprintf(cause, "write %s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		xasprintf(cause, "rename %s to %s: %s", tmp, path, strerror(errno));
		goto out;
	}
	free(tmp);
	tmp = NULL;
	if (adm_fsync_dir(dir) != 0) {
		xasprintf(cause, "%s was written but fsync of %s failed: %s", path, dir,
		    strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (tmp != NULL) {
		unlink(tmp);
		free(tmp);
	}
	free(path);
	return rc;
}

/* mkdir that accepts an existing root-owned directory and refuses anything else. */
int
adm_mkdir_root(const char *path, mode_t mode, char **cause)
{
	return hygiene_mkdir_root(path, mode, 0, cause);
}

/* Run a system program (useradd, ...) with a fixed environment and wait for it. */
int
adm_run(char *const argv[], int quiet)
{
	static char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL };
	struct proc_req r;
	struct proc p;
	char *cause = NULL;
	int rc;

	fflush(stdout);
	fflush(stderr);
	proc_req_init(&r, argv[0], argv, envp);
	if (!quiet) {
		r.fd[1] = STDOUT_FILENO;
		r.fd[2] = STDERR_FILENO;
	}
	if (proc_spawn(&r, &p, &cause) != 0) {
		fprintf(stderr, "shimbridge: %s\n", cause);
		free(cause);
		return 127;
	}
	if ((rc = proc_wait(p.pid, &cause)) < 0) {
		fprintf(stderr, "shimbridge: %s\n", cause);
		free(cause);
	}
	return rc;
}

/* Config names: the same rule as the daemon's loader. */
int
adm_valid_name(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > 64 || s[0] == '.' || s[0] == '-')
		return 0;
	for (i = 0; i < n; i++) {
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
			return 0;
	}
	return 1;
}

/* OWNER/NAME, as the daemon's loader accepts it (the one validator in common/). */
int
adm_valid_repo(const char *s)
{
	return valid_repo(s);
}

/* PREFIX/libexec/shimbridge/shims when this binary is PREFIX/sbin/shimbridge. */
const char *
adm_default_shim_dir(void)
{
	static char dir[PATH_MAX];
	char exe[PATH_MAX], *slash;
	struct stat st;
	ssize_t n;

	if (dir[0] != '\0')
		return dir;
	n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')) != NULL) {
			*slash = '\0';
			if ((slash = strrchr(exe, '/')) != NULL &&
			    (strcmp(slash, "/sbin") == 0 || strcmp(slash, "/bin") == 0)) {
				*slash = '\0';
				if ((size_t)snprintf(dir, sizeof dir, "%s/libexec/shimbridge/shims",
				    exe) < sizeof dir && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
					return dir;
			}
		}
	}
	snprintf(dir, sizeof dir, "%s", ADM_SHIM_DIR);
	return dir;
}
