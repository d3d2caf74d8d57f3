/* search_rounds.c - the sizes of a round: the trials a search runs at once, one per GPU,
 * beside the one a sequential search would run next (see search_run.h).
 */
#include "search_run.h"

#include <math.h>
#include <stdlib.h>

/* a round's sizes grow by this while no line is known */
#define GROWTH 4.0
/* a round's ladder around the prediction: a fit and a failure 3% apart */
#define ROUND_STEP 0.029

/* Adds candidate b to the round when it is new, in range and not yet measured. */
static void round_add(const struct run *r, long *v, size_t *n, size_t cap, long b, long lo,
		      long hi)
{
	if (*n == cap || b <= 0 || (lo && b <= lo) || (hi && b >= hi) || search_find(r, b))
		return;
	for (size_t i = 0; i < *n; i++)
		if (v[i] == b)
			return;
	v[(*n)++] = b;
}

/* The candidate j rungs from b: ROUND_STEP apart, and at least j candidates apart. */
static long rung(const struct run *r, long b, int j)
{
	long walk = b, far;

	for (int i = 0; i < abs(j) && walk; i++)
		walk = j > 0 ? c_next(&r->c, walk) : c_prev(&r->c, walk);
	if (!walk)
		return 0;
	far = j > 0 ? c_ceil(&r->c, (double)b * pow(1 + ROUND_STEP, j))
		    : c_floor(&r->c, (double)b * pow(1 + ROUND_STEP, j));
	if (!far)
		return walk;
	return j > 0 ? (far > walk ? far : walk) : (far < walk ? far : walk);
}

/* The round beside the one trial a sequential search runs next (v[0]): where the memory line
 * is not known yet, sizes growing by GROWTH, so that the largest fitting pair fixes a line
 * far out; once a line predicts the crossing, a ladder of ROUND_STEP steps around it, more
 * below than above (a line never overestimates an upward-bending curve), so that a fitting
 * and a failing size 3% apart end the search; inside a narrow bracket, sizes that split it
 * evenly. */
size_t search_plan_round(const struct run *r, const struct bracket *k, double pred, long *v,
			 size_t cap)
{
	static const int ladder[] = {-1, 1, -2, -3, 2, -4, -5, 3, -6, -7, 4, -8};
	long lo = k->lo ? k->lo->batch : 0, hi = k->hi ? k->hi->batch : 0;
	size_t n = 1;

	if (!k->lo && k->hi) {
		/* the first size failed: smaller ones, halving down to the smallest (v[0]) */
		for (double b = (double)k->hi->batch / 2; n < cap && b > (double)v[0]; b /= 2)
			round_add(r, v, &n, cap, c_floor(&r->c, b), 0, k->hi->batch);
		return n;
	}
	if (!hi && (!k->lo || k->nfit == 1 || isinf(pred))) {
		/* the first round, from a start above the smallest size (the config's batch):
		 * as far below it as above, for the answer may lie either side */
		bool both = r->trials->n == 0 && v[0] > c_first(&r->c);
		double up = (double)v[0], down = (double)v[0];

		for (size_t i = 1; i < 4 * cap && n < cap; i++) {
			if ((up *= GROWTH) <= (double)c_last(&r->c))
				round_add(r, v, &n, cap, c_floor(&r->c, up), lo, 0);
			if (both && (down /= GROWTH) >= (double)c_first(&r->c) && n < cap)
				round_add(r, v, &n, cap, c_ceil(&r->c, down), lo, 0);
		}
		return n;
	}
	if (hi) {
		/* a narrow bracket is split evenly; a wide one, where the model may be wrong by
		 * more than a ladder spans, gets half the round evenly and half around v[0] */
		bool narrow = (double)hi / (double)lo <= pow(1 + ROUND_STEP, (double)cap + 1);
		size_t even = narrow ? cap : cap >= 4 ? cap / 2 : 0;
		double step = pow((double)hi / (double)lo, 1.0 / (double)(even + 1));

		for (size_t i = 1; i <= even && n < cap; i++)
			round_add(r, v, &n, cap, c_floor(&r->c, (double)lo * pow(step, (double)i)), lo,
				  hi);
	}
	for (size_t i = 0; i < sizeof(ladder) / sizeof(ladder[0]) && n < cap; i++)
		round_add(r, v, &n, cap, rung(r, v[0], ladder[i]), lo, hi);
	return n;
}
