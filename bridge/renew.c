/* Background renewals of command secret sources (see renew.h). */
#include <sys/queue.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "config.h"
#include "ghmint.h"
#include "job.h"
#include "keyring.h"
#include "log.h"
#include "renew.h"
#include "secret.h"
#include "spawn.h"
#include "util.h"

#define RENEW_MAX	(64 * 1024)

/* One background run of a command source. */
struct renew {
	TAILQ_ENTRY(renew)	 entry;
	struct keyring		*kr;
	char			*session;	/* the key, looked up again at the end */
	char			*name;
	struct config		*cfg;		/* reference, for kill_grace */
	struct job		*job;
	unsigned char		*buf;		/* guarded memory */
	size_t			 len;
	char			 err[256];	/* the start of stderr, for the message */
	size_t			 elen;
	char			*why;		/* set when the bridge stopped it */
	time_t			 started;
	int			 timeout;	/* seconds */
	int			 stopping;	/* renew_stop_all finishes it itself */
};

static TAILQ_HEAD(renew_list, renew) renew_all = TAILQ_HEAD_INITIALIZER(renew_all);

/* Finish a run once its program is reaped and its output read. */
static void
renew_finish(struct renew *r)
{
	int status = job_status(r->job);
	char *why = r->why;
	struct key *k;

	r->err[r->elen] = '\0';
	r->err[strcspn(r->err, "\n")] = '\0';
	if (why == NULL && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
		xasprintf(&why, "failed (status %d)%s%.200s", WIFEXITED(status) ?
		    WEXITSTATUS(status) : 128 + WTERMSIG(status), r->err[0] ? ": " : "",
		    r->err);
	/* A reload that changed or removed the source made this run moot. */
	k = keyring_find(r->kr, r->session, r->name);
	if (k == NULL || !k->val.refreshing)
		log_debug("secret %s: renewal result dropped (reconfigured)", r->name);
	else {
		secret_command_done(k->src, &k->val, r->buf, r->len, status, why);
		k->val.refreshing = 0;
		log_debug("secret %s: renewal done (%s)", r->name, k->val.error != NULL ?
		    k->val.error : "ok");
		if (k->val.error != NULL)
			log_warnx("%s", k->val.error);
		else
			keyring_changed(r->kr);
	}
	TAILQ_REMOVE(&renew_all, r, entry);
	job_free(r->job);
	sodium_free(r->buf);
	config_unref(r->cfg);
	free(r->session);
	free(r->name);
	free(why);
	free(r);
}

/* Job callback: the program printed something. */
static void
renew_output(struct job *j, enum job_stream s, const unsigned char *buf, size_t n,
    void *arg)
{
	struct renew *r = arg;
	size_t take;

	if (s == JOB_ERR) {
		take = sizeof r->err - 1 - r->elen;
		take = n < take ? n : take;
		memcpy(r->err + r->elen, buf, take);
		r->elen += take;
		return;
	}
	take = RENEW_MAX - r->len;
	take = n < take ? n : take;
	memcpy(r->buf + r->len, buf, take);
	r->len += take;
	if (r->len >= RENEW_MAX) {
		if (r->why == NULL)
			r->why = xstrdup("printed too much (64 KiB at most)");
		job_kill(j, SIGKILL);
		job_close_output(j, JOB_OUT);
	}
}

/* Job callback: reaped, or reaped and drained. */
static void
renew_state(struct job *j, void *arg)
{
	struct renew *r = arg;

	if (job_state(j) == JOB_CLOSED && !r->stopping)
		renew_finish(r);
}

static const struct job_cb renew_cb = { renew_output, NULL, NULL, renew_state };

/* Start a background run of a key's command source. */
static void
renew_start(struct event_base *base, struct keyring *kr, struct config *cfg, struct key *k)
{
	struct renew *r;
	struct child ch;
	char *cause = NULL;

	if (secret_command_spawn(k->src, cfg, &ch, &cause) != 0) {
		secret_command_done(k->src, &k->val, NULL, 0, 0, cause);
		log_warnx("%s", k->val.error != NULL ? k->val.error : cause);
		free(cause);
		return;
	}
	r = xcalloc(1, sizeof *r);
	r->kr = kr;
	r->session = k->session != NULL ? xstrdup(k->session) : NULL;
	r->name = xstrdup(k->name);
	r->cfg = config_ref(cfg);
	r->started = time(NULL);
	r->timeout = k->src->timeout;
	if ((r->buf = sodium_malloc(RENEW_MAX)) == NULL)
		fatalx("out of memory starting a secret refresh");
	k->val.refreshing = 1;
	TAILQ_INSERT_TAIL(&renew_all, r, entry);
	r->job = job_new(base, &ch, &renew_cb, r);
	log_debug("secret %s: renewing in the background (pid %ld)", k->name,
	    (long)job_pid(r->job));
}

/* Start due renewals; stop runs past their timeout or whose pipes outlive them. */
void
renew_sweep(struct event_base *base, struct keyring *kr, struct config *cfg)
{
	struct renew *r, *next;
	time_t now = time(NULL);
	size_t i;

	for (r = TAILQ_FIRST(&renew_all); r != NULL; r = next) {
		next = TAILQ_NEXT(r, entry);
		if (job_state(r->job) == JOB_RUNNING && r->why == NULL &&
		    now - r->started > r->timeout) {
			xasprintf(&r->why, "did not finish within %d seconds", r->timeout);
			job_kill(r->job, SIGKILL);
		} else if (job_state(r->job) == JOB_DEAD &&
		    now - job_reaped_at(r->job) > r->cfg->kill_grace + 2 &&
		    !job_output_pending(r->job))
			job_close_output(r->job, -1);	/* may finish r */
	}
	for (i = 0; i < keyring_count(kr); i++) {
		struct key *k = keyring_key(kr, i);

		if (secret_due(k->src, &k->val))
			renew_start(base, kr, cfg, k);
	}
	/* GitHub App tokens: first mints, refreshes, revocations (ghmint.c). */
	ghmint_sweep(base, kr, cfg);
}

/* Kill, reap and finish every run. */
void
renew_stop_all(void)
{
	struct renew *r;

	while ((r = TAILQ_FIRST(&renew_all)) != NULL) {
		r->stopping = 1;
		job_kill(r->job, SIGKILL);
		job_wait(r->job);
		job_close_output(r->job, -1);
		free(r->why);
		r->why = xstrdup("stopped: the bridge is stopping");
		renew_finish(r);
	}
}
