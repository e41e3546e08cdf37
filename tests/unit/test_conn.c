/*
 * Unit tests: one peer (conn.c) over a socketpair: frames, the state machine,
 * the op table's dispatch and a real child (/bin/sh as uid 1) as its job.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>
#include <sodium.h>

#include "approve.h"
#include "config.h"
#include "conn.h"
#include "job.h"
#include "keyring.h"
#include "pending.h"
#include "proto.h"
#include "server.h"
#include "spawn.h"
#include "zygote.h"

#define SECRET_VALUE	"s3cr3t-value-for-test_conn"
#define BOB_VALUE	"bobs-own-value-of-tok-4343"

static char dir[64];
static struct server srv;

/* A frame the bridge sent. */
struct frame {
	uint8_t		 type;
	uint32_t	 len;
	char		*data;		/* NUL-terminated copy */
};

struct peer {
	int		 fd;		/* the shim's end */
	struct conn	*c;
	struct frame	 f[64];
	size_t		 nf;
	int		 eof;
	unsigned char	 buf[1 << 20];
	size_t		 len;
};

/* Write a file with a mode. */
static void
put(const char *p, const char *text, mode_t mode)
{
	FILE *f = fopen(p, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(p, mode), 0);
}

static int
setup(void **state)
{
	char path[128], sd[128], text[2048], *cause = NULL, **warn = NULL;
	size_t nwarn = 0;

	(void)state;
	strcpy(dir, "/tmp/sbconn.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(sd, sizeof sd, "%s/sessions.d", dir);
	mkdir(sd, 0700);
	/* A gh-profile tool that prints the files its --body-file arguments name. */
	chmod(dir, 0755);
	snprintf(path, sizeof path, "%s/ghcat", dir);
	put(path, "#!/bin/sh\nfor a; do case $a in --body-file=*) echo \"path ${a#--body-file=}\"; "
	    "cat \"${a#--body-file=}\";; esac; done\ncat\n", 0755);
	snprintf(path, sizeof path, "%s/config.json", dir);
	setenv("TEST_CONN_SECRET", SECRET_VALUE, 1);
	setenv("TEST_CONN_BOB", BOB_VALUE, 1);
	snprintf(text, sizeof text, "{\"runner\": \"daemon\", \"secrets\": {\"tok\": {\"source\": \"env\", "
	    "\"variable\": \"TEST_CONN_SECRET\"}}, \"tools\": {\"sh\": {\"path\": \"/bin/sh\", "
	    "\"secrets\": {\"TOK\": \"tok\"}, \"timeout\": 2, \"output_limit\": 100000, "
	    "\"rules\": [{\"allow\": [\"-c\", \"**\"]}]}, \"true\": {\"path\": \"/bin/true\", "
	    "\"rules\": [{\"allow\": [\"**\"]}]}, \"ghcat\": {\"path\": \"%s/ghcat\", "
	    "\"profile\": \"gh\", \"rules\": [{\"allow\": [\"**\"]}]}, \"ask\": {\"path\": "
	    "\"/bin/sh\", \"rules\": [{\"ask\": [\"-c\", \"**\"], \"timeout\": 1}]}}, "
	    "\"sessions\": [{\"name\": \"alice\", \"uid\": 4242, \"tools\": [\"sh\", \"ghcat\", "
	    "\"ask\"]}, "
	    "{\"name\": \"bob\", \"uid\": 4343, \"tools\": [\"sh\"], \"secrets\": "
	    "{\"tok\": {\"source\": \"env\", \"variable\": \"TEST_CONN_BOB\"}}}]}", dir);
	put(path, text, 0600);
	memset(&srv, 0, sizeof srv);
	TAILQ_INIT(&srv.conns);
	if ((srv.cfg = config_load(path, 0, &cause)) == NULL) {
		fprintf(stderr, "config: %s\n", cause);
		return -1;
	}
	srv.keyring = keyring_new();
	keyring_load(srv.keyring, srv.cfg, &warn, &nwarn);
	if (nwarn != 0)
		return -1;
	srv.base = event_base_new();
	srv.started = time(NULL);
	srv.approve = approve_new();
	if (asprintf(&srv.scratch_dir, "%s/run", dir) < 0 || mkdir(srv.scratch_dir, 0711) != 0)
		return -1;
	srv.zygote = zygote_new(srv.base, srv.scratch_dir);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	keyring_free(srv.keyring);
	approve_free(srv.approve);
	config_unref(srv.cfg);
	zygote_free(srv.zygote);
	event_base_free(srv.base);
	free(srv.scratch_dir);
	return spawn_rmtree(dir);
}

/* Connect a new peer as uid (0: root). */
static void
peer_open(struct peer *p, uid_t uid)
{
	int sv[2];

	memset(p, 0, sizeof *p);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv),
	    0);
	p->fd = sv[0];
	p->c = conn_new(&srv, sv[1], uid, uid, 1234,
	    uid == 0 ? NULL : config_session_by_uid(srv.cfg, uid));
	assert_int_equal(p->c->state, CONN_HELLO);
}

static void
peer_close(struct peer *p)
{
	size_t i;

	for (i = 0; i < p->nf; i++)
		free(p->f[i].data);
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

/* Send one frame from the shim's side. */
static void
peer_send(struct peer *p, uint8_t type, const void *buf, size_t len)
{
	unsigned char hdr[FRAME_HDR];

	frame_put_header(hdr, type, (uint32_t)len);
	assert_int_equal(write(p->fd, hdr, sizeof hdr), sizeof hdr);
	if (len > 0)
		assert_int_equal(write(p->fd, buf, len), (ssize_t)len);
}

static void
peer_send_str(struct peer *p, uint8_t type, const char *s)
{
	peer_send(p, type, s, strlen(s));
}

/* Run the loop and the reaper; collect frames until the bridge closes or n frames. */
static void
pump(struct peer *p, size_t until_frames)
{
	time_t end = time(NULL) + 10;
	int status;
	ssize_t n;
	pid_t pid;

	while (!p->eof && p->nf < until_frames && time(NULL) < end) {
		event_base_loop(srv.base, EVLOOP_NONBLOCK);
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			(void)job_reaped(pid, status);
		while ((n = read(p->fd, p->buf + p->len, sizeof p->buf - p->len)) > 0)
			p->len += (size_t)n;
		if (n == 0)
			p->eof = 1;
		while (p->len >= FRAME_HDR) {
			uint32_t len = (uint32_t)p->buf[0] << 24 | (uint32_t)p->buf[1] << 16 |
			    (uint32_t)p->buf[2] << 8 | p->buf[3];
			struct frame *f;

			if (p->len < FRAME_HDR + len)
				break;
			assert_true(p->nf < 64);
			f = &p->f[p->nf++];
			f->type = p->buf[4];
			f->len = len;
			f->data = calloc(1, len + 1);
			memcpy(f->data, p->buf + FRAME_HDR, len);
			memmove(p->buf, p->buf + FRAME_HDR + len, p->len - FRAME_HDR - len);
			p->len -= FRAME_HDR + len;
		}
		usleep(1000);
	}
}

/* Concatenated payloads of one type; *eofs counts empty (EOF) frames. */
static char *
collect(struct peer *p, uint8_t type, int *eofs)
{
	static char out[8192];
	size_t i, off = 0;

	*eofs = 0;
	out[0] = '\0';
	for (i = 0; i < p->nf; i++) {
		if (p->f[i].type != type)
			continue;
		if (p->f[i].len == 0)
			(*eofs)++;
		else if (off + p->f[i].len < sizeof out) {
			memcpy(out + off, p->f[i].data, p->f[i].len);
			off += p->f[i].len;
			out[off] = '\0';
		}
	}
	return out;
}

static void
hello(struct peer *p)
{
	char h[64];

	snprintf(h, sizeof h, "{\"proto\": %d}", PROTO_VERSION);
	peer_send_str(p, FRAME_HELLO, h);
	pump(p, 1);
	assert_int_equal(p->nf, 1);
	assert_int_equal(p->f[0].type, FRAME_HELLO);
	assert_int_equal(p->c->state, CONN_REQUEST);
}

/* The last frame is a final one of that type whose JSON has key = value (string or int). */
static void
expect_final(struct peer *p, uint8_t type, const char *needle)
{
	assert_true(p->nf > 0);
	assert_int_equal(p->f[p->nf - 1].type, type);
	if (strstr(p->f[p->nf - 1].data, needle) == NULL)
		fail_msg("final frame %s lacks %s", p->f[p->nf - 1].data, needle);
}

static void
test_conn_run_relays_and_redacts(void **state)
{
	struct peer p;
	const char *out;
	int eofs;

	(void)state;
	peer_open(&p, 4242);
	hello(&p);
	assert_non_null(strstr(p.f[0].data, "\"session\":\"alice\""));
	peer_send_str(&p, FRAME_REQUEST, "{\"op\": \"run\", \"tool\": \"sh\", \"argv\": [\"-c\", "
	    "\"echo hi; echo \\\"tok=$TOK\\\"; read x; echo \\\"got $x\\\" >&2; exit 4\"]}");
	pump(&p, 2);
	assert_int_equal(p.c->state, CONN_RUNNING);
	assert_int_equal(srv.nrunning, 1);
	assert_int_equal(server_session_running(&srv, p.c->session), 1);
	peer_send_str(&p, FRAME_STDIN, "line\n");
	peer_send(&p, FRAME_STDIN, NULL, 0);
	pump(&p, 64);
	assert_true(p.eof);
	out = collect(&p, FRAME_STDOUT, &eofs);
	assert_non_null(strstr(out, "hi\ntok="));
	assert_null(strstr(out, SECRET_VALUE));	/* redacted */
	assert_int_equal(eofs, 1);
	assert_string_equal(collect(&p, FRAME_STDERR, &eofs), "got line\n");
	assert_int_equal(eofs, 1);
	expect_final(&p, FRAME_EXIT, "\"code\":4");
	assert_int_equal(srv.nconns, 0);	/* freed from the loop */
	assert_int_equal(srv.nrunning, 0);
	peer_close(&p);
}

static void
test_conn_handshake_errors(void **state)
{
	struct peer p;
	unsigned char hdr[FRAME_HDR];

	(void)state;
	/* Not HELLO first. */
	peer_open(&p, 4242);
	peer_send_str(&p, FRAME_REQUEST, "{}");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "expected a HELLO frame first");
	assert_true(p.eof);
	peer_close(&p);
	/* Wrong version. */
	peer_open(&p, 4242);
	peer_send_str(&p, FRAME_HELLO, "{\"proto\": 999}");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "protocol version mismatch");
	peer_close(&p);
	/* A header announcing more than the cap. */
	peer_open(&p, 4242);
	frame_put_header(hdr, FRAME_HELLO, FRAME_CTRL_MAX + 1);
	assert_int_equal(write(p.fd, hdr, sizeof hdr), sizeof hdr);
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "\"code\":\"protocol\"");
	peer_close(&p);
	/* Not JSON. */
	peer_open(&p, 4242);
	hello(&p);
	peer_send_str(&p, FRAME_REQUEST, "{nope");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "the request could not be read");
	peer_close(&p);
	assert_int_equal(srv.nconns, 0);
}

static void
test_conn_op_table_dispatch(void **state)
{
	struct peer p;
	int eofs;

	(void)state;
	/* A session may not ask for status, nor for an op that does not exist. */
	peer_open(&p, 4242);
	hello(&p);
	peer_send_str(&p, FRAME_REQUEST, "{\"op\": \"status\"}");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "unknown op");
	peer_close(&p);
	peer_open(&p, 4242);
	hello(&p);
	peer_send_str(&p, FRAME_REQUEST, "{\"op\": \"launch\"}");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "unknown op");
	peer_close(&p);
	/* Root may ask for status only. */
	peer_open(&p, 0);
	hello(&p);
	peer_send_str(&p, FRAME_REQUEST, "{\"op\": \"run\", \"tool\": \"sh\", \"argv\": []}");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "root may only ask for status");
	peer_close(&p);
	peer_open(&p, 0);
	hello(&p);
	peer_send_str(&p, FRAME_REQUEST, "{\"op\": \"status\"}");
	pump(&p, 64);
	assert_non_null(strstr(collect(&p, FRAME_STDOUT, &eofs), "\"sessions\":[{\"name\":\"alice\""));
	expect_final(&p, FRAME_EXIT, "\"code\":0");
	peer_close(&p);
	/* A tool the session was not granted. */
	peer_open(&p, 4242);
	hello(&p);
	peer_send_str(&p, FRAME_REQUEST, "{\"op\": \"run\", \"tool\": \"true\", \"argv\": []}");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "\"code\":\"unknown-tool\"");
	peer_close(&p);
	assert_int_equal(srv.nconns, 0);
}

/* Timeout: TERM, then the final error frame. The peer leaving kills the child. */
static void
test_conn_timeout_and_peer_gone(void **state)
{
	struct peer p;

	(void)state;
	peer_open(&p, 4242);
	hello(&p);
	peer_send_str(&p, FRAME_REQUEST, "{\"op\": \"run\", \"tool\": \"sh\", \"argv\": [\"-c\", "
	    "\"exec sleep 30\"]}");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "\"code\":\"timeout\"");
	assert_int_equal(srv.nconns, 0);
	peer_close(&p);

	peer_open(&p, 4242);
	hello(&p);
	peer_send_str(&p, FRAME_REQUEST, "{\"op\": \"run\", \"tool\": \"sh\", \"argv\": [\"-c\", "
	    "\"echo started; exec sleep 30\"]}");
	pump(&p, 2);
	assert_int_equal(p.c->state, CONN_RUNNING);
	close(p.fd);
	p.fd = -1;
	{
		time_t end = time(NULL) + 5;
		int status;
		pid_t pid;

		while (srv.nconns > 0 && time(NULL) < end) {
			event_base_loop(srv.base, EVLOOP_NONBLOCK);
			while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
				(void)job_reaped(pid, status);
			usleep(1000);
		}
	}
	assert_int_equal(srv.nconns, 0);
	assert_int_equal(srv.nrunning, 0);
	peer_close(&p);
}

/* Every redactor knows every session's secrets: bob's value in alice's output is masked. */
static void
test_conn_redacts_other_sessions_secrets(void **state)
{
	struct peer p;
	int eofs;

	(void)state;
	peer_open(&p, 4242);
	hello(&p);
	peer_send_str(&p, FRAME_REQUEST, "{\"op\": \"run\", \"tool\": \"sh\", \"argv\": [\"-c\", "
	    "\"echo x" BOB_VALUE "y; echo x" BOB_VALUE "y >&2\"]}");
	pump(&p, 64);
	expect_final(&p, FRAME_EXIT, "\"code\":0");
	assert_string_equal(collect(&p, FRAME_STDOUT, &eofs), "x[REDACTED]y\n");
	assert_string_equal(collect(&p, FRAME_STDERR, &eofs), "x[REDACTED]y\n");
	peer_close(&p);
	/* And bob's tool gets bob's value, while alice's value is masked in his output. */
	peer_open(&p, 4343);
	hello(&p);
	peer_send_str(&p, FRAME_REQUEST, "{\"op\": \"run\", \"tool\": \"sh\", \"argv\": [\"-c\", "
	    "\"test \\\"$TOK\\\" = " BOB_VALUE " && echo ok " SECRET_VALUE "\"]}");
	pump(&p, 64);
	expect_final(&p, FRAME_EXIT, "\"code\":0");
	assert_string_equal(collect(&p, FRAME_STDOUT, &eofs), "ok [REDACTED]\n");
	peer_close(&p);
}

/* Output cap: the child is killed and the peer told why. */
static void
test_conn_output_limit(void **state)
{
	struct peer p;

	(void)state;
	peer_open(&p, 4242);
	hello(&p);
	peer_send_str(&p, FRAME_REQUEST, "{\"op\": \"run\", \"tool\": \"sh\", \"argv\": [\"-c\", "
	    "\"yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"]}");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "\"code\":\"output-limit\"");
	assert_int_equal(srv.nconns, 0);
	peer_close(&p);
}

/* Start a ghcat run whose --body-file the bridge must fetch; returns at CONN_FILES. */
static void
files_start(struct peer *p)
{
	peer_open(p, 4242);
	hello(p);
	peer_send_str(p, FRAME_REQUEST, "{\"op\": \"run\", \"tool\": \"ghcat\", \"argv\": "
	    "[\"issue\", \"comment\", \"1\", \"--body-file=notes.md\"]}");
	pump(p, 2);
	assert_int_equal(p->nf, 2);
	assert_int_equal(p->f[1].type, FRAME_FILE_REQ);
	assert_string_equal(p->f[1].data, "notes.md");
	assert_int_equal(p->c->state, CONN_FILES);
	/* A request waiting for its files counts against the session's limit. */
	assert_int_equal(server_session_running(&srv, p->c->session), 1);
}

/* File arguments: fetched before the child starts, argv rewritten, stdin held. */
static void
test_conn_files(void **state)
{
	struct peer p;
	const char *out;
	int eofs;

	(void)state;
	files_start(&p);
	peer_send_str(&p, FRAME_STDIN, "held stdin\n");
	peer_send(&p, FRAME_STDIN, NULL, 0);
	peer_send_str(&p, FRAME_FILE_DATA, "the body ");
	peer_send_str(&p, FRAME_FILE_DATA, "text\n");
	peer_send_str(&p, FRAME_FILE_END, "{\"status\":\"ok\",\"size\":14}");
	pump(&p, 64);
	assert_true(p.eof);
	out = collect(&p, FRAME_STDOUT, &eofs);
	if (strstr(out, "/files/0\nthe body text\nheld stdin\n") == NULL)
		fail_msg("unexpected output: %s", out);
	expect_final(&p, FRAME_EXIT, "\"code\":0");
	assert_int_equal(srv.nconns, 0);
	peer_close(&p);

	/* A file the sandbox could not give: refused, nothing runs. */
	files_start(&p);
	peer_send_str(&p, FRAME_FILE_END, "{\"status\":\"not-found\"}");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "\"code\":\"denied\"");
	assert_non_null(strstr(p.f[p.nf - 1].data, "--body-file notes.md"));
	assert_int_equal(collect(&p, FRAME_STDOUT, &eofs)[0], '\0');
	peer_close(&p);

	/* A size that does not match: a protocol error for this peer only. */
	files_start(&p);
	peer_send_str(&p, FRAME_FILE_DATA, "ab");
	peer_send_str(&p, FRAME_FILE_END, "{\"status\":\"ok\",\"size\":5}");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "\"code\":\"protocol\"");
	peer_close(&p);

	/* A frame that has no place here. */
	files_start(&p);
	peer_send_str(&p, FRAME_REQUEST, "{}");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "\"code\":\"protocol\"");
	peer_close(&p);

	/* The peer goes away while its files are pending: freed, scratch removed. */
	files_start(&p);
	close(p.fd);
	p.fd = -1;
	{
		time_t end = time(NULL) + 5;

		while (srv.nconns > 0 && time(NULL) < end) {
			event_base_loop(srv.base, EVLOOP_NONBLOCK);
			usleep(1000);
		}
	}
	assert_int_equal(srv.nconns, 0);
	peer_close(&p);
}

/* Ask for a run of the "ask" tool; returns its request id once it waits (CONN_PENDING). */
static uint64_t
ask_start(struct peer *p, const char *script)
{
	char req[256];

	peer_open(p, 4242);
	hello(p);
	snprintf(req, sizeof req, "{\"op\": \"run\", \"tool\": \"ask\", \"argv\": [\"-c\", "
	    "\"%s\"]}", script);
	peer_send_str(p, FRAME_REQUEST, req);
	pump(p, 2);
	if (p->nf > 1 && p->f[1].type != FRAME_STDERR)
		fail_msg("not waiting: %s", p->f[1].data);
	assert_int_equal(p->c->state, CONN_PENDING);
	assert_int_equal(p->f[1].type, FRAME_STDERR);
	assert_non_null(strstr(p->f[1].data, "shimbridge: waiting for the operator to approve "
	    "request "));
	assert_int_equal(approve_count(srv.approve), 1);
	return approve_first(srv.approve)->id;
}

/* CONN_PENDING: stdin held until approved, refusals, Ctrl-C, timeout, the peer leaving. */
static void
test_conn_pending(void **state)
{
	struct peer p;
	char *why = NULL;
	uint64_t id;
	int eofs;

	(void)state;
	/* Approved: the stdin sent while it waited reaches the child. */
	id = ask_start(&p, "cat");
	peer_send_str(&p, FRAME_STDIN, "held input");
	peer_send(&p, FRAME_STDIN, NULL, 0);
	pump(&p, 2);
	assert_int_equal(p.c->state, CONN_PENDING);
	assert_int_equal(pending_decide(&srv, id, 1, 0, NULL, 0, 1, &why), 0);
	assert_int_equal(approve_count(srv.approve), 0);
	pump(&p, 64);
	assert_string_equal(collect(&p, FRAME_STDOUT, &eofs), "held input");
	expect_final(&p, FRAME_EXIT, "\"code\":0");
	peer_close(&p);

	/* Denied with a reason: one structured line. */
	id = ask_start(&p, "echo no");
	assert_int_equal(pending_decide(&srv, id, 0, 0, "not now", 0, 1, &why), 0);
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "shimbridge: refused: ask -c 'echo no' (request ");
	expect_final(&p, FRAME_ERROR, "the operator denied it (not now)");
	expect_final(&p, FRAME_ERROR, "\"code\":\"denied\"");
	peer_close(&p);
	/* Deciding a request that no longer waits fails. */
	assert_int_equal(pending_decide(&srv, id, 1, 0, NULL, 0, 1, &why), -1);
	assert_non_null(strstr(why, "no request"));
	free(why);

	/* Ctrl-C: the shim's SIGNAL INT cancels it. */
	(void)ask_start(&p, "echo int");
	peer_send_str(&p, FRAME_SIGNAL, "{\"signal\": \"INT\"}");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "interrupted while waiting for approval");
	assert_int_equal(approve_count(srv.approve), 0);
	peer_close(&p);

	/* Nobody answers within the rule's 1 s. */
	(void)ask_start(&p, "echo late");
	pump(&p, 64);
	expect_final(&p, FRAME_ERROR, "nobody approved it within 1 seconds");
	peer_close(&p);

	/* The peer goes away: the request disappears, the conn is freed. */
	(void)ask_start(&p, "echo gone");
	close(p.fd);
	p.fd = -1;
	{
		time_t end = time(NULL) + 5;

		while (srv.nconns > 0 && time(NULL) < end) {
			event_base_loop(srv.base, EVLOOP_NONBLOCK);
			usleep(1000);
		}
	}
	assert_int_equal(srv.nconns, 0);
	assert_int_equal(approve_count(srv.approve), 0);
	assert_int_equal(srv.nrunning, 0);
	peer_close(&p);
}

/* What the gate told a running request's op (test_conn_pending_running). */
static struct {
	int	 go, freed, refused;
	char	 line[512];
} held;

static void
held_go(struct conn *c, void *arg)
{
	(void)c;
	(void)arg;
	held.go++;
}

static void
held_free(void *arg)
{
	(void)arg;
	held.freed++;
}

static int
held_still(struct conn *c, void *arg, const struct config *nc, char **why)
{
	(void)c;
	(void)arg;
	(void)nc;
	(void)why;
	return 1;
}

static void
held_refused(struct conn *c, void *arg, const char *line, const char *reason)
{
	(void)c;
	(void)arg;
	(void)reason;
	held.refused++;
	snprintf(held.line, sizeof held.line, "%s", line);
}

/* Start "sh -c SCRIPT" (tool timeout 2 s) and wait for its first output. */
static void
held_run(struct peer *p, const char *script)
{
	char req[256];

	memset(&held, 0, sizeof held);
	peer_open(p, 4242);
	hello(p);
	snprintf(req, sizeof req, "{\"op\": \"run\", \"tool\": \"sh\", \"argv\": [\"-c\", "
	    "\"%s\"]}", script);
	peer_send_str(p, FRAME_REQUEST, req);
	pump(p, 2);
	assert_int_equal(p->c->state, CONN_RUNNING);
}

/* The running request asks (as a push's hook does); the approval's id. */
static uint64_t
held_ask(struct peer *p, int timeout)
{
	struct pending_ask ask;

	memset(&ask, 0, sizeof ask);
	ask.command = "git push https://github.com/octo/repo release/1";
	ask.key = "k";
	ask.rule = "git.ask_branches";
	ask.timeout = timeout;
	ask.go = held_go;
	ask.free = held_free;
	ask.still_asks = held_still;
	ask.refused = held_refused;
	pending_ask(p->c, &ask);
	assert_int_equal(p->c->state, CONN_RUNNING);
	assert_int_equal(approve_count(srv.approve), 1);
	return approve_first(srv.approve)->id;
}

/* Start "sh -c SCRIPT" (tool timeout 2 s), wait for its first output, then ask. */
static uint64_t
held_start(struct peer *p, const char *script, int timeout)
{
	held_run(p, script);
	return held_ask(p, timeout);
}

/* Sleep until the monotonic clock is ms milliseconds into a second (0-999). */
static void
sleep_to_ms(long ms)
{
	struct timespec ts;
	long now;

	assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
	now = ts.tv_nsec / 1000000;
	usleep((useconds_t)((now < ms ? ms - now : 1000 - now + ms) * 1000));
}

/*
 * A request whose child runs already asks (a git push's hook): the conn stays
 * CONN_RUNNING, its wall-clock limit is held while it waits and extended by the
 * wait, a decision goes to the op, Ctrl-C refuses without signalling the child,
 * and a child that ends while it waits drops the request.
 */
static void
test_conn_pending_running(void **state)
{
	struct peer p;
	char *why = NULL;
	uint64_t id;
	int eofs;

	(void)state;
	/* Held past its 2 s limit: the child ends by itself; the request is dropped. */
	(void)held_start(&p, "echo started; sleep 3; echo finished", 30);
	pump(&p, 64);
	assert_non_null(strstr(collect(&p, FRAME_STDOUT, &eofs), "finished"));
	expect_final(&p, FRAME_EXIT, "\"code\":0");
	assert_int_equal(held.freed, 1);
	assert_int_equal(held.go + held.refused, 0);
	assert_int_equal(approve_count(srv.approve), 0);
	peer_close(&p);

	/* Approved: go runs, the child goes on and ends. */
	id = held_start(&p, "echo started; sleep 0.2; echo finished", 30);
	assert_int_equal(pending_decide(&srv, id, 1, 0, NULL, 0, 1, &why), 0);
	assert_int_equal(held.go, 1);
	pump(&p, 64);
	expect_final(&p, FRAME_EXIT, "\"code\":0");
	assert_int_equal(held.freed + held.refused, 0);
	peer_close(&p);

	/*
	 * Its limit counts milliseconds: a call started late in one second and held
	 * from early in the next still gets its 2 s of running. (Counted in whole
	 * seconds, the resumed timer had 1 s left, and stopped this 1.5 s child.)
	 */
	sleep_to_ms(900);
	held_run(&p, "echo started; sleep 1.5; echo finished");
	sleep_to_ms(20);
	id = held_ask(&p, 30);
	assert_int_equal(pending_decide(&srv, id, 1, 0, NULL, 0, 1, &why), 0);
	pump(&p, 64);
	assert_non_null(strstr(collect(&p, FRAME_STDOUT, &eofs), "finished"));
	expect_final(&p, FRAME_EXIT, "\"code\":0");
	peer_close(&p);

	/*
	 * Ctrl-C: refused with the structured line; the child is not signalled. The
	 * SIGNAL is read before the child can be reaped (pump: loop first, then reap).
	 */
	(void)held_start(&p, "echo started; sleep 0.2; echo finished", 30);
	peer_send_str(&p, FRAME_SIGNAL, "{\"signal\": \"INT\"}");
	pump(&p, 64);
	assert_int_equal(held.refused, 1);
	assert_non_null(strstr(held.line, "shimbridge: refused: git push "
	    "https://github.com/octo/repo release/1 (request "));
	assert_non_null(strstr(held.line, "interrupted while waiting for approval"));
	assert_non_null(strstr(collect(&p, FRAME_STDOUT, &eofs), "finished"));
	expect_final(&p, FRAME_EXIT, "\"code\":0");
	peer_close(&p);

	/* No decision in 1 s: refused; then the wall clock runs again and stops the child. */
	(void)held_start(&p, "echo started; exec sleep 30", 1);
	pump(&p, 64);
	assert_int_equal(held.refused, 1);
	assert_non_null(strstr(held.line, "nobody approved it within 1 seconds"));
	expect_final(&p, FRAME_ERROR, "\"code\":\"timeout\"");
	assert_int_equal(approve_count(srv.approve), 0);
	peer_close(&p);
	assert_int_equal(srv.nrunning, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conn_run_relays_and_redacts),
		cmocka_unit_test(test_conn_handshake_errors),
		cmocka_unit_test(test_conn_op_table_dispatch),
		cmocka_unit_test(test_conn_timeout_and_peer_gone),
		cmocka_unit_test(test_conn_output_limit),
		cmocka_unit_test(test_conn_redacts_other_sessions_secrets),
		cmocka_unit_test(test_conn_files),
		cmocka_unit_test(test_conn_pending),
		cmocka_unit_test(test_conn_pending_running),
	};

	if (sodium_init() < 0)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
