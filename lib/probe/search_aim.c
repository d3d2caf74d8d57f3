/* search_aim.c - where the search's next trial goes: the model's crossing, damped where the
 * line is uncertain, snapped to a batch whose outcome ends the search or moves an end of the
 * bracket, below an OOM's least bend, and under the noise for the budget's last trial.
 */
#include "search_run.h"

#include <math.h>

#define NEAR_BOUND 2.5   /* an OOM's bound within this factor of lo is near: aim close */
#define NEAR_SHARE 0.9   /* that share of the way from lo to a near bound */
#define LAST_MARGIN 0.02 /* the last trial aims at most this far under the limit */
#define DAMP_FROM 1.0    /* a line less certain than this aims short of its prediction */

/* The line's prediction, pulled back toward lo by how uncertain the line is: its rise
 * between the two trials against the noise a peak carries (NOISE_GUESS of it, each end).
 * Two small batches whose peaks differ by less than their noise give a slope that may be
 * wrong several times over: a jump to its prediction lands on an OOM or far short. Aiming
 * at the near end of the prediction's range instead fits, and gives a line over a long
 * baseline. */
static double damped(const struct run *r, const struct bracket *k, double pred)
{
	const struct ab_trial *q = search_partner(r, k->lo);
	double lo = (double)k->lo->batch, plo = (double)k->lo->peak_bytes, rise, noise, res;

	if (!q)
		return isinf(pred) ? 4.0 * lo : pred * (1 - AIM_BELOW);
	rise = plo - (double)q->peak_bytes;
	noise = NOISE_GUESS * (plo + (double)q->peak_bytes);
	if ((res = search_residual(r, k)) >= 0) /* a third trial shows the real noise */
		noise = fmax(res, QUIET * (double)r->limit);
	/* past the budget, steps this short cannot reach the crossing: a failure ends it */
	if ((rise > 0 && noise < DAMP_FROM * rise) || (int)r->new_rounds >= r->budget)
		return pred * (1 - AIM_BELOW);
	/* the steepest slope the two peaks allow, noise included, meets the limit here */
	return lo + ((double)r->limit - plo) * (lo - (double)q->batch) / (fmax(rise, 0) + noise);
}

/* Twice the noise a peak carries, as the fits off their line show it (a bend counts as
 * noise here: the last trial must fit), from NOISE_GUESS when they cannot, at most
 * LAST_MARGIN: a share of the limit. */
static double last_margin(const struct run *r, const struct bracket *k)
{
	double res = search_residual(r, k), L = (double)r->limit;

	if (res < 0)
		return NOISE_GUESS * 3 / 4;
	return fmin(fmax(2 * res / L, NOISE_GUESS * 3 / 4), LAST_MARGIN);
}

/* The budget's last trial: under the crossing by the noise a peak carries, along the slope
 * the bracket shows (the secant to a failure's peak, else the line through the fits). */
static double last_aim(const struct run *r, const struct bracket *k, double pred)
{
	double lo = (double)k->lo->batch, plo = (double)k->lo->peak_bytes, slope;
	const struct ab_trial *q = search_partner(r, k->lo);

	if (k->hi->has_peak && k->hi->peak_bytes > k->lo->peak_bytes)
		slope = ((double)k->hi->peak_bytes - plo) / ((double)k->hi->batch - lo);
	else if (q && k->lo->peak_bytes > q->peak_bytes)
		slope = (plo - (double)q->peak_bytes) / (lo - (double)q->batch);
	else
		return pred;
	return fmax(lo + 1, pred - last_margin(r, k) * (double)r->limit / slope);
}

/* Below the crossing of the least bend an OOM needs (top, an upper bound): near lo, most of
 * the way to it (a bend that just explains the OOM is the likeliest); far from lo, the
 * geometric middle or half of it (if higher), likely to fit and far enough from the fits
 * for the bend to show. */
static double refuted_aim(long lo, double top)
{
	if (top <= NEAR_BOUND * (double)lo)
		return (double)lo + NEAR_SHARE * (top - (double)lo);
	return fmax(sqrt((double)lo * top), top / 2);
}

/* The next batch to try. Below any failure: the line's prediction (or, with one trial, the
 * largest batch a non-negative base allows), at least 3% above lo. Inside a bracket: the
 * model's crossing, snapped to a candidate whose outcome ends the search. */
long search_choose(const struct run *r, const struct bracket *k, double pred, bool last)
{
	long lo = k->lo->batch, hi = k->hi ? k->hi->batch : 0, next;
	double target;

	if (!hi) {
		if (k->nfit == 1) /* the bound a non-negative base allows; at least 4x, for a
				   * baseline long enough that allocator jitter cannot tilt the line */
			target = fmax(pred, 4.0 * (double)lo);
		else
			target = damped(r, k, pred);
		/* Within the tolerance of the model's crossing, what is left is to show that
		 * nothing larger fits: the smallest candidate 3% above lo does, or moves lo. */
		target = fmax(target, (double)lo / (1 - AB_SEARCH_TOLERANCE) + 1);
		next = c_floor(&r->c, target);
		/* Coarse candidates (a global batch's divisors): when the one above is within
		 * the margin of the prediction, try it; a miss costs one trial, a hit saves one. */
		if (next && c_next(&r->c, next) &&
		    (double)(c_next(&r->c, next) - next) >
			    AB_SEARCH_TOLERANCE * (double)c_next(&r->c, next) &&
		    (double)c_next(&r->c, next) <= pred * (1 + MARGIN / 2))
			next = c_next(&r->c, next);
	} else {
		/* fail_goal: the largest candidate whose failure ends the search; goal: the
		 * smallest whose fit does. A model point beyond them snaps to them, so every
		 * trial ends the search or moves an end by at least the tolerance; where the
		 * model is blind (flat, or past the failure) the bracket is halved in log space. */
		long fail_goal = c_floor(&r->c, (double)lo / (1 - AB_SEARCH_TOLERANCE) + 1);
		long goal = c_ceil(&r->c, (1 - AB_SEARCH_TOLERANCE) * (double)c_prev(&r->c, hi));
		/* An OOM's peak is only known to be over the total: near the goal the secant
		 * is blind to it, and after two OOMs in a row it has shown it is lost. */
		const struct ab_trial *v = r->trials->v;
		size_t n = r->trials->n;
		bool lost = !k->hi->has_peak && n >= 2 && v[n - 1].oom && v[n - 2].oom;
		/* near the goal the line through the fits, blind to the OOM's peak, says more */
		double line = !k->hi->has_peak && !lost && pred >= (double)goal && pred < (double)hi
				      ? search_line_pred(r, k)
				      : NAN;

		if (line > (double)lo)
			pred = fmin(pred, line);
		bool blind = isnan(pred) || isinf(pred) || pred >= (double)hi || lost ||
			     (!k->hi->has_peak && pred >= (double)goal && !(line > (double)lo));
		/* An OOM the line did not foresee: the least bend it needs bounds the crossing,
		 * and the trial goes below that bound (refuted_aim). */
		double top = isnan(pred) ? fmin((double)hi, search_refuted_pred(r, k)) : (double)hi;

		target = !blind ? pred
			 : isnan(pred) ? refuted_aim(lo, top)
				       : sqrt((double)lo * top);
		if (fail_goal >= goal)
			target = fmin(fmax(target, (double)goal), (double)fail_goal);
		else if (target <= (double)fail_goal)
			target = (double)fail_goal;
		else if (target >= (double)goal)
			target = (double)goal;
		/* the last trial the budget allows: a fit that improves on lo is what counts,
		 * so aim under the crossing by twice the noise a peak may carry, along the
		 * bracket's secant (or the line, below an OOM), never at a long shot */
		if (last && !blind)
			target = fmin(target, last_aim(r, k, pred));
		next = c_floor(&r->c, target);
	}
	if (next <= lo)
		next = c_next(&r->c, lo);
	if (hi && next >= hi)
		next = c_prev(&r->c, hi);
	return next;
}
