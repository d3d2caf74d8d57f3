/* site.h - the site policy: the arguments of the plugin's plugstack.conf line, parsed
 * strictly (unknown keys and bad values are errors) into one struct with explicit defaults.
 *
 * Every function returns 0 or a negative errno value, and on failure writes one sentence
 * naming the bad argument and the fix into err (without the "autobatch: " prefix).
 */
#ifndef AUTOBATCH_SITE_H
#define AUTOBATCH_SITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "input_limits.h"
#include "protocol.h"

enum ab_over_max { AB_OVER_MAX_CLAMP, AB_OVER_MAX_DENY };
enum ab_on_failure { AB_ON_FAILURE_CONTINUE, AB_ON_FAILURE_ABORT };

/* Site policy: the plugstack.conf arguments. force_fraction 0 means unset. */
#define AB_COMM_RESERVE_DEFAULT (1ULL << 30)

struct ab_site {
	double default_fraction;
	double min_fraction;
	double max_fraction;
	double force_fraction;
	enum ab_over_max over_max;
	enum ab_on_failure on_failure;
	char probe[AB_PATH_MAX];
	unsigned probe_timeout; /* seconds */
	char probe_args[AB_ARGS_MAX];
	bool cache;
	char cache_dir[AB_PATH_MAX]; /* empty: $XDG_CACHE_HOME/autobatch */
	bool enforce;
	/* enforce=on under MPS: each GPU's memory, which the cap is a fraction of; 0: no cap.
	 * From the admin only: slurmstepd never takes a memory size from the job. */
	uint64_t device_memory;
	/* GPU memory kept for NCCL in a multi-task step the one-GPU probe cannot measure */
	uint64_t comm_reserve;
	unsigned startup_seconds; /* a trial's allowance to its first step (the probe's default) */
	unsigned max_trial_seconds; /* the most a measured step gets after a slow warm-up step */
	unsigned trial_cap; /* the most trials a search runs, going on past its budget */
	bool instrument;          /* the probe's Python step hook, unless a user turns it off */
	bool parallel; /* trials at once on the GPUs the job holds on the probe's node */
	enum ab_shape trial_shape; /* a trial of a step of several tasks, unless the user says */
	bool comment; /* the step's decision and real peak in the job's Comment (sacct) */
};

void ab_site_init(struct ab_site *site);

/* Parses the plugstack.conf arguments (as Slurm splits them on blanks; a quoted
 * probe_args="a b" spanning several words is joined again) and checks their consistency. */
int ab_site_parse(struct ab_site *site, int argc, char *const argv[], char *err, size_t errlen);

/* Whether the probe arguments leave the probe on a GPU: they name no --device (the probe
 * takes cuda:0), or one that is neither the host nor the simulator. The last --device counts,
 * as for the probe's own options; nothing else in them (a path with "host" in it) does. */
bool ab_probe_args_gpu(const char *probe_args);
/* Whether they leave it on a simulated device (the last --device is sim:SPEC), whose trials
 * are one process each: a step's tasks cannot each be measured on it. */
bool ab_probe_args_sim(const char *probe_args);

/* "key=value" lines of the site's settings, for srun -v; the first gives the bounds. */
int ab_site_describe(const struct ab_site *site, char *buf, size_t buflen);

#endif
