/* sim.h - the simulated GPU of `--device sim:SPEC`: a memory and step-time curve that
 * answers trials without running anything, for tests and the search benchmark.
 */
#ifndef AUTOBATCH_SIM_H
#define AUTOBATCH_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trial.h"

struct ab_sim_point {
	double batch;
	double peak_bytes;
	double step_s; /* 0: from step_s/saturate */
};

struct ab_sim {
	uint64_t total_bytes;
	double base_bytes, per_sample_bytes; /* linear model, when no curve */
	double step_s, saturate;             /* step time step_s * max(1, b / saturate) */
	double jitter;                       /* relative, deterministic per batch */
	double oom_floor; /* an OOM says its peak was at least this share of the true one; 0: nothing */
	uint64_t granule;                    /* allocator rounding */
	uint64_t seed;
	struct ab_sim_point *points;         /* curve=FILE: sorted by batch */
	size_t npoints;
	bool only_total;                     /* the spec named nothing but total= */
	unsigned long trials;                /* how many trials it answered */
};

/* Parses "total=80GiB,base=12GiB,per_sample=300MiB,..." or "total=...,curve=FILE". */
int ab_sim_parse(const char *spec, struct ab_sim *sim, char *err, size_t errlen);

/* Takes ownership of points (malloc'ed), sorts them; total_bytes must be set. */
int ab_sim_set_curve(struct ab_sim *sim, struct ab_sim_point *points, size_t n, char *err,
		     size_t errlen);

void ab_sim_free(struct ab_sim *sim);

/* The trial function: ctx is a struct ab_sim. */
int ab_sim_trial(void *ctx, long batch, struct ab_trial *out, char *err, size_t errlen);

#endif
