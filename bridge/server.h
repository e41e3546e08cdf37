/* The daemon's event loop: listeners, peers, children, signals. */
#ifndef SHIMBRIDGE_SERVER_H
#define SHIMBRIDGE_SERVER_H

struct config;

/* Set up listeners (own socket or service-manager fds) and run until SIGTERM/SIGINT. */
int	server_run(struct config *, const char *config_path, char **cause);

#endif
