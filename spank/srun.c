/* srun.c - local context: turn the options and AUTOBATCH= into the effective settings, and
 * export the decision to the step's tasks through srun's environment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

static int refuse(const char *err)
{
	slurm_error(AB_LOG_PREFIX "%s", err);
	ab_state.failed = true;
	return -1;
}

static void describe(void)
{
	char desc[AB_ERR_MAX * 4], *line, *save = NULL;

	if (ab_settings_describe(&ab_state.site, &ab_state.req, ab_state.fraction, desc,
				 sizeof(desc)) < 0)
		return;
	for (line = strtok_r(desc, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		slurm_verbose(AB_LOG_PREFIX "%s", line);
}

int ab_srun_post_opt(spank_t sp, int ac, char **av)
{
	char err[AB_ERR_MAX];

	(void)sp, (void)ac, (void)av;
	if (!ab_state.site_ok || ab_state.failed)
		return 0; /* already reported; nothing of ours may act */
	if (ab_request_from_env(&ab_state.req, getenv("AUTOBATCH"), err, sizeof(err)) < 0)
		return refuse(err);
	if (ab_request_check(&ab_state.req, err, sizeof(err)) < 0)
		return refuse(err);
	if (!ab_state.req.enabled)
		return 0;
	return ab_request_resolve(false);
}

int ab_srun_user_init(spank_t sp, int ac, char **av)
{
	char value[32];

	(void)sp, (void)ac, (void)av;
	if (!ab_state.site_ok || ab_state.failed || !ab_state.req.enabled)
		return 0;
	describe(); /* here, not earlier: srun applies -v only after init_post_opt */
	/* spank_setenv is refused in local context; srun merges environ into the launch. */
	snprintf(value, sizeof(value), "%g", ab_state.fraction);
	if (setenv("AUTOBATCH_FRACTION", value, 1) < 0) {
		slurm_error(AB_LOG_PREFIX "cannot export AUTOBATCH_FRACTION: %m");
		return -1;
	}
	return 0;
}
