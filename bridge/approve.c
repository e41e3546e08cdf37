/* The table of calls waiting for approval and of timed approvals (see approve.h). */
#include <sys/queue.h>

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "approve.h"
#include "util.h"

/* One "--for" approval. */
struct approve_grant {
	TAILQ_ENTRY(approve_grant) entry;
	char		*session;
	char		*key;
	time_t		 until;
};

struct approve {
	TAILQ_HEAD(, approve_entry)	 pending;
	TAILQ_HEAD(, approve_grant)	 grants;
	size_t				 npending;
	size_t				 ngrants;
	uint64_t			 next_id;
};

/* A new, empty table. */
struct approve *
approve_new(void)
{
	struct approve *a = xcalloc(1, sizeof *a);

	TAILQ_INIT(&a->pending);
	TAILQ_INIT(&a->grants);
	return a;
}

/* Free one grant. */
static void
approve_grant_free(struct approve *a, struct approve_grant *g)
{
	TAILQ_REMOVE(&a->grants, g, entry);
	a->ngrants--;
	free(g->session);
	free(g->key);
	free(g);
}

/* Free the table with everything in it. */
void
approve_free(struct approve *a)
{
	if (a == NULL)
		return;
	while (!TAILQ_EMPTY(&a->pending))
		approve_remove(a, TAILQ_FIRST(&a->pending));
	while (!TAILQ_EMPTY(&a->grants))
		approve_grant_free(a, TAILQ_FIRST(&a->grants));
	free(a);
}

/* Add a waiting call. */
struct approve_entry *
approve_add(struct approve *a, const char *session, const char *command, const char *key,
    const char *rule, time_t now, int timeout, void *owner)
{
	struct approve_entry *e;
	size_t mine = 0;

	if (a->npending >= APPROVE_PENDING_MAX)
		return NULL;
	TAILQ_FOREACH(e, &a->pending, entry) {
		if (strcmp(e->session, session) == 0 && ++mine >= APPROVE_SESSION_MAX)
			return NULL;	/* one session must not fill the table for the others */
	}
	e = xcalloc(1, sizeof *e);
	e->id = ++a->next_id;
	e->session = xstrdup(session);
	if (strlen(command) > APPROVE_COMMAND_MAX)
		xasprintf(&e->command, "%.*s...", APPROVE_COMMAND_MAX - 3, command);
	else
		e->command = xstrdup(command);
	e->key = xstrdup(key);
	e->rule = xstrdup(rule);
	e->created = now;
	e->deadline = now + timeout;
	e->owner = owner;
	TAILQ_INSERT_TAIL(&a->pending, e, entry);
	a->npending++;
	return e;
}

/* Look a waiting call up by id. */
struct approve_entry *
approve_find(struct approve *a, uint64_t id)
{
	struct approve_entry *e;

	TAILQ_FOREACH(e, &a->pending, entry) {
		if (e->id == id)
			return e;
	}
	return NULL;
}

/* The oldest waiting call. */
struct approve_entry *
approve_first(struct approve *a)
{
	return TAILQ_FIRST(&a->pending);
}

/* The next waiting call. */
struct approve_entry *
approve_next(struct approve_entry *e)
{
	return TAILQ_NEXT(e, entry);
}

/* Take an entry out and free it. */
void
approve_remove(struct approve *a, struct approve_entry *e)
{
	TAILQ_REMOVE(&a->pending, e, entry);
	a->npending--;
	free(e->session);
	free(e->command);
	free(e->key);
	free(e->rule);
	free(e);
}

/* How many calls wait. */
size_t
approve_count(const struct approve *a)
{
	return a->npending;
}

/* Drop expired grants. */
static void
approve_expire(struct approve *a, time_t now)
{
	struct approve_grant *g, *next;

	for (g = TAILQ_FIRST(&a->grants); g != NULL; g = next) {
		next = TAILQ_NEXT(g, entry);
		if (g->until <= now)
			approve_grant_free(a, g);
	}
}

/* The live grant for a call, or NULL. */
static struct approve_grant *
approve_grant_find(struct approve *a, const char *session, const char *key)
{
	struct approve_grant *g;

	TAILQ_FOREACH(g, &a->grants, entry) {
		if (strcmp(g->session, session) == 0 && strcmp(g->key, key) == 0)
			return g;
	}
	return NULL;
}

/* Approve identical calls until a time. */
int
approve_grant(struct approve *a, const char *session, const char *key, time_t now,
    time_t until)
{
	struct approve_grant *g;

	approve_expire(a, now);
	if ((g = approve_grant_find(a, session, key)) != NULL) {
		g->until = until;
		return 0;
	}
	if (a->ngrants >= APPROVE_GRANTS_MAX)
		return -1;
	g = xcalloc(1, sizeof *g);
	g->session = xstrdup(session);
	g->key = xstrdup(key);
	g->until = until;
	TAILQ_INSERT_TAIL(&a->grants, g, entry);
	a->ngrants++;
	return 0;
}

/* Whether a live grant covers a call. */
int
approve_granted(struct approve *a, const char *session, const char *key, time_t now)
{
	approve_expire(a, now);
	return approve_grant_find(a, session, key) != NULL;
}

/* Live grants. */
size_t
approve_grants(struct approve *a, time_t now)
{
	approve_expire(a, now);
	return a->ngrants;
}

/* Parse a --for duration. */
int
approve_parse_duration(const char *s, long *secs, const char **why)
{
	unsigned long long v = 0;
	long unit = 1;
	size_t i;

	*why = "expected a duration such as 90s, 10m, 2h or 1d (at most 7d)";
	if (s == NULL || !isdigit((unsigned char)s[0]))
		return -1;
	for (i = 0; isdigit((unsigned char)s[i]); i++) {
		v = v * 10 + (unsigned long long)(s[i] - '0');
		if (v > APPROVE_FOR_MAX)
			return -1;
	}
	switch (s[i]) {
	case '\0':
		break;
	case 's':
		break;
	case 'm':
		unit = 60;
		break;
	case 'h':
		unit = 3600;
		break;
	case 'd':
		unit = 86400;
		break;
	default:
		return -1;
	}
	if (s[i] != '\0' && s[i + 1] != '\0')
		return -1;
	if (v == 0 || v * (unsigned long long)unit > APPROVE_FOR_MAX)
		return -1;
	*secs = (long)v * unit;
	return 0;
}
