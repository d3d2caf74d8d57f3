/* decision.c - see decision.h. */
#include "decision.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "protocol.h"
#include "input_limits.h"
#include "size.h"

static bool get_long(struct json_object *o, const char *key, long min, long max, long *out)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		return false;
	*out = (long)json_object_get_int64(v);
	return *out >= min && *out <= max;
}

static bool get_double(struct json_object *o, const char *key, double *out)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)))
		return false;
	*out = json_object_get_double(v);
	return isfinite(*out);
}

/* A string from the report, made printable before anyone sees it; newlines kept where
 * lines is set (the error, which may quote a trial's last lines: said a line at a time). */
static void get_string(struct json_object *o, const char *key, char *buf, size_t buflen,
		       bool lines)
{
	struct json_object *v;

	buf[0] = '\0';
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return;
	if (lines)
		ab_printable_lines(json_object_get_string(v), buf, buflen);
	else
		ab_printable(json_object_get_string(v), buf, buflen);
}

static void get_text(struct json_object *o, const char *key, char *buf, size_t buflen)
{
	get_string(o, key, buf, buflen, false);
}

/* A byte count (a JSON number, maybe written as a double); unchanged unless one. */
static void get_bytes(struct json_object *o, const char *key, uint64_t *out)
{
	double v = 0;

	if (get_double(o, key, &v) && v >= 1 && v < 9.2e18)
		*out = (uint64_t)v;
}

/* The eval probe's trials and seconds, kept beside its batch in a report or cache entry. */
static void read_eval_probe(struct json_object *o, struct ab_result *r)
{
	struct json_object *e;
	long n;

	if (!r->eval_batch || !json_object_object_get_ex(o, AB_FIELD_EVAL_PROBE, &e) ||
	    !json_object_is_type(e, json_type_object) || !get_long(e, AB_FIELD_TRIALS, 1, 1L << 20, &n))
		return;
	r->eval_trials = (size_t)n;
	get_double(e, AB_FIELD_ELAPSED_S, &r->eval_elapsed_s);
}

/* A warm start's entry and whether its batch verified. */
static void read_warm(struct json_object *o, struct ab_result *r)
{
	struct json_object *w, *v;

	if (!json_object_object_get_ex(o, AB_FIELD_WARM_START, &w) ||
	    !json_object_is_type(w, json_type_object))
		return;
	get_text(w, AB_FIELD_WARM_FROM, r->warm_from, sizeof(r->warm_from));
	r->warm_verified = json_object_object_get_ex(w, "verified", &v) &&
			   json_object_get_boolean(v);
}

void ab_lengths_text(const struct ab_lengths *l, char *buf, size_t buflen, size_t *len)
{
	if (l->said && l->padded_to && l->max == l->padded_to)
		ab_append(buf, buflen, len, "; measured at the config's %s of %ld (the batches are "
					    "streamed: the trials padded them to it, the longest any "
					    "batch can be)",
			  l->config_key[0] ? l->config_key : "maximum length", l->padded_to);
	else if (l->said && l->longest_first && l->read == l->samples && l->max >= l->run_longest)
		ab_append(buf, buflen, len, "; measured at the run's longest batch (length %ld: "
					    "the dataset's longest samples first)",
			  l->max);
	else if (l->said && l->longest_first && l->config_max && l->max >= l->config_max &&
		 l->run_longest > l->config_max)
		/* the longest samples came first and their batches were no longer than the
		 * config's maximum: the collator cuts them to it */
		ab_append(buf, buflen, len, "; measured at the config's %s of %ld, to which the "
					    "run's longer samples (up to %ld) are cut",
			  l->config_key[0] ? l->config_key : "maximum length", l->config_max,
			  l->run_longest);
	else if (l->said && l->longest_first)
		ab_append(buf, buflen, len, "; measured at length %ld, the longest of %ld of %ld "
					    "samples read in time: a longer one may not fit",
			  l->max, l->read, l->samples);
	else if (l->max && l->min != l->max) {
		ab_append(buf, buflen, len, "; the trials' batches varied in length (%ld to %ld) "
					    "and autobatch could not see the run's longest (no "
					    "DataLoader over a dataset of known size: batches "
					    "built by hand, or streamed): a longer batch",
			  l->min, l->max);
		if (l->config_max > l->max)
			ab_append(buf, buflen, len, ", up to the config's %s of %ld,", l->config_key,
				  l->config_max);
		ab_append(buf, buflen, len, " may not fit");
	}
}

void ab_ramp_text(const struct ab_ramp *r, long batch, long devices, char *buf, size_t buflen,
		  size_t *len)
{
	if (r->step > 0 && !r->global)
		ab_append(buf, buflen, len, "; a step of the batch ramp-up from %ld by %ld (trials "
					    "ran it with %s false)",
			  r->start, r->step, r->key[0] ? r->key : "the ramp");
	else if (r->step > 0)
		ab_append(buf, buflen, len, "; every stage of the global batch ramp-up from %ld by "
					    "%ld splits into batches of %ld over %ld devices",
			  r->start, r->step, batch, devices > 0 ? devices : 1);
}

void ab_eval_in_training_text(const struct ab_eval_in_training *e, char *buf, size_t buflen,
			      size_t *len)
{
	if (e->every > 0 && e->seen > 0)
		ab_append(buf, buflen, len, "; the peak holds evaluation inside training (%s %ld: "
					    "%ld eval batches after the trial's last step)",
			  e->key, e->every, e->seen);
	else if (e->every > 0)
		ab_append(buf, buflen, len, "; the config evaluates inside training (%s %ld), but "
					    "the trial saw no evaluation after its steps: its peak "
					    "is not in this decision",
			  e->key, e->every);
}

void ab_growth_text(const struct ab_growth *g, char *buf, size_t buflen, size_t *len)
{
	char size[32], peak[32];

	if (g->per_step && g->run_steps > 0)
		ab_append(buf, buflen, len, "; sized for the run's %ld steps (%s): what its trial "
					    "held between steps grew by %s at each, so its peak is "
					    "counted as %s at the last",
			  g->run_steps, g->run_key[0] ? g->run_key : "its length",
			  ab_format_size(g->per_step, size, sizeof(size)),
			  ab_format_size(g->run_peak, peak, sizeof(peak)));
	else if (g->per_step)
		ab_append(buf, buflen, len, "; what its trial held between steps grew by %s at each: "
					    "at that rate the run passes the limit after about %ld "
					    "step%s (does it keep each step's loss or outputs?)",
			  ab_format_size(g->per_step, size, sizeof(size)), g->steps_to_limit,
			  g->steps_to_limit == 1 ? "" : "s");
}

/* The report's "held_growth" (lib/probe/report.c). */
static void read_growth(struct json_object *o, struct ab_growth *g)
{
	struct json_object *h;
	long per_step;

	if (!json_object_object_get_ex(o, AB_FIELD_HELD_GROWTH, &h) ||
	    !json_object_is_type(h, json_type_object) ||
	    !get_long(h, "bytes_per_step", 1, 1L << 60, &per_step) ||
	    !get_long(h, "steps_to_limit", 0, 1L << 60, &g->steps_to_limit)) {
		memset(g, 0, sizeof(*g));
		return;
	}
	g->per_step = (uint64_t)per_step;
	/* sized for the run's length: all three, or none */
	if (!get_long(h, "run_steps", 1, 1L << 40, &g->run_steps)) {
		g->run_steps = 0; /* get_long leaves what it read, in range or not */
		return;
	}
	get_bytes(h, "run_peak_bytes", &g->run_peak);
	get_text(h, "run_steps_key", g->run_key, sizeof(g->run_key));
	if (!g->run_peak || !g->run_key[0])
		g->run_steps = 0;
}

/* The report's "eval_in_training" (lib/probe/report.c). */
static void read_eval_in_training(struct json_object *o, struct ab_eval_in_training *e)
{
	struct json_object *g;

	if (!json_object_object_get_ex(o, AB_FIELD_EVAL_IN_TRAINING, &g) ||
	    !json_object_is_type(g, json_type_object) ||
	    !get_long(g, "every", 1, 1L << 40, &e->every) ||
	    !get_long(g, "seen", 0, 1L << 40, &e->seen)) {
		e->every = e->seen = 0;
		return;
	}
	get_text(g, "key", e->key, sizeof(e->key));
}

/* The report's "ramp_up" (lib/probe/report.c). */
static void read_ramp(struct json_object *o, struct ab_ramp *r)
{
	struct json_object *g, *v;

	if (!json_object_object_get_ex(o, AB_FIELD_RAMP_UP, &g) ||
	    !json_object_is_type(g, json_type_object) ||
	    !get_long(g, "start", 1, 1L << 40, &r->start) ||
	    !get_long(g, "step", 1, 1L << 40, &r->step)) {
		r->step = 0;
		return;
	}
	r->global = json_object_object_get_ex(g, "of", &v) &&
		    json_object_is_type(v, json_type_string) &&
		    !strcmp(json_object_get_string(v), "global");
	get_text(g, "trials_off", r->key, sizeof(r->key));
}

/* The report's "lengths" (lengths_json in lib/probe/report.c). */
static void read_lengths(struct json_object *o, struct ab_lengths *l)
{
	struct json_object *g, *v;

	if (!json_object_object_get_ex(o, AB_FIELD_LENGTHS, &g) ||
	    !json_object_is_type(g, json_type_object))
		return;
	get_long(g, "measured", 1, 1L << 40, &l->max);
	get_long(g, "measured_min", 1, 1L << 40, &l->min);
	/* a stream padded to the config's cap has no sample count: its cap says it */
	get_long(g, "padded_to", 1, 1L << 40, &l->padded_to);
	l->said = get_long(g, "run_longest", 0, 1L << 40, &l->run_longest) &&
		  (get_long(g, "samples", 0, 1L << 40, &l->samples) || l->padded_to);
	get_long(g, "read", 0, 1L << 40, &l->read);
	get_long(g, "config_max", 1, 1L << 40, &l->config_max);
	get_text(g, "config_key", l->config_key, sizeof(l->config_key));
	l->varies = json_object_object_get_ex(g, "varies", &v) && json_object_get_boolean(v);
	l->longest_first = json_object_object_get_ex(g, "longest_first", &v) &&
			   json_object_get_boolean(v);
}

/* The longest of the trials' "seconds" (a cut-short search's next job weighs its window by
 * it); 0 where none says. */
static double longest_trial(struct json_object *trials)
{
	double longest = 0, s;

	for (size_t i = 0; i < json_object_array_length(trials); i++) {
		struct json_object *t = json_object_array_get_idx(trials, i);

		if (json_object_is_type(t, json_type_object) && get_double(t, "seconds", &s) &&
		    s > longest && s < 1e7)
			longest = s;
	}
	return longest;
}

/* The largest peak the fitting trials of BATCH showed (a batch run again shows each run's):
 * what the chosen batch was measured at. 0 where none says a peak. */
static uint64_t chosen_peak(struct json_object *trials, long batch)
{
	uint64_t most = 0, p;
	long b;

	for (size_t i = 0; i < json_object_array_length(trials); i++) {
		struct json_object *t = json_object_array_get_idx(trials, i), *fits;

		p = 0;
		if (!json_object_is_type(t, json_type_object) ||
		    !get_long(t, AB_FIELD_BATCH, 1, AB_GLOBAL_BATCH_MAX, &b) || b != batch ||
		    !json_object_object_get_ex(t, AB_FIELD_FITS, &fits) ||
		    !json_object_get_boolean(fits))
			continue;
		get_bytes(t, AB_FIELD_PEAK_BYTES, &p);
		most = p > most ? p : most;
	}
	return most;
}

static int read_ok(struct json_object *o, struct ab_result *r, char *err, size_t errlen)
{
	struct json_object *dev, *trials;
	long conf = 0;

	if (!get_long(o, AB_FIELD_BATCH_SIZE, 1, AB_GLOBAL_BATCH_MAX, &r->batch))
		return ab_fail(err, errlen, EPROTO, "the probe's report has no valid batch_size");
	if (!get_long(o, AB_FIELD_GRAD_ACCUM, 1, AB_GLOBAL_BATCH_MAX, &r->grad_accum))
		r->grad_accum = 1;
	if (!get_long(o, AB_FIELD_GLOBAL_BATCH, 1, AB_GLOBAL_BATCH_MAX, &r->global_batch))
		r->global_batch = 0;
	if (!get_double(o, AB_FIELD_FRACTION, &r->fraction) ||
	    !(r->fraction > 0 && r->fraction <= 1))
		return ab_fail(err, errlen, EPROTO, "the probe's report has no valid fraction");
	if (get_long(o, AB_FIELD_CONFIDENCE, 0, 100, &conf))
		r->confidence = (int)conf;
	if (!get_long(o, AB_FIELD_EVAL_BATCH_SIZE, 1, AB_GLOBAL_BATCH_MAX, &r->eval_batch))
		r->eval_batch = 0;
	read_eval_probe(o, r);
	get_double(o, AB_FIELD_ELAPSED_S, &r->elapsed_s);
	if (!get_long(o, AB_FIELD_ROUNDS, 0, 1L << 20, &r->rounds))
		r->rounds = 0;
	if (!get_long(o, AB_FIELD_PARALLEL, 1, 1L << 20, &r->parallel))
		r->parallel = 0;
	if (!get_long(o, AB_FIELD_RANKS, 1, AB_TRIAL_MAX_RANKS, &r->ranks))
		r->ranks = 1;
	if (!get_long(o, AB_FIELD_TRIAL_NODES, 0, AB_TRIAL_MAX_RANKS, &r->trial_nodes))
		r->trial_nodes = 0;
	get_text(o, AB_FIELD_CONTAINER, r->container, sizeof(r->container));
	get_bytes(o, AB_FIELD_PER_SAMPLE, &r->per_sample);
	read_warm(o, r);
	read_lengths(o, &r->lengths);
	read_ramp(o, &r->ramp);
	read_eval_in_training(o, &r->eval_in_training);
	read_growth(o, &r->growth);
	if (json_object_object_get_ex(o, AB_FIELD_TRIALS, &trials) &&
	    json_object_is_type(trials, json_type_array)) {
		r->trials = json_object_array_length(trials);
		r->longest_trial_s = longest_trial(trials);
		r->chosen_peak = chosen_peak(trials, r->batch);
	}
	if (json_object_object_get_ex(o, AB_FIELD_DEVICE, &dev) &&
	    json_object_is_type(dev, json_type_object)) {
		get_text(dev, AB_FIELD_DEVICE_NAME, r->device, sizeof(r->device));
		get_bytes(dev, AB_FIELD_TOTAL_BYTES, &r->total_bytes);
	}
	return 0;
}

/* The probe's output as one JSON object, or NULL. */
static struct json_object *parse_object(const char *json, size_t len)
{
	struct json_tokener *tok = json_tokener_new_ex(16);
	struct json_object *o = NULL;

	while (len > 0 && strchr(" \t\r\n", json[len - 1]))
		len--;
	if (!tok)
		return NULL;
	if (len > 0 && len < (1u << 20))
		o = json_tokener_parse_ex(tok, json, (int)len);
	if (json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != len)
		o = (json_object_put(o), NULL);
	json_tokener_free(tok);
	if (o && !json_object_is_type(o, json_type_object))
		o = (json_object_put(o), NULL);
	return o;
}

static struct json_object *model_json(const struct ab_gpu_model *g)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, AB_FIELD_GPU_TYPE, json_object_new_string(g->type));
	json_object_object_add(o, AB_FIELD_TOTAL_BYTES, json_object_new_int64((int64_t)g->total_bytes));
	json_object_object_add(o, AB_FIELD_NODES, json_object_new_int64(g->nodes));
	json_object_object_add(o, AB_FIELD_NODE, json_object_new_string(g->node));
	return o;
}

/* The report o (taken) written out in place of json (freed), or json where that fails. */
static char *written(struct json_object *o, char *json)
{
	char *text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));

	json_object_put(o);
	if (!text)
		return json;
	free(json);
	return text;
}

char *ab_result_with_eval_probe(char *json, const struct ab_result *eval)
{
	struct json_object *o = json ? json_tokener_parse(json) : NULL, *cost;

	if (!o || !json_object_is_type(o, json_type_object) || !(cost = json_object_new_object())) {
		json_object_put(o);
		return json;
	}
	json_object_object_add(o, AB_FIELD_EVAL_BATCH_SIZE, json_object_new_int64(eval->batch));
	json_object_object_add(cost, AB_FIELD_TRIALS, json_object_new_int64((int64_t)eval->trials));
	json_object_object_add(cost, AB_FIELD_ELAPSED_S, json_object_new_double(eval->elapsed_s));
	if (eval->chosen_peak) /* what the pair that runs, eval beside training, was measured at */
		json_object_object_add(cost, AB_FIELD_PEAK_BYTES,
				       json_object_new_int64((int64_t)eval->chosen_peak));
	json_object_object_add(o, AB_FIELD_EVAL_PROBE, cost);
	return written(o, json);
}

char *ab_result_with_models(char *json, const struct ab_gpu_models *m,
			    const struct ab_gpu_model *bound)
{
	struct json_object *o = json ? json_tokener_parse(json) : NULL, *all;

	if (!o || !json_object_is_type(o, json_type_object) || !(all = json_object_new_array())) {
		json_object_put(o);
		return json;
	}
	for (size_t i = 0; i < m->n; i++)
		json_object_array_add(all, model_json(&m->v[i]));
	json_object_object_add(o, AB_FIELD_GPU_MODELS, all);
	json_object_object_add(o, AB_FIELD_SIZED_FOR, bound ? model_json(bound) : NULL);
	if (!bound)
		json_object_object_add(o, AB_FIELD_PER_RANK_LIMITS, json_object_new_boolean(true));
	return written(o, json);
}

static void read_sized_for(struct json_object *o, struct ab_result *r)
{
	struct json_object *s;

	if (!json_object_object_get_ex(o, AB_FIELD_SIZED_FOR, &s) ||
	    !json_object_is_type(s, json_type_object))
		return;
	get_text(s, AB_FIELD_GPU_TYPE, r->sized_for, sizeof(r->sized_for));
	get_text(s, AB_FIELD_NODE, r->sized_for_node, sizeof(r->sized_for_node));
	get_bytes(s, AB_FIELD_TOTAL_BYTES, &r->sized_for_bytes);
}

int ab_result_parse(const char *json, size_t len, struct ab_result *r, char *err, size_t errlen)
{
	struct json_object *o = parse_object(json, len), *v;
	char status[16];
	int rc;

	memset(r, 0, sizeof(*r));
	if (!o)
		return ab_fail(err, errlen, EPROTO, "the probe printed no JSON report");
	get_text(o, AB_FIELD_STATUS, status, sizeof(status));
	if (strcmp(status, AB_STATUS_OK) == 0) {
		rc = read_ok(o, r, err, errlen);
		r->ok = rc == 0;
		read_sized_for(o, r);
		r->per_rank_limits = json_object_object_get_ex(o, AB_FIELD_PER_RANK_LIMITS, &v) &&
				     json_object_get_boolean(v);
	} else if (strcmp(status, AB_STATUS_FAILED) == 0 ||
		   strcmp(status, AB_STATUS_INTERRUPTED) == 0) {
		r->interrupted = status[0] == 'i';
		r->nothing_fits = json_object_object_get_ex(o, AB_FIELD_NOTHING_FITS, &v) &&
				  json_object_get_boolean(v);
		get_string(o, AB_FIELD_ERROR, r->error, sizeof(r->error), true);
		if (!r->error[0])
			snprintf(r->error, sizeof(r->error), "the probe failed without saying why");
		rc = 0;
	} else {
		rc = ab_fail(err, errlen, EPROTO, "the probe's report has no status");
	}
	json_object_put(o);
	return rc;
}

int ab_device_parse(const char *json, size_t len, char *name, size_t namelen, uint64_t *total,
		    char *err, size_t errlen)
{
	struct json_object *o = parse_object(json, len), *dev;
	char status[16], why[512] = "";
	int rc = 0;

	*total = 0;
	name[0] = '\0';
	if (!o)
		return ab_fail(err, errlen, EPROTO, "the probe printed no JSON report");
	get_text(o, AB_FIELD_STATUS, status, sizeof(status));
	if (strcmp(status, AB_STATUS_DEVICE) == 0 &&
	    json_object_object_get_ex(o, AB_FIELD_DEVICE, &dev) &&
	    json_object_is_type(dev, json_type_object)) {
		get_text(dev, AB_FIELD_DEVICE_NAME, name, namelen);
		get_bytes(dev, AB_FIELD_TOTAL_BYTES, total);
	}
	if (!*total) {
		get_string(o, AB_FIELD_ERROR, why, sizeof(why), true);
		rc = ab_fail(err, errlen, ENODEV, "%s", why[0] ? why : "the probe named no device");
	}
	json_object_put(o);
	return rc;
}

char *ab_result_with_eval(const char *json, long eval_batch, const char *cache)
{
	struct json_object *o = json_tokener_parse(json);
	char *text = NULL;

	if (!o || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return NULL;
	}
	if (eval_batch > 0)
		json_object_object_add(o, AB_FIELD_EVAL_BATCH_SIZE,
				       json_object_new_int64(eval_batch));
	if (cache)
		json_object_object_add(o, AB_FIELD_CACHE, json_object_new_string(cache));
	text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return text;
}

const char *ab_probe_option_note(const char *error)
{
	if (strstr(error, "--startup-seconds"))
		return " (under srun, the probe's --startup-seconds is the site's startup_seconds= in "
		       "plugstack.conf: ask your admin)";
	if (strstr(error, "--trial-seconds"))
		return " (under srun, the probe's --trial-seconds is set in the site's probe_args=, "
		       "--max-trial-seconds by its max_trial_seconds=: ask your admin)";
	if (strstr(error, "--hook-dir"))
		return " (under srun, where the hook is installed, or the site's probe_args=\"--hook-dir "
		       "DIR\": ask your admin)";
	return "";
}
