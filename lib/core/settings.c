/* settings.c - parses and validates the site policy and the user's request, and resolves
 * the fraction to apply (see settings.h).
 */
#include "settings.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "size.h"
#include "number.h"

#ifndef AB_DEFAULT_PROBE
#define AB_DEFAULT_PROBE "/usr/libexec/autobatch/autobatch-probe"
#endif

#define FRACTION_HINT "give a number greater than 0 and at most 1, such as 0.8 or 80%"

const struct ab_option_info ab_options[AB_OPT_COUNT] = {
	[AB_OPT_AUTOBATCH] = {"autobatch", "[FRACTION]", 2,
			      "Probe the per-GPU batch size that peaks at FRACTION of GPU memory "
			      "(0.8 or 80%; attach it with '=') before the step starts"},
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
};

static const char *source_name(enum ab_source s)
{
	return s == AB_SOURCE_ENV ? AB_ENV_REQUEST : "--autobatch";
}

/* ---- fraction ---------------------------------------------------------------------- */

int ab_parse_fraction(const char *text, double *out, char *err, size_t errlen)
{
	char shown[AB_FRACTION_TEXT_MAX + 4];
	const char *end = NULL;
	double v;

	if (!text || !*text)
		return ab_fail(err, errlen, EINVAL, "empty fraction: %s", FRACTION_HINT);
	if (strlen(text) > AB_FRACTION_TEXT_MAX)
		return ab_fail(err, errlen, EINVAL, "fraction '%s' is too long: %s",
			       ab_printable(text, shown, 16), FRACTION_HINT);
	ab_printable(text, shown, sizeof(shown));
	if (ab_parse_decimal_prefix(text, AB_EXACT_DIGITS, &v, &end) < 0 ||
	    (*end && strcmp(end, "%") != 0))
		return ab_fail(err, errlen, EINVAL, "invalid fraction '%s': %s", shown,
			       FRACTION_HINT);
	if (*end == '%')
		v /= 100.0;
	if (!(v > 0.0))
		return ab_fail(err, errlen, ERANGE, "fraction '%s' must be greater than 0: %s",
			       shown, FRACTION_HINT);
	if (v > 1.0)
		return ab_fail(err, errlen, ERANGE,
			       "fraction '%s' is more than the whole GPU memory: %s", shown,
			       FRACTION_HINT);
	*out = v;
	return 0;
}

/* ---- site policy (plugstack.conf) -------------------------------------------------- */

void ab_site_init(struct ab_site *site)
{
	memset(site, 0, sizeof(*site));
	site->default_fraction = 0.8;
	site->min_fraction = 0.0;
	site->max_fraction = 1.0;
	site->over_max = AB_OVER_MAX_CLAMP;
	site->on_failure = AB_ON_FAILURE_CONTINUE;
	snprintf(site->probe, sizeof(site->probe), "%s", AB_DEFAULT_PROBE);
	site->probe_timeout = 900;
	site->cache = true;
	site->enforce = false;
	site->comm_reserve = AB_COMM_RESERVE_DEFAULT;
	site->startup_seconds = 600;
	site->max_trial_seconds = 1800;
	site->instrument = true;
	site->parallel = true;
}

enum arg_type { ARG_FRACTION, ARG_OVER_MAX, ARG_ON_FAILURE, ARG_PATH, ARG_SECONDS, ARG_TEXT,
		ARG_ONOFF, ARG_SIZE };

struct site_arg {
	const char *key;
	enum arg_type type;
	size_t offset;
	size_t size; /* for text fields */
};

#define FIELD(f) offsetof(struct ab_site, f), sizeof(((struct ab_site *)0)->f)

static const struct site_arg site_args[] = {
	{"default_fraction", ARG_FRACTION, FIELD(default_fraction)},
	{"min_fraction", ARG_FRACTION, FIELD(min_fraction)},
	{"max_fraction", ARG_FRACTION, FIELD(max_fraction)},
	{"force_fraction", ARG_FRACTION, FIELD(force_fraction)},
	{"over_max", ARG_OVER_MAX, FIELD(over_max)},
	{"on_failure", ARG_ON_FAILURE, FIELD(on_failure)},
	{"probe", ARG_PATH, FIELD(probe)},
	{"probe_timeout", ARG_SECONDS, FIELD(probe_timeout)},
	{"probe_args", ARG_TEXT, FIELD(probe_args)},
	{"cache", ARG_ONOFF, FIELD(cache)},
	{"cache_dir", ARG_PATH, FIELD(cache_dir)},
	{"enforce", ARG_ONOFF, FIELD(enforce)},
	{"device_memory", ARG_SIZE, FIELD(device_memory)},
	{"comm_reserve", ARG_SIZE, FIELD(comm_reserve)},
	{"startup_seconds", ARG_SECONDS, FIELD(startup_seconds)},
	{"max_trial_seconds", ARG_SECONDS, FIELD(max_trial_seconds)},
	{"instrument", ARG_ONOFF, FIELD(instrument)},
	{"parallel", ARG_ONOFF, FIELD(parallel)},
};

#define N_SITE_ARGS (sizeof(site_args) / sizeof(site_args[0]))

static bool has_control_chars(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

static int parse_seconds(const char *v, unsigned *out)
{
	long n;
	int rc = ab_parse_whole(v, 1, AB_TIMEOUT_MAX, &n);

	if (rc == 0)
		*out = (unsigned)n;
	return rc;
}

static int parse_choice(const char *v, const char *const names[], int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(v, names[i]) == 0)
			return i;
	return -EINVAL;
}

static const char *const over_max_names[] = {"clamp", "deny"};
static const char *const on_failure_names[] = {"continue", "abort"};
static const char *const onoff_names[] = {"off", "on"};
static const char *const objective_names[] = {"memory", "throughput"};
static const char *const mode_names[] = {"exec", "model"};
static const char *const instrument_names[] = {"off", "on"};

const char *ab_over_max_name(enum ab_over_max v) { return over_max_names[v]; }
const char *ab_on_failure_name(enum ab_on_failure v) { return on_failure_names[v]; }
const char *ab_objective_name(enum ab_objective v) { return objective_names[v]; }

bool ab_instrument(const struct ab_site *site, const struct ab_request *req)
{
	return req->given & (1u << AB_OPT_INSTRUMENT) ? req->instrument : site->instrument;
}
const char *ab_mode_name(enum ab_mode v) { return mode_names[v]; }

static int set_choice(int *field, const char *key, const char *v, const char *const names[],
		      char *err, size_t errlen)
{
	int i = parse_choice(v, names, 2);
	char shown[64];

	if (i < 0)
		return ab_fail(err, errlen, EINVAL,
			       "plugstack argument %s=%s is invalid: use %s=%s or %s=%s", key,
			       ab_printable(v, shown, sizeof(shown)), key, names[0], key,
			       names[1]);
	*field = i;
	return 0;
}

static int set_site_arg(struct ab_site *site, const struct site_arg *a, const char *v,
			char *err, size_t errlen)
{
	void *field = (char *)site + a->offset;
	char shown[64], why[AB_ERR_MAX];
	int rc, choice = 0;

	ab_printable(v, shown, sizeof(shown));
	switch (a->type) {
	case ARG_FRACTION:
		if ((rc = ab_parse_fraction(v, field, why, sizeof(why))) < 0)
			return ab_fail(err, errlen, -rc, "plugstack argument %s: %s", a->key, why);
		return 0;
	case ARG_OVER_MAX:
	case ARG_ON_FAILURE:
	case ARG_ONOFF:
		rc = set_choice(&choice, a->key, v,
				a->type == ARG_OVER_MAX	    ? over_max_names
				: a->type == ARG_ON_FAILURE ? on_failure_names
							    : onoff_names,
				err, errlen);
		if (rc < 0)
			return rc;
		if (a->type == ARG_ONOFF)
			*(bool *)field = choice;
		else if (a->type == ARG_OVER_MAX)
			*(enum ab_over_max *)field = (enum ab_over_max)choice;
		else
			*(enum ab_on_failure *)field = (enum ab_on_failure)choice;
		return 0;
	case ARG_PATH:
		if (v[0] != '/' || has_control_chars(v))
			return ab_fail(err, errlen, EINVAL,
				       "plugstack argument %s=%s must be an absolute path", a->key,
				       shown);
		break;
	case ARG_SECONDS:
		if ((rc = parse_seconds(v, field)) < 0)
			return ab_fail(err, errlen, -rc,
				       "plugstack argument %s=%s must be a whole number of seconds "
				       "from 1 to %d",
				       a->key, shown, AB_TIMEOUT_MAX);
		return 0;
	case ARG_SIZE:
		if ((rc = ab_parse_size(v, field, why, sizeof(why))) < 0)
			return ab_fail(err, errlen, -rc, "plugstack argument %s: %s", a->key, why);
		return 0;
	case ARG_TEXT:
		if (has_control_chars(v))
			return ab_fail(err, errlen, EINVAL,
				       "plugstack argument %s contains control characters", a->key);
		break;
	}
	if (ab_copy(field, a->size, v) < 0)
		return ab_fail(err, errlen, ENAMETOOLONG,
			       "plugstack argument %s is longer than %zu characters", a->key,
			       a->size - 1);
	return 0;
}

static const struct site_arg *find_site_arg(const char *key, size_t keylen)
{
	for (size_t i = 0; i < N_SITE_ARGS; i++)
		if (strlen(site_args[i].key) == keylen && !strncmp(site_args[i].key, key, keylen))
			return &site_args[i];
	return NULL;
}

/* Slurm splits plugstack.conf lines on blanks, so probe_args="--device host" arrives as
 * two words: join words from an opening quote to the closing one and drop the quotes. */
static int join_quoted(int argc, char *const argv[], int *i, char *buf, size_t buflen,
		       char *err, size_t errlen)
{
	const char *first = argv[*i], *eq = strchr(first, '=');
	size_t keylen = eq ? (size_t)(eq - first) : 0, len;

	if (ab_copy(buf, buflen, first) < 0)
		goto too_long;
	if (!eq || eq[1] != '"')
		return 0;
	memmove(buf + keylen + 1, buf + keylen + 2, strlen(buf + keylen + 2) + 1);
	for (;;) {
		len = strlen(buf);
		if (len > keylen + 1 && buf[len - 1] == '"') {
			buf[len - 1] = '\0';
			return 0;
		}
		if (++*i >= argc)
			return ab_fail(err, errlen, EINVAL,
				       "plugstack argument %.*s has an opening quote but no "
				       "closing one",
				       (int)keylen, first);
		if (len + 1 + strlen(argv[*i]) >= buflen)
			goto too_long;
		buf[len] = ' ';
		memcpy(buf + len + 1, argv[*i], strlen(argv[*i]) + 1);
	}
too_long:
	return ab_fail(err, errlen, ENAMETOOLONG, "plugstack argument %.*s is too long",
		       (int)(keylen ? keylen : 40), first);
}

static void list_site_keys(char *buf, size_t buflen)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < N_SITE_ARGS && n < buflen; i++)
		n += (size_t)snprintf(buf + n, buflen - n, "%s%s", i ? ", " : "",
				      site_args[i].key);
}

static int check_site(const struct ab_site *site, bool default_given, char *err,
		      size_t errlen)
{
	if (site->min_fraction > site->max_fraction)
		return ab_fail(err, errlen, EINVAL,
			       "plugstack arguments conflict: min_fraction=%g is above "
			       "max_fraction=%g",
			       site->min_fraction, site->max_fraction);
	if (default_given && (site->default_fraction < site->min_fraction ||
			      site->default_fraction > site->max_fraction))
		return ab_fail(err, errlen, EINVAL,
			       "plugstack arguments conflict: default_fraction=%g is outside "
			       "min_fraction=%g..max_fraction=%g",
			       site->default_fraction, site->min_fraction, site->max_fraction);
	if (site->force_fraction > 0 && (site->force_fraction < site->min_fraction ||
					 site->force_fraction > site->max_fraction))
		return ab_fail(err, errlen, EINVAL,
			       "plugstack arguments conflict: force_fraction=%g is outside "
			       "min_fraction=%g..max_fraction=%g",
			       site->force_fraction, site->min_fraction, site->max_fraction);
	return 0;
}

int ab_site_parse(struct ab_site *site, int argc, char *const argv[], char *err, size_t errlen)
{
	bool seen[N_SITE_ARGS] = {false};
	char word[AB_PATH_MAX + 64], keys[512], shown[64];
	const struct site_arg *a;
	char *eq;
	int rc;

	for (int i = 0; i < argc; i++) {
		if ((rc = join_quoted(argc, argv, &i, word, sizeof(word), err, errlen)) < 0)
			return rc;
		eq = strchr(word, '=');
		a = eq ? find_site_arg(word, (size_t)(eq - word)) : NULL;
		if (!a) {
			list_site_keys(keys, sizeof(keys));
			return ab_fail(err, errlen, EINVAL,
				       "unknown plugstack argument '%s': expected key=value with "
				       "a key among %s",
				       ab_printable(word, shown, sizeof(shown)), keys);
		}
		if (seen[a - site_args])
			return ab_fail(err, errlen, EINVAL,
				       "plugstack argument %s is given twice: keep one", a->key);
		seen[a - site_args] = true;
		if ((rc = set_site_arg(site, a, eq + 1, err, errlen)) < 0)
			return rc;
	}
	if (!seen[0] && site->default_fraction > site->max_fraction)
		site->default_fraction = site->max_fraction;
	if (!seen[0] && site->default_fraction < site->min_fraction)
		site->default_fraction = site->min_fraction;
	return check_site(site, seen[0], err, errlen);
}

/* ---- the user's request ------------------------------------------------------------ */

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
		return ab_fail(err, errlen, -rc, "%s: %s", source_name(source), why);
	snprintf(req->fraction_text, sizeof(req->fraction_text), "%s", value);
	req->source = source;
	req->enabled = true;
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

static int set_enum(int *field, const char *v, const char *const names[], enum ab_option opt,
		    char *err, size_t errlen)
{
	char shown[64];
	int i = v ? parse_choice(v, names, 2) : -EINVAL;

	if (i < 0)
		return ab_fail(err, errlen, EINVAL, "--%s=%s is invalid: use %s or %s",
			       ab_options[opt].name, v ? ab_printable(v, shown, sizeof(shown)) : "",
			       names[0], names[1]);
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
			req->source = AB_SOURCE_DEFAULT;
			req->fraction_text[0] = '\0';
			return 0;
		}
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
	case AB_OPT_COUNT:
		break;
	}
	return ab_fail(err, errlen, EINVAL, "unknown option %d", (int)opt);
}

int ab_request_from_env(struct ab_request *req, const char *value, char *err, size_t errlen)
{
	if (req->enabled || !value)
		return 0;
	if (!*value)
		return ab_fail(err, errlen, EINVAL,
			       "AUTOBATCH is set but empty: set a fraction such as AUTOBATCH=0.8, "
			       "or unset it");
	return set_fraction(req, AB_SOURCE_ENV, value, err, errlen);
}

int ab_request_check(const struct ab_request *req, char *err, size_t errlen)
{
	for (int opt = AB_OPT_AUTOBATCH + 1; opt < AB_OPT_COUNT && !req->enabled; opt++)
		if (req->given & (1u << opt))
			return ab_fail(err, errlen, EINVAL,
				       "--%s has no effect without --autobatch: add "
				       "--autobatch[=FRACTION] (or set AUTOBATCH=FRACTION), or "
				       "drop --%s",
				       ab_options[opt].name, ab_options[opt].name);
	return 0;
}

/* ---- resolution -------------------------------------------------------------------- */

static int apply_bound(const struct ab_site *site, const struct ab_request *req, bool above,
		       double *out, char *note, size_t notelen, char *err, size_t errlen)
{
	double bound = above ? site->max_fraction : site->min_fraction;
	const char *where = above ? "above the site maximum" : "below the site minimum";
	char shown[AB_FRACTION_TEXT_MAX + 4];

	ab_printable(req->fraction_text, shown, sizeof(shown));
	if (site->over_max == AB_OVER_MAX_DENY)
		return ab_fail(err, errlen, ERANGE,
			       "%s=%s is %s %g (%s in plugstack.conf): ask for %s %g",
			       source_name(req->source), shown, where, bound,
			       above ? "max_fraction" : "min_fraction",
			       above ? "at most" : "at least", bound);
	snprintf(note, notelen, "%s=%s is %s %g: using %g", source_name(req->source), shown,
		 where, bound, bound);
	*out = bound;
	return 0;
}

int ab_resolve_fraction(const struct ab_site *site, const struct ab_request *req, double *out,
			char *note, size_t notelen, char *err, size_t errlen)
{
	char shown[AB_FRACTION_TEXT_MAX + 4];

	if (notelen)
		note[0] = '\0';
	if (site->force_fraction > 0) {
		if (req->source != AB_SOURCE_DEFAULT && req->fraction != site->force_fraction)
			snprintf(note, notelen, "the site forces fraction %g: %s=%s is ignored",
				 site->force_fraction, source_name(req->source),
				 ab_printable(req->fraction_text, shown, sizeof(shown)));
		*out = site->force_fraction;
		return 0;
	}
	if (req->source == AB_SOURCE_DEFAULT) {
		*out = site->default_fraction;
		return 0;
	}
	if (req->fraction > site->max_fraction)
		return apply_bound(site, req, true, out, note, notelen, err, errlen);
	if (req->fraction < site->min_fraction)
		return apply_bound(site, req, false, out, note, notelen, err, errlen);
	*out = req->fraction;
	return 0;
}

int ab_settings_describe(const struct ab_site *site, const struct ab_request *req,
			 double fraction, char *buf, size_t buflen)
{
	char shown[AB_FRACTION_TEXT_MAX + 4];
	const char *from = site->force_fraction > 0	     ? "force_fraction"
			   : req->source == AB_SOURCE_DEFAULT ? "default_fraction"
							      : source_name(req->source);

	ab_printable(req->fraction_text, shown, sizeof(shown));
	return ab_format(
		buf, buflen,
		"fraction=%g (from %s%s%s; site bounds %g..%g, over_max=%s)\n"
		"objective=%s mode=%s eval=%s refresh=%s\n"
		"config=%s preset=%s key=%s global_batch=%ld\n"
		"on_failure=%s probe=%s probe_timeout=%us probe_args=%s\n"
		"cache=%s cache_dir=%s enforce=%s device_memory=%lluB comm_reserve=%lluB\n"
		"startup_seconds=%us max_trial_seconds=%us instrument=%s parallel=%s\n",
		fraction, from, req->source != AB_SOURCE_DEFAULT ? "=" : "",
		req->source != AB_SOURCE_DEFAULT ? shown : "", site->min_fraction,
		site->max_fraction, ab_over_max_name(site->over_max),
		ab_objective_name(req->objective), ab_mode_name(req->mode),
		req->eval ? "yes" : "no", req->refresh ? "yes" : "no",
		*req->config ? req->config : "(none)", *req->preset ? req->preset : "(detect)",
		*req->key ? req->key : "(preset)", req->global_batch,
		ab_on_failure_name(site->on_failure), site->probe, site->probe_timeout,
		*site->probe_args ? site->probe_args : "(none)", site->cache ? "on" : "off",
		*site->cache_dir ? site->cache_dir : "(default)", site->enforce ? "on" : "off",
		(unsigned long long)site->device_memory, (unsigned long long)site->comm_reserve, site->startup_seconds,
		site->max_trial_seconds, ab_instrument(site, req) ? "on" : "off", site->parallel ? "on" : "off");
}
