/* op "status" (root only): the daemon's counters as JSON. */
#include <sys/stat.h>
#include <sys/types.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "conn.h"
#include "ghapp.h"
#include "keyring.h"
#include "ops.h"
#include "platform.h"
#include "proto.h"
#include "server.h"
#include "util.h"

/* A session's GitHub App tokens (fingerprints and state, never a token), or NULL. */
static json_t *
op_status_apps(struct keyring *kr, const struct session *se)
{
	json_t *arr = NULL, *o;
	size_t i;

	for (i = 0; i < keyring_count(kr); i++) {
		const struct key *k = keyring_key(kr, i);

		if (k->session == NULL || strcmp(k->session, se->name) != 0 ||
		    (o = ghapp_status_json(&k->val)) == NULL)
			continue;
		json_object_set_new(o, "secret", json_string(k->name));
		if (arr == NULL)
			arr = json_array();
		json_array_append_new(arr, o);
	}
	return arr;
}

/* op "status" (root only): counters as JSON on stdout, then exit 0. */
void
op_status(struct conn *c, json_t *req)
{
	struct server *srv = c->srv;
	json_t *o = json_object(), *sess = json_array(), *apps;
	size_t i;
	char *s;

	(void)req;
	json_object_set_new(o, "version", json_string(SHIMBRIDGE_VERSION));
	json_object_set_new(o, "protocol", json_integer(PROTO_VERSION));
	json_object_set_new(o, "pid", json_integer(getpid()));
	json_object_set_new(o, "uptime", json_integer(time(NULL) - srv->started));
	json_object_set_new(o, "config", json_string(srv->cfg->path));
	json_object_set_new(o, "config_version", json_string(srv->cfg->version));
	json_object_set_new(o, "connections", json_integer(srv->nconns));
	json_object_set_new(o, "running", json_integer(srv->nrunning));
	json_object_set_new(o, "accepted", json_integer((json_int_t)srv->n_accepted));
	json_object_set_new(o, "refused", json_integer((json_int_t)srv->n_refused));
	json_object_set_new(o, "allowed", json_integer((json_int_t)srv->n_allowed));
	json_object_set_new(o, "denied", json_integer((json_int_t)srv->n_denied));
	json_object_set_new(o, "completed", json_integer((json_int_t)srv->n_completed));
	json_object_set_new(o, "errors", json_integer((json_int_t)srv->n_errors));
	json_object_set_new(o, "fds", json_integer(platform_fd_count()));
	json_object_set_new(o, "rss_kib", json_integer(platform_rss_kib()));
	for (i = 0; i < srv->cfg->nsessions; i++) {
		const struct session *se = &srv->cfg->sessions[i];
		json_t *j = json_object();

		json_object_set_new(j, "name", json_string(se->name));
		json_object_set_new(j, "uid", json_integer(se->uid));
		json_object_set_new(j, "running", json_integer(server_session_running(srv, se)));
		if ((apps = op_status_apps(srv->keyring, se)) != NULL)
			json_object_set_new(j, "github_app", apps);
		json_array_append_new(sess, j);
	}
	json_object_set_new(o, "sessions", sess);
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	conn_send(c, FRAME_STDOUT, s, strlen(s));
	conn_send(c, FRAME_STDOUT, "\n", 1);
	free(s);
	conn_exit(c, 0);
}
