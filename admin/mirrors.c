/*
 * shimbridge mirror list|prune: the bridge-owned git mirrors under
 * STATE_DIR/mirrors/SESSION/HOST/OWNER/NAME.git. They are caches: pruning one
 * costs a full fetch on next use, nothing else.
 */
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "admin.h"
#include "spawn.h"
#include "util.h"

struct mirrors_entry {
	char		*session;
	char		*host;
	char		*repo;		/* OWNER/NAME */
	char		*path;
	unsigned long long bytes;
	time_t		 mtime;		/* newest in the tree */
};

/* Disk use and newest modification of a tree, without following symlinks. */
static void
mirrors_du(int dirfd, unsigned long long *bytes, time_t *mtime, int depth)
{
	struct dirent *de;
	struct stat st;
	DIR *d;

	if (depth > 64 || (d = fdopendir(dirfd)) == NULL) {
		close(dirfd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		*bytes += (unsigned long long)st.st_blocks * 512;
		if (st.st_mtime > *mtime)
			*mtime = st.st_mtime;
		if (S_ISDIR(st.st_mode)) {
			int fd = openat(dirfd, de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (fd >= 0)
				mirrors_du(fd, bytes, mtime, depth + 1);
		}
	}
	closedir(d);
}

/* Names of the subdirectories of path (no dot entries, no symlinks), sorted. */
static char **
mirrors_subdirs(const char *path, size_t *n)
{
	struct dirent *de;
	struct stat st;
	char **v = NULL;
	DIR *d;

	*n = 0;
	if ((d = opendir(path)) == NULL)
		return NULL;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		v = xreallocarray(v, *n + 1, sizeof *v);
		v[(*n)++] = xstrdup(de->d_name);
	}
	closedir(d);
	for (size_t i = 1; i < *n; i++) {
		for (size_t j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
			char *t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	}
	return v;
}

/* Free a vector from mirrors_subdirs. */
static void
mirrors_free_v(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Walk SESSION/HOST/OWNER/NAME.git under root. */
static struct mirrors_entry *
mirrors_scan(const char *root, const char *session, size_t *count)
{
	struct mirrors_entry *v = NULL;
	char **ss, **hs, **os, **ns, *p1, *p2, *p3;
	size_t nss, nhs, nos, nns, i, j, k, l;

	*count = 0;
	ss = mirrors_subdirs(root, &nss);
	for (i = 0; i < nss; i++) {
		if (session != NULL && strcmp(ss[i], session) != 0)
			continue;
		xasprintf(&p1, "%s/%s", root, ss[i]);
		hs = mirrors_subdirs(p1, &nhs);
		for (j = 0; j < nhs; j++) {
			xasprintf(&p2, "%s/%s", p1, hs[j]);
			os = mirrors_subdirs(p2, &nos);
			for (k = 0; k < nos; k++) {
				xasprintf(&p3, "%s/%s", p2, os[k]);
				ns = mirrors_subdirs(p3, &nns);
				for (l = 0; l < nns; l++) {
					struct mirrors_entry *e;
					size_t len = strlen(ns[l]);
					int fd;

					if (len < 5 || strcmp(ns[l] + len - 4, ".git") != 0)
						continue;
					v = xreallocarray(v, *count + 1, sizeof *v);
					e = &v[(*count)++];
					memset(e, 0, sizeof *e);
					e->session = xstrdup(ss[i]);
					e->host = xstrdup(hs[j]);
					xasprintf(&e->repo, "%s/%.*s", os[k], (int)(len - 4), ns[l]);
					xasprintf(&e->path, "%s/%s", p3, ns[l]);
					fd = open(e->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
					if (fd >= 0) {
						struct stat st;

						if (fstat(fd, &st) == 0)
							e->mtime = st.st_mtime;
						mirrors_du(fd, &e->bytes, &e->mtime, 0);
					}
				}
				mirrors_free_v(ns, nns);
				free(p3);
			}
			mirrors_free_v(os, nos);
			free(p2);
		}
		mirrors_free_v(hs, nhs);
		free(p1);
	}
	mirrors_free_v(ss, nss);
	return v;
}

/* Free the scan result. */
static void
mirrors_free(struct mirrors_entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].session);
		free(v[i].host);
		free(v[i].repo);
		free(v[i].path);
	}
	free(v);
}

/* Requests in flight per session, from the daemon (-1: unknown, daemon down). */
static long long
mirrors_running(json_t *st, const char *session)
{
	json_t *e;
	size_t i;

	if (st == NULL)
		return -1;
	json_array_foreach(json_object_get(st, "sessions"), i, e) {
		json_t *n = json_object_get(e, "name");

		if (json_is_string(n) && strcmp(json_string_value(n), session) == 0)
			return json_integer_value(json_object_get(e, "running"));
	}
	return 0;
}

/*
 * Remove one mirror under the same lock shimbridge-git takes, so a mirror in use
 * is never removed: 0 removed, 1 in use (kept), -1 error (errno).
 */
static int
mirrors_remove_one(const char *path)
{
	struct stat mst;
	char *lpath;
	int lfd, r, e;

	xasprintf(&lpath, "%s.lock", path);
	lfd = open(lpath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	free(lpath);
	/* A lock file we had to create must stay usable by the runner. */
	if (lfd >= 0 && lstat(path, &mst) == 0 && fchown(lfd, mst.st_uid, mst.st_gid) != 0)
		fprintf(stderr, "shimbridge: chown %s.lock: %s\n", path, strerror(errno));
	if (lfd < 0 || flock(lfd, LOCK_EX | LOCK_NB) != 0) {
		if (lfd >= 0)
			close(lfd);
		return 1;
	}
	r = spawn_rmtree(path);
	e = errno;
	close(lfd);
	errno = e;
	return r == 0 ? 0 : -1;
}

/* Remove every mirror of a session, then its directory under STATE/mirrors. */
int
mirrors_remove_session(const char *state_dir, const char *session)
{
	struct mirrors_entry *v;
	unsigned long long total = 0;
	char *root, *sdir, size[32];
	size_t n, i, removed = 0;
	int rc = 0, r;

	xasprintf(&root, "%s/mirrors", state_dir);
	xasprintf(&sdir, "%s/%s", root, session);
	v = mirrors_scan(root, session, &n);
	for (i = 0; i < n; i++) {
		if ((r = mirrors_remove_one(v[i].path)) == 0) {
			removed++;
			total += v[i].bytes;
			continue;
		}
		if (r == 1)
			fprintf(stderr, "shimbridge: kept %s (in use by a git operation; remove "
			    "it later with shimbridge mirror prune --session %s)\n", v[i].path,
			    session);
		else
			fprintf(stderr, "shimbridge: cannot remove all of %s: %s\n", v[i].path,
			    strerror(errno));
		rc = -1;
	}
	if (rc == 0 && access(sdir, F_OK) == 0 && spawn_rmtree(sdir) != 0) {
		fprintf(stderr, "shimbridge: cannot remove all of %s: %s\n", sdir,
		    strerror(errno));
		rc = -1;
	}
	if (removed > 0) {
		adm_human_size(total, size, sizeof size);
		printf("removed %zu mirror%s of session %s (%s)\n", removed,
		    removed == 1 ? "" : "s", session, size);
	}
	mirrors_free(v, n);
	free(root);
	free(sdir);
	return rc;
}

/* shimbridge mirror list|prune */
int
mirrors_cmd(struct admin *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ "session", required_argument, NULL, 's' },
		{ "older-than", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct mirrors_entry *v;
	struct adm_paths p;
	json_t *st = NULL;
	const char *sub, *session = NULL;
	char *root, *cause = NULL, *end, size[32], when[32];
	long days = -1;
	size_t n, i, removed = 0;
	int ch, prune, rc = ADM_OK, json = 0, r;
	json_t *rows = NULL;
	time_t now = time(NULL);

	if (argc < 2)
		goto usage;
	sub = argv[1];
	if (strcmp(sub, "list") != 0 && strcmp(sub, "ls") != 0 && strcmp(sub, "prune") != 0)
		goto usage;
	prune = strcmp(sub, "prune") == 0;
	argc--;
	argv++;
	adm_getopt_reset();
	while ((ch = getopt_long(argc, argv, "c:s:", longopts, NULL)) != -1) {
		if (ch == 's')
			session = optarg;
		else if (ch == 'j')
			json = 1;
		else if (ch == 'o') {
			errno = 0;
			days = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || days < 0 || days > 36500) {
				fprintf(stderr, "shimbridge: --older-than takes a number of days\n");
				return ADM_USAGE;
			}
		} else if (!adm_global_opt(a, ch, optarg))
			goto usage;
	}
	if (optind != argc || (!prune && days >= 0) || (prune && json))
		goto usage;
	if (adm_paths_load(a->config, &p, &cause) != 0) {
		adm_paths_warn(cause);
		free(cause);
		cause = NULL;
	}
	xasprintf(&root, "%s/mirrors", p.state);
	if (ctl_status(p.socket, &st, &cause) != 0) {
		st = NULL;
		free(cause);
		cause = NULL;
	}
	adm_paths_free(&p);
	v = mirrors_scan(root, session, &n);
	if (json)
		rows = json_array();
	else if (!prune) {
		printf("%-16s %-16s %-40s %9s  %s\n", "SESSION", "HOST", "REPOSITORY", "SIZE",
		    "LAST MODIFIED");
	}
	for (i = 0; i < n; i++) {
		struct tm tm;

		adm_human_size(v[i].bytes, size, sizeof size);
		localtime_r(&v[i].mtime, &tm);
		strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
		if (json) {
			json_t *o = json_object();
			char iso[32];

			gmtime_r(&v[i].mtime, &tm);
			strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
			/* Names come from directories: only valid UTF-8 becomes a string. */
			json_object_set_new(o, "session", json_string(v[i].session));
			json_object_set_new(o, "host", json_string(v[i].host));
			json_object_set_new(o, "repo", json_string(v[i].repo));
			json_object_set_new(o, "path", json_string(v[i].path));
			json_object_set_new(o, "bytes", json_integer((json_int_t)v[i].bytes));
			json_object_set_new(o, "modified", json_string(iso));
			json_array_append_new(rows, o);
			continue;
		}
		if (!prune) {
			char *line;

			/* Names derive from what sandboxes asked for: print them escaped. */
			xasprintf(&line, "%-16s %-16s %-40s %9s  %s", v[i].session, v[i].host,
			    v[i].repo, size, when);
			adm_puts_safe(stdout, line);
			putchar('\n');
			free(line);
			continue;
		}
		if (days >= 0 && now - v[i].mtime < (time_t)days * 86400)
			continue;
		if (mirrors_running(st, v[i].session) > 0) {
			printf("kept %s (session %s has requests in flight)\n", v[i].path,
			    v[i].session);
			continue;
		}
		if ((r = mirrors_remove_one(v[i].path)) == 1) {
			printf("kept %s (in use by a git operation)\n", v[i].path);
			continue;
		}
		if (r != 0) {
			fprintf(stderr, "shimbridge: cannot remove all of %s: %s\n",
			    v[i].path, strerror(errno));
			rc = ADM_FAIL;
			continue;
		}
		removed++;
		printf("removed %s (%s, last modified %s)\n", v[i].path, size, when);
	}
	if (json) {
		char *s = json_dumps(rows, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);

		printf("%s\n", s);
		free(s);
		json_decref(rows);
	} else if (prune)
		printf("%zu mirror%s removed\n", removed, removed == 1 ? "" : "s");
	else if (n == 0)
		printf("(no mirrors under %s)\n", root);
	mirrors_free(v, n);
	json_decref(st);
	free(root);
	return rc;
usage:
	fprintf(stderr, "usage: shimbridge mirror list [--session NAME] [--json]\n"
	    "       shimbridge mirror prune [--session NAME] [--older-than DAYS]\n");
	return ADM_USAGE;
}
