/* search_trials.c - the search's trials (search_run.h): running a round of them, finding
 * and judging one, the margin helper processes' noise needs, and repeating a choice.
 */
#include "search_run.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "size.h"

/* Helper processes' memory differs between runs of one batch. The margin kept under the
 * limit for it: twice the spread two runs of the choice showed (two readings understate the
 * range), and at least NOISE_FLOOR of the limit, what ranks and plain runs with two
 * DataLoader workers spread over (Python 3.14, forkserver: 788 to 812 MiB in three runs of
 * one batch, 3.0%; Debian 12, fork: up to 17 MiB of 409 within a session, 4.2%). Forked
 * helpers measured by their resident sets (the host device) spread further on a loaded
 * machine, as their copy-on-write pages and prefetched batches follow the scheduler: local
 * CI run 5, a choice measured under 397 MiB ran at 408, 409 and 420 MiB (5.8%); official CI
 * of stop 61, one run twice at 386 MiB ran at 386, 399 and over 409.6 (6.1%). A larger floor
 * costs programs whose samples are small most of their batch (an HF job at 5 MiB a sample),
 * so ranks on a device keep the smaller one. */
#define NOISE_FLOOR 0.05
#define FORKED_NOISE_FLOOR 0.08

void ab_trials_free(struct ab_trials *t)
{
	free(t->v);
	memset(t, 0, sizeof(*t));
}

bool search_fits(const struct run *r, const struct ab_trial *t)
{
	return ab_trial_fits(t, r->limit, r->p->total_bytes);
}

const struct ab_trial *search_find(const struct run *r, long b)
{
	for (size_t i = 0; i < r->trials->n; i++)
		if (r->trials->v[i].batch == b)
			return &r->trials->v[i];
	return NULL;
}

static void keep_margin(struct run *r);

static double trial_accum(const struct run *r)
{
	return r->p->trial_accum > 1 ? (double)r->p->trial_accum : 1;
}

/* The least growth a sample of a micro-batch any trial showed; 0 where none grew. */
static double sample_rate(const struct run *r)
{
	double rate = 0;

	for (size_t i = 0; i < r->trials->n; i++) {
		const struct ab_trial *t = &r->trials->v[i];
		double g = (double)t->growth_bytes / trial_accum(r) / (double)t->batch;

		if (t->growth_bytes && t->batch > 0 && (rate == 0 || g < rate))
			rate = g;
	}
	return rate;
}

/* What t held between its steps grew by a trial step: its own, or where it rose by less
 * than the floor the claim needs (a smaller batch), the others' rate a sample, up to that
 * floor: a growth the larger batches showed is not taken as none below it. */
static double step_growth(const struct run *r, const struct ab_trial *t, double rate)
{
	double floor_bytes = t->growth_floor ? t->growth_floor : AB_GROWTH_MIN_BYTES,
	       g = rate * (double)t->batch * trial_accum(r);

	if (t->growth_bytes)
		return (double)t->growth_bytes;
	return g < floor_bytes ? g : floor_bytes;
}

/* That growth over the micro-batches the run has beyond the trial's: a loss kept with its
 * graph or an output kept grows with each forward pass, so a run accumulating over more
 * micro-batches than its trial holds that much more a step. */
static uint64_t run_growth(const struct run *r, const struct ab_trial *t, double step)
{
	const struct ab_search_params *p = r->p;
	double run_acc, left, add;

	if (p->run_steps <= 0 || step <= 0 || t->oom || !t->has_peak || t->batch <= 0)
		return 0;
	if (p->global_batch && p->devices > 0)
		run_acc = (double)(p->global_batch / p->devices / t->batch);
	else
		run_acc = p->run_accum > 1 ? (double)p->run_accum : 1;
	left = (double)p->run_steps * run_acc - (double)t->steps * trial_accum(r);
	add = left > 0 ? step / trial_accum(r) * left : 0;
	return add < 0x1p60 ? (uint64_t)add : (uint64_t)1 << 60; /* past any device */
}

/* t's peak as its steps showed it, before project(). */
static void unproject(struct ab_trial *t)
{
	t->peak_bytes -= t->run_growth_bytes;
	t->run_growth_bytes = 0;
	t->run_growth_step = 0;
}

/* Judges every trial at the run's last step: its peak with that growth (see
 * ab_search_params), again after each measurement, as a later trial's growth tells the rate
 * of earlier ones too small to show it. */
static void project(struct run *r)
{
	double rate = r->p->run_steps > 0 ? sample_rate(r) : 0;

	for (size_t i = 0; i < r->trials->n && rate > 0; i++) {
		struct ab_trial *t = &r->trials->v[i];
		double step = step_growth(r, t, rate);

		unproject(t);
		if ((t->run_growth_bytes = run_growth(r, t, step)))
			t->run_growth_step = (uint64_t)step;
		t->peak_bytes += t->run_growth_bytes;
	}
}

/* Tells the caller of a run of trial tr; runs are numbered in order, repeats included. */
static void progress(const struct run *r, const struct ab_trial *tr, size_t index)
{
	if (r->p->progress)
		r->p->progress(r->p->progress_arg, index, tr, search_fits(r, tr), r->target,
			       r->target - r->limit);
}

static int grow(struct run *r, size_t n)
{
	struct ab_trials *t = r->trials;
	size_t cap = t->cap ? t->cap : 16;
	struct ab_trial *v;

	while (cap < t->n + n)
		cap *= 2;
	if (cap == t->cap)
		return 0;
	if (!(v = realloc(t->v, cap * sizeof(*v))))
		return ab_fail(r->err, r->errlen, ENOMEM, "out of memory");
	t->v = v;
	t->cap = cap;
	return 0;
}

double search_clock(const struct run *r)
{
	return r->p->clock ? r->p->clock() : ab_now();
}

/* Whether the round about to start would end past the time limit: it may take a quarter
 * longer than the longest so far (a larger batch steps slower). */
static int out_of_time(struct run *r)
{
	double left = r->p->deadline - search_clock(r), next = 1.25 * r->trials->longest_round_s;

	if (!(r->p->deadline > 0) || left > next)
		return 0;
	return ab_fail(r->err, r->errlen, ETIME,
		       "the probe's time limit leaves %.0f s, and a round of trials has taken up "
		       "to %.0f s",
		       left > 0 ? left : 0, r->trials->longest_round_s);
}

/* A round the time limit stopped: its trials that finished, moved to the front; how many. */
static size_t finished(struct ab_trial *out, size_t n)
{
	size_t kept = 0;

	for (size_t i = 0; i < n; i++)
		if (!out[i].stopped)
			out[kept++] = out[i];
	return kept;
}

/* Runs one round: the batches at once where a round function and GPUs allow, else one
 * after another. Every batch is a new one. -ETIME when the time limit leaves no room for it
 * (nothing run), or stopped some of its trials: those that finished are kept. */
int search_measure_round(struct run *r, const long *batches, size_t n)
{
	struct ab_trials *t = r->trials;
	struct ab_trial *out;
	double t0;
	int rc;

	if ((rc = out_of_time(r)) < 0 || (rc = grow(r, n)) < 0)
		return rc;
	out = &t->v[t->n];
	memset(out, 0, n * sizeof(*out));
	t0 = search_clock(r);
	if (n > 1 && r->p->round)
		rc = r->p->round(r->p->round_ctx, batches, n, out, r->err, r->errlen);
	else
		for (size_t i = 0; i < n && rc >= 0; i++)
			if ((rc = r->fn(r->ctx, batches[i], &out[i], r->err, r->errlen)) < 0)
				for (size_t j = i; j < n; j++) /* it and those not run */
					out[j].stopped = true;
	if (rc < 0 && rc != -ETIME)
		return rc;
	for (size_t i = 0; i < n; i++)
		out[i].batch = batches[i];
	if (rc == -ETIME && !(n = finished(out, n)))
		return rc;
	t->longest_round_s = fmax(t->longest_round_s, search_clock(r) - t0);
	t->rounds++;
	r->new_rounds++;
	for (size_t i = 0; i < n; i++) {
		out[i].runs = 1;
		out[i].round = (int)t->rounds;
	}
	t->n += n;
	project(r);
	r->new_trials += n;
	keep_margin(r);
	for (size_t i = 0; i < n; i++)
		progress(r, &t->v[t->n - n + i], t->n - n + i + t->repeats);
	return rc;
}

int search_measure(struct run *r, long b)
{
	return search_find(r, b) ? 0 : search_measure_round(r, &b, 1);
}

/* The margin the helpers' noise asks for: twice the largest spread seen, at least the floor;
 * none while no trial had helpers. */
static uint64_t noise_margin(const struct run *r, uint64_t target)
{
	uint64_t spread = 0, floor_bytes;
	bool helpers = false, forked = false;

	for (size_t i = 0; i < r->trials->n; i++) {
		helpers = helpers || r->trials->v[i].helpers;
		forked = forked || r->trials->v[i].forked;
		if (r->trials->v[i].spread_bytes > spread)
			spread = r->trials->v[i].spread_bytes;
	}
	if (!helpers)
		return 0;
	floor_bytes = (uint64_t)((forked ? FORKED_NOISE_FLOOR : NOISE_FLOOR) * (double)target);
	return 2 * spread > floor_bytes ? 2 * spread : floor_bytes;
}

/* From the first trial with helpers on, the search aims under the margin. */
static void keep_margin(struct run *r)
{
	uint64_t margin = noise_margin(r, r->target);

	r->limit = margin < r->target ? r->target - margin : 0;
}

const struct ab_trial *search_noisiest(const struct run *r)
{
	const struct ab_trial *most = NULL;

	for (size_t i = 0; i < r->trials->n; i++)
		if (r->trials->v[i].runs > 1 &&
		    (!most || r->trials->v[i].spread_bytes > most->spread_bytes))
			most = &r->trials->v[i];
	return most;
}

bool search_spread_known(const struct run *r)
{
	return search_noisiest(r) != NULL;
}

/* Runs trial i's batch again; the trial keeps the larger peak and the spread. */
int search_repeat(struct run *r, size_t i)
{
	struct ab_trials *t = r->trials;
	struct ab_trial again, *tr;
	int rc;
	double t0 = search_clock(r);

	memset(&again, 0, sizeof(again));
	if ((rc = out_of_time(r)) < 0 ||
	    (rc = r->fn(r->ctx, t->v[i].batch, &again, r->err, r->errlen)) < 0)
		return rc;
	t->longest_round_s = fmax(t->longest_round_s, search_clock(r) - t0);
	r->new_trials++;
	r->new_rounds++;
	t->repeats++;
	t->rounds++;
	tr = &t->v[i];
	unproject(tr); /* the runs' peaks compared as seen; the larger growth added after */
	tr->runs++;
	tr->round = (int)t->rounds;
	tr->oom = tr->oom || again.oom;
	tr->helpers = tr->helpers || again.helpers;
	tr->forked = tr->forked || again.forked;
	tr->growth_bytes = again.growth_bytes > tr->growth_bytes ? again.growth_bytes
								  : tr->growth_bytes;
	tr->growth_floor = again.growth_floor > tr->growth_floor ? again.growth_floor
								  : tr->growth_floor;
	if (again.has_peak && tr->has_peak) {
		uint64_t lo = again.peak_bytes < tr->peak_bytes ? again.peak_bytes : tr->peak_bytes;

		tr->peak_bytes = again.peak_bytes > tr->peak_bytes ? again.peak_bytes : tr->peak_bytes;
		tr->spread_bytes = tr->peak_bytes - lo > tr->spread_bytes ? tr->peak_bytes - lo
									   : tr->spread_bytes;
	}
	project(r);
	keep_margin(r);
	progress(r, tr, t->n - 1 + t->repeats);
	return 0;
}
