/* search.c - the batch-size search (see search.h).
 *
 * Memory is close to affine in the batch, so two fitting trials fix a line and a third, at
 * the line's prediction for the limit, verifies it. Then the bracket (largest fitting
 * batch, smallest failing one) closes by secant where the failing trial still reported a
 * peak, by bisection where a jump or a real OOM hides the curve. The chosen batch is always
 * one that was run and fit.
 */
#include "search_run.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "size.h"

#define DEFAULT_MAX_TRIALS 6 /* the search's own bound: past it, the best fit seen */
#define DEFAULT_TRIAL_CAP 12 /* past the budget, to close a bracket too wide to stand */
#define WIDE 0.9             /* a best fit below this share of a failure: too far to stand */
#define QUIET_MARGIN 0.005 /* MARGIN, when three fits lie on their line within QUIET */
#define STEP_MARGIN 0.03 /* MARGIN, when one step is larger than the tolerance: 4x NOISE_GUESS */
#define TIE 0.01         /* throughputs this close are equal: prefer the smaller batch */
#define THROUGHPUT_EXTRA_TRIALS 4
#define NOISE_ROUNDS 3 /* lowerings of the target before giving up on a margin */

/* ---- the search -------------------------------------------------------------------- */

const char *ab_confidence_tier(int confidence)
{
	static const struct {
		int code;
		const char *name;
	} tiers[] = {{99, "largest allowed"}, {98, "next size fails"}, {95, "bracketed"},
		     {85, "extrapolated"},    {75, "extrapolated from two trials"},
		     {90, "warm start"},      {70, "trial budget spent"},
		     {71, "trial cap spent"}, {AB_CONFIDENCE_TIME_LIMIT, "time limit reached"}};

	for (size_t i = 0; i < sizeof(tiers) / sizeof(tiers[0]); i++)
		if (tiers[i].code == confidence)
			return tiers[i].name;
	return "unknown";
}

static int confidence(const struct run *r, const struct bracket *k)
{
	if (k->lo->batch == c_last(&r->c))
		return 99; /* nothing larger is allowed */
	if (k->hi && c_next(&r->c, k->lo->batch) >= k->hi->batch)
		return 98;
	if (k->hi)
		return 95;
	return k->nfit >= 3 ? 85 : 75;
}

/* True when lo is the answer: the next candidate failed, or lo is within the tolerance of
 * the failing one, or of the first candidate the line puts clearly (MARGIN) over the limit:
 * jitter and granularity make a prediction right only to a percent or two. */
static bool done(const struct run *r, const struct bracket *k)
{
	long lo = k->lo->batch, next = c_next(&r->c, lo), bound;
	double L = (double)r->limit, pred, slope, span;

	if (!next)
		return true;
	if (k->hi && (next >= k->hi->batch ||
		      (double)lo >= (1 - AB_SEARCH_TOLERANCE) * (double)c_prev(&r->c, k->hi->batch)))
		return true;
	/* a bend the trials have checked puts the crossing within the tolerance of lo */
	if ((double)lo >= (1 - AB_SEARCH_TOLERANCE) * search_bend_checked(r, k))
		return true;
	/* Otherwise the line through two fitting trials decides; it never overestimates an
	 * upward-bending curve, so its "over the limit" is safe to believe. */
	if (k->nfit < 2 || !search_partner(r, k->lo))
		return false;
	pred = search_line_pred(r, k);
	if (isinf(pred))
		return false;
	/* Where one step is more than the tolerance, the line must put the next candidate over
	 * the limit by more than its own noise, judged from a third trial, extrapolated. */
	if ((double)lo < (1 - AB_SEARCH_TOLERANCE) * (double)next) {
		double noise = search_residual(r, k), spread = (double)(lo - search_partner(r, k->lo)->batch);

		if (noise < 0)
			return false;
		/* A line three fits lie on within QUIET (granularity only) is believed to half a
		 * percent: its next step is then more often over than the 2% margin needs, and a
		 * fourth trial only showed what the line said. Only the proof that nothing larger
		 * fits is shortened; the choice is a fit seen either way. */
		double margin = noise < QUIET * L ? QUIET_MARGIN : STEP_MARGIN;

		return search_line_peak(r, k, (double)next) >
		       L + fmax(margin * L, 3 * noise * (1 + (double)(next - lo) / spread));
	}
	/* the margin is a share of what the batch holds at the limit (the limit less the line's
	 * fixed part), as the tolerance is a share of the batch: a share of the whole limit was
	 * more samples than the tolerance where a large fixed part (PyTorch and the model on each
	 * rank) leaves little to the batch, and a fit a sample under the limit took a trial more */
	span = L - fmax(0, fmin(L, search_line_peak(r, k, 0)));
	if (search_line_peak(r, k, (double)next) > L + MARGIN * span)
		return true;
	/* the last candidate before the line reaches the limit plus the margin */
	slope = search_line_peak(r, k, (double)lo + 1) - (double)k->lo->peak_bytes;
	bound = c_ceil(&r->c, (double)lo + (L + MARGIN * span - (double)k->lo->peak_bytes) / slope);
	bound = bound ? c_prev(&r->c, bound) : c_last(&r->c);
	return (double)lo >= (1 - AB_SEARCH_TOLERANCE) * (double)bound;
}

/* where a trial's steps fit and its rehearsed checkpoint did not: the run's saves need
 * that memory whatever the batch, so a smaller batch is no answer */
#define SAVING(t)                                                                          \
	((t) && (t)->save_bound ? " when saving a checkpoint after its steps (the model's and "  \
				  "optimizer's state: no batch makes room for it; shard or "   \
				  "offload the save, or allow a larger fraction)"                   \
				: "")

/* A per-device ramp's first step is the smallest batch there is to try: where even that
 * does not fit, the ramp's start is what to change. */
static void ramp_said(const struct run *r, char *buf, size_t len)
{
	buf[0] = '\0';
	/* only where the ramp, not --min or --multiple-of, made it the smallest */
	if (r->p->ramp_step > 0 && !r->p->ramp_global &&
	    c_first(&r->c) == r->p->ramp_start + r->p->ramp_step)
		snprintf(buf, len, " (the smallest step of the batch ramp-up from %ld by %ld: a "
				   "smaller start or increment allows smaller batches)",
			 r->p->ramp_start, r->p->ramp_step);
}

/* Where the smallest batch's steps fit but not the run's: by how much it grew at each step
 * as the search counted it (its own, or the others' rate under the claim's floor), and over
 * how many. */
static void growth_said(const struct run *r, const struct ab_trial *t, char *buf, size_t len)
{
	char seen[32], step[32];

	buf[0] = '\0';
	if (t && t->run_growth_bytes && ab_trial_seen_peak(t) <= r->limit)
		snprintf(buf, len, " at the run's last step of %ld (its steps peaked at %s, and what "
				   "it held grew by %s at each: does it keep each step's loss or "
				   "outputs?)",
			 r->p->run_steps,
			 ab_format_size(ab_trial_seen_peak(t), seen, sizeof(seen)),
			 ab_format_size(t->run_growth_step, step, sizeof(step)));
}

static int nothing_fits(const struct run *r, char *err, size_t errlen)
{
	const struct ab_trial *t = search_find(r, c_first(&r->c));
	char peak[32], limit[32], ramp[160], grown[224];

	ab_format_size(r->limit, limit, sizeof(limit));
	ramp_said(r, ramp, sizeof(ramp));
	growth_said(r, t, grown, sizeof(grown));
	if (t && t->has_peak) {
		/* "its peak 1.0 GiB exceeds the 1.0 GiB limit" says nothing: then in MiB */
		if (!strcmp(ab_format_size(t->peak_bytes, peak, sizeof(peak)), limit)) {
			snprintf(peak, sizeof(peak), "%.0f MiB", (double)t->peak_bytes / 1048576.0);
			snprintf(limit, sizeof(limit), "%.0f MiB", (double)r->limit / 1048576.0);
		}
		return ab_fail(err, errlen, ENOSPC,
			       "even batch %ld%s does not fit: its peak %s exceeds the %s limit%s%s",
			       t->batch, ramp, peak, limit, grown, SAVING(t));
	}
	return ab_fail(err, errlen, ENOSPC,
		       "even batch %ld%s does not fit: it ran out of memory (limit %s)%s",
		       c_first(&r->c), ramp, limit, SAVING(t));
}

/* The throughput objective's answer lies below where samples/s stopped rising: two fitting
 * trials, the larger at least twice the smaller, equally fast. The memory search can stop
 * there; the throughput search closes in below. */
static bool plateau(const struct run *r)
{
	if (r->p->objective != AB_OBJECTIVE_THROUGHPUT)
		return false;
	for (size_t i = 0; i < r->trials->n; i++)
		for (size_t j = 0; j < r->trials->n; j++) {
			const struct ab_trial *a = &r->trials->v[i], *b = &r->trials->v[j];

			if (search_fits(r, a) && search_fits(r, b) && a->samples_per_s > 0 &&
			    b->batch >= 2 * a->batch && a->samples_per_s >= (1 - TIE) * b->samples_per_s)
				return true;
		}
	return false;
}

/* Past the budget: a best fit below WIDE of the smallest failure, or with no failure yet of
 * the line's crossing, is too far from the best to stand, and the search goes on, up to the
 * cap (said once). */
static bool go_on(struct run *r, const struct bracket *k, double pred, int trial_cap, bool *told)
{
	char line[256];

	if ((int)r->new_rounds >= trial_cap)
		return false;
	if (!k->hi) {
		if (!(pred < INFINITY) || (double)k->lo->batch >= WIDE * pred)
			return false;
		if (!*told && r->p->note) {
			snprintf(line, sizeof(line),
				 "the trial budget of %d is spent with batch %ld fitting and the "
				 "line's crossing at %.0f: going on until within %.0f%% (at most %d "
				 "trials)",
				 r->budget, k->lo->batch, pred, 100.0 * AB_SEARCH_TOLERANCE, trial_cap);
			r->p->note(r->p->progress_arg, line);
		}
		*told = true;
		return true;
	}
	if (!*told && (double)k->lo->batch >= WIDE * (double)k->hi->batch)
		return false; /* once going on, until within the tolerance (done) or the cap */
	if (!*told && r->p->note) {
		snprintf(line, sizeof(line),
			 "the trial budget of %d is spent with batch %ld fitting and %ld failing, "
			 "%.0f%% apart: going on until within %.0f%% (at most %d trials)",
			 r->budget, k->lo->batch, k->hi->batch,
			 100.0 * (1 - (double)k->lo->batch / (double)k->hi->batch),
			 100.0 * AB_SEARCH_TOLERANCE, trial_cap);
		r->p->note(r->p->progress_arg, line);
	}
	*told = true;
	return true;
}

/* A smaller batch that did not fit below the one that did: memory that does not grow with
 * the batch alone (a data-dependent peak, another process's memory, an OOM of something
 * else). The choice stands on its own trial, but the user is told, once. */
static void contradiction(const struct run *r, const struct bracket *k)
{
	char line[256];

	for (size_t i = 0; r->p->note && i < r->trials->n; i++) {
		const struct ab_trial *t = &r->trials->v[i];

		if (t->batch < k->lo->batch && !search_fits(r, t) &&
		    (t->oom || (t->has_peak && t->steps >= AB_TRIAL_MIN_STEPS))) {
			snprintf(line, sizeof(line),
				 "the trials contradict each other: batch %ld %s, below batch %ld, "
				 "which fit; memory here depends on more than the batch (the data, "
				 "other processes), so the choice stands on its own trial alone",
				 t->batch, t->oom ? "ran out of memory" : "went over the limit",
				 k->lo->batch);
			r->p->note(r->p->progress_arg, line);
			return;
		}
	}
}

/* The probe's time limit leaves no room for another round: the best fit seen stands, its
 * confidence 65, said once (r->err holds why; a later phase of the search may end so too). */
static void time_up(const struct run *r, struct ab_decision *out, const struct ab_trial *best)
{
	char line[AB_ERR_MAX + 64];

	if (out->confidence != AB_CONFIDENCE_TIME_LIMIT && r->p->note && best) {
		snprintf(line, sizeof(line), "%s: the best fit seen, batch %ld, stands", r->err,
			 best->batch);
		r->p->note(r->p->progress_arg, line);
	}
	r->err[0] = '\0';
	out->confidence = AB_CONFIDENCE_TIME_LIMIT;
}

/* ... and none was seen to fit yet. */
static int no_fit_in_time(struct run *r)
{
	char why[AB_ERR_MAX];

	snprintf(why, sizeof(why), "%s", r->err);
	return ab_fail(r->err, r->errlen, ETIME,
		       "no batch was seen to fit before the probe's time ran out (%s%safter %zu "
		       "trials): give the probe more time (--time-limit; under srun, "
		       "probe_timeout= or the job's time limit)",
		       why, why[0] ? ", " : "", r->trials->n);
}

static int memory_search(struct run *r, struct ab_decision *out)
{
	int rc;
	long first = r->p->start > 0 ? c_floor(&r->c, (double)r->p->start) : 0;
	size_t cap = r->p->parallel > 1 ? (size_t)r->p->parallel : 1;
	long *v = calloc(cap, sizeof(*v));
	int trial_cap = r->p->trial_cap > 0 ? r->p->trial_cap : DEFAULT_TRIAL_CAP;
	struct bracket k;
	bool spent = false, told = false, timed = false;

	if (!v)
		return ab_fail(r->err, r->errlen, ENOMEM, "out of memory");
	if (!first)
		first = c_first(&r->c);
	for (;;) {
		double pred = INFINITY;
		size_t n;

		k = search_bracket(r);
		if (!k.lo) {
			const struct ab_trial *t = search_find(r, first);

			v[0] = t ? c_first(&r->c) : first;
			if (t && search_find(r, v[0])) {
				free(v);
				out->nothing_fits = true;
				return nothing_fits(r, r->err, r->errlen);
			}
		} else {
			if (done(r, &k) || plateau(r))
				break;
			pred = search_predict(r, &k);
			/* the budget's last trial, or the cap's once going on past the budget */
			v[0] = search_choose(r, &k, pred,
				      (int)r->new_rounds + 1 == r->budget ||
					      (int)r->new_rounds + 1 >= trial_cap);
		}
		if ((int)r->new_rounds >= r->budget) {
			if (!k.lo) {
				free(v);
				return ab_fail(r->err, r->errlen, ENOSPC,
					       "no fitting batch found in %d %s", r->budget,
					       cap > 1 ? "rounds" : "trials");
			}
			if (!go_on(r, &k, pred, trial_cap, &told)) {
				spent = true;
				break;
			}
		}
		n = search_plan_round(r, &k, pred, v, cap);
		/* the round's trials that finished before the time limit count too */
		if ((rc = search_measure_round(r, v, n)) == -ETIME && (k = search_bracket(r)).lo) {
			timed = true;
			time_up(r, out, k.lo);
			break;
		}
		if (rc < 0) {
			free(v);
			return rc;
		}
	}
	free(v);
	contradiction(r, &k);
	out->batch = k.lo->batch;
	out->chosen = (size_t)(k.lo - r->trials->v);
	/* past the budget or the time the best fit seen stands, not shown to be the best */
	out->confidence = timed ? AB_CONFIDENCE_TIME_LIMIT : spent ? (told ? 71 : 70) : confidence(r, &k);
	out->past_budget = told ? r->new_rounds - (size_t)r->budget : 0;
	if (search_partner(r, k.lo)) /* the line a later warm start of this job extrapolates */
		out->per_sample = (search_line_peak(r, &k, (double)k.lo->batch + 1) -
				   (double)k.lo->peak_bytes);
	return 0;
}

/* A warm start (see search.h): 0 with a decision when the cached batch ran and fit, 1 when
 * the full search must follow (it did not fit, or nothing tells how far to go), or a
 * negative errno when a trial failed. */
static int warm_start(struct run *r, struct ab_decision *out)
{
	long b = c_floor(&r->c, (double)r->p->warm_batch), next;
	double s = r->p->warm_per_sample, crossing;
	const struct ab_trial *t;
	int rc;

	if (!b)
		return 1;
	if ((rc = search_measure(r, b)) < 0)
		return rc;
	t = search_find(r, b);
	out->warm = search_fits(r, t) ? 1 : -1;
	if (out->warm < 0 || !(s > 0))
		return 1;
	out->batch = b;
	out->chosen = (size_t)(t - r->trials->v);
	out->per_sample = s;
	out->confidence = c_next(&r->c, b) ? 90 : 99;
	/* the cached line through this run's peak: where it meets the limit */
	crossing = (double)b + ((double)r->limit - (double)t->peak_bytes) / s;
	next = c_floor(&r->c, crossing * (1 - AIM_BELOW));
	if (!c_next(&r->c, b) || next <= b ||
	    (double)b >= (1 - AB_SEARCH_TOLERANCE) * crossing)
		return 0; /* no larger batch within the tolerance: b is the answer */
	if ((rc = search_measure(r, next)) == -ETIME) {
		time_up(r, out, search_find(r, b)); /* the trials may have moved */
		return 0;
	}
	if (rc < 0)
		return rc;
	t = search_find(r, next);
	if (search_fits(r, t)) {
		out->batch = next;
		out->chosen = (size_t)(t - r->trials->v);
	} else {
		out->confidence = c_next(&r->c, b) >= next ? 98 : 95;
	}
	return 0;
}

/* The batch below trial t where the line from the smallest measured batch through t's
 * peak meets the lowered limit: noise finer than the search's tolerance is not worth
 * closing on in small steps. 0 when no candidate is below t. */
static long step_down(const struct run *r, const struct ab_trial *t)
{
	const struct ab_trial *q = NULL;
	long b = 0;

	for (size_t i = 0; i < r->trials->n; i++) {
		const struct ab_trial *u = &r->trials->v[i];

		if (u->has_peak && !u->oom && u->batch < t->batch && (!q || u->batch < q->batch))
			q = u;
	}
	if (q && t->has_peak && t->peak_bytes > q->peak_bytes) {
		double slope = (double)(t->peak_bytes - q->peak_bytes) / (double)(t->batch - q->batch);

		b = c_floor(&r->c, (double)t->batch - ((double)t->peak_bytes - (double)r->limit) / slope);
	}
	return b && b < t->batch ? b : c_prev(&r->c, t->batch);
}

/* The search ends for noise: what varied (a step's ranks, or helper processes), by how much,
 * and the two readings of the batch that showed it, so that a reading that is wrong (a
 * sample of a program that had already ended its steps) can be told from real noise. */
static int noise_failure(struct run *r)
{
	const struct ab_trial *t = search_noisiest(r);
	char hi[32], lo[32], margin[32], how[80];

	if (r->limit == 0)
		snprintf(how, sizeof(how), "by more than the whole limit");
	else
		snprintf(how, sizeof(how), "too much for any batch to stay %s under the limit",
			 ab_format_size(r->target - r->limit, margin, sizeof(margin)));
	if (!t) /* a margin comes from a spread only; said plainly all the same */
		return ab_fail(r->err, r->errlen, ENOSPC, "trials' memory varies %s", how);
	ab_format_size(t->peak_bytes, hi, sizeof(hi));
	ab_format_size(t->peak_bytes - t->spread_bytes, lo, sizeof(lo));
	return ab_fail(r->err, r->errlen, ENOSPC,
		       "two runs of batch %ld peaked at %s and %s: %s varies between runs %s",
		       t->batch, hi, lo,
		       t->ranks > 1 ? "the ranks' memory"
				    : "the memory of helper processes (DataLoader workers)",
		       how);
}

/* A choice whose peak helper processes shared is one reading of a varying quantity: the
 * first such choice runs again, and the spread of its runs (at least the floor) becomes the
 * margin every choice must stay under the limit by; a choice that does not steps down along
 * the memory line to a batch that does. */
static int settle_noise(struct run *r, struct ab_decision *out)
{
	bool timed = false; /* no time to run the choice again: the floor's margin stands */
	int rc;

	for (int round = 0;; round++) {
		const struct ab_trial *t = &r->trials->v[out->chosen];
		struct bracket k;
		long b;

		/* a step down is a new trial: it stands only once it fits too (a repeat or a
		 * step down that ran out of memory was chosen before the search fuzzer) */
		if (!t->helpers && search_fits(r, t))
			break;
		if (t->helpers && !search_spread_known(r) && !timed &&
		    (rc = search_repeat(r, out->chosen)) < 0) {
			if (rc != -ETIME)
				return rc;
			timed = true; /* said once the choice is settled (time_up) */
		}
		t = &r->trials->v[out->chosen];
		if (r->limit == 0)
			return noise_failure(r);
		if (search_fits(r, t))
			break;
		if (round == NOISE_ROUNDS || !(b = step_down(r, t)))
			return noise_failure(r);
		k = search_bracket(r); /* a batch already measured to fit under the margin will do */
		if (!k.lo || k.lo->batch < b) {
			rc = timed ? -ETIME : search_measure(r, b);
			if (rc < 0 && !(rc == -ETIME && k.lo))
				return rc;
			if (rc == 0)
				k.lo = search_find(r, b);
			timed = timed || rc == -ETIME;
		}
		out->chosen = (size_t)(k.lo - r->trials->v);
		out->batch = k.lo->batch;
	}
	if (timed)
		time_up(r, out, &r->trials->v[out->chosen]);
	out->margin_bytes = r->target - r->limit;
	return 0;
}

/* Among fitting trials, the fastest, the smaller on a tie. */
static const struct ab_trial *fastest(const struct run *r)
{
	const struct ab_trial *best = NULL;
	double top = 0;

	for (size_t i = 0; i < r->trials->n; i++)
		if (search_fits(r, &r->trials->v[i]) && search_is_candidate(r, r->trials->v[i].batch))
			top = fmax(top, r->trials->v[i].samples_per_s);
	for (size_t i = 0; i < r->trials->n; i++) {
		const struct ab_trial *t = &r->trials->v[i];

		if (search_fits(r, t) && search_is_candidate(r, t->batch) && t->samples_per_s >= (1 - TIE) * top &&
		    (!best || t->batch < best->batch))
			best = t;
	}
	return best;
}

/* Throughput rises about linearly with the batch until the GPU saturates: from the largest
 * unsaturated trial, the line meets the plateau where the smallest fastest batch is. */
static int throughput_search(struct run *r, struct ab_decision *out)
{
	for (int extra = 0; extra < THROUGHPUT_EXTRA_TRIALS && (int)r->new_rounds < r->budget;
	     extra++) {
		const struct ab_trial *best = fastest(r), *below = NULL;
		double top, target;
		long next;
		int rc;

		if (!best) /* a trial with helpers raised the margin over every fit */
			break;
		top = best->samples_per_s;

		for (size_t i = 0; i < r->trials->n; i++) {
			const struct ab_trial *t = &r->trials->v[i];

			if (search_fits(r, t) && t->batch < best->batch && t->samples_per_s > 0 &&
			    (!below || t->batch > below->batch))
				below = t;
		}
		if (!below || (double)below->batch >= (1 - AB_SEARCH_TOLERANCE) * best->batch)
			break;
		target = (double)below->batch * top / below->samples_per_s;
		if (target >= (1 - AB_SEARCH_TOLERANCE) * (double)best->batch)
			break; /* the rising line meets the plateau at best: nothing smaller ties */
		if (target <= below->batch)
			target = sqrt((double)below->batch * (double)best->batch);
		next = c_ceil(&r->c, target);
		if (!next || next <= below->batch || next >= best->batch || search_find(r, next))
			break;
		if ((rc = search_measure(r, next)) == -ETIME) {
			time_up(r, out, fastest(r));
			break;
		}
		if (rc < 0)
			return rc;
	}
	const struct ab_trial *best = fastest(r);
	int rc;

	/* the margin a trial here raised is kept as the memory search's: step down under it */
	if (!best && ((rc = settle_noise(r, out)) < 0 || !(best = fastest(r))))
		return rc < 0 ? rc : ab_fail(r->err, r->errlen, ENOSPC, "no batch fits");
	if (best->samples_per_s <= 0)
		return ab_fail(r->err, r->errlen, EINVAL,
			       "the throughput objective needs step times, and the trials reported "
			       "none: report {\"step_s\": S, \"samples\": N} per step, or use "
			       "--objective memory");
	out->batch = best->batch;
	out->chosen = (size_t)(best - r->trials->v);
	return 0;
}

/* A trial whose memory does not move over a 16x range of batches is not using the batch:
 * its answer would be the largest batch allowed, and wrong. Any trial whose peak rose past
 * the smallest fit's noise, or that ran out of memory, shows that it does. */
static int check_grows(const struct run *r, const struct ab_decision *d, char *err,
		       size_t errlen)
{
	const struct ab_trial *top = &r->trials->v[d->chosen], *low = NULL;
	double highest = 0;

	for (size_t i = 0; i < r->trials->n; i++) {
		const struct ab_trial *t = &r->trials->v[i];

		if (search_fits(r, t) && (!low || t->batch < low->batch))
			low = t;
		/* as its steps showed it: a run's growth may shrink with the batch */
		highest = t->oom ? INFINITY
				 : fmax(highest, (double)ab_trial_seen_peak(t));
	}
	if (!low || top->batch < 16 * low->batch ||
	    highest > (double)ab_trial_seen_peak(low) * 1.02 + 1048576.0)
		return 0;
	return ab_fail(err, errlen, EINVAL,
		       "memory did not grow with the batch (batch %ld and batch %ld both peaked at "
		       "about %.0f MiB): the trial command does not seem to use the batch size; "
		       "make it read $AUTOBATCH_BATCH_SIZE or the config it is given",
		       low->batch, top->batch,
		       (double)ab_trial_seen_peak(top) / 1048576.0);
}

int ab_search(const struct ab_search_params *p, struct ab_trials *trials, ab_trial_fn fn,
	      void *ctx, struct ab_decision *out, char *err, size_t errlen)
{
	struct run r = {.p = p, .trials = trials, .fn = fn, .ctx = ctx, .err = err,
			.errlen = errlen,
			.budget = p->max_trials > 0 ? p->max_trials : DEFAULT_MAX_TRIALS};
	int rc;

	if (p->trial_cap > 0 && r.budget > p->trial_cap) /* the site's cap is hard */
		r.budget = p->trial_cap;

	memset(out, 0, sizeof(*out));
	if (!(p->fraction > 0 && p->fraction <= 1) || !p->total_bytes)
		return ab_fail(err, errlen, EINVAL, "the search needs a fraction in (0, 1] and the "
						    "device's total memory");
	r.limit = (uint64_t)floor(p->fraction * (double)p->total_bytes);
	if (p->reserve_bytes >= r.limit)
		return ab_fail(err, errlen, ENOSPC, "nothing fits: the reserve (other processes, "
						    "communication) of %.0f MiB takes the whole %.0f "
						    "MiB limit",
			       (double)p->reserve_bytes / 1048576.0, (double)r.limit / 1048576.0);
	r.limit -= p->reserve_bytes;
	r.target = r.limit;
	out->limit_bytes = r.limit;
	if ((rc = search_cands_init(p, &r.c, err, errlen)) < 0)
		goto done;
	rc = p->warm_batch > 0 ? warm_start(&r, out) : 1;
	if (rc == 1)
		rc = memory_search(&r, out);
	if (rc == 0)
		rc = settle_noise(&r, out);
	/* a search the time cut short has not seen how far memory goes: its fit stands proven */
	if (rc == 0 && out->confidence != AB_CONFIDENCE_TIME_LIMIT &&
	    (rc = check_grows(&r, out, err, errlen)) == -EINVAL && p->flat_ok) {
		if (p->note)
			p->note(p->progress_arg, "memory did not grow with this batch: the batch "
						 "pinned beside it (--pin) holds the peak");
		if (errlen)
			err[0] = '\0';
		rc = 0;
	}
	if (rc == 0 && p->objective == AB_OBJECTIVE_THROUGHPUT)
		rc = throughput_search(&r, out);
	/* what the time cut short before any fit, in whichever phase */
	if (rc == -ETIME)
		rc = no_fit_in_time(&r);
	if (rc == 0) {
		out->margin_bytes = r.target - r.limit; /* a throughput trial may have raised it */
		/* the run's: the global batch's split, else the config's own */
		out->grad_accum = p->global_batch ? p->global_batch / p->devices / out->batch
				  : p->run_accum > 1 ? p->run_accum
						     : 1;
		out->start_batch = p->start;
	}
done:
	out->trials_used = r.new_trials;
	out->rounds_used = r.new_rounds;
	free(r.c.list);
	return rc;
}
