/* A configuration reload (SIGHUP) of the running daemon. */
#ifndef SHIMBRIDGE_RELOAD_H
#define SHIMBRIDGE_RELOAD_H

struct server;

/*
 * Load srv->config_path; when it is valid, re-read secrets, end the calls of
 * sessions it removed, rebuild the jail pool and the approval table, and make
 * it the running config (the old one lives on in calls that hold a reference).
 * When it is not, keep the running config and log and audit why.
 */
void	reload_config(struct server *srv);

#endif
