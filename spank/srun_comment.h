/* srun_comment.h - the step's decision and real peak in the job's Comment (comment=on). */
#ifndef AUTOBATCH_SRUN_COMMENT_H
#define AUTOBATCH_SRUN_COMMENT_H

#include "context.h"

/* Once the decision is applied (json: the report as it was just written), and at srun's end
 * (json NULL: the report read again, with the tasks' figures, after the deferred decision is
 * joined): nothing unless the site asked. */
void ab_srun_comment(const struct ab_ctx *c, const char *json);

#endif
