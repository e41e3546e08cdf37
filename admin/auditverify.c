/*
 * shimbridge audit verify | pubkey | keygen: the audit log's hash chain and its
 * checkpoint signing key (bridge/auditchain.h). verify reads the files in order,
 * oldest first, and reports the first broken link with FILE:LINE and its kind.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "admin.h"
#include "auditchain.h"
#include "proc.h"
#include "util.h"

/* One file of the set, with its place in the order. */
struct auditverify_file {
	char		*path;
	int		 kind;		/* 0 dateext (PATH-x), 1 numbered (PATH.N), 2 PATH */
	unsigned long	 n;
};

/* Where a line is. */
struct auditverify_at {
	const char	*file;
	unsigned long	 line;
};

/* Older first: PATH-<date> ascending, PATH.N descending, PATH last. */
static int
auditverify_order(const void *a, const void *b)
{
	const struct auditverify_file *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind - y->kind;
	if (x->kind == 1)
		return x->n > y->n ? -1 : x->n < y->n;
	return strcmp(x->path, y->path);
}

/* The configured log and its rotated predecessors, oldest first; the count. */
static size_t
auditverify_default_files(const char *path, struct auditverify_file **out)
{
	struct auditverify_file *f = NULL;
	char *dcopy = xstrdup(path), *bcopy = xstrdup(path), *dir, *base, *end;
	struct dirent *de;
	size_t n = 0, blen;
	DIR *d;

	dir = dirname(dcopy);
	base = basename(bcopy);
	blen = strlen(base);
	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			const char *s = de->d_name;
			unsigned long num = 0;
			int kind;

			if (strncmp(s, base, blen) != 0 || (s[blen] != '.' && s[blen] != '-'))
				continue;
			if (s[blen] == '.') {
				errno = 0;
				num = strtoul(s + blen + 1, &end, 10);
				if ((*end != '\0' && strcmp(end, ".gz") != 0) ||
				    end == s + blen + 1 || errno != 0)
					continue;
				kind = 1;
			} else
				kind = 0;
			f = xreallocarray(f, n + 1, sizeof *f);
			xasprintf(&f[n].path, "%s/%s", dir, s);
			f[n].kind = kind;
			f[n].n = num;
			n++;
		}
		closedir(d);
	}
	f = xreallocarray(f, n + 1, sizeof *f);
	f[n].path = xstrdup(path);
	f[n].kind = 2;
	f[n].n = 0;
	n++;
	qsort(f, n, sizeof *f, auditverify_order);
	free(dcopy);
	free(bcopy);
	*out = f;
	return n;
}

/* Whether a file name ends in .gz. */
static int
auditverify_gz(const char *path)
{
	size_t n = strlen(path);

	return n > 3 && strcmp(path + n - 3, ".gz") == 0;
}

/*
 * Open a file of the set for reading; a .gz file through `gzip -dc` (logrotate's
 * compress), run directly with a clean environment. *pid is the child or -1.
 */
static FILE *
auditverify_open(const char *path, pid_t *pid)
{
	static char *const envp[] = { "PATH=/usr/bin:/bin", NULL };
	static char *const argv[] = { "gzip", "-dc", NULL };
	struct proc_req r;
	struct proc p;
	char *cause = NULL;
	int fd;
	FILE *fp;

	*pid = -1;
	if (!auditverify_gz(path))
		return fopen(path, "re");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return NULL;
	proc_req_init(&r, "/bin/gzip", argv, envp);
	r.fd[0] = fd;
	r.fd[1] = PROC_PIPE;
	if (proc_spawn(&r, &p, &cause) != 0) {
		free(cause);
		close(fd);
		return NULL;
	}
	close(fd);
	if ((fp = fdopen(p.fd[1], "r")) == NULL) {
		proc_close(&p);
		(void)proc_wait(p.pid, &cause);
		free(cause);
		return NULL;
	}
	*pid = p.pid;
	return fp;
}

/* Close what auditverify_open opened; -1 when gzip failed. */
static int
auditverify_close(FILE *fp, pid_t pid)
{
	int status;

	fclose(fp);
	if (pid < 0)
		return 0;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* One line without its newline: 1 and *len (*nl: it had one), 0 at the end, -1 on error. */
static int
auditverify_getline(FILE *fp, char **buf, size_t *cap, size_t *len, int *nl)
{
	ssize_t n;

	errno = 0;
	if ((n = getline(buf, cap, fp)) < 0)
		return errno != 0 ? -1 : 0;
	*nl = n > 0 && (*buf)[n - 1] == '\n';
	*len = (size_t)n - (size_t)*nl;
	return 1;
}

/*
 * After a gap: look for a missing sequence number further on. 1 and *where when
 * a record with seq in [from, to] comes later (the records were moved), else 0.
 */
static int
auditverify_find_later(struct auditverify_file *f, size_t nf, size_t fi,
    unsigned long line, unsigned long long from, unsigned long long to,
    struct auditverify_at *where)
{
	struct auditchain_rec r;
	char *buf = NULL, *cause = NULL;
	size_t cap = 0, len, i;
	unsigned long ln;
	int nl, found = 0;
	pid_t pid;
	FILE *fp;

	for (i = fi; i < nf && !found; i++) {
		if ((fp = auditverify_open(f[i].path, &pid)) == NULL)
			continue;
		for (ln = 1; !found && auditverify_getline(fp, &buf, &cap, &len, &nl) == 1; ln++) {
			if (i == fi && ln <= line)
				continue;
			if (auditchain_parse(buf, len, &r, &cause) != 0) {
				free(cause);
				cause = NULL;
				continue;
			}
			if (r.chained && r.seq >= from && r.seq <= to) {
				where->file = f[i].path;
				where->line = ln;
				found = 1;
			}
		}
		(void)auditverify_close(fp, pid);
	}
	free(buf);
	return found;
}

/* Load a public key: 64 hex digits, given directly or as the content of a file. */
static int
auditverify_pubkey_arg(const char *arg, unsigned char pk[AUDITCHAIN_PK])
{
	char buf[160];
	size_t len;
	FILE *fp;

	if (auditchain_unhex(arg, strlen(arg), pk, AUDITCHAIN_PK) == 0)
		return 0;
	if ((fp = fopen(arg, "re")) == NULL)
		return -1;
	len = fread(buf, 1, sizeof buf - 1, fp);
	fclose(fp);
	buf[len] = '\0';
	len = strcspn(buf, " \t\r\n");
	return auditchain_unhex(buf, len, pk, AUDITCHAIN_PK);
}

/* The signing key file the config names (audit.sign_key), or NULL; *cred for a credential. */
static char *
auditverify_config_key(const char *config, int *cred)
{
	json_t *root = json_load_file(config, 0, NULL), *a;
	const char *v;
	char *r = NULL;

	*cred = 0;
	a = json_object_get(root, "audit");
	if ((v = json_string_value(json_object_get(a, "sign_key"))) != NULL)
		r = xstrdup(v);
	else if (json_object_get(a, "sign_key_credential") != NULL)
		*cred = 1;
	json_decref(root);
	return r;
}

/* The public key of the configured signing key (read access needed); 0, or -1 (a message). */
static int
auditverify_own_pubkey(const char *config, const char *file,
    unsigned char pk[AUDITCHAIN_PK], int quiet)
{
	unsigned char *sk;
	char *path, *cause = NULL;
	int cred, rc;

	path = file != NULL ? xstrdup(file) : auditverify_config_key(config, &cred);
	if (path == NULL) {
		if (!quiet)
			fprintf(stderr, "shimbridge: %s names no audit.sign_key%s\n", config,
			    cred ? " file (the key is a systemd credential: run shimbridge "
			    "audit pubkey FILE on its source file)" : "");
		return -1;
	}
	if ((sk = sodium_malloc(AUDITCHAIN_SK)) == NULL) {
		free(path);
		return -1;
	}
	rc = auditchain_load_key(path, sk, pk, &cause);
	sodium_free(sk);
	if (rc != 0 && !quiet)
		fprintf(stderr, "shimbridge: %s\n", cause);
	free(cause);
	free(path);
	return rc;
}

/* shimbridge audit pubkey [FILE] */
static int
auditverify_pubkey(struct admin *a, int argc, char **argv)
{
	unsigned char pk[AUDITCHAIN_PK];
	char hex[2 * AUDITCHAIN_PK + 1];

	if (argc > 3 || (argc == 3 && argv[2][0] == '-')) {
		fprintf(stderr, "usage: shimbridge audit pubkey [KEYFILE]\n");
		return ADM_USAGE;
	}
	if (auditverify_own_pubkey(a->config, argc == 3 ? argv[2] : NULL, pk, 0) != 0)
		return ADM_FAIL;
	auditchain_hex(pk, sizeof pk, hex);
	printf("%s\n", hex);
	return ADM_OK;
}

/* shimbridge audit keygen [FILE]: a new signing key, never over an existing file. */
static int
auditverify_keygen(struct admin *a, int argc, char **argv)
{
	unsigned char *seed = NULL, *sk = NULL, pk[AUDITCHAIN_PK];
	char *path, *hex = NULL, pkhex[2 * AUDITCHAIN_PK + 1];
	int fd = -1, cred, rc = ADM_FAIL;
	size_t len = 2 * crypto_sign_SEEDBYTES;

	if (argc > 3 || (argc == 3 && argv[2][0] == '-')) {
		fprintf(stderr, "usage: shimbridge audit keygen [KEYFILE]\n");
		return ADM_USAGE;
	}
	path = argc == 3 ? xstrdup(argv[2]) : auditverify_config_key(a->config, &cred);
	if (path == NULL) {
		fprintf(stderr, "shimbridge: %s names no audit.sign_key: give the file to "
		    "create\n", a->config);
		return ADM_USAGE;
	}
	seed = sodium_malloc(crypto_sign_SEEDBYTES);
	sk = sodium_malloc(AUDITCHAIN_SK);
	hex = sodium_malloc(len + 2);
	if (seed == NULL || sk == NULL || hex == NULL)
		goto out;
	randombytes_buf(seed, crypto_sign_SEEDBYTES);
	auditchain_hex(seed, crypto_sign_SEEDBYTES, hex);
	hex[len] = '\n';
	crypto_sign_seed_keypair(pk, sk, seed);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
		fprintf(stderr, "shimbridge: cannot create %s: %s%s\n", path, strerror(errno),
		    errno == EEXIST ? " (a key is never overwritten: remove it first)" : "");
		goto out;
	}
	if (fchmod(fd, 0600) != 0 || write(fd, hex, len + 1) != (ssize_t)(len + 1) ||
	    fsync(fd) != 0) {
		fprintf(stderr, "shimbridge: cannot write %s: %s\n", path, strerror(errno));
		unlink(path);
		goto out;
	}
	auditchain_hex(pk, sizeof pk, pkhex);
	printf("%s\n", pkhex);
	fprintf(stderr, "shimbridge: wrote %s; the line above is its public key (copy it to "
	    "where the audit log is verified); shimbridge reload makes the daemon sign with "
	    "it\n", path);
	rc = ADM_OK;
out:
	if (fd >= 0)
		close(fd);
	if (seed != NULL)
		sodium_free(seed);
	if (sk != NULL)
		sodium_free(sk);
	if (hex != NULL)
		sodium_free(hex);
	free(path);
	return rc;
}

/* Report the first broken link. */
static void
auditverify_report(struct auditchain_verify *v, struct auditverify_file *f, size_t nf,
    size_t fi, unsigned long line, const struct auditverify_at *prev)
{
	struct auditverify_at at = { f[fi].path, line }, later = { NULL, 0 };
	const char *kind = auditchain_kind_name(v->kind);
	int moved;

	if (v->kind == AUDITCHAIN_GAP) {
		moved = auditverify_find_later(f, nf, fi, line, v->missing_from, v->missing_to,
		    &later);
		if (moved) {
			printf("%s:%lu: reordered: %s; seq %llu is further on, at %s:%lu\n",
			    at.file, at.line, v->why, v->missing_from, later.file, later.line);
			return;
		}
		printf("%s:%lu: deleted: %s", at.file, at.line, v->why);
		if (line == 1 && fi > 0)
			printf(" (at the start of the file: the end of %s was cut, or a "
			    "rotated file between them is missing)", f[fi - 1].path);
		printf("\n");
		return;
	}
	if ((v->kind == AUDITCHAIN_EDITED || (v->kind == AUDITCHAIN_INSERTED &&
	    v->started && strstr(v->why, "line before") != NULL)) && prev->file != NULL) {
		printf("%s:%lu: %s: %s (shown by the next record, %s:%lu)\n", prev->file,
		    prev->line, kind, v->why, at.file, at.line);
		return;
	}
	printf("%s:%lu: %s: %s\n", at.file, at.line, kind, v->why);
}

/* shimbridge audit verify [--pubkey K] [FILE...] */
static int
auditverify_verify(struct admin *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		ADM_GLOBAL_LONGOPTS,
		{ "pubkey", required_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned char pk[AUDITCHAIN_PK];
	char hex[2 * AUDITCHAIN_PK + 1], *buf = NULL, *cause = NULL;
	const char *pkarg = NULL, *pksrc = NULL;
	struct auditverify_file *f = NULL;
	struct auditverify_at prev = { NULL, 0 };
	struct auditchain_verify v;
	struct adm_paths p;
	size_t nf = 0, i, cap = 0, len;
	unsigned long line;
	int ch, nl, r = 0, rc = ADM_OK, havepk = 0;
	pid_t pid;
	FILE *fp;

	adm_getopt_reset();
	argc--;
	argv++;		/* past "audit": getopt sees "verify" as argv[0] */
	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (ch == 'k')
			pkarg = optarg;
		else if (!adm_global_opt(a, ch, optarg))
			goto usage;
	}
	if (pkarg != NULL) {
		if (auditverify_pubkey_arg(pkarg, pk) != 0) {
			fprintf(stderr, "shimbridge: --pubkey wants 64 hex digits or a file "
			    "holding them: %s\n", pkarg);
			return ADM_USAGE;
		}
		havepk = 1;
		pksrc = "the key given";
	} else if (auditverify_own_pubkey(a->config, NULL, pk, 1) == 0) {
		havepk = 1;
		pksrc = "the configured audit.sign_key";
	}
	if (optind < argc) {
		nf = (size_t)(argc - optind);
		f = xcalloc(nf, sizeof *f);
		for (i = 0; i < nf; i++)
			f[i].path = xstrdup(argv[optind + (int)i]);
	} else {
		memset(&p, 0, sizeof p);
		if (adm_paths_load(a->config, &p, &cause) != 0) {
			adm_paths_warn(cause);
			free(cause);
		}
		nf = auditverify_default_files(p.audit, &f);
		adm_paths_free(&p);
	}
	auditchain_verify_init(&v, havepk ? pk : NULL);
	for (i = 0; i < nf && rc == ADM_OK; i++) {
		if ((fp = auditverify_open(f[i].path, &pid)) == NULL) {
			fprintf(stderr, "shimbridge: cannot open %s: %s\n", f[i].path,
			    strerror(errno));
			rc = ADM_FAIL;
			break;
		}
		for (line = 1; (r = auditverify_getline(fp, &buf, &cap, &len, &nl)) == 1;
		    line++) {
			if (!nl) {
				printf("%s:%lu: %s: the last line has no newline: the file was cut "
				    "in the middle of a record\n", f[i].path, line,
				    auditchain_kind_name(AUDITCHAIN_TORN));
				rc = ADM_INVALID;
				break;
			}
			if (auditchain_verify_line(&v, buf, len, i == 0) != 0) {
				auditverify_report(&v, f, nf, i, line, &prev);
				rc = ADM_INVALID;
				break;
			}
			prev.file = f[i].path;
			prev.line = line;
		}
		if (r < 0) {
			fprintf(stderr, "shimbridge: cannot read %s: %s\n", f[i].path,
			    strerror(errno));
			rc = ADM_FAIL;
		}
		if (auditverify_close(fp, pid) != 0 && rc == ADM_OK) {
			fprintf(stderr, "shimbridge: cannot decompress %s (gzip -dc failed)\n",
			    f[i].path);
			rc = ADM_FAIL;
		}
	}
	if (rc == ADM_OK && !v.started) {
		printf("no chained records in %zu file(s)%s\n", nf, v.legacy > 0 ?
		    " (only records written before the chain existed)" : "");
		rc = ADM_INVALID;
	} else if (rc == ADM_OK) {
		printf("OK: %llu records in %zu file(s), seq %llu..%llu, %llu checkpoints, "
		    "%llu signatures verified\n", v.records, nf, v.first_seq, v.last_seq,
		    v.checkpoints, v.signed_ok);
		if (havepk) {
			auditchain_hex(pk, sizeof pk, hex);
			printf("signed by %s (%s): %s\n", pksrc, "Ed25519", hex);
		} else if (v.seen_key_set) {
			auditchain_hex(v.seen_key, sizeof v.seen_key, hex);
			printf("note: signatures were checked against the key the checkpoints "
			    "name, %s%s; pass --pubkey with your own copy of the key to prove "
			    "who wrote them\n", hex, v.keys_differ ? " (and others: the key "
			    "changed)" : "");
		}
		if (v.legacy > 0)
			printf("note: %llu record(s) before the chain began are not protected\n",
			    v.legacy);
		if (v.continues)
			printf("note: the chain continues from seq %llu, in a file not given\n",
			    v.first_seq - 1);
		if (!v.last_stop)
			printf("note: the last record is not a stop checkpoint (the daemon runs, "
			    "or was killed): records after the last checkpoint are covered by the "
			    "hash chain only\n");
	}
	auditchain_verify_free(&v);
	for (i = 0; i < nf; i++)
		free(f[i].path);
	free(f);
	free(buf);
	return rc;
usage:
	fprintf(stderr, "usage: shimbridge audit verify [--pubkey HEX|FILE] [FILE...]\n");
	return ADM_USAGE;
}

/* shimbridge audit verify|pubkey|keygen; -1 when argv[1] is none of them. */
int
auditverify_cmd(struct admin *a, int argc, char **argv)
{
	if (argc < 2)
		return -1;
	if (sodium_init() < 0) {
		fprintf(stderr, "shimbridge: cannot initialise libsodium\n");
		return ADM_FAIL;
	}
	if (strcmp(argv[1], "verify") == 0)
		return auditverify_verify(a, argc, argv);
	if (strcmp(argv[1], "pubkey") == 0)
		return auditverify_pubkey(a, argc, argv);
	if (strcmp(argv[1], "keygen") == 0) {
		if (geteuid() != 0) {
			fprintf(stderr, "shimbridge: audit keygen must run as root\n");
			return ADM_FAIL;
		}
		return auditverify_keygen(a, argc, argv);
	}
	return -1;
}
