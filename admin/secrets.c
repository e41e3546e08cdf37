/*
 * shimbridge secret init|set|list|rm: the encrypted secret store. Values come from
 * standard input only (never argv, which every user can read in /proc), live in
 * libsodium guarded memory, and are never printed.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "admin.h"
#include "store.h"
#include "util.h"

/* Create the directory that holds a store file or key, root-only, if it is missing. */
static int
secrets_parent(const char *path, char **cause)
{
	char *copy = xstrdup(path), *dir = dirname(copy);
	struct stat st;
	int rc = 0;

	if (stat(dir, &st) != 0) {
		if (errno == ENOENT)
			rc = adm_mkdir_root(dir, 0700, cause);
		else {
			xasprintf(cause, "%s: %s", dir, strerror(errno));
			rc = -1;
		}
	}
	free(copy);
	return rc;
}

/* Load the key, or explain how to make one. */
static int
secrets_key(const struct admin *a, unsigned char **key)
{
	char *cause = NULL;

	if (access(a->key, F_OK) != 0 && errno == ENOENT) {
		fprintf(stderr, "shimbridge: no store key at %s; create it with "
		    "`shimbridge secret init`\n", a->key);
		return ADM_INVALID;
	}
	if (store_key_load(a->key, key, &cause) != 0) {
		fprintf(stderr, "shimbridge: %s\n", cause);
		free(cause);
		return ADM_FAIL;
	}
	return ADM_OK;
}

/* Load the store (an empty one if the file does not exist yet). */
static int
secrets_load(const struct admin *a, const unsigned char *key, struct store **st)
{
	char *cause = NULL;

	if (store_load(a->store, key, 1, st, &cause) != 0) {
		fprintf(stderr, "shimbridge: %s\n", cause);
		free(cause);
		return ADM_FAIL;
	}
	return ADM_OK;
}

/*
 * Take the store's writers' lock (creating its directory first): without it two
 * writers that load the same store each save their own change and one is lost.
 * The lock's fd, or -1 after printing why.
 */
static int
secrets_lock(const struct admin *a)
{
	char *cause = NULL;
	int fd;

	if (secrets_parent(a->store, &cause) != 0 || (fd = store_lock(a->store, &cause)) < 0) {
		fprintf(stderr, "shimbridge: %s\n", cause);
		free(cause);
		return -1;
	}
	return fd;
}

/* Encrypt and write the store. */
static int
secrets_save(const struct admin *a, const struct store *st, const unsigned char *key)
{
	char *cause = NULL;

	if (store_save(st, a->store, key, &cause) != 0) {
		fprintf(stderr, "shimbridge: %s\n", cause);
		free(cause);
		return ADM_FAIL;
	}
	return ADM_OK;
}

/*
 * Read the value into guarded memory: from a terminal one line without echo, else
 * all of standard input. One trailing newline is dropped. Returns the length, or
 * -1 after printing why.
 */
static ssize_t
secrets_read_value(const char *name, unsigned char *buf, size_t cap)
{
	struct termios saved, quiet;
	int tty = isatty(STDIN_FILENO), echo_off = 0;
	size_t len = 0;
	ssize_t n;

	if (tty) {
		fprintf(stderr, "Value for %s (not echoed, end with Enter): ", name);
		if (tcgetattr(STDIN_FILENO, &saved) == 0) {
			quiet = saved;
			quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
			echo_off = tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) == 0;
		}
	}
	while (len < cap) {
		n = read(STDIN_FILENO, buf + len, tty ? 1 : cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "shimbridge: reading the value: %s\n", strerror(errno));
			len = cap + 1;
			break;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (tty && buf[len - 1] == '\n')
			break;
	}
	if (echo_off) {
		(void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
		fputc('\n', stderr);
	}
	if (len > cap)
		return -1;
	if (len == cap) {
		/* Is there more? One byte more is enough to know it does not fit. */
		unsigned char extra;

		if (!tty && read(STDIN_FILENO, &extra, 1) == 1) {
			sodium_memzero(&extra, 1);
			fprintf(stderr, "shimbridge: the value is longer than %d bytes\n",
			    STORE_VALUE_MAX);
			return -1;
		}
	}
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len == 0) {
		fprintf(stderr, "shimbridge: refusing an empty value for %s (give it on "
		    "standard input: printf %%s \"$TOKEN\" | shimbridge secret set %s)\n",
		    name, name);
		return -1;
	}
	if (len > STORE_VALUE_MAX) {
		fprintf(stderr, "shimbridge: the value is longer than %d bytes\n",
		    STORE_VALUE_MAX);
		return -1;
	}
	return (ssize_t)len;
}

/* secret init: make the key file unless it exists (and then check it). */
static int
secrets_init(const struct admin *a)
{
	unsigned char *key = NULL;
	char *cause = NULL;

	if (access(a->key, F_OK) == 0) {
		if (store_key_load(a->key, &key, &cause) != 0) {
			fprintf(stderr, "shimbridge: %s\n", cause);
			free(cause);
			return ADM_FAIL;
		}
		sodium_free(key);
		printf("store key %s already exists; nothing to do\n", a->key);
		return ADM_OK;
	}
	if (secrets_parent(a->key, &cause) != 0 || store_key_create(a->key, &cause) != 0) {
		fprintf(stderr, "shimbridge: %s\n", cause);
		free(cause);
		return ADM_FAIL;
	}
	printf("created store key %s (keep it: without it %s cannot be read)\n", a->key,
	    a->store);
	return ADM_OK;
}

/* secret set NAME: value from standard input. */
static int
secrets_set(const struct admin *a, const char *name, int reload)
{
	unsigned char *key = NULL, *val = NULL;
	struct store *st = NULL;
	char *cause = NULL;
	ssize_t len;
	int rc, lock = -1;

	if (!adm_valid_name(name)) {
		fprintf(stderr, "shimbridge: invalid secret name %s: 1-64 characters of "
		    "A-Z a-z 0-9 _ . -, not starting with . or -\n", name);
		return ADM_INVALID;
	}
	if ((rc = secrets_key(a, &key)) != ADM_OK)
		return rc;
	if ((val = sodium_malloc(STORE_VALUE_MAX + 2)) == NULL) {
		fprintf(stderr, "shimbridge: cannot allocate guarded memory\n");
		rc = ADM_FAIL;
		goto out;
	}
	if ((len = secrets_read_value(name, val, STORE_VALUE_MAX + 1)) < 0) {
		rc = ADM_INVALID;
		goto out;
	}
	if ((lock = secrets_lock(a)) < 0) {
		rc = ADM_FAIL;
		goto out;
	}
	if ((rc = secrets_load(a, key, &st)) != ADM_OK)
		goto out;
	if (store_set(st, name, val, (size_t)len, &cause) != 0) {
		fprintf(stderr, "shimbridge: %s\n", cause);
		rc = ADM_INVALID;
		goto out;
	}
	if ((rc = secrets_save(a, st, key)) != ADM_OK)
		goto out;
	store_unlock(lock);
	lock = -1;
	printf("secret %s set (%zu secret%s in %s)\n", name, store_count(st),
	    store_count(st) == 1 ? "" : "s", a->store);
	if (reload)
		rc = ctl_reload(a, 1);
out:
	store_unlock(lock);
	if (val != NULL)
		sodium_free(val);	/* wipes */
	if (key != NULL)
		sodium_free(key);
	store_free(st);
	free(cause);
	return rc;
}

/*
 * The running daemon's GitHub App tokens (per session: fingerprint, repositories,
 * permissions, expiry, last refresh), appended to arr or printed; nothing if the
 * daemon is not running.
 */
static void
secrets_list_apps(const struct admin *a, json_t *arr, int json)
{
	struct adm_paths p;
	json_t *st = NULL, *toks;
	char *cause = NULL;

	if (adm_paths_load(a->config, &p, &cause) != 0) {
		free(cause);
		return;
	}
	if (ctl_status(p.socket, &st, &cause) == 0) {
		toks = ctl_app_tokens(st);
		if (!json && json_array_size(toks) > 0) {
			printf("GitHub App tokens (minted per session by the running daemon):\n");
			ctl_print_app_tokens(st, "  ");
		}
		json_array_extend(arr, toks);
		json_decref(toks);
	}
	json_decref(st);
	free(cause);
	adm_paths_free(&p);
}

/*
 * secret list [--json]: the store's names, one a line, or a JSON array of {"name"};
 * then the running daemon's GitHub App tokens (secrets_list_apps).
 */
static int
secrets_list(const struct admin *a, int json)
{
	unsigned char *key = NULL;
	struct store *st = NULL;
	json_t *arr;
	size_t i;
	int rc;

	arr = json_array();
	rc = ADM_OK;
	if (access(a->store, F_OK) == 0 || errno != ENOENT) {
		if ((rc = secrets_key(a, &key)) != ADM_OK) {
			json_decref(arr);
			return rc;
		}
		if ((rc = secrets_load(a, key, &st)) == ADM_OK) {
			for (i = 0; i < store_count(st); i++) {
				json_t *o = json_object();

				json_object_set_new(o, "name", json_string(store_name(st, i)));
				json_array_append_new(arr, o);
				if (!json)
					printf("%s\n", store_name(st, i));
			}
		}
		sodium_free(key);
		store_free(st);
	}
	if (rc == ADM_OK)
		secrets_list_apps(a, arr, json);
	if (rc == ADM_OK && json) {
		char *s = json_dumps(arr, JSON_COMPACT | JSON_PRESERVE_ORDER);

		printf("%s\n", s);
		free(s);
	}
	json_decref(arr);
	return rc;
}

/* secret rm NAME */
static int
secrets_rm(const struct admin *a, const char *name, int reload)
{
	unsigned char *key = NULL;
	struct store *st = NULL;
	int rc, lock = -1;

	if ((rc = secrets_key(a, &key)) != ADM_OK)
		return rc;
	if ((lock = secrets_lock(a)) < 0) {
		rc = ADM_FAIL;
		goto out;
	}
	if ((rc = secrets_load(a, key, &st)) != ADM_OK)
		goto out;
	if (store_rm(st, name) != 0) {
		fprintf(stderr, "shimbridge: no secret named %s in %s\n", name, a->store);
		rc = ADM_INVALID;
		goto out;
	}
	if ((rc = secrets_save(a, st, key)) != ADM_OK)
		goto out;
	store_unlock(lock);
	lock = -1;
	printf("secret %s removed (%zu left)\n", name, store_count(st));
	if (reload)
		rc = ctl_reload(a, 1);
out:
	store_unlock(lock);
	sodium_free(key);
	store_free(st);
	return rc;
}

/* Usage of the secret commands. */
static int
secrets_usage(void)
{
	fprintf(stderr, "usage: shimbridge secret init\n"
	    "       shimbridge secret set NAME [--no-reload]   (value on standard input)\n"
	    "       shimbridge secret list [--json]\n"
	    "       shimbridge secret rm NAME [--no-reload]\n"
	    "  options: --store PATH, --key PATH (default: the config's \"store\" section,\n"
	    "           else " ADM_STORE " and " ADM_KEY ")\n");
	return ADM_USAGE;
}

/* shimbridge secret ... */
int
secrets_cmd(struct admin *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sub;
	int ch, reload, json = 0;

	if (argc < 2)
		return secrets_usage();
	sub = argv[1];
	argc--;
	argv++;
	adm_getopt_reset();
	/* GNU permutation: options may follow NAME; values never come through argv. */
	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (ch == 'j')
			json = 1;
		else if (!adm_global_opt(a, ch, optarg))
			return secrets_usage();
	}
	argc -= optind;
	argv += optind;
	reload = !a->no_reload;
	adm_store_paths(a);
	if (sodium_init() < 0) {
		fprintf(stderr, "shimbridge: libsodium failed to initialise\n");
		return ADM_FAIL;
	}
	if (json && strcmp(sub, "list") != 0 && strcmp(sub, "ls") != 0)
		return secrets_usage();
	if (strcmp(sub, "init") == 0 && argc == 0)
		return secrets_init(a);
	if (strcmp(sub, "set") == 0 && argc == 1)
		return secrets_set(a, argv[0], reload);
	if ((strcmp(sub, "list") == 0 || strcmp(sub, "ls") == 0) && argc == 0)
		return secrets_list(a, json);
	if ((strcmp(sub, "rm") == 0 || strcmp(sub, "remove") == 0) && argc == 1)
		return secrets_rm(a, argv[0], reload);
	if (strcmp(sub, "set") == 0 && argc > 1)
		fprintf(stderr, "shimbridge: secret values are read from standard input, "
		    "never from the command line\n");
	return secrets_usage();
}
