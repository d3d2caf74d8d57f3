/* trial_report.c - reading trial reports (see trial_report.h). */
#include "trial_report.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "protocol.h"
#include "size.h"

#define PEAK_MAX ((double)(1ULL << 60))
#define STEP_S_MIN 1e-6

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

/* The ranks' launcher's fields: every rank's peak, and the rank that bound the trial. */
static bool rank_fields(struct json_object *obj, struct ab_trial_report *r)
{
	struct json_object *a;
	double v;
	bool used = false;

	if (number(obj, "bound_rank", AB_REPORT_MAX_RANKS - 1, &v)) {
		r->bound_rank = (int)v, used = true;
		/* a rank held to its own node's memory, of another size than the trial's */
		r->bound_peak_bytes = number(obj, "bound_peak_bytes", PEAK_MAX, &v) ? (uint64_t)v : 0;
		r->bound_capacity_bytes = number(obj, "bound_capacity_bytes", PEAK_MAX, &v)
						  ? (uint64_t)v : 0;
	}
	if (json_object_object_get_ex(obj, "bound_node", &a) && json_object_is_type(a, json_type_string) &&
	    json_object_get_string_len(a) < (int)sizeof(r->bound_node) &&
	    ab_plain_name(json_object_get_string(a))) {
		snprintf(r->bound_node, sizeof(r->bound_node), "%s", json_object_get_string(a));
		used = true;
	}
	if (json_object_object_get_ex(obj, "rank_peaks", &a) && json_object_is_type(a, json_type_array) &&
	    json_object_array_length(a) <= AB_REPORT_MAX_RANKS) {
		size_t n = json_object_array_length(a);
		uint64_t peaks[AB_REPORT_MAX_RANKS];

		for (size_t i = 0; i < n; i++) {
			struct json_object *e = json_object_array_get_idx(a, i);

			if (!(json_object_is_type(e, json_type_int) || json_object_is_type(e, json_type_double)) ||
			    !isfinite(v = json_object_get_double(e)) || v < 0 || v > PEAK_MAX)
				return used; /* the array whole or not at all: never two reports mixed */
			peaks[i] = (uint64_t)v;
		}
		memcpy(r->rank_peak, peaks, n * sizeof(peaks[0]));
		r->nranks = n;
		used = true;
	}
	return used;
}

#define LENGTH_MAX 1e12

/* A step's "length", and the "lengths" the step hook says once of the dataset. */
static bool length_fields(struct json_object *obj, struct ab_trial_report *r)
{
	struct ab_lengths *l = &r->lengths;
	struct json_object *o, *b;
	double v, read, samples;
	bool used = false;

	if (number(obj, "length", LENGTH_MAX, &v) && v >= 1) {
		l->min = l->min && l->min < (long)v ? l->min : (long)v;
		l->max = l->max > (long)v ? l->max : (long)v;
		used = true;
	}
	if (json_object_object_get_ex(obj, "lengths", &o) && json_object_is_type(o, json_type_object) &&
	    number(o, "run_longest", LENGTH_MAX, &v) && number(o, "read", LENGTH_MAX, &read) &&
	    number(o, "samples", LENGTH_MAX, &samples) && read <= samples) {
		l->run_longest = (long)v, l->read = (long)read, l->samples = (long)samples;
		l->varies = json_object_object_get_ex(o, "varies", &b) &&
			    json_object_is_type(b, json_type_boolean) && json_object_get_boolean(b);
		l->longest_first = json_object_object_get_ex(o, "longest_first", &b) &&
				   json_object_is_type(b, json_type_boolean) &&
				   json_object_get_boolean(b);
		l->padded_to = number(o, "padded_to", LENGTH_MAX, &v) && v >= 1 ? (long)v : 0;
		l->said = used = true;
	}
	return used;
}

/* {"saved_bytes": N, "peak_bytes": P}: the rehearsed checkpoint, the largest said */
static bool save_fields(struct json_object *obj, struct ab_trial_report *r)
{
	struct json_object *v;
	double saved, peak;

	if (json_object_object_get_ex(obj, "saving", &v) && json_object_is_type(v, json_type_boolean))
		return r->saving = json_object_get_boolean(v), true;
	if (!number(obj, "saved_bytes", PEAK_MAX, &saved))
		return false;
	r->saving = false;
	if ((uint64_t)saved > r->saved_bytes)
		r->saved_bytes = (uint64_t)saved;
	if (number(obj, "peak_bytes", PEAK_MAX, &peak) && (uint64_t)peak > r->save_peak_bytes)
		r->save_peak_bytes = (uint64_t)peak;
	return true;
}

/* One measured step, its time and samples (0: the batch's own); false when the report is
 * full. */
static bool add_step(struct ab_trial_report *r, double step_s, double samples)
{
	if (r->steps >= AB_REPORT_MAX_STEPS)
		return false;
	r->step_s[r->steps] = step_s;
	r->samples[r->steps++] = samples;
	return true;
}

/* A step line's "held_bytes" (the step hook's, after each optimizer step): the warm-up's is
 * not compared, as it allocates the optimizer's state; each later one is to the one before. */
static void held_field(struct json_object *obj, struct ab_trial_report *r)
{
	struct json_object *exact;
	double held;

	if (r->steps < 2)
		return;
	if (!json_object_object_get_ex(obj, "held_exact", &exact) ||
	    !json_object_is_type(exact, json_type_boolean) || !json_object_get_boolean(exact))
		r->held_rough = true;
	if (!number(obj, "held_bytes", PEAK_MAX, &held) ||
	    (r->held_steps && (uint64_t)held <= r->held_last)) {
		r->held_flat = true;
		return;
	}
	if (r->held_steps) {
		uint64_t rise = (uint64_t)held - r->held_last;

		r->held_rise = r->held_steps == 1 || rise < r->held_rise ? rise : r->held_rise;
		r->held_rise_max = rise > r->held_rise_max ? rise : r->held_rise_max;
	} else {
		r->held_first = (uint64_t)held;
	}
	r->held_last = (uint64_t)held;
	r->held_steps++;
}

/* Each rise at least the floor makes the claim. Its figure, which a run's length multiplies
 * (search_trials.c), is their mean where they agree: the smallest would under-count a steady
 * growth; where one is more than twice another, the smallest, as a one-off allocation among
 * them (1 MiB, then 200) is no rate. */
uint64_t ab_trial_report_growth_floor(const struct ab_trial_report *r)
{
	return r->held_rough || !r->held_steps ? AB_GROWTH_MIN_BYTES : AB_GROWTH_EXACT_MIN_BYTES;
}

uint64_t ab_trial_report_growth(const struct ab_trial_report *r)
{
	bool steady = r->held_rise_max <= 2 * r->held_rise;
	uint64_t own = !r->held_flat && r->held_steps >= AB_GROWTH_MIN_STEPS &&
				       r->held_rise >= ab_trial_report_growth_floor(r)
			       ? steady ? (r->held_last - r->held_first) / (r->held_steps - 1)
					: r->held_rise
			       : 0;

	return own > r->held_said ? own : r->held_said;
}

/* A line that is none of the protocol's: counted, the first kept to quote */
static void bad_line(struct ab_trial_report *r, const char *line, size_t len)
{
	char text[sizeof(r->bad_first) + 1];

	if (!r->bad_lines++) {
		snprintf(text, sizeof(text), "%.*s", (int)len, line);
		ab_printable(text, r->bad_first, sizeof(r->bad_first));
	}
}

static void parse_line(const char *line, size_t len, struct ab_trial_report *r)
{
	struct json_tokener *tok = json_tokener_new_ex(8);
	struct json_object *obj = NULL, *v;
	double step, samples, peak;
	bool used = false, stepped = false;

	if (tok) {
		json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
		obj = json_tokener_parse_ex(tok, line, (int)len);
		if (json_tokener_get_error(tok) != json_tokener_success)
			obj = (json_object_put(obj), NULL);
		json_tokener_free(tok);
	}
	if (obj && json_object_is_type(obj, json_type_object)) {
		/* MaxText's metrics_file: one line per training step, {"perf/step_time_seconds": S,
		 * ..., "step": N, "run_name": R} (metric_logger.py), evaluation's without a time;
		 * a step's samples are the batch's own (0) */
		if (number(obj, "step", 1e12, &samples)) {
			if (number(obj, "perf/step_time_seconds", 1e7, &step) && add_step(r, step, 0))
				used = stepped = true;
			else if (json_object_object_get_ex(obj, "run_name", &v))
				used = true;
		}
		/* one line is one step at most, in either form */
		if (!stepped && number(obj, "step_s", 1e7, &step) &&
		    add_step(r, step, number(obj, "samples", 1e12, &samples) ? samples : 0)) {
			if (number(obj, "peak_bytes", PEAK_MAX, &peak) && (uint64_t)peak > r->step_peak_bytes)
				r->step_peak_bytes = (uint64_t)peak;
			held_field(obj, r);
			used = true;
		}
		if (number(obj, "peak_bytes", PEAK_MAX, &peak)) {
			if (!r->has_peak || (uint64_t)peak > r->peak_bytes)
				r->peak_bytes = (uint64_t)peak;
			r->has_peak = used = true;
		}
		used |= save_fields(obj, r);
		if (json_object_object_get_ex(obj, "oom", &v) && json_object_is_type(v, json_type_boolean)) {
			r->oom |= json_object_get_boolean(v);
			used = true;
		}
		if (json_object_object_get_ex(obj, "eval_awaited", &v) &&
		    json_object_is_type(v, json_type_boolean)) {
			r->eval_awaited |= json_object_get_boolean(v);
			used = true;
		}
		if (number(obj, AB_FIELD_FLOOR, PEAK_MAX, &peak)) {
			if ((uint64_t)peak > r->floor_bytes)
				r->floor_bytes = (uint64_t)peak;
			used = true;
		}
		used |= rank_fields(obj, r);
		used |= length_fields(obj, r);
		if (number(obj, "alloc_retries", LENGTH_MAX, &peak) && peak >= 1) {
			r->alloc_retries = r->alloc_retries > (long)peak ? r->alloc_retries : (long)peak;
			used = true;
		}
		if (number(obj, "held_growth_bytes", PEAK_MAX, &peak)) {
			/* the merge's latest: a worker's growth ends when a later step holds no
			 * more, and so does what was relayed of it */
			/* each process's floor was its own: the least is a device's */
			r->held_said = (uint64_t)peak >= AB_GROWTH_EXACT_MIN_BYTES ? (uint64_t)peak : 0;
			used = true;
		}
		if (number(obj, "eval_batches", LENGTH_MAX, &peak)) {
			r->eval_batches = r->eval_said && r->eval_batches > (long)peak ? r->eval_batches
										    : (long)peak;
			r->eval_said = used = true;
		}
	}
	json_object_put(obj);
	if (!used)
		bad_line(r, line, len);
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
			bad_line(r, buf + start, n);
		else if (n > 0)
			parse_line(buf + start, n, r);
		start = end + 1;
	}
}

uint64_t ab_trial_report_peak_over(const struct ab_trial_report *rep, uint64_t measured)
{
	return rep->has_peak && rep->peak_bytes > measured ? rep->peak_bytes : measured;
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

static void feed_watch(void *arg, const char *buf, size_t len)
{
	struct ab_report_watch *w = arg;

	ab_trial_report_feed(buf, len, &w->rep);
}

void ab_report_watch_read(struct ab_report_watch *w, bool final)
{
	ab_report_watch_lines(w, final, feed_watch, w);
}

void ab_report_watch_lines(struct ab_report_watch *w, bool final,
			   void (*on)(void *arg, const char *buf, size_t len), void *arg)
{
	char buf[2 * AB_REPORT_MAX_LINE];
	ssize_t n;

	while (w->fd >= 0 && w->parsed < (off_t)AB_REPORT_MAX_BYTES &&
	       (n = pread(w->fd, buf, sizeof(buf), w->parsed)) > 0) {
		const char *nl = memrchr(buf, '\n', (size_t)n);
		size_t take = nl ? (size_t)(nl - buf) + 1 : (size_t)n;

		if (!nl && !final && n < (ssize_t)sizeof(buf))
			return; /* a line still being written */
		if (w->skipping) { /* the rest of an overlong line is not a line of its own */
			const char *first = memchr(buf, '\n', take);

			size_t skip = first ? (size_t)(first - buf) + 1 : take;
			w->parsed += (off_t)skip;
			w->skipping = !first;
			continue;
		}
		if (nl || (final && n < (ssize_t)sizeof(buf))) {
			on(arg, buf, take); /* whole lines, or the ended writer's last one */
		} else { /* no line ends in a full buffer: too long, counted and skipped to its
			  * end, the ended writer's too (its tail is no line of its own) */
			w->rep.bad_lines++;
			w->skipping = true;
		}
		w->parsed += (off_t)take;
	}
}

bool ab_trial_report_timing(const struct ab_trial_report *r, long batch, double *step_s,
			    double *samples_per_s)
{
	double steps[AB_REPORT_MAX_STEPS], rates[AB_REPORT_MAX_STEPS];
	size_t n = 0;

	for (size_t i = 1; i < r->steps; i++) { /* step 0 is the warm-up */
		double rate = (r->samples[i] > 0 ? r->samples[i] : (double)batch) / r->step_s[i];

		/* a step of under a microsecond is no time measured: its rate is no rate */
		if (!(r->step_s[i] >= STEP_S_MIN) || !isfinite(rate))
			continue;
		steps[n] = r->step_s[i];
		rates[n++] = rate;
	}
	if (n == 0)
		return false;
	*step_s = ab_median(steps, n);
	*samples_per_s = ab_median(rates, n);
	return true;
}

bool ab_text_says_oom(const char *text, size_t len)
{
	/* What each layer prints when device (or host) memory runs out, from their sources:
	 * the CUDA driver and runtime; the CUDA libraries a framework calls first at a larger
	 * batch (cuBLAS's handle and workspace, cuDNN, cuFFT, cuSOLVER, cuSPARSE, cuRAND);
	 * NCCL's buffers ("Failed to CUDA calloc", or "Cuda failure 2 'out of memory'");
	 * ROCm's HSA runtime; XLA and its BFC allocator (JAX, TensorFlow); PyTorch's
	 * allocators; the C++ and Python runtimes; the kernel's ENOMEM. */
	static const char *const needles[] = {
		"CUDA out of memory", "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation",
		"CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED", "CUFFT_ALLOC_FAILED",
		"CUSOLVER_STATUS_ALLOC_FAILED", "CUSPARSE_STATUS_ALLOC_FAILED",
		"CURAND_STATUS_ALLOCATION_FAILED", "Failed to CUDA calloc", "hipErrorOutOfMemory",
		"HSA_STATUS_ERROR_OUT_OF_RESOURCES", "RESOURCE_EXHAUSTED", "ResourceExhaustedError",
		"OutOfMemoryError", "OOM when allocating", "DefaultCPUAllocator: can't allocate memory",
		"std::bad_alloc", "MemoryError", "Cannot allocate memory", "out of memory",
	};

	for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); i++)
		if (memmem(text, len, needles[i], strlen(needles[i])))
			return true;
	return false;
}

/* The size after needle at text[at]: "2.00 GiB", "20.00 MiB", "6815744000 bytes", read by
 * the one size parser once the blank between number and unit is gone. 0 when none follows. */
static uint64_t size_after(const char *text, size_t len, const char *needle, size_t *at)
{
	const char *p = memmem(text + *at, len - *at, needle, strlen(needle));
	char size[40], err[AB_ERR_MAX];
	size_t n = 0, u;
	uint64_t v;

	if (!p)
		return 0;
	*at = (size_t)(p - text) + strlen(needle);
	p = text + *at;
	while (p < text + len && *p == ' ')
		p++;
	while (p < text + len && n + 1 < 24 && (isdigit((unsigned char)*p) || *p == '.'))
		size[n++] = *p++;
	while (p < text + len && *p == ' ')
		p++;
	for (u = 0; p + u < text + len && u < 5 && isalpha((unsigned char)p[u]); u++)
		;
	if (!n || !u)
		return 0;
	if (u != 5 || strncmp(p, "bytes", 5)) { /* "bytes": the number alone */
		memcpy(size + n, p, u);
		n += u;
	}
	size[n] = '\0';
	if (ab_parse_size(size, &v, err, sizeof(err)) < 0 || !(v > 0 && (double)v < PEAK_MAX))
		return 0;
	return v;
}

/* The size before needle: "75.30 GiB is allocated by PyTorch", "14.56 GiB already
 * allocated"; searched from *at on. */
static uint64_t size_before(const char *text, size_t len, size_t from, const char *needle)
{
	const char *p = memmem(text + from, len - from, needle, strlen(needle));
	size_t end, q;

	if (!p)
		return 0;
	/* back over the unit and the number: at most 24 bytes */
	end = (size_t)(p - text);
	q = end > from + 24 ? end - 24 : from;
	while (q < end && !isdigit((unsigned char)text[q]))
		q++;
	while (q > from && (isdigit((unsigned char)text[q - 1]) || text[q - 1] == '.'))
		q--;
	return q < end ? size_after(text, end, "", &q) : 0;
}

uint64_t ab_text_oom_floor(const char *text, size_t len)
{
	uint64_t best = 0;
	size_t at = 0;

	/* PyTorch on CUDA, once per message */
	for (uint64_t tried; (tried = size_after(text, len, "Tried to allocate ", &at));) {
		uint64_t held = size_before(text, len, at, "is allocated by PyTorch");

		if (!held)
			held = size_before(text, len, at, "already allocated");
		best = held + tried > best ? held + tried : best;
	}
	at = 0; /* PyTorch on the CPU */
	for (uint64_t tried; (tried = size_after(text, len, "you tried to allocate", &at));)
		best = tried > best ? tried : best;
	/* XLA, its BFC allocator, NCCL's buffers: the request alone */
	static const char *const requests[] = {"while trying to allocate",
					       "ran out of memory trying to allocate",
					       "Failed to CUDA calloc"};

	for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
		at = 0;
		for (uint64_t tried; (tried = size_after(text, len, requests[i], &at));)
			best = tried > best ? tried : best;
	}
	return best;
}

size_t ab_trial_merge_evidence(const struct ab_trial_report *const *reps, size_t n,
			       struct ab_merge_said *said, char *buf, size_t buflen)
{
	long seen = n ? LONG_MAX : -1, retries = 0;
	bool awaited = false;
	uint64_t saved = 0, growth = 0;
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		const struct ab_lengths *l = &reps[i]->lengths;
		uint64_t g = ab_trial_report_growth(reps[i]);

		if (l->said && !said->lengths) {
			ab_append(buf, buflen, &len,
				  "{\"lengths\": {\"run_longest\": %ld, \"read\": %ld, \"samples\": "
				  "%ld, \"varies\": %s, \"longest_first\": %s, \"padded_to\": %ld}}\n",
				  l->run_longest, l->read, l->samples, l->varies ? "true" : "false",
				  l->longest_first ? "true" : "false", l->padded_to);
			said->lengths = true;
		}
		retries = reps[i]->alloc_retries > retries ? reps[i]->alloc_retries : retries;
		saved = reps[i]->saved_bytes > saved ? reps[i]->saved_bytes : saved;
		growth = g > growth ? g : growth;
		awaited |= reps[i]->eval_awaited;
		seen = !reps[i]->eval_said ? -1
		       : seen < 0 || reps[i]->eval_batches > seen ? seen
								  : reps[i]->eval_batches;
	}
	if (retries > said->retries)
		ab_append(buf, buflen, &len, "{\"alloc_retries\": %ld}\n", said->retries = retries);
	if (growth != said->growth) /* each change, back to none too: the reader keeps the last */
		ab_append(buf, buflen, &len, "{\"held_growth_bytes\": %" PRIu64 "}\n",
			  said->growth = growth);
	if (!said->saved && saved) { /* each rank's save peak is in its own peak */
		ab_append(buf, buflen, &len, "{\"saved_bytes\": %" PRIu64 "}\n", saved);
		said->saved = true;
	}
	if (!said->awaited && awaited) { /* before the count, which a reader then finds said */
		ab_append(buf, buflen, &len, "{\"eval_awaited\": true}\n");
		said->awaited = true;
	}
	if (!said->eval && seen >= 0) {
		ab_append(buf, buflen, &len, "{\"eval_batches\": %ld}\n", seen);
		said->eval = true;
	}
	if (len && buf[len - 1] != '\n') /* cut short: no line at all */
		buf[0] = '\0', len = 0;
	return len;
}

long ab_trial_merge_length(const struct ab_trial_report *const *reps, size_t n)
{
	long length = 0;

	for (size_t i = 0; i < n; i++)
		length = reps[i]->lengths.max > length ? reps[i]->lengths.max : length;
	return length;
}
