/* settings.h - the effective settings: the site's policy applied to the user's request (the
 * fraction, the note a user is shown, the step hook), computed once per context by one rule.
 *
 * srun computes them when it records --autobatch, sbatch and salloc when they take the option
 * for the job, slurmstepd from the option it is handed; every hook of a context, the cache key
 * and enforce=on use that one result.
 */
#ifndef AUTOBATCH_SETTINGS_H
#define AUTOBATCH_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "request.h"
#include "site.h"

struct ab_effective {
	double fraction;
	char note[AB_ERR_MAX]; /* a clamp or the site's override, said to the user; "" if none */
	bool instrument;       /* the probe's Python step hook: the user's, else the site's */
	/* a trial of a step of several tasks: the user's, else gpu for a --autobatch-trial-command
	 * (a one-process command by its definition), else the site's */
	enum ab_shape shape;
};

/* The fraction to apply: the site's force_fraction, else the request's, else the site
 * default, then bounded by min/max per over_max. A clamp or an override leaves a note; a
 * denial is an error. */
int ab_settings_resolve(const struct ab_site *site, const struct ab_request *req,
			struct ab_effective *eff, char *err, size_t errlen);

/* Writes "key=value" lines describing the effective settings (for srun -v). */
int ab_settings_describe(const struct ab_site *site, const struct ab_request *req,
			 const struct ab_effective *eff, char *buf, size_t buflen);

#endif
