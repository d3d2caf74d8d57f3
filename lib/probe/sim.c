/* sim.c - the simulated GPU (see sim.h). A trial beyond the total is an OOM that reports no
 * peak, as a real one would; the hidden curve is only ever read through ab_sim_trial.
 */
#include "sim.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "number.h"
#include "size.h"

#define CURVE_MAX_POINTS 100000

void ab_sim_free(struct ab_sim *sim)
{
	free(sim->points);
	sim->points = NULL;
	sim->npoints = 0;
}

static int by_batch(const void *a, const void *b)
{
	const struct ab_sim_point *x = a, *y = b;

	return x->batch < y->batch ? -1 : x->batch > y->batch;
}

int ab_sim_set_curve(struct ab_sim *sim, struct ab_sim_point *points, size_t n, char *err,
		     size_t errlen)
{
	if (n < 2) {
		free(points);
		return ab_fail(err, errlen, EINVAL, "a sim curve needs at least 2 points");
	}
	qsort(points, n, sizeof(*points), by_batch);
	free(sim->points);
	sim->points = points;
	sim->npoints = n;
	return 0;
}

/* {"total_bytes": N, "points": [[batch, peak_bytes, step_s], ...]} */
static int read_point(struct json_object *p, struct ab_sim_point *out)
{
	size_t len = json_object_is_type(p, json_type_array) ? json_object_array_length(p) : 0;

	if (len < 2 || len > 3)
		return -EINVAL;
	out->batch = json_object_get_double(json_object_array_get_idx(p, 0));
	out->peak_bytes = json_object_get_double(json_object_array_get_idx(p, 1));
	out->step_s = len == 3 ? json_object_get_double(json_object_array_get_idx(p, 2)) : 0;
	if (!(out->batch > 0) || !(out->peak_bytes >= 0) || !(out->step_s >= 0) ||
	    !isfinite(out->batch) || !isfinite(out->peak_bytes) || !isfinite(out->step_s))
		return -EINVAL;
	return 0;
}

static int load_curve(struct ab_sim *sim, const char *path, char *err, size_t errlen)
{
	struct json_object *root, *total, *pts;
	struct ab_sim_point *points = NULL;
	size_t n = 0;
	int rc = -EINVAL;

	/* said as one sentence: json-c's own error names its function and ends in a newline */
	if (access(path, R_OK) < 0)
		return ab_fail(err, errlen, errno, "sim curve %s: %s", path, strerror(errno));
	if (!(root = json_object_from_file(path)))
		return ab_fail(err, errlen, EINVAL, "sim curve %s: not a JSON file", path);
	if (json_object_object_get_ex(root, "total_bytes", &total) && !sim->total_bytes)
		sim->total_bytes = (uint64_t)json_object_get_int64(total);
	if (!json_object_object_get_ex(root, "points", &pts) ||
	    !json_object_is_type(pts, json_type_array) ||
	    (n = json_object_array_length(pts)) > CURVE_MAX_POINTS) {
		rc = ab_fail(err, errlen, EINVAL, "sim curve %s: needs \"points\": [[batch, "
						  "peak_bytes, step_s], ...] (at most %d)",
			     path, CURVE_MAX_POINTS);
		goto done;
	}
	if (!(points = calloc(n ? n : 1, sizeof(*points)))) {
		rc = ab_fail(err, errlen, ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < n; i++)
		if (read_point(json_object_array_get_idx(pts, i), &points[i]) < 0) {
			rc = ab_fail(err, errlen, EINVAL, "sim curve %s: point %zu is not [batch > "
							  "0, peak_bytes >= 0, step_s >= 0]",
				     path, i);
			goto done;
		}
	rc = ab_sim_set_curve(sim, points, n, err, errlen);
	points = NULL;
done:
	free(points);
	json_object_put(root);
	return rc;
}


static int set_key(struct ab_sim *sim, const char *key, const char *v, char *err, size_t errlen)
{
	uint64_t bytes;
	double num;

	if (!strcmp(key, "total") || !strcmp(key, "base") || !strcmp(key, "per_sample") ||
	    !strcmp(key, "granule")) {
		if (ab_parse_size(v, &bytes, err, errlen) < 0)
			return ab_fail(err, errlen, EINVAL, "sim: %s=%s is not a size (e.g. 80GiB)",
				       key, v);
		if (key[0] == 't')
			sim->total_bytes = bytes;
		else if (key[0] == 'b')
			sim->base_bytes = (double)bytes;
		else if (key[0] == 'p')
			sim->per_sample_bytes = (double)bytes;
		else
			sim->granule = bytes;
		return 0;
	}
	if (!strcmp(key, "curve"))
		return load_curve(sim, v, err, errlen);
	/* a plain decimal; 16 digits hold every seed below 2^53; a misspelt key is named as one */
	if (strcmp(key, "step_s") && strcmp(key, "saturate") && strcmp(key, "jitter") &&
	    strcmp(key, "oom_floor") && strcmp(key, "seed"))
		num = -1;
	else if (ab_parse_decimal(v, 16, 0, 1e16, &num) < 0)
		return ab_fail(err, errlen, EINVAL, "sim: %s=%s is not a number", key, v);
	if (!strcmp(key, "step_s"))
		sim->step_s = num;
	else if (!strcmp(key, "saturate"))
		sim->saturate = num;
	else if (!strcmp(key, "jitter") && num < 0.5)
		sim->jitter = num;
	else if (!strcmp(key, "oom_floor") && num <= 1)
		sim->oom_floor = num;
	else if (!strcmp(key, "seed") && num >= 0 && num < 9007199254740992.0) /* 2^53: exact */
		sim->seed = (uint64_t)num;
	else
		return ab_fail(err, errlen, EINVAL,
			       "sim: unknown key '%s' (or bad value): use total, base, per_sample, "
			       "step_s, saturate, jitter (< 0.5), granule, seed (< 2^53), oom_floor "
			       "(<= 1), curve",
			       key);
	return 0;
}

int ab_sim_parse(const char *spec, struct ab_sim *sim, char *err, size_t errlen)
{
	char buf[4096], *item, *save = NULL;
	int keys = 0, rc;

	memset(sim, 0, sizeof(*sim));
	sim->step_s = 0.1;
	sim->seed = 1;
	if (ab_copy(buf, sizeof(buf), spec) < 0)
		return ab_fail(err, errlen, ENAMETOOLONG, "sim: spec too long");
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		if (!eq)
			return ab_fail(err, errlen, EINVAL, "sim: '%.40s' is not key=value", item);
		*eq = '\0';
		if ((rc = set_key(sim, item, eq + 1, err, errlen)) < 0) {
			ab_sim_free(sim);
			return rc;
		}
		keys += strcmp(item, "total") != 0;
	}
	sim->only_total = keys == 0;
	if (!sim->total_bytes) {
		ab_sim_free(sim);
		return ab_fail(err, errlen, EINVAL, "sim: total=SIZE is required (e.g. "
						    "sim:total=80GiB,base=12GiB,per_sample=300MiB)");
	}
	return 0;
}

/* ---- trials ------------------------------------------------------------------------ */

/* Deterministic noise in [-1, 1] for (seed, batch): the same batch measures the same. */
static double noise(uint64_t seed, long batch, uint64_t salt)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL ^ (uint64_t)batch * 0xbf58476d1ce4e5b9ULL ^ salt;

	x ^= x >> 31;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 29;
	return (double)(x >> 11) / (double)(1ULL << 53) * 2.0 - 1.0;
}

static void interpolate(const struct ab_sim *s, double b, double *peak, double *step)
{
	size_t i = 1;

	while (i < s->npoints - 1 && s->points[i].batch < b)
		i++;
	const struct ab_sim_point *a = &s->points[i - 1], *c = &s->points[i];
	double t = (b - a->batch) / (c->batch - a->batch);

	*peak = a->peak_bytes + t * (c->peak_bytes - a->peak_bytes);
	*step = a->step_s + t * (c->step_s - a->step_s);
	if (*step <= 0)
		*step = 0;
}

int ab_sim_trial(void *ctx, long batch, struct ab_trial *out, char *err, size_t errlen)
{
	struct ab_sim *s = ctx;
	double peak, step = 0;

	(void)err, (void)errlen;
	memset(out, 0, sizeof(*out));
	out->batch = batch;
	s->trials++;
	if (s->npoints)
		interpolate(s, (double)batch, &peak, &step);
	else
		peak = s->base_bytes + s->per_sample_bytes * (double)batch;
	if (step <= 0)
		step = s->step_s * (s->saturate > 0 && batch > s->saturate ? batch / s->saturate : 1);
	peak *= 1 + s->jitter * noise(s->seed, batch, 1);
	step *= 1 + s->jitter * noise(s->seed, batch, 2);
	if (s->granule)
		peak = ceil(peak / (double)s->granule) * (double)s->granule;
	out->seconds = 4 * step;
	if (!(peak <= (double)s->total_bytes)) { /* NaN from a wild curve is an OOM too */
		out->oom = true; /* a real OOM reports no peak either: at most a floor */
		if (s->oom_floor > 0 && isfinite(peak))
			out->floor_bytes = (uint64_t)(s->oom_floor * peak);
		return 0;
	}
	out->has_peak = true;
	out->peak_bytes = peak < 0 ? 0 : (uint64_t)peak;
	out->has_step = true;
	out->steps = 4; /* a simulated warm-up and three measured steps */
	out->step_s = step;
	out->samples_per_s = step > 0 ? (double)batch / step : 0;
	return 0;
}
