/* srun.c - local context: turns the options and AUTOBATCH= into the effective settings,
 * decides (from the cache, else by the probe step), has the decision applied, and on failure
 * follows the site's on_failure policy. Planning and applying: srun_apply.c; the cache:
 * srun_cache.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "error.h"
#include "srun.h"

/* Slurm's logger prints a newline inside a message as '?': an error of several lines (a
 * failed trial's last output, quoted) is said a line at a time, then what follows from it;
 * a one-line error keeps its outcome on its line. outcome may be NULL. */
static void say_error(const char *err, const char *outcome)
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

static int refuse(const char *err)
{
	say_error(err, NULL);
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

bool ab_is_probe_step(void)
{
	const char *guard = getenv(AB_GUARD_ENV);
	char parent[32];

	snprintf(parent, sizeof(parent), "%ld", (long)getppid());
	return guard && strcmp(guard, parent) == 0;
}

int ab_srun_post_opt(spank_t sp, int ac, char **av)
{
	char err[AB_ERR_MAX];

	(void)sp, (void)ac, (void)av;
	if (!ab_state.site_ok || ab_state.failed || ab_is_probe_step())
		return 0; /* already reported; nothing of ours may act */
	if (ab_request_from_env(&ab_state.req, getenv(AB_ENV_REQUEST), err, sizeof(err)) < 0)
		return refuse(err);
	if (ab_request_check(&ab_state.req, err, sizeof(err)) < 0)
		return refuse(err);
	if (!ab_state.req.enabled)
		return 0;
	/* before srun makes its own job, only an existing allocation has an id */
	ab_state.in_allocation = getenv("SLURM_JOB_ID") != NULL;
	return ab_request_resolve(false);
}

/* ---- deciding ------------------------------------------------------------------------ */

/* A cached decision is applied here, before the launch. Anything else needs the probe, which
 * runs after the launch while the tasks wait (srun_hold.c): slurmd refuses a step credential
 * older than cred_expire, and srun created this step's before calling this hook. */
static int decide(spank_t sp, char *err, size_t errlen)
{
	struct ab_plan *pl = calloc(1, sizeof(*pl));
	struct ab_hold_answer vars;
	struct ab_result res;
	struct ab_cache cache;
	char *json = NULL, entry[AB_CACHE_NAME_MAX];
	int rc;

	if (!pl)
		return ab_fail(err, errlen, ENOMEM, "out of memory");
	if ((rc = ab_plan_job(sp, pl, err, errlen)) < 0)
		goto done;
	ab_srun_cache_open(&cache);
	if (ab_srun_cache_lookup(pl, &cache, entry, sizeof(entry), &res, &json) == 0) {
		pl->cached = true;
		if ((rc = ab_apply(pl, &res, res.eval_batch, json, &vars, err, errlen)) == 0)
			rc = ab_export_vars(&vars) < 0 ? -EIO : 0;
		ab_cache_close(&cache);
		goto done;
	}
	if ((rc = ab_srun_defer(pl, &cache, entry, err, errlen)) == 0)
		pl = NULL; /* the thread's now */
	else
		ab_cache_close(&cache);
done:
	free(json);
	free(pl);
	return rc;
}

/* Refuses the launch. Slurm ignores an optional plugin's refusal, and 22.05 leaks a step
 * refused inside an existing allocation (it stays RUNNING and blocks later sruns), so the
 * step's tasks are also told to end before running the command (remote.c); inside an
 * allocation that is the only refusal, which lets the step complete normally. */
static int refuse_launch(void)
{
	char mark[64];

	snprintf(mark, sizeof(mark), "%u.%u", ab_state.jobid, ab_state.stepid);
	setenv(AB_ABORT_ENV, mark, 1);
	return ab_state.in_allocation ? 0 : -1;
}

int ab_srun_policy(const char *err, int rc, enum ab_hold_verdict *verdict)
{
	*verdict = AB_HOLD_ABORT;
	if (rc == -EINTR) {
		say_error(err, "nothing was changed");
		return rc;
	}
	if (ab_state.site.on_failure == AB_ON_FAILURE_ABORT) {
		say_error(err, "the step is not launched (on_failure=abort)");
		return rc;
	}
	say_error(err, "launching with the original settings (on_failure=continue)");
	*verdict = AB_HOLD_CONTINUE;
	return 0;
}

int ab_srun_user_init(spank_t sp, int ac, char **av)
{
	char value[32], err[2 * AB_ERR_MAX];
	enum ab_hold_verdict verdict;
	int rc;

	(void)ac, (void)av;
	if (!ab_state.site_ok || ab_state.failed || !ab_state.req.enabled || ab_is_probe_step())
		return 0;
	describe(); /* here, not earlier: srun applies -v only after init_post_opt */
	snprintf(value, sizeof(value), "%g", ab_state.fraction);
	if (ab_export(AB_ENV_FRACTION, value) < 0)
		return -1;
	if ((rc = decide(sp, err, sizeof(err))) == 0 ||
	    ab_srun_policy(err, rc, &verdict) == 0)
		return 0;
	if (rc == -EINTR)
		/* srun aborts on a second interrupt within a second: give it, as the user's one
		 * Ctrl-C was meant for the whole srun */
		kill(getpid(), SIGINT);
	return refuse_launch();
}

void ab_srun_exit(void)
{
	ab_srun_defer_end();
}
