/* report.h - the probe's result: the JSON report of autobatch-probe(1) (through json-c) and
 * the progress and decision lines people read on stderr.
 */
#ifndef AUTOBATCH_REPORT_H
#define AUTOBATCH_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "search.h"

struct ab_report_fraction {
	double fraction;
	struct ab_decision decision;
	bool ok;
	bool out_of_time; /* not ok: the probe's time ran out before its search found a fit */
};

/* What data parallelism costs, measured with NCCL across the probe's GPUs. */
struct ab_report_comm {
	int gpus;
	uint64_t bytes;      /* gradients all-reduced per step */
	uint64_t nccl_bytes; /* NCCL's own memory per GPU */
	double busbw;        /* bytes/s */
	double seconds;      /* all-reduce time per step */
};

struct ab_report {
	bool ok;
	bool interrupted; /* stopped by SIGINT, SIGTERM or SIGHUP: "status": "interrupted" */
	bool nothing_fits; /* failed as the smallest batch tried went over: "nothing_fits" */
	char error[1024];
	const char *mode;      /* "exec" or "model" */
	const char *objective; /* "memory" or "throughput" */
	const char *phase;     /* "train" or "eval" */
	const char *device_kind, *device_name;
	uint64_t total_bytes;
	const struct ab_report_fraction *fractions; /* the first is the decision */
	size_t nfractions;
	long global_batch, devices;
	const struct ab_trials *trials;
	double elapsed_s;
	const char *model;      /* model mode: the proxy's description, else NULL */
	uint64_t reserve_bytes; /* taken off fraction x total */
	const char *others;     /* other processes on the GPU, or NULL */
	const struct ab_report_comm *comm; /* NULL unless measured */
	int parallel;                      /* trials at once; 0 or 1: one at a time */
	int ranks;                         /* ranks of each trial (--ranks); 0 or 1: one process */
	int step_nodes; /* each trial a step of the job over that many nodes; 0: none */
	const char *container; /* the user's container those steps ran in (pyxis), or NULL */
	const char *warm_from;             /* a warm start's cache entry, or NULL */
	long warm_batch;                   /* the batch it verified first */
	const char *accum_key; /* trials ran with 1 here instead of config_accum; or NULL */
	long config_accum;
	struct ab_ramp ramp;        /* the config's batch ramp-up (step 0: none) */
	long length_cap;            /* the config's maximum length, 0: none */
	const char *length_cap_key;
	long eval_every;            /* the config evaluates inside training that often, 0: not */
	const char *eval_key;
	long run_steps;             /* the run's optimizer steps the search sized for, 0: none */
	const char *run_steps_key;
};

/* The report as a JSON text (malloc'ed, one line). */
char *ab_report_json(const struct ab_report *r);

/* What `run --describe-device` prints: {"status": "device", "device": {kind, name,
 * total_bytes}}, or {"status": "failed", "error": ...} when error is not NULL. */
char *ab_report_device_json(const char *kind, const char *name, uint64_t total,
			    const char *error);

/* "45 s", "4 min", "1.5 h": how long something takes, as people say it. Returns buf. */
const char *ab_format_duration(double seconds, char *buf, size_t buflen);

/* "trial 3: batch 96 fits, peak 61.2 GiB of 64.0 GiB limit (80% of 80.0 GiB), 412 samples/s";
 * a batch run again says so and how far its runs were apart; a margin is named after limit;
 * a peak counted at the run's last step says what its steps showed. */
void ab_report_trial_line(size_t index, const struct ab_trial *t, bool fits, uint64_t limit,
			  uint64_t margin, uint64_t total, char *buf, size_t buflen);

/* "chose batch 96 (gradient accumulation 4, global 3072) in 3 trials, 41 s; ..." */
void ab_report_decision_line(const struct ab_report *r, char *buf, size_t buflen);

/* Writes the plot of `--plot FILE.svg`; 0 or -1 on a write error. */
#include <stdio.h>
int ab_report_svg(const struct ab_report *r, FILE *f);

#endif
