/* srun_comment.h - the step's decision and real peak in the job's Comment (comment=on). */
#ifndef AUTOBATCH_SRUN_COMMENT_H
#define AUTOBATCH_SRUN_COMMENT_H

#include <stdbool.h>

#include "context.h"

/* Once the decision is applied, and at srun's end (at_end, after the deferred decision is
 * joined): nothing unless the site asked. */
void ab_srun_comment(const struct ab_ctx *c, bool at_end);

#endif
