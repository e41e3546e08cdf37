/* Request validation: shapes and bounds only; policy comes after. */
#include <string.h>

#include <jansson.h>

#include "policy.h"
#include "proto.h"
#include "request.h"

/* Check the forwarded environment: allowlisted names, bounded string values. */
int
request_check_env(json_t *env, const char **why)
{
	const char *k;
	json_t *v;
	size_t total = 0;

	if (env == NULL)
		return 0;
	if (!json_is_object(env) || json_object_size(env) > REQ_MAX_ENV) {
		*why = "env must be an object of at most 64 variables";
		return -1;
	}
	json_object_foreach(env, k, v) {
		if (!proto_env_allowed(k, strlen(k)) && strcmp(k, "GIT_PROTOCOL") != 0) {
			*why = "env holds a variable outside the allowlist";
			return -1;
		}
		if (!json_is_string(v) || json_string_length(v) > 1024) {
			*why = "env values must be strings of at most 1024 bytes";
			return -1;
		}
		total += strlen(k) + json_string_length(v) + 2;
	}
	if (total > REQ_MAX_ENV_BYTES) {
		*why = "env too large";
		return -1;
	}
	return 0;
}

/* Check argv: an array of bounded strings. */
static int
request_check_argv(json_t *argv, const char **why)
{
	size_t i, total = 0;
	json_t *v;

	if (!json_is_array(argv) || json_array_size(argv) > REQ_MAX_ARGS) {
		*why = "argv must be an array of at most 1024 strings";
		return -1;
	}
	json_array_foreach(argv, i, v) {
		if (!json_is_string(v)) {
			*why = "argv entries must be strings";
			return -1;
		}
		total += json_string_length(v) + 1;
	}
	if (total > REQ_MAX_ARG_BYTES) {
		*why = "argv too large";
		return -1;
	}
	return 0;
}

/* Check the shim's repository context: optional strings, bounded; pointers into ctx. */
static int
request_check_context(json_t *ctx, struct policy_ctx *pc, const char **why)
{
	const char *k;
	json_t *v;

	if (ctx == NULL)
		return 0;
	if (!json_is_object(ctx) || json_object_size(ctx) > 2) {
		*why = "context must be an object with remote_url and branch";
		return -1;
	}
	json_object_foreach(ctx, k, v) {
		if (!json_is_string(v) || json_string_length(v) > 1024) {
			*why = "context values must be strings of at most 1024 bytes";
			return -1;
		}
		if (strcmp(k, "remote_url") == 0)
			pc->remote_url = json_string_value(v);
		else if (strcmp(k, "branch") == 0)
			pc->branch = json_string_value(v);
		else {
			*why = "unknown field in context";
			return -1;
		}
	}
	return 0;
}

/* Refuse unknown top-level request keys: deny by default applies to the protocol too. */
static int
request_check_keys(json_t *req, const char *const *allowed, const char **why)
{
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach(req, k, v) {
		for (i = 0; allowed[i] != NULL; i++) {
			if (strcmp(k, allowed[i]) == 0)
				break;
		}
		if (allowed[i] == NULL) {
			*why = "unknown field in request";
			return -1;
		}
	}
	return 0;
}

/* Check a "run" request. */
int
request_check_run(json_t *req, struct policy_ctx *pc, const char **why)
{
	static const char *const keys[] = { "op", "tool", "argv", "cwd", "env", "context", NULL };
	json_t *jt = json_object_get(req, "tool"), *jcwd = json_object_get(req, "cwd");

	*why = NULL;
	if (request_check_keys(req, keys, why) != 0 ||
	    request_check_context(json_object_get(req, "context"), pc, why) != 0 ||
	    request_check_argv(json_object_get(req, "argv"), why) != 0 ||
	    request_check_env(json_object_get(req, "env"), why) != 0)
		return -1;
	if (!json_is_string(jt) || json_string_length(jt) == 0 ||
	    json_string_length(jt) > REQ_MAX_NAME) {
		*why = "tool must be a name of 1 to 64 bytes";
		return -1;
	}
	if (jcwd != NULL && (!json_is_string(jcwd) || json_string_length(jcwd) == 0 ||
	    json_string_length(jcwd) > REQ_MAX_PATH || json_string_value(jcwd)[0] != '/')) {
		*why = "cwd must be an absolute path of at most 4096 bytes";
		return -1;
	}
	return 0;
}
