/* trial_report.c - reading trial reports (see trial_report.h). */
#include "trial_report.h"

#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PEAK_MAX ((double)(1ULL << 60))

/* A finite number in [0, max], from a JSON number only. */
static bool number(struct json_object *obj, const char *key, double max, double *out)
{
	struct json_object *v;

	if (!json_object_object_get_ex(obj, key, &v) ||
	    !(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)))
		return false;
	*out = json_object_get_double(v);
	return isfinite(*out) && *out >= 0 && *out <= max;
}

static void parse_line(const char *line, size_t len, struct ab_trial_report *r)
{
	struct json_tokener *tok = json_tokener_new_ex(8);
	struct json_object *obj = NULL, *v;
	double step, samples, peak;
	bool used = false;

	if (tok) {
		json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
		obj = json_tokener_parse_ex(tok, line, (int)len);
		if (json_tokener_get_error(tok) != json_tokener_success)
			obj = (json_object_put(obj), NULL);
		json_tokener_free(tok);
	}
	if (obj && json_object_is_type(obj, json_type_object)) {
		if (number(obj, "step_s", 1e7, &step) && r->steps < AB_REPORT_MAX_STEPS) {
			r->step_s[r->steps] = step;
			r->samples[r->steps++] = number(obj, "samples", 1e12, &samples) ? samples : 0;
			used = true;
		}
		if (number(obj, "peak_bytes", PEAK_MAX, &peak)) {
			if (!r->has_peak || (uint64_t)peak > r->peak_bytes)
				r->peak_bytes = (uint64_t)peak;
			r->has_peak = used = true;
		}
		if (json_object_object_get_ex(obj, "oom", &v) && json_object_is_type(v, json_type_boolean)) {
			r->oom |= json_object_get_boolean(v);
			used = true;
		}
	}
	json_object_put(obj);
	r->bad_lines += !used;
}

void ab_trial_report_parse(const char *buf, size_t len, struct ab_trial_report *r)
{
	memset(r, 0, sizeof(*r));
	ab_trial_report_feed(buf, len, r);
}

void ab_trial_report_feed(const char *buf, size_t len, struct ab_trial_report *r)
{
	size_t start = 0;

	if (len > AB_REPORT_MAX_BYTES)
		len = AB_REPORT_MAX_BYTES;
	while (start < len) {
		const char *nl = memchr(buf + start, '\n', len - start);
		size_t end = nl ? (size_t)(nl - buf) : len, n = end - start;

		while (n > 0 && strchr(" \t\r", buf[start + n - 1]))
			n--;
		if (n > AB_REPORT_MAX_LINE)
			r->bad_lines++;
		else if (n > 0)
			parse_line(buf + start, n, r);
		start = end + 1;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double ab_median(double *v, size_t n)
{
	qsort(v, n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool ab_trial_report_timing(const struct ab_trial_report *r, long batch, double *step_s,
			    double *samples_per_s)
{
	double steps[AB_REPORT_MAX_STEPS], rates[AB_REPORT_MAX_STEPS];
	size_t n = 0;

	for (size_t i = 1; i < r->steps; i++) { /* step 0 is the warm-up */
		if (!(r->step_s[i] > 0))
			continue;
		steps[n] = r->step_s[i];
		rates[n++] = (r->samples[i] > 0 ? r->samples[i] : (double)batch) / r->step_s[i];
	}
	if (n == 0)
		return false;
	*step_s = ab_median(steps, n);
	*samples_per_s = ab_median(rates, n);
	return true;
}

bool ab_text_says_oom(const char *text, size_t len)
{
	static const char *const needles[] = {
		"CUDA out of memory", "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation",
		"RESOURCE_EXHAUSTED", "OutOfMemoryError", "OOM when allocating",
		"DefaultCPUAllocator: can't allocate memory", "std::bad_alloc", "MemoryError",
		"out of memory",
	};

	for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); i++)
		if (memmem(text, len, needles[i], strlen(needles[i])))
			return true;
	return false;
}
