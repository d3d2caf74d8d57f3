/* srun.c - local context: settles the effective settings after the options, decides (from
 * the cache here, else by the probe after the launch: srun_hold.c), has the decision applied,
 * and on failure follows the site's on_failure policy. Planning and applying: srun_apply.c;
 * the cache: srun_cache.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srun.h"

#include "cache.h"
#include "error.h"
#include "options.h"
#include "probe_step.h"
#include "srun_apply.h"
#include "srun_cache.h"
#include "srun_comment.h"
#include "srun_gpus.h"
#include "srun_hold.h"
#include "srun_policy.h"

static int refuse(struct ab_ctx *c, const char *err)
{
	ab_srun_say_error(err, NULL);
	c->failed = true;
	return -1;
}

static void describe(const struct ab_ctx *c)
{
	char desc[AB_ERR_MAX * 4], *line, *save = NULL;

	if (ab_settings_describe(&c->site, &c->req, &c->eff, desc, sizeof(desc)) < 0)
		return;
	for (line = strtok_r(desc, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		slurm_verbose(AB_LOG_PREFIX "%s", line);
}

int ab_srun_post_opt(struct ab_ctx *c)
{
	char err[AB_ERR_MAX];

	/* before srun makes its own job, only an existing allocation has an id */
	c->in_allocation = getenv("SLURM_JOB_ID") != NULL;
	if (!c->site_ok || c->failed || ab_is_probe_step())
		return 0; /* already reported; nothing of ours may act */
	if (ab_request_from_env(&c->req, getenv(AB_ENV_REQUEST), err, sizeof(err)) < 0 ||
	    ab_request_check(&c->req, err, sizeof(err)) < 0)
		return refuse(c, err);
	if (!c->req.enabled)
		return 0;
	return ab_options_settle(c);
}

/* ---- deciding ------------------------------------------------------------------------ */

/* A global batch the replicas cannot share evenly is said before a probe step is allocated
 * (the probe would refuse it too), with the two nearest that can be. */
static int global_splits(const struct ab_plan *pl, char *err, size_t errlen)
{
	long g = pl->job.global_batch, w = pl->job.dp_width, below;
	char named[AB_PATH_MAX + 64];

	if (g <= 0 || w <= 1 || g % w == 0)
		return 0;
	/* the user's option, or the config's own global batch (DeepSpeed's train_batch_size) */
	if (pl->ctx->req.global_batch)
		snprintf(named, sizeof(named), "--autobatch-global-batch=%ld", g);
	else
		snprintf(named, sizeof(named), "the global batch %ld (%s in %s)", g,
			 pl->keys.global ? pl->keys.global : "?", pl->ctx->req.config);
	below = g - g % w;
	if (below == 0)
		return ab_fail(err, errlen, EINVAL, "%s does not split evenly over the step's %ld "
						    "data-parallel replicas: give a multiple of %ld",
			       named, w, w);
	return ab_fail(err, errlen, EINVAL, "%s does not split evenly over the step's %ld "
					    "data-parallel replicas: give a multiple of %ld, as %ld "
					    "or %ld",
		       named, w, w, below, below + w);
}

/* A cached decision is applied here, before the launch. Anything else needs the probe, which
 * runs after the launch while the tasks wait (srun_hold.c): slurmd refuses a step credential
 * older than cred_expire, and srun created this step's before calling this hook. pl is taken
 * by the deferred decision (*pl then NULL). */
static int decide(spank_t sp, struct ab_ctx *c, struct ab_plan **pl, char *err, size_t errlen)
{
	struct ab_hold_answer vars;
	struct ab_result res;
	struct ab_cache cache;
	char *json = NULL;
	int rc;

	if ((rc = ab_plan_job(sp, c, *pl, err, errlen)) < 0)
		return rc;
	/* the cache keys on them; a step over several is probed on its smallest */
	ab_srun_gpu_models((*pl)->job.nodelist, &(*pl)->models);
	/* the step's GPU request shapes its trials and a per-device batch's replicas: the cache
	 * keys on it, and a hit's accumulation is computed from it */
	if ((rc = ab_probe_read_step(&(*pl)->job, err, errlen)) < 0)
		return rc;
	if ((rc = global_splits(*pl, err, errlen)) < 0)
		return rc;
	ab_srun_cache_open(&c->site, &cache);
	if (ab_srun_cache_lookup(*pl, &cache, &res, &json) == 0) {
		(*pl)->cached = true;
		if ((rc = ab_apply(*pl, &res, res.eval_batch, json, &vars, err, errlen)) == 0)
			rc = ab_export_vars(&vars) < 0 ? -EIO : 0;
		ab_cache_close(&cache);
		free(json);
		return rc;
	}
	/* a config the probe's decision could not be written to is said before the probe */
	if ((*pl)->ctx->req.config[0] &&
	    (rc = ab_config_file_writable((*pl)->named, err, errlen)) < 0) {
		ab_cache_close(&cache);
		return rc;
	}
	if ((rc = ab_srun_defer(c, *pl, &cache, err, errlen)) == 0)
		*pl = NULL; /* the thread's now */
	else
		ab_cache_close(&cache);
	return rc;
}

/* Refuses the launch of pl's step. Slurm ignores an optional plugin's refusal, and 22.05 leaks
 * a step refused inside an existing allocation (it stays RUNNING and blocks later sruns), so
 * the step's tasks are also told to end before running the command (remote.c); inside an
 * allocation that is the only refusal, which lets the step complete normally. */
static int refuse_launch(const struct ab_ctx *c, unsigned jobid, unsigned stepid)
{
	char mark[64];

	snprintf(mark, sizeof(mark), "%u.%u", jobid, stepid);
	setenv(AB_ABORT_ENV, mark, 1);
	return c->in_allocation ? 0 : -1;
}

/* A request a hook refused (an option without --autobatch, a bad AUTOBATCH, a denied
 * fraction) runs unsized under an optional plugin, whose refusal Slurm ignores: under
 * on_failure=abort its tasks are told to end, as a failed probe's are. */
static int refused_step(spank_t sp, const struct ab_ctx *c)
{
	uint32_t jobid = 0, stepid = 0;

	if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS)
		return -1;
	slurm_error(AB_LOG_PREFIX "the step is not launched (on_failure=abort)");
	return refuse_launch(c, jobid, stepid);
}

int ab_srun_user_init(spank_t sp, struct ab_ctx *c)
{
	char value[32], err[2 * AB_ERR_MAX];
	enum ab_hold_verdict verdict;
	struct ab_plan *pl;
	int rc;

	if (c->site_ok && c->failed && c->site.on_failure == AB_ON_FAILURE_ABORT &&
	    !ab_is_probe_step())
		return refused_step(sp, c);
	if (!c->site_ok || c->failed || !c->req.enabled || ab_is_probe_step())
		return 0;
	describe(c); /* here, not earlier: srun applies -v only after init_post_opt */
	snprintf(value, sizeof(value), "%g", c->eff.fraction);
	if (ab_export(AB_ENV_FRACTION, value) < 0)
		return -1;
	if (!(pl = calloc(1, sizeof(*pl)))) {
		slurm_error(AB_LOG_PREFIX "out of memory");
		return -1;
	}
	rc = decide(sp, c, &pl, err, sizeof(err));
	if (rc < 0 && ab_srun_policy(c, err, rc, &verdict) < 0) {
		if (rc == -EINTR)
			/* srun aborts on a second interrupt within a second: give it, as the user's
			 * one Ctrl-C was meant for the whole srun */
			kill(getpid(), SIGINT);
		rc = refuse_launch(c, pl->job.jobid, pl->stepid);
	} else {
		rc = 0;
	}
	free(pl);
	return rc;
}

/* srun's exit status where it ended while probing: its tasks did not run the command */
#define AB_EXIT_ENDED_WHILE_PROBING 1

void ab_srun_exit(struct ab_ctx *c)
{
	bool early = ab_srun_defer_end(c);

	ab_srun_comment(c, NULL);
	/* Slurm calls this from srun's exit (atexit): a step cancelled while its tasks were
	 * held reports no task's status, and srun would exit 0, as if the command had run (a
	 * script's `srun ... && next` went on). Its status is made a failure's. */
	if (early) {
		fflush(NULL);
		_exit(AB_EXIT_ENDED_WHILE_PROBING);
	}
}
