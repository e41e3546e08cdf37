/* The ref updates of a git push request (see pushcmd.h). */
#include <stdlib.h>
#include <string.h>

#include "pushcmd.h"
#include "util.h"
#include "valid.h"

/* Whether p[0..n) is an object name: 40 or 64 lowercase hex digits. */
static int
pushcmd_oid(const unsigned char *p, size_t n)
{
	return (n == 40 || n == 64) && valid_hex_lower((const char *)p, n);
}

int
pushcmd_zero(const char *oid)
{
	if (*oid == '\0')
		return 0;
	for (; *oid != '\0'; oid++) {
		if (*oid != '0')
			return 0;
	}
	return 1;
}

/* One command "<old> <new> <ref>" (n bytes, no NUL, no LF) into c; 0 or -1. */
static int
pushcmd_one(const unsigned char *p, size_t n, struct pushcmd *c)
{
	const unsigned char *sp;
	size_t olen, i, rlen;

	if ((sp = memchr(p, ' ', n)) == NULL)
		return -1;
	olen = (size_t)(sp - p);
	if (!pushcmd_oid(p, olen) || n < 2 * olen + 3 || p[2 * olen + 1] != ' ' ||
	    !pushcmd_oid(p + olen + 1, olen))
		return -1;
	rlen = n - (2 * olen + 2);
	if (rlen == 0 || rlen > PUSHCMD_REF_MAX)
		return -1;
	for (i = 2 * olen + 2; i < n; i++) {
		/* What git allows in a ref name leaves out controls, space and DEL. */
		if (p[i] <= ' ' || p[i] == 0x7f)
			return -1;
	}
	memcpy(c->old, p, olen);
	c->old[olen] = '\0';
	memcpy(c->new, p + olen + 1, olen);
	c->new[olen] = '\0';
	memcpy(c->ref, p + 2 * olen + 2, rlen);
	c->ref[rlen] = '\0';
	return 0;
}

int
pushcmd_parse(const unsigned char *body, size_t len, struct pushcmd **out, size_t *n,
    const char **why)
{
	struct pushcmd *v = NULL;
	const unsigned char *p = body, *end = body + len, *line, *nul;
	size_t k = 0, ln;
	int pl;

	*out = NULL;
	*n = 0;
	if (body == NULL) {	/* no body at all (not even a pointer to do arithmetic on) */
		*why = "the list of ref updates is incomplete";
		return -1;
	}
	for (;;) {
		if (end - p < 4 || (pl = valid_pkt_len((const char *)p)) < 0) {
			*why = "the list of ref updates is incomplete";
			goto bad;
		}
		if (pl == 0)
			break;
		if (pl < 4 || pl > 65520 || end - p < pl) {
			*why = "a line of the list of ref updates is malformed or cut short";
			goto bad;
		}
		line = p + 4;
		ln = (size_t)pl - 4;
		p += pl;
		if (ln > 0 && line[ln - 1] == '\n')
			ln--;
		if (k == 0 && ln >= 8 && memcmp(line, "shallow ", 8) == 0) {
			if (!pushcmd_oid(line + 8, ln - 8)) {
				*why = "a shallow line of the push is malformed";
				goto bad;
			}
			continue;
		}
		if (ln >= 9 && memcmp(line, "push-cert", 9) == 0) {
			*why = "signed pushes (push certificates) are not relayed";
			goto bad;
		}
		/* The first command carries the capabilities after a NUL; no other may. */
		if ((nul = memchr(line, '\0', ln)) != NULL) {
			if (k != 0) {
				*why = "a ref update of the push is malformed";
				goto bad;
			}
			ln = (size_t)(nul - line);
		}
		if (k == PUSHCMD_MAX) {
			*why = "the push updates too many refs at once";
			goto bad;
		}
		v = xreallocarray(v, k + 1, sizeof *v);
		if (pushcmd_one(line, ln, &v[k]) != 0) {
			*why = "a ref update of the push is malformed";
			goto bad;
		}
		k++;
	}
	/* No update at all: git's probe before a large push (remote-curl's probe_rpc). */
	*out = v;
	*n = k;
	return 0;
bad:
	free(v);
	return -1;
}
