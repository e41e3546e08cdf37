/* One gh call's credential injector (see ghinject.h). */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sodium.h>

#include "ghinject.h"
#include "httppolicy.h"
#include "inject.h"
#include "spawn.h"
#include "util.h"

struct ghinject {
	struct inject		*inj;
	struct httppolicy_scope	 scope;		/* repos point into the caller's session */
	char			*sock;		/* unlinked at free */
};

int
ghinject_token_var(const char *var)
{
	return strcmp(var, "GH_TOKEN") == 0 || strcmp(var, "GITHUB_TOKEN") == 0 ||
	    strcmp(var, "GH_ENTERPRISE_TOKEN") == 0 ||
	    strcmp(var, "GITHUB_ENTERPRISE_TOKEN") == 0;
}

/* Open (creating if missing) directory name below dirfd, never through a symlink. */
static int
ghinject_subdir(int dirfd, const char *name, uid_t uid, gid_t gid)
{
	struct stat	 st;
	int		 fd;

	if (mkdirat(dirfd, name, 0700) == 0) {
		if (fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0)
			return -1;
	} else if (errno != EEXIST)
		return -1;
	if ((fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	if (fstat(fd, &st) != 0 || (st.st_uid != uid && st.st_uid != 0)) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

/* Write SCRATCH/.config/gh/config.yml naming the socket; the runner owns it. */
static int
ghinject_config(const char *scratch, const char *sock, uid_t uid, gid_t gid, char **cause)
{
	int	 sfd = -1, cfd = -1, gfd = -1, fd = -1, rc = -1;
	char	*text = NULL;
	size_t	 len, off;
	ssize_t	 n;

	if ((sfd = open(scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1 ||
	    (cfd = ghinject_subdir(sfd, ".config", uid, gid)) == -1 ||
	    (gfd = ghinject_subdir(cfd, "gh", uid, gid)) == -1 ||
	    (fd = openat(gfd, "config.yml", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) == -1) {
		xasprintf(cause, "cannot write gh's config in %s: %s", scratch, strerror(errno));
		goto out;
	}
	/* The socket path is ours (hex scratch name): no YAML quoting is needed. */
	xasprintf(&text, "http_unix_socket: %s\n", sock);
	len = strlen(text);
	for (off = 0; off < len; off += (size_t)n) {
		if ((n = write(fd, text + off, len - off)) <= 0) {
			xasprintf(cause, "cannot write gh's config: %s", strerror(errno));
			goto out;
		}
	}
	if (fchown(fd, uid, gid) != 0) {
		xasprintf(cause, "cannot chown gh's config: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(text);
	if (fd != -1)
		close(fd);
	if (gfd != -1)
		close(gfd);
	if (cfd != -1)
		close(cfd);
	if (sfd != -1)
		close(sfd);
	return rc;
}

/* A listening socket at path that only the runner (and root) may connect to. */
static int
ghinject_listen(const char *path, uid_t uid, gid_t gid, char **cause)
{
	struct sockaddr_un	 sun;
	int			 fd;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path) {
		xasprintf(cause, "injector socket path too long: %s", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	/* bind creates the node; an existing one (e.g. a planted symlink) fails it. */
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&sun, sizeof sun) == -1 ||
	    fchmodat(AT_FDCWD, path, 0600, 0) == -1 ||
	    fchownat(AT_FDCWD, path, uid, gid, AT_SYMLINK_NOFOLLOW) == -1 ||
	    listen(fd, 16) == -1) {
		xasprintf(cause, "cannot listen on %s: %s", path, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	return fd;
}

struct ghinject *
ghinject_start(const struct ghinject_params *p, struct envbuild *env, char **cause)
{
	struct ghinject		*g;
	struct inject_target	 t;
	unsigned char		 rnd[16];
	char			 ph[64], *upstream = NULL, *confdir = NULL;
	const char		*host = p->host != NULL ? p->host : "github.com";
	int			 github = strcasecmp(host, "github.com") == 0, fd;
	size_t			 i;

	g = xcalloc(1, sizeof *g);
	xasprintf(&g->sock, "%s/gh.sock", p->scratch);
	if ((fd = ghinject_listen(g->sock, p->uid, p->gid, cause)) == -1) {
		free(g->sock);
		free(g);
		return NULL;
	}
	if (ghinject_config(p->scratch, g->sock, p->uid, p->gid, cause) != 0) {
		close(fd);
		goto fail;
	}
	g->scope.api = github ? HTTP_API_GITHUB : HTTP_API_GHE;
	g->scope.repos = p->repos;
	g->scope.nrepos = p->nrepos;
	g->scope.allow_push = 0;

	/* Not a secret: random only so that it can never be mistaken for a real token. */
	randombytes_buf(rnd, sizeof rnd);
	memcpy(ph, "shimbridge-placeholder-", 23);
	for (i = 0; i < sizeof rnd; i++)
		snprintf(ph + 23 + 2 * i, 3, "%02x", rnd[i]);

	memset(&t, 0, sizeof t);
	t.api = g->scope.api;
	t.host = github ? "api.github.com" : host;
	xasprintf(&upstream, "https://%s", github ? "api.github.com" : host);
	t.upstream = upstream;
	t.ca_file = p->ca_file;
	t.auth = INJECT_AUTH_TOKEN;
	t.placeholder = ph;
	t.scope = &g->scope;
	t.secret = p->secret;
	t.audit = p->audit;
	t.arg = p->arg;
	g->inj = inject_new(p->base, fd, &t, cause);	/* fd transferred */
	free(upstream);
	if (g->inj == NULL)
		goto fail;

	xasprintf(&confdir, "%s/.config/gh", p->scratch);
	envbuild_set(env, "GH_CONFIG_DIR", confdir, strlen(confdir), 0);
	free(confdir);
	envbuild_set(env, github ? "GH_TOKEN" : "GH_ENTERPRISE_TOKEN", ph, strlen(ph), 0);
	return g;
fail:
	unlink(g->sock);
	free(g->sock);
	free(g);
	return NULL;
}

void
ghinject_free(struct ghinject *g)
{
	if (g == NULL)
		return;
	inject_free(g->inj);
	unlink(g->sock);
	free(g->sock);
	free(g);
}

unsigned int
ghinject_unauthorized(const struct ghinject *g)
{
	return g != NULL && g->inj != NULL ? inject_unauthorized(g->inj) : 0;
}
