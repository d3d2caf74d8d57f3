/* srun_cache.h - srun's decision cache: where it lives (the site's cache_dir, one directory
 * per user, else the user's XDG cache), what keys an entry, reading and storing entries.
 */
#ifndef AUTOBATCH_SRUN_CACHE_H
#define AUTOBATCH_SRUN_CACHE_H

#include <stddef.h>

#include "cache.h"
#include "srun_apply.h"

/* The user's cache, open (c->fd -1 when there is none). */
void ab_srun_cache_open(const struct ab_site *site, struct ab_cache *c);

/* 0 and *json on a hit; -ENOENT on a miss. Either way pl->entry names the entry ("" without
 * a cache) and pl->cache_dir its directory. */
int ab_srun_cache_lookup(struct ab_plan *pl, const struct ab_cache *c, struct ab_result *res,
			 char **json);

/* After a lookup that found a decision the time cut short (probing again, from it): 0 and
 * *json with it taken as it is, where the train probe's limit now (limit_s) cannot verify it
 * and try a larger batch (under 2.25 of its longest trial: one, then a round of 1.25); said
 * once. -ENOENT where the probe goes on. */
int ab_srun_cache_take_cut_short(struct ab_plan *pl, const struct ab_cache *c, unsigned limit_s,
				 struct ab_result *res, char **json);

/* The decision as pl->entry (and its warm twin), the entry's over-limit mark cleared. */
void ab_srun_cache_store(const struct ab_plan *pl, const struct ab_cache *c, const char *json,
			 long eval_batch);

/* On a miss: the warm start, from the last decision of a job that differs from this one only
 * in memory-neutral config values (the preset's, --autobatch-neutral). 0 with pl->job's warm
 * fields set (naming the entry in name), or -ENOENT. */
int ab_srun_cache_warm(struct ab_plan *pl, const struct ab_cache *c, char *name,
		       size_t namelen);

#endif
