/* trial_report.h - what a trial says: the JSON lines it appends to $AUTOBATCH_TRIAL_REPORT
 * ({"step_s": S, "samples": N} per step, {"peak_bytes": N}, {"oom": true,
 * "peak_at_least_bytes": N}), and the out-of-memory messages of frameworks in its output,
 * with what they tell of the peak that did not fit. Hostile input: bounded, and anything
 * malformed is counted and skipped, never trusted.
 */
#ifndef AUTOBATCH_TRIAL_REPORT_H
#define AUTOBATCH_TRIAL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "decision.h" /* struct ab_lengths */
#include "protocol.h"

#define AB_REPORT_MAX_BYTES (1u << 20)
#define AB_REPORT_MAX_STEPS 1024
#define AB_REPORT_MAX_LINE 4096
#define AB_REPORT_MAX_RANKS AB_TRIAL_MAX_RANKS /* a trial's ranks (autobatch-probe ranks) */

struct ab_trial_report {
	size_t steps;                       /* step lines, warm-up included */
	double step_s[AB_REPORT_MAX_STEPS];
	double samples[AB_REPORT_MAX_STEPS]; /* 0 when the line gave none */
	bool oom;
	uint64_t floor_bytes; /* "peak_at_least_bytes": the largest reported */
	bool has_peak;
	uint64_t peak_bytes; /* the largest reported */
	/* a trial of several ranks: each rank's peak ("rank_peaks": [N, ...]) and the rank whose
	 * peak or failure decided ("bound_rank": R); nranks 0 for a trial of one process */
	size_t nranks;
	uint64_t rank_peak[AB_REPORT_MAX_RANKS];
	int bound_rank;
	char bound_node[64]; /* a trial step's: the node of that rank ("bound_node"); or "" */
	/* that rank held to its own node's memory, of another size than the trial's: its own
	 * bytes and memory (peak_bytes is then its share of the trial's); 0 otherwise */
	uint64_t bound_peak_bytes, bound_capacity_bytes;
	struct ab_lengths lengths;
	long alloc_retries; /* PyTorch's num_alloc_retries, the largest said (0: none) */
	bool eval_said;     /* {"eval_batches": N}: the evaluation after the last step ran N */
	bool eval_awaited;  /* {"eval_awaited": true}: the step hook awaits it and will say it */
	long eval_batches;
	/* {"saved_bytes": N, "peak_bytes": P}: the checkpoint rehearsed after the last step,
	 * its size and the peak it reached; step_peak_bytes: the largest said by a step */
	uint64_t saved_bytes, save_peak_bytes, step_peak_bytes;
	bool saving; /* {"saving": true} and no "saved_bytes" after it: the save did not end */
	/* "held_bytes" of the step lines after the warm-up, what each step left held: how many
	 * said it (held_steps), the first and the last, and the smallest and largest rise from
	 * one to the next; held_flat once a line lacked it or one did not rise; held_rough once
	 * one of them lacked "held_exact": true (a resident set, not a device's live bytes).
	 * held_said: {"held_growth_bytes": N}, the last a launcher's or the ranks' merge said of
	 * its processes (ab_trial_report_growth) */
	size_t held_steps;
	uint64_t held_first, held_last, held_rise, held_rise_max, held_said;
	bool held_flat, held_rough;
	size_t bad_lines;
	char bad_first[64]; /* the first of them, printable (ab_printable), for the message */
};

/* A report read while its writer runs: whole lines only, each once (the probe's watch of a
 * trial, and the ranks' launcher's watch of each rank). fd -1: nothing to read. */
struct ab_report_watch {
	int fd;
	off_t parsed;  /* bytes fed so far */
	bool skipping; /* inside a line longer than a line may be */
	struct ab_trial_report rep;
};

/* Feeds w->rep the whole lines written since the last call; final: the writer has ended,
 * so a last line without its newline counts too. */
void ab_report_watch_read(struct ab_report_watch *w, bool final);

/* The same reading, each run of whole lines handed to on(arg, buf, len) instead of being
 * parsed (a trial step's task relays its command's lines as they are); an overlong line is
 * counted in w->rep.bad_lines and skipped, as ab_report_watch_read does. */
void ab_report_watch_lines(struct ab_report_watch *w, bool final,
			   void (*on)(void *arg, const char *buf, size_t len), void *arg);

/* Parses buf (need not be NUL-terminated); never fails, malformed lines are counted. */
void ab_trial_report_parse(const char *buf, size_t len, struct ab_trial_report *out);

/* Adds the lines in buf to what out already holds: a report read while the trial runs. */
void ab_trial_report_feed(const char *buf, size_t len, struct ab_trial_report *out);

/* measured, or the peak the command reported itself (its hook's resident high-water mark, or
 * CUDA's reserved peak) when that is more: a peak the samples missed still counts, one
 * between two samples, or one of a process that ran its steps and exec'd another program
 * (whose high-water mark starts afresh) before the first sample came. */
uint64_t ab_trial_report_peak_over(const struct ab_trial_report *rep, uint64_t measured);

/* What several processes of one trial (a step's ranks, a launcher's workers) said beyond
 * their steps, already passed on: each said once, or as it grows. */
struct ab_merge_said {
	bool lengths, eval, awaited, saved;
	long retries;
	uint64_t growth;
};

/* That evidence of the n reports as report lines for the trial's own report, each line
 * ending in a newline, into buf (truncated to nothing when it does not fit): the first
 * "lengths" any said; the most "alloc_retries" (any is an OOM of the trial); once any
 * awaits an evaluation, "eval_awaited"; once every one said it, the fewest "eval_batches";
 * the largest growth (ab_trial_report_growth) as "held_growth_bytes", each time it changes.
 * Returns the length written. */
size_t ab_trial_merge_evidence(const struct ab_trial_report *const *reps, size_t n,
			       struct ab_merge_said *said, char *buf, size_t buflen);

/* Bytes by which what a process held between its steps rose at every measured step, at
 * least (AB_GROWTH_MIN_STEPS of them, each rising by its floor or more): the mean of those
 * rises where they agree (the largest at most twice the smallest), else the smallest (a
 * one-off allocation among them); the largest of any of its processes; 0 when it did not
 * rise so. The floor (ab_trial_report_growth_floor): AB_GROWTH_MIN_BYTES for a resident
 * set, whose pages and arenas move by up to 136 KiB a step with nothing kept;
 * AB_GROWTH_EXACT_MIN_BYTES where every step said its figure is a device's live bytes
 * ("held_exact"), which move only with what the program keeps (CUDA's granule is 512). */
#define AB_GROWTH_MIN_STEPS 3
#define AB_GROWTH_MIN_BYTES (1u << 20)
#define AB_GROWTH_EXACT_MIN_BYTES 512u
uint64_t ab_trial_report_growth(const struct ab_trial_report *r);
uint64_t ab_trial_report_growth_floor(const struct ab_trial_report *r);

/* The longest batch any of the n reports has had so far: a merged step's "length". */
long ab_trial_merge_length(const struct ab_trial_report *const *reps, size_t n);

/* Median step time and samples/s over the steps after the first (the warm-up); false when
 * there are fewer than two steps. */
bool ab_trial_report_timing(const struct ab_trial_report *r, long batch, double *step_s,
			    double *samples_per_s);

/* The median of n > 0 values (sorts v); the mean of the middle two when n is even. */
double ab_median(double *v, size_t n);

/* True when the text has one of the out-of-memory messages of PyTorch, JAX/XLA,
 * TensorFlow, CUDA or the C++/C runtime. */
bool ab_text_says_oom(const char *text, size_t len);

/* What an out-of-memory message in text says the failed peak was at least (0: nothing): for
 * PyTorch on CUDA what it had allocated plus what it tried to allocate ("Tried to allocate
 * 2.00 GiB ... 75.30 GiB is allocated by PyTorch", and 1.x's "... already allocated"); for
 * PyTorch on the CPU ("you tried to allocate N bytes") and XLA ("while trying to allocate
 * N bytes") the request alone. The largest of the messages found. */
uint64_t ab_text_oom_floor(const char *text, size_t len);

#endif
