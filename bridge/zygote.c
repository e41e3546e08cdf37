/* Pools of pre-built jails, one per session and tool (see zygote.h). */
#include <sys/queue.h>
#include <sys/types.h>

#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "cgroup.h"
#include "config.h"
#include "jail.h"
#include "log.h"
#include "spawn.h"
#include "util.h"
#include "zygote.h"

#define ZYGOTE_MAX	64	/* limits.jail_pool's bound */
/*
 * Jails are built once no call has ended for this long; 0: as soon as the event
 * loop comes round after a call's end (zygote_scratch_done runs when the call's
 * connection is freed, once its EXIT frame was written). Measured
 * (bench/README.md, "The pool refills"): on a 2-CPU AMD VM a refill at each call's
 * end cost the other processes ~1.2 ms of CPU a call and bought nothing back to
 * back, so it waited for 10 ms of quiet; on a 2-CPU Intel VM (Nov 2026) the wait
 * made every call of a burst build its own jail on its path, 1,755-1,892 µs a call
 * back to back against 1,313-1,433 µs refilling at once, with the daemon's and the
 * shim's CPU per call no higher.
 */
#define ZYGOTE_QUIET_US	0

/* The shape of a (session, tool)'s jails, learned from its calls. */
struct zygote_kind {
	TAILQ_ENTRY(zygote_kind) entry;
	char		*session;
	char		*key;
	char		*shape;		/* canonical form of the jail, scratch excluded */
	char		*root;
	int		 net;		/* JAIL_NET_NEW, JAIL_NET_NEW_LO or JAIL_NET_HOST */
	uid_t		 uid;
	gid_t		 gid;
	size_t		 nbinds;
	char		*bind[JAIL_SPEC_BINDS];
	int		 writable[JAIL_SPEC_BINDS];
	int		 idle;		/* waiting and not reserved */
	int		 broken;	/* the last refill failed: wait for the next call */
};

/* One waiting jail. */
struct zygote_warm {
	TAILQ_ENTRY(zygote_warm) entry;
	struct zygote_kind	*kind;
	struct spawn_jail	 sj;
	char			*scratch;
	int			 reserved;	/* its scratch dir is a call's */
};

struct zygote {
	struct event_base		*base;
	struct event			*ev_refill;
	char				*scratch_dir;
	int				 size;
	TAILQ_HEAD(, zygote_kind)	 kinds;
	TAILQ_HEAD(, zygote_warm)	 warm;
};

static void	zygote_refill(evutil_socket_t, short, void *);

/* The pools of a daemon. */
struct zygote *
zygote_new(struct event_base *base, const char *scratch_dir)
{
	struct zygote *z = xcalloc(1, sizeof *z);

	z->base = base;
	z->scratch_dir = xstrdup(scratch_dir);
	TAILQ_INIT(&z->kinds);
	TAILQ_INIT(&z->warm);
	if ((z->ev_refill = evtimer_new(base, zygote_refill, z)) == NULL)
		fatalx("out of memory setting up the jail pool");
	return z;
}

/* Kill one waiting jail, remove its directory and forget it. */
static void
zygote_warm_drop(struct zygote *z, struct zygote_warm *w)
{
	TAILQ_REMOVE(&z->warm, w, entry);
	if (!w->reserved && w->kind != NULL)
		w->kind->idle--;
	spawn_jail_discard(&w->sj);
	/* A reserved directory belongs to its call, which removes it. */
	if (!w->reserved && spawn_rmtree(w->scratch) != 0)
		log_warnx("cannot remove scratch directory %s", w->scratch);
	free(w->scratch);
	free(w);
}

/* Free a kind (its jails are gone or detached). */
static void
zygote_kind_free(struct zygote_kind *k)
{
	size_t i;

	free(k->session);
	free(k->key);
	free(k->shape);
	free(k->root);
	for (i = 0; i < k->nbinds; i++)
		free(k->bind[i]);
	free(k);
}

/* Empty every pool, forget every shape. */
void
zygote_flush(struct zygote *z)
{
	struct zygote_warm *w;
	struct zygote_kind *k;

	if (z == NULL)
		return;
	while ((w = TAILQ_FIRST(&z->warm)) != NULL)
		zygote_warm_drop(z, w);
	while ((k = TAILQ_FIRST(&z->kinds)) != NULL) {
		TAILQ_REMOVE(&z->kinds, k, entry);
		zygote_kind_free(k);
	}
	evtimer_del(z->ev_refill);
}

/* Tear everything down. */
void
zygote_free(struct zygote *z)
{
	if (z == NULL)
		return;
	zygote_flush(z);
	event_free(z->ev_refill);
	free(z->scratch_dir);
	free(z);
}

/* Jails to keep ready per session and tool. */
void
zygote_set_size(struct zygote *z, int size)
{
	struct zygote_warm *w, *next;

	z->size = size < 0 ? 0 : size > ZYGOTE_MAX ? ZYGOTE_MAX : size;
	for (w = TAILQ_FIRST(&z->warm); w != NULL; w = next) {
		next = TAILQ_NEXT(w, entry);
		if (!w->reserved && w->kind->idle > z->size)
			zygote_warm_drop(z, w);
	}
}

/* The kind of (session, key), or NULL. */
static struct zygote_kind *
zygote_kind_find(struct zygote *z, const char *session, const char *key)
{
	struct zygote_kind *k;

	TAILQ_FOREACH(k, &z->kinds, entry) {
		if (strcmp(k->session, session) == 0 && strcmp(k->key, key) == 0)
			return k;
	}
	return NULL;
}

/*
 * The canonical form of a jail without its scratch dir (tmp), or NULL if it
 * cannot be pooled: it joins a namespace the daemon made for the call, or has no
 * scratch dir.
 */
static char *
zygote_shape(const struct jail *j, uid_t uid, gid_t gid)
{
	char *s, *t;
	size_t i;

	if (j->tmp == NULL || (j->netns_fd != JAIL_NET_NEW && j->netns_fd != JAIL_NET_HOST &&
	    j->netns_fd != JAIL_NET_NEW_LO))
		return NULL;
	xasprintf(&s, "%d:%u:%u:%s", j->netns_fd, (unsigned)uid, (unsigned)gid, j->root);
	for (i = 0; i < j->nbinds; i++) {
		if (strcmp(j->binds[i].path, j->tmp) == 0)
			continue;
		/* NUL cannot be in a path: the separator keeps the form unambiguous. */
		xasprintf(&t, "%s%c%d%s", s, '\n', j->binds[i].writable, j->binds[i].path);
		free(s);
		s = t;
	}
	return s;
}

/* A reserved scratch dir for a call: a waiting jail's, or a fresh one. */
char *
zygote_scratch(struct zygote *z, const struct session *s, const char *key, char **cause)
{
	struct zygote_kind *k = zygote_kind_find(z, s->name, key);
	struct zygote_warm *w;

	if (k != NULL && k->idle > 0) {
		TAILQ_FOREACH(w, &z->warm, entry) {
			if (w->kind != k || w->reserved)
				continue;
			w->reserved = 1;
			k->idle--;
			return xstrdup(w->scratch);
		}
	}
	return spawn_scratch_create(z->scratch_dir, s->runner_uid, s->runner_gid, cause);
}

/* Remember the shape of (session, key) from a call's jail. */
static void
zygote_learn(struct zygote *z, const struct session *s, const char *key, const struct jail *j,
    char *shape)
{
	struct zygote_kind *k = zygote_kind_find(z, s->name, key);
	struct zygote_warm *w, *next;
	size_t i;

	if (k != NULL && strcmp(k->shape, shape) == 0) {
		free(shape);
		return;
	}
	if (k != NULL) {
		/* The shape changed: its jails are of no use now. */
		for (w = TAILQ_FIRST(&z->warm); w != NULL; w = next) {
			next = TAILQ_NEXT(w, entry);
			if (w->kind == k && !w->reserved)
				zygote_warm_drop(z, w);
			else if (w->kind == k)
				w->kind = NULL;
		}
		TAILQ_REMOVE(&z->kinds, k, entry);
		zygote_kind_free(k);
	}
	k = xcalloc(1, sizeof *k);
	k->session = xstrdup(s->name);
	k->key = xstrdup(key);
	k->shape = shape;	/* transferred */
	k->root = xstrdup(j->root);
	k->net = j->netns_fd;
	k->uid = s->runner_uid;
	k->gid = s->runner_gid;
	for (i = 0; i < j->nbinds; i++) {
		if (strcmp(j->binds[i].path, j->tmp) == 0)
			continue;
		k->bind[k->nbinds] = xstrdup(j->binds[i].path);
		k->writable[k->nbinds++] = j->binds[i].writable;
	}
	TAILQ_INSERT_TAIL(&z->kinds, k, entry);
}

/* Build missing jails ZYGOTE_QUIET_US from now, unless a call ends before. */
static void
zygote_refill_later(struct zygote *z)
{
	struct timeval quiet = { 0, ZYGOTE_QUIET_US };

	evtimer_add(z->ev_refill, &quiet);	/* a pending one moves */
}

/* Take the jail reserved for j's scratch dir if it has j's shape; learn the shape. */
int
zygote_claim(struct zygote *z, const struct session *s, const char *key, const struct jail *j,
    struct spawn_jail *out)
{
	struct zygote_warm *w;
	char *shape = zygote_shape(j, s->runner_uid, s->runner_gid);
	int found = 0;

	out->pid = -1;
	out->ctl = -1;
	out->netns = -1;
	TAILQ_FOREACH(w, &z->warm, entry) {
		if (!w->reserved || j->tmp == NULL || strcmp(w->scratch, j->tmp) != 0)
			continue;
		if (shape != NULL && w->kind != NULL && strcmp(w->kind->shape, shape) == 0) {
			*out = w->sj;
			w->sj.pid = -1;
			w->sj.ctl = -1;
			w->sj.netns = -1;
			found = 1;
		}
		zygote_warm_drop(z, w);
		break;
	}
	if (shape == NULL || z->size == 0) {
		free(shape);
		return found;
	}
	zygote_learn(z, s, key, j, shape);	/* shape transferred */
	zygote_kind_find(z, s->name, key)->broken = 0;
	/*
	 * Refill once the call is over (zygote_scratch_done), not while it runs: on
	 * a busy machine building a jail competes with the call for the CPU. Only an
	 * empty pool is refilled without waiting for the call's end.
	 */
	if (zygote_kind_find(z, s->name, key)->idle == 0)
		zygote_refill_later(z);
	return found;
}

/* A call ended: its unused reserved jail goes, and so does its directory. */
void
zygote_scratch_done(struct zygote *z, const char *scratch)
{
	struct zygote_warm *w;

	TAILQ_FOREACH(w, &z->warm, entry) {
		if (w->reserved && strcmp(w->scratch, scratch) == 0) {
			zygote_warm_drop(z, w);
			break;
		}
	}
	if (spawn_rmtree(scratch) != 0)
		log_warnx("cannot remove scratch directory %s", scratch);
	if (z->size > 0)
		zygote_refill_later(z);
}

/* Build one jail for kind k; 0, or -1 (logged). */
static int
zygote_build(struct zygote *z, struct zygote_kind *k)
{
	struct jail_spec js;
	struct zygote_warm *w;
	char *scratch, *cause = NULL;
	size_t i;
	int cgfd, rc;

	if ((scratch = spawn_scratch_create(z->scratch_dir, k->uid, k->gid, &cause)) == NULL)
		goto fail;
	jail_spec_init(&js, k->root, k->net, scratch);
	/* The same binds in the same order as the request's own spec (scratch first). */
	jail_spec_bind(&js, scratch, 1);
	for (i = 0; i < k->nbinds; i++)
		(void)jail_spec_bind(&js, k->bind[i], k->writable[i]);
	/* In its session's cgroup from the start, like every call's child (cgroup.h). */
	if ((cgfd = cgroup_session_fd(k->session, &cause)) < 0) {
		(void)spawn_rmtree(scratch);
		free(scratch);
		goto fail;
	}
	w = xcalloc(1, sizeof *w);
	rc = spawn_jail_start(&js.j, k->uid, k->gid, cgfd, &w->sj, &cause);
	if (cgfd > 2)
		close(cgfd);
	if (rc != 0) {
		free(w);
		(void)spawn_rmtree(scratch);
		free(scratch);
		goto fail;
	}
	w->kind = k;
	w->scratch = scratch;
	k->idle++;
	TAILQ_INSERT_TAIL(&z->warm, w, entry);
	return 0;
fail:
	log_warnx("cannot build a jail in advance for %s of session %s: %s", k->key,
	    k->session, cause);
	free(cause);
	k->broken = 1;
	return -1;
}

/*
 * Deferred: build one missing jail, then come back for the next one, so the
 * loop serves requests in between.
 */
static void
zygote_refill(evutil_socket_t fd, short what, void *arg)
{
	struct timeval now = { 0, 0 };
	struct zygote *z = arg;
	struct zygote_kind *k;

	(void)fd;
	(void)what;
	TAILQ_FOREACH(k, &z->kinds, entry) {
		if (k->broken || k->idle >= z->size)
			continue;
		if (zygote_build(z, k) == 0)
			evtimer_add(z->ev_refill, &now);
		return;
	}
}

/*
 * A child was reaped: if it was a waiting init, forget it. One that dies before
 * any call took it (killed, or its jail could not be built) stops the refills of
 * its kind until the next call, so a jail that cannot be built is not retried in
 * a loop.
 */
int
zygote_reaped(struct zygote *z, pid_t pid)
{
	struct zygote_warm *w;

	if (z == NULL)
		return 0;
	TAILQ_FOREACH(w, &z->warm, entry) {
		if (w->sj.pid != pid)
			continue;
		w->sj.pid = -1;		/* gone: nothing to kill */
		if (!w->reserved && w->kind != NULL)
			w->kind->broken = 1;
		if (!w->reserved)
			zygote_warm_drop(z, w);
		return 1;
	}
	return 0;
}

/* Whether pid is a waiting (or reserved) init of the pools. */
int
zygote_is_waiting(const struct zygote *z, pid_t pid)
{
	const struct zygote_warm *w;

	if (z == NULL || pid <= 0)
		return 0;
	TAILQ_FOREACH(w, &z->warm, entry) {
		if (w->sj.pid == pid)
			return 1;
	}
	return 0;
}

/* Waiting jails. */
size_t
zygote_count(const struct zygote *z)
{
	const struct zygote_warm *w;
	size_t n = 0;

	if (z == NULL)
		return 0;
	TAILQ_FOREACH(w, &z->warm, entry)
		n++;
	return n;
}
