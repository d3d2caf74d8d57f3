/* srun.h - srun (local context): the request settled after the options, the decision from
 * the cache or the probe, and on failure the site's on_failure policy.
 */
#ifndef AUTOBATCH_SRUN_H
#define AUTOBATCH_SRUN_H

#include <slurm/spank.h>

#include "context.h"
#include "hold.h"

int ab_srun_post_opt(struct ab_ctx *c);
int ab_srun_user_init(spank_t sp, struct ab_ctx *c);

/* srun ends: a decision still being made is stopped. */
void ab_srun_exit(struct ab_ctx *c);

/* The site's on_failure, said once: a negative errno for a failure to launch with nothing
 * changed, 0 to launch with the original settings; *verdict says which for the tasks. */
int ab_srun_policy(const struct ab_ctx *c, const char *err, int rc,
		   enum ab_hold_verdict *verdict);

#endif
