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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
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
		cmocka_unit_test(test_ghinject),
		cmocka_unit_test(test_token_var),
	};

	if (sodium_init() == -1)
		return 1;
	inject_memory_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
