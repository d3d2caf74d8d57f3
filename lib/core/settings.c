/* settings.c - the effective settings: the site's policy applied to the user's request,
 * once per context (see settings.h).
 */
#include "settings.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

static int apply_bound(const struct ab_site *site, const struct ab_request *req, bool above,
		       double *out, char *note, size_t notelen, char *err, size_t errlen)
{
	double bound = above ? site->max_fraction : site->min_fraction;
	const char *where = above ? "above the site maximum" : "below the site minimum";
	char shown[AB_FRACTION_TEXT_MAX + 4];

	ab_printable(req->fraction_text, shown, sizeof(shown));
	if (site->over_max == AB_OVER_MAX_DENY)
		return ab_fail(err, errlen, ERANGE,
			       "%s=%s is %s %g (%s in plugstack.conf): ask for %s %g",
			       ab_source_name(req->source), shown, where, bound,
			       above ? "max_fraction" : "min_fraction",
			       above ? "at most" : "at least", bound);
	snprintf(note, notelen, "%s=%s is %s %g: using %g", ab_source_name(req->source), shown,
		 where, bound, bound);
	*out = bound;
	return 0;
}

static int resolve_fraction(const struct ab_site *site, const struct ab_request *req,
			    double *out, char *note, size_t notelen, char *err, size_t errlen)
{
	char shown[AB_FRACTION_TEXT_MAX + 4];

	if (notelen)
		note[0] = '\0';
	if (site->force_fraction > 0) {
		if (req->source != AB_SOURCE_DEFAULT && req->fraction != site->force_fraction)
			snprintf(note, notelen, "the site forces fraction %g: %s=%s is ignored",
				 site->force_fraction, ab_source_name(req->source),
				 ab_printable(req->fraction_text, shown, sizeof(shown)));
		*out = site->force_fraction;
		return 0;
	}
	if (req->source == AB_SOURCE_DEFAULT) {
		*out = site->default_fraction;
		return 0;
	}
	if (req->fraction > site->max_fraction)
		return apply_bound(site, req, true, out, note, notelen, err, errlen);
	if (req->fraction < site->min_fraction)
		return apply_bound(site, req, false, out, note, notelen, err, errlen);
	*out = req->fraction;
	return 0;
}

int ab_settings_resolve(const struct ab_site *site, const struct ab_request *req,
			struct ab_effective *eff, char *err, size_t errlen)
{
	memset(eff, 0, sizeof(*eff));
	eff->instrument = req->given & (1u << AB_OPT_INSTRUMENT) ? req->instrument
								 : site->instrument;
	eff->shape = req->given & (1u << AB_OPT_TRIAL_SHAPE) ? req->shape
		     : req->trial_command[0]		     ? AB_SHAPE_GPU
							     : site->trial_shape;
	return resolve_fraction(site, req, &eff->fraction, eff->note, sizeof(eff->note), err,
				errlen);
}

int ab_settings_describe(const struct ab_site *site, const struct ab_request *req,
			 const struct ab_effective *eff, char *buf, size_t buflen)
{
	char shown[AB_FRACTION_TEXT_MAX + 4], s[AB_ERR_MAX * 4], r[AB_ERR_MAX * 2];
	char from[AB_FRACTION_TEXT_MAX + 96];
	bool asked = req->source != AB_SOURCE_DEFAULT;

	ab_printable(req->fraction_text, shown, sizeof(shown));
	/* the site's forced value, and what was asked beside it: the user's value is theirs */
	if (site->force_fraction > 0)
		snprintf(from, sizeof(from), "force_fraction=%g%s%s%s%s", site->force_fraction,
			 asked ? ", not " : "", asked ? ab_source_name(req->source) : "",
			 asked ? "=" : "", asked ? shown : "");
	else
		snprintf(from, sizeof(from), "%s%s%s",
			 asked ? ab_source_name(req->source) : "default_fraction", asked ? "=" : "",
			 asked ? shown : "");
	if (ab_site_describe(site, s, sizeof(s)) < 0 || ab_request_describe(req, r, sizeof(r)) < 0)
		return -ENAMETOOLONG;
	/* the site's first line (its bounds) is the fraction's */
	return ab_format(buf, buflen, "fraction=%g (from %s; %.*s)\n%s\n%s instrument=%s "
				      "parallel=%s trial_shape=%s\n",
			 eff->fraction, from, (int)strcspn(s, "\n"), s, r, strchr(s, '\n') + 1,
			 eff->instrument ? "on" : "off", site->parallel ? "on" : "off",
			 ab_shape_names[eff->shape]);
}
