/* The daemon <-> jail init control messages (see jailmsg.h). */
#include <sys/socket.h>
#include <sys/uio.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jailmsg.h"

/* Store a 32-bit little-endian integer. */
static void
jailmsg_put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

/* Load a 32-bit little-endian integer. */
static uint32_t
jailmsg_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

/* Fill a header. */
void
jailmsg_put_header(unsigned char *hdr, enum jailmsg_type type, uint32_t len)
{
	jailmsg_put32(hdr, (uint32_t)type);
	jailmsg_put32(hdr + 4, len);
}

/* Read a header: a known type and a body within JAILMSG_MAX. */
int
jailmsg_get_header(const unsigned char *hdr, enum jailmsg_type *type, uint32_t *len)
{
	uint32_t t = jailmsg_get32(hdr);

	*len = jailmsg_get32(hdr + 4);
	if (t != JAILMSG_SETUP && t != JAILMSG_READY && t != JAILMSG_RUN && t != JAILMSG_EXEC &&
	    t != JAILMSG_ERROR && t != JAILMSG_FORK && t != JAILMSG_PID && t != JAILMSG_DROP &&
	    t != JAILMSG_TMPL)
		return -1;
	if (*len > JAILMSG_MAX)
		return -1;
	*type = (enum jailmsg_type)t;
	return 0;
}

/* Send an empty message with one descriptor (see jailmsg.h). */
long
jailmsg_send_empty(int sock, enum jailmsg_type type, int fd, int flags)
{
	unsigned char hdr[JAILMSG_HDR];
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = { hdr, sizeof hdr };
	struct msghdr mh;
	struct cmsghdr *c;

	jailmsg_put_header(hdr, type, 0);
	memset(&mh, 0, sizeof mh);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (fd >= 0) {
		memset(&cm, 0, sizeof cm);
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof cm.buf;
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	return (long)sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
}

/* A writer over a sized buffer; overflow is remembered, not written. */
struct jailmsg_w {
	unsigned char	*p;
	size_t		 size, len;
	int		 over;
};

/* Append bytes, or note the overflow. */
static void
jailmsg_w_bytes(struct jailmsg_w *w, const void *src, size_t n)
{
	if (w->over || n > w->size - w->len || w->len + n > JAILMSG_MAX) {
		w->over = 1;
		return;
	}
	if (w->p != NULL)
		memcpy(w->p + w->len, src, n);
	w->len += n;
}

/* Append an integer. */
static void
jailmsg_w_32(struct jailmsg_w *w, uint32_t v)
{
	unsigned char b[4];

	jailmsg_put32(b, v);
	jailmsg_w_bytes(w, b, 4);
}

/* Append a string with its NUL. */
static void
jailmsg_w_str(struct jailmsg_w *w, const char *s)
{
	jailmsg_w_bytes(w, s, strlen(s) + 1);
}

/* Count a NULL-terminated array. */
static size_t
jailmsg_count(char *const *v)
{
	size_t n = 0;

	while (v != NULL && v[n] != NULL)
		n++;
	return n;
}

/* Write (or with p NULL, measure) a SETUP body. */
static size_t
jailmsg_setup_write(unsigned char *p, size_t size, const struct jailmsg_setup *s)
{
	struct jailmsg_w w = { p, size, 0, 0 };
	size_t i;

	if (s->nbinds > JAILMSG_BINDS_MAX || (unsigned)s->net > JAILMSG_NET_JOIN)
		return 0;
	jailmsg_w_32(&w, s->uid);
	jailmsg_w_32(&w, s->gid);
	jailmsg_w_32(&w, (uint32_t)s->net);
	jailmsg_w_32(&w, (uint32_t)s->nbinds);
	jailmsg_w_str(&w, s->root);
	jailmsg_w_str(&w, s->scratch != NULL ? s->scratch : "");
	for (i = 0; i < s->nbinds; i++) {
		jailmsg_w_32(&w, s->binds[i].writable ? 1 : 0);
		jailmsg_w_str(&w, s->binds[i].path);
	}
	return w.over ? 0 : w.len;
}

/* The body length of a SETUP (0: over a limit). */
size_t
jailmsg_setup_size(const struct jailmsg_setup *s)
{
	return jailmsg_setup_write(NULL, SIZE_MAX, s);
}

/* Encode a SETUP body. */
size_t
jailmsg_setup_encode(unsigned char *p, size_t size, const struct jailmsg_setup *s)
{
	return jailmsg_setup_write(p, size, s);
}

/* Write (or with p NULL, measure) a RUN body. */
static size_t
jailmsg_run_write(unsigned char *p, size_t size, uint32_t cpu, uint32_t nfds,
    const char *path, const char *cwd, char *const *argv, char *const *envp)
{
	struct jailmsg_w w = { p, size, 0, 0 };
	size_t argc = jailmsg_count(argv), envc = jailmsg_count(envp), i;

	if (argc == 0 || argc > JAILMSG_ARGS_MAX || envc > JAILMSG_ENV_MAX ||
	    (nfds != 3 && nfds != 4))
		return 0;
	jailmsg_w_32(&w, cpu);
	jailmsg_w_32(&w, nfds);
	jailmsg_w_32(&w, (uint32_t)argc);
	jailmsg_w_32(&w, (uint32_t)envc);
	jailmsg_w_str(&w, path);
	jailmsg_w_str(&w, cwd);
	for (i = 0; i < argc; i++)
		jailmsg_w_str(&w, argv[i]);
	for (i = 0; i < envc; i++)
		jailmsg_w_str(&w, envp[i]);
	return w.over ? 0 : w.len;
}

/* The body length of a RUN (0: over a limit); nfds does not change it. */
size_t
jailmsg_run_size(const char *path, const char *cwd, char *const *argv, char *const *envp)
{
	return jailmsg_run_write(NULL, SIZE_MAX, 0, 3, path, cwd, argv, envp);
}

/* Encode a RUN body. */
size_t
jailmsg_run_encode(unsigned char *p, size_t size, uint32_t cpu, uint32_t nfds,
    const char *path, const char *cwd, char *const *argv, char *const *envp)
{
	return jailmsg_run_write(p, size, cpu, nfds, path, cwd, argv, envp);
}

/* A reader over a body. */
struct jailmsg_r {
	const unsigned char	*p;
	size_t			 len, off;
};

/* Read an integer; -1 past the end. */
static int
jailmsg_r_32(struct jailmsg_r *r, uint32_t *v)
{
	if (r->len - r->off < 4)
		return -1;
	*v = jailmsg_get32(r->p + r->off);
	r->off += 4;
	return 0;
}

/* Read a NUL-terminated string; NULL if it has no NUL before the end. */
static const char *
jailmsg_r_str(struct jailmsg_r *r)
{
	const unsigned char *nul;
	const char *s;

	if (r->off >= r->len ||
	    (nul = memchr(r->p + r->off, '\0', r->len - r->off)) == NULL)
		return NULL;
	s = (const char *)(r->p + r->off);
	r->off = (size_t)(nul - r->p) + 1;
	return s;
}

/* An absolute path without ".." components, or NULL. */
static const char *
jailmsg_r_path(struct jailmsg_r *r)
{
	const char *s = jailmsg_r_str(r), *p;

	if (s == NULL || s[0] != '/')
		return NULL;
	for (p = s; (p = strstr(p, "/..")) != NULL; p += 3) {
		if (p[3] == '\0' || p[3] == '/')
			return NULL;
	}
	return s;
}

/* Decode a SETUP body. */
int
jailmsg_setup_decode(const unsigned char *p, size_t len, struct jailmsg_setup *s,
    const char **why)
{
	struct jailmsg_r r = { p, len, 0 };
	uint32_t net, n, wr;
	size_t i;

	memset(s, 0, sizeof *s);
	if (jailmsg_r_32(&r, &s->uid) != 0 || jailmsg_r_32(&r, &s->gid) != 0 ||
	    jailmsg_r_32(&r, &net) != 0 || jailmsg_r_32(&r, &n) != 0) {
		*why = "setup: truncated";
		return -1;
	}
	if (s->uid == 0 || s->gid == 0) {
		*why = "setup: the runner may not be root";
		return -1;
	}
	if (net > JAILMSG_NET_JOIN) {
		*why = "setup: unknown network mode";
		return -1;
	}
	s->net = (enum jailmsg_net)net;
	if (n > JAILMSG_BINDS_MAX) {
		*why = "setup: too many binds";
		return -1;
	}
	if ((s->root = jailmsg_r_path(&r)) == NULL) {
		*why = "setup: bad root";
		return -1;
	}
	if ((s->scratch = jailmsg_r_str(&r)) == NULL ||
	    (s->scratch[0] != '\0' && s->scratch[0] != '/')) {
		*why = "setup: bad scratch directory";
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (jailmsg_r_32(&r, &wr) != 0 || wr > 1 ||
		    (s->binds[i].path = jailmsg_r_path(&r)) == NULL) {
			*why = "setup: bad bind";
			return -1;
		}
		s->binds[i].writable = (int)wr;
	}
	s->nbinds = n;
	if (r.off != r.len) {
		*why = "setup: trailing bytes";
		return -1;
	}
	return 0;
}

/* Decode n strings into a fresh NULL-terminated array; NULL if one is missing. */
static char **
jailmsg_r_strv(struct jailmsg_r *r, uint32_t n)
{
	char **v;
	uint32_t i;

	if ((v = calloc((size_t)n + 1, sizeof *v)) == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		if ((v[i] = (char *)jailmsg_r_str(r)) == NULL) {
			free(v);
			return NULL;
		}
	}
	return v;
}

/* Decode a RUN body. */
int
jailmsg_run_decode(const unsigned char *p, size_t len, struct jailmsg_run *m,
    const char **why)
{
	struct jailmsg_r r = { p, len, 0 };
	uint32_t argc, envc;
	size_t i;

	memset(m, 0, sizeof *m);
	if (jailmsg_r_32(&r, &m->cpu_seconds) != 0 || jailmsg_r_32(&r, &m->nfds) != 0 ||
	    jailmsg_r_32(&r, &argc) != 0 || jailmsg_r_32(&r, &envc) != 0) {
		*why = "run: truncated";
		return -1;
	}
	if (m->nfds != 3 && m->nfds != 4) {
		*why = "run: bad descriptor count";
		return -1;
	}
	/* Each string takes at least its NUL: a count beyond the bytes is a lie. */
	if (argc == 0 || argc > JAILMSG_ARGS_MAX || envc > JAILMSG_ENV_MAX ||
	    (size_t)argc + envc > len) {
		*why = "run: bad argument or environment count";
		return -1;
	}
	if ((m->path = jailmsg_r_path(&r)) == NULL || (m->cwd = jailmsg_r_path(&r)) == NULL) {
		*why = "run: bad path or directory";
		return -1;
	}
	if ((m->argv = jailmsg_r_strv(&r, argc)) == NULL ||
	    (m->envp = jailmsg_r_strv(&r, envc)) == NULL) {
		jailmsg_run_free(m);
		*why = "run: bad argument or environment";
		return -1;
	}
	for (i = 0; i < envc; i++) {
		if (strchr(m->envp[i], '=') == NULL || m->envp[i][0] == '=') {
			jailmsg_run_free(m);
			*why = "run: bad environment entry";
			return -1;
		}
	}
	if (r.off != r.len) {
		jailmsg_run_free(m);
		*why = "run: trailing bytes";
		return -1;
	}
	return 0;
}

/* Release a decoded RUN's arrays. */
void
jailmsg_run_free(struct jailmsg_run *m)
{
	free(m->argv);
	free(m->envp);
	m->argv = m->envp = NULL;
}

/* A FORK body. */
void
jailmsg_fork_encode(unsigned char body[JAILMSG_FORK_LEN], uint32_t flags, int cgroup, int tmpl)
{
	jailmsg_put32(body, flags);
	jailmsg_put32(body + 4, (cgroup ? JAILMSG_FORK_CGROUP : 0) | (tmpl ? JAILMSG_FORK_TMPL : 0));
}

/* A FORK body: its exact length, flags within allowed and holding required, known options. */
int
jailmsg_fork_decode(const unsigned char *p, size_t len, uint32_t allowed, uint32_t required,
    uint32_t *flags, int *cgroup, int *tmpl, const char **why)
{
	uint32_t f, c;

	if (len != JAILMSG_FORK_LEN) {
		*why = "FORK: wrong length";
		return -1;
	}
	f = jailmsg_get32(p);
	c = jailmsg_get32(p + 4);
	if ((f & ~allowed) != 0 || (f & required) != required) {
		*why = "FORK: namespaces not allowed or missing";
		return -1;
	}
	if ((c & ~(uint32_t)(JAILMSG_FORK_CGROUP | JAILMSG_FORK_TMPL)) != 0) {
		*why = "FORK: unknown options";
		return -1;
	}
	*flags = f;
	*cgroup = (c & JAILMSG_FORK_CGROUP) != 0;
	*tmpl = (c & JAILMSG_FORK_TMPL) != 0;
	return 0;
}

/* Write (or with p NULL, measure) a TMPL body. */
size_t
jailmsg_tmpl_encode(unsigned char *p, size_t size, const char *root, const char *scratch_dir)
{
	struct jailmsg_w w = { p, size, 0, 0 };

	jailmsg_w_str(&w, root);
	jailmsg_w_str(&w, scratch_dir);
	return w.over ? 0 : w.len;
}

/* A TMPL body: two absolute paths without "..", the second not "/", nothing else. */
int
jailmsg_tmpl_decode(const unsigned char *p, size_t len, const char **root,
    const char **scratch_dir, const char **why)
{
	struct jailmsg_r r = { p, len, 0 };

	if ((*root = jailmsg_r_path(&r)) == NULL ||
	    (*scratch_dir = jailmsg_r_path(&r)) == NULL || strcmp(*scratch_dir, "/") == 0) {
		*why = "TMPL: bad path";
		return -1;
	}
	if (r.off != r.len) {
		*why = "TMPL: trailing bytes";
		return -1;
	}
	return 0;
}

/* A PID body. */
void
jailmsg_pid_encode(unsigned char body[JAILMSG_PID_LEN], int32_t pid)
{
	jailmsg_put32(body, (uint32_t)pid);
}

/* A PID body: a pid > 0 or an errno < 0 (within what errno can be). */
int
jailmsg_pid_decode(const unsigned char *p, size_t len, int32_t *pid, const char **why)
{
	int32_t v;

	if (len != JAILMSG_PID_LEN) {
		*why = "PID: wrong length";
		return -1;
	}
	v = (int32_t)jailmsg_get32(p);
	if (v == 0 || v < -4095) {
		*why = "PID: neither a pid nor an errno";
		return -1;
	}
	*pid = v;
	return 0;
}
