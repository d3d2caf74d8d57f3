/* srun.h - what srun's modules share (local context): the plan of the step about to launch,
 * applying a decision to it (srun_apply.c), the decision cache (srun_cache.c) and the
 * decision made after the launch (srun_hold.c).
 */
#ifndef AUTOBATCH_SRUN_H
#define AUTOBATCH_SRUN_H

#include <limits.h>

#include "cache.h"
#include "config_edit.h"
#include "config_keys.h"
#include "hold.h"
#include "plugin.h"

struct ab_plan {
	struct ab_probe_job job;
	struct ab_keys keys;
	char srun[PATH_MAX];
	char config[PATH_MAX];
	unsigned stepid;
	bool cached;
	const char *written[4]; /* the keys autobatch writes */
	struct ab_expect seen;  /* the config when the job was planned */
	uint64_t warm_fingerprint; /* the config less its batch and memory-neutral values */
};

/* srun_apply.c: the step, its command and config, as srun knows them before it launches. */
int ab_plan_job(spank_t sp, struct ab_plan *pl, char *err, size_t errlen);

/* Applies a decision: the config rewritten (refused when the user changed it meanwhile), the
 * report written, one line said; *vars gets the variables for the tasks (each with its
 * SLURM_ twin), which srun exports (ab_export_vars) or the hold channel hands over. */
int ab_apply(struct ab_plan *pl, const struct ab_result *res, long eval_batch,
	     const char *json, struct ab_hold_answer *vars, char *err, size_t errlen);

/* NAME=VALUE and its SLURM_ twin into the environment srun launches the tasks with. */
int ab_export(const char *name, const char *value);

/* Each of vars into that environment. */
int ab_export_vars(const struct ab_hold_answer *vars);

/* srun_cache.c: the user's cache, open (c->fd -1 when there is none). */
void ab_srun_cache_open(struct ab_cache *c);

/* 0 and *json on a hit; -ENOENT on a miss (name then names where the entry goes). */
int ab_srun_cache_lookup(const struct ab_plan *pl, const struct ab_cache *c, char *name,
			 size_t namelen, struct ab_result *res, char **json);

void ab_srun_cache_store(const struct ab_plan *pl, const struct ab_cache *c, const char *name,
			 const char *json, long eval_batch);

/* On a miss: the warm start, from the last decision of a job that differs from this one only
 * in memory-neutral config values (the preset's, --autobatch-neutral). 0 with pl->job's warm
 * fields set (naming the entry in name), or -ENOENT. */
int ab_srun_cache_warm(struct ab_plan *pl, const struct ab_cache *c, char *name,
		       size_t namelen);

/* srun_hold.c: a decision that needs the probe, made after the launch. Takes pl (malloc'ed)
 * and the open cache on success: the tasks are told to wait (SLURM_AUTOBATCH_HOLD) and a
 * thread probes, applies and answers them. On failure nothing is taken or changed. */
int ab_srun_defer(struct ab_plan *pl, struct ab_cache *cache, const char *entry, char *err,
		  size_t errlen);

/* srun is ending (slurm_spank_exit): a probe still running is stopped, the thread joined. */
void ab_srun_defer_end(void);

/* The site's on_failure, said once: a negative errno for a failure to launch with nothing
 * changed, 0 to launch with the original settings; *verdict says which for the tasks. */
int ab_srun_policy(const char *err, int rc, enum ab_hold_verdict *verdict);

#endif
