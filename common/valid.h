/* Validators shared by the daemon's config loader and the admin CLI. */
#ifndef SHIMBRIDGE_VALID_H
#define SHIMBRIDGE_VALID_H

#include <stddef.h>

/*
 * OWNER/NAME with GitHub's characters (A-Z a-z 0-9 - _ .), at most 200 bytes,
 * exactly one slash, and neither part "." or "..".
 */
int	valid_repo(const char *);
/* Whether s[0..n) is n lowercase hex digits (a git object name's spelling). */
int	valid_hex_lower(const char *s, size_t n);
/* A git pkt-line's length: its 4 lowercase hex digits at p as a number, or -1. */
int	valid_pkt_len(const char *p);

#endif
