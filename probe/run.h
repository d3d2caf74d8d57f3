/* run.h - what `autobatch-probe run` parsed and what it set up: shared by cmd_run.c (the
 * set-up and the main loop), run_opts.c (options), run_config.c (the batch key),
 * run_output.c (progress, the report's files) and run_model.c (model mode, the GPU, NCCL).
 */
#ifndef AUTOBATCH_PROBE_RUN_H
#define AUTOBATCH_PROBE_RUN_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "model.h"
#include "report.h"
#include "request.h"
#include "step_gpus.h"
#include "trial_exec.h"
#include "trial_model.h"
#include "trial_round.h"
#ifdef HAVE_CUDA
#include "gpt.h"
#endif

#define MAX_FRACTIONS 8

struct run_opts {
	double fractions[MAX_FRACTIONS];
	size_t nfractions;
	enum ab_objective objective;
	const char *device, *mode, *config, *preset, *key, *json, *phase, *plot, *model;
	const char *accum_key; /* written as 1 into a trial's config copy (--accum-key, preset) */
	const char *pin_key;   /* written as pin_batch into every trial's copy (--pin KEY=N: the */
	long pin_batch;        /* eval probe's trials train at the batch chosen); or NULL */
	long config_accum;     /* what the config says at it; 0: not known */
	/* the global batch the config states beside its accumulation (DeepSpeed's
	 * train_batch_size, which it checks against micro-batch x accumulation x world): written
	 * null into a trial's copy, which the framework then derives; or NULL */
	const char *global_key;
	const char *hook_dir; /* the Python step hook; NULL with --instrument off */
	bool describe_device; /* --describe-device: say what the device is, run nothing */
	int document, steps, max_trials, trial_cap;
	double time_limit; /* seconds from the start for the search's rounds; 0: none */
	double deadline;   /* that limit on ab_now's clock (cmd_run); 0: none */
	time_t since;      /* it counts from then (--since, the wall clock); 0: the start */
	long parallel; /* trials at once, one per GPU: 1 (default), N, or 0 for auto */
	long ranks;    /* > 1: each trial is that many ranks on this node (autobatch-probe ranks) */
	const char *step_nodes; /* with ranks: each trial a Slurm step over these nodes */
	long ranks_per_node;    /* and its tasks per node; 0: as srun lays them out */
	const char *step_option[AB_STEP_OPTIONS_MAX]; /* and the real step's GPU request as
							* srun options (step_gpus.h) */
	int nstep_options;
	const char *node_memory; /* and each node's GPU memory ("BYTES:NODE,..;..."): each
				  * rank held to its own; NULL: all to this node's device */
	long warm_start;           /* a cached batch to verify first; 0: none */
	uint64_t warm_per_sample;  /* its memory line's bytes per sample; 0: unknown */
	const char *warm_from;     /* the cache entry it came from, for the report */
	long min, max, multiple_of, global_batch, devices, start;
	/* the config's batch ramp-up (ramp_step 0: none), and the switch trials turn it off with
	 * (a trial measures its own batch, not the ramp's start); see ab_search_params */
	long ramp_start, ramp_step;
	bool ramp_global;
	const char *ramp_key;
	long length_cap;            /* the config's maximum length (preset), 0: none */
	const char *length_cap_key;
	long eval_every;            /* the config evaluates inside training that often, 0: not */
	const char *eval_key;
	long run_steps;             /* the run's optimizer steps (--run-steps, the preset's key);
				     * 0: not known; AB_RUN_STEPS_OFF: --run-steps off */
	const char *run_steps_key;
	const char *save_key;       /* saving every N steps beside eval_key, or NULL */
	/* the program's own metrics file and checkpoint switch (preset roles), or NULL */
	const char *metrics_key, *checkpoint_key;
	uint64_t comm_reserve;
	double startup_seconds, trial_seconds, max_trial_seconds;
	bool keep;
	/* --start-ahead: each next trial starts while one runs (exec mode, a config, the hook) */
	bool start_ahead;
	char **command;
};

struct setup {
	struct ab_device dev;
	struct ab_exec exec;
	struct ab_model model;
	bool has_model;
	struct ab_model_host host;
#ifdef HAVE_CUDA
	struct ab_model_trial gpu;
#endif
	struct ab_report_comm comm;
	uint64_t reserve;      /* off the limit: other processes, communication */
	char model_desc[256];
	ab_trial_fn fn;
	void *ctx;
	struct ab_exec_round round; /* parallel trials; round.nslots 0 or 1: one at a time */
	const char *mode;
	char **ranks_argv; /* --ranks: autobatch-probe ranks N --capacity B [--nodes ...] -- CMD */
	char *ranks_owned[4]; /* what ranks_argv names that was made for it */
	char shared_dir[PATH_MAX]; /* --step-nodes over several nodes: the config's directory */
};

extern volatile sig_atomic_t run_interrupted;

/* run_opts.c: parses the options into o; 0, or -1 after one line on stderr. */
int run_parse_opts(int argc, char **argv, struct run_opts *o);


/* DIR when it holds the step hook (sitecustomize.py), else NULL with *missing = DIR. */
const char *run_hook_dir(const char *dir, const char **missing);

/* run_config.c: the batch key (--key, the preset named or detected) into o->key, and *start
 * from the config's value at it; the accumulation key (--accum-key, the preset's when the file
 * has it) into o->accum_key, and o->config_accum from its value. */
int run_config_key(struct run_opts *o, long *start, char *err, size_t errlen);

/* run_output.c: the progress line of a trial (arg: a struct progress) and of a slow trial. */
struct progress {
	uint64_t total;
	int parallel; /* > 1: lines name their round */
};
void run_print_trial(void *arg, size_t index, const struct ab_trial *t, bool fits,
		     uint64_t limit, uint64_t margin);
void run_print_note(void *arg, const char *line);

/* The report to FILE (- for stdout) and the plot; 0, or -1 after one line on stderr. */
int run_write_json(const char *path, const char *text);
int run_write_plot(const char *path, const struct ab_report *r);

/* The config's own batch (value, as the file says it) is where the search starts and what
 * the gain is measured against; a *start already set, or a value that is no batch, is kept. */
void start_from_value(const char *value, long *start);

/* Model mode: the dimensions (--model, or the config through the presets), the trial on the
 * GPU or, for small models, on the host; *start from the config's batch key if it has one. */
int setup_model(struct run_opts *o, struct setup *s, long *start, char *err, size_t errlen);

/* The reserve taken off the limit, and the all-reduce measured when two or more GPUs are
 * visible and the model is known. */
void setup_reserve(const struct run_opts *o, struct setup *s);

#endif
