/* The table of ops (see ops.h). */
#include <stddef.h>
#include <string.h>

#include "ops.h"

static const struct op ops_table[] = {
	{ "run",	0,	op_run,		op_run_done },
	{ "git",	0,	op_git,		op_git_done },
	{ "status",	1,	op_status,	NULL },
	{ "pending",	1,	op_pending,	NULL },
	{ "approve",	1,	op_approve,	NULL },
	{ "deny",	1,	op_deny,	NULL },
	{ "explain",	1,	op_explain,	NULL },
	{ "list",	0,	op_list,	NULL },
};

/* Look an op up by name. */
const struct op *
ops_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof ops_table / sizeof ops_table[0]; i++) {
		if (strcmp(ops_table[i].name, name) == 0)
			return &ops_table[i];
	}
	return NULL;
}
