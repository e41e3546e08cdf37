/*
 * Run a session user's command on a fresh pseudo-terminal and relay it to ours.
 * The user's processes never get the administrator's terminal: with it they could
 * push keystrokes into root's shell (TIOCSTI) after the command ends.
 */
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "admin.h"
#include "util.h"

extern char **environ;

static int ptyrun_sigpipe[2] = { -1, -1 };

/* Signal handler: hand the number to the loop. */
static void
ptyrun_onsignal(int sig)
{
	unsigned char c = (unsigned char)sig;
	int saved = errno;

	(void)!write(ptyrun_sigpipe[1], &c, 1);
	errno = saved;
}

/* Copy our window size to the pseudo-terminal. */
static void
ptyrun_winsize(int master)
{
	struct winsize ws;

	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
		(void)ioctl(master, TIOCSWINSZ, &ws);
}

/* Child: new session with the slave as controlling terminal, then become the user. */
static void __attribute__((noreturn))
ptyrun_child(const struct users_id *id, const char *slave, const char *dir,
    const char *file, char *const argv[], char *const envp[])
{
	char *cause = NULL;
	int fd;

	if (setsid() < 0 || (fd = open(slave, O_RDWR)) < 0) {
		fprintf(stderr, "shimbridge: cannot open %s: %s\n", slave, strerror(errno));
		_exit(ADM_FAIL);
	}
#ifdef TIOCSCTTY
	(void)ioctl(fd, TIOCSCTTY, 0);
#endif
	/* Like login: the terminal belongs to the user who works on it. */
	(void)!fchown(fd, id->uid, (gid_t)-1);
	(void)!fchmod(fd, 0620);
	if (dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
		_exit(ADM_FAIL);
	users_closefrom(3);
	if (users_become(id, &cause) != 0) {
		fprintf(stderr, "shimbridge: %s\r\n", cause);
		_exit(ADM_FAIL);
	}
	if (chdir(dir) != 0) {
		fprintf(stderr, "shimbridge: cannot enter %s as %s: %s\r\n", dir, id->name,
		    strerror(errno));
		_exit(ADM_FAIL);
	}
	environ = (char **)envp;
	execvp(file, argv);
	fprintf(stderr, "shimbridge: cannot run %s as %s: %s\r\n", file, id->name,
	    strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* Write all of buf to fd (blocking). */
static int
ptyrun_write_all(int fd, const unsigned char *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = write(fd, buf, len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Run argv on a new pseudo-terminal as id; returns its exit status (128 + signal). */
int
ptyrun(const struct users_id *id, const char *dir, const char *file, char *const argv[],
    char *const envp[])
{
	static const int sigs[] = { SIGCHLD, SIGWINCH, SIGTERM, SIGHUP };
	struct sigaction sa, old[4];
	struct termios saved, raw;
	unsigned char buf[8192];
	char *slave = NULL;
	int master = -1, have_tty, status = ADM_FAIL << 8, reaped = 0, in_open = 1;
	size_t i;
	pid_t pid = -1;

	if ((master = posix_openpt(O_RDWR | O_NOCTTY)) < 0 || grantpt(master) != 0 ||
	    unlockpt(master) != 0 || ptsname(master) == NULL) {
		fprintf(stderr, "shimbridge: cannot allocate a pseudo-terminal: %s\n",
		    strerror(errno));
		if (master >= 0)
			close(master);
		return ADM_FAIL;
	}
	slave = xstrdup(ptsname(master));
	(void)fcntl(master, F_SETFD, FD_CLOEXEC);
	ptyrun_winsize(master);
	if (pipe(ptyrun_sigpipe) != 0) {
		close(master);
		free(slave);
		return ADM_FAIL;
	}
	for (i = 0; i < 2; i++) {
		(void)fcntl(ptyrun_sigpipe[i], F_SETFD, FD_CLOEXEC);
		(void)fcntl(ptyrun_sigpipe[i], F_SETFL, O_NONBLOCK);
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = ptyrun_onsignal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < 4; i++)
		sigaction(sigs[i], &sa, &old[i]);
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0) {
		fprintf(stderr, "shimbridge: fork: %s\n", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		for (i = 0; i < 4; i++)
			sigaction(sigs[i], &old[i], NULL);
		ptyrun_child(id, slave, dir, file, argv, envp);
	}
	have_tty = tcgetattr(STDIN_FILENO, &saved) == 0;
	if (have_tty) {
		raw = saved;
		cfmakeraw(&raw);
		(void)tcsetattr(STDIN_FILENO, TCSADRAIN, &raw);
	}
	for (;;) {
		struct pollfd pfd[3] = {
			{ master, POLLIN, 0 },
			{ in_open ? STDIN_FILENO : -1, POLLIN, 0 },
			{ ptyrun_sigpipe[0], POLLIN, 0 },
		};
		ssize_t n;

		if (poll(pfd, 3, reaped ? 100 : -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[2].revents & POLLIN) {
			unsigned char sig;

			while (read(ptyrun_sigpipe[0], &sig, 1) == 1) {
				if (sig == SIGWINCH)
					ptyrun_winsize(master);
				else if (sig == SIGTERM || sig == SIGHUP)
					(void)kill(-pid, SIGHUP);
			}
			if (!reaped && waitpid(pid, &status, WNOHANG) == pid)
				reaped = 1;
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			n = read(master, buf, sizeof buf);
			if (n <= 0) {
				if (n < 0 && errno == EINTR)
					continue;
				break;	/* EIO: every process closed the terminal */
			}
			if (ptyrun_write_all(STDOUT_FILENO, buf, (size_t)n) != 0)
				break;
		} else if (reaped && !(pfd[0].revents & POLLIN)) {
			/* The command is gone and its terminal is quiet: a holder stays behind. */
			if (pfd[0].revents == 0)
				break;
		}
		if (in_open && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			n = read(STDIN_FILENO, buf, sizeof buf);
			if (n <= 0)
				in_open = 0;
			else if (ptyrun_write_all(master, buf, (size_t)n) != 0)
				in_open = 0;
		}
	}
	if (have_tty)
		(void)tcsetattr(STDIN_FILENO, TCSADRAIN, &saved);
	if (!reaped) {
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	}
out:
	for (i = 0; i < 4; i++)
		sigaction(sigs[i], &old[i], NULL);
	close(ptyrun_sigpipe[0]);
	close(ptyrun_sigpipe[1]);
	ptyrun_sigpipe[0] = ptyrun_sigpipe[1] = -1;
	close(master);
	free(slave);
	if (pid < 0)
		return ADM_FAIL;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
