/* Unit tests: the op table (ops.c): names, who may ask, handlers and done hooks. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ops.h"

static void
test_ops_find(void **state)
{
	const struct op *o;

	(void)state;
	assert_non_null(o = ops_find("run"));
	assert_string_equal(o->name, "run");
	assert_false(o->admin_only);
	assert_ptr_equal(o->handler, op_run);
	assert_ptr_equal(o->done, op_run_done);	/* stops gh's injector */
	assert_non_null(o = ops_find("git"));
	assert_false(o->admin_only);
	assert_ptr_equal(o->handler, op_git);
	assert_ptr_equal(o->done, op_git_done);
	assert_non_null(o = ops_find("status"));
	assert_true(o->admin_only);
	assert_ptr_equal(o->handler, op_status);
	/* Approval and explain are the operator's (root); list is the sandbox's. */
	assert_non_null(o = ops_find("pending"));
	assert_true(o->admin_only);
	assert_ptr_equal(o->handler, op_pending);
	assert_non_null(o = ops_find("approve"));
	assert_true(o->admin_only);
	assert_ptr_equal(o->handler, op_approve);
	assert_non_null(o = ops_find("deny"));
	assert_true(o->admin_only);
	assert_ptr_equal(o->handler, op_deny);
	assert_non_null(o = ops_find("explain"));
	assert_true(o->admin_only);
	assert_ptr_equal(o->handler, op_explain);
	assert_non_null(o = ops_find("list"));
	assert_false(o->admin_only);
	assert_ptr_equal(o->handler, op_list);
	assert_null(o->done);
}

static void
test_ops_unknown(void **state)
{
	(void)state;
	assert_null(ops_find(""));
	assert_null(ops_find("Run"));
	assert_null(ops_find("run "));
	assert_null(ops_find("runx"));
	assert_null(ops_find("statu"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ops_find),
		cmocka_unit_test(test_ops_unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
