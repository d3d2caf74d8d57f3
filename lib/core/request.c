/* request.c - the user's request: the options' table, each option parsed strictly as it
 * arrives (idempotently: Slurm may call a callback twice), and AUTOBATCH= (see request.h).
 */
#include "request.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "number.h"

const struct ab_option_info ab_options[AB_OPT_COUNT] = {
	[AB_OPT_AUTOBATCH] = {"autobatch", "[FRACTION|off]", 2,
			      "Probe the per-GPU batch size that peaks at FRACTION of GPU memory "
			      "(0.8 or 80%; attach it with '=') before the step starts; off: not "
			      "this step, whatever the job's sbatch --autobatch says"},
	[AB_OPT_CONFIG] = {"autobatch-config", "FILE", 1,
			   "YAML/JSON training config whose batch keys autobatch rewrites"},
	[AB_OPT_PRESET] = {"autobatch-preset", "NAME", 1,
			   "Framework preset naming the batch keys (default: detected)"},
	[AB_OPT_KEY] = {"autobatch-key", "KEY", 1,
			"Dot path of the micro-batch key, overriding the preset"},
	[AB_OPT_GLOBAL_BATCH] = {"autobatch-global-batch", "G", 1,
				 "Keep the global batch at G: derive gradient accumulation"},
	[AB_OPT_OBJECTIVE] = {"autobatch-objective", "memory|throughput", 1,
			      "Largest fitting batch (memory) or fastest fitting (throughput)"},
	[AB_OPT_MODE] = {"autobatch-mode", "exec|model", 1,
			 "Probe with the job's own command (exec) or a proxy model (model)"},
	[AB_OPT_EVAL] = {"autobatch-eval", NULL, 0, "Also probe and write the eval batch size"},
	[AB_OPT_TRIAL_COMMAND] = {"autobatch-trial-command", "CMD", 1,
				  "Command the probe runs as a one-GPU trial instead of the step's"},
	[AB_OPT_REFRESH] = {"autobatch-refresh", NULL, 0,
			    "Ignore the cached decision and probe again"},
	[AB_OPT_INSTRUMENT] = {"autobatch-instrument", "on|off", 1,
			       "Count a Python trial's PyTorch optimizer steps (default: the site's)"},
	[AB_OPT_NEUTRAL] = {"autobatch-neutral", "KEY[,KEY...]", 1,
			    "Config keys whose values do not move memory, beside the preset's: "
			    "jobs differing only there warm-start from a cached decision"},
	[AB_OPT_TRIAL_SHAPE] = {"autobatch-trial-shape", "step|node|gpu", 1,
				"A trial of a step of several tasks: the whole step (default), "
				"its first node's tasks, or one process on one GPU"},
	[AB_OPT_RUN_STEPS] = {"autobatch-run-steps", "N|off", 1,
			      "The run's optimizer steps: a program whose memory grows with the "
			      "steps is sized for its last (default: the config's max_steps)"},
};

static const char *const objective_names[] = {"memory", "throughput"};
static const char *const mode_names[] = {"exec", "model"};
static const char *const instrument_names[] = {"off", "on"};

const char *ab_objective_name(enum ab_objective v) { return objective_names[v]; }
const char *ab_mode_name(enum ab_mode v) { return mode_names[v]; }

const char *ab_source_name(enum ab_source s)
{
	return s == AB_SOURCE_ENV ? AB_ENV_REQUEST : "--autobatch";
}

void ab_request_init(struct ab_request *req)
{
	memset(req, 0, sizeof(*req));
	req->source = AB_SOURCE_DEFAULT;
	req->objective = AB_OBJECTIVE_MEMORY;
	req->mode = AB_MODE_EXEC;
}

static int set_fraction(struct ab_request *req, enum ab_source source, const char *value,
			char *err, size_t errlen)
{
	char why[AB_ERR_MAX];
	int rc;

	if ((rc = ab_parse_fraction(value, &req->fraction, why, sizeof(why))) < 0)
		return ab_fail(err, errlen, -rc, "%s: %s", ab_source_name(source), why);
	snprintf(req->fraction_text, sizeof(req->fraction_text), "%s", value);
	req->source = source;
	req->enabled = true;
	req->off = false;
	return 0;
}

/* off: this step is not one to size, though the job's sbatch --autobatch says so (a staging
 * copy, a data check); its other autobatch options, the job's too, are then left unused */
static int set_off(struct ab_request *req, enum ab_source source)
{
	snprintf(req->fraction_text, sizeof(req->fraction_text), "off");
	req->source = source;
	req->enabled = false;
	req->off = true;
	return 0;
}

static int check_text(const char *value, size_t max, bool allow_tab, const char *what,
		      char *err, size_t errlen)
{
	if (!value || !*value)
		return ab_fail(err, errlen, EINVAL, "--%s needs a value: --%s=VALUE", what,
			       what);
	if (strlen(value) >= max)
		return ab_fail(err, errlen, ENAMETOOLONG,
			       "--%s is longer than %zu characters", what, max - 1);
	for (const char *p = value; *p; p++)
		if (((unsigned char)*p < 0x20 && !(allow_tab && *p == '\t')) || *p == 0x7f)
			return ab_fail(err, errlen, EINVAL,
				       "--%s contains control characters", what);
	return 0;
}

static int set_preset(struct ab_request *req, const char *v, char *err, size_t errlen)
{
	int rc = check_text(v, sizeof(req->preset), false, ab_options[AB_OPT_PRESET].name, err,
			    errlen);

	if (rc < 0)
		return rc;
	if (!ab_plain_name(v))
		return ab_fail(err, errlen, EINVAL,
			       "--autobatch-preset may use only letters, digits, '.', '_' and '-'; "
			       "'autobatch-probe presets' lists the names");
	return ab_copy(req->preset, sizeof(req->preset), v);
}

static int set_global_batch(struct ab_request *req, const char *v, char *err, size_t errlen)
{
	char shown[64];

	if (ab_parse_whole(v, 1, AB_GLOBAL_BATCH_MAX, &req->global_batch) == 0)
		return 0;
	return ab_fail(err, errlen, EINVAL,
		       "--autobatch-global-batch=%s is invalid: give a whole number of samples "
		       "from 1 to %ld",
		       v ? ab_printable(v, shown, sizeof(shown)) : "", AB_GLOBAL_BATCH_MAX);
}

int ab_parse_run_steps(const char *text, long *out)
{
	if (text && !strcmp(text, "off")) {
		*out = AB_RUN_STEPS_OFF;
		return 0;
	}
	return ab_parse_whole(text, 1, AB_RUN_STEPS_MAX, out) == 0 ? 0 : -EINVAL;
}

static int set_run_steps(struct ab_request *req, const char *v, char *err, size_t errlen)
{
	char shown[64];

	if (ab_parse_run_steps(v, &req->run_steps) == 0)
		return 0;
	return ab_fail(err, errlen, EINVAL,
		       "--autobatch-run-steps=%s is invalid: give the run's optimizer steps, a "
		       "whole number from 1 to %ld, or off",
		       v ? ab_printable(v, shown, sizeof(shown)) : "", AB_RUN_STEPS_MAX);
}

static int set_enum(int *field, const char *v, const char *const names[], enum ab_option opt,
		    char *err, size_t errlen)
{
	int n = opt == AB_OPT_TRIAL_SHAPE ? AB_SHAPE_COUNT : 2;
	char shown[64];
	int i = v ? ab_parse_choice(v, names, n) : -EINVAL;

	if (i < 0)
		return ab_fail(err, errlen, EINVAL, "--%s=%s is invalid: use %s%s%s or %s",
			       ab_options[opt].name, v ? ab_printable(v, shown, sizeof(shown)) : "",
			       names[0], n > 2 ? ", " : "", n > 2 ? names[1] : "", names[n - 1]);
	*field = i;
	return 0;
}

int ab_request_set(struct ab_request *req, enum ab_option opt, const char *value, char *err,
		   size_t errlen)
{
	const char *name = (unsigned)opt < AB_OPT_COUNT ? ab_options[opt].name : "?";
	int rc, choice;

	if ((unsigned)opt < AB_OPT_COUNT)
		req->given |= 1u << opt;
	switch (opt) {
	case AB_OPT_AUTOBATCH:
		/* No value means the site default; a later option overrides an earlier one. */
		if (value && !*value)
			return ab_fail(err, errlen, EINVAL,
				       "--autobatch= has nothing after '=': write --autobatch=0.8 "
				       "or --autobatch alone for the site default");
		if (!value) {
			req->enabled = true;
			req->off = false;
			req->source = AB_SOURCE_DEFAULT;
			req->fraction_text[0] = '\0';
			return 0;
		}
		if (!strcmp(value, "off"))
			return set_off(req, AB_SOURCE_OPTION);
		return set_fraction(req, AB_SOURCE_OPTION, value, err, errlen);
	case AB_OPT_CONFIG:
		if ((rc = check_text(value, sizeof(req->config), false, name, err, errlen)) < 0)
			return rc;
		return ab_copy(req->config, sizeof(req->config), value);
	case AB_OPT_PRESET:
		return set_preset(req, value, err, errlen);
	case AB_OPT_KEY:
		if ((rc = check_text(value, sizeof(req->key), false, name, err, errlen)) < 0)
			return rc;
		return ab_copy(req->key, sizeof(req->key), value);
	case AB_OPT_GLOBAL_BATCH:
		return set_global_batch(req, value, err, errlen);
	case AB_OPT_OBJECTIVE:
		if ((rc = set_enum(&choice, value, objective_names, opt, err, errlen)) < 0)
			return rc;
		req->objective = (enum ab_objective)choice;
		return 0;
	case AB_OPT_MODE:
		if ((rc = set_enum(&choice, value, mode_names, opt, err, errlen)) < 0)
			return rc;
		req->mode = (enum ab_mode)choice;
		return 0;
	case AB_OPT_EVAL:
		req->eval = true;
		return 0;
	case AB_OPT_TRIAL_COMMAND:
		if ((rc = check_text(value, sizeof(req->trial_command), true, name, err,
				     errlen)) < 0)
			return rc;
		return ab_copy(req->trial_command, sizeof(req->trial_command), value);
	case AB_OPT_REFRESH:
		req->refresh = true;
		return 0;
	case AB_OPT_INSTRUMENT:
		if ((rc = set_enum(&choice, value, instrument_names, opt, err, errlen)) < 0)
			return rc;
		req->instrument = choice == 1;
		return 0;
	case AB_OPT_NEUTRAL:
		if ((rc = check_text(value, sizeof(req->neutral), false, name, err, errlen)) < 0)
			return rc;
		return ab_copy(req->neutral, sizeof(req->neutral), value);
	case AB_OPT_TRIAL_SHAPE:
		if ((rc = set_enum(&choice, value, ab_shape_names, opt, err, errlen)) < 0)
			return rc;
		req->shape = (enum ab_shape)choice;
		return 0;
	case AB_OPT_RUN_STEPS:
		return set_run_steps(req, value, err, errlen);
	case AB_OPT_COUNT:
		break;
	}
	return ab_fail(err, errlen, EINVAL, "unknown option %d", (int)opt);
}

int ab_request_from_env(struct ab_request *req, const char *value, char *err, size_t errlen)
{
	if (req->enabled || req->off || !value)
		return 0;
	if (!strcmp(value, "off"))
		return set_off(req, AB_SOURCE_ENV);
	if (!*value)
		return ab_fail(err, errlen, EINVAL,
			       "AUTOBATCH is set but empty: set a fraction such as AUTOBATCH=0.8, "
			       "or unset it");
	return set_fraction(req, AB_SOURCE_ENV, value, err, errlen);
}

int ab_request_check(const struct ab_request *req, char *err, size_t errlen)
{
	for (int opt = AB_OPT_AUTOBATCH + 1; opt < AB_OPT_COUNT && !req->enabled && !req->off; opt++)
		if (req->given & (1u << opt))
			return ab_fail(err, errlen, EINVAL,
				       "--%s has no effect without --autobatch: add "
				       "--autobatch[=FRACTION] (or set AUTOBATCH=FRACTION), or "
				       "drop --%s",
				       ab_options[opt].name, ab_options[opt].name);
	return 0;
}

int ab_request_describe(const struct ab_request *req, char *buf, size_t buflen)
{
	return ab_format(buf, buflen,
			 "objective=%s mode=%s eval=%s refresh=%s\n"
			 "config=%s preset=%s key=%s global_batch=%ld",
			 objective_names[req->objective], mode_names[req->mode],
			 req->eval ? "yes" : "no", req->refresh ? "yes" : "no",
			 *req->config ? req->config : "(none)", *req->preset ? req->preset : "(detect)",
			 *req->key ? req->key : "(preset)", req->global_batch);
}
