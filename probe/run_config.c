/* run_config.c - the config side of a run: which key holds the batch (--key, the named
 * preset, or the preset detected from the file) and the batch the file already says.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "run.h"
#include "config_edit.h"
#include "number.h"
#include "presets.h"
#include "search.h"

void start_from_value(const char *value, long *start)
{
	long v;

	if (!*start && ab_parse_config_whole(value, AB_WHOLE_DECIMAL, 1, AB_BATCH_MAX, &v) == 0)
		*start = v;
}

/* key's value (0), -ENOENT without it, or the lookup's own refusal (twice, in two documents,
 * a list): a key the run reads is never taken as absent. A key a trial's copy edits (the
 * ramp's switch) is found as an edit finds it; one only read, as a YAML reader does
 * (aliases and merges followed). */
static int value_at(const struct run_opts *o, const struct ab_config *cfg, const char *key,
		    bool edited, const char **text, char *err, size_t errlen)
{
	const struct ab_node *n;
	int rc = edited ? ab_config_lookup(cfg, key, o->document, &n, err, errlen)
			: ab_config_read(cfg, key, o->document, &n, err, errlen);

	*text = rc == 0 ? n->value : "";
	return rc;
}

/* key's whole number as the framework reads it (ab_parse_config_whole; 0), -ENOENT without
 * it or where it is null, -ENODATA with *text where it is a word the framework resolves
 * itself (${...}, ???, auto), -EDOM with *text where it is a number written wrong, or the
 * lookup's own refusal (twice, in two documents, a list: -EISDIR). */
static int config_whole(const struct run_opts *o, const struct ab_config *cfg, const char *key,
			unsigned flags, long *v, const char **text, char *err, size_t errlen)
{
	int rc = value_at(o, cfg, key, false, text, err, errlen);

	if (rc < 0)
		return rc;
	if (ab_config_null(*text))
		return -ENOENT;
	if (ab_config_word(*text))
		return -ENODATA;
	return ab_parse_config_whole(*text, flags, LONG_MIN, LONG_MAX, v) < 0 ? -EDOM : 0;
}

/* The accumulation key: --accum-key, else the preset's where the file has it; and the value
 * the file gives it (a trial runs with 1 there, so it is found as an edit finds it): a whole
 * number from 1, a word the framework fills in (none known), or an error naming it (2.5 is
 * no count of micro-batches). */
static int accum_key(struct run_opts *o, const struct ab_config *cfg, const struct ab_preset *p,
		     char *err, size_t errlen)
{
	const struct ab_node *n;
	char shown[80];
	long v = 0;
	int rc;

	if (!o->accum_key && p && p->keys[AB_ROLE_GRAD_ACCUM]) {
		rc = ab_config_lookup(cfg, p->keys[AB_ROLE_GRAD_ACCUM], o->document, &n, err, errlen);
		if (rc < 0)
			return rc == -ENOENT ? 0 : rc;
		o->accum_key = p->keys[AB_ROLE_GRAD_ACCUM];
	}
	if (!o->accum_key)
		return 0;
	if ((rc = ab_config_find(cfg, o->accum_key, o->document, &n, err, errlen)) < 0)
		return rc;
	if (ab_config_null(n->value) || ab_config_word(n->value))
		return 0;
	if (ab_parse_config_whole(n->value, AB_WHOLE_DECIMAL, 1, AB_BATCH_MAX, &v) < 0)
		return ab_fail(err, errlen, EINVAL, "%s: %s is '%s', not a whole number of "
						    "micro-batches from 1: fix it in the config",
			       o->config, o->accum_key, ab_printable(n->value, shown, sizeof(shown)));
	o->config_accum = v;
	return 0;
}

/* A global batch stated beside the accumulation key (DeepSpeed): a framework that checks
 * global = micro-batch x accumulation x world would refuse a trial's copy holding the
 * candidate at the micro-batch and 1 at the accumulation; null there, it derives it. */
static void global_key(struct run_opts *o, const struct ab_config *cfg, const struct ab_preset *p)
{
	const struct ab_node *n;
	const char *key = p ? p->keys[AB_ROLE_GLOBAL_BATCH] : NULL;

	if (key && p->keys[AB_ROLE_GRAD_ACCUM] &&
	    ab_config_lookup(cfg, key, o->document, &n, NULL, 0) == 0 && !ab_config_null(n->value))
		o->global_key = key;
}

/* A whole number in [1, 2^31) at key, found as an edit finds it (the copy moves it), or 0:
 * a value the run needs only where it is one. */
static long whole(const struct run_opts *o, const struct ab_config *cfg, const char *key)
{
	const struct ab_node *n;
	long v;

	if (ab_config_lookup(cfg, key, o->document, &n, NULL, 0) < 0 ||
	    ab_parse_config_whole(n->value, 0, 1, INT_MAX, &v) < 0)
		return 0;
	return v;
}

/* The longest input the config allows (a preset's max_length, sequence_len): 0 where it
 * says none, or an error naming the key where it is no whole number of tokens. */
static int length_cap(struct run_opts *o, const struct ab_config *cfg, const struct ab_preset *p,
		      char *err, size_t errlen)
{
	const char *key = p ? p->keys[AB_ROLE_MAX_LENGTH] : NULL, *text;
	char shown[80];
	long v;
	int rc = config_whole(o, cfg, key, AB_WHOLE_DECIMAL, &v, &text, err, errlen);

	if (rc == -ENOENT || rc == -ENODATA) /* none known: the trials say what they saw */
		return 0;
	if (rc == -EDOM || (rc == 0 && (v < 1 || v > INT_MAX)))
		return ab_fail(err, errlen, EINVAL, "%s: %s is '%s', not a whole number of tokens "
						    "from 1: fix it in the config",
			       o->config, key, ab_printable(text, shown, sizeof(shown)));
	if (rc < 0)
		return rc;
	o->length_cap = v;
	o->length_cap_key = key;
	return 0;
}

#define RUN_STEPS_FIX "give the run's length with --autobatch-run-steps=N or off (--run-steps)"

/* The run's length where the config says it, for a train phase's probe (an eval batch's is
 * not sized for it) unless --run-steps said it or off: none where it is null or below 1
 * (Hugging Face's max_steps of -1: epochs); said where the framework resolves it itself (an
 * interpolation); an error naming the key and the way round it where it is no whole number
 * of steps autobatch sizes for. */
static int run_length(struct run_opts *o, const struct ab_config *cfg, const struct ab_preset *p,
		      char *err, size_t errlen)
{
	const char *key = p ? p->keys[AB_ROLE_RUN_STEPS] : NULL, *text;
	char shown[80];
	long v;
	int rc;

	if (o->run_steps || strcmp(o->phase, "train"))
		return 0;
	rc = config_whole(o, cfg, key, AB_WHOLE_DECIMAL, &v, &text, err, errlen);
	if (rc == -ENOENT)
		return 0;
	if (rc == -ENODATA) {
		fprintf(stderr, "autobatch: %s: %s is '%s', which the program resolves itself: "
				"autobatch does not know the run's length; %s\n",
			o->config, key, ab_printable(text, shown, sizeof(shown)), RUN_STEPS_FIX);
		return 0;
	}
	if (rc == -EISDIR)
		return ab_fail(err, errlen, EINVAL, "%s: %s is not a single number of steps: fix "
						    "it, or %s",
			       o->config, key, RUN_STEPS_FIX);
	if (rc == -EDOM || (rc == 0 && v > AB_RUN_STEPS_MAX))
		return ab_fail(err, errlen, EINVAL, "%s: %s is '%s', not a whole number of steps "
						    "up to %ld: fix it, or %s",
			       o->config, key, ab_printable(text, shown, sizeof(shown)),
			       AB_RUN_STEPS_MAX, RUN_STEPS_FIX);
	if (rc < 0)
		return rc;
	if (v >= 1) {
		o->run_steps = v;
		o->run_steps_key = key;
	}
	return 0;
}

/* Evaluation inside training every N steps: a whole number of steps only (Lightning's
 * val_check_interval of 0.25 or 1.0 is a share of the epoch, which no trial reaches), and
 * not where Hugging Face's strategy says another schedule ("no", "epoch"). */
static void eval_every(struct run_opts *o, const struct ab_config *cfg, const struct ab_preset *p)
{
	static const char *const strategies[] = {"eval_strategy", "evaluation_strategy"};
	const char *key = p ? p->keys[AB_ROLE_EVAL_EVERY] : NULL;
	char value[64];

	for (size_t i = 0; key && i < 2; i++)
		if (ab_config_get(cfg, strategies[i], o->document, value, sizeof(value), NULL,
				  0) == 0 &&
		    strcmp(value, "steps") != 0)
			return;
	if (key && ab_config_get(cfg, key, o->document, value, sizeof(value), NULL, 0) == 0 &&
	    ab_parse_config_whole(value, 0, 1, INT_MAX, &o->eval_every) == 0)
		o->eval_key = key;
	/* a whole number of steps between saves, which the copy moves past the trial's end: a
	 * ratio (0.1) is the user's own mix with a step count, refused by the framework alike */
	if (o->eval_key && whole(o, cfg, p->keys[AB_ROLE_SAVE_EVERY]))
		o->save_key = p->keys[AB_ROLE_SAVE_EVERY];
}

/* The program's own per-step metrics (MaxText's metrics_file), where the config has the key:
 * the trials' steps without a hook (a JAX program takes no PyTorch optimizer step). Its
 * checkpoint switch beside it, where the config has that. */
static void own_metrics(struct run_opts *o, const struct ab_config *cfg, const struct ab_preset *p)
{
	if (!p || !p->keys[AB_ROLE_METRICS_FILE] || (o->mode && !strcmp(o->mode, "model")))
		return; /* model mode runs no program of the user's */
	if (!ab_config_has(cfg, p->keys[AB_ROLE_METRICS_FILE], o->document)) {
		fprintf(stderr, "autobatch: %s has no %s: %s's trials are seen only through the "
				"step hook, which counts PyTorch's optimizer steps; add %s: \"\" "
				"for its own per-step lines\n",
			o->config, p->keys[AB_ROLE_METRICS_FILE], p->frameworks,
			p->keys[AB_ROLE_METRICS_FILE]);
		return;
	}
	o->metrics_key = p->keys[AB_ROLE_METRICS_FILE];
	if (p->keys[AB_ROLE_CHECKPOINTING] &&
	    ab_config_has(cfg, p->keys[AB_ROLE_CHECKPOINTING], o->document))
		o->checkpoint_key = p->keys[AB_ROLE_CHECKPOINTING];
}

/* A ramp's start or step: a whole number from 1, or an error naming the key. */
static int ramp_whole(const struct run_opts *o, const struct ab_config *cfg, const char *key,
		      long *v, char *err, size_t errlen)
{
	const char *text;
	char shown[80];
	int rc = value_at(o, cfg, key, true, &text, err, errlen);

	if (rc == -ENOENT)
		return ab_fail(err, errlen, EINVAL, "%s: a batch ramp-up is on, but it has no %s: "
						    "add it, or turn the ramp-up off",
			       o->config, key);
	if (rc < 0)
		return rc;
	if (ab_parse_config_whole(text, AB_WHOLE_DECIMAL, 1, INT_MAX, v) < 0)
		return ab_fail(err, errlen, EINVAL, "%s: a batch ramp-up is on, but %s is '%s', not a "
						    "whole number from 1",
			       o->config, key, ab_printable(text, shown, sizeof(shown)));
	return 0;
}

/* Whether MaxText's switch turns its ramp on: YAML's true and false as PyYAML reads them
 * (yes, on, TRUE...) and 1 and 0, as its config's bool accepts them; anything else is an
 * error naming the key. */
static int ramp_switch(const struct run_opts *o, const struct ab_config *cfg, const char *key,
		       bool *on, char *err, size_t errlen)
{
	const char *text;
	char shown[80];
	int rc = value_at(o, cfg, key, true, &text, err, errlen), b;

	*on = false;
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	if ((b = ab_config_bool(text)) < 0)
		return ab_fail(err, errlen, EINVAL, "%s: %s is '%s', not true or false: fix it in "
						    "the config",
			       o->config, key, ab_printable(text, shown, sizeof(shown)));
	*on = b;
	return 0;
}

/* Megatron/NeMo's [start, increment, samples] (null: none): 1 when the file has such a
 * ramp, 0 when none, or an error naming it where it is neither. */
static int global_ramp(const struct run_opts *o, const struct ab_config *cfg, const char *first,
		       char *err, size_t errlen)
{
	char list[128], shown[80], key[160];
	const char *text;
	size_t n = strlen(first) > 3 ? strlen(first) - 3 : 0; /* less its "[0]" */
	long samples;
	bool three;
	int rc;

	snprintf(list, sizeof(list), "%.*s", (int)n, first);
	if ((rc = value_at(o, cfg, list, true, &text, err, errlen)) == -ENOENT)
		return 0;
	if (rc < 0 && rc != -EISDIR) /* twice, in two documents, an alias: the lookup says */
		return rc;
	if (rc == 0) /* a single value: null turns it off */
		return ab_config_null(text)
			       ? 0
			       : ab_fail(err, errlen, EINVAL, "%s: %s is '%s', not a list [start, "
							      "increment, samples] or null",
					 o->config, list, ab_printable(text, shown, sizeof(shown)));
	snprintf(key, sizeof(key), "%s[2]", list);
	three = value_at(o, cfg, key, true, &text, NULL, 0) == 0 &&
		ab_parse_config_whole(text, AB_WHOLE_DECIMAL, 0, LONG_MAX, &samples) == 0;
	snprintf(key, sizeof(key), "%s[3]", list);
	if (!three || ab_config_has(cfg, key, o->document))
		return ab_fail(err, errlen, EINVAL, "%s: %s is not a list of three whole numbers "
						    "[start, increment, samples], as Megatron needs",
			       o->config, list);
	return 1;
}

/* The preset's batch ramp-up, where the file turns one on: MaxText's per-device ramp (its
 * switch true, a start and a step), or a Megatron/NeMo global ramp ([start, step, samples]).
 * A ramp that is on but not whole numbers is an error naming the keys; so is a global one
 * whose stages never reach the global batch (Megatron refuses it at start). */
static int ramp_up(struct run_opts *o, const struct ab_config *cfg, const struct ab_preset *p,
		   char *err, size_t errlen)
{
	int r = AB_ROLE_GLOBAL_RAMP_START, rc;
	bool on = false;

	if (!p)
		return 0;
	if (p->keys[AB_ROLE_RAMP_SWITCH] &&
	    (rc = ramp_switch(o, cfg, p->keys[AB_ROLE_RAMP_SWITCH], &on, err, errlen)) < 0)
		return rc;
	if (on) {
		r = AB_ROLE_RAMP_START;
		o->ramp_key = p->keys[AB_ROLE_RAMP_SWITCH];
	} else if (!p->keys[AB_ROLE_GLOBAL_RAMP_START] ||
		   (rc = global_ramp(o, cfg, p->keys[AB_ROLE_GLOBAL_RAMP_START], err, errlen)) == 0) {
		return 0;
	} else if (rc < 0) {
		return rc;
	}
	if ((rc = ramp_whole(o, cfg, p->keys[r], &o->ramp_start, err, errlen)) < 0 ||
	    (rc = ramp_whole(o, cfg, p->keys[r + 1], &o->ramp_step, err, errlen)) < 0)
		return rc;
	o->ramp_global = r == AB_ROLE_GLOBAL_RAMP_START;
	if (o->ramp_global && o->global_batch && o->ramp_start > o->global_batch)
		return ab_fail(err, errlen, EINVAL, "%s: the batch ramp-up (%.*s) starts at %ld, "
						    "above the global batch %ld, and Megatron refuses "
						    "it: start it below %ld, by a multiple of its "
						    "increment %ld",
			       o->config, (int)strlen(p->keys[r]) - 3, p->keys[r], o->ramp_start,
			       o->global_batch, o->global_batch, o->ramp_step);
	if (o->ramp_global && o->global_batch && o->ramp_start == o->global_batch)
		return ab_fail(err, errlen, EINVAL, "%s: the batch ramp-up (%.*s) starts at the "
						    "global batch %ld: it has no stage to ramp, and "
						    "Megatron divides its samples by their count, 0: "
						    "start it lower, or set it to null",
			       o->config, (int)strlen(p->keys[r]) - 3, p->keys[r], o->global_batch);
	if (o->ramp_global && o->global_batch && (o->global_batch - o->ramp_start) % o->ramp_step)
		return ab_fail(err, errlen, EINVAL, "%s: the batch ramp-up from %ld by %ld (%.*s) "
						    "never reaches the global batch %ld, and Megatron "
						    "refuses it: make %ld less its start a multiple "
						    "of %ld",
			       o->config, o->ramp_start, o->ramp_step,
			       (int)strlen(p->keys[r]) - 3, p->keys[r], o->global_batch,
			       o->global_batch, o->ramp_step);
	if (o->ramp_global && !o->global_batch) { /* its stages are global batches */
		fprintf(stderr, "autobatch: the config's global batch ramp-up (%s) is kept only with "
				"--global-batch G --devices N\n",
			p->keys[r]);
		o->ramp_start = o->ramp_step = 0;
	}
	return 0;
}

/* With --key (the plugin always names it): the preset --preset names (its other keys, as
 * the plugin takes them, whatever the batch key), else the one detected whose batch key is
 * that key (ab_preset_detect_key), else none. Its other keys (accumulation, ramp-up,
 * lengths, evaluation) then mean what they mean for that framework. */
static int preset_of_key(const struct run_opts *o, const struct ab_config *cfg,
			 const struct ab_preset **p, char *err, size_t errlen)
{
	*p = NULL;
	if (o->preset)
		return ab_preset_lookup(o->preset, p, err, errlen);
	ab_preset_detect_key(cfg, o->document, o->key, p);
	return 0;
}

int run_config_key(struct run_opts *o, long *start, char *err, size_t errlen)
{
	const struct ab_preset *p = NULL;
	struct ab_config *cfg;
	char value[64];
	int rc;

	if (!o->config)
		return 0;
	if ((rc = ab_config_load(o->config, AB_FORMAT_AUTO, &cfg, err, errlen)) < 0)
		return rc;
	if (!o->key) {
		if (o->preset)
			rc = ab_preset_lookup(o->preset, &p, err, errlen);
		else
			rc = ab_preset_detect(cfg, o->document, &p, err, errlen);
		if (rc == 0) {
			o->key = p->keys[strcmp(o->phase, "eval") ? AB_ROLE_MICRO_BATCH
								  : AB_ROLE_EVAL_BATCH];
			if (!o->key)
				rc = ab_fail(err, errlen, EINVAL, "preset %s has no eval batch key: "
								  "name it with --key KEY",
					     p->name);
		}
	} else {
		rc = preset_of_key(o, cfg, &p, err, errlen);
	}
	if (rc == 0)
		rc = ab_config_get(cfg, o->key, o->document, value, sizeof(value), err, errlen);
	if (rc == 0)
		start_from_value(value, start);
	if (rc == 0)
		rc = accum_key(o, cfg, p, err, errlen);
	if (rc == 0)
		global_key(o, cfg, p);
	if (rc == 0)
		rc = ramp_up(o, cfg, p, err, errlen);
	if (rc == 0)
		rc = length_cap(o, cfg, p, err, errlen);
	if (rc == 0) /* a train phase's alone (cmd_run.c) */
		rc = run_length(o, cfg, p, err, errlen);
	if (rc == 0) {
		eval_every(o, cfg, p);
		own_metrics(o, cfg, p);
	}
	ab_config_free(cfg);
	return rc;
}
