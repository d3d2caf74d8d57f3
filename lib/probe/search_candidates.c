/* search_candidates.c - the batch sizes a search may try: multiples of --multiple-of in
 * [--min, --max], or with a global batch the divisors that keep it, less what a batch ramp-up
 * refuses (see search_run.h).
 */
#include "search_run.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static int add_divisors(struct cands *c, long per_device, long lo, long hi, long m)
{
	for (long d = 1; d * d <= per_device; d++) {
		long pair[2] = {d, per_device / d};

		if (per_device % d)
			continue;
		for (int k = 0; k < (pair[0] == pair[1] ? 1 : 2); k++) {
			long *grown;

			if (pair[k] < lo || pair[k] > hi || pair[k] % m)
				continue;
			if (!(grown = realloc(c->list, (c->n + 1) * sizeof(*grown))))
				return -ENOMEM;
			c->list = grown;
			c->list[c->n++] = pair[k];
		}
	}
	return 0;
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return x < y ? -1 : x > y;
}

static long gcd(long a, long b)
{
	while (b) {
		long t = a % b;

		a = b, b = t;
	}
	return a;
}

/* A per-device ramp (MaxText): batches ramp_start + k x ramp_step, k >= 1, from lo up; with
 * --multiple-of m, those of them that are multiples of m, every lcm(step, m) from the first
 * (2 + 3k and 4: 8, 20, 32...). */
static int ramp_steps(const struct ab_search_params *p, struct cands *c, long m, char *err,
		      size_t errlen)
{
	long stride = p->ramp_step / gcd(p->ramp_step, m) * m, first = 0;

	for (long b = p->ramp_start + p->ramp_step; b <= p->ramp_start + stride; b += p->ramp_step)
		if (b % m == 0) {
			first = b;
			break;
		}
	if (!first)
		return ab_fail(err, errlen, EINVAL, "--multiple-of %ld and a batch ramp-up from %ld "
						    "by %ld: no batch is both; drop one",
			       m, p->ramp_start, p->ramp_step);
	if (c->lo < first)
		c->lo = first;
	else /* the first step of the ramp at or above lo */
		c->lo = first + (c->lo - first + stride - 1) / stride * stride;
	c->step = stride;
	c->hi = c->lo > c->hi ? c->lo - 1 : c->lo + (c->hi - c->lo) / c->step * c->step;
	if (c->lo > c->hi)
		return ab_fail(err, errlen, EINVAL, "no batch of the ramp-up from %ld by %ld lies "
						    "between %ld and %ld: widen --min/--max",
			       p->ramp_start, p->ramp_step, p->min > 0 ? p->min : 1,
			       p->max > 0 ? p->max : AB_BATCH_MAX);
	return 0;
}

/* A global ramp's stages as a list: "56, 64", or "16, 32, ... 64". */
static void ramp_stages(const struct ab_search_params *p, char *buf, size_t len)
{
	long next = p->ramp_start + p->ramp_step;

	if (next >= p->global_batch)
		snprintf(buf, len, "%ld, %ld", p->ramp_start, p->global_batch);
	else if (next + p->ramp_step >= p->global_batch)
		snprintf(buf, len, "%ld, %ld, %ld", p->ramp_start, next, p->global_batch);
	else
		snprintf(buf, len, "%ld, %ld, ... %ld", p->ramp_start, next, p->global_batch);
}

/* The per-device batch a global batch (and its ramp-up's stages) leaves to divide. */
static int per_device(const struct ab_search_params *p, long *out, char *err, size_t errlen)
{
	long g = p->global_batch;
	char stages[96];

	if (p->ramp_global && p->ramp_step > 0)
		g = gcd(gcd(g, p->ramp_start), p->ramp_step);
	if (p->devices >= 1 && g % p->devices == 0) {
		*out = g / p->devices;
		return 0;
	}
	if (!p->ramp_global || g == p->global_batch)
		return ab_fail(err, errlen, EINVAL, "global batch %ld does not split evenly over %ld "
						    "devices",
			       p->global_batch, p->devices);
	ramp_stages(p, stages, sizeof(stages));
	return ab_fail(err, errlen, EINVAL, "the ramp-up's global batches (%s) do not all split "
					    "evenly over %ld devices",
		       stages, p->devices);
}

/* No step of a batch ramp-up divides the per-device batch: the global batches its first
 * step (c->lo) would, nearest the one asked (MaxText refuses a batch off the ramp's steps;
 * a helper's 40 over 4 devices on a ramp from 3 by 5 was told of batches up to 16777213). */
static int no_ramp_step(const struct ab_search_params *p, const struct cands *c, long each,
			char *err, size_t errlen)
{
	long unit = c->lo * p->devices, g = each * p->devices;
	long below = g - g % unit;
	char as[64];

	if (below == 0)
		snprintf(as, sizeof(as), "%ld", unit);
	else
		snprintf(as, sizeof(as), "%ld or %ld", below, below + unit);
	return ab_fail(err, errlen, EINVAL, "no step of the batch ramp-up from %ld by %ld divides "
					    "the per-device batch %ld = %ld / %ld devices: give a "
					    "global batch that its step %ld divides over them, as %s",
		       p->ramp_start, p->ramp_step, each, g, p->devices, c->lo, as);
}

int search_cands_init(const struct ab_search_params *p, struct cands *c, char *err,
		      size_t errlen)
{
	long m = p->multiple_of > 0 ? p->multiple_of : 1;
	long lo = p->min > 0 ? p->min : 1, hi = p->max > 0 ? p->max : AB_BATCH_MAX, each = 0;
	bool ramp = p->ramp_step > 0 && !p->ramp_global;
	int rc;

	memset(c, 0, sizeof(*c));
	c->step = m;
	c->lo = (lo + m - 1) / m * m;
	c->hi = hi / m * m;
	if (c->lo > c->hi)
		return ab_fail(err, errlen, EINVAL, "no batch size is a multiple of %ld between %ld "
						    "and %ld: widen --min/--max or change --multiple-of",
			       m, lo, hi);
	if (ramp && (rc = ramp_steps(p, c, m, err, errlen)) < 0)
		return rc;
	if (!p->global_batch)
		return 0;
	if ((rc = per_device(p, &each, err, errlen)) < 0)
		return rc;
	if (add_divisors(c, each, c->lo, c->hi, m) < 0)
		return ab_fail(err, errlen, ENOMEM, "out of memory");
	for (size_t i = 0; ramp && i < c->n;) /* a ramp's step, too */
		if ((c->list[i] - p->ramp_start) % p->ramp_step)
			c->list[i] = c->list[--c->n];
		else
			i++;
	if (c->n == 0 && p->ramp_global && p->ramp_step > 0) {
		char stages[96];

		ramp_stages(p, stages, sizeof(stages));
		return ab_fail(err, errlen, EINVAL, "no batch size between %ld and %ld (a multiple "
						    "of %ld) divides the per-device batch %ld that "
						    "every global batch of the ramp-up (%s) leaves "
						    "over %ld devices",
			       c->lo, c->hi, m, each, stages, p->devices);
	}
	if (c->n == 0 && ramp)
		return no_ramp_step(p, c, each, err, errlen);
	if (c->n == 0)
		return ab_fail(err, errlen, EINVAL, "no batch size between %ld and %ld (a multiple "
						    "of %ld) divides the per-device batch %ld = %ld "
						    "/ %ld devices",
			       c->lo, c->hi, m, each, each * p->devices, p->devices);
	qsort(c->list, c->n, sizeof(long), cmp_long);
	return 0;
}

/* Largest candidate <= x, or 0. */
long c_floor(const struct cands *c, double x)
{
	if (c->list) {
		long best = 0;

		for (size_t i = 0; i < c->n && (double)c->list[i] <= x; i++)
			best = c->list[i];
		return best;
	}
	if (x < (double)c->lo)
		return 0;
	if (x >= (double)c->hi)
		return c->hi;
	/* from lo, which a ramp-up's steps need not start at a multiple of the step */
	return c->lo + (long)((x - (double)c->lo) / (double)c->step) * c->step;
}

/* Smallest candidate >= x, or 0. */
long c_ceil(const struct cands *c, double x)
{
	if (c->list) {
		for (size_t i = 0; i < c->n; i++)
			if ((double)c->list[i] >= x)
				return c->list[i];
		return 0;
	}
	if (x > (double)c->hi)
		return 0;
	if (x <= (double)c->lo)
		return c->lo;
	return c->lo + (long)ceil((x - (double)c->lo) / (double)c->step) * c->step;
}
