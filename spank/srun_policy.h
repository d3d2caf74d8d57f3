/* srun_policy.h - srun (local context): the site's on_failure applied to a failure to
 * decide, and errors said a line at a time.
 */
#ifndef AUTOBATCH_SRUN_POLICY_H
#define AUTOBATCH_SRUN_POLICY_H

#include "context.h"
#include "hold.h"

/* The site's on_failure, said once: a negative errno for a failure to launch with nothing
 * changed, 0 to launch with the original settings; *verdict says which for the tasks. */
int ab_srun_policy(const struct ab_ctx *c, const char *err, int rc,
		   enum ab_hold_verdict *verdict);

/* err said through Slurm's logger, a line at a time, then outcome (or NULL). */
void ab_srun_say_error(const char *err, const char *outcome);

#endif
