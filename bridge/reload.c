/*
 * A configuration reload (SIGHUP): the new config is loaded next to the running
 * one and swapped in only when valid; secrets are read again, removed sessions
 * lose their calls, waiting jails and approvals follow the new config.
 */
#include <sys/queue.h>

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "audit.h"
#include "cgroup.h"
#include "config.h"
#include "conn.h"
#include "keyring.h"
#include "log.h"
#include "pending.h"
#include "platform.h"
#include "reload.h"
#include "server.h"
#include "zygote.h"

/*
 * Sessions of old that new no longer has: their running calls are killed (with
 * the session's cgroup, where cgroups are in use, everything they started).
 */
static void
reload_sessions_removed(struct server *srv, const struct config *old,
    const struct config *nc)
{
	struct conn *c;
	size_t i, k;
	int n;

	for (i = 0; i < old->nsessions; i++) {
		const char *name = old->sessions[i].name;

		for (k = 0; k < nc->nsessions; k++) {
			if (strcmp(nc->sessions[k].name, name) == 0)
				break;
		}
		if (k < nc->nsessions)
			continue;
		if (cgroup_enabled() && (n = cgroup_session_kill(name)) > 0)
			log_info("session %s was removed: killed the %d process%s in its cgroup",
			    name, n, n == 1 ? "" : "es");
		TAILQ_FOREACH(c, &srv->conns, entry) {
			if (c->session != NULL && strcmp(c->session->name, name) == 0)
				conn_session_removed(c);
		}
	}
}

/* SIGHUP: load the new config next to the old; swap only if it is valid. */
void
reload_config(struct server *srv)
{
	struct config *nc;
	char *cause = NULL, **warn = NULL;
	json_t *a = json_object();
	size_t nwarn = 0, i;

	platform_notify("RELOADING=1");
	nc = config_load(srv->config_path, 1, &cause);
	json_object_set_new(a, "event", json_string("reload"));
	if (nc == NULL) {
		log_warnx("reload failed, keeping the running config: %s", cause);
		json_object_set_new(a, "ok", json_false());
		json_object_set_new(a, "reason", json_string(cause));
		audit_write(a, keyring_redactor(srv->keyring));
		free(cause);
		platform_notify("READY=1");
		return;
	}
	if (strcmp(nc->socket_path, srv->cfg->socket_path) != 0)
		log_warnx("socket path changes take effect at restart");
	if (nc->scratch_tmpfs != srv->cfg->scratch_tmpfs)
		log_warnx("limits.scratch_tmpfs changes take effect at restart");
	audit_checkpoint_every(nc->audit_checkpoint_interval);
	if (audit_sign_key_config(nc->audit_sign_key, nc->audit_sign_key_credential,
	    &cause) != 0) {
		log_warnx("%s; checkpoints stay signed as before", cause);
		free(cause);
		cause = NULL;
	}
	if (audit_open(nc->audit_path, &cause) != 0) {
		log_warnx("%s; audit stays on the old file", cause);
		free(cause);
	}
	/* Every source is read again; a replaced value stays masked (keyring.h). */
	keyring_load(srv->keyring, nc, &warn, &nwarn);
	for (i = 0; i < nwarn; i++) {
		log_warnx("%s", warn[i]);
		free(warn[i]);
	}
	free(warn);
	audit_syslog(nc->audit_syslog);
	reload_sessions_removed(srv, srv->cfg, nc);
	/* Waiting jails were built for the old runners and binds. */
	zygote_flush(srv->zygote);
	zygote_set_size(srv->zygote, srv->jail_root != NULL ? nc->jail_pool : 0);
	config_unref(srv->cfg);
	srv->cfg = nc;
	json_object_set_new(a, "ok", json_true());
	json_object_set_new(a, "config_version", json_string(nc->version));
	audit_write(a, keyring_redactor(srv->keyring));
	log_info("configuration reloaded (version %s, %zu sessions)", nc->version,
	    nc->nsessions);
	pending_reload(srv);
	platform_notify("READY=1");
}
