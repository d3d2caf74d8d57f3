/* srun_cache.c - srun's decision cache: where it lives (the site's cache_dir, one directory
 * per user, else the user's XDG cache), what keys an entry, reading and storing entries.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srun_cache.h"

#include "error.h"
#include "file_replace.h"
#include "fingerprint.h"
#include "size.h"

/* Everything that shapes the decision and that srun knows before any step runs. The nodes
 * count by their GPU models when Slurm names them all (the same job on other nodes of the
 * same model decides from the cache; on another model it does not), else by their names. A
 * warm key leaves out the config's memory-neutral values and the nodes (a sweep's jobs land
 * on different nodes of one partition): its entry is only ever a start that the probe
 * verifies, never a decision taken as it is. */
static void cache_key(const struct ab_plan *pl, bool warm, struct ab_hash *h)
{
	const struct ab_request *req = &pl->ctx->req;
	const struct ab_site *site = &pl->ctx->site;
	char num[64], models[256];

	ab_gpu_models_key(&pl->models, models, sizeof(models));
	ab_hash_init(h);
	ab_hash_str(h, PACKAGE_VERSION);
	ab_hash_str(h, ab_mode_name(req->mode));
	ab_hash_str(h, ab_objective_name(req->objective));
	/* the trials' shape: a decision of whole-step trials is not a one-process trial's */
	snprintf(num, sizeof(num), "%.6g %ld %u %d %s %u", pl->ctx->eff.fraction,
		 pl->job.global_batch, pl->job.ntasks, req->eval, ab_shape_names[pl->ctx->eff.shape],
		 pl->job.nnodes);
	ab_hash_str(h, num);
	ab_hash_str(h, site->probe);
	ab_hash_str(h, site->probe_args);
	ab_hash_add(h, &site->comm_reserve, sizeof(site->comm_reserve));
	ab_hash_str(h, getenv("SLURM_JOB_PARTITION"));
	ab_hash_str(h, warm ? "warm" : models[0] ? models : pl->job.nodelist);
	ab_hash_str(h, req->trial_command);
	/* an eval batch measured beside the train batch chosen: not an entry from before that,
	 * whose eval trials trained at the config's own batch */
	if (req->eval)
		ab_hash_str(h, "eval beside the train batch");
	if (!warm && req->run_steps) { /* another length warm-starts: its trial is judged anew */
		snprintf(num, sizeof(num), "run_steps %ld", req->run_steps);
		ab_hash_str(h, num);
	}
	for (int i = 0; i < pl->job.argc; i++)
		ab_hash_str(h, pl->job.argv[i]);
	ab_hash_str(h, pl->keys.micro);
	for (int i = 0; i < pl->job.step_gpus.n; i++) /* --gpus-per-task=4 is not =2 */
		ab_hash_str(h, pl->job.step_gpus.opt[i]);
	/* the config less its batch values, as plan_job fingerprinted it: no second read */
	if (req->config[0] && warm)
		ab_hash_add(h, &pl->warm_fingerprint, sizeof(pl->warm_fingerprint));
	else if (req->config[0])
		ab_hash_add(h, &pl->seen.fingerprint, sizeof(pl->seen.fingerprint));
	/* the program itself: an edited train.py is not the program the entry's trials ran
	 * (a warm start is verified by its trial: it may come from either). Not the directory:
	 * a job in a directory of its own ($SLURM_TMPDIR) is the same job */
	if (!warm)
		ab_hash_command_files(h, pl->job.argc, pl->job.argv, pl->job.chdir,
				      req->config[0] ? pl->config : NULL);
}

/* The user's cache, open; c->fd -1 when there is none. An unsafe site directory is the
 * admin's to fix: said on srun's stderr, and the job goes on without the cache. A user's
 * subdirectory someone else made first (anyone can, in a 1777 directory) is said too, and
 * the user's own cache stands in: no one can take another's cache away. */
void ab_srun_cache_open(const struct ab_site *site, struct ab_cache *c)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char dir[AB_PATH_MAX], err[AB_ERR_MAX];
	const char *then;
	int rc = -ENOENT;

	c->fd = -1;
	if (!site->cache)
		return;
	if (site->cache_dir[0]) { /* a site directory, one subdirectory per user */
		if ((rc = ab_cache_open_site(site->cache_dir, c, err, sizeof(err))) == 0)
			return;
		then = rc == -EEXIST ? "using your own cache instead" : "deciding without the cache";
		slurm_error(AB_LOG_PREFIX "%s; %s", err, then);
		if (rc != -EEXIST)
			return;
	}
	if (xdg && *xdg == '/' && (mkdir(xdg, 0700) == 0 || errno == EEXIST) &&
	    ab_format(dir, sizeof(dir), "%s/autobatch", xdg) == 0)
		rc = ab_cache_open_dir(dir, c, err, sizeof(err));
	else if (home && *home == '/' && ab_format(dir, sizeof(dir), "%s/.cache", home) == 0 &&
		 (mkdir(dir, 0700) == 0 || errno == EEXIST) &&
		 ab_format(dir, sizeof(dir), "%s/.cache/autobatch", home) == 0)
		rc = ab_cache_open_dir(dir, c, err, sizeof(err));
	else
		snprintf(err, sizeof(err), "neither XDG_CACHE_HOME nor HOME is an absolute path");
	if (rc < 0)
		slurm_verbose(AB_LOG_PREFIX "no cache: %s", err);
}

/* The name of this job's entry, exact or warm. */
static void entry_name(const struct ab_plan *pl, bool warm, char *name, size_t namelen)
{
	struct ab_hash h;

	cache_key(pl, warm, &h);
	ab_cache_entry_name(&h, warm, name, namelen);
}

/* Entry name, read and checked: 0 with the decision and its JSON; -ENOENT when there is
 * none; -EPROTO when it cannot be trusted (*json then NULL). */
static int load(const struct ab_cache *c, const char *name, struct ab_result *res, char **json)
{
	char err[AB_ERR_MAX];
	int rc;

	*json = NULL;
	if ((rc = ab_cache_load(c, name, json)) == -ENOENT)
		return -ENOENT;
	if (rc == 0 && ab_result_parse(*json, strlen(*json), res, err, sizeof(err)) == 0 && res->ok)
		return 0;
	if (rc == 0)
		free(*json);
	*json = NULL;
	return -EPROTO;
}

/* NAME.over, which a task's watch (autobatch-probe watch) wrote when the real run of this
 * entry's batch went over its limit: the entry is not trusted, and the probe tries batches
 * no larger than the limit's share of that run's peak (its batch less one at most). True
 * with pl->job.max_batch set, said once. A mark that is not of this entry's batch (a run of
 * the decision it replaced) or not over its limit is removed and not taken. */
static bool went_over(struct ab_plan *pl, const struct ab_cache *c, const char *name,
		      const struct ab_result *res)
{
	struct ab_cache_over o;
	char peak[32], limit[32];
	long cap;
	int rc = ab_cache_read_over(c, name, &o);

	if (rc == 0 && o.batch != res->batch)
		rc = -ESTALE;
	if (rc < 0) {
		if (rc != -ENOENT)
			ab_cache_clear_over(c, name);
		return false;
	}
	cap = ab_cache_over_cap(&o, res->per_sample);
	if (!pl->job.max_batch)
		slurm_spank_log(AB_LOG_PREFIX "the cached decision (batch %ld) went over its limit "
					      "in a real run (task %ld: %s of %s): probing again, "
					      "at most batch %ld",
				res->batch, o.task, ab_format_size(o.peak_bytes, peak, sizeof(peak)),
				ab_format_size(o.limit_bytes, limit, sizeof(limit)), cap);
	pl->job.max_batch = cap;
	return true;
}

/* A decision its probe's time limit cut short (the best fit seen then): this job probes
 * again, from it (a warm start: its batch verified first, a larger one where its line leaves
 * room), so that jobs with time to spare find the best, and each short one gets further.
 * True with the job's warm fields set, said once. */
static bool cut_short(struct ab_plan *pl, const char *name, const struct ab_result *res)
{
	if (res->confidence != AB_CONFIDENCE_TIME_LIMIT)
		return false;
	/* decided while this srun waited for an identical one's lock (an array's elements):
	 * taken as it is, or each would probe in turn */
	if (pl->looked_up && pl->job.warm_batch != res->batch)
		return false;
	if (pl->job.warm_batch != res->batch)
		slurm_spank_log(AB_LOG_PREFIX "the cached decision (batch %ld) was the best fit seen "
					      "when its probe's time ran out: probing again, from it",
				res->batch);
	pl->job.warm_batch = res->batch;
	pl->job.warm_per_sample = res->per_sample;
	pl->job.warm_from = name;
	pl->cut_short_batch = res->batch;
	return true;
}

int ab_srun_cache_take_cut_short(struct ab_plan *pl, const struct ab_cache *c, unsigned limit_s,
				 struct ab_result *res, char **json)
{
	if (!pl->cut_short_batch || load(c, pl->entry, res, json) < 0)
		return -ENOENT;
	/* the decision looked up is still the entry's, unmarked by a real run's overrun, and
	 * the time left cannot take it further */
	if (res->batch != pl->cut_short_batch || res->confidence != AB_CONFIDENCE_TIME_LIMIT ||
	    (pl->job.max_batch && res->batch > pl->job.max_batch) ||
	    !(res->longest_trial_s > 0) || limit_s >= 2.25 * res->longest_trial_s) {
		free(*json);
		*json = NULL;
		return -ENOENT;
	}
	slurm_spank_log(AB_LOG_PREFIX "this job's probing time (%u s) cannot verify batch %ld "
				      "and try a larger one (its trials took up to %.0f s): the cached "
				      "decision is taken as it is",
			limit_s, res->batch, res->longest_trial_s);
	return 0;
}

int ab_srun_cache_lookup(struct ab_plan *pl, const struct ab_cache *c, struct ab_result *res,
			 char **json)
{
	const char *name = pl->entry;
	int rc;

	pl->entry[0] = '\0';
	pl->cut_short_batch = 0; /* as this lookup finds the entry (a second one, under its lock) */
	if (c->fd < 0)
		return -ENOENT;
	entry_name(pl, false, pl->entry, sizeof(pl->entry));
	snprintf(pl->cache_dir, sizeof(pl->cache_dir), "%s", c->dir);
	rc = pl->ctx->req.refresh ? -ENOENT : load(c, name, res, json);
	if (rc == 0 && (went_over(pl, c, name, res) || cut_short(pl, name, res))) {
		free(*json);
		*json = NULL;
		rc = -ENOENT;
	}
	pl->looked_up = true;
	if (rc == 0 || rc == -ENOENT)
		return rc;
	slurm_verbose(AB_LOG_PREFIX "ignoring the corrupt cache entry %s/%s; it is replaced",
		      c->dir, name);
	return -ENOENT;
}

/* A warm start for a job that missed: the entry of the last job that differed from it only
 * in memory-neutral config values. 0 with the job's warm fields set, or -ENOENT. */
int ab_srun_cache_warm(struct ab_plan *pl, const struct ab_cache *c, char *name, size_t namelen)
{
	struct ab_result res;
	char *json;

	name[0] = '\0';
	if (c->fd < 0 || !pl->ctx->req.config[0] || pl->ctx->req.refresh || pl->job.max_batch)
		return -ENOENT; /* a real run went over: not that batch again */
	entry_name(pl, true, name, namelen);
	if (load(c, name, &res, &json) < 0)
		return -ENOENT;
	free(json);
	pl->job.warm_batch = res.batch;
	pl->job.warm_per_sample = res.per_sample;
	pl->job.warm_from = name;
	return 0;
}

static void store(const struct ab_cache *c, const char *name, const char *entry)
{
	char err[AB_ERR_MAX];

	if (ab_cache_store(c, name, entry, err, sizeof(err)) < 0)
		slurm_verbose(AB_LOG_PREFIX "%s", err);
}

void ab_srun_cache_store(const struct ab_plan *pl, const struct ab_cache *c, const char *json,
			 long eval_batch)
{
	const char *name = pl->entry;
	char *entry, warm[AB_CACHE_NAME_MAX];

	if (c->fd < 0 || !name[0] || !(entry = ab_result_with_eval(json, eval_batch, NULL)))
		return;
	store(c, name, entry);
	ab_cache_clear_over(c, name); /* the new decision's evidence is its own */
	if (pl->ctx->req.config[0]) { /* where the next job of a sweep looks */
		entry_name(pl, true, warm, sizeof(warm));
		store(c, warm, entry);
	}
	free(entry);
}

