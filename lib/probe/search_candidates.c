/* search_candidates.c - the batch sizes a search may try: multiples of --multiple-of in
 * [--min, --max], or with a global batch the divisors that keep it (see search_run.h).
 */
#include "search_run.h"

#include <errno.h>
#include <math.h>
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

int search_cands_init(const struct ab_search_params *p, struct cands *c, char *err,
		      size_t errlen)
{
	long m = p->multiple_of > 0 ? p->multiple_of : 1;
	long lo = p->min > 0 ? p->min : 1, hi = p->max > 0 ? p->max : AB_BATCH_MAX;

	memset(c, 0, sizeof(*c));
	c->step = m;
	c->lo = (lo + m - 1) / m * m;
	c->hi = hi / m * m;
	if (c->lo > c->hi)
		return ab_fail(err, errlen, EINVAL, "no batch size is a multiple of %ld between %ld "
						    "and %ld: widen --min/--max or change --multiple-of",
			       m, lo, hi);
	if (!p->global_batch)
		return 0;
	if (p->devices < 1 || p->global_batch % p->devices)
		return ab_fail(err, errlen, EINVAL, "global batch %ld does not split evenly over "
						    "%ld devices",
			       p->global_batch, p->devices);
	if (add_divisors(c, p->global_batch / p->devices, c->lo, c->hi, m) < 0)
		return ab_fail(err, errlen, ENOMEM, "out of memory");
	if (c->n == 0)
		return ab_fail(err, errlen, EINVAL, "no batch size between %ld and %ld (a multiple "
						    "of %ld) divides the per-device batch %ld = %ld "
						    "/ %ld devices",
			       c->lo, c->hi, m, p->global_batch / p->devices, p->global_batch,
			       p->devices);
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
	return (long)(x / (double)c->step) * c->step;
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
	return (long)ceil(x / (double)c->step) * c->step;
}
