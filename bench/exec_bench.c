/*
 * exec_bench: one harness for every process-level measurement in bench/run, so
 * the shim, a direct exec, sudo and setpriv all pay the same fork/exec/wait cost.
 *
 *	exec_bench [-n N] [-w WARMUP] [-u USER] [-e NAME=VALUE]... [-b BYTES] [-E]
 *	    [-r FILE] -- PATH [ARG...]
 *
 * Runs PATH (argv[0] = PATH, environment only the -e entries) N times after WARMUP
 * untimed runs, each fork -> execve -> waitpid, and prints one line:
 *	runs=N median_us=... p10_us=... p90_us=... min_us=... mean_us=...
 * Without -b, stdin and stdout are /dev/null. With -b BYTES, each run streams BYTES
 * of printable text into the child's stdin through a pipe and reads its stdout
 * through a pipe to the end, counting the bytes, and the line also has
 *	bytes_in=... bytes_out=... median_mbps=... (MB = 10^6 bytes, per median run)
 * and always median_cpu_us=..., the child's own user+system time (wait4), which for
 * the shim is the client side's whole cost, and self_cpu_us=..., the harness's own
 * CPU per run (with -b: what feeding and draining the pipes cost).
 * With -u USER the harness drops to USER (groups, gid, uid) before the first run.
 * stderr of the child is /dev/null unless -E is given. -r FILE appends every timed
 * run's microseconds to FILE, one per line (bench/run takes medians across calls). Any run that exits non-zero,
 * or (with -b) returns a different number of bytes, makes the harness exit 1.
 */
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK		(64 * 1024)
#define PATTERN_LEN	(1024 * 1024)
#define MAX_ENV		64

static char	 pattern[PATTERN_LEN];

/* Monotonic microseconds. */
static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* For qsort: ascending doubles. */
static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Printable, newline-broken text (what tools print), deterministic. */
static void
fill_pattern(void)
{
	static const char alphabet[] =
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ._-/:";
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	size_t i;

	for (i = 0; i < PATTERN_LEN; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		pattern[i] = (i % 80 == 79) ? '\n' :
		    alphabet[(x * 0x2545f4914f6cdd1dULL >> 40) % (sizeof alphabet - 1)];
	}
}

/* Drop to user: supplementary groups, gid, uid; refuse to keep root. */
static void
drop_to(const char *user)
{
	struct passwd *pw = getpwnam(user);

	if (pw == NULL) {
		fprintf(stderr, "exec_bench: no user %s\n", user);
		exit(2);
	}
	if (initgroups(user, pw->pw_gid) != 0 || setgid(pw->pw_gid) != 0 ||
	    setuid(pw->pw_uid) != 0 || (pw->pw_uid != 0 && setuid(0) == 0)) {
		perror("exec_bench: dropping privileges");
		exit(2);
	}
}

/* Make an fd non-blocking. */
static void
nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		perror("exec_bench: fcntl");
		exit(2);
	}
}

/*
 * One run: returns microseconds from fork to reaped-and-drained, or -1 on a
 * failed run. With bytes > 0, *out gets what the child wrote.
 */
static double
run_once(char *const argv[], char *const envp[], uint64_t bytes, int keep_stderr,
    uint64_t *out, double *cpu)
{
	struct rusage ru;
	int in[2] = { -1, -1 }, outp[2] = { -1, -1 }, status, devnull;
	uint64_t sent = 0, got = 0;
	static char buf[256 * 1024];
	double t0, t1;
	pid_t pid;

	if ((devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
		perror("exec_bench: /dev/null");
		exit(2);
	}
	if (bytes > 0 && (pipe2(in, O_CLOEXEC) != 0 || pipe2(outp, O_CLOEXEC) != 0)) {
		perror("exec_bench: pipe");
		exit(2);
	}
	t0 = now_us();
	if ((pid = fork()) < 0) {
		perror("exec_bench: fork");
		exit(2);
	}
	if (pid == 0) {
		dup2(bytes > 0 ? in[0] : devnull, 0);
		dup2(bytes > 0 ? outp[1] : devnull, 1);
		if (!keep_stderr)
			dup2(devnull, 2);
		execve(argv[0], argv, envp);
		_exit(127);
	}
	close(devnull);
	if (bytes > 0) {
		struct pollfd pfd[2];

		close(in[0]);
		close(outp[1]);
		nonblock(in[1]);
		nonblock(outp[0]);
		while (in[1] >= 0 || outp[0] >= 0) {
			int n = 0, iw = -1, ir = -1;

			if (in[1] >= 0) {
				pfd[n].fd = in[1];
				pfd[n].events = POLLOUT;
				iw = n++;
			}
			if (outp[0] >= 0) {
				pfd[n].fd = outp[0];
				pfd[n].events = POLLIN;
				ir = n++;
			}
			if (poll(pfd, (nfds_t)n, -1) < 0) {
				if (errno == EINTR)
					continue;
				perror("exec_bench: poll");
				exit(2);
			}
			if (iw >= 0 && (pfd[iw].revents & (POLLOUT | POLLERR | POLLHUP))) {
				size_t off = (size_t)(sent % PATTERN_LEN), len = CHUNK;
				ssize_t w;

				if (len > PATTERN_LEN - off)
					len = PATTERN_LEN - off;
				if (len > bytes - sent)
					len = (size_t)(bytes - sent);
				w = write(in[1], pattern + off, len);
				if (w > 0)
					sent += (uint64_t)w;
				else if (w < 0 && errno != EAGAIN && errno != EINTR)
					sent = bytes;	/* EPIPE: the child stopped reading */
				if (sent == bytes) {
					close(in[1]);
					in[1] = -1;
				}
			}
			if (ir >= 0 && (pfd[ir].revents & (POLLIN | POLLERR | POLLHUP))) {
				ssize_t r = read(outp[0], buf, sizeof buf);

				if (r > 0)
					got += (uint64_t)r;
				else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
					close(outp[0]);
					outp[0] = -1;
				}
			}
		}
	}
	while (wait4(pid, &status, 0, &ru) < 0) {
		if (errno != EINTR) {
			perror("exec_bench: waitpid");
			exit(2);
		}
	}
	t1 = now_us();
	if (out != NULL)
		*out = got;
	*cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
	    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "exec_bench: %s: %s %d\n", argv[0],
		    WIFEXITED(status) ? "exit status" : "killed by signal",
		    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		return -1;
	}
	return t1 - t0;
}

static void
usage(void)
{
	fprintf(stderr, "usage: exec_bench [-n N] [-w WARMUP] [-u USER] [-e NAME=VALUE]... "
	    "[-b BYTES] [-E] [-r FILE] -- PATH [ARG...]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	char *envp[MAX_ENV + 1];
	const char *user = NULL;
	FILE *raw = NULL;
	unsigned long long bytes = 0;
	uint64_t got;
	double *t, *cpu, sum = 0, c0;
	int n = 500, warm = 10, nenv = 0, keep_stderr = 0, ch, i;

	while ((ch = getopt(argc, argv, "n:w:u:e:b:Er:")) != -1) {
		switch (ch) {
		case 'n':
			n = atoi(optarg);
			break;
		case 'w':
			warm = atoi(optarg);
			break;
		case 'u':
			user = optarg;
			break;
		case 'e':
			if (nenv == MAX_ENV || strchr(optarg, '=') == NULL)
				usage();
			envp[nenv++] = optarg;
			break;
		case 'b':
			bytes = strtoull(optarg, NULL, 10);
			break;
		case 'E':
			keep_stderr = 1;
			break;
		case 'r':
			if ((raw = fopen(optarg, "a")) == NULL) {
				perror(optarg);
				return 2;
			}
			break;
		default:
			usage();
		}
	}
	envp[nenv] = NULL;
	argc -= optind;
	argv += optind;
	if (argc < 1 || argv[0][0] != '/' || n < 1 || warm < 0)
		usage();
	signal(SIGPIPE, SIG_IGN);
	fill_pattern();
	if (user != NULL)
		drop_to(user);
	if ((t = calloc((size_t)n, sizeof *t)) == NULL ||
	    (cpu = calloc((size_t)n, sizeof *cpu)) == NULL)
		return 2;
	for (i = 0; i < warm; i++) {
		if (run_once(argv, envp, bytes, keep_stderr, &got, &c0) < 0)
			return 1;
	}
	for (i = 0; i < n; i++) {
		if ((t[i] = run_once(argv, envp, bytes, keep_stderr, &got, &cpu[i])) < 0)
			return 1;
		if (bytes > 0 && got != bytes) {
			fprintf(stderr, "exec_bench: sent %llu bytes, got %llu back\n", bytes,
			    (unsigned long long)got);
			return 1;
		}
		sum += t[i];
		if (raw != NULL)
			fprintf(raw, "%.1f\n", t[i]);
	}
	if (raw != NULL && fclose(raw) != 0) {
		perror("exec_bench: raw samples");
		return 2;
	}
	qsort(t, (size_t)n, sizeof *t, cmp_double);
	qsort(cpu, (size_t)n, sizeof *cpu, cmp_double);
	printf("runs=%d median_us=%.1f p10_us=%.1f p90_us=%.1f min_us=%.1f mean_us=%.1f",
	    n, t[n / 2], t[n / 10], t[(n * 9) / 10], t[0], sum / n);
	printf(" median_cpu_us=%.1f", cpu[n / 2]);
	{
		struct rusage self;

		/* The harness's own CPU per timed run (warm-ups included in the total). */
		if (getrusage(RUSAGE_SELF, &self) == 0)
			printf(" self_cpu_us=%.1f", ((double)(self.ru_utime.tv_sec +
			    self.ru_stime.tv_sec) * 1e6 + (double)(self.ru_utime.tv_usec +
			    self.ru_stime.tv_usec)) / (n + warm));
	}
	if (bytes > 0)
		printf(" bytes_in=%llu bytes_out=%llu median_mbps=%.1f", bytes,
		    (unsigned long long)got, (double)bytes / t[n / 2]);
	printf("\n");
	free(t);
	free(cpu);
	return 0;
}
