/*
 * The daemon's own pathname socket (when no service manager passes one): a
 * root-owned directory, the umask set before bind, owner, group and mode.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "listen.h"
#include "log.h"
#include "util.h"

/*
 * The socket's directory (not socket-activated): created 0755 when missing, as
 * when the daemon is started by hand; it must be a directory (not a symbolic
 * link), owned by root and writable by nobody else, or nobody could trust the
 * socket in it.
 */
static int
listen_dir(const char *dir, char **cause)
{
	struct stat st;

	if (lstat(dir, &st) != 0) {
		if (errno != ENOENT) {
			xasprintf(cause, "cannot inspect the socket directory %s: %s", dir,
			    strerror(errno));
			return -1;
		}
		/* chmod: the umask (0077 under systemd) must not lock the sessions out. */
		if ((mkdir(dir, 0755) != 0 && errno != EEXIST) || lstat(dir, &st) != 0 ||
		    (S_ISDIR(st.st_mode) && st.st_uid == 0 && chmod(dir, 0755) != 0)) {
			xasprintf(cause, "cannot create the socket directory %s: %s (its parent "
			    "must exist)", dir, strerror(errno));
			return -1;
		}
		log_info("created the socket directory %s (root, 0755)", dir);
		if (lstat(dir, &st) != 0) {
			xasprintf(cause, "cannot inspect the socket directory %s: %s", dir,
			    strerror(errno));
			return -1;
		}
	}
	if (S_ISLNK(st.st_mode)) {
		xasprintf(cause, "the socket directory %s is a symbolic link; refusing to "
		    "follow it (give the real directory in socket.path)", dir);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		xasprintf(cause, "the socket directory %s is not a directory", dir);
		return -1;
	}
	if (st.st_uid != 0) {
		xasprintf(cause, "the socket directory %s is owned by uid %u, not root: "
		    "refusing to put the socket where someone else could replace it",
		    dir, (unsigned)st.st_uid);
		return -1;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		xasprintf(cause, "the socket directory %s is writable by group or others "
		    "(mode %04o): it must be writable by root only", dir,
		    (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

/* Create, bind and listen on the configured pathname socket. */
int
listen_bind(const struct config *cfg, char **cause)
{
	struct sockaddr_un sun;
	struct stat st;
	char *dir, *slash;
	mode_t old;
	int fd;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strcpy_checked(sun.sun_path, sizeof sun.sun_path, cfg->socket_path) != 0) {
		xasprintf(cause, "socket path too long: %s", cfg->socket_path);
		return -1;
	}
	/* The directory must be root's: nobody else may swap the socket. */
	dir = xstrdup(cfg->socket_path);
	slash = strrchr(dir, '/');
	*slash = '\0';
	if (listen_dir(*dir ? dir : "/", cause) != 0) {
		free(dir);
		return -1;
	}
	free(dir);
	if (lstat(cfg->socket_path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			xasprintf(cause, "%s exists and is not a socket", cfg->socket_path);
			return -1;
		}
		unlink(cfg->socket_path);
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
		xasprintf(cause, "socket: %s", strerror(errno));
		return -1;
	}
	/* umask before bind: the socket never exists with looser permissions. */
	old = umask(0777 & ~(mode_t)cfg->socket_mode);
	if (bind(fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
		umask(old);
		xasprintf(cause, "bind %s: %s", cfg->socket_path, strerror(errno));
		close(fd);
		return -1;
	}
	umask(old);
	if (chown(cfg->socket_path, 0, cfg->socket_gid) != 0 ||
	    chmod(cfg->socket_path, (mode_t)cfg->socket_mode) != 0) {
		xasprintf(cause, "cannot set owner/mode of %s: %s", cfg->socket_path,
		    strerror(errno));
		close(fd);
		return -1;
	}
	if (listen(fd, 512) != 0) {
		xasprintf(cause, "listen: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}
