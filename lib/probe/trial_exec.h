/* trial_exec.h - exec mode: runs the user's own command as one trial per candidate batch
 * (the trial protocol), in its own process group, with a private config copy, a report
 * file, a log, a start-up allowance and a step deadline, and memory watched or reported.
 * A trial fits only with its steps seen (a warm-up and a measured step): a trial without
 * them is an error that says what happened, never a fit.
 */
#ifndef AUTOBATCH_TRIAL_EXEC_H
#define AUTOBATCH_TRIAL_EXEC_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config_edit.h"
#include "group_memory.h"
#include "trial.h"

#define AB_STARTUP_SECONDS_DEFAULT 600 /* loading, building a dataset, compiling */
#define AB_TRIAL_SECONDS_DEFAULT 60    /* the steps, counted from the first */
#define AB_MAX_TRIAL_SECONDS_DEFAULT 1800 /* for a measured step, however slow the steps */
#define AB_DONE_GRACE_SECONDS 3        /* to exit by itself once its steps were seen */

enum ab_peak_source {
	AB_PEAK_FROM_REPORT, /* sim:total=SIZE: the trial's own {"peak_bytes": N} */
	AB_PEAK_FROM_RSS,    /* host: resident memory of the process group */
	AB_PEAK_FROM_GPU,    /* cuda:N: the group's GPU memory, polled, or else the report */
};

struct ab_exec {
	char *const *argv;      /* the command; argv[0] looked up in PATH */
	const char *config;     /* as given on the command line, or NULL */
	const char *key;        /* the batch key written into the config copy */
	const char *accum_key;  /* the accumulation key, written as 1 into the copy; or NULL */
	const char *pin_key;    /* another batch key, written as pin_batch into it; or NULL */
	long pin_batch;
	const char *global_key; /* the config's global batch, written null into it; or NULL */
	const char *ramp_key;   /* a batch ramp-up's switch, written false into it; or NULL */
	/* the config evaluates inside training (this key): the copy evaluates after the trial's
	 * last step, and the trial is awaited through that evaluation; or NULL */
	const char *eval_key;
	const char *save_key;   /* saving every N steps: moved past the trial's end; or NULL */
	/* the program's own per-step metrics file, named as the trial's report in the copy
	 * (its lines are the trial's steps); its checkpoint switch, written false; or NULL */
	const char *metrics_key, *checkpoint_key;
	long pad_to;            /* the config's maximum length: streamed batches padded to it */
	int document;           /* -1: the key's only document */
	const char *phase;      /* "train" or "eval" */
	int steps;              /* AUTOBATCH_TRIAL_STEPS, measured after one warm-up step */
	double startup_seconds; /* allowance to the first step (0: the default) */
	double trial_seconds;   /* allowance from the first step to the last */
	/* A program whose warm-up step is slow gets twice that step for a measured step, up to
	 * this (0: the default); once one measured step is seen, a step that would end past
	 * trial_seconds is not waited for: the warm-up and one measured step are the evidence. */
	double max_trial_seconds;
	/* The probe's time limit on ab_now's clock (0: none): a trial still running then is
	 * stopped, counted where its steps were seen, else -ETIME (the search keeps its best). */
	double deadline;
	enum ab_peak_source peak_source;
	uint64_t capacity;      /* RSS or GPU memory above this is an OOM */
	/* XLA's pool cap in a trial where the environment names none (ab_env_xla_fraction):
	 * the largest fraction asked; 0: none set */
	double pool_fraction;
	/* AB_PEAK_FROM_GPU: the GPU memory of the trial's process group (NVML); NULL when NVML
	 * is absent, and the peak comes from the trial's {"peak_bytes": N} */
	uint64_t (*gpu_usage)(void *arg, pid_t pgid);
	void *gpu_arg;
	bool keep;              /* keep trial directories (logs) */
	/* where the work directory goes when a trial's ranks run on other nodes, which must read
	 * its config copies (the config's own directory, shared as the real step's tasks share
	 * it); NULL: $TMPDIR */
	const char *workdir_parent;
	volatile sig_atomic_t *interrupted; /* set by the caller's signal handler */
	/* A trial ended early (it has its steps, it went over, an interrupt) is killed at once
	 * (0), or, a launcher of ranks that ends them itself, sent SIGINT and given this long */
	double stop_grace_s;
	/* a directory with our sitecustomize (the Python step hook), put first on the trial's
	 * PYTHONPATH; NULL: not instrumented */
	const char *hook_dir;
	const char *hook_missing; /* where the hook was looked for in vain, or NULL */
	/* Start each next trial while this one runs (a config and the hook needed): it waits in
	 * the hook, before it opens its config copy or uses the device, for its batch. Only for
	 * a Python command (python*, or a #! script that runs one); a trial started so that ended
	 * before its turn turns this off for the rest of the probe. */
	bool start_ahead;
	/* progress of a slow trial, one line without the "autobatch: " prefix; may be NULL */
	void (*note)(void *arg, const char *line);
	void *note_arg;
	/* internal */
	int count;
	struct ab_exec_ahead *ahead; /* the next trial, started and waiting; or NULL */
	/* the measured step of the largest batch an earlier trial ran (0: none yet): a measured
	 * step of another batch gets twice what that pace, per sample, predicts for it (more than
	 * it will take: a step's fixed cost is counted per sample) */
	long pace_batch;
	double pace_step_s;
	char workdir[PATH_MAX]; /* where trial directories go; created, then removed */
	int workdir_lock;       /* held while the probe runs, once workdir is set */
};

/* Creates the work directory (under $TMPDIR or workdir_parent) and checks the command and config. */
int ab_exec_init(struct ab_exec *x, char *err, size_t errlen);
void ab_exec_cleanup(struct ab_exec *x);

/* The trial function: ctx is a struct ab_exec. */
int ab_exec_trial(void *ctx, long batch, struct ab_trial *out, char *err, size_t errlen);

/* Ends the trial started ahead, if any (before trials that run elsewhere: a round's). */
void ab_exec_stop_ahead(struct ab_exec *x);

/* Keeps a finished trial's pace for the step windows of the trials after it (ab_exec_trial
 * does for its own; a parallel round, whose trials run in workers, for each result). */
void ab_exec_learn_pace(struct ab_exec *x, const struct ab_trial *t);

#endif
