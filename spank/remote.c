/* remote.c - slurmstepd (root): copies the decision's SLURM_AUTOBATCH_* twins back to
 * AUTOBATCH_* (they survive --export=NONE) and, with enforce=on, exports the memory caps.
 * It reads only the job's environment and options: no file is opened, nothing is run.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "plugin.h"

static const char *const decision_vars[] = {
	AB_ENV_BATCH_SIZE, AB_ENV_GRAD_ACCUM, AB_ENV_GLOBAL_BATCH, AB_ENV_EVAL_BATCH_SIZE,
	AB_ENV_FRACTION,
};

/* Hostile input: only short decimal numbers are copied. */
static bool plain_number(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 20)
		return false;
	for (; *s; s++)
		if (!strchr("0123456789.", *s))
			return false;
	return true;
}

static void reexport(spank_t sp)
{
	char twin[64], value[64], mine[64];

	for (size_t i = 0; i < sizeof(decision_vars) / sizeof(decision_vars[0]); i++) {
		if (ab_env_twin(decision_vars[i], twin, sizeof(twin)) < 0 ||
		    spank_getenv(sp, twin, value, sizeof(value)) != ESPANK_SUCCESS ||
		    !plain_number(value))
			continue;
		if (spank_getenv(sp, decision_vars[i], mine, sizeof(mine)) == ESPANK_SUCCESS)
			continue; /* present already: --export=NONE did not drop it */
		spank_setenv(sp, decision_vars[i], value, 0);
	}
}

/* Under MPS the driver enforces a per-client limit: fraction x the GPU's memory, for each
 * GPU the task sees. The memory is the site's device_memory= only: a size from the job's
 * environment would let a user set their own cap. Set whether or not CUDA_MPS_PIPE_DIRECTORY
 * is (MPS has a default pipe directory); without MPS the driver ignores it. */
static void mps_limit(spank_t sp, double fraction)
{
	char gpus[256], limit[1024];
	unsigned long long mib = (unsigned long long)(fraction * (double)ab_state.site.device_memory /
						      1048576.0);
	size_t len = 0, n = 0;

	if (!ab_state.site.device_memory) {
		slurm_info(AB_LOG_PREFIX "enforce=on exports no MPS memory cap: plugstack.conf "
					 "sets no device_memory=");
		return;
	}
	if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", gpus, sizeof(gpus)) != ESPANK_SUCCESS)
		snprintf(gpus, sizeof(gpus), "0");
	for (char *p = gpus; *p; n++) {
		ab_append(limit, sizeof(limit), &len, "%s%zu=%lluM", n ? "," : "", n, mib);
		p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p);
	}
	if (len)
		spank_setenv(sp, AB_ENV_MPS_LIMIT, limit, 1);
}

/* The cap comes from the option and the site policy, resolved again here: a variable the
 * user sets cannot raise it. */
static void enforce(spank_t sp)
{
	struct spank_option opt = {.name = (char *)ab_options[AB_OPT_AUTOBATCH].name,
				   .has_arg = ab_options[AB_OPT_AUTOBATCH].has_arg};
	struct ab_request req;
	char *arg = NULL, err[AB_ERR_MAX], note[AB_ERR_MAX], value[32];
	double fraction;

	if (spank_option_getopt(sp, &opt, &arg) != ESPANK_SUCCESS)
		return; /* not an --autobatch step */
	ab_request_init(&req);
	if (ab_request_set(&req, AB_OPT_AUTOBATCH, ab_option_value(arg), err, sizeof(err)) < 0 ||
	    ab_resolve_fraction(&ab_state.site, &req, &fraction, note, sizeof(note), err,
				sizeof(err)) < 0)
		fraction = ab_state.site.max_fraction; /* srun refused it already; be strict */
	snprintf(value, sizeof(value), "%g", fraction);
	spank_setenv(sp, AB_ENV_MEM_FRACTION, value, 1);
	spank_setenv(sp, AB_ENV_XLA_MEM_FRACTION, value, 1);
	mps_limit(sp, fraction);
}

int ab_remote_user_init(spank_t sp, int ac, char **av)
{
	(void)ac, (void)av;
	if (!ab_state.site_ok)
		return 0; /* errors from remote hooks would only fail jobs (Slurm bug 7573) */
	reexport(sp);
	if (ab_state.site.enforce)
		enforce(sp);
	return 0;
}

/* In the task, as the user, before the command: a refused launch ends here. */
int ab_remote_task_init(spank_t sp, int ac, char **av)
{
	uint32_t job = 0, step = 0;
	char mark[64], mine[64];

	(void)ac, (void)av;
	if (spank_getenv(sp, AB_ABORT_ENV, mark, sizeof(mark)) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
		return 0;
	snprintf(mine, sizeof(mine), "%u.%u", job, step);
	if (strcmp(mark, mine) != 0)
		return 0; /* not this step's verdict */
	fprintf(stderr, "autobatch: task not started: probing failed and on_failure=abort (or "
			"it was interrupted)\n");
	fflush(stderr);
	_exit(1);
}
