/* ops "pending", "approve" and "deny" (root only): the operator's side of pending.h. */
#include <sys/types.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "approve.h"
#include "conn.h"
#include "log.h"
#include "ops.h"
#include "pending.h"
#include "proto.h"
#include "server.h"
#include "util.h"

#define OP_APPROVE_WHY_MAX	1024	/* bytes of a deny reason */

/* Answer with one JSON line on stdout and an exit code (obj consumed). */
static void
op_approve_reply(struct conn *c, json_t *obj, int code)
{
	char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);

	json_decref(obj);
	if (s == NULL)
		fatalx("cannot encode a reply");
	conn_send(c, FRAME_STDOUT, s, strlen(s));
	conn_send(c, FRAME_STDOUT, "\n", 1);
	free(s);
	conn_exit(c, code);
}

/* A failed decision: {"ok":false,"error":...}, exit 2. */
static void
op_approve_fail(struct conn *c, const char *why)
{
	json_t *o = json_object();

	json_object_set_new(o, "ok", json_false());
	json_object_set_new(o, "error", json_string(why));
	op_approve_reply(c, o, 2);
}

/* Whether req has only the allowed keys. */
static int
op_approve_keys(json_t *req, const char *const *keys)
{
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach(req, k, v) {
		for (i = 0; keys[i] != NULL; i++)
			if (strcmp(k, keys[i]) == 0)
				break;
		if (keys[i] == NULL)
			return -1;
	}
	return 0;
}

/* op "pending": the waiting requests as a JSON array. */
void
op_pending(struct conn *c, json_t *req)
{
	static const char *const keys[] = { "op", NULL };

	if (op_approve_keys(req, keys) != 0) {
		conn_protocol_error(c, "unknown field in a pending request");
		return;
	}
	op_approve_reply(c, pending_list(c->srv), 0);
}

/* ops "approve" and "deny": {"id": N, "for": "10m"} or {"id": N, "why": "..."}. */
static void
op_approve_decide(struct conn *c, json_t *req, int approve)
{
	static const char *const akeys[] = { "op", "id", "for", NULL };
	static const char *const dkeys[] = { "op", "id", "why", NULL };
	json_t *jid = json_object_get(req, "id"), *jfor = json_object_get(req, "for");
	json_t *jwhy = json_object_get(req, "why"), *o;
	const char *why = NULL;
	char *cause = NULL;
	long secs = 0;

	if (op_approve_keys(req, approve ? akeys : dkeys) != 0 || !json_is_integer(jid) ||
	    json_integer_value(jid) <= 0 || (jfor != NULL && !json_is_string(jfor)) ||
	    (jwhy != NULL && (!json_is_string(jwhy) ||
	    json_string_length(jwhy) > OP_APPROVE_WHY_MAX))) {
		conn_protocol_error(c, approve ? "an approve request is {\"id\": N[, \"for\": "
		    "DURATION]}" : "a deny request is {\"id\": N[, \"why\": TEXT]}");
		return;
	}
	if (jfor != NULL && approve_parse_duration(json_string_value(jfor), &secs, &why) != 0) {
		op_approve_fail(c, why);
		return;
	}
	if (pending_decide(c->srv, (uint64_t)json_integer_value(jid), approve, secs,
	    jwhy != NULL ? json_string_value(jwhy) : NULL, c->uid, c->pid, &cause) != 0) {
		op_approve_fail(c, cause);
		free(cause);
		return;
	}
	o = json_object();
	json_object_set_new(o, "ok", json_true());
	json_object_set_new(o, "id", json_integer(json_integer_value(jid)));
	json_object_set_new(o, "decision", json_string(approve ? "approve" : "deny"));
	if (secs > 0)
		json_object_set_new(o, "for", json_integer(secs));
	op_approve_reply(c, o, 0);
}

/* op "approve". */
void
op_approve(struct conn *c, json_t *req)
{
	op_approve_decide(c, req, 1);
}

/* op "deny". */
void
op_deny(struct conn *c, json_t *req)
{
	op_approve_decide(c, req, 0);
}
