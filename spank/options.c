/* options.c - the user options: registered from the library's table, recorded by one
 * idempotent callback, and checked against the site policy in one place.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

/* Records --autobatch[=F]. sbatch propagates a bare --autobatch as the text "(null)"; the
 * first call after we aliased AUTOBATCH is the environment's value, named as such. */
static int set_autobatch(const char *optarg, char *err, size_t errlen)
{
	optarg = ab_option_value(optarg);
	if (ab_state.env_alias) {
		ab_state.env_alias = false;
		return ab_request_from_env(&ab_state.req, optarg ? optarg : "", err, errlen);
	}
	return ab_request_set(&ab_state.req, AB_OPT_AUTOBATCH, optarg, err, errlen);
}

static int option_cb(int val, const char *optarg, int remote)
{
	char err[AB_ERR_MAX];
	int rc;

	/* slurmstepd re-runs the callbacks; the request was validated in srun already and
	 * remote context must not fail a launch over it. */
	if (remote)
		return 0;
	if (!ab_state.site_ok) {
		slurm_error(AB_LOG_PREFIX "--%s cannot be used: the plugin is misconfigured (%s); "
			    "ask your administrator to fix plugstack.conf",
			    ab_options[val].name, ab_state.site_err);
		return -1;
	}
	if (val == AB_OPT_AUTOBATCH)
		rc = set_autobatch(optarg, err, sizeof(err));
	else
		rc = ab_request_set(&ab_state.req, (enum ab_option)val, optarg, err, sizeof(err));
	if (rc < 0) {
		slurm_error(AB_LOG_PREFIX "%s", err);
		return -1;
	}
	/* A denied fraction fails here, where srun stops on a refusal even for an
	 * optional plugin; the clamp note is printed once, after all options. */
	if (val == AB_OPT_AUTOBATCH)
		return ab_request_resolve(true);
	return 0;
}

int ab_options_register(spank_t sp)
{
	for (int i = 0; i < AB_OPT_COUNT; i++) {
		struct spank_option opt = {
			.name = (char *)ab_options[i].name,
			.arginfo = (char *)ab_options[i].arginfo,
			.usage = (char *)ab_options[i].usage,
			.has_arg = ab_options[i].has_arg,
			.val = i,
			.cb = option_cb,
		};
		spank_err_t rc = spank_option_register(sp, &opt);

		if (rc != ESPANK_SUCCESS) {
			slurm_error(AB_LOG_PREFIX "cannot register --%s: %s", opt.name,
				    spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}

int ab_request_resolve(bool quiet)
{
	char err[AB_ERR_MAX], note[AB_ERR_MAX];

	if (ab_resolve_fraction(&ab_state.site, &ab_state.req, &ab_state.fraction, note,
				sizeof(note), err, sizeof(err)) < 0) {
		slurm_error(AB_LOG_PREFIX "%s", err);
		ab_state.failed = true;
		return -1;
	}
	if (note[0] && !quiet)
		slurm_info(AB_LOG_PREFIX "%s", note);
	return 0;
}
