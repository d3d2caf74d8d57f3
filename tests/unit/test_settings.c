/* test_settings.c - fraction parsing, plugstack arguments (lib/core/site.c), user options
 * (lib/core/request.c) and the effective settings the site policy makes of them
 * (lib/core/settings.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "unit.h"
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostlist.h"
#include "number.h"
#include "presets.h"
#include "protocol.h"
#include "settings.h"
#include "srun_line.h"

#define ARGV(...) ((char *const[]){__VA_ARGS__})

/* srun's line as the plugin reads it: what its options say */
static struct ab_srun_line line_of(const char *args, size_t len, int argc, char *const argv[])
{
	struct ab_srun_line l;

	ab_srun_line_read(args, len, argc, argv, &l);
	return l;
}
#define ARGC(...) ((int)(sizeof((char *const[]){__VA_ARGS__}) / sizeof(char *)))
#define SITE(...) site_parse(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

static char err[AB_ERR_MAX], note[AB_ERR_MAX];
static struct ab_site site;

static int site_parse(int argc, char *const argv[])
{
	ab_site_init(&site);
	err[0] = '\0';
	return ab_site_parse(&site, argc, argv, err, sizeof(err));
}

/* ---- fractions --------------------------------------------------------------------- */

/* The one number parser: digits only, the range, every overflow. */
static void numbers(void **state)
{
	static const struct {
		const char *text;
		int rc;
	} whole[] = {
		{"0", 0}, {"42", 0}, {"007", 0}, {"9223372036854775807", 0},
		{"9223372036854775808", -ERANGE}, {"99999999999999999999", -ERANGE},
		{"99999999999999999999x", -EINVAL}, {"", -EINVAL}, {"-1", -EINVAL}, {"+1", -EINVAL},
		{" 1", -EINVAL}, {"1 ", -EINVAL}, {"0x10", -EINVAL}, {"1e3", -EINVAL}, {"1.0", -EINVAL},
	};
	const char *end;
	double d;
	long v;

	(void)state;
	for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++) {
		v = -7;
		assert_int_equal(ab_parse_whole(whole[i].text, 0, 9223372036854775807L, &v),
				 whole[i].rc);
		if (whole[i].rc < 0)
			assert_int_equal(v, -7); /* nothing written on a refusal */
	}
	assert_int_equal(ab_parse_whole(NULL, 0, 1, &v), -EINVAL);
	assert_int_equal(ab_parse_whole("5", 6, 9, &v), -ERANGE);
	assert_int_equal(ab_parse_whole("10", 6, 9, &v), -ERANGE);
	assert_int_equal(ab_parse_whole("9", 6, 9, &v), 0);
	assert_int_equal(v, 9);
	assert_int_equal(ab_parse_decimal_prefix("1.5GiB", 18, &d, &end), 0);
	assert_true(d == 1.5);
	assert_string_equal(end, "GiB");
	assert_int_equal(ab_parse_decimal_prefix(".25", 18, &d, &end), 0);
	assert_true(d == 0.25);
	assert_int_equal(ab_parse_decimal_prefix("1.2.3", 18, &d, &end), 0);
	assert_string_equal(end, ".3");
	assert_int_equal(ab_parse_decimal_prefix("1234567890123456", 15, &d, &end), -ERANGE);
	assert_int_equal(ab_parse_decimal_prefix("12345678901234567890", 30, &d, &end), -ERANGE);
	assert_int_equal(ab_parse_decimal_prefix("GiB", 18, &d, &end), -EINVAL);
	assert_int_equal(ab_parse_decimal_prefix("-1", 18, &d, &end), -EINVAL);
	assert_int_equal(ab_parse_decimal("0.8", AB_EXACT_DIGITS, 0, 1, &d), 0);
	assert_true(d == 0.8);
	assert_int_equal(ab_parse_decimal("1.5", AB_EXACT_DIGITS, 0, 1, &d), -ERANGE);
	assert_int_equal(ab_parse_decimal("0.8%", AB_EXACT_DIGITS, 0, 1, &d), -EINVAL);
	assert_int_equal(ab_parse_decimal("1e-3", AB_EXACT_DIGITS, 0, 1, &d), -EINVAL);
}

/* A config's whole number as PyYAML and json read it: underscores, hex, a sign, whole
 * decimals only where asked; a leading 0 (octal to PyYAML) is none. */
static void config_numbers(void **state)
{
	static const struct {
		const char *text;
		unsigned flags;
		int rc;
		long v;
	} cases[] = {
		{"150_001", 0, 0, 150001}, {"10_000", 0, 0, 10000}, {"1_", 0, 0, 1},
		{"0x64", 0, 0, 100}, {"0xfF", 0, 0, 255}, {"0XFF", 0, -EINVAL, 0}, {"0x1_0", 0, 0, 16}, {"-1", 0, 0, -1},
		{"+7", 0, 0, 7}, {"0", 0, 0, 0}, {"4.0", AB_WHOLE_DECIMAL, 0, 4},
		{"1e3", AB_WHOLE_DECIMAL, 0, 1000}, {"-2.0", AB_WHOLE_DECIMAL, 0, -2},
		{"0.0", AB_WHOLE_DECIMAL, 0, 0}, {"16.", AB_WHOLE_DECIMAL, 0, 16},
		{"4.0", 0, -EINVAL, 0}, {"1e3", 0, -EINVAL, 0}, {"2.5", AB_WHOLE_DECIMAL, -EINVAL, 0},
		{"010", 0, -EINVAL, 0}, {"010", AB_WHOLE_DECIMAL, -EINVAL, 0}, {"_1", 0, -EINVAL, 0},
		{"1_0.0", AB_WHOLE_DECIMAL, -EINVAL, 0}, {"0x", 0, -EINVAL, 0}, {"0xg", 0, -EINVAL, 0},
		{"", 0, -EINVAL, 0}, {"+", AB_WHOLE_DECIMAL, -EINVAL, 0}, {"--1", 0, -EINVAL, 0},
		{"inf", AB_WHOLE_DECIMAL, -EINVAL, 0}, {"nan", AB_WHOLE_DECIMAL, -EINVAL, 0},
		{"0x1p3", AB_WHOLE_DECIMAL, -EINVAL, 0}, {" 1", AB_WHOLE_DECIMAL, -EINVAL, 0},
		{"1 ", AB_WHOLE_DECIMAL, -EINVAL, 0}, {"true", AB_WHOLE_DECIMAL, -EINVAL, 0},
		{"9223372036854775808", 0, -ERANGE, 0}, {"0x8000000000000000", 0, -ERANGE, 0},
		{"99999999999999999999x", 0, -EINVAL, 0}, {"9223372036854775808_0", 0, -ERANGE, 0},
		{"0xffffffffffffffffffg", 0, -EINVAL, 0}, {"1e300", AB_WHOLE_DECIMAL, -ERANGE, 0},
		{"2000000001", 0, -ERANGE, 0},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		long v = -7;
		int rc = ab_parse_config_whole(cases[i].text, cases[i].flags, LONG_MIN, 2000000000L,
					       &v);

		if (rc != cases[i].rc)
			fail_msg("'%s' (flags %u): %d, expected %d", cases[i].text, cases[i].flags, rc,
				 cases[i].rc);
		assert_int_equal(v, cases[i].rc ? -7 : cases[i].v);
	}
	assert_int_equal(ab_parse_config_whole(NULL, 0, 0, 1, &(long){0}), -EINVAL);
	/* digits past any long: a loop, not a call every 19 digits (8 MiB of them overflowed the
	 * stack inside srun) */
	{
		size_t n = 8u << 20;
		char *nines = malloc(n + 1);

		assert_non_null(nines);
		memset(nines, '9', n);
		nines[n] = '\0';
		assert_int_equal(ab_parse_config_whole(nines, 0, 0, LONG_MAX, &(long){0}), -ERANGE);
		nines[n - 1] = 'x';
		assert_int_equal(ab_parse_config_whole(nines, 0, 0, LONG_MAX, &(long){0}), -EINVAL);
		free(nines);
	}
	assert_int_equal(ab_parse_config_whole("5", 0, 6, 9, &(long){0}), -ERANGE);
}

static void fraction_accepts(void **state)
{
	static const struct { const char *text; double want; } ok[] = {
		{"0.8", 0.8}, {".8", 0.8}, {"1", 1.0}, {"1.0", 1.0}, {"0.05", 0.05},
		{"80%", 0.8}, {"100%", 1.0}, {"1%", 0.01}, {"0.999999", 0.999999},
		{"00.25", 0.25}, {"1.", 1.0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		double v = -1;

		if (ab_parse_fraction(ok[i].text, &v, err, sizeof(err)) != 0)
			fail_msg("'%s' refused: %s", ok[i].text, err);
		assert_float_equal(v, ok[i].want, 1e-12);
	}
}

static void fraction_refuses(void **state)
{
	static const struct { const char *text; const char *why; } bad[] = {
		{"abc", "invalid fraction 'abc'"},
		{"1.5", "more than the whole GPU memory"},
		{"101%", "more than the whole GPU memory"},
		{"-1", "invalid fraction '-1'"},
		{"nan", "invalid fraction 'nan'"},
		{"inf", "invalid fraction 'inf'"},
		{"0", "must be greater than 0"},
		{"0.0", "must be greater than 0"},
		{"0%", "must be greater than 0"},
		{"0.8%", "fraction '0.8%' is under 1% of the GPU's memory"}, /* a slip for 0.8 */
		{"", "empty fraction"},
		{"8e-1", "invalid fraction"},
		{"0x1p-1", "invalid fraction"},
		{"+0.8", "invalid fraction"},
		{" 0.8", "invalid fraction"},
		{"0.8 ", "invalid fraction"},
		{"0.8%%", "invalid fraction"},
		{"%", "invalid fraction"},
		{".", "invalid fraction"},
		{"0..8", "invalid fraction"},
		{"0,8", "invalid fraction"},
		{"0.8\n", "invalid fraction '0.8?'"},
		{"0.1234567890123456", "invalid fraction"},
		{"0.80000000000000000000000000000000000001", "too long"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		double v = 42;

		err[0] = '\0';
		if (ab_parse_fraction(bad[i].text, &v, err, sizeof(err)) >= 0)
			fail_msg("'%s' accepted as %g", bad[i].text, v);
		assert_contains(err, bad[i].why);
		assert_contains(err, "such as 0.8 or 80%");
		assert_float_equal(v, 42, 0); /* untouched on refusal */
	}
	assert_int_equal(ab_parse_fraction(NULL, &(double){0}, err, sizeof(err)), -EINVAL);
}

/* ---- plugstack arguments ------------------------------------------------------------ */

static void site_defaults(void **state)
{
	(void)state;
	assert_int_equal(site_parse(0, NULL), 0);
	assert_float_equal(site.default_fraction, 0.8, 0);
	assert_float_equal(site.max_fraction, 1.0, 0);
	assert_float_equal(site.force_fraction, 0, 0);
	assert_int_equal(site.over_max, AB_OVER_MAX_CLAMP);
	assert_int_equal(site.on_failure, AB_ON_FAILURE_CONTINUE);
	assert_int_equal(site.probe_timeout, 900);
	assert_true(site.cache);
	assert_false(site.enforce);
	assert_true(site.probe[0] == '/');
	assert_int_equal(site.comm_reserve, 1 << 30);
	assert_int_equal(site.device_memory, 0); /* no MPS cap unless the admin says */
	assert_int_equal(site.trial_cap, 12);
}

static void site_every_key(void **state)
{
	(void)state;
	assert_int_equal(SITE("default_fraction=0.7", "min_fraction=0.5", "max_fraction=90%",
			      "force_fraction=0.6", "over_max=deny", "on_failure=abort",
			      "probe=/opt/ab/probe", "probe_timeout=60", "probe_args=--device",
			      "cache=off", "cache_dir=/var/cache/ab", "enforce=on",
			      "comm_reserve=2GiB", "device_memory=80GiB", "trial_cap=8"),
			 0);
	assert_int_equal(site.trial_cap, 8);
	assert_int_equal(site.comm_reserve, 2ULL << 30);
	assert_int_equal(site.device_memory, 80ULL << 30);
	assert_float_equal(site.default_fraction, 0.7, 1e-12);
	assert_float_equal(site.min_fraction, 0.5, 1e-12);
	assert_float_equal(site.max_fraction, 0.9, 1e-12);
	assert_float_equal(site.force_fraction, 0.6, 1e-12);
	assert_int_equal(site.over_max, AB_OVER_MAX_DENY);
	assert_int_equal(site.on_failure, AB_ON_FAILURE_ABORT);
	assert_string_equal(site.probe, "/opt/ab/probe");
	assert_int_equal(site.probe_timeout, 60);
	assert_string_equal(site.probe_args, "--device");
	assert_false(site.cache);
	assert_string_equal(site.cache_dir, "/var/cache/ab");
	assert_true(site.enforce);
	/* the largest a trial's allowances may be: what the probe accepts */
	assert_int_equal(SITE("startup_seconds=86400", "max_trial_seconds=86400"), 0);
	assert_int_equal(site.startup_seconds, 86400);
	assert_int_equal(site.max_trial_seconds, 86400);
}

static void site_quoted_probe_args(void **state)
{
	(void)state;
	/* Slurm hands plugstack.conf words split on blanks. */
	assert_int_equal(SITE("probe_args=\"--device", "host:capacity=2GiB", "--trial-seconds",
			      "5\"", "enforce=on"),
			 0);
	assert_string_equal(site.probe_args, "--device host:capacity=2GiB --trial-seconds 5");
	assert_true(site.enforce);
	assert_int_equal(SITE("probe_args=\"--device sim:total=8GiB\""), 0);
	assert_string_equal(site.probe_args, "--device sim:total=8GiB");
	assert_int_equal(SITE("probe_args=\"--device", "host"), -EINVAL);
	assert_contains(err, "probe_args has an opening quote but no closing one");
	/* no quotes at all: the value's second word is named, with the quoting */
	assert_int_equal(SITE("probe_args=--device", "host"), -EINVAL);
	assert_string_equal(err, "plugstack argument 'host' is no key=value: a value with spaces is "
				 "quoted, as probe_args=\"--device host\"");
}

static void site_refusals(void **state)
{
	static const struct { const char *arg; const char *why; } bad[] = {
		{"colour=blue", "unknown plugstack argument 'colour=blue'"},
		{"max_fraction", "unknown plugstack argument 'max_fraction'"},
		{"=0.5", "unknown plugstack argument"},
		{"max_fraction=1.5", "plugstack argument max_fraction: fraction '1.5'"},
		{"default_fraction=abc", "plugstack argument default_fraction: invalid"},
		{"min_fraction=0", "must be greater than 0"},
		{"over_max=maybe", "over_max=maybe is invalid: use over_max=clamp or over_max=deny"},
		{"on_failure=retry", "use on_failure=continue or on_failure=abort"},
		{"cache=yes", "use cache=off or cache=on"},
		{"enforce=", "use enforce=off or enforce=on"},
		{"probe=autobatch-probe", "probe=autobatch-probe must be an absolute path"},
		{"cache_dir=~/cache", "must be an absolute path"},
		{"probe_timeout=0", "whole number of seconds"},
		{"probe_timeout=-5", "whole number of seconds"},
		{"probe_timeout=10s", "whole number of seconds"},
		{"probe_timeout=99999999999", "whole number of seconds"},
		{"probe_timeout=604801", "whole number of seconds"},
		/* a trial's allowances: what the probe accepts, not the probe's whole timeout */
		{"startup_seconds=86401", "startup_seconds=86401 must be a whole number of seconds from 1 to 86400"},
		{"max_trial_seconds=604800", "from 1 to 86400"},
		{"probe_args=a\tb", "control characters"},
		{"comm_reserve=lots", "plugstack argument comm_reserve:"},
		{"comm_reserve=-1GiB", "plugstack argument comm_reserve:"},
		/* the MPS cap's base: 20 digits overflow, a sign or a unit typo is refused */
		{"device_memory=99999999999999999999", "plugstack argument device_memory:"},
		{"device_memory=-80GiB", "plugstack argument device_memory:"},
		{"device_memory=80GB8", "plugstack argument device_memory:"},
		{"trial_cap=0", "trial_cap=0 must be a whole number of trials from 1 to 100"},
		{"trial_cap=101", "whole number of trials"},
		{"trial_cap=8.5", "whole number of trials"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[] = {(char *)bad[i].arg};

		if (site_parse(1, argv) >= 0)
			fail_msg("'%s' accepted", bad[i].arg);
		assert_contains(err, bad[i].why);
	}
}

static void site_conflicts(void **state)
{
	(void)state;
	assert_int_equal(SITE("max_fraction=0.9", "max_fraction=0.95"), -EINVAL);
	assert_contains(err, "max_fraction is given twice");
	assert_int_equal(SITE("min_fraction=0.9", "max_fraction=0.5"), -EINVAL);
	assert_contains(err, "min_fraction=0.9 is above max_fraction=0.5");
	assert_int_equal(SITE("default_fraction=0.95", "max_fraction=0.9"), -EINVAL);
	assert_contains(err, "default_fraction=0.95 is outside");
	assert_int_equal(SITE("force_fraction=0.95", "max_fraction=0.9"), -EINVAL);
	assert_contains(err, "force_fraction=0.95 is outside");
	/* An implicit default follows the admin's bounds instead of failing. */
	assert_int_equal(SITE("max_fraction=0.7"), 0);
	assert_float_equal(site.default_fraction, 0.7, 1e-12);
	assert_int_equal(SITE("min_fraction=0.9"), 0);
	assert_float_equal(site.default_fraction, 0.9, 1e-12);
}

static void site_long_values(void **state)
{
	char probe[AB_PATH_MAX + 16] = "probe=/";

	(void)state;
	memset(probe + 7, 'a', sizeof(probe) - 8);
	probe[sizeof(probe) - 1] = '\0';
	char *argv[] = {probe};
	assert_int_equal(site_parse(1, argv), -ENAMETOOLONG);
	assert_contains(err, "probe is longer than");
}

/* ---- user options ------------------------------------------------------------------ */

static void request_options(void **state)
{
	struct ab_request r;

	(void)state;
	ab_request_init(&r);
	assert_false(r.enabled);
	assert_int_equal(ab_request_set(&r, AB_OPT_AUTOBATCH, "0.7", err, sizeof(err)), 0);
	assert_true(r.enabled);
	assert_int_equal(r.source, AB_SOURCE_OPTION);
	assert_float_equal(r.fraction, 0.7, 1e-12);
	assert_int_equal(ab_request_set(&r, AB_OPT_CONFIG, "exp.yaml", err, sizeof(err)), 0);
	assert_string_equal(r.config, "exp.yaml");
	assert_int_equal(ab_request_set(&r, AB_OPT_PRESET, "deepspeed", err, sizeof(err)), 0);
	assert_int_equal(ab_request_set(&r, AB_OPT_KEY, "train_input.micro_batch_size", err,
					sizeof(err)),
			 0);
	assert_int_equal(ab_request_set(&r, AB_OPT_GLOBAL_BATCH, "2048", err, sizeof(err)), 0);
	assert_int_equal(r.global_batch, 2048);
	assert_int_equal(ab_request_set(&r, AB_OPT_OBJECTIVE, "throughput", err, sizeof(err)),
			 0);
	assert_int_equal(r.objective, AB_OBJECTIVE_THROUGHPUT);
	assert_int_equal(ab_request_set(&r, AB_OPT_MODE, "model", err, sizeof(err)), 0);
	assert_int_equal(r.mode, AB_MODE_MODEL);
	assert_int_equal(ab_request_set(&r, AB_OPT_EVAL, NULL, err, sizeof(err)), 0);
	assert_true(r.eval);
	assert_int_equal(ab_request_set(&r, AB_OPT_REFRESH, NULL, err, sizeof(err)), 0);
	assert_true(r.refresh);
	assert_int_equal(ab_request_set(&r, AB_OPT_TRIAL_COMMAND, "python train.py\t--x", err,
					sizeof(err)),
			 0);
	assert_int_equal(ab_request_set(&r, AB_OPT_RUN_STEPS, "5000", err, sizeof(err)), 0);
	assert_int_equal(r.run_steps, 5000);
	assert_int_equal(ab_request_set(&r, AB_OPT_RUN_STEPS, "off", err, sizeof(err)), 0);
	assert_int_equal(r.run_steps, AB_RUN_STEPS_OFF);
	/* Slurm may run a callback twice; the same value must give the same state. */
	assert_int_equal(ab_request_set(&r, AB_OPT_AUTOBATCH, "0.7", err, sizeof(err)), 0);
	assert_float_equal(r.fraction, 0.7, 1e-12);
	/* A bare --autobatch after an environment value means the site default. */
	assert_int_equal(ab_request_set(&r, AB_OPT_AUTOBATCH, NULL, err, sizeof(err)), 0);
	assert_int_equal(r.source, AB_SOURCE_DEFAULT);
}

static void request_refusals(void **state)
{
	static const struct { enum ab_option opt; const char *value; const char *why; } bad[] = {
		{AB_OPT_AUTOBATCH, "1.5", "--autobatch: fraction '1.5' is more than"},
		{AB_OPT_AUTOBATCH, "abc", "--autobatch: invalid fraction 'abc'"},
		{AB_OPT_AUTOBATCH, "", "--autobatch= has nothing after '='"},
		{AB_OPT_CONFIG, "", "--autobatch-config needs a value"},
		{AB_OPT_CONFIG, "a\nb", "--autobatch-config contains control characters"},
		{AB_OPT_PRESET, "deep speed", "may use only letters"},
		{AB_OPT_PRESET, "../../etc", "may use only letters"},
		{AB_OPT_KEY, "", "--autobatch-key needs a value"},
		{AB_OPT_GLOBAL_BATCH, "0", "--autobatch-global-batch=0 is invalid"},
		{AB_OPT_GLOBAL_BATCH, "-8", "is invalid"},
		{AB_OPT_GLOBAL_BATCH, "12abc", "is invalid"},
		{AB_OPT_GLOBAL_BATCH, "99999999999", "is invalid"},
		{AB_OPT_GLOBAL_BATCH, "2147483648", "is invalid"},
		{AB_OPT_OBJECTIVE, "speed", "--autobatch-objective=speed is invalid: use memory or "
					    "throughput"},
		{AB_OPT_MODE, "proxy", "use exec or model"},
		{AB_OPT_MODE, NULL, "--autobatch-mode= is invalid"},
		{AB_OPT_TRIAL_COMMAND, "", "needs a value"},
		{AB_OPT_TRIAL_COMMAND, "a\x1b[2Jb", "control characters"},
		{AB_OPT_RUN_STEPS, "0", "--autobatch-run-steps=0 is invalid: give the run's "
					"optimizer steps, a whole number from 1 to 1000000000, or off"},
		{AB_OPT_RUN_STEPS, "-5", "is invalid"},
		{AB_OPT_RUN_STEPS, "12x", "is invalid"},
		{AB_OPT_RUN_STEPS, "1000000001", "is invalid"},
		{AB_OPT_RUN_STEPS, "OFF", "is invalid"},
		{AB_OPT_RUN_STEPS, NULL, "--autobatch-run-steps= is invalid"},
		{AB_OPT_COUNT, "x", "unknown option"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ab_request r;

		ab_request_init(&r);
		err[0] = '\0';
		if (ab_request_set(&r, bad[i].opt, bad[i].value, err, sizeof(err)) >= 0)
			fail_msg("option %d '%s' accepted", bad[i].opt,
				 bad[i].value ? bad[i].value : "(null)");
		assert_contains(err, bad[i].why);
		assert_false(r.enabled);
	}
}

static void request_long_config(void **state)
{
	struct ab_request r;
	char path[AB_PATH_MAX + 1];

	(void)state;
	memset(path, 'x', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	ab_request_init(&r);
	assert_int_equal(ab_request_set(&r, AB_OPT_CONFIG, path, err, sizeof(err)),
			 -ENAMETOOLONG);
	assert_contains(err, "--autobatch-config is longer than");
}

static void request_env(void **state)
{
	struct ab_request r;

	(void)state;
	ab_request_init(&r);
	assert_int_equal(ab_request_from_env(&r, NULL, err, sizeof(err)), 0);
	assert_false(r.enabled);
	assert_int_equal(ab_request_from_env(&r, "75%", err, sizeof(err)), 0);
	assert_true(r.enabled);
	assert_int_equal(r.source, AB_SOURCE_ENV);
	assert_float_equal(r.fraction, 0.75, 1e-12);

	ab_request_init(&r);
	assert_int_equal(ab_request_from_env(&r, "", err, sizeof(err)), -EINVAL);
	assert_contains(err, "AUTOBATCH is set but empty");
	assert_int_equal(ab_request_from_env(&r, "2", err, sizeof(err)), -ERANGE);
	assert_contains(err, "AUTOBATCH: fraction '2'");

	/* The option wins over the environment. */
	ab_request_init(&r);
	assert_int_equal(ab_request_set(&r, AB_OPT_AUTOBATCH, "0.6", err, sizeof(err)), 0);
	assert_int_equal(ab_request_from_env(&r, "garbage", err, sizeof(err)), 0);
	assert_float_equal(r.fraction, 0.6, 1e-12);
	assert_int_equal(r.source, AB_SOURCE_OPTION);
}

static void request_check(void **state)
{
	struct ab_request r;

	(void)state;
	ab_request_init(&r);
	assert_int_equal(ab_request_check(&r, err, sizeof(err)), 0);
	assert_int_equal(ab_request_set(&r, AB_OPT_CONFIG, "exp.yaml", err, sizeof(err)), 0);
	assert_int_equal(ab_request_check(&r, err, sizeof(err)), -EINVAL);
	assert_contains(err, "--autobatch-config has no effect without --autobatch");
	assert_int_equal(ab_request_from_env(&r, "0.8", err, sizeof(err)), 0);
	assert_int_equal(ab_request_check(&r, err, sizeof(err)), 0);
	/* off, after what sbatch passed on (its --autobatch and --autobatch-config): this step
	 * is not sized, the others are unused without a complaint, and AUTOBATCH does not
	 * switch it back on; a later --autobatch does */
	ab_request_init(&r);
	assert_int_equal(ab_request_set(&r, AB_OPT_AUTOBATCH, "0.8", err, sizeof(err)), 0);
	assert_int_equal(ab_request_set(&r, AB_OPT_CONFIG, "exp.yaml", err, sizeof(err)), 0);
	assert_int_equal(ab_request_set(&r, AB_OPT_AUTOBATCH, "off", err, sizeof(err)), 0);
	assert_false(r.enabled);
	assert_int_equal(ab_request_from_env(&r, "0.8", err, sizeof(err)), 0);
	assert_false(r.enabled);
	assert_int_equal(ab_request_check(&r, err, sizeof(err)), 0);
	assert_int_equal(ab_request_set(&r, AB_OPT_AUTOBATCH, "0.7", err, sizeof(err)), 0);
	assert_true(r.enabled);
	ab_request_init(&r);
	assert_int_equal(ab_request_from_env(&r, "off", err, sizeof(err)), 0);
	assert_false(r.enabled);
	assert_true(r.off);
}

/* ---- policy ------------------------------------------------------------------------ */

static int resolve(const char *fraction, double *out)
{
	struct ab_request r;

	ab_request_init(&r);
	if (fraction)
		assert_int_equal(ab_request_set(&r, AB_OPT_AUTOBATCH, fraction, err, sizeof(err)),
				 0);
	else
		r.enabled = true;
	struct ab_effective eff;
	int rc;

	err[0] = '\0';
	rc = ab_settings_resolve(&site, &r, &eff, err, sizeof(err));
	snprintf(note, sizeof(note), "%s", rc == 0 ? eff.note : "");
	if (rc == 0)
		*out = eff.fraction;
	return rc;
}

static void policy(void **state)
{
	double f = 0;

	(void)state;
	assert_int_equal(SITE("max_fraction=0.9"), 0);
	assert_int_equal(resolve("0.85", &f), 0);
	assert_float_equal(f, 0.85, 1e-12);
	assert_string_equal(note, "");
	assert_int_equal(resolve(NULL, &f), 0);
	assert_float_equal(f, 0.8, 1e-12);

	/* clamp (the default policy) */
	assert_int_equal(resolve("0.95", &f), 0);
	assert_float_equal(f, 0.9, 1e-12);
	assert_string_equal(note, "--autobatch=0.95 is above the site maximum 0.9: using 0.9");

	/* deny */
	assert_int_equal(SITE("max_fraction=0.9", "min_fraction=0.5", "over_max=deny"), 0);
	f = 0;
	assert_int_equal(resolve("0.95", &f), -ERANGE);
	assert_float_equal(f, 0, 0);
	assert_string_equal(err, "--autobatch=0.95 is above the site maximum 0.9 (max_fraction "
				 "in plugstack.conf): ask for at most 0.9");
	assert_int_equal(resolve("0.3", &f), -ERANGE);
	assert_contains(err, "below the site minimum 0.5 (min_fraction in plugstack.conf): ask "
			     "for at least 0.5");
	assert_int_equal(resolve("0.9", &f), 0); /* the bound itself is allowed */

	assert_int_equal(SITE("min_fraction=0.5"), 0);
	assert_int_equal(resolve("30%", &f), 0);
	assert_float_equal(f, 0.5, 1e-12);
	assert_contains(note, "--autobatch=30% is below the site minimum 0.5: using 0.5");

	/* force wins over everything the user asks for, and says so */
	assert_int_equal(SITE("force_fraction=0.75", "over_max=deny", "max_fraction=0.8"), 0);
	assert_int_equal(resolve("0.99", &f), 0);
	assert_float_equal(f, 0.75, 1e-12);
	assert_contains(note, "the site forces fraction 0.75: --autobatch=0.99 is ignored");
	assert_int_equal(resolve(NULL, &f), 0);
	assert_float_equal(f, 0.75, 1e-12);
	assert_string_equal(note, "");
}

static void describe(void **state)
{
	struct ab_request r;
	struct ab_effective eff;
	char buf[2048], tiny[16];

	(void)state;
	assert_int_equal(SITE("max_fraction=0.9", "probe_args=\"--device host\""), 0);
	ab_request_init(&r);
	assert_int_equal(ab_request_set(&r, AB_OPT_AUTOBATCH, "0.85", err, sizeof(err)), 0);
	assert_int_equal(ab_settings_resolve(&site, &r, &eff, err, sizeof(err)), 0);
	assert_int_equal(ab_settings_describe(&site, &r, &eff, buf, sizeof(buf)), 0);
	assert_contains(buf, "fraction=0.85 (from --autobatch=0.85; site bounds 0..0.9, "
			     "over_max=clamp)\n");
	assert_contains(buf, "objective=memory mode=exec eval=no refresh=no\n");
	assert_contains(buf, "probe_args=--device host\n");
	assert_contains(buf, "startup_seconds=600s max_trial_seconds=1800s trial_cap=12 instrument=on "
			     "parallel=on trial_shape=step\n");
	assert_int_equal(ab_settings_describe(&site, &r, &eff, tiny, sizeof(tiny)), -ENAMETOOLONG);
	/* a forced fraction is the site's value, and the user's is named as theirs */
	assert_int_equal(SITE("force_fraction=0.7"), 0);
	assert_int_equal(ab_request_set(&r, AB_OPT_AUTOBATCH, "0.95", err, sizeof(err)), 0);
	assert_int_equal(ab_settings_resolve(&site, &r, &eff, err, sizeof(err)), 0);
	assert_int_equal(ab_settings_describe(&site, &r, &eff, buf, sizeof(buf)), 0);
	assert_contains(buf, "fraction=0.7 (from force_fraction=0.7, not --autobatch=0.95; ");
	ab_request_init(&r);
	assert_int_equal(ab_settings_resolve(&site, &r, &eff, err, sizeof(err)), 0);
	assert_int_equal(ab_settings_describe(&site, &r, &eff, buf, sizeof(buf)), 0);
	assert_contains(buf, "fraction=0.7 (from force_fraction=0.7; ");
}

/* The one rule, as each context meets the request: srun records --autobatch=0.95; sbatch
 * hands a bare --autobatch on as "(null)" (the site default); slurmstepd takes the option
 * srun launched with. Each gets the same fraction for the same request; the user's
 * --autobatch-instrument wins over the site's instrument=. */
static void effective_in_every_context(void **state)
{
	struct ab_request srun, sbatch, stepd;
	struct ab_effective a, b, c;

	(void)state;
	assert_int_equal(SITE("max_fraction=0.9", "default_fraction=0.7", "instrument=off"), 0);
	ab_request_init(&srun);
	assert_int_equal(ab_request_set(&srun, AB_OPT_AUTOBATCH, "0.95", err, sizeof(err)), 0);
	assert_int_equal(ab_request_set(&srun, AB_OPT_INSTRUMENT, "on", err, sizeof(err)), 0);
	assert_int_equal(ab_settings_resolve(&site, &srun, &a, err, sizeof(err)), 0);
	assert_float_equal(a.fraction, 0.9, 1e-12);
	assert_string_equal(a.note, "--autobatch=0.95 is above the site maximum 0.9: using 0.9");
	assert_true(a.instrument);

	ab_request_init(&sbatch);
	assert_int_equal(ab_request_set(&sbatch, AB_OPT_AUTOBATCH, ab_option_value("(null)"), err,
					sizeof(err)),
			 0);
	assert_int_equal(ab_settings_resolve(&site, &sbatch, &b, err, sizeof(err)), 0);
	assert_float_equal(b.fraction, 0.7, 1e-12);
	assert_string_equal(b.note, "");
	assert_false(b.instrument);

	ab_request_init(&stepd);
	assert_int_equal(ab_request_set(&stepd, AB_OPT_AUTOBATCH, "0.95", err, sizeof(err)), 0);
	assert_int_equal(ab_settings_resolve(&site, &stepd, &c, err, sizeof(err)), 0);
	assert_float_equal(c.fraction, a.fraction, 0);
}

/* --autobatch-trial-shape: the user's, else gpu for a trial command (one process by its
 * definition), else the site's trial_shape= (step by default); each refused precisely. */
static void trial_shapes(void **state)
{
	struct ab_request r;
	struct ab_effective eff;

	(void)state;
	assert_int_equal(site_parse(0, NULL), 0);
	assert_int_equal(site.trial_shape, AB_SHAPE_STEP);
	ab_request_init(&r);
	assert_int_equal(ab_request_set(&r, AB_OPT_AUTOBATCH, "0.8", err, sizeof(err)), 0);
	assert_int_equal(ab_settings_resolve(&site, &r, &eff, err, sizeof(err)), 0);
	assert_int_equal(eff.shape, AB_SHAPE_STEP);
	assert_int_equal(ab_request_set(&r, AB_OPT_TRIAL_COMMAND, "python train.py", err,
					sizeof(err)), 0);
	assert_int_equal(ab_settings_resolve(&site, &r, &eff, err, sizeof(err)), 0);
	assert_int_equal(eff.shape, AB_SHAPE_GPU);
	assert_int_equal(ab_request_set(&r, AB_OPT_TRIAL_SHAPE, "node", err, sizeof(err)), 0);
	assert_int_equal(ab_settings_resolve(&site, &r, &eff, err, sizeof(err)), 0);
	assert_int_equal(eff.shape, AB_SHAPE_NODE);
	assert_int_equal(ab_request_set(&r, AB_OPT_TRIAL_SHAPE, "steps", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--autobatch-trial-shape=steps is invalid: use step, node or gpu");

	assert_int_equal(SITE("trial_shape=gpu"), 0);
	ab_request_init(&r);
	assert_int_equal(ab_request_set(&r, AB_OPT_AUTOBATCH, "0.8", err, sizeof(err)), 0);
	assert_int_equal(ab_settings_resolve(&site, &r, &eff, err, sizeof(err)), 0);
	assert_int_equal(eff.shape, AB_SHAPE_GPU);
	assert_int_equal(SITE("trial_shape=all"), -EINVAL);
	assert_string_equal(err, "plugstack argument trial_shape=all is invalid: use "
				 "trial_shape=step, trial_shape=node or trial_shape=gpu");

	/* the step's nodes, which shape its trials */
	assert_int_equal(ab_hostlist_count("node1"), 1);
	assert_int_equal(ab_hostlist_count("node[1-3],login1"), 4);
	assert_int_equal(ab_hostlist_count("gpu[003-010,12]"), 9);
	assert_int_equal(ab_hostlist_count("r[1-2]n[1-3]"), 6);
	assert_int_equal(ab_hostlist_count(""), -EINVAL);
	assert_int_equal(ab_hostlist_count("a,"), -EINVAL);
	assert_int_equal(ab_hostlist_count("a[3-1]"), -EINVAL);
	assert_int_equal(ab_hostlist_count("a[1-"), -EINVAL);
	assert_int_equal(ab_hostlist_count("a b"), -EINVAL);
	/* found by the fuzzer: a range up to LONG_MAX overflowed the count */
	assert_int_equal(ab_hostlist_count("u[0-0103333333333333333333333333,12]"), -EINVAL);
	assert_int_equal(ab_hostlist_count("u[99999999999999999999]"), -EINVAL);

	/* launchers, whose one task is a step trial with each worker measured */
	assert_string_equal(ab_launcher_name(2, ARGV("/usr/bin/torchrun", "train.py")), "torchrun");
	assert_string_equal(ab_launcher_name(3, ARGV("accelerate", "launch", "t.py")),
			    "accelerate launch");
	assert_string_equal(ab_launcher_name(2, ARGV("deepspeed", "t.py")), "deepspeed");
	assert_string_equal(ab_launcher_name(5, ARGV("python3", "-u", "-m", "torch.distributed.run",
						     "t.py")),
			    "torch.distributed.run");
	assert_null(ab_launcher_name(3, ARGV("accelerate", "config", "x")));
	assert_null(ab_launcher_name(3, ARGV("python3", "t.py", "-m")));
	assert_null(ab_launcher_name(4, ARGV("python3", "-m", "torch.distributed.run2", "t.py")));
	assert_null(ab_launcher_name(2, ARGV("./train.sh", "torchrun")));
	assert_null(ab_launcher_name(0, NULL));

	/* the workers a launcher starts, as its arguments say (a global batch's replicas) */
	bool world;

	assert_int_equal(ab_launcher_workers(3, ARGV("torchrun", "--nproc_per_node=4", "t.py"),
					     &world), 4);
	assert_false(world);
	assert_int_equal(ab_launcher_workers(4, ARGV("torchrun", "--nproc-per-node", "2", "t.py"),
					     &world), 2);
	assert_int_equal(ab_launcher_workers(2, ARGV("torchrun", "t.py"), &world), 1); /* its default */
	assert_int_equal(ab_launcher_workers(3, ARGV("torchrun", "--nproc_per_node=gpu", "t.py"),
					     &world), 0);
	assert_int_equal(ab_launcher_workers(5, ARGV("python3", "-m", "torch.distributed.run",
						     "--nproc_per_node=auto", "t.py"), &world), 0);
	assert_int_equal(ab_launcher_workers(3, ARGV("torchrun", "--nproc_per_node=x", "t.py"),
					     &world), -1);
	assert_int_equal(ab_launcher_workers(2, ARGV("deepspeed", "t.py"), &world), 0); /* all GPUs */
	assert_int_equal(ab_launcher_workers(4, ARGV("deepspeed", "--num_gpus", "2", "t.py"),
					     &world), 2);
	assert_int_equal(ab_launcher_workers(5, ARGV("accelerate", "launch", "--num_processes",
						     "8", "t.py"), &world), 8);
	assert_true(world); /* over all its machines */
	assert_int_equal(ab_launcher_workers(3, ARGV("accelerate", "launch", "t.py"), &world), -1);
	assert_int_equal(ab_launcher_workers(6, ARGV("python3", "-m", "accelerate.commands.launch",
						     "--num-processes", "4", "t.py"), &world), 4);
	assert_int_equal(ab_launcher_workers(3, ARGV("torchrun", "t.py", "--nproc_per_node=9"),
					     &world), 1); /* the program's own arguments */
	assert_int_equal(ab_launcher_workers(6, ARGV("torchrun", "--standalone", "t.py",
						     "--nproc_per_node", "9", "x"), &world), 1);
	assert_int_equal(ab_launcher_workers(6, ARGV("torchrun", "--nnodes", "2",
						     "--nproc_per_node", "8", "t.py"), &world), 8);
	assert_int_equal(ab_launcher_workers(2, ARGV("python3", "t.py"), &world), -1);
}

/* a real file the config reader parses */
#define put unit_put

/* accelerate launch without --num_processes: its config file's num_processes, named by
 * --config_file or accelerate's default under $HF_HOME, $XDG_CACHE_HOME or ~/.cache */
static void accelerate_config(void **state)
{
	char dir[] = "/tmp/autobatch-accelerate.XXXXXX", path[700], hf[800];
	const char *saved[3] = {getenv("HF_HOME"), getenv("XDG_CACHE_HOME"), getenv("HOME")};
	char keep[3][512] = {"", "", ""};
	bool world;

	(void)state;
	for (int i = 0; i < 3; i++)
		if (saved[i])
			snprintf(keep[i], sizeof(keep[i]), "%s", saved[i]);
	assert_non_null(mkdtemp(dir));
	put(dir, "multi.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\n"
			       "num_machines: 2\nnum_processes: 16\nmixed_precision: bf16\n");
	put(dir, "ask.yaml", "distributed_type: MULTI_GPU\nnum_processes: -1\n");
	put(dir, "bad.yaml", "num_processes: [8\n");
	put(dir, "one.json", "{\"distributed_type\": \"NO\", \"num_processes\": 1}");
	snprintf(path, sizeof(path), "%s/multi.yaml", dir);
	assert_int_equal(ab_launcher_config_workers(5, ARGV("accelerate", "launch", "--config_file",
							    path, "t.py"), NULL, &world), 16);
	assert_true(world); /* over all its machines */
	/* a relative file, where the tasks start (srun -D's directory) */
	assert_int_equal(ab_launcher_config_workers(5, ARGV("accelerate", "launch", "--config_file",
							    "multi.yaml", "t.py"), dir, &world), 16);
	snprintf(path, sizeof(path), "--config-file=%s/one.json", dir);
	assert_int_equal(ab_launcher_config_workers(4, ARGV("accelerate", "launch", path, "t.py"),
						    NULL, &world), 1);
	snprintf(path, sizeof(path), "%s/ask.yaml", dir);
	assert_int_equal(ab_launcher_config_workers(5, ARGV("accelerate", "launch", "--config_file",
							    path, "t.py"), NULL, &world), -1);
	snprintf(path, sizeof(path), "%s/bad.yaml", dir);
	assert_int_equal(ab_launcher_config_workers(5, ARGV("accelerate", "launch", "--config_file",
							    path, "t.py"), NULL, &world), -1);
	snprintf(path, sizeof(path), "%s/none.yaml", dir); /* named and missing: accelerate fails */
	assert_int_equal(ab_launcher_config_workers(5, ARGV("accelerate", "launch", "--config_file",
							    path, "t.py"), NULL, &world), -1);
	/* the command line's --num_processes wins, and other launchers have no such file */
	assert_int_equal(ab_launcher_config_workers(5, ARGV("accelerate", "launch",
							    "--num_processes=2", "t.py"), NULL, &world), -1);
	assert_int_equal(ab_launcher_config_workers(2, ARGV("torchrun", "t.py"), NULL, &world), -1);
	/* the default file: under $HF_HOME; without one, one process per GPU (of each node only
	 * with one machine: accelerate splits one node's count over --num_machines) */
	snprintf(hf, sizeof(hf), "%s/hf", dir);
	assert_int_equal(setenv("HF_HOME", hf, 1), 0);
	assert_int_equal(ab_launcher_config_workers(3, ARGV("accelerate", "launch", "t.py"), NULL, &world),
			 0);
	assert_int_equal(ab_launcher_config_workers(5, ARGV("accelerate", "launch", "--num_machines",
							    "2", "t.py"), NULL, &world), -1);
	/* accelerate's flags take no value: -m's program's own --config_file is not accelerate's */
	snprintf(path, sizeof(path), "%s/multi.yaml", dir);
	assert_int_equal(ab_launcher_config_workers(6, ARGV("accelerate", "launch", "-m", "pkg.train",
							    "--config_file", path), NULL, &world), 0);
	snprintf(path, sizeof(path), "%s/hf/accelerate", dir);
	assert_int_equal(mkdir(hf, 0700) | mkdir(path, 0700), 0);
	snprintf(hf, sizeof(hf), "%s/default_config.yaml", path); /* a directory: no file */
	assert_int_equal(mkdir(hf, 0700), 0);
	assert_int_equal(ab_launcher_config_workers(3, ARGV("accelerate", "launch", "t.py"), NULL, &world),
			 0);
	assert_int_equal(rmdir(hf), 0);
	snprintf(hf, sizeof(hf), "%s/hf", dir);
	put(path, "default_config.yaml", "num_processes: 4\n");
	assert_int_equal(ab_launcher_config_workers(3, ARGV("accelerate", "launch", "t.py"), NULL, &world),
			 4);
	assert_int_equal(ab_launcher_config_workers(5, ARGV("python3", "-m",
							    "accelerate.commands.launch", "t.py"),
						    NULL, &world), 4);
	/* else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface */
	unsetenv("HF_HOME");
	assert_int_equal(setenv("XDG_CACHE_HOME", dir, 1), 0);
	rename(hf, strcat(strcpy(path, dir), "/huggingface"));
	assert_int_equal(ab_launcher_config_workers(3, ARGV("accelerate", "launch", "t.py"), NULL, &world),
			 4);
	unsetenv("XDG_CACHE_HOME");
	assert_int_equal(setenv("HOME", dir, 1), 0);
	snprintf(hf, sizeof(hf), "%s/.cache", dir);
	assert_int_equal(mkdir(hf, 0700), 0);
	rename(path, strcat(hf, "/huggingface"));
	assert_int_equal(ab_launcher_config_workers(3, ARGV("accelerate", "launch", "t.py"), NULL, &world),
			 4);
	for (int i = 0; i < 3; i++) {
		const char *names[3] = {"HF_HOME", "XDG_CACHE_HOME", "HOME"};

		if (saved[i])
			setenv(names[i], keep[i], 1);
		else
			unsetenv(names[i]);
	}
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	assert_int_equal(system(path), 0);
}

/* srun's own syntax: a bare ':' separates a heterogeneous step's components */
static void het_steps(void **state)
{
	static const char het[] = "srun\0-n1\0--autobatch=0.8\0train\0:\0-n1\0ps";
	static const char plain[] = "srun\0--autobatch\0sh\0-c\0: ; x:\0a:b";
	static const char last[] = "srun\0x\0:";
	/* inside a heterogeneous job: a step over components 0 and 1, no ':' */
	static const char groups[] = "srun\0--het-group=0,1\0--autobatch\0train";
	static const char range[] = "srun\0--het-group\0000-2\0train";
	static const char one[] = "srun\0--het-group=1\0--autobatch\0train";
	static const char theirs[] = "srun\0--autobatch\0train\0--het-group=0,1";
	char *train[] = {"train"}, *train_theirs[] = {"train", "--het-group=0,1"};

	(void)state;
	assert_true(line_of(het, sizeof(het), 1, (char *[]){"ps"}).het_step);
	assert_true(line_of(last, sizeof(last), 0, NULL).het_step);
	assert_false(line_of(plain, sizeof(plain), 1, (char *[]){"a:b"}).het_step);
	assert_false(line_of(":", 2, 0, NULL).het_step); /* a program named ':' is srun's argv[0] */
	assert_false(line_of("", 0, 0, NULL).het_step);
	assert_true(line_of(groups, sizeof(groups), 1, train).het_step);
	assert_true(line_of(range, sizeof(range), 1, train).het_step);
	assert_false(line_of(one, sizeof(one), 1, train).het_step); /* one component: a step */
	/* getopt's prefixes of the name; a range of one */
	assert_true(line_of("srun\0--het-g=0-1\0train", 23, 1, train).het_step);
	assert_true(line_of("srun\0--het\0001,2\0train", 21, 1, train).het_step);
	assert_false(line_of("srun\0--het-group=1-1\0train", 27, 1, train).het_step);
	assert_true(line_of("srun\0--het-group=1-10\0train", 28, 1, train).het_step);
	assert_false(line_of("srun\0--he=0,1\0train", 20, 1, train).het_step);
	/* the program's own argument is not srun's */
	assert_false(line_of(theirs, sizeof(theirs), 2, train_theirs).het_step);
}

/* srun -t: a step's own time limit, in its spellings; never the command's own -t */
static void srun_time(void **state)
{
	static const char t1[] = "srun\0-t\0005\0train";
	static const char t2[] = "srun\0-t5\0train";
	static const char t3[] = "srun\0--time=1:00:00\0train";
	static const char t4[] = "srun\0--time\0005\0train";
	static const char none[] = "srun\0--autobatch\0train\0-t\0005";
	static const char other[] = "srun\0--time-min=5\0train";
	char *train[] = {"train"}, *theirs[] = {"train", "-t", "5"};

	(void)state;
	assert_true(line_of(t1, sizeof(t1), 1, train).time);
	assert_true(line_of(t2, sizeof(t2), 1, train).time);
	assert_true(line_of(t3, sizeof(t3), 1, train).time);
	assert_true(line_of(t4, sizeof(t4), 1, train).time);
	assert_false(line_of(none, sizeof(none), 3, theirs).time);
	assert_false(line_of(other, sizeof(other), 1, train).time);
}

/* srun's options as its getopt_long reads them (slurm_opt.c): clusters, prefixes, values
 * that look like options, other plugins' options, the end of the options */
static void srun_getopt(void **state)
{
	static const char lt[] = "srun\0-lt\0005\0train";
	static const char ld[] = "srun\0-lD\0/scratch/e\0train";
	static const char ld_glued[] = "srun\0-ulD/scratch/f\0train";
	static const char j_t[] = "srun\0-J\0-t5\0train";
	static const char comment[] = "srun\0--comment\0-D/x\0--comment=-t\0train";
	static const char chd[] = "srun\0--chd=/scratch/g\0train";
	static const char ch[] = "srun\0--ch\0/scratch/h\0train";
	static const char pyxis[] = "srun\0--container-image\0-t\0--container-workdir=/w\0"
				    "--autobatch-config\0-D\0-D\0/scratch/i\0train";
	static const char theirs[] = "srun\0--their-opt\0value\0-D\0/scratch/j\0train";
	static const char opt_i[] = "srun\0-I\0-t\0005\0train";
	static const char pack[] = "srun\0--pack-group=0,1\0train";
	static const char mp_j[] = "srun\0-J\0--multi-prog\0mp.conf";
	static const char dashes[] = "srun\0--\0-D\0/x\0train";

	(void)state;
	assert_true(line_of(lt, sizeof(lt), 1, ARGV("train")).time);
	assert_string_equal(line_of(ld, sizeof(ld), 1, ARGV("train")).chdir, "/scratch/e");
	assert_string_equal(line_of(ld_glued, sizeof(ld_glued), 1, ARGV("train")).chdir,
			    "/scratch/f");
	assert_false(line_of(j_t, sizeof(j_t), 1, ARGV("train")).time); /* the job's name */
	assert_null(line_of(comment, sizeof(comment), 1, ARGV("train")).chdir);
	assert_false(line_of(comment, sizeof(comment), 1, ARGV("train")).time);
	assert_string_equal(line_of(chd, sizeof(chd), 1, ARGV("train")).chdir, "/scratch/g");
	assert_string_equal(line_of(ch, sizeof(ch), 1, ARGV("train")).chdir, "/scratch/h");
	assert_string_equal(line_of(pyxis, sizeof(pyxis), 1, ARGV("train")).chdir, "/scratch/i");
	assert_false(line_of(pyxis, sizeof(pyxis), 1, ARGV("train")).time);
	/* an option no table knows: its value, a word, is skipped where the command is known,
	 * and ends the options where srun's getopt must find it (an early end: nothing made up) */
	assert_string_equal(line_of(theirs, sizeof(theirs), 1, ARGV("train")).chdir,
			    "/scratch/j");
	assert_null(line_of(theirs, sizeof(theirs), 1, ARGV("other")).chdir);
	assert_true(line_of(opt_i, sizeof(opt_i), 1, ARGV("train")).time); /* -I's is glued */
	assert_true(line_of(pack, sizeof(pack), 1, ARGV("train")).het_step);
	assert_false(line_of(mp_j, sizeof(mp_j), 2, ARGV("mp.conf", "0 a\n")).multi_prog);
	assert_null(line_of(dashes, sizeof(dashes), 1, ARGV("train")).chdir);
}

/* srun -D: its four spellings, the last given, never the command's own -D */
static void srun_chdir(void **state)
{
	static const char sep[] = "srun\0-N1\0-D\0/scratch/a\0--autobatch\0train\0-D\0x";
	static const char glued[] = "srun\0-D/scratch/b\0train";
	static const char eq[] = "srun\0--chdir=/scratch/c\0--chdir\0/scratch/d\0train";
	static const char none[] = "srun\0-n2\0python\0-D\0y";
	static const char bare[] = "srun\0-D\0train";

	(void)state;
	assert_string_equal(line_of(sep, sizeof(sep), 3, ARGV("train", "-D", "x")).chdir,
			    "/scratch/a");
	assert_string_equal(line_of(glued, sizeof(glued), 1, ARGV("train")).chdir, "/scratch/b");
	assert_string_equal(line_of(glued, sizeof(glued), 1, ARGV("/scratch/b/train")).chdir,
			    "/scratch/b");
	assert_string_equal(line_of(eq, sizeof(eq), 1, ARGV("train")).chdir, "/scratch/d");
	assert_null(line_of(none, sizeof(none), 3, ARGV("python", "-D", "y")).chdir);
	/* its value is the command */
	assert_null(line_of(bare, sizeof(bare), 1, ARGV("train")).chdir);
	/* a command that does not end the line: srun's options end where its getopt ends them,
	 * at the first word that is neither an option nor a value */
	assert_string_equal(line_of(sep, sizeof(sep), 1, ARGV("other")).chdir, "/scratch/a");
	assert_null(line_of(none, sizeof(none), 1, ARGV("other")).chdir);
	assert_null(line_of("srun\0-D", 7, 0, ARGV(NULL)).chdir); /* cut short */
	assert_null(line_of("", 0, 0, ARGV(NULL)).chdir);
	/* --multi-prog among srun's options, never the command's own */
	{
		static const char mp[] = "srun\0-n2\0--multi-prog\0--autobatch\0mp.conf";
		static const char own[] = "srun\0-n2\0prog\0--multi-prog";

		assert_true(line_of(mp, sizeof(mp), 1, ARGV("mp.conf")).multi_prog);
		/* as srun hands it: the file, then its text */
		assert_true(line_of(mp, sizeof(mp), 2, ARGV("mp.conf", "0 a\n1 b\n")).multi_prog);
		/* srun hands on the program it found: the typed word is its tail */
		assert_true(line_of(mp, sizeof(mp), 1, ARGV("/home/u/mp.conf")).multi_prog);
		assert_false(line_of(own, sizeof(own), 2, ARGV("prog", "--multi-prog")).multi_prog);
		assert_false(line_of("", 0, 0, ARGV(NULL)).multi_prog);
		/* a block cut short (srun's options past the buffer): its last word has no end,
		 * and is not read past (ASan) */
		assert_false(line_of("srun\0x", 6, 1, ARGV("x")).multi_prog);
		assert_false(line_of(mp, sizeof(mp) - 1, 1, ARGV("mp.conf")).multi_prog);
	}
}

/* A path as the step's tasks see it: in srun -D's directory when relative. */
static void step_paths(void **state)
{
	char buf[16];

	(void)state;
	assert_int_equal(ab_step_path("/d", "a.yaml", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/d/a.yaml");
	assert_int_equal(ab_step_path("/d", "/abs.yaml", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/abs.yaml");
	assert_int_equal(ab_step_path(NULL, "a.yaml", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "a.yaml");
	assert_int_equal(ab_step_path("", "a.yaml", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "a.yaml");
	assert_int_equal(ab_step_path("/a/long/dir", "a.yaml", buf, sizeof(buf)), -ENAMETOOLONG);
}

/* pyxis' container, by each route it reaches a step: srun's options, sbatch's or salloc's
 * handed on, its own variables; an empty value or another plugin's option is none */
static void container_steps(void **state)
{
	char *srun_opt[] = {"PATH=/bin",
			    "_SLURM_SPANK_OPTION_pyxis_container_image=nvcr.io#nvidia/pytorch:24.01-py3",
			    NULL};
	char *sbatch_opt[] = {"SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_name=train", NULL};
	char *pyxis_env[] = {"PYXIS_CONTAINER_IMAGE=/img.sqsh", NULL};
	char *none[] = {"_SLURM_SPANK_OPTION_pyxis_container_mounts=/a:/b",
			"_SLURM_SPANK_OPTION_pyxis_container_image=",
			"_SLURM_SPANK_OPTION_other_container_image=x", "XPYXIS_CONTAINER_IMAGE=y", NULL};

	(void)state;
	assert_string_equal(ab_env_container(srun_opt), "nvcr.io#nvidia/pytorch:24.01-py3");
	assert_string_equal(ab_env_container(sbatch_opt), "train");
	assert_string_equal(ab_env_container(pyxis_env), "/img.sqsh");
	assert_null(ab_env_container(none));
}

/* What the probe step leaves out and carries (issue 42): srun's options and pyxis' own
 * variables, carried; sbatch's, left (srun read them as its own); anything else, kept; the
 * carried image read back where the probe runs. */
static void container_carried(void **state)
{
	bool carry = true;

	(void)state;
	assert_true(ab_env_pyxis("_SLURM_SPANK_OPTION_pyxis_container_mounts=/a:/b", &carry));
	assert_true(carry);
	assert_true(ab_env_pyxis("PYXIS_CONTAINER_IMAGE=/img.sqsh", &carry));
	assert_true(carry);
	assert_true(ab_env_pyxis("SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image=x", &carry));
	assert_false(carry);
	assert_false(ab_env_pyxis("_SLURM_SPANK_OPTION_autobatch_autobatch=0.8", &carry));
	assert_false(ab_env_pyxis("XPYXIS_CONTAINER_IMAGE=y", &carry));
	assert_null(ab_env_carried_container());
	setenv("AUTOBATCH_CARRIED__SLURM_SPANK_OPTION_pyxis_container_image", "/img.sqsh", 1);
	assert_string_equal(ab_env_carried_container(), "/img.sqsh");
	unsetenv("AUTOBATCH_CARRIED__SLURM_SPANK_OPTION_pyxis_container_image");
	assert_null(ab_env_carried_container());
}

/* the probe's device as the site's probe_args name it: a GPU unless host or sim: */
static void probe_args_device(void **state)
{
	(void)state;
	assert_true(ab_probe_args_gpu(""));
	assert_true(ab_probe_args_gpu(NULL));
	assert_true(ab_probe_args_gpu("--device cuda:1"));
	assert_false(ab_probe_args_gpu("--device host"));
	assert_false(ab_probe_args_gpu("--hook-dir /x  --device\thost:capacity=2GiB"));
	assert_false(ab_probe_args_gpu("--device=sim:total=1GiB"));
	/* "host" elsewhere is no device: a path, another option's value */
	assert_true(ab_probe_args_gpu("--hook-dir /srv/hostfs/autobatch"));
	assert_true(ab_probe_args_gpu("--hook-dir /opt/sim:1"));
	assert_true(ab_probe_args_gpu("--device hostile"));
	/* the last --device counts, as for the probe's getopt */
	assert_true(ab_probe_args_gpu("--device host --device cuda:0"));
	assert_true(ab_probe_args_sim("--device=sim:total=80GiB"));
	assert_true(ab_probe_args_sim("--trial-seconds 1 --device sim:total=1GiB,base=1MiB"));
	assert_false(ab_probe_args_sim("--device sim:total=1GiB --device host"));
	assert_false(ab_probe_args_sim("--hook-dir /opt/sim:1"));
	assert_false(ab_probe_args_sim(""));
	assert_false(ab_probe_args_sim("--device simulated"));
	assert_false(ab_probe_args_gpu("--device cuda:0 --device=host"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(numbers), cmocka_unit_test(config_numbers),
		cmocka_unit_test(fraction_accepts),
		cmocka_unit_test(fraction_refuses),
		cmocka_unit_test(site_defaults),
		cmocka_unit_test(site_every_key),
		cmocka_unit_test(site_quoted_probe_args),
		cmocka_unit_test(site_refusals),
		cmocka_unit_test(site_conflicts),
		cmocka_unit_test(site_long_values),
		cmocka_unit_test(request_options),
		cmocka_unit_test(request_refusals),
		cmocka_unit_test(request_long_config),
		cmocka_unit_test(request_env),
		cmocka_unit_test(request_check),
		cmocka_unit_test(policy),
		cmocka_unit_test(describe),
		cmocka_unit_test(trial_shapes),
		cmocka_unit_test(effective_in_every_context),
		cmocka_unit_test(het_steps), cmocka_unit_test(srun_time), cmocka_unit_test(accelerate_config),
		cmocka_unit_test(srun_chdir), cmocka_unit_test(srun_getopt), cmocka_unit_test(step_paths),
		cmocka_unit_test(container_steps),
		cmocka_unit_test(container_carried),
		cmocka_unit_test(probe_args_device),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
