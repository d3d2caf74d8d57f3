/* trial_model.h - model mode without a GPU: the CPU reference step of the proxy model run in
 * a child process per trial, its peak resident memory measured by wait4 against a capacity.
 */
#ifndef AUTOBATCH_TRIAL_MODEL_H
#define AUTOBATCH_TRIAL_MODEL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "trial.h"

struct ab_model_host {
	struct ab_model model;
	int steps;              /* timed steps after one warm-up */
	uint64_t capacity;      /* the child's data limit: a larger batch fails cleanly (OOM) */
	double trial_seconds;   /* deadline per trial */
	volatile sig_atomic_t *interrupted;
};

/* The trial function: ctx is a struct ab_model_host. */
int ab_model_host_trial(void *ctx, long batch, struct ab_trial *out, char *err, size_t errlen);

#endif
