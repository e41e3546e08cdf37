/*
 * shimbridge session add|list|remove|exec: sandbox session accounts. A session is
 * a locked system user with a private home and workspace, the shims first in its
 * PATH, a git config that sends GitHub remotes through the bridge, and a drop-in
 * sessions.d/NAME.json that the daemon loads.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "admin.h"
#include "config.h"
#include "spawn.h"
#include "util.h"

#define SESSIONS_GECOS		"shimbridge session "	/* marks the accounts we own */
#define SESSIONS_RUNNER_GECOS	"shimbridge runner of session "	/* and their runners */
#define SESSIONS_BEGIN		"# >>> shimbridge >>>"
#define SESSIONS_END		"# <<< shimbridge <<<"
#define SESSIONS_FILE_MAX	(1024 * 1024)

static const char *const sessions_useradd_paths[] = { "/usr/sbin/useradd", "/sbin/useradd", NULL };
static const char *const sessions_userdel_paths[] = { "/usr/sbin/userdel", "/sbin/userdel", NULL };
static const char *const sessions_usermod_paths[] = { "/usr/sbin/usermod", "/sbin/usermod", NULL };

/* The first path in list that exists, or NULL. */
static const char *
sessions_prog(const char *const *list)
{
	for (; *list != NULL; list++) {
		if (access(*list, X_OK) == 0)
			return *list;
	}
	return NULL;
}

/* Load the config as the daemon would (without secrets); prints why not. */
static struct config *
sessions_config(const struct admin *a)
{
	struct config *c;
	char *cause = NULL;

	if ((c = config_load(a->config, 1, &cause)) == NULL) {
		fprintf(stderr, "shimbridge: the configuration is invalid: %s\n", cause);
		free(cause);
	}
	return c;
}

/* User names that useradd takes everywhere: [a-z_][a-z0-9_-]*, at most 32. */
static int
sessions_valid_user(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > 32 || !((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
		return 0;
	for (i = 1; i < n; i++) {
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '_' || s[i] == '-'))
			return 0;
	}
	return 1;
}

/* Whether path is dir itself or below it. */
static int
sessions_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/' ||
	    (n > 0 && dir[n - 1] == '/'));
}

/* What the user-side setup needs, passed into the child that has become the user. */
struct sessions_setup {
	const char	*name;		/* session */
	const char	*user;
	const char	*home;
	const char	*workspace;	/* NULL when outside the home (root made it) */
	const char	*shim_dir;
	const char	*socket;	/* NULL when the shim's default applies */
	char		*git_urls;	/* [url] blocks for every configured git host */
};

/*
 * The git config lines that send every configured git host through the bridge:
 * https, scp-like ssh (only for a host without a port) and ssh URLs. Without a
 * git section, github.com as before.
 */
static char *
sessions_git_urls(const struct config *c)
{
	char *out = xstrdup(""), *tmp;
	size_t i, n = c->ngit_hosts > 0 ? c->ngit_hosts : 1;

	for (i = 0; i < n; i++) {
		const char *h = c->ngit_hosts > 0 ? c->git_hosts[i].name : "github.com";
		char *scp = NULL;

		if (strchr(h, ':') == NULL)
			xasprintf(&scp, "\tinsteadOf = git@%s:\n", h);
		xasprintf(&tmp, "%s[url \"shimbridge::https://%s/\"]\n"
		    "\tinsteadOf = https://%s/\n"
		    "%s"
		    "\tinsteadOf = ssh://git@%s/\n", out, h, h, scp != NULL ? scp : "", h);
		free(scp);
		free(out);
		out = tmp;
	}
	return out;
}

/* Read a whole small file the user owns; "" when it does not exist. */
static char *
sessions_slurp(const char *path)
{
	char *buf = NULL;
	size_t len = 0;
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) < 0)
		return errno == ENOENT ? xstrdup("") : NULL;
	buf = xmalloc(SESSIONS_FILE_MAX + 1);
	while (len < SESSIONS_FILE_MAX) {
		n = read(fd, buf + len, SESSIONS_FILE_MAX - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

/*
 * Put our marked block into a file, replacing an earlier one: at the top (before
 * a "return if not interactive" line, for ~/.bashrc) or at the end.
 */
static int
sessions_put_block(const char *home, const char *file, const char *block, int top)
{
	char *path, *old, *rest, *b, *e, *out = NULL;
	int rc;

	xasprintf(&path, "%s/%s", home, file);
	if ((old = sessions_slurp(path)) == NULL) {
		fprintf(stderr, "shimbridge: cannot read %s: %s\n", path, strerror(errno));
		free(path);
		return -1;
	}
	rest = old;
	if ((b = strstr(old, SESSIONS_BEGIN)) != NULL &&
	    (e = strstr(b, SESSIONS_END)) != NULL) {
		e += strlen(SESSIONS_END);
		if (*e == '\n')
			e++;
		memmove(b, e, strlen(e) + 1);
	}
	if (top)
		xasprintf(&out, "%s%s", block, rest);
	else
		xasprintf(&out, "%s%s%s", rest, *rest != '\0' &&
		    rest[strlen(rest) - 1] != '\n' ? "\n" : "", block);
	rc = adm_write_atomic(home, file, out, strlen(out), 0644, &path);
	if (rc != 0)
		fprintf(stderr, "shimbridge: %s\n", path);
	free(path);
	free(old);
	free(out);
	return rc;
}

/* In the child that has become the user: home, workspace and dotfiles. */
static int
sessions_setup_user(void *arg)
{
	const struct sessions_setup *s = arg;
	char *sh = NULL, *git = NULL, *sock = NULL;
	int rc = ADM_FAIL;

	if (chmod(s->home, 0700) != 0) {
		fprintf(stderr, "shimbridge: chmod %s: %s\n", s->home, strerror(errno));
		return ADM_FAIL;
	}
	if (s->workspace != NULL) {
		char *copy = xstrdup(s->workspace), *p = NULL;

		/* mkdir -p below the home, as the user. */
		if (strlen(copy) > strlen(s->home) + 1)
			p = copy + strlen(s->home) + 1;
		for (; p != NULL && (p = strchr(p, '/')) != NULL; p++) {
			*p = '\0';
			if (mkdir(copy, 0700) != 0 && errno != EEXIST) {
				fprintf(stderr, "shimbridge: cannot create %s: %s\n", copy,
				    strerror(errno));
				free(copy);
				return ADM_FAIL;
			}
			*p = '/';
		}
		free(copy);
		if (mkdir(s->workspace, 0700) != 0 && errno != EEXIST) {
			fprintf(stderr, "shimbridge: cannot create %s: %s\n", s->workspace,
			    strerror(errno));
			return ADM_FAIL;
		}
		if (chmod(s->workspace, 0700) != 0) {
			fprintf(stderr, "shimbridge: chmod %s: %s\n", s->workspace,
			    strerror(errno));
			return ADM_FAIL;
		}
	}
	if (s->socket != NULL)
		xasprintf(&sock, "SHIMBRIDGE_SOCKET='%s'\nexport SHIMBRIDGE_SOCKET\n", s->socket);
	/*
	 * Prepend the shims unless they already come first, so nested shells do not
	 * grow PATH. This is convenience, not a boundary: the agent may change PATH.
	 */
	xasprintf(&sh, SESSIONS_BEGIN "\n"
	    "# Written by `shimbridge session add %s`: host tools through shimbridge.\n"
	    "case \"$PATH\" in\n"
	    "'%s'|'%s':*) ;;\n"
	    "*) PATH='%s':\"$PATH\" ;;\n"
	    "esac\n"
	    "export PATH\n"
	    "%s"
	    SESSIONS_END "\n", s->name, s->shim_dir, s->shim_dir, s->shim_dir,
	    sock != NULL ? sock : "");
	xasprintf(&git, SESSIONS_BEGIN "\n"
	    "# Written by `shimbridge session add %s`: remotes on the configured git hosts\n"
	    "# go through the bridge.\n"
	    "%s"
	    "[user]\n"
	    "\tname = %s agent\n"
	    "\temail = %s@localhost\n"
	    SESSIONS_END "\n", s->name, s->git_urls, s->name, s->user);
	if (sessions_put_block(s->home, ".profile", sh, 0) != 0 ||
	    sessions_put_block(s->home, ".bashrc", sh, 1) != 0 ||
	    sessions_put_block(s->home, ".gitconfig", git, 0) != 0)
		goto out;
	rc = ADM_OK;
out:
	free(sh);
	free(git);
	free(sock);
	return rc;
}

/* Create a workspace outside the home: parents by root, the last part owned by the user. */
static int
sessions_mkdir_outside(const char *dir, const struct users_id *id)
{
	char *copy = xstrdup(dir), *p;
	struct stat st;
	int fd, created = 0;

	for (p = copy + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdir(copy, 0755) != 0 && errno != EEXIST) {
			fprintf(stderr, "shimbridge: cannot create %s: %s\n", copy,
			    strerror(errno));
			free(copy);
			return -1;
		}
		*p = '/';
	}
	free(copy);
	if (mkdir(dir, 0700) == 0)
		created = 1;
	else if (errno != EEXIST) {
		fprintf(stderr, "shimbridge: cannot create %s: %s\n", dir, strerror(errno));
		return -1;
	}
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    fstat(fd, &st) != 0) {
		fprintf(stderr, "shimbridge: cannot open %s: %s\n", dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	/*
	 * Only a directory made just now, or one the user owns already, is handed over:
	 * a mistyped --workspace /srv must not give a sandbox a system directory.
	 */
	if (!created && st.st_uid != id->uid) {
		fprintf(stderr, "shimbridge: %s exists and belongs to uid %u, not %s; choose a "
		    "new directory\n", dir, (unsigned)st.st_uid, id->name);
		close(fd);
		return -1;
	}
	if (fchown(fd, id->uid, id->gid) != 0 || fchmod(fd, 0700) != 0) {
		fprintf(stderr, "shimbridge: cannot give %s to %s: %s\n", dir, id->name,
		    strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Split "a,b" and repeated options into a JSON array of strings. */
static void
sessions_add_list(json_t *arr, const char *s)
{
	char *copy = xstrdup(s), *p = copy, *w;

	while ((w = strsep(&p, ",")) != NULL) {
		if (*w != '\0')
			json_array_append_new(arr, json_string(w));
	}
	free(copy);
}

/* Delete an account we created (rollback, or session remove). */
static int
sessions_userdel(const char *user)
{
	const char *prog = sessions_prog(sessions_userdel_paths);
	char *argv[] = { (char *)prog, (char *)user, NULL };

	if (prog == NULL) {
		fprintf(stderr, "shimbridge: userdel not found\n");
		return -1;
	}
	return adm_run(argv, 0) == 0 ? 0 : -1;
}

/* Whether user was made by session add as the runner of session name. */
static int
sessions_runner_owned(const char *user, const char *name)
{
	struct passwd *pw = getpwnam(user);
	char *want;
	int ok;

	if (pw == NULL || pw->pw_gecos == NULL)
		return 0;
	xasprintf(&want, SESSIONS_RUNNER_GECOS "%s", name);
	ok = strcmp(pw->pw_gecos, want) == 0;
	free(want);
	return ok;
}

/*
 * The session's own runner: a locked system user with its own group, no home,
 * no login shell. 1 if created, 0 if a runner we made for this session earlier
 * is reused, -1 (said why) if the name is taken or useradd fails.
 */
static int
sessions_add_runner(const struct config *c, const char *runner, const char *name)
{
	const char *prog = sessions_prog(sessions_useradd_paths);
	const char *mprog = sessions_prog(sessions_usermod_paths);
	struct passwd *pw;
	char *gecos, *lv[] = { (char *)mprog, "--lock", (char *)runner, NULL };
	char *uv[] = { (char *)prog, "--system", "--no-create-home", "--home-dir",
	    "/nonexistent", "--shell", "/usr/sbin/nologin", "--user-group", "--comment",
	    NULL, (char *)runner, NULL };
	size_t i;

	if ((pw = getpwnam(runner)) != NULL) {
		for (i = 0; i < c->nsessions; i++) {
			if (c->sessions[i].runner_uid == pw->pw_uid || c->sessions[i].uid == pw->pw_uid)
				break;
		}
		if (!sessions_runner_owned(runner, name) || i < c->nsessions ||
		    pw->pw_uid == c->runner_uid) {
			fprintf(stderr, "shimbridge: user %s exists and is not a free runner made "
			    "for session %s; remove it or choose another session name\n", runner,
			    name);
			return -1;
		}
		printf("using existing runner %s (uid %u)\n", runner, (unsigned)pw->pw_uid);
		return 0;
	}
	if (prog == NULL) {
		fprintf(stderr, "shimbridge: useradd not found; cannot create the runner %s\n",
		    runner);
		return -1;
	}
	xasprintf(&gecos, SESSIONS_RUNNER_GECOS "%s", name);
	uv[9] = gecos;
	if (adm_run(uv, 0) != 0) {
		fprintf(stderr, "shimbridge: useradd %s failed\n", runner);
		free(gecos);
		return -1;
	}
	free(gecos);
	if (mprog == NULL || adm_run(lv, 1) != 0)
		fprintf(stderr, "shimbridge: warning: cannot lock the password of %s\n", runner);
	if ((pw = getpwnam(runner)) == NULL) {
		fprintf(stderr, "shimbridge: useradd did not create %s\n", runner);
		return -1;
	}
	printf("created runner %s (uid %u)\n", runner, (unsigned)pw->pw_uid);
	return 1;
}

/* The drop-in file of a session. */
static char *
sessions_dropin(const struct config *c, const char *name)
{
	char *path;

	xasprintf(&path, "%s/%s.json", c->sessions_dir, name);
	return path;
}

/* session add NAME [options] */
static int
sessions_add(struct admin *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ "user", required_argument, NULL, 'u' },
		{ "workspace", required_argument, NULL, 'w' },
		{ "tools", required_argument, NULL, 't' },
		{ "repo", required_argument, NULL, 'r' },
		{ "repos", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	struct sessions_setup setup;
	struct users_id id = { 0 };
	struct config *c = NULL, *c2 = NULL;
	const char *name, *user_opt = NULL, *ws_opt = NULL, *group;
	char *user = NULL, *home = NULL, *ws = NULL, *text = NULL, *cause = NULL;
	char *dropin = NULL, *fname = NULL, real[PATH_MAX], *runner = NULL;
	json_t *tools = json_array(), *repos = json_array(), *obj = NULL, *e;
	int ch, reload = 1, created = 0, rc = ADM_FAIL, n, runner_created = 0;
	size_t i;

	memset(&setup, 0, sizeof setup);
	adm_getopt_reset();
	while ((ch = getopt_long(argc, argv, "c:u:w:t:r:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'u':
			user_opt = optarg;
			break;
		case 'w':
			ws_opt = optarg;
			break;
		case 't':
			sessions_add_list(tools, optarg);
			break;
		case 'r':
			sessions_add_list(repos, optarg);
			break;
		default:
			if (!adm_global_opt(a, ch, optarg))
				goto usage;
		}
	}
	if (optind != argc - 1)
		goto usage;
	reload = !a->no_reload;
	name = argv[optind];
	if (!adm_valid_name(name)) {
		fprintf(stderr, "shimbridge: invalid session name %s: 1-64 characters of "
		    "A-Z a-z 0-9 _ . -, not starting with . or -\n", name);
		rc = ADM_INVALID;
		goto out;
	}
	if (user_opt != NULL)
		user = xstrdup(user_opt);
	else
		xasprintf(&user, "sb-%s", name);
	if (!sessions_valid_user(user)) {
		fprintf(stderr, "shimbridge: %s is not a portable user name (a-z, 0-9, _ "
		    "and -, at most 32); choose one with --user\n", user);
		rc = ADM_INVALID;
		goto out;
	}
	xasprintf(&runner, "sb-%s-run", name);
	if (!sessions_valid_user(runner)) {
		fprintf(stderr, "shimbridge: the session's runner would be %s, not a portable "
		    "user name (a-z, 0-9, _ and -, at most 32); choose a shorter lower-case "
		    "session name\n", runner);
		rc = ADM_INVALID;
		goto out;
	}
	if (ws_opt != NULL && ws_opt[0] != '/') {
		fprintf(stderr, "shimbridge: --workspace must be an absolute path\n");
		rc = ADM_INVALID;
		goto out;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "shimbridge: session add must run as root\n");
		goto out;
	}

	/* Everything that can be checked before an account exists. */
	if ((c = sessions_config(a)) == NULL) {
		rc = ADM_INVALID;
		goto out;
	}
	if (config_session_by_name(c, name) != NULL) {
		fprintf(stderr, "shimbridge: session %s already exists\n", name);
		rc = ADM_INVALID;
		goto out;
	}
	json_array_foreach(tools, i, e) {
		const char *t = json_string_value(e);

		if (config_tool(c, t) == NULL && !(strcmp(t, "git") == 0 && c->git_helper != NULL)) {
			fprintf(stderr, "shimbridge: tool %s is not defined in %s%s\n", t,
			    a->config, strcmp(t, "git") == 0 ?
			    " (git needs the \"git\" section with a helper)" : "");
			rc = ADM_INVALID;
			goto out;
		}
	}
	json_array_foreach(repos, i, e) {
		if (!adm_valid_repo(json_string_value(e))) {
			fprintf(stderr, "shimbridge: %s is not OWNER/NAME\n", json_string_value(e));
			rc = ADM_INVALID;
			goto out;
		}
	}
	dropin = sessions_dropin(c, name);
	if (access(dropin, F_OK) == 0) {
		fprintf(stderr, "shimbridge: %s already exists\n", dropin);
		rc = ADM_INVALID;
		goto out;
	}
	group = c->socket_group;
	if (group == NULL)
		fprintf(stderr, "shimbridge: warning: socket.group is not set in %s; %s will "
		    "not be able to reach the bridge socket\n", a->config, user);

	/* The account. */
	if (users_lookup(user, &id) == 0) {
		if (id.uid == 0 || id.uid == c->runner_uid) {
			fprintf(stderr, "shimbridge: %s is root or the runner; refusing\n", user);
			rc = ADM_INVALID;
			goto out;
		}
		if (config_session_by_uid(c, id.uid) != NULL) {
			fprintf(stderr, "shimbridge: user %s already belongs to session %s\n",
			    user, config_session_by_uid(c, id.uid)->name);
			rc = ADM_INVALID;
			goto out;
		}
		printf("using existing user %s (uid %u)\n", user, (unsigned)id.uid);
		if (group != NULL) {
			const char *prog = sessions_prog(sessions_usermod_paths);
			char *mv[] = { (char *)prog, "-a", "-G", (char *)group, user, NULL };

			if (prog == NULL || adm_run(mv, 0) != 0) {
				fprintf(stderr, "shimbridge: cannot add %s to group %s\n", user,
				    group);
				goto out;
			}
		}
	} else {
		const char *prog = sessions_prog(sessions_useradd_paths);
		char *gecos;
		char *uv[16];

		if (prog == NULL) {
			fprintf(stderr, "shimbridge: useradd not found; create the user %s "
			    "yourself and pass --user\n", user);
			goto out;
		}
		xasprintf(&home, "/home/%s", user);
		xasprintf(&gecos, SESSIONS_GECOS "%s", name);
		n = 0;
		uv[n++] = (char *)prog;
		uv[n++] = "--system";
		uv[n++] = "--create-home";
		uv[n++] = "--home-dir";
		uv[n++] = home;
		uv[n++] = "--shell";
		uv[n++] = "/bin/bash";
		uv[n++] = "--comment";
		uv[n++] = gecos;
		if (group != NULL) {
			uv[n++] = "--groups";
			uv[n++] = (char *)group;
		}
		uv[n++] = user;
		uv[n] = NULL;
		if (adm_run(uv, 0) != 0) {
			fprintf(stderr, "shimbridge: useradd %s failed\n", user);
			free(gecos);
			goto out;
		}
		free(gecos);
		created = 1;
		{
			const char *mprog = sessions_prog(sessions_usermod_paths);
			char *lv[] = { (char *)mprog, "--lock", user, NULL };

			/* No password login, ever: the account is entered with session exec. */
			if (mprog == NULL || adm_run(lv, 1) != 0)
				fprintf(stderr, "shimbridge: warning: cannot lock the password "
				    "of %s\n", user);
		}
		if (users_lookup(user, &id) != 0) {
			fprintf(stderr, "shimbridge: useradd did not create %s\n", user);
			goto out;
		}
		printf("created user %s (uid %u, home %s)\n", user, (unsigned)id.uid, id.home);
	}

	/* Home, workspace, dotfiles: written as the user, who owns them. */
	if (ws_opt != NULL)
		ws = xstrdup(ws_opt);
	else
		xasprintf(&ws, "%s/work", id.home);
	setup.name = name;
	setup.user = user;
	setup.home = id.home;
	setup.workspace = sessions_under(ws, id.home) ? ws : NULL;
	setup.shim_dir = a->shim_dir;
	setup.socket = strcmp(c->socket_path, ADM_SOCKET) != 0 ? c->socket_path : NULL;
	setup.git_urls = sessions_git_urls(c);
	if (setup.workspace == NULL && sessions_mkdir_outside(ws, &id) != 0)
		goto rollback;
	{
		struct stat st;

		if (lstat(id.home, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != id.uid) {
			fprintf(stderr, "shimbridge: %s is not a directory owned by %s\n",
			    id.home, user);
			goto rollback;
		}
	}
	if (users_run_as(&id, sessions_setup_user, &setup) != ADM_OK)
		goto rollback;
	if (realpath(ws, real) == NULL) {
		fprintf(stderr, "shimbridge: %s: %s\n", ws, strerror(errno));
		goto rollback;
	}
	{
		struct stat st;

		/* An existing user could have swapped in a symlink: the result must be its own. */
		if (lstat(real, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != id.uid) {
			fprintf(stderr, "shimbridge: workspace %s is not a directory owned by %s\n",
			    real, user);
			goto rollback;
		}
	}

	/* Its own runner: no uid shared with another session's tools. */
	if ((runner_created = sessions_add_runner(c, runner, name)) < 0) {
		runner_created = 0;
		goto rollback;
	}

	/* The drop-in, then the whole config as the daemon will see it. */
	obj = json_object();
	json_object_set_new(obj, "name", json_string(name));
	json_object_set_new(obj, "user", json_string(user));
	json_object_set_new(obj, "runner", json_string(runner));
	json_object_set_new(obj, "workspace", json_string(real));
	json_object_set(obj, "tools", tools);
	json_object_set(obj, "repos", repos);
	text = json_dumps(obj, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	xasprintf(&fname, "%s.json", name);
	if (adm_mkdir_root(c->sessions_dir, 0700, &cause) != 0 ||
	    adm_write_atomic(c->sessions_dir, fname, text, strlen(text), 0600, &cause) != 0) {
		fprintf(stderr, "shimbridge: %s\n", cause);
		goto rollback;
	}
	if ((c2 = config_load(a->config, 1, &cause)) == NULL) {
		fprintf(stderr, "shimbridge: the new session makes the configuration invalid, "
		    "undoing: %s\n", cause);
		unlink(dropin);
		rc = ADM_INVALID;
		goto rollback;
	}
	for (i = 0; i < c2->nwarnings; i++)
		fprintf(stderr, "shimbridge: warning: %s\n", c2->warnings[i]);
	printf("session %s: user %s, runner %s, workspace %s, drop-in %s\n", name, user, runner,
	    real, dropin);
	if (json_array_size(tools) == 0)
		fprintf(stderr, "shimbridge: warning: session %s may use no tool; pass "
		    "--tools\n", name);
	rc = reload ? ctl_reload(a, 1) : ADM_OK;
	goto out;

rollback:
	if (runner_created && sessions_userdel(runner) == 0)
		fprintf(stderr, "shimbridge: removed the new runner %s again\n", runner);
	if (created) {
		users_kill_all(id.uid);
		if (sessions_userdel(user) == 0 && id.home != NULL)
			(void)spawn_rmtree(id.home);
		fprintf(stderr, "shimbridge: removed the new user %s again\n", user);
	}
	goto out;
usage:
	fprintf(stderr, "usage: shimbridge session add NAME [--user USER] [--workspace DIR] "
	    "[--tools gh,git] [--repo OWNER/NAME]... [--shim-dir DIR] [--no-reload]\n");
	rc = ADM_USAGE;
out:
	free(setup.git_urls);
	users_id_free(&id);
	config_unref(c);
	config_unref(c2);
	json_decref(tools);
	json_decref(repos);
	json_decref(obj);
	free(user);
	free(home);
	free(ws);
	free(text);
	free(cause);
	free(dropin);
	free(fname);
	free(runner);
	return rc;
}

/* A JSON array of strings from a vector. */
static json_t *
sessions_strv(char *const *v, size_t n)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; i < n; i++)
		json_array_append_new(arr, json_string(v[i]));
	return arr;
}

/* Requests in flight for a session from the daemon's status, or JSON null. */
static json_t *
sessions_running(json_t *st, const char *name)
{
	json_t *e;
	size_t j;

	if (st == NULL)
		return json_null();
	json_array_foreach(json_object_get(st, "sessions"), j, e) {
		json_t *nm = json_object_get(e, "name");

		if (json_is_string(nm) && strcmp(json_string_value(nm), name) == 0)
			return json_integer(json_integer_value(json_object_get(e, "running")));
	}
	return json_integer(0);
}

/* A string member of o as JSON, or null. */
static json_t *
sessions_jstr(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string(json_string_value(v)) : json_null();
}

/* Only the string members of an array, as a new array. */
static json_t *
sessions_jstrv(json_t *v)
{
	json_t *arr = json_array(), *e;
	size_t i;

	json_array_foreach(v, i, e) {
		if (json_is_string(e))
			json_array_append_new(arr, json_string(json_string_value(e)));
	}
	return arr;
}

/* One row of session list (the documented --json schema) from an unvalidated object. */
static json_t *
sessions_row_raw(json_t *o, const char *name, const char *file, json_t *st)
{
	json_t *r = json_object(), *v;
	struct passwd *pw;

	if (json_is_string(v = json_object_get(o, "name")))
		name = json_string_value(v);
	json_object_set_new(r, "name", name != NULL ? json_string(name) : json_null());
	json_object_set_new(r, "user", sessions_jstr(o, "user"));
	if (json_is_integer(v = json_object_get(o, "uid")))
		json_object_set_new(r, "uid", json_integer(json_integer_value(v)));
	else if (json_is_string(v = json_object_get(o, "user")) &&
	    (pw = getpwnam(json_string_value(v))) != NULL)
		json_object_set_new(r, "uid", json_integer(pw->pw_uid));
	else
		json_object_set_new(r, "uid", json_null());
	json_object_set_new(r, "workspace", sessions_jstr(o, "workspace"));
	json_object_set_new(r, "tools", sessions_jstrv(json_object_get(o, "tools")));
	json_object_set_new(r, "repos", sessions_jstrv(json_object_get(o, "repos")));
	json_object_set_new(r, "running", name != NULL ? sessions_running(st, name) :
	    json_null());
	json_object_set_new(r, "file", json_string(file));
	json_object_set_new(r, "error", json_null());
	return r;
}

/*
 * The rows when the config does not load: what each file still says. A drop-in
 * that does not parse becomes a row with its error (file:line:column).
 */
static json_t *
sessions_rows_raw(const struct admin *a, json_t *st)
{
	struct adm_paths p;
	json_error_t je;
	json_t *rows = json_array(), *root, *e;
	struct dirent **names = NULL;
	char *cause = NULL, *path, *name;
	int n, k;
	size_t i;

	(void)adm_paths_load(a->config, &p, &cause);
	free(cause);
	if ((root = json_load_file(a->config, 0, &je)) != NULL) {
		json_array_foreach(json_object_get(root, "sessions"), i, e) {
			if (json_is_object(e))
				json_array_append_new(rows, sessions_row_raw(e, NULL, a->config,
				    st));
		}
		json_decref(root);
	}
	n = scandir(p.sessions_dir, &names, NULL, alphasort);
	for (k = 0; k < n; k++) {
		size_t len = strlen(names[k]->d_name);

		if (names[k]->d_name[0] == '.' || len < 6 ||
		    strcmp(names[k]->d_name + len - 5, ".json") != 0)
			continue;
		xasprintf(&path, "%s/%s", p.sessions_dir, names[k]->d_name);
		name = xstrndup(names[k]->d_name, len - 5);
		if ((root = json_load_file(path, 0, &je)) != NULL && json_is_object(root))
			json_array_append_new(rows, sessions_row_raw(root, name, path, st));
		else {
			json_t *r = sessions_row_raw(NULL, name, path, st);
			char *why;

			if (root == NULL)
				xasprintf(&why, "%s:%d:%d: %s", path, je.line, je.column, je.text);
			else
				xasprintf(&why, "%s:1:1: not a JSON object", path);
			json_object_set_new(r, "error", json_string(why));
			json_array_append_new(rows, r);
			free(why);
		}
		json_decref(root);
		free(name);
		free(path);
	}
	for (k = 0; k < n; k++)
		free(names[k]);
	free(names);
	adm_paths_free(&p);
	return rows;
}

/* A comma-separated string of a JSON array of strings ("-" when empty). */
static char *
sessions_join(json_t *arr)
{
	char *out = xstrdup(""), *tmp;
	json_t *e;
	size_t i;

	json_array_foreach(arr, i, e) {
		xasprintf(&tmp, "%s%s%s", out, i > 0 ? "," : "", json_string_value(e));
		free(out);
		out = tmp;
	}
	if (*out == '\0') {
		free(out);
		out = xstrdup("-");
	}
	return out;
}

/*
 * session list [--json]. Works on a broken config: it says where it is broken and
 * lists what the files still say.
 */
static int
sessions_list(struct admin *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct adm_paths p;
	struct config *c;
	json_t *st = NULL, *rows, *r;
	char *cause = NULL;
	int ch, json = 0, up, rc = ADM_OK;
	size_t i;

	adm_getopt_reset();
	while ((ch = getopt_long(argc, argv, "c:j", longopts, NULL)) != -1) {
		if (ch == 'j')
			json = 1;
		else if (!adm_global_opt(a, ch, optarg)) {
			fprintf(stderr, "usage: shimbridge session list [--json]\n");
			return ADM_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "usage: shimbridge session list [--json]\n");
		return ADM_USAGE;
	}
	(void)adm_paths_load(a->config, &p, &cause);
	free(cause);
	cause = NULL;
	up = ctl_status(p.socket, &st, &cause) == 0;
	adm_paths_free(&p);
	free(cause);
	cause = NULL;
	if ((c = config_load(a->config, 1, &cause)) != NULL) {
		rows = json_array();
		for (i = 0; i < c->nsessions; i++) {
			const struct session *s = &c->sessions[i];

			r = json_object();
			json_object_set_new(r, "name", json_string(s->name));
			json_object_set_new(r, "user", s->user != NULL ? json_string(s->user) :
			    json_null());
			json_object_set_new(r, "uid", json_integer(s->uid));
			json_object_set_new(r, "workspace", s->workspace != NULL ?
			    json_string(s->workspace) : json_null());
			json_object_set_new(r, "tools", sessions_strv(s->tools, s->ntools));
			json_object_set_new(r, "repos", sessions_strv(s->repos, s->nrepos));
			json_object_set_new(r, "running", sessions_running(up ? st : NULL,
			    s->name));
			json_object_set_new(r, "file", s->file != NULL ? json_string(s->file) :
			    json_null());
			json_object_set_new(r, "error", json_null());
			json_array_append_new(rows, r);
		}
		config_unref(c);
	} else {
		fprintf(stderr, "shimbridge: warning: the configuration is invalid: ");
		adm_puts_safe(stderr, cause);
		fprintf(stderr, "\nshimbridge: listing what the files still say\n");
		rows = sessions_rows_raw(a, up ? st : NULL);
		rc = ADM_INVALID;
	}
	if (json) {
		char *s = json_dumps(rows, JSON_COMPACT | JSON_PRESERVE_ORDER);

		printf("%s\n", s);
		free(s);
	} else {
		printf("%-20s %-20s %-7s %-16s %-30s %s\n", "NAME", "USER", "UID", "TOOLS",
		    "REPOS", "RUNNING");
		json_array_foreach(rows, i, r) {
			json_t *nm = json_object_get(r, "name"), *u = json_object_get(r, "user");
			json_t *uid = json_object_get(r, "uid"), *run = json_object_get(r, "running");
			json_t *err = json_object_get(r, "error");
			char *tools = sessions_join(json_object_get(r, "tools"));
			char *repos = sessions_join(json_object_get(r, "repos"));
			char uids[32], runs[32], *line;

			snprintf(uids, sizeof uids, json_is_integer(uid) ? "%lld" : "-",
			    (long long)json_integer_value(uid));
			snprintf(runs, sizeof runs, json_is_integer(run) ? "%lld" : "-",
			    (long long)json_integer_value(run));
			if (json_is_string(err))
				xasprintf(&line, "%-20s BROKEN: %s", json_is_string(nm) ?
				    json_string_value(nm) : "?", json_string_value(err));
			else
				xasprintf(&line, "%-20s %-20s %-7s %-16s %-30s %s",
				    json_is_string(nm) ? json_string_value(nm) : "?",
				    json_is_string(u) ? json_string_value(u) : "-", uids, tools,
				    repos, runs);
			adm_puts_safe(stdout, line);
			putchar('\n');
			free(line);
			free(tools);
			free(repos);
		}
		if (!up)
			printf("(shimbridged is not running: RUNNING is unknown)\n");
	}
	json_decref(rows);
	json_decref(st);
	free(cause);
	return rc;
}

/* Whether the account was created by session add (its comment says so). */
static int
sessions_owned(const char *user, const char *name)
{
	struct passwd *pw = getpwnam(user);
	char *want;
	int ok;

	if (pw == NULL || pw->pw_gecos == NULL)
		return 0;
	xasprintf(&want, SESSIONS_GECOS "%s", name);
	ok = strcmp(pw->pw_gecos, want) == 0;
	free(want);
	return ok;
}

/* session remove NAME [--keep-workspace] */
static int
sessions_remove(struct admin *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ "keep-workspace", no_argument, NULL, 'k' },
		{ "keep-home", no_argument, NULL, 'k' },
		{ "keep-mirrors", no_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	struct users_id id = { 0 }, rid = { 0 };
	struct config *c = NULL;
	const struct session *s;
	char *dropin = NULL, *ws = NULL;
	const char *name;
	int ch, keep = 0, keep_mirrors = 0, reload = 1, rc = ADM_FAIL, owned, left, rowned;

	adm_getopt_reset();
	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (ch == 'k')
			keep = 1;
		else if (ch == 'm')
			keep_mirrors = 1;
		else if (!adm_global_opt(a, ch, optarg))
			goto usage;
	}
	if (optind != argc - 1)
		goto usage;
	reload = !a->no_reload;
	name = argv[optind];
	if (geteuid() != 0) {
		fprintf(stderr, "shimbridge: session remove must run as root\n");
		return ADM_FAIL;
	}
	if ((c = sessions_config(a)) == NULL)
		return ADM_INVALID;
	if ((s = config_session_by_name(c, name)) == NULL) {
		fprintf(stderr, "shimbridge: no session named %s\n", name);
		rc = ADM_INVALID;
		goto out;
	}
	dropin = sessions_dropin(c, name);
	if (s->file == NULL || strcmp(s->file, dropin) != 0) {
		fprintf(stderr, "shimbridge: session %s is defined in %s, not in a drop-in; "
		    "remove it there by hand\n", name, s->file != NULL ? s->file : "?");
		rc = ADM_INVALID;
		goto out;
	}
	ws = s->workspace != NULL ? xstrdup(s->workspace) : NULL;
	owned = s->user != NULL && sessions_owned(s->user, name) &&
	    users_lookup(s->user, &id) == 0;
	if (owned) {
		/* Nothing of the session may run on while it goes away. */
		if ((left = users_kill_all(id.uid)) != 0) {
			fprintf(stderr, "shimbridge: %d processes of %s survive SIGKILL; not "
			    "removing the session\n", left, id.name);
			goto out;
		}
	}
	/* Its runner too, when session add made it for this session. */
	rowned = s->runner_own && sessions_runner_owned(s->runner, name) &&
	    users_lookup(s->runner, &rid) == 0;
	if (rowned && (left = users_kill_all(rid.uid)) != 0) {
		fprintf(stderr, "shimbridge: %d processes of %s survive SIGKILL; not removing "
		    "the session\n", left, rid.name);
		goto out;
	}
	if (unlink(dropin) != 0) {
		fprintf(stderr, "shimbridge: cannot remove %s: %s\n", dropin, strerror(errno));
		goto out;
	}
	printf("removed %s\n", dropin);
	rc = ADM_OK;
	if (owned) {
		(void)users_kill_all(id.uid);
		if (sessions_userdel(id.name) != 0) {
			fprintf(stderr, "shimbridge: userdel %s failed\n", id.name);
			rc = ADM_FAIL;
		} else
			printf("removed user %s\n", id.name);
		if (!keep && rc == ADM_OK) {
			struct stat st;

			/* No process of the uid is left, so nothing can race the removal. */
			if (lstat(id.home, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != id.uid ||
			    strcmp(id.home, "/") == 0)
				fprintf(stderr, "shimbridge: warning: %s is not a directory owned by "
				    "%s; not removing it\n", id.home, id.name);
			else if (spawn_rmtree(id.home) != 0)
				fprintf(stderr, "shimbridge: warning: could not remove all of %s\n",
				    id.home);
			else
				printf("removed %s\n", id.home);
			if (ws != NULL && !sessions_under(ws, id.home) && lstat(ws, &st) == 0 &&
			    S_ISDIR(st.st_mode) && st.st_uid == id.uid && spawn_rmtree(ws) == 0)
				printf("removed %s\n", ws);
		} else if (keep)
			printf("kept %s\n", id.home);
	} else if (s->user != NULL || s->uid != 0)
		printf("user %s was not created by shimbridge: kept it, its processes and "
		    "its files\n", s->user != NULL ? s->user : "(by uid)");
	/* The mirrors are the bridge's caches for this session: nobody else uses them. */
	if (!keep_mirrors && mirrors_remove_session(c->state_dir, name) != 0)
		rc = ADM_FAIL;
	else if (keep_mirrors)
		printf("kept the mirrors of session %s under %s/mirrors/%s\n", name,
		    c->state_dir, name);
	if (rowned) {
		(void)users_kill_all(rid.uid);
		if (sessions_userdel(rid.name) != 0) {
			fprintf(stderr, "shimbridge: userdel %s failed\n", rid.name);
			rc = ADM_FAIL;
		} else
			printf("removed runner %s\n", rid.name);
	}
	if (reload) {
		int r = ctl_reload(a, 1);

		if (rc == ADM_OK)
			rc = r;
	}
	goto out;
usage:
	fprintf(stderr, "usage: shimbridge session remove NAME [--keep-workspace] "
	    "[--keep-mirrors] [--no-reload]\n");
	rc = ADM_USAGE;
out:
	users_id_free(&id);
	users_id_free(&rid);
	config_unref(c);
	free(dropin);
	free(ws);
	return rc;
}

/* Add NAME=value to an environment vector. */
static void
sessions_env(char ***envp, size_t *n, const char *name, const char *value)
{
	*envp = xreallocarray(*envp, *n + 2, sizeof **envp);
	xasprintf(&(*envp)[(*n)++], "%s=%s", name, value);
	(*envp)[*n] = NULL;
}

/* session exec NAME [--] [CMD...]: CMD (or a login shell) as the user, in its workspace. */
static int
sessions_exec(struct admin *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ NULL, 0, NULL, 0 },
	};
	struct users_id id = { 0 };
	struct config *c = NULL;
	const struct session *s;
	char **envp = NULL, *path = NULL, *dash = NULL, *shargv[2];
	const char *dir, *v;
	size_t n = 0, i;
	int ch, rc = ADM_FAIL;

	adm_getopt_reset();
	while ((ch = getopt_long(argc, argv, "+c:", longopts, NULL)) != -1) {
		if (!adm_global_opt(a, ch, optarg)) {
			rc = ADM_USAGE;
			goto usage;
		}
	}
	if (optind >= argc) {
		rc = ADM_USAGE;
		goto usage;
	}
	if ((c = sessions_config(a)) == NULL)
		return ADM_INVALID;
	if ((s = config_session_by_name(c, argv[optind])) == NULL) {
		fprintf(stderr, "shimbridge: no session named %s\n", argv[optind]);
		rc = ADM_INVALID;
		goto out;
	}
	optind++;
	if (optind < argc && strcmp(argv[optind], "--") == 0)
		optind++;
	if (s->user != NULL ? users_lookup(s->user, &id) != 0 :
	    (getpwuid(s->uid) == NULL || users_lookup(getpwuid(s->uid)->pw_name, &id) != 0)) {
		fprintf(stderr, "shimbridge: the user of session %s does not exist\n", s->name);
		rc = ADM_INVALID;
		goto out;
	}
	dir = s->workspace != NULL ? s->workspace : id.home;
	/* A clean login environment: nothing of root's leaks in but TERM and LANG. */
	sessions_env(&envp, &n, "HOME", id.home);
	sessions_env(&envp, &n, "USER", id.name);
	sessions_env(&envp, &n, "LOGNAME", id.name);
	sessions_env(&envp, &n, "SHELL", id.shell);
	xasprintf(&path, "%s:/usr/local/bin:/usr/bin:/bin", a->shim_dir);
	sessions_env(&envp, &n, "PATH", path);
	if ((v = getenv("TERM")) != NULL)
		sessions_env(&envp, &n, "TERM", v);
	if ((v = getenv("LANG")) != NULL)
		sessions_env(&envp, &n, "LANG", v);
	if (strcmp(c->socket_path, ADM_SOCKET) != 0)
		sessions_env(&envp, &n, "SHIMBRIDGE_SOCKET", c->socket_path);
	if (optind < argc)
		rc = users_exec(&id, dir, argv[optind], argv + optind, envp);
	else {
		/* The login shell: its path from passwd, argv[0] "-bash" marks a login. */
		const char *base = strrchr(id.shell, '/');

		xasprintf(&dash, "-%s", base != NULL ? base + 1 : id.shell);
		shargv[0] = dash;
		shargv[1] = NULL;
		rc = users_exec(&id, dir, id.shell, shargv, envp);
	}
	goto out;
usage:
	fprintf(stderr, "usage: shimbridge session exec NAME [--] [CMD [ARG]...]\n");
out:
	for (i = 0; i < n; i++)
		free(envp[i]);
	free(envp);
	free(path);
	free(dash);
	users_id_free(&id);
	config_unref(c);
	return rc;
}

/* shimbridge session ... */
int
sessions_cmd(struct admin *a, int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "add") == 0)
		return sessions_add(a, argc - 1, argv + 1);
	if (argc >= 2 && (strcmp(argv[1], "list") == 0 || strcmp(argv[1], "ls") == 0))
		return sessions_list(a, argc - 1, argv + 1);
	if (argc >= 2 && (strcmp(argv[1], "remove") == 0 || strcmp(argv[1], "rm") == 0))
		return sessions_remove(a, argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "exec") == 0)
		return sessions_exec(a, argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "shell") == 0 && argc == 3)
		return sessions_exec(a, argc - 1, argv + 1);
	fprintf(stderr, "usage: shimbridge session add NAME [--user USER] [--workspace DIR] "
	    "[--tools T,...] [--repo OWNER/NAME]...\n"
	    "       shimbridge session list [--json]\n"
	    "       shimbridge session remove NAME [--keep-workspace] [--keep-mirrors]\n"
	    "       shimbridge session exec NAME [--] [CMD [ARG]...]\n"
	    "       shimbridge session shell NAME\n");
	return ADM_USAGE;
}
