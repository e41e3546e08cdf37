/*
 * Minimal JSON for the static shim, which cannot link jansson: a writer for
 * requests and a reader for the flat objects the bridge sends (error, exit,
 * hello). The bridge itself parses with jansson.
 */
#ifndef SHIMBRIDGE_JSONW_H
#define SHIMBRIDGE_JSONW_H

#include <stddef.h>

struct jbuf {
	char	*buf;
	size_t	 len;
	size_t	 cap;
	int	 need_comma;
};

void	 jw_init(struct jbuf *);
void	 jw_free(struct jbuf *);
void	 jw_raw(struct jbuf *, const char *, size_t);
void	 jw_obj_open(struct jbuf *);
void	 jw_obj_close(struct jbuf *);
void	 jw_arr_open(struct jbuf *);
void	 jw_arr_close(struct jbuf *);
/* Write "key": (with a comma before it when needed). */
void	 jw_key(struct jbuf *, const char *);
/* Write a JSON string from len bytes, escaping quotes, backslashes and control bytes. */
void	 jw_str(struct jbuf *, const char *, size_t);
void	 jw_cstr(struct jbuf *, const char *);
void	 jw_int(struct jbuf *, long long);
void	 jw_bool(struct jbuf *, int);

/*
 * Look up a top-level key of a JSON object. Returns 1 and a malloc'd,
 * NUL-terminated copy of a string value (escapes decoded; \u0000 refused), 0 if
 * the key is absent or not a string, -1 if the document is malformed.
 */
int	 jr_get_str(const char *json, size_t len, const char *key, char **out);
/* Same for an integer value (1 found, 0 absent or not an integer, -1 malformed). */
int	 jr_get_int(const char *json, size_t len, const char *key, long long *out);

#endif
