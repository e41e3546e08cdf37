/*
 * injectd: the credential injector (bridge/inject.c) on its own, for tests and
 * the bench. Serves one target until SIGTERM/SIGINT, then frees everything and
 * exits 0.
 *
 *   injectd --listen unix:PATH|tcp:PORT --upstream URL --secret-file FILE
 *           [--api github|ghe|git] [--host HOST] [--ca FILE] [--auth token|basic]
 *           [--user NAME] [--placeholder P] [--repo OWNER/NAME]... [--push]
 *           [--max-body BYTES] [--audit FILE] [--ready FILE] [--mode OCTAL]
 *
 * tcp:PORT listens on 127.0.0.1 (0: any free port). --ready FILE is written
 * (atomically) with the port (tcp) or "ok" once the listener is up. One JSON line
 * per request goes to --audit: summary, status, bytes, refusal.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <netinet/in.h>

#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>
#include <sodium.h>

#include "inject.h"

#define MAX_REPOS 16

struct state {
	unsigned char	*secret;
	size_t		 secret_len;
	FILE		*audit;
};

/* The secret callback: the value read at start. */
static int
injectd_secret(void *arg, const unsigned char **val, size_t *len)
{
	struct state	*st = arg;

	*val = st->secret;
	*len = st->secret_len;
	return 0;
}

/* The audit callback: one JSON line. */
static void
injectd_audit(void *arg, const char *summary, int status, unsigned long long up,
    unsigned long long down, const char *refusal)
{
	struct state	*st = arg;
	json_t		*o;
	char		*s;

	if (st->audit == NULL)
		return;
	o = json_pack("{s:s, s:i, s:I, s:I, s:s?}", "summary", summary, "status", status,
	    "bytes_up", (json_int_t)up, "bytes_down", (json_int_t)down, "refusal", refusal);
	if (o == NULL || (s = json_dumps(o, JSON_COMPACT)) == NULL)
		errx(1, "json");
	fprintf(st->audit, "%s\n", s);
	fflush(st->audit);
	free(s);
	json_decref(o);
}

/* Stop the loop on a signal. */
static void
injectd_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	event_base_loopexit(arg, NULL);
}

/* Read the secret file (trailing newline dropped) into guarded memory. */
static void
injectd_read_secret(struct state *st, const char *path)
{
	char	 buf[4096];
	ssize_t	 n;
	int	 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		err(1, "%s", path);
	n = read(fd, buf, sizeof buf);
	close(fd);
	if (n <= 0)
		errx(1, "%s: empty", path);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if ((st->secret = sodium_malloc((size_t)n)) == NULL)
		err(1, "sodium_malloc");
	memcpy(st->secret, buf, (size_t)n);
	st->secret_len = (size_t)n;
	sodium_memzero(buf, sizeof buf);
}

/* Open the listener named by spec; returns the fd and sets *port for tcp. */
static int
injectd_listen(const char *spec, int *port, mode_t mode)
{
	int	 fd;

	if (strncmp(spec, "unix:", 5) == 0) {
		struct sockaddr_un	 sun;

		memset(&sun, 0, sizeof sun);
		sun.sun_family = AF_UNIX;
		if (strlen(spec + 5) >= sizeof sun.sun_path)
			errx(1, "socket path too long");
		strcpy(sun.sun_path, spec + 5);
		unlink(sun.sun_path);
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
		    bind(fd, (struct sockaddr *)&sun, sizeof sun) == -1 ||
		    chmod(sun.sun_path, mode) == -1 || listen(fd, 64) == -1)
			err(1, "%s", spec);
		*port = 0;
		return fd;
	}
	if (strncmp(spec, "tcp:", 4) == 0) {
		struct sockaddr_in	 sin;
		socklen_t		 len = sizeof sin;

		memset(&sin, 0, sizeof sin);
		sin.sin_family = AF_INET;
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sin.sin_port = htons((unsigned short)atoi(spec + 4));
		if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
		    bind(fd, (struct sockaddr *)&sin, sizeof sin) == -1 || listen(fd, 64) == -1 ||
		    getsockname(fd, (struct sockaddr *)&sin, &len) == -1)
			err(1, "%s", spec);
		*port = ntohs(sin.sin_port);
		return fd;
	}
	errx(1, "--listen unix:PATH or tcp:PORT");
}

int
main(int argc, char **argv)
{
	struct inject_target	 t;
	struct httppolicy_scope	 scope;
	struct state		 st;
	struct event_base	*base;
	struct event		*sigterm, *sigint;
	struct inject		*inj;
	const char		*repos[MAX_REPOS];
	const char		*listen_spec = NULL, *secret_file = NULL, *ready = NULL;
	char			*cause, tmp[4096];
	mode_t			 mode = 0600;
	size_t			 nrepos = 0;
	int			 i, fd, port;
	FILE			*f;

	memset(&t, 0, sizeof t);
	memset(&scope, 0, sizeof scope);
	memset(&st, 0, sizeof st);
	if (sodium_init() == -1)
		errx(1, "sodium_init");
	inject_memory_init();
	t.api = HTTP_API_GHE;
	t.auth = INJECT_AUTH_TOKEN;
	for (i = 1; i < argc; i++) {
		const char	*o = argv[i], *a = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(o, "--push") == 0) {
			scope.allow_push = 1;
			continue;
		}
		if (a == NULL)
			errx(2, "%s needs a value", o);
		i++;
		if (strcmp(o, "--listen") == 0)
			listen_spec = a;
		else if (strcmp(o, "--upstream") == 0)
			t.upstream = a;
		else if (strcmp(o, "--secret-file") == 0)
			secret_file = a;
		else if (strcmp(o, "--host") == 0)
			t.host = a;
		else if (strcmp(o, "--ca") == 0)
			t.ca_file = a;
		else if (strcmp(o, "--user") == 0)
			t.username = a;
		else if (strcmp(o, "--placeholder") == 0)
			t.placeholder = a;
		else if (strcmp(o, "--ready") == 0)
			ready = a;
		else if (strcmp(o, "--mode") == 0)
			mode = (mode_t)strtol(a, NULL, 8);
		else if (strcmp(o, "--max-body") == 0)
			t.max_body = strtoull(a, NULL, 10);
		else if (strcmp(o, "--audit") == 0) {
			if ((st.audit = fopen(a, "a")) == NULL)
				err(1, "%s", a);
		} else if (strcmp(o, "--repo") == 0) {
			if (nrepos == MAX_REPOS)
				errx(2, "too many --repo");
			repos[nrepos++] = a;
		} else if (strcmp(o, "--auth") == 0)
			t.auth = strcmp(a, "basic") == 0 ? INJECT_AUTH_BASIC : INJECT_AUTH_TOKEN;
		else if (strcmp(o, "--api") == 0)
			t.api = strcmp(a, "github") == 0 ? HTTP_API_GITHUB :
			    strcmp(a, "git") == 0 ? HTTP_API_GIT : HTTP_API_GHE;
		else
			errx(2, "unknown option %s", o);
	}
	if (listen_spec == NULL || t.upstream == NULL || secret_file == NULL)
		errx(2, "--listen, --upstream and --secret-file are required");
	injectd_read_secret(&st, secret_file);
	scope.api = t.api;
	scope.repos = repos;
	scope.nrepos = nrepos;
	t.scope = &scope;
	t.secret = injectd_secret;
	t.audit = injectd_audit;
	t.arg = &st;

	signal(SIGPIPE, SIG_IGN);
	if ((base = event_base_new()) == NULL)
		errx(1, "event_base_new");
	fd = injectd_listen(listen_spec, &port, mode);
	if ((inj = inject_new(base, fd, &t, &cause)) == NULL)
		errx(1, "%s", cause);
	sigterm = evsignal_new(base, SIGTERM, injectd_signal, base);
	sigint = evsignal_new(base, SIGINT, injectd_signal, base);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	if (ready != NULL) {
		snprintf(tmp, sizeof tmp, "%s.tmp", ready);
		if ((f = fopen(tmp, "w")) == NULL)
			err(1, "%s", tmp);
		if (port != 0)
			fprintf(f, "%d\n", port);
		else
			fprintf(f, "ok\n");
		if (fclose(f) != 0 || rename(tmp, ready) != 0)
			err(1, "%s", ready);
	}
	event_base_dispatch(base);
	inject_free(inj);
	event_free(sigterm);
	event_free(sigint);
	event_base_free(base);
	sodium_free(st.secret);
	if (st.audit != NULL)
		fclose(st.audit);
	return 0;
}
