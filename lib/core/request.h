/* request.h - the user's request: the --autobatch* options of srun, sbatch and salloc (one
 * table, which `--help` lists) and AUTOBATCH= in the environment, each checked as it comes.
 *
 * Every function returns 0 or a negative errno value, and on failure writes one sentence
 * naming the bad input and the fix into err (without the "autobatch: " prefix).
 */
#ifndef AUTOBATCH_REQUEST_H
#define AUTOBATCH_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "input_limits.h"
#include "protocol.h"

#define AB_RUN_STEPS_OFF (-1L)
#define AB_RUN_STEPS_MAX 1000000000L

/* Where the requested fraction came from, so messages can name what the user typed. */
enum ab_source { AB_SOURCE_DEFAULT, AB_SOURCE_OPTION, AB_SOURCE_ENV };

/* The user's request: srun/sbatch/salloc options, or AUTOBATCH= in the environment. */
struct ab_request {
	bool enabled;
	bool off; /* --autobatch=off (AUTOBATCH=off): not for this step, whatever sbatch gave */
	enum ab_source source;
	char fraction_text[AB_FRACTION_TEXT_MAX + 1]; /* as typed, for messages */
	double fraction;                              /* valid when source != DEFAULT */
	char config[AB_PATH_MAX];
	char preset[AB_NAME_MAX];
	char key[AB_KEY_MAX];
	long global_batch; /* 0: not given */
	enum ab_objective objective;
	enum ab_mode mode;
	bool eval;
	char trial_command[AB_COMMAND_MAX];
	bool refresh;
	bool instrument; /* valid when --autobatch-instrument was given */
	char neutral[AB_KEY_MAX]; /* --autobatch-neutral: more memory-neutral keys, comma-separated */
	enum ab_shape shape; /* valid when --autobatch-trial-shape was given */
	/* --autobatch-run-steps: the run's optimizer steps, a growing program sized for its
	 * last; 0: the config's (a preset's max_steps), AB_RUN_STEPS_OFF: never sized */
	long run_steps;
	unsigned given; /* bit (1 << enum ab_option) per option seen */
};

/* The user options, in the order `srun --help` lists them. */
enum ab_option {
	AB_OPT_AUTOBATCH,
	AB_OPT_CONFIG,
	AB_OPT_PRESET,
	AB_OPT_KEY,
	AB_OPT_GLOBAL_BATCH,
	AB_OPT_OBJECTIVE,
	AB_OPT_MODE,
	AB_OPT_EVAL,
	AB_OPT_TRIAL_COMMAND,
	AB_OPT_REFRESH,
	AB_OPT_INSTRUMENT,
	AB_OPT_NEUTRAL,
	AB_OPT_TRIAL_SHAPE,
	AB_OPT_RUN_STEPS,
	AB_OPT_COUNT
};

struct ab_option_info {
	const char *name;    /* long option without "--" */
	const char *arginfo; /* NULL when the option takes no value */
	int has_arg;         /* getopt: 0 none, 1 required, 2 optional */
	const char *usage;
};

extern const struct ab_option_info ab_options[AB_OPT_COUNT];

void ab_request_init(struct ab_request *req);

/* Records one user option; value may be NULL (a flag, or --autobatch without a value).
 * Idempotent: Slurm may call an option's callback more than once. */
int ab_request_set(struct ab_request *req, enum ab_option opt, const char *value, char *err,
		   size_t errlen);

/* Applies AUTOBATCH=<fraction> from the environment when --autobatch was not given.
 * value is getenv("AUTOBATCH"), possibly NULL. */
int ab_request_from_env(struct ab_request *req, const char *value, char *err, size_t errlen);

/* Refuses options that would silently do nothing because autobatch is not enabled. */
int ab_request_check(const struct ab_request *req, char *err, size_t errlen);

/* N|off of --autobatch-run-steps (and the probe's --run-steps): N from 1 to
 * AB_RUN_STEPS_MAX, or AB_RUN_STEPS_OFF; 0, or -EINVAL for anything else. */
int ab_parse_run_steps(const char *text, long *out);

/* "key=value" lines of the request's settings, for srun -v. */
int ab_request_describe(const struct ab_request *req, char *buf, size_t buflen);

/* What the user typed the fraction as: "--autobatch" or "AUTOBATCH". */
const char *ab_source_name(enum ab_source s);
const char *ab_objective_name(enum ab_objective v);
const char *ab_mode_name(enum ab_mode v);

#endif
