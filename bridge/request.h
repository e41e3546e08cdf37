/*
 * Validation of what a peer asks for, before anything is looked up: every field
 * present, typed, bounded, and nothing unknown. The bridge's policy decides later.
 */
#ifndef SHIMBRIDGE_REQUEST_H
#define SHIMBRIDGE_REQUEST_H

#include <jansson.h>

struct policy_ctx;

/*
 * Check a "run" request: {"op","tool","argv","cwd"?,"env"?,"context"?}. On success
 * pc->remote_url / pc->branch point into req (valid while req lives). Returns 0,
 * or -1 with a static *why for the peer.
 */
int	request_check_run(json_t *req, struct policy_ctx *pc, const char **why);
/* Check a forwarded environment object: allowlisted names, bounded string values. */
int	request_check_env(json_t *env, const char **why);

#endif
