/* cgroup v2 containment of each session's calls (see cgroup.h). */
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/wait.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <linux/sched.h>
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "util.h"

/* One session's cgroup: live (taking calls) or killed and waiting to be removed. */
struct cgroup_sess {
	struct cgroup_sess	*next;
	char			*name;		/* the session */
	char			*path;		/* BASE/s-NAME.N */
	int			 live;		/* 0 once killed */
};

static char			*cgroup_base;	/* NULL: cgroups not in use */
static struct cgroup_sess	*cgroup_list;
static unsigned long		 cgroup_gen;

/* Whether cgroups are in use. */
int
cgroup_enabled(void)
{
	return cgroup_base != NULL;
}

/* Write a short string to dir/file; 0 or -1 with errno. */
static int
cgroup_write(const char *dir, const char *file, const char *what)
{
	char *p;
	int fd, rc = -1, e;

	xasprintf(&p, "%s/%s", dir, file);
	if ((fd = open(p, O_WRONLY | O_CLOEXEC)) >= 0) {
		if (write(fd, what, strlen(what)) == (ssize_t)strlen(what))
			rc = 0;
		e = errno;
		close(fd);
		errno = e;
	}
	free(p);
	return rc;
}

/* Processes in a cgroup (cgroup.procs lines), -1 if unreadable. */
static int
cgroup_count(const char *dir)
{
	char *p, buf[4096];
	ssize_t n;
	int fd, count = 0, i;

	xasprintf(&p, "%s/cgroup.procs", dir);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	free(p);
	if (fd < 0)
		return -1;
	while ((n = read(fd, buf, sizeof buf)) > 0) {
		for (i = 0; i < n; i++)
			count += buf[i] == '\n';
	}
	close(fd);
	return count;
}

/* Kill everything in a tree (cgroup.kill) and remove it, waiting up to about a second. */
static int
cgroup_remove_tree(const char *dir)
{
	struct dirent *de;
	char *p;
	DIR *d;
	int i, rc = 0;

	(void)cgroup_write(dir, "cgroup.kill", "1");
	for (i = 0; i < 100; i++) {
		if ((d = opendir(dir)) == NULL)
			return errno == ENOENT ? 0 : -1;
		rc = 0;
		while ((de = readdir(d)) != NULL) {
			struct stat st;

			if (de->d_name[0] == '.')
				continue;
			xasprintf(&p, "%s/%s", dir, de->d_name);
			if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && cgroup_remove_tree(p) != 0)
				rc = -1;
			free(p);
		}
		closedir(d);
		if (rc == 0 && rmdir(dir) == 0)
			return 0;
		if (errno == ENOENT)
			return 0;
		usleep(10000);	/* killed processes leave the cgroup asynchronously */
	}
	return -1;
}

/* The cgroup2 mount point, from /proc/self/mountinfo; NULL if there is none. */
static char *
cgroup_mountpoint(void)
{
	char line[4096], *mnt = NULL;
	FILE *f;

	if ((f = fopen("/proc/self/mountinfo", "re")) == NULL)
		return NULL;
	while (mnt == NULL && fgets(line, sizeof line, f) != NULL) {
		char *sep = strstr(line, " - "), *fld[6], *save = NULL, *t;
		int n = 0;

		if (sep == NULL || strncmp(sep + 3, "cgroup2 ", 8) != 0)
			continue;
		*sep = '\0';
		for (t = strtok_r(line, " ", &save); t != NULL && n < 6;
		    t = strtok_r(NULL, " ", &save))
			fld[n++] = t;
		/* Only a mount of the hierarchy's root: our path below is then exact. */
		if (n >= 5 && strcmp(fld[3], "/") == 0 && strchr(fld[4], '\\') == NULL)
			mnt = xstrdup(fld[4]);
	}
	fclose(f);
	return mnt;
}

/* Our own cgroup v2 path ("0::/PATH" in /proc/self/cgroup); NULL if unknown. */
static char *
cgroup_own(void)
{
	char line[4096], *own = NULL;
	FILE *f;

	if ((f = fopen("/proc/self/cgroup", "re")) == NULL)
		return NULL;
	while (own == NULL && fgets(line, sizeof line, f) != NULL) {
		size_t n = strlen(line);

		if (strncmp(line, "0::/", 4) != 0)
			continue;
		if (n > 0 && line[n - 1] == '\n')
			line[n - 1] = '\0';
		own = xstrdup(strcmp(line + 3, "/") == 0 ? "" : line + 3);
	}
	fclose(f);
	return own;
}

/* clone3 into the cgroup of dirfd, like fork; -1 with errno (ENOSYS before Linux 5.7). */
static pid_t
cgroup_clone_into(int dirfd)
{
#if defined(__linux__) && defined(SYS_clone3) && defined(CLONE_INTO_CGROUP)
	struct clone_args ca;

	memset(&ca, 0, sizeof ca);
	ca.flags = CLONE_INTO_CGROUP;
	ca.exit_signal = SIGCHLD;
	ca.cgroup = (uint64_t)dirfd;
	return (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
#else
	(void)dirfd;
	errno = ENOSYS;
	return -1;
#endif
}

/* Kill and remove what dead daemons left in dir: shimbridged.PID with no such process. */
static void
cgroup_clean_stale(const char *dir)
{
	struct dirent *de;
	char *p, *end;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		long pid;

		if (strncmp(de->d_name, "shimbridged.", 12) != 0)
			continue;
		pid = strtol(de->d_name + 12, &end, 10);
		if (*end != '\0' || pid <= 0 || pid == (long)getpid() ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		xasprintf(&p, "%s/%s", dir, de->d_name);
		if (cgroup_remove_tree(p) == 0)
			log_info("removed the cgroup %s of a daemon that is gone", p);
		else
			log_warnx("cannot remove the cgroup %s of a daemon that is gone", p);
		free(p);
	}
	closedir(d);
}

/* Find a writable cgroup2 hierarchy and make our subtree (see cgroup.h). */
int
cgroup_init(char **msg)
{
	char *mnt = NULL, *own = NULL, *dir = NULL, *base = NULL, *why = NULL;
	struct stat st;
	int fd = -1, status;
	pid_t pid;

	*msg = NULL;
#if !defined(__linux__)
	why = xstrdup("cgroups need Linux");
	goto out;
#endif
	if ((mnt = cgroup_mountpoint()) == NULL) {
		why = xstrdup("no cgroup2 file system is mounted");
		goto out;
	}
	if ((own = cgroup_own()) == NULL) {
		why = xstrdup("this process has no cgroup v2 path in /proc/self/cgroup");
		goto out;
	}
	xasprintf(&dir, "%s%s", mnt, own);
	cgroup_clean_stale(dir);
	xasprintf(&base, "%s/shimbridged.%ld", dir, (long)getpid());
	if (mkdir(base, 0700) != 0 && errno != EEXIST) {
		xasprintf(&why, "cannot create %s: %s (under systemd the unit needs "
		    "Delegate=yes and ProtectControlGroups=no)", base, strerror(errno));
		goto out;
	}
	xasprintf(&why, "%s/cgroup.kill", base);
	if (stat(why, &st) != 0) {
		free(why);
		xasprintf(&why, "the kernel has no cgroup.kill (Linux 5.14 or later needed)");
		rmdir(base);
		goto out;
	}
	free(why);
	why = NULL;
	/* Whether clone3 can put a child straight into a cgroup (Linux 5.7). */
	if ((fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (pid = cgroup_clone_into(fd)) < 0) {
		xasprintf(&why, "cannot start a process in %s: %s", base, strerror(errno));
		rmdir(base);
		goto out;
	}
	if (pid == 0)
		_exit(0);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	cgroup_base = base;
	base = NULL;	/* transferred */
out:
	if (fd >= 0)
		close(fd);
	if (cgroup_base != NULL)
		xasprintf(msg, "process containment: cgroup v2, a cgroup per session "
		    "under %s, torn down with cgroup.kill", cgroup_base);
	else
		xasprintf(msg, "process containment: process groups, PID namespaces and "
		    "the orphan scan; cgroup v2 is not used because %s", why);
	free(why);
	free(mnt);
	free(own);
	free(dir);
	free(base);
	return cgroup_base != NULL;
}

/* A new directory fd of a session's cgroup, made on first use (see cgroup.h). */
int
cgroup_session_fd(const char *session, char **cause)
{
	struct cgroup_sess *s;
	int fd;

	if (cgroup_base == NULL)
		return 0;
	for (s = cgroup_list; s != NULL; s = s->next) {
		if (s->live && strcmp(s->name, session) == 0)
			break;
	}
	if (s == NULL) {
		s = xcalloc(1, sizeof *s);
		xasprintf(&s->path, "%s/s-%s.%lu", cgroup_base, session, ++cgroup_gen);
		if (mkdir(s->path, 0700) != 0) {
			xasprintf(cause, "cannot create the session's cgroup %s: %s", s->path,
			    strerror(errno));
			free(s->path);
			free(s);
			return -1;
		}
		s->name = xstrdup(session);
		s->live = 1;
		s->next = cgroup_list;
		cgroup_list = s;
	}
	/* O_PATH is enough for CLONE_INTO_CGROUP. Above 2: fds 0-2 are the tool's stdio. */
#if defined(__linux__)
	fd = open(s->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
#else
	fd = -1;		/* not reached: cgroup_init made no hierarchy */
	errno = ENOSYS;
#endif
	if (fd >= 0 && fd <= 2) {
		int hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);

		close(fd);
		fd = hi;
	}
	if (fd < 0) {
		xasprintf(cause, "cannot open the session's cgroup %s: %s", s->path,
		    strerror(errno));
		return -1;
	}
	return fd;
}

/* Kill every process of a session's calls (see cgroup.h). */
int
cgroup_session_kill(const char *session)
{
	struct cgroup_sess *s;
	int n = 0, k;

	for (s = cgroup_list; s != NULL; s = s->next) {
		if (!s->live || strcmp(s->name, session) != 0)
			continue;
		if ((k = cgroup_count(s->path)) > 0)
			n += k;
		if (cgroup_write(s->path, "cgroup.kill", "1") != 0) {
			log_warnx("cannot kill the cgroup %s: %s", s->path, strerror(errno));
			return -1;
		}
		s->live = 0;	/* removed by the sweep once empty */
	}
	return n;
}

/* Remove killed session cgroups once the kernel has emptied them. */
void
cgroup_sweep(void)
{
	struct cgroup_sess **sp = &cgroup_list, *s;

	while ((s = *sp) != NULL) {
		if (s->live || (rmdir(s->path) != 0 && errno != ENOENT)) {
			sp = &s->next;
			continue;
		}
		*sp = s->next;
		free(s->name);
		free(s->path);
		free(s);
	}
}

/* Stopping: kill and remove the whole subtree. */
void
cgroup_shutdown(void)
{
	struct cgroup_sess *s;

	if (cgroup_base == NULL)
		return;
	while ((s = cgroup_list) != NULL) {
		cgroup_list = s->next;
		free(s->name);
		free(s->path);
		free(s);
	}
	if (cgroup_remove_tree(cgroup_base) != 0)
		log_warnx("cannot remove the cgroup %s: %s", cgroup_base, strerror(errno));
	free(cgroup_base);
	cgroup_base = NULL;
}
