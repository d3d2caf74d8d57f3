/* srun_policy.c - srun (local context): what a failure to decide means for the step, by the
 * site's on_failure, and how an error of several lines is said through Slurm's logger.
 */
#include <errno.h>
#include <string.h>

#include <slurm/spank.h>

#include "srun_policy.h"

#include "error.h"

/* Slurm's logger prints a newline inside a message as '?': an error of several lines (a
 * failed trial's last output, quoted) is said a line at a time, then what follows from it;
 * a one-line error keeps its outcome on its line. outcome may be NULL. */
void ab_srun_say_error(const char *err, const char *outcome)
{
	const char *line = err, *nl = strchr(err, '\n');

	if (!nl) {
		slurm_error(AB_LOG_PREFIX "%s%s%s", err, outcome ? "; " : "", outcome ? outcome : "");
		return;
	}
	for (; line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		slurm_error(AB_LOG_PREFIX "%.*s", nl ? (int)(nl - line) : (int)strlen(line), line);
	}
	if (outcome)
		slurm_error(AB_LOG_PREFIX "%s", outcome);
}

int ab_srun_policy(const struct ab_ctx *c, const char *err, int rc,
		   enum ab_hold_verdict *verdict)
{
	*verdict = AB_HOLD_ABORT;
	if (rc == -EINTR) {
		ab_srun_say_error(err, "nothing was changed");
		return rc;
	}
	/* another srun's decision is in the file: the original settings are gone, and its batch
	 * was not decided for this step (another fraction, another command) */
	if (rc == -ENOTUNIQ) {
		ab_srun_say_error(err, "the step is not launched: its tasks would read the other "
				       "srun's batch, not the original settings");
		return rc;
	}
	if (c->site.on_failure == AB_ON_FAILURE_ABORT) {
		ab_srun_say_error(err, "the step is not launched (on_failure=abort)");
		return rc;
	}
	ab_srun_say_error(err, "launching with the original settings (on_failure=continue)");
	*verdict = AB_HOLD_CONTINUE;
	return 0;
}
