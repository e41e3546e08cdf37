/* Accounts and identity switching for the admin commands (no su, no sudo). */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "hygiene.h"
#include "util.h"

extern char **environ;

/* Copy what we need of a passwd entry: getpwnam's storage is reused by the next call. */
int
users_lookup(const char *name, struct users_id *id)
{
	struct passwd *pw;

	memset(id, 0, sizeof *id);
	errno = 0;
	if ((pw = getpwnam(name)) == NULL)
		return -1;
	id->name = xstrdup(pw->pw_name);
	id->uid = pw->pw_uid;
	id->gid = pw->pw_gid;
	id->home = xstrdup(pw->pw_dir != NULL && *pw->pw_dir != '\0' ? pw->pw_dir : "/");
	id->shell = xstrdup(pw->pw_shell != NULL && *pw->pw_shell != '\0' ? pw->pw_shell :
	    "/bin/sh");
	return 0;
}

/* Free a looked-up identity. */
void
users_id_free(struct users_id *id)
{
	free(id->name);
	free(id->home);
	free(id->shell);
	memset(id, 0, sizeof *id);
}

/*
 * Become the user for good: its groups, then its gid, then its uid, and check
 * that every id changed and root cannot be had back.
 */
int
users_become(const struct users_id *id, char **cause)
{
	gid_t groups[256];
	const char *step;
	int n, i;

	if (id->uid == 0) {
		xasprintf(cause, "refusing to run as root");
		return -1;
	}
	if ((step = hygiene_drop_privileges(id->uid, id->gid, id->name)) != NULL) {
		xasprintf(cause, "switching to %s did not take (%s: %s)", id->name, step,
		    strerror(errno));
		return -1;
	}
	if ((n = getgroups((int)(sizeof groups / sizeof groups[0]), groups)) < 0) {
		xasprintf(cause, "getgroups: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (groups[i] == 0) {
			xasprintf(cause, "%s is in group root; refusing to run as it", id->name);
			return -1;
		}
	}
	return 0;
}

/* Close descriptors from lowfd up, so nothing of ours reaches a user's process. */
void
users_closefrom(int lowfd)
{
	hygiene_closefrom(lowfd);
}

/* Whether any process runs with uid as its real, effective, saved or fs uid. */
static int
users_count_procs(uid_t uid)
{
	char path[300], line[256];
	struct dirent *de;
	int n = 0;
	DIR *d;

	if ((d = opendir("/proc")) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		unsigned long r, e, s, f;
		FILE *fp;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/status", de->d_name);
		if ((fp = fopen(path, "re")) == NULL)
			continue;
		while (fgets(line, sizeof line, fp) != NULL) {
			if (strncmp(line, "State:", 6) == 0 && strchr(line, 'Z') != NULL)
				break;	/* a zombie: dead already, only its parent can reap it */
			if (sscanf(line, "Uid: %lu %lu %lu %lu", &r, &e, &s, &f) == 4) {
				if (r == uid || e == uid || s == uid || f == uid)
					n++;
				break;
			}
		}
		fclose(fp);
	}
	closedir(d);
	return n;
}

/*
 * Kill everything uid runs. kill(-1, SIGKILL) from a child that has become uid
 * reaches, in one system call, every process that uid may signal, so a process
 * that keeps forking cannot outrun a scan of /proc. Repeat until /proc shows none.
 */
int
users_kill_all(uid_t uid)
{
	struct timespec ts = { 0, 50 * 1000000L };
	int round, status;
	pid_t pid;

	if (uid == 0)
		return -1;
	for (round = 0; round < 100; round++) {
		if (users_count_procs(uid) == 0)
			return 0;
		if ((pid = fork()) < 0)
			return -1;
		if (pid == 0) {
			if (hygiene_drop_privileges(uid, 65534, NULL) != NULL)
				_exit(1);
			signal(SIGKILL, SIG_DFL);
			(void)kill(-1, SIGKILL);	/* everything of uid but ourselves */
			_exit(0);
		}
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		nanosleep(&ts, NULL);
	}
	return users_count_procs(uid);
}

/* Run fn in a child that has become the user; its return value is the exit status. */
int
users_run_as(const struct users_id *id, int (*fn)(void *), void *arg)
{
	char *cause = NULL;
	int status;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		if (users_become(id, &cause) != 0) {
			fprintf(stderr, "shimbridge: %s\n", cause);
			_exit(ADM_FAIL);
		}
		umask(077);
		fflush(stdout);
		_exit(fn(arg));
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static volatile sig_atomic_t users_child = -1;

/* Pass a signal meant for us on to the child. */
static void
users_forward(int sig)
{
	if (users_child > 0)
		(void)kill((pid_t)users_child, sig);
}

/* Child side of users_exec without a terminal: new session, then become the user. */
static void __attribute__((noreturn))
users_exec_child(const struct users_id *id, const char *dir, const char *file,
    char *const argv[], char *const envp[])
{
	char *cause = NULL;

	/* A new session: no controlling terminal, so no TIOCSTI into the admin's tty. */
	(void)setsid();
	users_closefrom(3);
	if (users_become(id, &cause) != 0) {
		fprintf(stderr, "shimbridge: %s\n", cause);
		_exit(ADM_FAIL);
	}
	if (chdir(dir) != 0) {
		fprintf(stderr, "shimbridge: cannot enter %s as %s: %s\n", dir, id->name,
		    strerror(errno));
		_exit(ADM_FAIL);
	}
	environ = (char **)envp;
	execvp(file, argv);
	fprintf(stderr, "shimbridge: cannot run %s as %s: %s\n", file, id->name,
	    strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* Run a command as a session user; returns its exit status (128 + signal). */
int
users_exec(const struct users_id *id, const char *dir, const char *file,
    char *const argv[], char *const envp[])
{
	struct sigaction sa, old[3];
	static const int fwd[3] = { SIGINT, SIGTERM, SIGHUP };
	int status, i;
	pid_t pid;

	if (isatty(STDIN_FILENO))
		return ptyrun(id, dir, file, argv, envp);
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0) {
		fprintf(stderr, "shimbridge: fork: %s\n", strerror(errno));
		return ADM_FAIL;
	}
	if (pid == 0)
		users_exec_child(id, dir, file, argv, envp);
	users_child = pid;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = users_forward;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < 3; i++)
		sigaction(fwd[i], &sa, &old[i]);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			status = ADM_FAIL << 8;
			break;
		}
	}
	for (i = 0; i < 3; i++)
		sigaction(fwd[i], &old[i], NULL);
	users_child = -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
