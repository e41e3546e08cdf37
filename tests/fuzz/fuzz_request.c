/*
 * libFuzzer target for request validation (bridge/request.c), the first code that
 * sees a peer's REQUEST frame after jansson. The input is the frame's payload,
 * parsed as the bridge parses it (json_loadb, JSON_REJECT_DUPLICATES). Both
 * request_check_run and request_check_env (on the "env" member and on the whole
 * document) run; whenever one accepts, the invariants below are checked here,
 * independently of request.c:
 *   run: an object with only op/tool/argv/cwd/env/context; argv an array of at
 *        most REQ_MAX_ARGS strings whose lengths + 1 sum to at most
 *        REQ_MAX_ARG_BYTES; tool a string of 1-REQ_MAX_NAME bytes; cwd absent or
 *        an absolute path of at most REQ_MAX_PATH bytes; env as below; context
 *        absent or an object with at most remote_url and branch, strings of at most
 *        1024 bytes, which are what the policy context points to.
 *   env: absent, or an object of at most REQ_MAX_ENV members named by
 *        proto_env_allowed or GIT_PROTOCOL, string values of at most 1024 bytes,
 *        name=value sizes summing to at most REQ_MAX_ENV_BYTES.
 * A refusal must come with a reason; success with none.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy.h"
#include "proto.h"
#include "request.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* The env invariants. */
static void
fuzz_env_ok(json_t *env)
{
	const char *k;
	json_t *v;
	size_t total = 0;

	if (env == NULL)
		return;
	if (!json_is_object(env) || json_object_size(env) > REQ_MAX_ENV)
		abort();
	json_object_foreach(env, k, v) {
		size_t n = strlen(k);

		if (!proto_env_allowed(k, n) && strcmp(k, "GIT_PROTOCOL") != 0)
			abort();
		/* An allowed name is a plain identifier: no '=', no NUL, not empty. */
		if (n == 0 || strchr(k, '=') != NULL)
			abort();
		if (!json_is_string(v) || json_string_length(v) > 1024 ||
		    memchr(json_string_value(v), '\0', json_string_length(v)) != NULL)
			abort();
		total += n + 1 + json_string_length(v);
	}
	if (total > REQ_MAX_ENV_BYTES)
		abort();
}

/* The run invariants. */
static void
fuzz_run_ok(json_t *req, const struct policy_ctx *pc)
{
	static const char *const keys[] = { "op", "tool", "argv", "cwd", "env", "context", NULL };
	json_t *argv = json_object_get(req, "argv"), *tool = json_object_get(req, "tool");
	json_t *cwd = json_object_get(req, "cwd"), *ctx = json_object_get(req, "context");
	json_t *v;
	const char *k;
	size_t i, total = 0;

	if (!json_is_object(req))
		abort();
	json_object_foreach(req, k, v) {
		for (i = 0; keys[i] != NULL && strcmp(keys[i], k) != 0; i++)
			;
		if (keys[i] == NULL)
			abort();
	}
	if (!json_is_array(argv) || json_array_size(argv) > REQ_MAX_ARGS)
		abort();
	json_array_foreach(argv, i, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			abort();
		total += json_string_length(v) + 1;
	}
	if (total > REQ_MAX_ARG_BYTES)
		abort();
	if (!json_is_string(tool) || json_string_length(tool) == 0 ||
	    json_string_length(tool) > REQ_MAX_NAME)
		abort();
	if (cwd != NULL && (!json_is_string(cwd) || json_string_value(cwd)[0] != '/' ||
	    json_string_length(cwd) > REQ_MAX_PATH))
		abort();
	fuzz_env_ok(json_object_get(req, "env"));
	if (ctx == NULL) {
		if (pc->remote_url != NULL || pc->branch != NULL)
			abort();
	} else {
		json_t *ru = json_object_get(ctx, "remote_url"), *br = json_object_get(ctx, "branch");

		if (!json_is_object(ctx) || json_object_size(ctx) > 2 ||
		    json_object_size(ctx) != (ru != NULL) + (br != NULL))
			abort();
		if ((ru != NULL && (!json_is_string(ru) || json_string_length(ru) > 1024 ||
		    pc->remote_url != json_string_value(ru))) || (ru == NULL && pc->remote_url != NULL))
			abort();
		if ((br != NULL && (!json_is_string(br) || json_string_length(br) > 1024 ||
		    pc->branch != json_string_value(br))) || (br == NULL && pc->branch != NULL))
			abort();
	}
	if (pc->repo != NULL || pc->head != NULL || pc->nextra != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct policy_ctx pc;
	json_error_t je;
	json_t *req;
	const char *why = NULL;

	req = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
	if (req == NULL)
		return 0;
	memset(&pc, 0, sizeof pc);
	if (request_check_run(req, &pc, &why) == 0) {
		if (why != NULL)
			abort();
		fuzz_run_ok(req, &pc);
	} else if (why == NULL || why[0] == '\0')
		abort();
	why = NULL;
	if (request_check_env(json_object_get(req, "env"), &why) == 0)
		fuzz_env_ok(json_object_get(req, "env"));
	else if (why == NULL)
		abort();
	why = NULL;
	if (request_check_env(req, &why) == 0)
		fuzz_env_ok(req);
	else if (why == NULL)
		abort();
	json_decref(req);
	return 0;
}
