/* Validators shared by the daemon's config loader and the admin CLI. */
#ifndef SHIMBRIDGE_VALID_H
#define SHIMBRIDGE_VALID_H

/*
 * OWNER/NAME with GitHub's characters (A-Z a-z 0-9 - _ .), at most 200 bytes,
 * exactly one slash, and neither part "." or "..".
 */
int	valid_repo(const char *);

#endif
