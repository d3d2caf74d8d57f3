/* search_run.h - one search's state, shared by the search's files: the candidate sizes
 * (search_candidates.c), the trials and the bracket (search.c), the next trial (search_aim.c),
 * rounds (search_rounds.c).
 * Not for use outside lib/probe/search*.c.
 */
#ifndef AUTOBATCH_SEARCH_RUN_H
#define AUTOBATCH_SEARCH_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "search.h"

/* the search's shared tuning (search.c, search_aim.c, search_model.c) */
#define AIM_BELOW 0.005   /* aim this far under the predicted limit */
#define MARGIN 0.02       /* a line prediction this far over the limit is a sure failure */
#define QUIET 0.0005      /* trials this close to a line show no noise */
#define NOISE_GUESS 0.007 /* a peak's run-to-run noise, unknown until seen: allocator jitter */

struct cands {
	long *list; /* with a global batch: the divisors that qualify, ascending */
	size_t n;
	long step, lo, hi; /* otherwise: multiples of step in [lo, hi] */
};

struct run {
	const struct ab_search_params *p;
	struct ab_trials *trials;
	ab_trial_fn fn;
	void *ctx;
	struct cands c;
	uint64_t target;   /* fraction x total, less the reserve */
	uint64_t limit;    /* what a trial must stay within: the target less any margin */
	size_t new_trials, new_rounds;
	int budget;        /* rounds this search may run (--max-trials) */
	char *err;
	size_t errlen;
};

struct bracket {
	const struct ab_trial *lo; /* largest fitting candidate */
	const struct ab_trial *hi; /* smallest failing candidate above lo */
	size_t nfit;
};

/* The candidates p allows; 0 or a negative errno with err. */
int search_cands_init(const struct ab_search_params *p, struct cands *c, char *err,
		      size_t errlen);
/* The largest candidate <= x, the smallest >= x; 0 when there is none. */
long c_floor(const struct cands *c, double x);
long c_ceil(const struct cands *c, double x);
static inline long c_first(const struct cands *c) { return c->list ? c->list[0] : c->lo; }
static inline long c_last(const struct cands *c) { return c->list ? c->list[c->n - 1] : c->hi; }
static inline long c_next(const struct cands *c, long b) { return c_ceil(c, (double)b + 1); }
static inline long c_prev(const struct cands *c, long b) { return c_floor(c, (double)b - 1); }

/* search_trials.c: the trial of batch b, or NULL; whether a trial fits this search's limit;
 * a round of trials at batches (0, or the error of the first that could not run), one
 * trial; whether two runs of one batch told its spread; trial i run again. */
const struct ab_trial *search_find(const struct run *r, long b);
/* The search's clock (ab_search_params.clock, else ab_now). */
double search_clock(const struct run *r);
bool search_fits(const struct run *r, const struct ab_trial *t);
int search_measure_round(struct run *r, const long *batches, size_t n);
int search_measure(struct run *r, long b);
bool search_spread_known(const struct run *r);
/* The trial whose runs peaked furthest apart; NULL while none ran twice. */
const struct ab_trial *search_noisiest(const struct run *r);
int search_repeat(struct run *r, size_t i);

/* search_model.c: whether b is a candidate; the bracket of the trials so far. */
bool search_is_candidate(const struct run *r, long b);
struct bracket search_bracket(const struct run *r);
/* The fitting trial the line through lo is drawn to (far enough below it), or NULL. */
const struct ab_trial *search_partner(const struct run *r, const struct ab_trial *lo);
/* Where the line through lo and its partner crosses the limit (INFINITY without one). */
double search_line_pred(const struct run *r, const struct bracket *k);
/* The batch where the memory curve crosses the limit, from every fit (INFINITY when
 * nothing tells). */
double search_predict(const struct run *r, const struct bracket *k);
/* What a failing trial's peak was at least: its peak, or for an OOM its floor or the device. */
double search_peak_at_least(const struct run *r, const struct ab_trial *t);
/* Where the quadratic of three or more fits that bend upward reaches the limit; INFINITY
 * when no bend beyond noise is seen. */
double search_bend_pred(const struct run *r, const struct bracket *k);
/* The same, when the bend is checked: a failure's peak it foresaw, or four fits on it; else
 * INFINITY. What the stopping rule may believe. */
double search_bend_checked(const struct run *r, const struct bracket *k);
/* Where the least bend an OOM the line did not foresee needs reaches the limit (an upper
 * bound of the crossing); INFINITY when the line foresaw it. */
double search_refuted_pred(const struct run *r, const struct bracket *k);
/* The line's peak at batch b, through lo and its partner (NAN without a partner). */
double search_line_peak(const struct run *r, const struct bracket *k, double b);
/* How far the other fitting trials lie off that line; -1 with no third trial. */
double search_residual(const struct run *r, const struct bracket *k);

/* search_aim.c: the next batch to try inside or below the bracket k, from the model's
 * crossing pred (NAN: an OOM refuted the line; INFINITY: nothing tells); last: the budget's
 * or the cap's last trial, aimed where it likely fits. */
long search_choose(const struct run *r, const struct bracket *k, double pred, bool last);

/* The round beside v[0], the trial a sequential search runs next: up to cap sizes in v,
 * returned how many. */
size_t search_plan_round(const struct run *r, const struct bracket *k, double pred, long *v,
			 size_t cap);

#endif
