/* Unit tests: frame header codec, protocol tables, the shim's JSON writer/reader. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jsonw.h"
#include "proto.h"

static void
test_header_roundtrip(void **state)
{
	unsigned char hdr[FRAME_HDR];
	const char *cause = NULL;
	uint8_t type;
	uint32_t len;

	(void)state;
	frame_put_header(hdr, FRAME_STDOUT, 0x1234);
	assert_int_equal(hdr[0], 0);
	assert_int_equal(hdr[1], 0);
	assert_int_equal(hdr[2], 0x12);
	assert_int_equal(hdr[3], 0x34);
	assert_int_equal(hdr[4], FRAME_STDOUT);
	assert_int_equal(frame_parse_header(hdr, &type, &len, &cause), 0);
	assert_int_equal(type, FRAME_STDOUT);
	assert_int_equal(len, 0x1234);
}

static void
test_header_caps(void **state)
{
	unsigned char hdr[FRAME_HDR];
	const char *cause = NULL;
	uint8_t type;
	uint32_t len;

	(void)state;
	frame_put_header(hdr, FRAME_STDIN, FRAME_DATA_MAX);
	assert_int_equal(frame_parse_header(hdr, &type, &len, &cause), 0);
	frame_put_header(hdr, FRAME_STDIN, FRAME_DATA_MAX + 1);
	assert_int_equal(frame_parse_header(hdr, &type, &len, &cause), -1);
	assert_string_equal(cause, "frame too large");
	frame_put_header(hdr, FRAME_REQUEST, FRAME_CTRL_MAX + 1);
	assert_int_equal(frame_parse_header(hdr, &type, &len, &cause), -1);
	frame_put_header(hdr, FRAME_HELLO, FRAME_SMALL_MAX + 1);
	assert_int_equal(frame_parse_header(hdr, &type, &len, &cause), -1);
	frame_put_header(hdr, FRAME_SIGNAL, 0xffffffffu);
	assert_int_equal(frame_parse_header(hdr, &type, &len, &cause), -1);
	/* File requests: a path, data chunks, a small JSON end. */
	frame_put_header(hdr, FRAME_FILE_REQ, REQ_MAX_PATH);
	assert_int_equal(frame_parse_header(hdr, &type, &len, &cause), 0);
	frame_put_header(hdr, FRAME_FILE_REQ, REQ_MAX_PATH + 1);
	assert_int_equal(frame_parse_header(hdr, &type, &len, &cause), -1);
	frame_put_header(hdr, FRAME_FILE_DATA, FRAME_DATA_MAX);
	assert_int_equal(frame_parse_header(hdr, &type, &len, &cause), 0);
	frame_put_header(hdr, FRAME_FILE_DATA, FRAME_DATA_MAX + 1);
	assert_int_equal(frame_parse_header(hdr, &type, &len, &cause), -1);
	frame_put_header(hdr, FRAME_FILE_END, FRAME_SMALL_MAX + 1);
	assert_int_equal(frame_parse_header(hdr, &type, &len, &cause), -1);
	frame_put_header(hdr, 0x7f, 1);
	assert_int_equal(frame_parse_header(hdr, &type, &len, &cause), -1);
	assert_string_equal(cause, "unknown frame type");
	frame_put_header(hdr, 0, 0);
	assert_int_equal(frame_parse_header(hdr, &type, &len, &cause), -1);
}

static void
test_error_exits(void **state)
{
	(void)state;
	assert_int_equal(proto_error_exit(ERR_DENIED), EXIT_DENIED);
	assert_int_equal(proto_error_exit(ERR_UNKNOWN_TOOL), EXIT_UNKNOWN_TOOL);
	assert_int_equal(proto_error_exit(ERR_TIMEOUT), EXIT_TIMEOUT);
	assert_int_equal(proto_error_exit(ERR_BUSY), EXIT_BUSY);
	assert_int_equal(proto_error_exit("no-such-code"), EXIT_PROTOCOL);
}

static void
test_signals(void **state)
{
	(void)state;
	assert_string_equal(proto_signame(SIGTERM), "TERM");
	assert_string_equal(proto_signame(SIGSEGV), "SEGV");
	assert_int_equal(proto_signum("INT"), SIGINT);
	assert_int_equal(proto_signum("HUP"), SIGHUP);
	assert_int_equal(proto_signum("NOPE"), -1);
	assert_null(proto_signame(0));
}

static void
test_env_allowlist(void **state)
{
	(void)state;
	assert_true(proto_env_allowed("TERM", 4));
	assert_true(proto_env_allowed("LC_ALL", 6));
	assert_true(proto_env_allowed("LC_CTYPE", 8));
	assert_false(proto_env_allowed("LC_", 3));
	assert_false(proto_env_allowed("LC_all", 6));
	assert_false(proto_env_allowed("PATH", 4));
	assert_false(proto_env_allowed("LD_PRELOAD", 10));
	assert_false(proto_env_allowed("GIT_DIR", 7));
	assert_false(proto_env_allowed("GH_TOKEN", 8));
	assert_false(proto_env_allowed("TERMX", 5));
	assert_false(proto_env_allowed("TER", 3));
}

/* The writer's output must parse with jansson to the same values, whatever the bytes. */
static void
test_jsonw_escapes(void **state)
{
	const char tricky[] = "quote\" back\\slash \x01\x1f\x7f tab\t nl\n é";
	struct jbuf jb;
	json_t *j;

	(void)state;
	jw_init(&jb);
	jw_obj_open(&jb);
	jw_key(&jb, "s");
	jw_cstr(&jb, tricky);
	jw_key(&jb, "a");
	jw_arr_open(&jb);
	jw_cstr(&jb, "x");
	jw_int(&jb, -42);
	jw_bool(&jb, 1);
	jw_arr_close(&jb);
	jw_key(&jb, "o");
	jw_obj_open(&jb);
	jw_obj_close(&jb);
	jw_obj_close(&jb);
	j = json_loadb(jb.buf, jb.len, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "s")), tricky);
	assert_int_equal(json_array_size(json_object_get(j, "a")), 3);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(j, "a"), 1)), -42);
	json_decref(j);
	jw_free(&jb);
}

static void
test_jr_get(void **state)
{
	const char *doc = " { \"code\" : \"denied\", \"n\": [1, {\"code\": \"inner\"}],"
	    " \"message\": \"a\\\"b\\u00e9\\n\", \"x\": -17, \"t\": true } ";
	char *s = NULL;
	long long v = 0;

	(void)state;
	assert_int_equal(jr_get_str(doc, strlen(doc), "code", &s), 1);
	assert_string_equal(s, "denied");
	free(s);
	assert_int_equal(jr_get_str(doc, strlen(doc), "message", &s), 1);
	assert_string_equal(s, "a\"b\xc3\xa9\n");
	free(s);
	assert_int_equal(jr_get_int(doc, strlen(doc), "x", &v), 1);
	assert_int_equal(v, -17);
	assert_int_equal(jr_get_str(doc, strlen(doc), "missing", &s), 0);
	assert_int_equal(jr_get_str(doc, strlen(doc), "x", &s), 0);	/* not a string */
	assert_int_equal(jr_get_int(doc, strlen(doc), "code", &v), 0);	/* not an integer */
}

static void
test_jr_malformed(void **state)
{
	static const char *bad[] = {
		"", "[]", "{", "{\"a\"", "{\"a\":}", "{\"a\":\"x}", "{\"a\":\"\\u0000\"}",
		"{\"a\":\"\\q\"}", "{\"a\" \"b\"}", "{\"a\":1 \"b\":2}", "{\"a\":\"\x01\"}",
		"{\"z\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]], \"a\":1}",
	};
	char *s = NULL;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(jr_get_str(bad[i], strlen(bad[i]), "a", &s), -1);
		assert_null(s);
	}
	/* Bounded by length, not NUL: a truncated buffer must not be read past. */
	assert_int_equal(jr_get_str("{\"a\":\"xyz\"}", 8, "a", &s), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header_roundtrip),
		cmocka_unit_test(test_header_caps),
		cmocka_unit_test(test_error_exits),
		cmocka_unit_test(test_signals),
		cmocka_unit_test(test_env_allowlist),
		cmocka_unit_test(test_jsonw_escapes),
		cmocka_unit_test(test_jr_get),
		cmocka_unit_test(test_jr_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
