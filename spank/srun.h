/* srun.h - what srun's modules share (local context): the plan of the step about to launch,
 * applying a decision to it (srun_apply.c) and the decision cache (srun_cache.c).
 */
#ifndef AUTOBATCH_SRUN_H
#define AUTOBATCH_SRUN_H

#include <limits.h>

#include "cache.h"
#include "config_edit.h"
#include "config_keys.h"
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
 * report written, the decision exported to the tasks, one line said. */
int ab_apply(struct ab_plan *pl, const struct ab_result *res, long eval_batch,
	     const char *json, char *err, size_t errlen);

/* NAME=VALUE and its SLURM_ twin into the environment srun launches the tasks with. */
int ab_export(const char *name, const char *value);

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

#endif
