/* srun_hold.h - srun (local context): a decision that needs the probe, made after the launch
 * while the step's tasks wait on the hold channel; a thread probes, applies and answers them.
 */
#ifndef AUTOBATCH_SRUN_HOLD_H
#define AUTOBATCH_SRUN_HOLD_H

#include <stdbool.h>
#include <stddef.h>

#include "cache.h"
#include "context.h"
#include "srun_apply.h"

/* Takes pl (malloc'ed) and the open cache on success, and records the decision being made in
 * c->deferred: the tasks are told to wait (SLURM_AUTOBATCH_HOLD) and a thread probes,
 * applies and answers them. On failure nothing is taken or changed. */
int ab_srun_defer(struct ab_ctx *c, struct ab_plan *pl, struct ab_cache *cache, char *err,
		  size_t errlen);

/* srun is ending (slurm_spank_exit): a probe still running is stopped, the thread joined.
 * True, said once, where srun ended before the decision (its step cancelled): the step's
 * tasks never ran its command. */
bool ab_srun_defer_end(struct ab_ctx *c);

#endif
