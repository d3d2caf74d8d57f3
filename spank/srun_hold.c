/* srun_hold.c - srun (local context): a decision that needs the probe is made after the
 * launch. The step's tasks wait in task_init on the hold channel (lib/core/hold.h) while a
 * thread of srun probes, applies the decision and answers them.
 *
 * Why not probe here, before returning: srun creates the step, and with it the step's
 * credential, before slurm_spank_local_user_init, and slurmd refuses a credential older than
 * cred_expire (120 s by default). A probe of minutes between the two made every real job
 * fail with "Job credential expired", in every context srun runs in. Launched at once, the
 * step uses its credential while it is fresh, and nothing depends on how long probing takes
 * (only probe_timeout bounds it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <slurm/slurm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "srun_hold.h"

#include "clock.h"
#include "error.h"
#include "probe_step.h"
#include "srun_policy.h"
#include "srun_cache.h"
#include "srun_gpus.h"
#include "subprocess.h"

#define SERVE_S 300.0   /* after the decision, for the tasks still starting to ask */
#define GATHER_S 300.0  /* after the decision, for tasks that have not said hello yet (within
			 * the 10 minutes of slack of ab_hold_wait_s) */
#define LOST_SETTLE_S 3.0 /* after Slurm said the job lost a node, for a held task to be heard gone */

struct ab_deferred {
	volatile sig_atomic_t stopping; /* srun is ending: stop probing, stop serving */
	volatile sig_atomic_t halt;     /* stop probing: srun is ending, or a task is gone */
	volatile sig_atomic_t ctrl_c;   /* the user's Ctrl-C reached srun's process group */
	volatile sig_atomic_t sigterm;  /* so did a SIGTERM: a batch job's time limit, scancel */
	bool ended_early; /* srun ended before the decision: its tasks never ran the command */
	struct ab_proc sentinel;        /* the process that hears it (ctrl_c_watch) */
	pthread_t watcher;
	struct ab_plan *pl;
	struct ab_cache cache; /* the entry is pl->entry */
	struct ab_hold_server server;
	char **env; /* srun's environment, copied before the launch changes it */
	pthread_t thread;
};

/* SrunPortRange from the configuration srun itself read (libslurm's slurm_conf, laid out as
 * the slurm.h this plugin is built against says): a site that filters the traffic from its
 * compute nodes to srun's host opens that range. */
static void srun_port_range(unsigned *lo, unsigned *hi)
{
	const slurm_conf_t *conf = dlsym(RTLD_DEFAULT, "slurm_conf");

	*lo = *hi = 0;
	if (conf && conf->srun_port_range && conf->srun_port_range[0])
		*lo = conf->srun_port_range[0], *hi = conf->srun_port_range[1];
}

static char **copy_env(void)
{
	extern char **environ;
	size_t n = 0;
	char **env;

	while (environ[n])
		n++;
	if (!(env = calloc(n + 1, sizeof(*env))))
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(env[i] = strdup(environ[i]))) {
			for (size_t j = 0; j < i; j++)
				free(env[j]);
			free(env);
			return NULL;
		}
	return env;
}

static void deferred_free(struct ab_deferred *d)
{
	for (size_t i = 0; d->env && d->env[i]; i++)
		free(d->env[i]);
	free(d->env);
	ab_hold_close(&d->server);
	ab_cache_close(&d->cache);
	free(d->pl);
	free(d);
}

static int probe(struct ab_deferred *d, struct ab_result *res, long *eval_batch, char **json,
		 char *err, size_t errlen)
{
	struct ab_plan *pl = d->pl;
	struct ab_result eval = {0};
	int rc;

	if ((rc = ab_probe_run(&pl->job, "train", &d->halt, res, json, err, errlen)) < 0)
		return rc;
	if (pl->ctx->req.eval) {
		struct ab_probe_job ej = pl->job;

		ej.key = pl->keys.eval;
		ej.global_batch = 0;
		ej.warm_batch = 0; /* the cached decision is the train batch's */
		ej.max_batch = 0;  /* a real run's cap is the train batch's too */
		/* the run evaluates beside training at the batch just chosen (its optimizer
		 * state, an evaluation inside training): the eval trials train at it too, so the
		 * pair that runs is the pair measured */
		ej.pin_key = pl->keys.micro;
		ej.pin_batch = res->batch;
		if ((rc = ab_probe_run(&ej, "eval", &d->halt, &eval, NULL, err, errlen)) < 0)
			return rc;
		/* the step's report and the cache entry say the eval batch and its probe's cost */
		*json = ab_result_with_eval_probe(*json, &eval);
		res->eval_trials = eval.trials;
		res->eval_elapsed_s = eval.elapsed_s;
	}
	*eval_batch = eval.batch;
	return 0;
}

/* Between the probe's polls: the tasks' hellos, and whether one of them is gone (its node
 * died, or it was killed): probing for a step that lost a task is stopped at once. */
static void gather(void *arg)
{
	struct ab_deferred *d = arg;

	ab_hold_gather(&d->server);
	if (d->server.nlost)
		d->halt = 1;
}

/* ---- a Ctrl-C while probing -------------------------------------------------------
 * A Ctrl-C reaches srun's process group: srun, which only prints the step's status on the
 * first (its tasks wait in task_init), and the srun of the probe's step of the moment, which
 * cancels it (--quit-on-interrupt). Between two such steps (the GPU models' measurements, the
 * probe, the eval probe) there is none to hear it, and a Ctrl-C the step took for a failure
 * launched the tasks with the original settings. A child of srun in its process group, with
 * SIGINT's default action, hears it whenever it comes: its end by SIGINT stops the probing. */

/* srun's descriptors closed: a copy of a socket here would keep its peer from seeing srun
 * close it. A Ctrl-\ is srun's to handle (it ends the step), and would dump this copy of
 * srun's memory. */
static void sentinel_body(void *arg)
{
	(void)arg;
	signal(SIGQUIT, SIG_IGN);
	ab_close_from(0);
	for (;;)
		pause();
}

static void *ctrl_c_watch(void *arg)
{
	struct ab_deferred *d = arg;
	siginfo_t si = {0};

	/* not reaped here: its pid stays ours until ctrl_c_end, which kills it */
	while (waitid(P_PID, (id_t)d->sentinel.pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
		;
	if (si.si_pid != d->sentinel.pid || si.si_code != CLD_KILLED)
		return NULL;
	/* SIGTERM: slurmstepd ends a batch job's processes so; srun's probe step then reads as
	 * interrupted, and no cancel line reaches it (the batch step's stderr has it) */
	if (si.si_status == SIGINT)
		d->ctrl_c = 1;
	else if (si.si_status == SIGTERM)
		d->sigterm = 1;
	else
		return NULL; /* ctrl_c_end's SIGKILL: nothing heard */
	d->halt = 1; /* set only: srun's end sets it too */
	return NULL;
}

/* Where no sentinel can be started, the probing goes on as it did without it. Ended by
 * ctrl_c_end, which decide calls once, before applying. */
static void ctrl_c_start(struct ab_deferred *d)
{
	char err[AB_ERR_MAX];

	if (ab_proc_start(&d->sentinel, AB_PROC_PDEATHSIG, sentinel_body, NULL, err,
			  sizeof(err)) < 0) {
		d->sentinel.pid = 0;
		return;
	}
	if (pthread_create(&d->watcher, NULL, ctrl_c_watch, d) != 0) {
		kill(d->sentinel.pid, SIGKILL);
		waitpid(d->sentinel.pid, NULL, 0);
		d->sentinel.pid = 0;
	}
}

static void ctrl_c_end(struct ab_deferred *d)
{
	if (d->sentinel.pid <= 0)
		return;
	kill(d->sentinel.pid, SIGKILL); /* a zombie once it ended: the pid is still its own */
	pthread_join(d->watcher, NULL);
	waitpid(d->sentinel.pid, NULL, 0);
	d->sentinel.pid = 0;
}

/* What the user reads when a held task went away before the decision. */
static int task_gone(const struct ab_hold_server *s, char *err, size_t errlen)
{
	const char *node = s->lost_node[0] ? s->lost_node : "its node";

	return ab_fail(err, errlen, ENOLINK,
		       "task %u on %s ended while srun was probing (the node failed, or the task "
		       "was killed), so probing was stopped and nothing was applied",
		       s->lost_task, node);
}

/* Slurm cancels the probe step of a job that lost a node, often before srun hears that a held
 * task went with it: a moment to hear it, so the user reads which task and node. */
static void settle_lost(struct ab_deferred *d)
{
	double end = ab_now() + LOST_SETTLE_S;

	while (!d->server.nlost && !d->stopping && ab_now() < end) {
		ab_hold_gather(&d->server);
		poll(NULL, 0, 100);
	}
}

/* Every task of the step must be able to hear the decision before anything is rewritten:
 * they said hello while srun probed (or say it now). */
static int all_tasks_here(struct ab_deferred *d, char *err, size_t errlen)
{
	struct ab_hold_server *s = &d->server;
	double end = ab_now() + GATHER_S;

	while (ab_hold_gather(s) < s->expected && ab_now() < end && !d->stopping && !s->nlost &&
	       !d->ctrl_c)
		poll(NULL, 0, 100);
	if (s->nlost)
		return task_gone(s, err, errlen);
	if (s->nseen == s->expected)
		return 0;
	if (d->stopping)
		return ab_fail(err, errlen, ECANCELED, "srun ended while probing; the probe step "
						       "was cancelled");
	return ab_fail(err, errlen, EHOSTUNREACH,
		       "only %u of the step's %u tasks reached srun (port %u) by %.0f s after the "
		       "decision, so it was not applied: their own lines say why (a firewall "
		       "between the compute nodes and srun's host?)",
		       s->nseen, s->expected, s->port, GATHER_S);
}

/* A probe's decision over several GPU models: the report, the cache and the line say which
 * was probed, or that each rank was held to its own. */
static void with_models(const struct ab_plan *pl, struct ab_result *res, char **json)
{
	if (pl->bound && ab_probe_per_rank_limits(&pl->job)) {
		*json = ab_result_with_models(*json, &pl->models, NULL);
		res->per_rank_limits = true;
	} else if (pl->bound) {
		*json = ab_result_with_models(*json, &pl->models, pl->bound);
		snprintf(res->sized_for, sizeof(res->sized_for), "%s", pl->bound->type);
		snprintf(res->sized_for_node, sizeof(res->sized_for_node), "%s", pl->bound->node);
		res->sized_for_bytes = pl->bound->total_bytes;
	}
}

/* The cache once more under its lock (an identical srun may have just decided), else the
 * probe; then, once every task can hear it, the decision applied. 0 with *vars, or a
 * negative errno with err. */
static int decide(struct ab_deferred *d, struct ab_hold_answer *vars, char *err, size_t errlen)
{
	struct ab_plan *pl = d->pl;
	struct ab_result res;
	char *json = NULL, warm[AB_CACHE_NAME_MAX];
	long eval_batch = 0;
	int rc = 0, lock = -1;
	bool hit = false, probed = false, waited = false;

	ctrl_c_start(d);
	if (pl->entry[0]) {
		/* identical sruns started together probe once: the others wait, then hit */
		lock = ab_cache_lock(&d->cache, pl->entry, pl->ctx->site.probe_timeout + 60.0,
				     &d->halt, gather, d);
		waited = d->ctrl_c; /* it ended the wait */
		hit = ab_srun_cache_lookup(pl, &d->cache, &res, &json) == 0;
	}
	if (hit) {
		eval_batch = res.eval_batch;
	} else if (!d->ctrl_c) { /* a Ctrl-C can end the wait for the lock */
		ab_srun_cache_warm(pl, &d->cache, warm, sizeof(warm)); /* a sweep's next job */
		ab_probe_read_job(&pl->job);
		/* a decision the time cut short, where this job's time cannot take it further */
		hit = ab_srun_cache_take_cut_short(pl, &d->cache,
						   ab_probe_train_limit_s(&pl->job), &res,
						   &json) == 0;
		probed = !hit;
		if (hit)
			eval_batch = res.eval_batch;
		else if ((rc = ab_srun_smallest_gpu(pl, &d->halt, err, errlen)) == 0)
			rc = probe(d, &res, &eval_batch, &json, err, errlen);
		if (!hit && rc == 0)
			with_models(pl, &res, &json);
	}
	pl->cached = hit;
	if (rc == -EHOSTDOWN)
		settle_lost(d);
	if (d->server.nlost && !d->stopping) /* what stopped the probe, or what followed it */
		rc = task_gone(&d->server, err, errlen);
	if (rc == 0)
		rc = all_tasks_here(d, err, errlen);
	/* a Ctrl-C sent by now is the sentinel's end, which the joined watcher has seen; it
	 * wins over whatever the step it stopped, or a task it ended, said */
	ctrl_c_end(d);
	if (d->ctrl_c && waited && !hit) /* for an identical srun, which probes on */
		rc = ab_fail(err, errlen, EINTR, "interrupted (Ctrl-C) while waiting for an "
						 "identical srun's decision (its probe goes on)");
	else if (d->ctrl_c && probed)
		rc = ab_probe_interrupted(err, errlen);
	else if (d->ctrl_c) /* a decision from the cache, its tasks not all there yet */
		rc = ab_fail(err, errlen, EINTR, "interrupted (Ctrl-C) before the decision reached "
						 "the step's tasks; nothing was applied");
	else if (d->sigterm && rc < 0)
		rc = ab_fail(err, errlen, EINTR, "the job was ended while probing (SIGTERM: its time "
						 "limit, an scancel or a requeue; the job's output "
						 "says which); for a time limit, give the job time for "
						 "the probe too (up to probe_timeout=%us)",
			     pl->ctx->site.probe_timeout);
	if (rc == 0 && (rc = ab_apply(pl, &res, eval_batch, json, vars, err, errlen)) == 0 && !hit)
		ab_srun_cache_store(pl, &d->cache, json, eval_batch);
	ab_cache_unlock(lock);
	free(json);
	return rc;
}

static void *deferred_main(void *arg)
{
	struct ab_deferred *d = arg;
	struct ab_hold_answer answer = {.verdict = AB_HOLD_DECIDED};
	char err[2 * AB_ERR_MAX];
	int rc;

	rc = decide(d, &answer, err, sizeof(err));
	d->ended_early = rc < 0 && d->stopping; /* said by ab_srun_defer_end, at srun's exit */
	if (rc < 0 && !d->stopping) {
		ab_srun_policy(d->pl->ctx, err, rc, &answer.verdict);
		snprintf(answer.message, sizeof(answer.message), "%s",
			 rc == -EINTR ? "probing was interrupted"
			 : rc == -ENOTUNIQ ? "the config holds another srun's batch"
			 : answer.verdict == AB_HOLD_ABORT ? "probing failed and on_failure=abort"
							   : "probing failed; original settings");
	}
	if (!d->stopping)
		ab_hold_serve(&d->server, &answer, SERVE_S, &d->stopping);
	ab_hold_close(&d->server); /* a task asking later hears at once that srun is done */
	return NULL;
}

int ab_srun_defer(struct ab_ctx *c, struct ab_plan *pl, struct ab_cache *cache, char *err,
		  size_t errlen)
{
	struct ab_deferred *d = calloc(1, sizeof(*d));
	char ticket[256];
	unsigned lo, hi, wait;
	int rc;

	if (!d)
		return ab_fail(err, errlen, ENOMEM, "out of memory");
	d->server.fd = -1;
	d->cache.fd = -1;
	srun_port_range(&lo, &hi);
	if ((rc = ab_hold_listen(&d->server, lo, hi, pl->job.ntasks, err, errlen)) < 0)
		goto fail;
	wait = ab_hold_wait_s(c->site.probe_timeout, c->req.eval);
	if ((rc = ab_hold_ticket_format(&d->server, wait, ticket, sizeof(ticket))) < 0 ||
	    setenv(AB_HOLD_ENV, ticket, 1) < 0) {
		rc = ab_fail(err, errlen, EIO, "cannot give the tasks their ticket");
		goto fail;
	}
	if (!(d->env = copy_env())) {
		rc = ab_fail(err, errlen, ENOMEM, "out of memory");
		goto unset;
	}
	d->pl = pl;
	d->pl->job.env = d->env;
	d->pl->job.tick = gather; /* the tasks say hello while srun probes */
	d->pl->job.tick_arg = d;
	d->cache = *cache;
	if ((rc = pthread_create(&d->thread, NULL, deferred_main, d)) != 0) {
		d->pl = NULL, d->cache.fd = -1; /* still the caller's */
		rc = ab_fail(err, errlen, rc, "cannot start probing: %s", strerror(rc));
		goto unset;
	}
	c->deferred = d;
	return 0;
unset:
	unsetenv(AB_HOLD_ENV);
fail:
	deferred_free(d);
	return rc;
}

bool ab_srun_defer_end(struct ab_ctx *c)
{
	struct ab_deferred *d = c->deferred;
	bool early;

	if (!d)
		return false;
	/* the probe step is cancelled within its grace; the serving stops at its next poll */
	d->stopping = 1;
	d->halt = 1;
	pthread_join(d->thread, NULL);
	if ((early = d->ended_early))
		slurm_error(AB_LOG_PREFIX "srun ended while probing (its step was cancelled, or srun "
					  "was signalled): the step's tasks did not run its command");
	deferred_free(d);
	c->deferred = NULL;
	return early;
}
