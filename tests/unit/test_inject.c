/* Unit tests: injector setup checks and one gh call's injector (bridge/inject.c, ghinject.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sodium.h>

#include "ghinject.h"
#include "inject.h"
#include "spawn.h"

static const char *const repos[] = { "o/r" };
static struct httppolicy_scope scope = { HTTP_API_GHE, repos, 1, 0 };
static int naudit;
static char last_refusal[512];
static int last_status;

/* A fixed secret. */
static int
secret_cb(void *arg, const unsigned char **v, size_t *len)
{
	(void)arg;
	*v = (const unsigned char *)"s3cret";
	*len = 6;
	return 0;
}

/* Keep the last audit record. */
static void
audit_cb(void *arg, const char *summary, int status, unsigned long long up,
    unsigned long long down, const char *refusal)
{
	(void)arg;
	(void)summary;
	(void)up;
	(void)down;
	naudit++;
	last_status = status;
	snprintf(last_refusal, sizeof last_refusal, "%s", refusal != NULL ? refusal : "");
}

/* A listening TCP socket on loopback. */
static int
tcp_listener(void)
{
	struct sockaddr_in	 sin;
	int			 fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(0x7f000001);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
	assert_int_equal(listen(fd, 4), 0);
	return fd;
}

/* Try one upstream URL (and auth/username); returns whether inject_new accepted it. */
static int
try_target(const char *upstream, enum inject_auth auth, const char *user, const char *ph)
{
	struct event_base	*base = event_base_new();
	struct inject_target	 t;
	struct inject		*inj;
	char			*cause = NULL;
	int			 ok;

	memset(&t, 0, sizeof t);
	t.api = HTTP_API_GHE;
	t.upstream = upstream;
	t.auth = auth;
	t.username = user;
	t.placeholder = ph;
	t.scope = &scope;
	t.secret = secret_cb;
	inj = inject_new(base, tcp_listener(), &t, &cause);
	ok = inj != NULL;
	if (ok)
		assert_null(cause);
	else
		assert_non_null(cause);
	inject_free(inj);
	free(cause);
	event_base_free(base);
	return ok;
}

static void
test_inject_targets(void **state)
{
	(void)state;
	assert_true(try_target("https://api.github.com", INJECT_AUTH_TOKEN, NULL, "p"));
	assert_true(try_target("https://localhost:8443/", INJECT_AUTH_TOKEN, NULL, NULL));
	assert_true(try_target("http://127.0.0.1:9", INJECT_AUTH_BASIC, "x-access-token", NULL));
	assert_false(try_target("ftp://example.com", INJECT_AUTH_TOKEN, NULL, NULL));
	assert_false(try_target("https://example.com/api/v3", INJECT_AUTH_TOKEN, NULL, NULL));
	assert_false(try_target("https://u:p@example.com", INJECT_AUTH_TOKEN, NULL, NULL));
	assert_false(try_target("https://example.com?x=1", INJECT_AUTH_TOKEN, NULL, NULL));
	assert_false(try_target("not a url", INJECT_AUTH_TOKEN, NULL, NULL));
	assert_false(try_target("https://example.com", INJECT_AUTH_BASIC, NULL, NULL));
	assert_false(try_target("https://example.com", INJECT_AUTH_BASIC, "a:b", NULL));
	assert_false(try_target("https://example.com", INJECT_AUTH_TOKEN, NULL, "sp ace"));
}

/* Count the prefetched callback's calls, and those with an answer. */
static int nprefetched, nprefetched_body;

static void
prefetched_cb(void *arg, const unsigned char *body, size_t len)
{
	(void)arg;
	(void)len;
	nprefetched++;
	nprefetched_body += body != NULL;
}

/*
 * inject_prefetch: two targets per injector, each once, each through the policy;
 * only the first one's outcome goes to the prefetched callback. The upstream
 * refuses connections, so both fail, and the callback hears of it once.
 */
static void
test_inject_prefetch(void **state)
{
	static const struct httppolicy_scope fetch = { HTTP_API_GIT, repos, 1, 0 };
	static const struct httppolicy_scope push = { HTTP_API_GIT, repos, 1, 1 };
	const char		*up = "/o/r.git/info/refs?service=git-upload-pack";
	const char		*rp = "/o/r.git/info/refs?service=git-receive-pack";
	struct event_base	*base;
	struct inject_target	 t;
	struct inject		*inj;
	char			*cause = NULL;
	int			 i, pass;

	(void)state;
	for (pass = 0; pass < 2; pass++) {
		base = event_base_new();
		memset(&t, 0, sizeof t);
		t.api = HTTP_API_GIT;
		t.upstream = "http://127.0.0.1:1";
		t.auth = INJECT_AUTH_BASIC;
		t.username = "x-access-token";
		t.scope = pass == 0 ? &fetch : &push;
		t.secret = secret_cb;
		t.audit = audit_cb;
		t.prefetched = prefetched_cb;
		nprefetched = nprefetched_body = 0;
		assert_non_null(inj = inject_new(base, tcp_listener(), &t, &cause));
		assert_int_equal(inject_prefetch(inj, "o/r.git/info/refs", &cause), -1);
		assert_non_null(cause);
		free(cause);
		assert_int_equal(inject_prefetch(inj, up, &cause), 0);
		assert_null(cause);
		assert_int_equal(inject_prefetch(inj, up, &cause), -1);	/* the same again */
		assert_non_null(strstr(cause, "prefetched already"));
		free(cause);
		if (pass == 0) {
			/* receive-pack's advertisement is a push's: not for a fetch's scope. */
			assert_int_equal(inject_prefetch(inj, rp, &cause), -1);
			assert_non_null(strstr(cause, "refused"));
			free(cause);
		} else {
			assert_int_equal(inject_prefetch(inj, rp, &cause), 0);
			assert_int_equal(inject_prefetch(inj, "/o/r.git/HEAD", &cause), -1);
			assert_non_null(strstr(cause, "at most 2"));
			free(cause);
		}
		cause = NULL;
		for (i = 0; i < 2000 && nprefetched == 0; i++) {
			event_base_loop(base, EVLOOP_NONBLOCK);
			usleep(1000);
		}
		for (i = 0; i < 50; i++)
			event_base_loop(base, EVLOOP_NONBLOCK);
		assert_int_equal(nprefetched, 1);
		assert_int_equal(nprefetched_body, 0);
		inject_free(inj);
		event_base_free(base);
	}
}

/* Read everything from fd while running the loop; returns the bytes (malloc'd). */
static char *
exchange(struct event_base *base, int fd, const char *req)
{
	char	*out = calloc(1, 65536);
	size_t	 n = 0;
	ssize_t	 r;
	int	 i;

	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	fcntl(fd, F_SETFL, O_NONBLOCK);
	for (i = 0; i < 2000; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		r = read(fd, out + n, 65535 - n);
		if (r == 0)
			break;
		if (r > 0)
			n += (size_t)r;
		else
			usleep(1000);
	}
	return out;
}

/* The upstream of test_inject_reuse: each request's peer port, and how to answer. */
static unsigned short	up_ports[16];
static int		up_n, up_close, up_drop;
static char		up_body[64];	/* the last request's body */

static void
upstream_cb(struct evhttp_request *req, void *arg)
{
	struct evbuffer	*b = evbuffer_new();
	char		*addr;
	ev_uint16_t	 port;

	(void)arg;
	evhttp_connection_get_peer(evhttp_request_get_connection(req), &addr, &port);
	if (up_n < 16)
		up_ports[up_n] = port;
	up_n++;
	memset(up_body, 0, sizeof up_body);
	evbuffer_copyout(evhttp_request_get_input_buffer(req), up_body, sizeof up_body - 1);
	if (up_drop > 0) {
		/*
		 * Closed as the request came in (an idle timeout's race): no byte of the
		 * answer leaves (the reply below only lets libevent free the request).
		 */
		up_drop--;
		shutdown(bufferevent_getfd(evhttp_connection_get_bufferevent(
		    evhttp_request_get_connection(req))), SHUT_RDWR);
	}
	if (up_close)
		evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
	evbuffer_add_printf(b, "answer %d\n", up_n);
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

/* A request with a body through the injector on a fresh connection; the whole answer. */
static char *
through_body(struct event_base *base, int port, const char *method, const char *target,
    const char *body)
{
	struct sockaddr_in	 sin;
	char			 req[512];
	int			 fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(0x7f000001);
	sin.sin_port = htons((unsigned short)port);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof sin), 0);
	snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n%s", method, target, strlen(body), body);
	char *out = exchange(base, fd, req);
	close(fd);
	return out;
}

/* The same without a body. */
static char *
through(struct event_base *base, int port, const char *method, const char *target)
{
	return through_body(base, port, method, target, "");
}

/* The port a listening socket is bound to. */
static int
bound_port(int fd)
{
	struct sockaddr_in	 sin;
	socklen_t		 len = sizeof sin;

	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	return ntohs(sin.sin_port);
}

/*
 * Requests to one upstream share its connection (HTTP/1.1 keep-alive) one after
 * the other, a prefetch's included; one that upstream closed is not used again,
 * and the next request opens a new one.
 */
static void
test_inject_reuse(void **state)
{
	static const struct httppolicy_scope fetch = { HTTP_API_GIT, repos, 1, 1 };
	const char		*refs = "/o/r.git/info/refs?service=git-upload-pack";
	const char		*pack = "/o/r.git/git-upload-pack";
	struct event_base	*base = event_base_new();
	struct evhttp		*up = evhttp_new(base);
	struct inject_target	 t;
	struct inject		*inj;
	char			 url[64], *cause = NULL, *out;
	int			 lfd, ufd, i;

	(void)state;
	ufd = tcp_listener();
	evutil_make_socket_nonblocking(ufd);
	assert_int_equal(evhttp_accept_socket(up, ufd), 0);
	evhttp_set_gencb(up, upstream_cb, NULL);
	snprintf(url, sizeof url, "http://127.0.0.1:%d", bound_port(ufd));
	memset(&t, 0, sizeof t);
	t.api = HTTP_API_GIT;
	t.upstream = url;
	t.auth = INJECT_AUTH_BASIC;
	t.username = "x-access-token";
	t.scope = &fetch;
	t.secret = secret_cb;
	t.audit = audit_cb;
	lfd = tcp_listener();
	up_n = up_close = 0;
	assert_non_null(inj = inject_new(base, lfd, &t, &cause));
	assert_int_equal(inject_prefetch(inj, refs, &cause), 0);
	for (i = 0; i < 2000 && up_n == 0; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	for (i = 0; i < 50; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(up_n, 1);

	/* The tool's GET is the prefetched answer; its connection carries the next two. */
	out = through(base, bound_port(lfd), "GET", refs);
	assert_non_null(strstr(out, "answer 1"));
	free(out);
	out = through(base, bound_port(lfd), "POST", pack);
	assert_non_null(strstr(out, "answer 2"));
	free(out);
	out = through(base, bound_port(lfd), "POST", pack);
	assert_non_null(strstr(out, "answer 3"));
	free(out);
	assert_int_equal(up_n, 3);
	assert_int_equal(up_ports[1], up_ports[0]);
	assert_int_equal(up_ports[2], up_ports[0]);

	/* Upstream closes after its answer: the next request goes on a new connection. */
	up_close = 1;
	out = through(base, bound_port(lfd), "POST", pack);
	assert_non_null(strstr(out, "answer 4"));
	free(out);
	for (i = 0; i < 50; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	up_close = 0;
	out = through(base, bound_port(lfd), "POST", pack);
	assert_non_null(strstr(out, "HTTP/1.1 200"));
	assert_non_null(strstr(out, "answer 5"));
	free(out);
	assert_int_equal(up_ports[3], up_ports[0]);
	assert_true(up_ports[4] != up_ports[0]);

	/*
	 * Upstream closes a kept connection as a request arrives on it: a GET, and a
	 * fetch's upload-pack POST with its body, go again on a new connection (the tool
	 * sees only the answer); a push (receive-pack) is not sent twice.
	 */
	up_drop = 1;
	out = through(base, bound_port(lfd), "GET", refs);
	assert_non_null(strstr(out, "HTTP/1.1 200"));
	assert_non_null(strstr(out, "answer 7"));
	free(out);
	assert_int_equal(up_n, 7);
	assert_int_equal(up_ports[5], up_ports[4]);	/* the kept one, dropped */
	assert_true(up_ports[6] != up_ports[4]);
	up_drop = 1;
	out = through_body(base, bound_port(lfd), "POST", pack, "0009done\n");
	assert_non_null(strstr(out, "HTTP/1.1 200"));
	assert_non_null(strstr(out, "answer 9"));
	free(out);
	assert_int_equal(up_ports[7], up_ports[6]);
	assert_true(up_ports[8] != up_ports[6]);
	assert_string_equal(up_body, "0009done\n");	/* the body, sent again whole */
	up_drop = 1;
	out = through(base, bound_port(lfd), "POST", "/o/r.git/git-receive-pack");
	assert_non_null(strstr(out, "HTTP/1.1 502"));
	free(out);
	assert_int_equal(up_n, 10);
	assert_int_equal(up_ports[9], up_ports[8]);
	assert_int_equal(last_status, 502);

	inject_free(inj);
	evhttp_free(up);
	event_base_free(base);
}

static void
test_ghinject(void **state)
{
	struct event_base	*base = event_base_new();
	struct ghinject_params	 p;
	struct ghinject		*g;
	struct envbuild		*env = envbuild_new();
	struct sockaddr_un	 sun;
	struct stat		 st;
	char			 dir[] = "/tmp/test_inject.XXXXXX", path[256], buf[512], *cause = NULL;
	char			*out;
	const char		*ph;
	int			 fd;
	ssize_t			 n;

	(void)state;
	assert_non_null(mkdtemp(dir));
	memset(&p, 0, sizeof p);
	p.base = base;
	p.scratch = dir;
	p.uid = getuid();
	p.gid = getgid();
	p.host = "localhost:8443";
	p.repos = repos;
	p.nrepos = 1;
	p.secret = secret_cb;
	p.audit = audit_cb;
	g = ghinject_start(&p, env, &cause);
	assert_null(cause);
	assert_non_null(g);

	/* The placeholder goes to GH_ENTERPRISE_TOKEN for a non-github.com host. */
	ph = envbuild_get(env, "GH_ENTERPRISE_TOKEN");
	assert_non_null(ph);
	assert_int_equal(strncmp(ph, "shimbridge-placeholder-", 23), 0);
	assert_int_equal(strlen(ph), 23 + 32);
	assert_null(envbuild_get(env, "GH_TOKEN"));
	snprintf(path, sizeof path, "%s/.config/gh", dir);
	assert_string_equal(envbuild_get(env, "GH_CONFIG_DIR"), path);

	/* config.yml names the socket; the socket is 0600. */
	snprintf(path, sizeof path, "%s/.config/gh/config.yml", dir);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	snprintf(path, sizeof path, "http_unix_socket: %s/gh.sock\n", dir);
	assert_string_equal(buf, path);
	snprintf(path, sizeof path, "%s/gh.sock", dir);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);

	/* A request for another host is refused with a JSON message and audited. */
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	assert_true(strlen(path) < sizeof sun.sun_path);
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof sun), 0);
	snprintf(buf, sizeof buf, "GET /api/v3/user HTTP/1.1\r\nHost: evil.example\r\n"
	    "Authorization: token %s\r\nConnection: close\r\n\r\n", ph);
	naudit = 0;
	out = exchange(base, fd, buf);
	close(fd);
	assert_int_equal(strncmp(out, "HTTP/1.1 403", 12), 0);
	assert_non_null(strstr(out, "{\"message\":\"shimbridge: this call may only talk to "
	    "localhost:8443, not evil.example\"}"));
	assert_null(strstr(out, "s3cret"));
	free(out);
	assert_int_equal(naudit, 1);
	assert_int_equal(last_status, 403);

	ghinject_free(g);
	assert_int_equal(lstat(path, &st), -1);	/* the socket is gone */
	envbuild_free(env);

	/* A second call in the same dir: config.yml exists, so it fails closed. */
	env = envbuild_new();
	p.host = NULL;
	g = ghinject_start(&p, env, &cause);
	assert_null(g);
	assert_non_null(cause);
	assert_null(envbuild_get(env, "GH_TOKEN"));
	free(cause);
	cause = NULL;
	envbuild_free(env);

	/* github.com: GH_TOKEN; a planted .config symlink is refused. */
	snprintf(path, sizeof path, "rm -rf %s/.config && ln -s /etc %s/.config", dir, dir);
	assert_int_equal(system(path), 0);
	env = envbuild_new();
	g = ghinject_start(&p, env, &cause);
	assert_null(g);
	assert_non_null(cause);
	free(cause);
	cause = NULL;
	envbuild_free(env);
	snprintf(path, sizeof path, "rm -rf %s/.config", dir);
	assert_int_equal(system(path), 0);
	env = envbuild_new();
	g = ghinject_start(&p, env, &cause);
	assert_non_null(g);
	assert_non_null(envbuild_get(env, "GH_TOKEN"));
	assert_null(envbuild_get(env, "GH_ENTERPRISE_TOKEN"));
	ghinject_free(g);
	envbuild_free(env);

	snprintf(path, sizeof path, "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
	event_base_free(base);
}

static void
test_token_var(void **state)
{
	(void)state;
	assert_true(ghinject_token_var("GH_TOKEN"));
	assert_true(ghinject_token_var("GH_ENTERPRISE_TOKEN"));
	assert_true(ghinject_token_var("GITHUB_TOKEN"));
	assert_false(ghinject_token_var("GH_HOST"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inject_targets),
		cmocka_unit_test(test_inject_prefetch),
		cmocka_unit_test(test_inject_reuse),
		cmocka_unit_test(test_ghinject),
		cmocka_unit_test(test_token_var),
	};

	if (sodium_init() == -1)
		return 1;
	inject_memory_init();
	signal(SIGPIPE, SIG_IGN);	/* as the daemon: the upstream that drops writes to a closed socket */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
