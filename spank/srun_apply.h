/* srun_apply.h - srun (local context): the plan of the step about to launch (its command,
 * config and keys) and the application of a decision to it (config, report, variables).
 */
#ifndef AUTOBATCH_SRUN_APPLY_H
#define AUTOBATCH_SRUN_APPLY_H

#include <limits.h>
#include <slurm/spank.h>
#include <stdbool.h>
#include <stdint.h>

#include "config_edit.h"
#include "config_keys.h"
#include "context.h"
#include "gpu_models.h"
#include "cache.h"
#include "hold.h"
#include "probe_step.h"

struct ab_plan {
	struct ab_ctx *ctx; /* the settings it was planned with; ab_apply leaves the report's path */
	struct ab_probe_job job;
	struct ab_keys keys;
	char srun[PATH_MAX];
	char config[PATH_MAX];
	char chdir[PATH_MAX]; /* srun -D's directory, resolved; "" without one */
	char named[2 * PATH_MAX]; /* the config as the user named it, in chdir when relative */
	unsigned stepid;
	bool cached;
	bool looked_up; /* the cache was looked in once already (srun_cache.c) */
	long cut_short_batch; /* its entry is a decision the time cut short, of this batch; 0: not */
	const char *written[4]; /* the keys autobatch writes */
	struct ab_expect seen;  /* the config when the job was planned */
	uint64_t warm_fingerprint; /* the config less its batch and memory-neutral values */
	struct ab_gpu_models models;      /* the step's nodes' GPU models, as Slurm knows them */
	const struct ab_gpu_model *bound; /* of several, the smallest: the one probed */
	char entry[AB_CACHE_NAME_MAX];    /* its cache entry's name, or "" */
	char cache_dir[AB_PATH_MAX];      /* and the cache's directory */
};

/* The step, its command and config, as srun knows them before it launches. */
int ab_plan_job(spank_t sp, struct ab_ctx *c, struct ab_plan *pl, char *err,
		size_t errlen);

/* Applies a decision: the config rewritten (refused when the user changed it meanwhile), the
 * report written, one line said; *vars gets the variables for the tasks (each with its
 * SLURM_ twin), which srun exports (ab_export_vars) or the hold channel hands over. */
int ab_apply(struct ab_plan *pl, const struct ab_result *res, long eval_batch,
	     const char *json, struct ab_hold_answer *vars, char *err, size_t errlen);

/* NAME=VALUE and its SLURM_ twin into the environment srun launches the tasks with. */
int ab_export(const char *name, const char *value);

/* Each of vars into that environment. */
int ab_export_vars(const struct ab_hold_answer *vars);

#endif
