/*
 * libFuzzer target for the config loader (bridge/config.c config_load), the whole
 * path an operator's file takes: root-owned file checks, JSON, every section,
 * cross-checks, and the release of a config in every partial state. The input is
 * written (truncating) to one root-owned 0600 file made in LLVMFuzzerInitialize,
 * then loaded with no_secrets = 1 (secrets are parsed, never read: no file, env or
 * command source is touched). ASan's leak checker is the main oracle: a refusal
 * must free everything it built. On success the lookups and the agent-facing
 * summary run over every session; on failure there is a cause naming the file.
 *
 * The runner must exist, so the seeds use "runner": "daemon" (uid 1) and sessions
 * given by "uid". Run as root: the loader refuses files not owned by root.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "policy.h"

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static char	fuzz_dir[] = "/tmp/fuzz_config.XXXXXX";
static char	fuzz_path[64];

/* Remove the temporary file and directory at exit. */
static void
fuzz_cleanup(void)
{
	unlink(fuzz_path);
	rmdir(fuzz_dir);
}

/* Make the private directory; the file is created on the first run. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (geteuid() != 0)
		fprintf(stderr, "fuzz_config: not root: every input will be refused as "
		    "\"must be owned by root\"\n");
	umask(077);
	if (mkdtemp(fuzz_dir) == NULL)
		abort();
	snprintf(fuzz_path, sizeof fuzz_path, "%s/config.json", fuzz_dir);
	atexit(fuzz_cleanup);
	return 0;
}

/* Replace the file's contents with data. */
static void
fuzz_write(const uint8_t *data, size_t size)
{
	size_t off = 0;
	ssize_t n;
	int fd;

	fd = open(fuzz_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		abort();
	while (off < size) {
		n = write(fd, data + off, size - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			abort();
		off += (size_t)n;
	}
	close(fd);
}

/* Exercise the read-only API of a loaded config. */
static void
fuzz_use(struct config *c)
{
	size_t i, j;

	if (c->runner == NULL || c->version == NULL || c->socket_path == NULL ||
	    c->socket_path[0] != '/')
		abort();
	for (i = 0; i < c->nsessions; i++) {
		const struct session *s = &c->sessions[i];
		char *summary;

		if (s->uid == 0 || s->uid == 65534 || s->uid == c->runner_uid)
			abort();
		if (config_session_by_uid(c, s->uid) != s ||
		    config_session_by_name(c, s->name) != s)
			abort();
		for (j = 0; j < s->ntools; j++) {
			if (!config_session_has_tool(s, s->tools[j]))
				abort();
			if (config_tool(c, s->tools[j]) == NULL &&
			    (strcmp(s->tools[j], "git") != 0 || c->git_helper == NULL))
				abort();
		}
		for (j = 0; j < s->nrepos; j++) {
			if (!config_session_has_repo(s, s->repos[j]))
				abort();
		}
		summary = policy_allowed_summary(c, s);
		if (summary == NULL || strlen(summary) >= 1024)
			abort();
		free(summary);
	}
	for (i = 0; i < c->ntools; i++) {
		if (config_tool(c, c->tools[i].name) != &c->tools[i] ||
		    c->tools[i].path == NULL || c->tools[i].path[0] != '/')
			abort();
	}
	for (i = 0; i < c->ngit_hosts; i++) {
		if (config_git_host(c, c->git_hosts[i].name) == NULL)
			abort();
	}
	config_unref(config_ref(c));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config *c;
	char *cause = NULL;

	fuzz_write(data, size);
	c = config_load(fuzz_path, 1, &cause);
	if (c == NULL) {
		if (cause == NULL || strncmp(cause, fuzz_path, strlen(fuzz_path)) != 0)
			abort();
		free(cause);
		return 0;
	}
	if (cause != NULL)
		abort();
	fuzz_use(c);
	config_unref(c);
	return 0;
}
