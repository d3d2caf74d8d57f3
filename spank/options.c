/* options.c - the user options: registered from the library's table, recorded by one
 * idempotent callback, and checked against the site policy in one place.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

/* Records --autobatch[=F]. sbatch propagates a bare --autobatch as the text "(null)"; the
 * first call after we aliased AUTOBATCH is the environment's value, named as such. */
static int set_autobatch(struct ab_ctx *c, const char *value, char *err, size_t errlen)
{
	value = ab_option_value(value);
	if (c->env_alias) {
		c->env_alias = false;
		return ab_request_from_env(&c->req, value ? value : "", err, errlen);
	}
	return ab_request_set(&c->req, AB_OPT_AUTOBATCH, value, err, errlen);
}

int ab_option_record(struct ab_ctx *c, int val, const char *value, int remote)
{
	char err[AB_ERR_MAX];
	int rc;

	/* slurmstepd re-runs the callbacks; the request was validated in srun already and
	 * remote context must not fail a launch over it. */
	if (remote)
		return 0;
	if (!c->site_ok) {
		slurm_error(AB_LOG_PREFIX "--%s cannot be used: the plugin is misconfigured (%s); "
			    "ask your administrator to fix plugstack.conf",
			    ab_options[val].name, c->site_err);
		return -1;
	}
	if (val == AB_OPT_AUTOBATCH)
		rc = set_autobatch(c, value, err, sizeof(err));
	else
		rc = ab_request_set(&c->req, (enum ab_option)val, value, err, sizeof(err));
	if (rc < 0) {
		slurm_error(AB_LOG_PREFIX "%s", err);
		return -1;
	}
	/* A denied fraction fails here, where srun stops on a refusal even for an
	 * optional plugin; the clamp note is printed once, after all options. */
	if (val == AB_OPT_AUTOBATCH && c->req.enabled)
		return ab_options_resolve(c, true);
	return 0;
}

/* After all options: resolved again, for an option given after --autobatch (its early
 * resolution was only for a denied fraction) changes the effective settings. */
int ab_options_settle(struct ab_ctx *c)
{
	return ab_options_resolve(c, false);
}

int ab_options_register(spank_t sp, spank_opt_cb_f cb)
{
	for (int i = 0; i < AB_OPT_COUNT; i++) {
		struct spank_option opt = {
			.name = (char *)ab_options[i].name,
			.arginfo = (char *)ab_options[i].arginfo,
			.usage = (char *)ab_options[i].usage,
			.has_arg = ab_options[i].has_arg,
			.val = i,
			.cb = cb,
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

int ab_options_resolve(struct ab_ctx *c, bool quiet)
{
	char err[AB_ERR_MAX];

	if (ab_settings_resolve(&c->site, &c->req, &c->eff, err, sizeof(err)) < 0) {
		slurm_error(AB_LOG_PREFIX "%s", err);
		c->failed = true;
		return -1;
	}
	if (c->eff.note[0] && !quiet)
		slurm_info(AB_LOG_PREFIX "%s", c->eff.note);
	return 0;
}
