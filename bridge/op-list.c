/* op "list" (session users): what this session may run, written for the agent (like sudo -l). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "config.h"
#include "conn.h"
#include "log.h"
#include "ops.h"
#include "policy.h"
#include "profile.h"
#include "proto.h"
#include "util.h"

/* Send text on stdout in frames. */
static void
op_list_send(struct conn *c, const char *s)
{
	size_t len = strlen(s), n;

	while (len > 0) {
		n = len > FRAME_DATA_MAX ? FRAME_DATA_MAX : len;
		conn_send(c, FRAME_STDOUT, s, n);
		s += n;
		len -= n;
	}
}

/* Whether any tool of the session has an ask rule (or git asks for some branches). */
static int
op_list_asks(const struct config *cfg, const struct session *s)
{
	const struct tool *t;
	size_t i, j;

	for (i = 0; i < s->ntools; i++) {
		if ((t = config_tool(cfg, s->tools[i])) == NULL) {
			if (cfg->nask_branches > 0)
				return 1;
			continue;
		}
		for (j = 0; j < t->nrules; j++)
			if (t->rules[j].ask)
				return 1;
	}
	return 0;
}

/* op "list": {"op":"list"[, "json": true]}. */
void
op_list(struct conn *c, json_t *req)
{
	const struct session *s = c->session;
	const struct config *cfg = c->cfg;
	json_t *jj = json_object_get(req, "json"), *o, *tools, *repos, *t;
	char *text = NULL, *line, *next;
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach(req, k, v) {
		if (strcmp(k, "op") != 0 && strcmp(k, "json") != 0) {
			conn_protocol_error(c, "a list request is {\"op\":\"list\"[, \"json\": "
			    "true]}");
			return;
		}
	}
	if (jj != NULL && !json_is_boolean(jj)) {
		conn_protocol_error(c, "\"json\" must be true or false");
		return;
	}
	c->tool = xstrdup("shimbridge");
	if (json_is_true(jj)) {
		o = json_object();
		tools = json_array();
		repos = json_array();
		json_object_set_new(o, "session", json_string(s->name));
		for (i = 0; i < s->ntools; i++) {
			const struct tool *tl = config_tool(cfg, s->tools[i]);

			t = json_object();
			json_object_set_new(t, "name", json_string(s->tools[i]));
			json_object_set_new(t, "allows", json_string(line =
			    policy_tool_summary(cfg, s->tools[i])));
			free(line);
			if (tl != NULL && profile_host(tl) != NULL)
				json_object_set_new(t, "host", json_string(profile_host(tl)));
			json_array_append_new(tools, t);
		}
		for (i = 0; i < s->nrepos; i++)
			json_array_append_new(repos, json_string(s->repos[i]));
		json_object_set_new(o, "tools", tools);
		json_object_set_new(o, "repos", repos);
		json_object_set_new(o, "approval_timeout", json_integer(cfg->approval.timeout));
		line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_decref(o);
		if (line == NULL)
			fatalx("cannot encode the list");
		op_list_send(c, line);
		op_list_send(c, "\n");
		free(line);
		conn_exit(c, 0);
		return;
	}
	xasprintf(&text, "Session %s. These commands run on the host through the shimbridge "
	    "bridge, which checks each call; anything not listed is refused.\n\nTools:\n",
	    s->name);
	for (i = 0; i < s->ntools; i++) {
		const struct tool *tl = config_tool(cfg, s->tools[i]);

		line = policy_tool_summary(cfg, s->tools[i]);
		xasprintf(&next, "%s  %-6s %s%s%s%s\n", text, s->tools[i], line,
		    tl != NULL && profile_host(tl) != NULL ? " (host " : "",
		    tl != NULL && profile_host(tl) != NULL ? profile_host(tl) : "",
		    tl != NULL && profile_host(tl) != NULL ? ")" : "");
		free(line);
		free(text);
		text = next;
	}
	if (s->ntools == 0) {
		xasprintf(&next, "%s  none\n", text);
		free(text);
		text = next;
	}
	xasprintf(&next, "%s\nRepositories:", text);
	free(text);
	text = next;
	for (i = 0; i < s->nrepos; i++) {
		xasprintf(&next, "%s%s %s", text, i > 0 ? "," : "", s->repos[i]);
		free(text);
		text = next;
	}
	xasprintf(&next, "%s%s\n\n", text, s->nrepos == 0 ? " none" : "");
	free(text);
	text = next;
	if (op_list_asks(cfg, s)) {
		xasprintf(&next, "%sA call marked \"after the operator approves\" prints\n"
		    "  shimbridge: waiting for the operator to approve request N: COMMAND\n"
		    "and waits (by default up to %d seconds; no answer means refused). Do not "
		    "retry it while it waits.\n", text, cfg->approval.timeout);
		free(text);
		text = next;
	}
	xasprintf(&next, "%sA refused call prints one line,\n"
	    "  shimbridge: refused: WHAT: WHY; WHAT TO DO INSTEAD\n"
	    "(or a paragraph saying the same), and exits 126.\n", text);
	free(text);
	text = next;
	op_list_send(c, text);
	free(text);
	conn_exit(c, 0);
}
