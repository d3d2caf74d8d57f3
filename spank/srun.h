/* srun.h - srun (local context): the request settled after the options, the decision from
 * the cache or the probe (on failure, the site's policy: srun_policy.h).
 */
#ifndef AUTOBATCH_SRUN_H
#define AUTOBATCH_SRUN_H

#include <slurm/spank.h>

#include "context.h"

int ab_srun_post_opt(struct ab_ctx *c);
int ab_srun_user_init(spank_t sp, struct ab_ctx *c);

/* srun ends: a decision still being made is stopped. */
void ab_srun_exit(struct ab_ctx *c);

#endif
