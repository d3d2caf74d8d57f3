/* trial.h - one measurement of one candidate batch size: what every device (sim, host, cuda)
 * returns and the search consumes. The search never sees how a device measures.
 */
#ifndef AUTOBATCH_TRIAL_H
#define AUTOBATCH_TRIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trial_report.h" /* AB_REPORT_MAX_RANKS */

struct ab_trial {
	long batch;
	bool oom;              /* the device or the framework ran out of memory */
	uint64_t floor_bytes;  /* an OOM's peak was at least this: what it held and asked
				* for, or what filled the device (0: nothing tells) */
	bool has_peak;
	uint64_t peak_bytes;   /* peak memory of the trial */
	bool has_step;
	double step_s;         /* median of the measured steps, warm-up excluded */
	double samples_per_s;  /* 0 when unknown */
	double seconds;        /* wall time of the trial */
	int steps;             /* training steps seen, the warm-up included */
	double startup_s;      /* start to the end of the warm-up step; 0 when unknown */
	bool helpers;          /* other processes (DataLoader workers) held part of the peak:
				* their memory comes and goes with timing, so runs differ */
	bool forked;           /* those helpers are processes whose resident sets were summed
				* (the host device): their shared pages move more (NOISE_FLOOR) */
	int runs;              /* times this batch ran: a helpers' peak is run twice */
	uint64_t host_bytes;   /* host memory the trial's processes held at most (exec) */
	int round;             /* the round it ran in, from 1: trials of one round ran at once */
	uint64_t spread_bytes; /* between the runs' peaks; peak_bytes is the larger */
	int ranks;             /* a trial of several ranks (--ranks): how many; 0 or 1: one */
	int bound_rank;        /* the rank whose peak (or failure) decided */
	char bound_node[64];   /* its node, for a trial that is a step of the job; or "" */
	uint64_t bound_peak_bytes, bound_capacity_bytes; /* its own, where its node's memory
				* differs from the device's: peak_bytes is then its share of this */
	uint64_t rank_peak[AB_REPORT_MAX_RANKS]; /* each rank's peak */
	struct ab_lengths lengths; /* its batches' lengths, where they vary (exec: the hook's) */
	long alloc_retries;        /* PyTorch freed its cache and retried this often: an OOM */
	long eval_batches;         /* evaluation inside training after its last step: batches */
	uint64_t saved_bytes;      /* the checkpoint rehearsed after its steps: state saved */
	bool save_bound;           /* that save's peak was above every step's: it decided */
	uint64_t growth_bytes;     /* what it held between its steps rose by at each measured
				    * one (ab_trial_report_growth): a longer run holds more */
	uint64_t run_growth_bytes; /* that growth over the run's steps beyond its own, which
				    * the search added to peak_bytes (ab_search_params.run_steps) */
	uint64_t run_growth_step;  /* the growth a trial step it counted: growth_bytes, or below
				    * the claim's floor the other trials' rate a sample */
	uint64_t growth_floor;     /* that floor (ab_trial_report_growth_floor; 0: the
				    * resident set's), less than which its steps show none */
	/* started while the trial before it ran, and waited for its batch (its imports hidden):
	 * seconds and startup_s count from its release */
	bool ahead;
	/* no result: the probe's time limit stopped it before its steps (its trial function
	 * returned -ETIME), or, in a round that returned -ETIME, it failed; such a slot of a
	 * round is dropped, the others' results kept (search_measure_round) */
	bool stopped;
};

/* The peak t's steps showed: peak_bytes less what the search added for the run's steps. */
static inline uint64_t ab_trial_seen_peak(const struct ab_trial *t)
{
	return t->peak_bytes - t->run_growth_bytes;
}

/* The evidence a fit needs: a warm-up step, then at least one measured step. */
#define AB_TRIAL_MIN_STEPS 2

/* The one rule for "fits": full training steps were seen at this batch and their measured
 * peak stayed within limit (and within the device). A trial without that evidence never
 * fits, whatever memory it showed. */
static inline bool ab_trial_fits(const struct ab_trial *t, uint64_t limit, uint64_t total)
{
	return !t->oom && t->has_peak && t->steps >= AB_TRIAL_MIN_STEPS &&
	       t->peak_bytes <= limit && (total == 0 || t->peak_bytes <= total);
}

/* Runs one trial of batch; 0 with *out filled (an OOM is a result, not an error), or a
 * negative errno with a message when the trial could not be judged (a crash, a hang). */
typedef int (*ab_trial_fn)(void *ctx, long batch, struct ab_trial *out, char *err,
			   size_t errlen);

/* Runs the N trials of one round at once (one per GPU); 0 with out[0..N-1] filled, or a
 * negative errno with a message when one of them could not be judged. */
typedef int (*ab_round_fn)(void *ctx, const long *batches, size_t n, struct ab_trial *out,
			   char *err, size_t errlen);

#endif
