/* decision.h - the probe's answer as the plugin reads it: its JSON report (bytes from
 * another process: validated, bounded), and the report as the cache keeps it.
 */
#ifndef AUTOBATCH_DECISION_H
#define AUTOBATCH_DECISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_models.h"


/* The lengths of a trial's batches, where samples differ in length (dynamic padding pads a
 * batch to its longest): what the step hook saw of the steps and of the dataset. */
struct ab_lengths {
	long min, max;      /* the steps' padded lengths ("length"); 0: none said */
	long run_longest;   /* the longest sample the run can draw ("lengths"); 0: unknown */
	long read, samples; /* samples whose length was read, of the dataset's */
	bool said;          /* a "lengths" line came */
	bool varies;        /* its samples differ in length */
	bool longest_first; /* the trial drew the dataset's longest samples first */
	long config_max;    /* the config's maximum length (config_key), a cap; 0: none */
	long padded_to;     /* a stream's batches were padded to the config's maximum; 0: not */
	char config_key[64];
};

/* Appends to buf at *len where samples differ in length: at what length the choice was
 * measured, and whether that is the run's longest (never a silent fit where autobatch could
 * not know it); nothing where lengths did not vary or were not said. */
void ab_lengths_text(const struct ab_lengths *l, char *buf, size_t buflen, size_t *len);

/* A batch ramp-up the choice keeps (the report's "ramp_up"; step 0: none): per device
 * (MaxText: the batch is start + k x step, and trials ran with the switch `key` false), or of
 * the global batch (Megatron, NeMo: every stage splits into batches over the devices). */
struct ab_ramp {
	long start, step;
	bool global;
	char key[64];
};

/* Appends what the decision line says of the ramp (nothing without one). */
void ab_ramp_text(const struct ab_ramp *r, long batch, long devices, char *buf, size_t buflen,
		  size_t *len);

/* Evaluation inside training (the report's "eval_in_training"; every 0: none configured):
 * the config evaluates every `every` steps (`key`); the chosen batch's trial evaluated
 * `seen` batches after its last training step (0: its program did not evaluate). */
struct ab_eval_in_training {
	long every, seen;
	char key[64];
};

/* Appends what the decision line says of it: in the peak, or not seen (nothing without). */
void ab_eval_in_training_text(const struct ab_eval_in_training *e, char *buf, size_t buflen,
			      size_t *len);

/* What the chosen batch's trial held between its steps rose by at each measured one (the
 * report's "held_growth"; per_step 0: it did not): the run holds more with every step, and
 * at that rate passes the limit after about steps_to_limit of the run's steps (each of its
 * accumulation's micro-batches, where a trial ran one). Where the config says the
 * run's length (run_steps, at run_key), the choice was sized for it: its peak with that
 * growth at the run's last step was run_peak. */
struct ab_growth {
	uint64_t per_step;
	long steps_to_limit;
	long run_steps;
	uint64_t run_peak;
	char run_key[64];
};

/* Appends what the decision line says of it (nothing without growth). */
void ab_growth_text(const struct ab_growth *g, char *buf, size_t buflen, size_t *len);

struct ab_result {
	bool ok;
	bool interrupted;      /* the probe was stopped by a signal (Ctrl-C, a cancel) */
	bool nothing_fits;     /* failed: the smallest batch tried went over the limit */
	char error[512];       /* the probe's sentence when not ok */
	long batch, grad_accum, global_batch;
	double fraction;
	int confidence;
	size_t trials;
	long rounds, parallel; /* 0 and 0 from a probe before parallel trials */
	long ranks, trial_nodes; /* each trial's ranks (1: one process) and its step's nodes */
	char container[256];   /* the user's container the trial steps ran in, or "" */
	uint64_t per_sample;   /* the memory line's bytes per sample at the choice; 0: unknown */
	char warm_from[80];    /* the cache entry a warm start began from, or "" */
	bool warm_verified;    /* its batch fit again (else a full search decided) */
	double elapsed_s;
	char device[128];
	uint64_t total_bytes;
	long eval_batch;       /* from a cached entry that also holds the eval decision */
	size_t eval_trials;    /* the eval probe's trials and seconds ("eval_probe"; 0: none) */
	double eval_elapsed_s;
	uint64_t chosen_peak;  /* the largest peak a fitting trial of the chosen batch showed */
	/* a step over several GPU models: the smallest, which was probed ("" otherwise) */
	char sized_for[64], sized_for_node[64];
	uint64_t sized_for_bytes;
	bool per_rank_limits; /* or each trial the whole step, each rank held to its own GPU */
	struct ab_lengths lengths; /* the report's "lengths" */
	struct ab_ramp ramp;       /* the report's "ramp_up" */
	struct ab_eval_in_training eval_in_training; /* the report's "eval_in_training" */
	struct ab_growth growth;   /* the report's "held_growth" */
	double longest_trial_s;    /* the longest of its trials' "seconds"; 0: not said */
};

/* The report with the eval batch added (when > 0) and "cache" set (when not NULL: "hit" for
 * a report served from the cache), as the cache keeps it (malloc'ed, or NULL). */
char *ab_result_with_eval(const char *json, long eval_batch, const char *cache);

/* The report json (malloc'ed, taken) with the eval probe's decision added: its batch and
 * what it cost; json as it was when that fails. */
char *ab_result_with_eval_probe(char *json, const struct ab_result *eval);

/* The report json (malloc'ed, taken) with the step's GPU models and the one it was sized for
 * added (bound NULL: "per_rank_limits", each rank held to its own); json as it was when that
 * fails. */
char *ab_result_with_models(char *json, const struct ab_gpu_models *m,
			    const struct ab_gpu_model *bound);

/* Where a probe's error names one of its own options, which a user of srun cannot give:
 * what it is under srun (the site's plugstack argument), as a note to add; "" otherwise. */
const char *ab_probe_option_note(const char *error);

/* Parses the probe's --json output. -EPROTO with a message when it is not a report. */
int ab_result_parse(const char *json, size_t len, struct ab_result *out, char *err,
		    size_t errlen);

/* Parses `run --describe-device` output: the device's name and memory, or -ENODEV with the
 * probe's own sentence (-EPROTO when it is not such a report). */
int ab_device_parse(const char *json, size_t len, char *name, size_t namelen, uint64_t *total,
		    char *err, size_t errlen);

#endif
