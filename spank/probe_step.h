/* probe_step.h - srun's side of the probe: autobatch-probe run as a nested job step on the
 * step's first node, as the user, from an argv array; its progress streamed, its report read.
 */
#ifndef AUTOBATCH_PROBE_STEP_H
#define AUTOBATCH_PROBE_STEP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <slurm/slurm.h>

#include "context.h"
#include "decision.h"
#include "gpu_models.h"
#include "step_gpus.h"

/* What the probe step needs to know of the step srun is about to launch. */
struct ab_probe_job {
	const struct ab_ctx *ctx; /* the settings it probes with */
	const char *srun;       /* this srun's own binary */
	unsigned jobid;
	unsigned stepid;        /* the real step's: its GPU request shapes the trial steps */
	/* what ab_probe_read_job read of the job from slurmctld, once per probing */
	const char *probe_gpus; /* the probe step's GPU option, or NULL */
	time_t ends_at;         /* the end by the job's time limit or the step's (srun -t in an
				 * allocation), the sooner; 0: none */
	const char *ends_by;    /* "job" or "step": whose limit that is */
	time_t probe_until;     /* the probing window's end, half of what was left; 0: none */
	bool step_time;         /* srun gave the step a time limit of its own (-t, --time) */
	bool no_time;           /* that window is under a minute: no probe step */
	/* what ab_probe_read_step read, before the cache is looked up (the key holds it) */
	struct ab_step_gpus step_gpus; /* the real step's GPU request, for its trial steps */
	unsigned ntasks;        /* the step's tasks */
	unsigned dp_width;      /* its data-parallel replicas, a global batch's divisor: ntasks
				 * over the config's model-parallel sizes, or its GPUs where the
				 * batch is per device or a launcher starts a worker per GPU
				 * (ab_probe_read_step) */
	unsigned workers;       /* its training processes: its tasks, or a launcher's workers
				 * where its arguments say how many; 0 for a launcher's worker
				 * per GPU (counted from the GPUs, ab_probe_read_step) */
	bool per_device;        /* the preset's batch is per device (presets.h) */
	long model_parallel;    /* the config's model-parallel product; 1 without one */
	unsigned gpus;          /* the step's GPUs, where read for a per-device batch or a
				 * launcher's workers; 0 */
	unsigned nnodes;        /* the step's nodes: how many */
	const char *nodelist;   /* the step's nodes; the probe runs on the first */
	const char *probe_node; /* or here: a node of the step's smallest GPU model; or NULL */
	const struct ab_gpu_models *models; /* the step's GPU models, measured; or NULL */
	int argc;
	char **argv;            /* the step's command */
	const char *chdir;      /* srun -D's directory, where the probe runs too; or NULL */
	const char *config;     /* absolute path, or NULL */
	const char *key;        /* the micro-batch key in it */
	const char *accum_key;  /* its gradient accumulation key (1 in trials), or NULL */
	const char *pin_key;    /* another batch key every trial writes as pin_batch (the eval */
	long pin_batch;         /* probe's: the train batch chosen), or NULL */
	const char *preset;     /* the preset whose keys the plugin read it by, or NULL */
	long global_batch;      /* 0: none */
	long max_batch;         /* the largest batch to try: a real run went over above; 0: none */
	/* a warm start: a cached decision of a job differing only in memory-neutral values */
	long warm_batch;        /* 0: none */
	uint64_t warm_per_sample;
	const char *warm_from;  /* its cache entry's name */
	char *const *env;       /* srun's environment when it decided (NULL: environ now) */
	void (*tick)(void *arg); /* called every 0.2 s while the probe step runs; or NULL */
	void *tick_arg;
};

/* Reads from slurmctld the real step's GPU request where it shapes the decision (trial steps
 * take it; a per-device batch's replicas are its GPUs), before the cache is looked up, which
 * keys on it; 0, or a negative errno with err when it is none srun takes back. */
int ab_probe_read_step(struct ab_probe_job *job, char *err, size_t errlen);

/* slurmctld's record of the job (slurm_load_job, whose form changed in 26.05): SLURM_SUCCESS
 * and *msg for slurm_free_job_info_msg, or an error. */
int ab_load_job(uint32_t jobid, job_info_msg_t **msg);

/* Reads from slurmctld the job's GPU request, which the probe step's own option comes from,
 * and its end by its time limit, which bounds the probe's time (said when it does): only when
 * probing, before ab_probe_run and ab_probe_device (a cache hit needs none). */
void ab_probe_read_job(struct ab_probe_job *job);

/* The seconds the train probe would have for its trial rounds now (its --time-limit, else
 * its step's budget), after ab_probe_read_job; 0 where no probe step would start. */
unsigned ab_probe_train_limit_s(const struct ab_probe_job *job);

/* Runs the probe step; 0 with the result (and its JSON in *json, malloc'ed, when json is not
 * NULL), or a negative errno with one sentence naming the cause. Once *stop is set (srun is
 * ending) the probe step is cancelled. */
int ab_probe_run(const struct ab_probe_job *job, const char *phase,
		 const volatile sig_atomic_t *stop, struct ab_result *res, char **json, char *err,
		 size_t errlen);

/* A step of one task on node that runs `autobatch-probe run --describe-device` with the
 * site's probe_args: the device's name and memory there, or a negative errno with err. */
int ab_probe_device(const struct ab_probe_job *job, const char *node,
		    const volatile sig_atomic_t *stop, char *name, size_t namelen, uint64_t *total,
		    char *err, size_t errlen);

/* The one error a Ctrl-C while probing gives (-EINTR), whichever step it stopped. */
int ab_probe_interrupted(char *err, size_t errlen);

/* True when each trial is the whole step over GPU models of different memory: each rank is
 * then held to its own GPU's (--node-memory), not all to the smallest's. */
bool ab_probe_per_rank_limits(const struct ab_probe_job *job);

/* True in the nested srun that runs the probe step. */
bool ab_is_probe_step(void);

#endif
