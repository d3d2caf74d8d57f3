/* search_model.c - what the trials say of the memory curve: the bracket (the largest fitting
 * and the smallest failing batch), the line through the fitting trials and its prediction of
 * where the limit is crossed (see search_run.h).
 */
#include "search_run.h"

#include <math.h>
#include <stdlib.h>

#define FAR_PARTNER 0.75 /* fit the line to a point at most this fraction of the top one */

bool search_is_candidate(const struct run *r, long b)
{
	return c_ceil(&r->c, (double)b) == b;
}

struct bracket search_bracket(const struct run *r)
{
	struct bracket k = {0};

	for (size_t i = 0; i < r->trials->n; i++) {
		const struct ab_trial *t = &r->trials->v[i];

		if (search_is_candidate(r, t->batch) && search_fits(r, t)) {
			k.nfit++;
			if (!k.lo || t->batch > k.lo->batch)
				k.lo = t;
		}
	}
	for (size_t i = 0; i < r->trials->n; i++) {
		const struct ab_trial *t = &r->trials->v[i];

		if (search_is_candidate(r, t->batch) && !search_fits(r, t) && (!k.lo || t->batch > k.lo->batch) &&
		    (!k.hi || t->batch < k.hi->batch))
			k.hi = t;
	}
	return k;
}

/* The fitting trial to draw the line through with lo: far below it for accuracy, but the
 * nearest such, since fragmentation bends the curve upward. */
const struct ab_trial *search_partner(const struct run *r, const struct ab_trial *lo)
{
	const struct ab_trial *far = NULL, *near = NULL;

	for (size_t i = 0; i < r->trials->n; i++) {
		const struct ab_trial *t = &r->trials->v[i];

		if (t == lo || !search_fits(r, t) || t->batch >= lo->batch)
			continue;
		if (t->batch <= FAR_PARTNER * (double)lo->batch && (!far || t->batch > far->batch))
			far = t;
		if (!near || t->batch < near->batch)
			near = t;
	}
	return far ? far : near;
}

/* Where the line through lo and its partner reaches the limit. */
double search_line_pred(const struct run *r, const struct bracket *k)
{
	const struct ab_trial *q = search_partner(r, k->lo);
	double plo = (double)k->lo->peak_bytes;
	double slope = (plo - (double)q->peak_bytes) / (double)(k->lo->batch - q->batch);

	return slope > 0 ? (double)k->lo->batch + ((double)r->limit - plo) / slope : INFINITY;
}

/* Where the least-squares line through every fitting trial meets the limit; INFINITY when
 * it does not rise. */
static double fit_all(const struct run *r)
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0, n = 0, slope;

	for (size_t i = 0; i < r->trials->n; i++) {
		const struct ab_trial *t = &r->trials->v[i];
		double x = (double)t->batch, y = (double)t->peak_bytes;

		if (!search_fits(r, t))
			continue;
		sx += x, sy += y, sxx += x * x, sxy += x * y, n++;
	}
	if (n < 2 || n * sxx - sx * sx <= 0 ||
	    (slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)) <= 0)
		return INFINITY;
	return ((double)r->limit - (sy - slope * sx) / n) / slope;
}

/* The batch (real-valued) at which the peak reaches the limit; INFINITY when flat. */
double search_predict(const struct run *r, const struct bracket *k)
{
	const struct ab_trial *lo = k->lo, *q = search_partner(r, lo);
	double plo = (double)lo->peak_bytes, L = (double)r->limit, secant, shifted;
	double slope = q ? (plo - (double)q->peak_bytes) / (double)(lo->batch - q->batch) : 0;

	if (k->hi) {
		/* Fragmentation bends the curve up: the secant through the bracket follows it.
		 * A workspace jump lifts it: the line moved up to the failing trial follows that.
		 * Both err low on the other's curve, so take the lower. A real OOM reports no
		 * peak; its peak was at least the total, which the secant then uses. */
		double phi = k->hi->has_peak ? (double)k->hi->peak_bytes : (double)r->p->total_bytes;

		if (phi <= plo)
			return INFINITY;
		secant = (double)lo->batch + (L - plo) * (double)(k->hi->batch - lo->batch) / (phi - plo);
		shifted = slope > 0 ? (double)k->hi->batch - (phi - L) / slope : secant;
		if (!k->hi->has_peak) /* both optimistic: the lower, the line's or the secant's */
			return slope > 0 ? fmin(secant, (double)lo->batch + (L - plo) / slope) : secant;
		return shifted > (double)lo->batch ? fmin(secant, shifted) : secant;
	}
	if (!q)
		return plo > 0 ? (double)lo->batch * L / plo : INFINITY; /* base >= 0 bound */
	if (k->nfit >= 3) /* noise averages out over all fits; a bend makes the pair's lower */
		return fmin(fit_all(r), search_line_pred(r, k));
	return search_line_pred(r, k);
}

/* The line's peak at batch b, through lo and its partner (NAN without a partner). */
double search_line_peak(const struct run *r, const struct bracket *k, double b)
{
	const struct ab_trial *q = search_partner(r, k->lo);
	double plo = (double)k->lo->peak_bytes;

	if (!q)
		return NAN;
	return plo + (plo - (double)q->peak_bytes) / (double)(k->lo->batch - q->batch) *
			     (b - (double)k->lo->batch);
}

/* How far the other fitting trials lie off the line through lo and its partner: the
 * noise (or a bend) the line's predictions carry. -1 with no third trial to judge by. */
double search_residual(const struct run *r, const struct bracket *k)
{
	const struct ab_trial *q = search_partner(r, k->lo);
	double worst = -1;

	for (size_t i = 0; i < r->trials->n; i++) {
		const struct ab_trial *t = &r->trials->v[i];

		if (t != k->lo && t != q && search_fits(r, t))
			worst = fmax(worst, fabs(search_line_peak(r, k, (double)t->batch) -
						 (double)t->peak_bytes));
	}
	return worst;
}
