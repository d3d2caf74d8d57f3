/* report.c - the JSON report and the human lines (see report.h). */
#include "report.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "protocol.h"
#include "size.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

static struct json_object *trial_json(const struct ab_trial *t, uint64_t limit)
{
	struct json_object *o = json_object_new_object();
	bool fits = ab_trial_fits(t, limit, 0);

	json_object_object_add(o, AB_FIELD_BATCH, json_object_new_int64(t->batch));
	json_object_object_add(o, AB_FIELD_FITS, json_object_new_boolean(fits));
	if (t->oom)
		json_object_object_add(o, "oom", json_object_new_boolean(true));
	if (t->eval_batches) /* evaluation inside training after its steps, in its peak */
		json_object_object_add(o, "eval_batches", json_object_new_int64(t->eval_batches));
	if (t->saved_bytes) /* the checkpoint rehearsed after its steps, in its peak */
		json_object_object_add(o, "saved_bytes", json_object_new_int64((int64_t)t->saved_bytes));
	if (t->save_bound)
		json_object_object_add(o, "save_bound", json_object_new_boolean(true));
	if (t->growth_bytes) /* what it held between steps rose by at each */
		json_object_object_add(o, "held_growth_bytes",
				       json_object_new_int64((int64_t)t->growth_bytes));
	if (t->alloc_retries) /* the allocator's retries that made it an OOM */
		json_object_object_add(o, "alloc_retries", json_object_new_int64(t->alloc_retries));
	if (t->oom && t->floor_bytes) /* what the OOM said the peak was, at least */
		json_object_object_add(o, AB_FIELD_FLOOR,
				       json_object_new_int64((int64_t)t->floor_bytes));
	/* what its steps showed; "fits" judged it at the run's last step where it grew */
	json_object_object_add(o, AB_FIELD_PEAK_BYTES,
			       t->has_peak ? json_object_new_int64((int64_t)ab_trial_seen_peak(t))
					   : NULL);
	if (t->run_growth_bytes)
		json_object_object_add(o, "run_peak_bytes",
				       json_object_new_int64((int64_t)t->peak_bytes));
	json_object_object_add(o, "step_s", t->has_step ? json_object_new_double(t->step_s) : NULL);
	json_object_object_add(o, "samples_per_s",
			       t->has_step ? json_object_new_double(t->samples_per_s) : NULL);
	json_object_object_add(o, "seconds", json_object_new_double(t->seconds));
	json_object_object_add(o, "steps", json_object_new_int(t->steps));
	/* a batch whose peak helper processes shared ran twice: the larger peak, the spread */
	json_object_object_add(o, "runs", json_object_new_int(t->runs));
	json_object_object_add(o, "round", json_object_new_int(t->round));
	if (t->helpers)
		json_object_object_add(o, "helpers", json_object_new_boolean(true));
	if (t->runs > 1)
		json_object_object_add(o, "spread_bytes",
				       json_object_new_int64((int64_t)t->spread_bytes));
	if (t->ranks > 1) { /* every rank's peak; the worst is the trial's */
		struct json_object *a = json_object_new_array();

		for (int i = 0; i < t->ranks && i < AB_REPORT_MAX_RANKS; i++)
			json_object_array_add(a, json_object_new_int64((int64_t)t->rank_peak[i]));
		json_object_object_add(o, "rank_peaks", a);
		json_object_object_add(o, "bound_rank", json_object_new_int(t->bound_rank));
		if (t->bound_node[0])
			json_object_object_add(o, "bound_node",
					       json_object_new_string(t->bound_node));
		if (t->bound_capacity_bytes) { /* held to its own node's memory */
			json_object_object_add(o, "bound_peak_bytes",
					       json_object_new_int64((int64_t)t->bound_peak_bytes));
			json_object_object_add(o, "bound_capacity_bytes",
					       json_object_new_int64((int64_t)t->bound_capacity_bytes));
		}
	}
	if (t->lengths.max) /* the padded length its steps' batches had, at most */
		json_object_object_add(o, "length", json_object_new_int64(t->lengths.max));
	/* exec mode: start to the end of the warm-up step (loading, compiling, the warm-up) */
	json_object_object_add(o, "startup_s",
			       t->startup_s > 0 ? json_object_new_double(t->startup_s) : NULL);
	/* started while the trial before it ran: its start-up before its release is not here */
	if (t->ahead)
		json_object_object_add(o, "started_ahead", json_object_new_boolean(1));
	return o;
}

static void add_decision(struct json_object *o, const struct ab_report *r,
			 const struct ab_report_fraction *f)
{
	const struct ab_decision *d = &f->decision;

	json_object_object_add(o, AB_FIELD_FRACTION, json_object_new_double(f->fraction));
	json_object_object_add(o, "limit_bytes", json_object_new_int64((int64_t)d->limit_bytes));
	json_object_object_add(o, AB_FIELD_BATCH_SIZE,
			       f->ok ? json_object_new_int64(d->batch) : NULL);
	json_object_object_add(o, AB_FIELD_GRAD_ACCUM,
			       f->ok ? json_object_new_int64(d->grad_accum) : NULL);
	json_object_object_add(o, AB_FIELD_GLOBAL_BATCH,
			       f->ok ? json_object_new_int64(ab_global_batch(r->global_batch, d->batch,
									     d->grad_accum, r->devices))
				     : NULL);
	json_object_object_add(o, AB_FIELD_CONFIDENCE,
			       f->ok ? json_object_new_int(d->confidence) : NULL);
	/* the code above is a tier, not a probability: its name */
	json_object_object_add(o, "confidence_tier",
			       f->ok ? json_object_new_string(ab_confidence_tier(d->confidence))
				     : NULL);
	/* kept under the limit where helper processes' memory varied between runs */
	json_object_object_add(o, "margin_bytes", json_object_new_int64((int64_t)d->margin_bytes));
	json_object_object_add(o, AB_FIELD_PER_SAMPLE,
			       d->per_sample > 0 ? json_object_new_int64((int64_t)d->per_sample)
						 : NULL);
	json_object_object_add(o, "trials_used", json_object_new_int64((int64_t)d->trials_used));
	json_object_object_add(o, "rounds_used", json_object_new_int64((int64_t)d->rounds_used));
	/* rounds run past --max-trials because the best fit was too far below a failure */
	json_object_object_add(o, "past_budget", json_object_new_int64((int64_t)d->past_budget));
}

/* The chosen trial's lengths, with the config's cap. */
static struct ab_lengths chosen_lengths(const struct ab_report *r)
{
	struct ab_lengths l = r->trials->v[r->fractions[0].decision.chosen].lengths;

	l.config_max = r->length_cap;
	snprintf(l.config_key, sizeof(l.config_key), "%s",
		 r->length_cap_key ? r->length_cap_key : "");
	return l;
}

/* The config's evaluation inside training, and how much of it the chosen trial ran. */
static struct ab_eval_in_training chosen_eval(const struct ab_report *r)
{
	struct ab_eval_in_training e = {r->eval_every, 0, ""};

	if (r->ok && r->eval_every > 0 && r->trials && r->nfractions > 0)
		e.seen = r->trials->v[r->fractions[0].decision.chosen].eval_batches;
	snprintf(e.key, sizeof(e.key), "%s", r->eval_key ? r->eval_key : "");
	return e;
}

/* The chosen trial's growth between steps, and the steps its run reaches the limit in. */
static struct ab_growth chosen_growth(const struct ab_report *r)
{
	struct ab_growth g = {0};
	const struct ab_decision *d;
	const struct ab_trial *t;
	uint64_t step;
	long trial_acc, run_acc;

	if (!r->ok || !r->trials || r->nfractions == 0)
		return g;
	d = &r->fractions[0].decision;
	t = &r->trials->v[d->chosen];
	step = t->growth_bytes ? t->growth_bytes : t->run_growth_step;
	if (!step || !t->has_peak || t->peak_bytes > d->limit_bytes)
		return g;
	g.per_step = step;
	/* in the run's steps: micro-batches, the trial's (trials ran with accumulation 1 where
	 * the config's key was set to it) and those to the limit, over the run's a step */
	trial_acc = r->accum_key || r->config_accum < 1 ? 1 : r->config_accum;
	run_acc = r->global_batch && d->grad_accum > 0 ? d->grad_accum
						       : r->config_accum > 0 ? r->config_accum : 1;
	g.steps_to_limit = (long)(((double)(t->steps > 0 ? t->steps : 0) * (double)trial_acc +
				   (double)(d->limit_bytes - ab_trial_seen_peak(t)) /
					   (double)step * (double)trial_acc) /
				  (double)run_acc);
	if (g.steps_to_limit < 1) /* within the run's first step of many micro-batches */
		g.steps_to_limit = 1;
	if (r->run_steps > 0) { /* the search judged it at the run's last step */
		g.run_steps = r->run_steps;
		g.run_peak = t->peak_bytes;
		snprintf(g.run_key, sizeof(g.run_key), "%s", r->run_steps_key ? r->run_steps_key : "");
	}
	return g;
}

/* The chosen trial's "held_growth" (its bytes a step and the steps to the limit), or NULL
 * where it did not grow. */
static struct json_object *growth_json(const struct ab_report *r)
{
	struct ab_growth g = chosen_growth(r);
	struct json_object *o;

	if (!g.per_step)
		return NULL;
	o = json_object_new_object();
	json_object_object_add(o, "bytes_per_step", json_object_new_int64((int64_t)g.per_step));
	json_object_object_add(o, "steps_to_limit", json_object_new_int64(g.steps_to_limit));
	if (g.run_steps > 0) { /* sized for the run's length: its peak at the last step */
		json_object_object_add(o, "run_steps", json_object_new_int64(g.run_steps));
		json_object_object_add(o, "run_steps_key", json_object_new_string(g.run_key));
		json_object_object_add(o, "run_peak_bytes",
				       json_object_new_int64((int64_t)g.run_peak));
	}
	return o;
}

/* What the chosen trial's batches were measured at, against the longest the run can draw:
 * "measured" (the steps' longest padded length), "run_longest" (null: unknown), "read" of
 * "samples", "longest_first", the config's cap. NULL when the program said nothing of
 * lengths. */
static struct json_object *lengths_json(const struct ab_lengths *l)
{
	struct json_object *o;

	if (!l->said && !(l->max && l->min != l->max))
		return NULL;
	o = json_object_new_object();
	json_object_object_add(o, "measured", l->max ? json_object_new_int64(l->max) : NULL);
	json_object_object_add(o, "measured_min", l->min ? json_object_new_int64(l->min) : NULL);
	json_object_object_add(o, "run_longest",
			       l->said ? json_object_new_int64(l->run_longest) : NULL);
	json_object_object_add(o, "read", json_object_new_int64(l->read));
	json_object_object_add(o, "samples", l->said && !l->padded_to
						     ? json_object_new_int64(l->samples) : NULL);
	json_object_object_add(o, "varies", json_object_new_boolean(l->varies || l->min != l->max));
	json_object_object_add(o, "longest_first", json_object_new_boolean(l->longest_first));
	if (l->padded_to) /* a stream's batches, padded to the config's cap in the trials */
		json_object_object_add(o, "padded_to", json_object_new_int64(l->padded_to));
	if (l->config_max) { /* the config's cap on any batch's length */
		json_object_object_add(o, "config_max", json_object_new_int64(l->config_max));
		json_object_object_add(o, "config_key", json_object_new_string(l->config_key));
	}
	return o;
}

/* Predicted data-parallel step at the decision: accumulation x the measured step, plus the
 * all-reduce, not overlapped (what the job sees at worst). */
static struct json_object *comm_json(const struct ab_report *r)
{
	const struct ab_report_comm *c = r->comm;
	struct json_object *o = json_object_new_object();
	const struct ab_decision *d = r->nfractions ? &r->fractions[0].decision : NULL;
	const struct ab_trial *t = d && r->fractions[0].ok ? &r->trials->v[d->chosen] : NULL;

	json_object_object_add(o, "gpus", json_object_new_int(c->gpus));
	json_object_object_add(o, "allreduce_bytes", json_object_new_int64((int64_t)c->bytes));
	json_object_object_add(o, "busbw_bytes_per_s", json_object_new_double(c->busbw));
	json_object_object_add(o, "allreduce_s", json_object_new_double(c->seconds));
	json_object_object_add(o, "nccl_bytes_per_gpu", json_object_new_int64((int64_t)c->nccl_bytes));
	if (t && t->has_step) {
		double compute = t->step_s * (double)(d->grad_accum ? d->grad_accum : 1);

		json_object_object_add(o, "predicted_step_s",
				       json_object_new_double(compute + c->seconds));
		json_object_object_add(o, "scaling_efficiency",
				       json_object_new_double(compute / (compute + c->seconds)));
	}
	return o;
}

static struct json_object *device_json(const char *kind, const char *name, uint64_t total)
{
	struct json_object *dev = json_object_new_object();

	json_object_object_add(dev, "kind", json_object_new_string(kind));
	json_object_object_add(dev, AB_FIELD_DEVICE_NAME, json_object_new_string(name));
	json_object_object_add(dev, AB_FIELD_TOTAL_BYTES, json_object_new_int64((int64_t)total));
	return dev;
}

char *ab_report_device_json(const char *kind, const char *name, uint64_t total,
			    const char *error)
{
	struct json_object *o = json_object_new_object();
	char *text;

	json_object_object_add(o, "autobatch_version", json_object_new_string(PACKAGE_VERSION));
	json_object_object_add(o, AB_FIELD_STATUS,
			       json_object_new_string(error ? AB_STATUS_FAILED : AB_STATUS_DEVICE));
	if (error)
		json_object_object_add(o, AB_FIELD_ERROR, json_object_new_string(error));
	else
		json_object_object_add(o, AB_FIELD_DEVICE, device_json(kind, name, total));
	text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return text;
}

char *ab_report_json(const struct ab_report *r)
{
	struct json_object *o = json_object_new_object(), *trials = json_object_new_array(), *g;
	/* "fits" as the search judged it: within the first fraction's limit less the margin,
	 * also where it failed (its limit is set as it starts; no rows of fractions then) */
	uint64_t limit = r->fractions ? r->fractions[0].decision.limit_bytes -
						r->fractions[0].decision.margin_bytes
				      : 0;
	char *text;

	/* 0.8, not 0.80000000000000004: ten significant digits say all a reader needs */
	json_c_set_serialization_double_format("%.10g", JSON_C_OPTION_THREAD);

	json_object_object_add(o, "autobatch_version", json_object_new_string(PACKAGE_VERSION));
	json_object_object_add(o, AB_FIELD_STATUS,
			       json_object_new_string(r->ok ? AB_STATUS_OK
						      : r->interrupted ? AB_STATUS_INTERRUPTED
								       : AB_STATUS_FAILED));
	if (!r->ok)
		json_object_object_add(o, AB_FIELD_ERROR, json_object_new_string(r->error));
	if (!r->ok && r->nothing_fits)
		json_object_object_add(o, AB_FIELD_NOTHING_FITS, json_object_new_boolean(1));
	json_object_object_add(o, "mode", json_object_new_string(r->mode));
	json_object_object_add(o, "objective", json_object_new_string(r->objective));
	if (strcmp(r->phase, "train") != 0)
		json_object_object_add(o, "phase", json_object_new_string(r->phase));
	json_object_object_add(o, AB_FIELD_DEVICE,
			       device_json(r->device_kind, r->device_name, r->total_bytes));
	if (r->model)
		json_object_object_add(o, "model", json_object_new_string(r->model));
	if (r->reserve_bytes)
		json_object_object_add(o, "reserve_bytes",
				       json_object_new_int64((int64_t)r->reserve_bytes));
	if (r->others)
		json_object_object_add(o, "other_processes", json_object_new_string(r->others));
	if (r->comm)
		json_object_object_add(o, "comm", comm_json(r));
	if (r->nfractions)
		add_decision(o, r, &r->fractions[0]);
	if (r->ok && r->nfractions && r->trials) {
		struct ab_lengths chosen = chosen_lengths(r);
		struct json_object *l = lengths_json(&chosen);

		if (l)
			json_object_object_add(o, AB_FIELD_LENGTHS, l);
	}
	if (r->ok && r->eval_every > 0 && r->trials && r->nfractions > 0) {
		struct ab_eval_in_training e = chosen_eval(r);
		struct json_object *a = json_object_new_object();

		json_object_object_add(a, "key", json_object_new_string(e.key));
		json_object_object_add(a, "every", json_object_new_int64(e.every));
		json_object_object_add(a, "seen", json_object_new_int64(e.seen));
		json_object_object_add(o, AB_FIELD_EVAL_IN_TRAINING, a);
	}
	if ((g = growth_json(r)))
		json_object_object_add(o, AB_FIELD_HELD_GROWTH, g);
	for (size_t i = 0; r->trials && i < r->trials->n; i++)
		json_object_array_add(trials, trial_json(&r->trials->v[i], limit));
	json_object_object_add(o, AB_FIELD_TRIALS, trials);
	if (r->nfractions > 1) {
		struct json_object *by = json_object_new_array();

		for (size_t i = 0; i < r->nfractions; i++) {
			struct json_object *f = json_object_new_object();

			add_decision(f, r, &r->fractions[i]);
			json_object_array_add(by, f);
		}
		json_object_object_add(o, "by_fraction", by);
	}
	if (r->warm_from) {
		struct json_object *w = json_object_new_object();
		int warm = r->nfractions ? r->fractions[0].decision.warm : 0;

		json_object_object_add(w, AB_FIELD_WARM_FROM, json_object_new_string(r->warm_from));
		json_object_object_add(w, "batch", json_object_new_int64(r->warm_batch));
		/* false: the cached batch no longer fit, and a full search decided */
		json_object_object_add(w, "verified", json_object_new_boolean(warm > 0));
		json_object_object_add(o, AB_FIELD_WARM_START, w);
	}
	if (r->accum_key) { /* "accumulation in trials: 1 of 16" */
		struct json_object *a = json_object_new_object();

		json_object_object_add(a, "key", json_object_new_string(r->accum_key));
		json_object_object_add(a, "trials", json_object_new_int(1));
		json_object_object_add(a, "config", json_object_new_int64(r->config_accum));
		json_object_object_add(o, AB_FIELD_TRIAL_ACCUM, a);
	}
	if (r->ramp.step > 0) { /* the batch ramp-up the choice keeps */
		struct json_object *a = json_object_new_object();

		json_object_object_add(a, "of", json_object_new_string(r->ramp.global ? "global"
										       : "device"));
		json_object_object_add(a, "start", json_object_new_int64(r->ramp.start));
		json_object_object_add(a, "step", json_object_new_int64(r->ramp.step));
		json_object_object_add(a, "trials_off",
				       r->ramp.key[0] ? json_object_new_string(r->ramp.key) : NULL);
		json_object_object_add(o, AB_FIELD_RAMP_UP, a);
	}
	/* trials run at once, one per GPU (1: one after another), and in how many rounds */
	json_object_object_add(o, AB_FIELD_PARALLEL,
			       json_object_new_int(r->parallel > 1 ? r->parallel : 1));
	json_object_object_add(o, AB_FIELD_RANKS, json_object_new_int(r->ranks > 1 ? r->ranks : 1));
	/* the nodes of each trial's step (run --step-nodes); 0: its ranks ran on the probe's */
	json_object_object_add(o, AB_FIELD_TRIAL_NODES, json_object_new_int(r->step_nodes));
	json_object_object_add(o, AB_FIELD_CONTAINER,
			       r->container ? json_object_new_string(r->container) : NULL);
	json_object_object_add(o, AB_FIELD_ROUNDS,
			       json_object_new_int64(r->trials ? (int64_t)r->trials->rounds : 0));
	json_object_object_add(o, AB_FIELD_ELAPSED_S, json_object_new_double(r->elapsed_s));
	json_object_object_add(o, AB_FIELD_CACHE, json_object_new_string("miss"));
	text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							      JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return text;
}

const char *ab_format_duration(double seconds, char *buf, size_t buflen)
{
	if (seconds < 90)
		snprintf(buf, buflen, "%.0f s", seconds);
	else if (seconds < 90 * 60)
		snprintf(buf, buflen, "%.0f min", seconds / 60);
	else
		snprintf(buf, buflen, "%.1f h", seconds / 3600);
	return buf;
}

void ab_report_trial_line(size_t index, const struct ab_trial *t, bool fits, uint64_t limit,
			  uint64_t margin, uint64_t total, char *buf, size_t buflen)
{
	char peak[32], lim[32], tot[32], size[32], grow[32], rate[48] = "";
	size_t len = 0;

	ab_format_size(limit, lim, sizeof(lim));
	ab_format_size(total, tot, sizeof(tot));
	if (t->has_step && t->samples_per_s > 0)
		snprintf(rate, sizeof(rate), ", %.0f samples/s", t->samples_per_s);
	ab_append(buf, buflen, &len, "trial %zu: batch %ld %s", index + 1, t->batch,
		  t->runs > 1 ? "again: " : "");
	if (t->oom) {
		if (t->alloc_retries)
			ab_append(buf, buflen, &len, "does not fit: PyTorch's allocator ran out and "
						     "freed its cache to retry %ld time%s",
				  t->alloc_retries, t->alloc_retries == 1 ? "" : "s");
		else
			ab_append(buf, buflen, &len, "does not fit: out of memory%s",
				  t->save_bound ? " saving a checkpoint after its steps" : "");
		if (t->floor_bytes)
			ab_append(buf, buflen, &len, ", peak at least %s",
				  ab_format_size(t->floor_bytes, peak, sizeof(peak)));
		if (t->ranks > 1) /* the rank that ran out, which ended the others */
			ab_append(buf, buflen, &len, " on rank %d%s%s of %d", t->bound_rank,
				  t->bound_node[0] ? " on " : "", t->bound_node, t->ranks);
		ab_append(buf, buflen, &len, " (%.0f s)", t->seconds);
		return;
	}
	ab_append(buf, buflen, &len, "%s, peak %s", fits ? "fits" : "does not fit",
		  ab_format_size(t->peak_bytes, peak, sizeof(peak)));
	if (t->run_growth_bytes) /* judged at the run's last step */
		ab_append(buf, buflen, &len, " at the run's last step (its steps %s, growing %s "
					     "a step%s)",
			  ab_format_size(ab_trial_seen_peak(t), size, sizeof(size)),
			  ab_format_size(t->run_growth_step, grow, sizeof(grow)),
			  t->growth_bytes ? "" : " at the other trials' rate a sample, too little "
						 "to show in its own steps");
	if (t->ranks > 1 && t->bound_capacity_bytes) /* a share of its own GPU, of another size */
		ab_append(buf, buflen, &len, " as a share of %s (rank %d%s%s: %s of its own %s, "
					     "the largest share of %d)",
			  tot, t->bound_rank, t->bound_node[0] ? " on " : "", t->bound_node,
			  ab_format_size(t->bound_peak_bytes, size, sizeof(size)),
			  ab_format_size(t->bound_capacity_bytes, peak, sizeof(peak)), t->ranks);
	else if (t->ranks > 1)
		ab_append(buf, buflen, &len, " (rank %d%s%s, the largest of %d)", t->bound_rank,
			  t->bound_node[0] ? " on " : "", t->bound_node, t->ranks);
	if (t->runs > 1)
		ab_append(buf, buflen, &len, " (its %d runs %s apart)", t->runs,
			  ab_format_size(t->spread_bytes, size, sizeof(size)));
	ab_append(buf, buflen, &len, " %s %s limit (%.0f%% of %s)", fits ? "of" : "over the", lim,
		  100.0 * (double)limit / (double)total, tot);
	if (margin)
		ab_append(buf, buflen, &len, " less a %s margin",
			  ab_format_size(margin, size, sizeof(size)));
	/* the batch's steps fit; the run's checkpoint would not (not the run's growth) */
	if (t->save_bound && !fits && ab_trial_seen_peak(t) > limit)
		ab_append(buf, buflen, &len, " when saving a checkpoint (%s of model and optimizer "
					     "state, after its steps)",
			  ab_format_size(t->saved_bytes, size, sizeof(size)));
	if (t->lengths.max && (t->lengths.varies || t->lengths.min != t->lengths.max))
		ab_append(buf, buflen, &len, ", length %ld", t->lengths.max); /* the longest */
	ab_append(buf, buflen, &len, "%s", rate);
}

void ab_report_decision_line(const struct ab_report *r, char *buf, size_t buflen)
{
	const struct ab_decision *d = &r->fractions[0].decision;
	size_t len = 0;

	if (!r->ok) {
		snprintf(buf, buflen, "failed: %s", r->error);
		return;
	}
	ab_append(buf, buflen, &len, "chose batch %ld", d->batch);
	if (r->global_batch)
		ab_append(buf, buflen, &len, " (gradient accumulation %ld, global %ld)", d->grad_accum,
			  r->global_batch);
	ab_append(buf, buflen, &len, " in %zu trials, %.0f s",
		  r->trials ? r->trials->n + r->trials->repeats : 0, r->elapsed_s);
	if (r->parallel > 1 && r->trials)
		ab_append(buf, buflen, &len, " (%zu rounds of up to %d at once)", r->trials->rounds,
			  r->parallel);
	if (r->ranks > 1 && r->step_nodes > 1 && r->ranks % r->step_nodes == 0)
		ab_append(buf, buflen, &len, "; trials of the whole step, %d nodes x %d tasks, the "
					     "worst rank's peak counted", r->step_nodes,
			  r->ranks / r->step_nodes);
	else if (r->ranks > 1 && r->step_nodes > 1)
		ab_append(buf, buflen, &len, "; trials of the whole step, %d tasks on %d nodes, the "
					     "worst rank's peak counted", r->ranks, r->step_nodes);
	else if (r->ranks > 1)
		ab_append(buf, buflen, &len, "; each trial %d ranks on one node%s, the worst rank's "
					     "peak counted", r->ranks,
			  r->step_nodes ? " as a step of the job" : "");
	if (r->warm_from)
		ab_append(buf, buflen, &len, "; warm start from %s%s", r->warm_from,
			  d->warm > 0 ? "" : " (its batch no longer fit: searched afresh)");
	if (d->start_batch > 0 && d->start_batch != d->batch)
		ab_append(buf, buflen, &len, "; %.1fx the starting batch %ld", (double)d->batch /
											(double)d->start_batch,
			  d->start_batch);
	ab_ramp_text(&r->ramp, d->batch, r->devices, buf, buflen, &len);
	if (r->trials) {
		struct ab_lengths chosen = chosen_lengths(r);

		struct ab_eval_in_training e = chosen_eval(r);
		struct ab_growth g = chosen_growth(r);

		ab_lengths_text(&chosen, buf, buflen, &len);
		ab_eval_in_training_text(&e, buf, buflen, &len);
		ab_growth_text(&g, buf, buflen, &len);
	}
	ab_append(buf, buflen, &len, "; confidence: %s", ab_confidence_tier(d->confidence));
	if (d->margin_bytes) {
		char m[32];

		ab_append(buf, buflen, &len, "; kept %s under the limit: %s",
			  ab_format_size(d->margin_bytes, m, sizeof(m)),
			  r->ranks > 1 ? "the ranks' memory varies from rank to rank and run to run"
				       : "helper processes' memory (DataLoader workers) varies "
					 "between runs");
	}
	for (size_t i = 1; i < r->nfractions; i++)
		if (r->fractions[i].ok)
			ab_append(buf, buflen, &len, "%s fraction %g: batch %ld", i == 1 ? ";" : ",",
				  r->fractions[i].fraction, r->fractions[i].decision.batch);
		else
			ab_append(buf, buflen, &len, "%s fraction %g: %s", i == 1 ? ";" : ",",
				  r->fractions[i].fraction,
				  r->fractions[i].out_of_time ? "no fit seen in time"
							      : "nothing fits");
}
