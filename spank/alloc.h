/* alloc.h - the allocator context (sbatch, salloc): a bad --autobatch request is refused at
 * submission, not in the job's first srun.
 */
#ifndef AUTOBATCH_ALLOC_H
#define AUTOBATCH_ALLOC_H

#include "context.h"

int ab_alloc_post_opt(struct ab_ctx *c);

#endif
