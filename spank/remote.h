/* remote.h - slurmstepd (root): the decision's twins copied back, the caps of enforce=on;
 * and, in each task as the user, the wait for a decision made after the launch.
 */
#ifndef AUTOBATCH_REMOTE_H
#define AUTOBATCH_REMOTE_H

#include <slurm/spank.h>

#include "context.h"

int ab_remote_user_init(spank_t sp, const struct ab_ctx *c);

/* In the task, as the user, before the command: a held launch waits for its decision; a
 * refused launch ends here. */
int ab_remote_task_init(spank_t sp, const struct ab_ctx *c);

#endif
