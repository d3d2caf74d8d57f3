/* probe_args.h - srun side, private to spank/probe_step.c: the probe step's command line
 * (the nested srun's options, the trial's shape, the probe's options) from the job.
 */
#ifndef AUTOBATCH_PROBE_ARGS_H
#define AUTOBATCH_PROBE_ARGS_H

#include <stddef.h>

#include "argv.h"
#include "probe_step.h"

/* The probe step's argv into b: the probe of the job's command, in phase, in a step that is
 * cancelled after budget_s; probe_args_copy is the site's probe_args, split in place. 0, or a
 * negative errno with err. */
int ab_probe_argv(const struct ab_probe_job *job, const char *phase, unsigned budget_s,
		  char *probe_args_copy, struct ab_argv *b, char *err, size_t errlen);

/* The probe's own --time-limit in a step cancelled after budget_s: a tenth (at least 10 s)
 * less; 0 for none (a step too short for any slack). */
unsigned ab_probe_time_limit_s(unsigned budget_s);

/* The argv of the short step that names the device on node. */
int ab_probe_device_argv(const struct ab_probe_job *job, const char *node, char *probe_args_copy,
			 struct ab_argv *b, char *err, size_t errlen);

/* The argv of the short step that removes the trial steps' container on every node of the
 * step: pyxis keeps a named container after its step. */
int ab_probe_cleanup_argv(const struct ab_probe_job *job, struct ab_argv *b, char *err,
			  size_t errlen);

/* Ranks of each trial (a step of the job), 0 for a trial of one process. */
int ab_probe_trial_ranks(const struct ab_probe_job *job);

#endif
