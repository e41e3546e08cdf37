/* Protocol tables shared by the bridge and the shim: error codes, signals, env allowlist. */
#include <signal.h>
#include <string.h>

#include "proto.h"

static const struct {
	const char	*code;
	int		 exit;
} error_exits[] = {
	{ ERR_PROTOCOL,		EXIT_PROTOCOL },
	{ ERR_DENIED,		EXIT_DENIED },
	{ ERR_UNKNOWN_TOOL,	EXIT_UNKNOWN_TOOL },
	{ ERR_UNAUTHORIZED,	EXIT_UNAUTHORIZED },
	{ ERR_BUSY,		EXIT_BUSY },
	{ ERR_UNAVAILABLE,	EXIT_UNAVAILABLE },
	{ ERR_TIMEOUT,		EXIT_TIMEOUT },
	{ ERR_OUTPUT_LIMIT,	EXIT_OUTPUT_LIMIT },
	{ ERR_INTERNAL,		EXIT_PROTOCOL },
};

/* Signal names travel on the wire because numbers differ between Linux and macOS. */
static const struct {
	const char	*name;
	int		 signo;
} signals[] = {
	{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "ILL", SIGILL },
	{ "TRAP", SIGTRAP }, { "ABRT", SIGABRT }, { "BUS", SIGBUS }, { "FPE", SIGFPE },
	{ "KILL", SIGKILL }, { "USR1", SIGUSR1 }, { "SEGV", SIGSEGV }, { "USR2", SIGUSR2 },
	{ "PIPE", SIGPIPE }, { "ALRM", SIGALRM }, { "TERM", SIGTERM }, { "CHLD", SIGCHLD },
	{ "CONT", SIGCONT }, { "STOP", SIGSTOP }, { "TSTP", SIGTSTP }, { "TTIN", SIGTTIN },
	{ "TTOU", SIGTTOU }, { "URG", SIGURG }, { "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ },
	{ "VTALRM", SIGVTALRM }, { "PROF", SIGPROF }, { "WINCH", SIGWINCH }, { "SYS", SIGSYS },
};

static const char *env_allow[] = { PROTO_ENV_ALLOW };

/* Map an error code to the shim's exit code. */
int
proto_error_exit(const char *code)
{
	size_t i;

	for (i = 0; i < sizeof error_exits / sizeof error_exits[0]; i++) {
		if (strcmp(code, error_exits[i].code) == 0)
			return error_exits[i].exit;
	}
	return EXIT_PROTOCOL;
}

/* Name of a local signal number, or NULL. */
const char *
proto_signame(int signo)
{
	size_t i;

	for (i = 0; i < sizeof signals / sizeof signals[0]; i++) {
		if (signals[i].signo == signo)
			return signals[i].name;
	}
	return NULL;
}

/* Local number of a signal name, or -1. */
int
proto_signum(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof signals / sizeof signals[0]; i++) {
		if (strcmp(signals[i].name, name) == 0)
			return signals[i].signo;
	}
	return -1;
}

/* Whether the shim may forward this variable: the fixed list, and LC_<UPPER/_>. */
int
proto_env_allowed(const char *name, size_t len)
{
	size_t i;

	if (len > 3 && memcmp(name, "LC_", 3) == 0) {
		for (i = 3; i < len; i++) {
			if ((name[i] < 'A' || name[i] > 'Z') && name[i] != '_')
				return 0;
		}
		return 1;
	}
	for (i = 0; i < sizeof env_allow / sizeof env_allow[0]; i++) {
		if (strlen(env_allow[i]) == len && memcmp(env_allow[i], name, len) == 0)
			return 1;
	}
	return 0;
}
