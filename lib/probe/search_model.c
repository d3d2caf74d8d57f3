/* search_model.c - what the trials say of the memory curve: the bracket (the largest fitting
 * and the smallest failing batch), the line through the fitting trials and its prediction of
 * where the limit is crossed (see search_run.h).
 */
#include "search_run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FAR_PARTNER 0.75 /* fit the line to a point at most this fraction of the top one */
/* fits that leave their line by more than this share of the top peak show a bend */
#define BEND_SEEN 0.014
/* fits this close to their quadratic show it is the curve, not noise on a line */
#define BEND_QUIET 0.002
/* an OOM whose peak was at least this much above what the line said refutes the line */
#define REFUTED 0.03

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

/* Where the line through lo and its partner reaches the limit; INFINITY without a partner
 * (one fit, then an OOM near the line's crossing: issue 40's SIGSEGV). */
double search_line_pred(const struct run *r, const struct bracket *k)
{
	const struct ab_trial *q = search_partner(r, k->lo);
	double plo = (double)k->lo->peak_bytes, slope;

	if (!q)
		return INFINITY;
	slope = (plo - (double)q->peak_bytes) / (double)(k->lo->batch - q->batch);
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

/* What a failing trial says its peak was at least: its peak when it reported one; for an
 * OOM the larger of the floor it reported and the device it overflowed. */
double search_peak_at_least(const struct run *r, const struct ab_trial *t)
{
	double device = (double)r->p->total_bytes - (double)r->p->reserve_bytes;

	if (t->has_peak)
		return (double)t->peak_bytes;
	return fmax((double)t->floor_bytes, device);
}

/* peak = x[0] + x[1] u + x[2] u^2, u = batch / scale */
struct bend {
	double x[3], scale;
};

/* Solves a 3x3 system by Cramer's rule: 0 and x, or -1 when it is singular. */
static int solve3(const double m[3][3], const double y[3], double x[3])
{
	double det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
		     m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
		     m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);

	if (!(fabs(det) > 1e-12))
		return -1;
	for (int c = 0; c < 3; c++) {
		double a[3][3];

		memcpy(a, m, sizeof(a));
		for (int i = 0; i < 3; i++)
			a[i][c] = y[i];
		x[c] = (a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) -
			a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
			a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0])) / det;
	}
	return 0;
}

/* Where peak = x0 + x1 u + x2 u^2 (u = b / scale) reaches L: the rising root; INFINITY. */
static double crossing(const double x[3], double scale, double L)
{
	double a = x[2], b = x[1], c = x[0] - L, disc;

	if (fabs(a) < 1e-12 * (fabs(b) + 1e-300))
		return b > 0 ? -c / b * scale : INFINITY;
	disc = b * b - 4 * a * c;
	if (disc < 0)
		return INFINITY;
	return (-b + sqrt(disc)) / (2 * a) * scale;
}

/* The least-squares quadratic through n points (b, peak), each weighted by w: 0 with its
 * coefficients in x, or -1 when the system is singular. */
static int lsq_quad(const double *b, const double *p, const double *w, size_t n, double scale,
		    double x[3])
{
	double m[3][3] = {{0}}, y[3] = {0};

	for (size_t i = 0; i < n; i++) {
		double u = b[i] / scale, pw[5] = {1, u, u * u, u * u * u, u * u * u * u};

		for (int a = 0; a < 3; a++) {
			for (int c = 0; c < 3; c++)
				m[a][c] += w[i] * pw[a + c];
			y[a] += w[i] * p[i] * pw[a];
		}
	}
	return n < 3 ? -1 : solve3(m, y, x);
}

/* The fitting trials' batches and peaks (at most max), returned how many. */
static size_t fit_points(const struct run *r, double *b, double *p, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < r->trials->n && n < max; i++)
		if (search_fits(r, &r->trials->v[i])) {
			b[n] = (double)r->trials->v[i].batch;
			p[n++] = (double)r->trials->v[i].peak_bytes;
		}
	return n;
}

#define MAX_POINTS 64

/* The least-squares quadratic through every fitting trial, for a curve that bends upward
 * (attention over long inputs, growing buckets, fragmentation): 0 with its coefficients in
 * *q, or -1 when fewer than three batches fit, it does not bend upward, or the fits do not
 * leave a line by more than a peak's noise. The bend must be seen, not guessed. */
static int fit_bend(const struct run *r, const struct bracket *k, struct bend *q)
{
	double b[MAX_POINTS], p[MAX_POINTS], w[MAX_POINTS], lin[3], worst = 0;
	size_t n = fit_points(r, b, p, MAX_POINTS);

	q->scale = (double)k->lo->batch;
	for (size_t i = 0; i < n; i++)
		w[i] = 1;
	if (lsq_quad(b, p, w, n, q->scale, q->x) < 0 || !(q->x[2] > 0))
		return -1;
	/* the line through the same fits: how far does a fit lie off it? */
	{
		double sx = 0, sy = 0, sxx = 0, sxy = 0, d;

		for (size_t i = 0; i < n; i++) {
			double u = b[i] / q->scale;

			sx += u, sy += p[i], sxx += u * u, sxy += u * p[i];
		}
		if (!((d = (double)n * sxx - sx * sx) > 0))
			return -1;
		lin[1] = ((double)n * sxy - sx * sy) / d;
		lin[0] = (sy - lin[1] * sx) / (double)n;
	}
	for (size_t i = 0; i < n; i++)
		worst = fmax(worst, fabs(p[i] - (lin[0] + lin[1] * b[i] / q->scale)));
	return worst > BEND_SEEN * (double)k->lo->peak_bytes ? 0 : -1;
}

/* Whether the fits (batches b, peaks p) leave the line through them, fitted to each peak's
 * share, by more than a bend's worth of their own size somewhere: the fits themselves bend,
 * which a workspace jump between them and a failure does not show. */
static bool fits_leave_line(const double *b, const double *p, size_t n)
{
	double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, d, slope, icpt;

	for (size_t i = 0; i < n; i++) {
		double w = 1 / (p[i] * p[i]) * p[n - 1] * p[n - 1];

		sw += w, sx += w * b[i], sy += w * p[i], sxx += w * b[i] * b[i],
			sxy += w * b[i] * p[i];
	}
	if (!((d = sw * sxx - sx * sx) > 0))
		return false;
	slope = (sw * sxy - sx * sy) / d;
	icpt = (sy - slope * sx) / sw;
	for (size_t i = 0; i < n; i++)
		if (fabs(icpt + slope * b[i] - p[i]) > BEND_SEEN * p[i])
			return true;
	return false;
}

/* A bend that runs through the failing trial's peak (or what its OOM says the peak was at
 * least) as well as three or more fits, each within a peak's noise of its own size
 * (weighted by it, so that the small batches' peaks count as much as the large): the
 * curve, where a line the fits alone cannot tell from a jump would be shifted up short of
 * it, or an OOM only bounded. -1 when no such bend exists. */
static int fit_through_failure(const struct run *r, const struct bracket *k, struct bend *q)
{
	double b[MAX_POINTS + 1], p[MAX_POINTS + 1], w[MAX_POINTS + 1];
	size_t n = fit_points(r, b, p, MAX_POINTS);

	if (n < 3 || !k->hi || !fits_leave_line(b, p, n))
		return -1;
	b[n] = (double)k->hi->batch, p[n++] = search_peak_at_least(r, k->hi);
	q->scale = (double)k->lo->batch;
	for (size_t i = 0; i < n; i++)
		w[i] = ((double)k->lo->peak_bytes / p[i]) * ((double)k->lo->peak_bytes / p[i]);
	if (lsq_quad(b, p, w, n, q->scale, q->x) < 0 || !(q->x[2] > 0))
		return -1;
	for (size_t i = 0; i < n; i++) {
		double u = b[i] / q->scale;

		if (fabs(q->x[0] + q->x[1] * u + q->x[2] * u * u - p[i]) > NOISE_GUESS * p[i])
			return -1;
	}
	return 0;
}

static double bend_peak(const struct bend *q, double b)
{
	double u = b / q->scale;

	return q->x[0] + q->x[1] * u + q->x[2] * u * u;
}

double search_bend_pred(const struct run *r, const struct bracket *k)
{
	struct bend q;

	return fit_bend(r, k, &q) == 0 ? crossing(q.x, q.scale, (double)r->limit) : INFINITY;
}

double search_bend_checked(const struct run *r, const struct bracket *k)
{
	struct bend q;
	double worst = 0, L = (double)r->limit;

	/* one bend through the fits and the failure (its peak, or its OOM's floor) */
	if (fit_through_failure(r, k, &q) == 0)
		return crossing(q.x, q.scale, L);
	if (fit_bend(r, k, &q) < 0)
		return INFINITY;
	/* a failure with a peak the bend foresaw within a peak's noise checks it... */
	if (k->hi && k->hi->has_peak &&
	    fabs(bend_peak(&q, (double)k->hi->batch) - (double)k->hi->peak_bytes) <=
		    BEND_SEEN * (double)k->hi->peak_bytes)
		return crossing(q.x, q.scale, L);
	/* ...and so do four or more fits on it, none off by more than a quiet curve's noise */
	if (k->nfit < 4)
		return INFINITY;
	for (size_t i = 0; i < r->trials->n; i++) {
		const struct ab_trial *t = &r->trials->v[i];

		if (search_fits(r, t))
			worst = fmax(worst, fabs(bend_peak(&q, (double)t->batch) -
						 (double)t->peak_bytes));
	}
	return worst <= BEND_QUIET * L ? crossing(q.x, q.scale, L) : INFINITY;
}

/* The upward bend the least fits a failing trial at least needs: the quadratic through lo,
 * its partner and what the failure says its peak was at least. Where that reaches the limit
 * (the true crossing of a curve that bends at least that much lies below it), or INFINITY
 * when the line through lo and its partner already explains the failure. */
double search_refuted_pred(const struct run *r, const struct bracket *k)
{
	const struct ab_trial *q = search_partner(r, k->lo);
	double scale = (double)k->lo->batch, m[3][3], y[3], x[3];
	const struct ab_trial *pts[3] = {q, k->lo, k->hi};

	if (!q || !k->hi || k->hi->has_peak)
		return INFINITY;
	/* a line two peaks within their noise of each other drew was never believed */
	if ((double)k->lo->peak_bytes - (double)q->peak_bytes <
	    NOISE_GUESS * ((double)k->lo->peak_bytes + (double)q->peak_bytes))
		return INFINITY;
	y[2] = search_peak_at_least(r, k->hi);
	if (search_line_peak(r, k, (double)k->hi->batch) >= (1 - REFUTED) * y[2])
		return INFINITY; /* the line foresaw the failure: no bend shown */
	for (int i = 0; i < 3; i++) {
		double u = (double)pts[i]->batch / scale;

		m[i][0] = 1, m[i][1] = u, m[i][2] = u * u;
		if (i < 2)
			y[i] = (double)pts[i]->peak_bytes;
	}
	if (solve3(m, y, x) < 0)
		return INFINITY;
	return crossing(x, scale, (double)r->limit);
}

/* The batch (real-valued) at which the peak reaches the limit; INFINITY when flat, NAN when
 * an OOM refuted the line and only a bisection is left to learn the bend from. */
double search_predict(const struct run *r, const struct bracket *k)
{
	const struct ab_trial *lo = k->lo, *q = search_partner(r, lo);
	double plo = (double)lo->peak_bytes, L = (double)r->limit, secant, shifted;
	double slope = q ? (plo - (double)q->peak_bytes) / (double)(lo->batch - q->batch) : 0;
	struct bend bq;
	bool bent = fit_bend(r, k, &bq) == 0;
	double bend = bent ? crossing(bq.x, bq.scale, L) : INFINITY;

	if (k->hi) {
		/* Fragmentation bends the curve up: the secant through the bracket follows it.
		 * A workspace jump lifts it: the line moved up to the failing trial follows that.
		 * Both err low on the other's curve, so take the lower. An OOM's peak was at least
		 * its floor or the device, which the secant then uses. A bend the fits show is
		 * lower still where it is. */
		double phi = search_peak_at_least(r, k->hi), refuted;

		if (phi <= plo)
			return INFINITY;
		secant = (double)lo->batch + (L - plo) * (double)(k->hi->batch - lo->batch) / (phi - plo);
		/* the shift needs a line worth shifting: two peaks further apart than their noise */
		shifted = slope > 0 && plo - (double)q->peak_bytes >=
					       NOISE_GUESS * (plo + (double)q->peak_bytes)
				  ? (double)k->hi->batch - (phi - L) / slope
				  : secant;
		/* A bend the fits show that foresaw the failure is the curve: the secant to a
		 * point far up a convex curve would aim short of it, the shift is for jumps. An
		 * OOM's floor is only foreseen (its peak may be higher); a measured peak must be
		 * met within a peak's noise. */
		if (bent && (k->hi->has_peak
				     ? fabs(bend_peak(&bq, (double)k->hi->batch) - phi) <= BEND_SEEN * phi
				     : bend_peak(&bq, (double)k->hi->batch) >= (1 - REFUTED) * phi))
			return bend;
		if (!k->hi->has_peak) { /* both optimistic: the lower, the line's or the secant's */
			double line = slope > 0 ? fmin(secant, (double)lo->batch + (L - plo) / slope)
						: secant;

			/* A bend the fits do not show yet: the least one the OOM needs is a bound,
			 * near enough to aim at, else the bracket is bisected below it. */
			if (fit_through_failure(r, k, &bq) == 0)
				return crossing(bq.x, bq.scale, L);
			refuted = search_refuted_pred(r, k);
			if (isfinite(refuted) && !bent)
				return NAN;
			return fmin(line, bend);
		}
		/* a bend the fits show is no jump either: the secant or the bend, not the shift */
		if (bent)
			return fmin(secant, bend);
		if (fit_through_failure(r, k, &bq) == 0)
			return fmin(secant, crossing(bq.x, bq.scale, L));
		/* a shift within the tolerance of lo is spent: lo fit where it put the crossing,
		 * so any jump lies above lo and the secant is what is left to aim by */
		if (shifted <= (double)lo->batch / (1 - AB_SEARCH_TOLERANCE))
			return secant;
		return fmin(secant, shifted);
	}
	if (!q)
		return plo > 0 ? (double)lo->batch * L / plo : INFINITY; /* base >= 0 bound */
	if (k->nfit >= 3) /* noise averages out over all fits; a bend makes the pair's lower */
		return fmin(fmin(fit_all(r), search_line_pred(r, k)), bend);
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
