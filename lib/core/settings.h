/* settings.h - the one settings struct of autobatch: the site policy from plugstack.conf,
 * the user's request from options and environment, and the rule that yields the fraction.
 *
 * Every function returns 0 on success or a negative errno value, and on failure writes one
 * sentence naming the bad input and the fix into err (without the "autobatch: " prefix).
 */
#ifndef AUTOBATCH_SETTINGS_H
#define AUTOBATCH_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "protocol.h"

#define AB_PATH_MAX 4096
#define AB_ARGS_MAX 1024   /* probe_args */
#define AB_NAME_MAX 64     /* preset names */
#define AB_KEY_MAX 256     /* dot-path config keys */
#define AB_COMMAND_MAX 4096
#define AB_FRACTION_TEXT_MAX 32 /* longer fraction text is refused before parsing */
#define AB_TIMEOUT_MAX (7 * 24 * 3600)
#define AB_GLOBAL_BATCH_MAX 2147483647L

enum ab_over_max { AB_OVER_MAX_CLAMP, AB_OVER_MAX_DENY };
enum ab_on_failure { AB_ON_FAILURE_CONTINUE, AB_ON_FAILURE_ABORT };

/* Where the requested fraction came from, so messages can name what the user typed. */
enum ab_source { AB_SOURCE_DEFAULT, AB_SOURCE_OPTION, AB_SOURCE_ENV };

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
	bool instrument;          /* the probe's Python step hook, unless a user turns it off */
	bool parallel; /* trials at once on the GPUs the job holds on the probe's node */
};

/* The user's request: srun/sbatch/salloc options, or AUTOBATCH= in the environment. */
struct ab_request {
	bool enabled;
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
	AB_OPT_COUNT
};

struct ab_option_info {
	const char *name;    /* long option without "--" */
	const char *arginfo; /* NULL when the option takes no value */
	int has_arg;         /* getopt: 0 none, 1 required, 2 optional */
	const char *usage;
};

extern const struct ab_option_info ab_options[AB_OPT_COUNT];

/* Parses "0.8", ".8" or "80%" into 0 < f <= 1. Refuses anything else, including exponents,
 * hex floats, signs, spaces, nan/inf and text longer than AB_FRACTION_TEXT_MAX. */
int ab_parse_fraction(const char *text, double *out, char *err, size_t errlen);

void ab_site_init(struct ab_site *site);

/* Parses the plugstack.conf arguments (as Slurm splits them on blanks; a quoted
 * probe_args="a b" spanning several words is joined again) and checks their consistency. */
int ab_site_parse(struct ab_site *site, int argc, char *const argv[], char *err, size_t errlen);

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

/* The fraction to apply: the site's force_fraction, else the request's, else the site
 * default, then bounded by min/max per over_max. A clamp or an override leaves a message in
 * note (empty otherwise); a denial is an error. */
int ab_resolve_fraction(const struct ab_site *site, const struct ab_request *req, double *out,
			char *note, size_t notelen, char *err, size_t errlen);

/* Writes "key=value" lines describing the effective settings (for srun -v). */
int ab_settings_describe(const struct ab_site *site, const struct ab_request *req,
			 double fraction, char *buf, size_t buflen);

const char *ab_over_max_name(enum ab_over_max v);
const char *ab_on_failure_name(enum ab_on_failure v);
const char *ab_objective_name(enum ab_objective v);
const char *ab_mode_name(enum ab_mode v);

/* Whether the probe's Python step hook is used: the user's --autobatch-instrument, else the
 * site's instrument= */
bool ab_instrument(const struct ab_site *site, const struct ab_request *req);

#endif
