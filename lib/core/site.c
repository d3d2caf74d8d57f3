/* site.c - the site policy: plugstack.conf's arguments, parsed strictly from one table and
 * checked for consistency (see site.h).
 */
#include "site.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "number.h"
#include "size.h"

#ifndef AB_DEFAULT_PROBE
#define AB_DEFAULT_PROBE "/usr/libexec/autobatch/autobatch-probe"
#endif

static const char *const over_max_names[] = {"clamp", "deny"};
static const char *const on_failure_names[] = {"continue", "abort"};
static const char *const onoff_names[] = {"off", "on"};

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
	site->trial_cap = 12;
	site->instrument = true;
	site->parallel = true;
	site->trial_shape = AB_SHAPE_STEP;
}

enum arg_type { ARG_FRACTION, ARG_OVER_MAX, ARG_ON_FAILURE, ARG_PATH, ARG_SECONDS,
		ARG_TRIAL_SECONDS, ARG_TEXT, ARG_ONOFF, ARG_SIZE, ARG_TRIALS, ARG_SHAPE };

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
	{"startup_seconds", ARG_TRIAL_SECONDS, FIELD(startup_seconds)},
	{"max_trial_seconds", ARG_TRIAL_SECONDS, FIELD(max_trial_seconds)},
	{"trial_cap", ARG_TRIALS, FIELD(trial_cap)},
	{"instrument", ARG_ONOFF, FIELD(instrument)},
	{"parallel", ARG_ONOFF, FIELD(parallel)},
	{"trial_shape", ARG_SHAPE, FIELD(trial_shape)},
	{"comment", ARG_ONOFF, FIELD(comment)},
};

#define N_SITE_ARGS (sizeof(site_args) / sizeof(site_args[0]))

static bool has_control_chars(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

static int parse_seconds(const char *v, long max, unsigned *out)
{
	long n;
	int rc = ab_parse_whole(v, 1, max, &n);

	if (rc == 0)
		*out = (unsigned)n;
	return rc;
}

static int set_choice(int *field, const char *key, const char *v, const char *const names[],
		      char *err, size_t errlen)
{
	int i = ab_parse_choice(v, names, 2);
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
	long n;

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
	case ARG_TRIAL_SECONDS: /* what the probe accepts for a trial's allowances */
		n = a->type == ARG_SECONDS ? AB_TIMEOUT_MAX : AB_TRIAL_SECONDS_MAX;
		if ((rc = parse_seconds(v, n, field)) < 0)
			return ab_fail(err, errlen, -rc,
				       "plugstack argument %s=%s must be a whole number of seconds "
				       "from 1 to %ld",
				       a->key, shown, n);
		return 0;
	case ARG_TRIALS:
		if ((rc = ab_parse_whole(v, 1, AB_TRIAL_CAP_MAX, &n)) < 0)
			return ab_fail(err, errlen, -rc,
				       "plugstack argument %s=%s must be a whole number of trials "
				       "from 1 to %d",
				       a->key, shown, AB_TRIAL_CAP_MAX);
		*(unsigned *)field = (unsigned)n;
		return 0;
	case ARG_SHAPE:
		if ((choice = ab_parse_choice(v, ab_shape_names, AB_SHAPE_COUNT)) < 0)
			return ab_fail(err, errlen, EINVAL, "plugstack argument %s=%s is invalid: use "
				       "%s=step, %s=node or %s=gpu", a->key, shown, a->key, a->key,
				       a->key);
		*(enum ab_shape *)field = (enum ab_shape)choice;
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
		if (!a && !eq && i > 0) /* the second word of a value with a space */
			return ab_fail(err, errlen, EINVAL,
				       "plugstack argument '%s' is no key=value: a value with spaces is "
				       "quoted, as probe_args=\"--device host\"",
				       ab_printable(word, shown, sizeof(shown)));
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

int ab_site_describe(const struct ab_site *site, char *buf, size_t buflen)
{
	return ab_format(buf, buflen,
			 "site bounds %g..%g, over_max=%s\n"
			 "on_failure=%s probe=%s probe_timeout=%us probe_args=%s\n"
			 "cache=%s cache_dir=%s enforce=%s device_memory=%lluB comm_reserve=%lluB\n"
			 "startup_seconds=%us max_trial_seconds=%us trial_cap=%u",
			 site->min_fraction, site->max_fraction, over_max_names[site->over_max],
			 on_failure_names[site->on_failure], site->probe, site->probe_timeout,
			 *site->probe_args ? site->probe_args : "(none)", site->cache ? "on" : "off",
			 *site->cache_dir ? site->cache_dir : "(default)",
			 site->enforce ? "on" : "off", (unsigned long long)site->device_memory,
			 (unsigned long long)site->comm_reserve, site->startup_seconds,
			 site->max_trial_seconds, site->trial_cap);
}

/* The last --device the probe arguments name (dev, devlen), or dev NULL. */
static void probe_args_device(const char *probe_args, const char **out, size_t *outlen)
{
	const char *p = probe_args ? probe_args : "", *dev = NULL;
	size_t devlen = 0;
	bool next = false;

	while (*p) {
		size_t n;

		p += strspn(p, " \t");
		n = strcspn(p, " \t");
		if (next)
			dev = p, devlen = n, next = false;
		else if (n == 8 && !strncmp(p, "--device", 8))
			next = true;
		else if (n > 9 && !strncmp(p, "--device=", 9))
			dev = p + 9, devlen = n - 9;
		p += n;
	}
	*out = dev, *outlen = devlen;
}

bool ab_probe_args_gpu(const char *probe_args)
{
	const char *dev;
	size_t devlen;

	probe_args_device(probe_args, &dev, &devlen);
	if (!dev)
		return true;
	return !((devlen == 4 && !strncmp(dev, "host", 4)) ||
		 (devlen > 5 && !strncmp(dev, "host:", 5)) || (devlen > 4 && !strncmp(dev, "sim:", 4)));
}

bool ab_probe_args_sim(const char *probe_args)
{
	const char *dev;
	size_t devlen;

	probe_args_device(probe_args, &dev, &devlen);
	return dev && devlen > 4 && !strncmp(dev, "sim:", 4);
}
