/* search.h - finds the batch size in few trials: the candidates the constraints allow, a
 * memory model fitted to the trials run so far, and the rule for when to stop.
 */
#ifndef AUTOBATCH_SEARCH_H
#define AUTOBATCH_SEARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"
#include "trial.h"

#define AB_SEARCH_TOLERANCE 0.03 /* the chosen batch is within 3% of the best */
#define AB_BATCH_MAX (1L << 24)

struct ab_search_params {
	uint64_t total_bytes;
	double fraction;
	uint64_t reserve_bytes;     /* taken off fraction x total: other processes, NCCL */
	enum ab_objective objective;
	long min, max, multiple_of; /* 0: unset */
	long global_batch, devices; /* global_batch 0: unset */
	/* A batch ramp-up the run goes through (0: none). Per device (MaxText): it starts at
	 * ramp_start and grows by ramp_step, so the batch must be ramp_start + k x ramp_step,
	 * k >= 1. Of the global batch (Megatron, NeMo): every stage's global batch, ramp_start +
	 * k x ramp_step up to global_batch, must split into micro-batches over the devices, so the
	 * batch x devices divides ramp_start, ramp_step and global_batch. */
	long ramp_start, ramp_step;
	bool ramp_global;
	/* The run's length in optimizer steps (a preset's max_steps; 0: not known). A trial whose
	 * held memory grew between its steps (growth_bytes) is judged by its peak at the run's
	 * last step: that growth a micro-batch over the micro-batches the run has beyond the
	 * trial's. run_accum: micro-batches in a run's step without a global batch (with one:
	 * global / devices / batch); trial_accum: in a trial's (each 0: 1). */
	long run_steps, run_accum, trial_accum;
	long start;                 /* first batch to try; 0: the smallest candidate */
	int max_trials;             /* 0: 6; with parallel trials, a bound on rounds */
	/* Past max_trials, a search whose best fit is below 90% of a batch that failed goes on
	 * until within the tolerance or the bracket is closed, up to this many (0: 12); a hard
	 * cap: max_trials above it is lowered to it. */
	int trial_cap;
	/* The probe's time limit on clock's seconds (0: none): a round that the longest round so
	 * far says would end past it is not started. The best fit seen then stands (65 "time
	 * limit reached"); with none yet the search fails with -ETIME. clock NULL: ab_now. */
	double deadline;
	double (*clock)(void);
	/* A warm start: the batch a cached decision of a job that differs only in values that
	 * do not move memory chose, and that decision's memory per sample (0: unknown). It is
	 * run first; if it fits, a second trial only where the headroom left says a larger
	 * batch may fit; if it does not, the full search follows. 0: none. */
	long warm_batch;
	double warm_per_sample;
	/* Memory may stay flat over the batch: another batch of the program, pinned in every
	 * trial (the eval probe's train batch), holds the peak. A flat curve is then said in a
	 * note, not refused as a command that ignores the batch. */
	bool flat_ok;
	/* Trials one round may run at once (the GPUs of the probe's node); 0 or 1: one at a
	 * time. With round, a round's trials run through it; without, one after another. */
	int parallel;
	ab_round_fn round;
	void *round_ctx;
	/* Called after each run of a trial (index counts runs), with whether it fits this
	 * search's limit less the margin kept for helper processes' noise. */
	void (*progress)(void *arg, size_t index, const struct ab_trial *t, bool fits,
			 uint64_t limit, uint64_t margin);
	void *progress_arg;
	/* A line without the "autobatch: " prefix on what the search decides beyond a trial
	 * (going on past the budget, and why); may be NULL. Called with progress_arg. */
	void (*note)(void *arg, const char *line);
};

/* Every trial run so far; shared by the searches of several fractions, so a measurement is
 * never repeated. */
struct ab_trials {
	struct ab_trial *v;
	size_t n, cap;
	size_t repeats; /* runs of a batch already in v (a choice confirmed) */
	size_t rounds;  /* rounds run, each one trial or several at once */
	double longest_round_s; /* the longest a round took: the next may take about as long */
};

struct ab_decision {
	long batch;           /* measured to fit; 0 when the search failed */
	long grad_accum;      /* with a global batch, else 1 */
	long start_batch;     /* the first batch tried, for the gain */
	uint64_t limit_bytes;
	uint64_t margin_bytes; /* kept under the limit for helper processes' varying memory */
	int confidence;       /* a tier, not a probability: see ab_confidence_tier */
	size_t trials_used;   /* new trials this search ran */
	size_t rounds_used;   /* in how many rounds */
	size_t chosen;        /* index in ab_trials of the chosen trial */
	double per_sample;    /* bytes per sample of the memory line at the choice; 0: unknown */
	int warm;             /* 0: no warm start; 1: verified; -1: it failed, a full search */
	size_t past_budget;   /* trials run past max_trials to close a wide bracket */
	bool nothing_fits;    /* failed: the smallest batch tried went over the limit */
};

/* Runs the search. Returns 0 with a decision, -ENOSPC when nothing fits (err says what), or
 * another negative errno when a trial failed (err is the trial's message). */
int ab_search(const struct ab_search_params *p, struct ab_trials *trials, ab_trial_fn fn,
	      void *ctx, struct ab_decision *out, char *err, size_t errlen);

void ab_trials_free(struct ab_trials *trials);

/* The confidence is a tier code, not a probability: how the search knows that no larger
 * batch fits. 99 "largest allowed" (no larger candidate exists), 98 "next size fails" (the
 * next candidate was measured not to fit), 95 "bracketed" (a larger one was measured not to
 * fit), 85 "extrapolated" (none larger was run; three or more fits on the memory line), 75
 * "extrapolated from two trials", 90 "warm start" (the cached batch ran and fit; the cached
 * line leaves no room for a batch 3% larger), 70 "trial budget spent" (the best fit seen
 * when --max-trials ran out, within 90% of the smallest failure or with none; a larger batch
 * may fit), 71 "trial cap spent" (the search went on past the budget to close a bracket
 * wider than that and the cap ran out first), 65 "time limit reached" (the best fit seen
 * when the probe's time limit left no room for another round; a larger batch may fit). */
const char *ab_confidence_tier(int confidence);

#endif
