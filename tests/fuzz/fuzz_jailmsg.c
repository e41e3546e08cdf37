/*
 * libFuzzer target for the jail init's side of the control protocol
 * (common/jailmsg.c): the init (shimbridge-jail) parses what the daemon sends it
 * while it is root (SETUP) and then as the runner (RUN), and the jail server's
 * FORK and TMPL (root) with the daemon's reading of its answer (PID). Byte 0 picks the
 * decoder; the rest is a message body. Checked: a decoded message holds only
 * absolute paths without "..", bounded counts, a non-root runner, environment
 * entries of the NAME=value form, and re-encodes to the same bytes (the
 * encoder and the decoder agree); ASan catches the rest.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jailmsg.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* An absolute path without a ".." component. */
static void
check_path(const char *p)
{
	if (p[0] != '/' || strstr(p, "/../") != NULL ||
	    (strlen(p) >= 3 && strcmp(p + strlen(p) - 3, "/..") == 0))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jailmsg_setup s;
	struct jailmsg_run m;
	enum jailmsg_type type;
	unsigned char *re;
	const char *why = NULL;
	uint32_t len;
	size_t i, n;

	if (size < 1)
		return 0;
	if (size >= 1 + JAILMSG_HDR)
		(void)jailmsg_get_header(data + 1, &type, &len);
	if ((data[0] & 6) == 6) {
		/* The jail server's FORK and TMPL, and the daemon's reading of its PID. */
		const char *root, *sdir;
		unsigned char tb[2 * 4096];
		uint32_t f;
		int cg, tm;
		int32_t pid;

		if (jailmsg_fork_decode(data + 1, size - 1, 0x1f, 0x0f, &f, &cg, &tm, &why) == 0 &&
		    ((f & ~0x1fu) != 0 || (f & 0x0f) != 0x0f || (cg != 0 && cg != 1) ||
		    (tm != 0 && tm != 1)))
			abort();
		if (jailmsg_tmpl_decode(data + 1, size - 1, &root, &sdir, &why) == 0) {
			check_path(root);
			check_path(sdir);
			if (strcmp(sdir, "/") == 0 || size - 1 > sizeof tb ||
			    jailmsg_tmpl_encode(tb, sizeof tb, root, sdir) != size - 1 ||
			    memcmp(tb, data + 1, size - 1) != 0)
				abort();
		}
		if (jailmsg_pid_decode(data + 1, size - 1, &pid, &why) == 0 &&
		    (pid == 0 || pid < -4095))
			abort();
		return 0;
	}
	if (data[0] & 1) {
		if (jailmsg_setup_decode(data + 1, size - 1, &s, &why) != 0) {
			if (why == NULL)
				abort();
			return 0;
		}
		if (s.uid == 0 || s.gid == 0 || s.nbinds > JAILMSG_BINDS_MAX)
			abort();
		check_path(s.root);
		if (s.scratch[0] != '\0' && s.scratch[0] != '/')
			abort();
		for (i = 0; i < s.nbinds; i++)
			check_path(s.binds[i].path);
		n = jailmsg_setup_size(&s);
		if (n != size - 1 || (re = malloc(n)) == NULL)
			abort();
		if (jailmsg_setup_encode(re, n, &s) != n || memcmp(re, data + 1, n) != 0)
			abort();
		free(re);
		return 0;
	}
	if (jailmsg_run_decode(data + 1, size - 1, &m, &why) != 0) {
		if (why == NULL || m.argv != NULL || m.envp != NULL)
			abort();
		return 0;
	}
	if ((m.nfds != 3 && m.nfds != 4) || m.argv[0] == NULL)
		abort();
	check_path(m.path);
	check_path(m.cwd);
	for (i = 0; m.envp[i] != NULL; i++) {
		if (m.envp[i][0] == '=' || strchr(m.envp[i], '=') == NULL)
			abort();
	}
	n = jailmsg_run_size(m.path, m.cwd, m.argv, m.envp);
	if (n != size - 1 || (re = malloc(n)) == NULL)
		abort();
	if (jailmsg_run_encode(re, n, m.cpu_seconds, m.nfds, m.path, m.cwd, m.argv, m.envp) != n ||
	    memcmp(re, data + 1, n) != 0)
		abort();
	free(re);
	jailmsg_run_free(&m);
	return 0;
}
