/* The daemon's own listening socket. */
#ifndef SHIMBRIDGE_LISTEN_H
#define SHIMBRIDGE_LISTEN_H

struct config;

/*
 * Bind and listen on cfg->socket_path (a stale socket there is replaced). Its
 * directory is created 0755 when missing and must be a real directory owned by
 * root and writable by nobody else. Returns the listening fd (non-blocking,
 * close-on-exec) or -1 with *cause.
 */
int	listen_bind(const struct config *cfg, char **cause);

#endif
