/* config_keys.c - which keys of a job's config hold what (see config_keys.h). */
#include "config_keys.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "input_limits.h"
#include "number.h"

/* A key's value, whatever its length (0), or -ENOENT when the file has no such key (or the
 * preset names none), or the lookup's own refusal (ab_config_lookup). */
static int value_of(const struct ab_config *cfg, const char *key, const char **text, char *err,
		    size_t errlen)
{
	const struct ab_node *n;
	int rc = ab_config_lookup(cfg, key, -1, &n, err, errlen);

	*text = rc == 0 ? n->value : "";
	return rc;
}

/* A key's whole number from min to max (0), -ENOENT without the key, or an error naming it
 * (2.5 would be cut to 2, -1 passed on as an option the user never gave). */
static int whole_of(const struct ab_config *cfg, const char *key, long min, long max, long *v,
		    char *err, size_t errlen)
{
	const char *text;
	char shown[80];
	int rc;

	if ((rc = value_of(cfg, key, &text, err, errlen)) < 0)
		return rc;
	if (ab_parse_config_whole(text, 0, min, max, v) < 0)
		return ab_fail(err, errlen, EINVAL, "%s is '%s', not a whole number from %ld to %ld: "
						    "fix it in the config",
			       key, ab_printable(text, shown, sizeof(shown)), min, max);
	return 0;
}

/* The preset's model-parallel sizes in the file: each a whole number from 1 to 65536, or 0
 * where 0 means none (DeepSpeed's tensor_parallel.autotp_size, its default: AutoTP off). */
static int model_parallel(const struct ab_config *cfg, const struct ab_preset *p,
			  struct ab_keys *k, char *err, size_t errlen)
{
	static const char *const names[] = {"tensor", "pipeline", "context"};
	size_t len = 0;
	int rc;

	k->model_parallel = 1;
	for (int r = AB_ROLE_TENSOR_PAR; p && r <= AB_ROLE_CONTEXT_PAR; r++) {
		bool off = p->keys[r] && !strcmp(p->keys[r], "tensor_parallel.autotp_size");
		long v = 0;

		if ((rc = whole_of(cfg, p->keys[r], off ? 0 : 1, 65536, &v, err, errlen)) == -ENOENT)
			continue;
		if (rc < 0)
			return rc;
		if (v == 0)
			v = 1;
		k->model_parallel *= v;
		if (v > 1)
			ab_append(k->parallel_text, sizeof(k->parallel_text), &len, "%s%s %ld",
				  len ? " x " : "", names[r - AB_ROLE_TENSOR_PAR], v);
	}
	return 0;
}

/* The global batch the file states: a whole number, kept; a word a framework fills in itself
 * (DeepSpeed's "auto" under Hugging Face, an interpolation ${...}) is none, the key still
 * written with a decision's; a number that is not a global batch is an error. */
static int global_of(const struct ab_config *cfg, const char *key, struct ab_keys *k, char *err,
		     size_t errlen)
{
	const char *text;
	int rc;

	if ((rc = value_of(cfg, key, &text, err, errlen)) == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	k->global = key;
	if (ab_config_word(text) || ab_config_null(text))
		return 0;
	return whole_of(cfg, key, 1, AB_GLOBAL_BATCH_MAX, &k->file_global, err, errlen);
}

int ab_keys_find(const struct ab_config *cfg, const char *preset_name,
		 const char *key_override, struct ab_keys *k, char *err, size_t errlen)
{
	const struct ab_preset *p = NULL;
	const struct ab_node *n;
	int rc;

	memset(k, 0, sizeof(*k));
	if (preset_name && *preset_name &&
	    (rc = ab_preset_lookup(preset_name, &p, err, errlen)) < 0)
		return rc;
	if (!p && !(key_override && *key_override) &&
	    (rc = ab_preset_detect(cfg, -1, &p, err, errlen)) < 0)
		return rc;
	/* for the other keys, where it is clear: the one detected, or of several the one whose
	 * batch key is the user's */
	if (!p && key_override && *key_override && ab_preset_detect(cfg, -1, &p, NULL, 0) < 0 &&
	    ab_preset_detect_key(cfg, -1, key_override, &p) < 0)
		p = NULL;
	k->micro = key_override && *key_override ? key_override : p->keys[AB_ROLE_MICRO_BATCH];
	k->preset = p;
	if ((rc = ab_config_find(cfg, k->micro, -1, &n, err, errlen)) < 0)
		return rc;
	if (p) {
		const char *text;

		if ((rc = value_of(cfg, p->keys[AB_ROLE_GRAD_ACCUM], &text, err, errlen)) == 0)
			k->accum = p->keys[AB_ROLE_GRAD_ACCUM];
		else if (rc != -ENOENT)
			return rc;
		if ((rc = global_of(cfg, p->keys[AB_ROLE_GLOBAL_BATCH], k, err, errlen)) < 0)
			return rc;
		if ((rc = value_of(cfg, p->keys[AB_ROLE_EVAL_BATCH], &text, err, errlen)) == 0)
			k->eval = p->keys[AB_ROLE_EVAL_BATCH];
		else if (rc != -ENOENT)
			return rc;
	}
	return model_parallel(cfg, p, k, err, errlen);
}

/* axolotl derives its accumulation from batch_size (batch_size / micro_batch_size, per
 * device) and refuses a file with gradient_accumulation_steps beside it */
#define AXOLOTL_BATCH "batch_size"

int ab_keys_check_global(const struct ab_keys *k, const struct ab_config *cfg,
			 long global_batch, const char *config, char *err, size_t errlen)
{
	const char *key = k->preset ? k->preset->keys[AB_ROLE_GRAD_ACCUM] : NULL, *leaf;
	char where[AB_KEY_MAX + 32];

	/* without a preset, or one whose framework has no such key, the program reads
	 * $AUTOBATCH_GRAD_ACCUM (or splits the global batch) itself */
	if (!global_batch || k->accum || k->global || !key)
		return 0;
	if (!strcmp(k->preset->name, "axolotl") && ab_config_has(cfg, AXOLOTL_BATCH, -1))
		return ab_fail(err, errlen, EINVAL,
			       "--autobatch-global-batch=%ld: %s sets %s, from which axolotl derives "
			       "its accumulation: replace it with %s, set to 1, where autobatch "
			       "writes the accumulation it derives",
			       global_batch, config, AXOLOTL_BATCH, key);
	/* where it goes: a nested key under its section, in YAML's words or JSON's alike */
	if ((leaf = strrchr(key, '.')))
		snprintf(where, sizeof(where), "%s, set to 1, under %.*s in", leaf + 1,
			 (int)(leaf - key), key);
	else
		snprintf(where, sizeof(where), "%s, set to 1, to", key);
	return ab_fail(err, errlen, EINVAL,
		       "--autobatch-global-batch=%ld: %s has no %s, and the %s preset's framework "
		       "reads the gradient accumulation only from its config: add %s %s, where "
		       "autobatch writes the accumulation it derives",
		       global_batch, config, key, k->preset->name, where, config);
}

unsigned ab_keys_data_parallel(const struct ab_keys *k, unsigned ntasks, const char *launcher,
			       const char *config, char *err, size_t errlen)
{
	long mp = k->model_parallel > 1 ? k->model_parallel : 1;

	if (ntasks % (unsigned long)mp == 0)
		return ntasks / (unsigned)mp;
	if (launcher) /* its workers are the processes, not srun's tasks */
		ab_fail(err, errlen, EINVAL, "the %u workers %s starts are not a whole number of "
					     "model-parallel groups of %ld (%s in %s): have it start "
					     "a multiple of %ld",
			ntasks, launcher, mp, k->parallel_text, config, mp);
	else
		ab_fail(err, errlen, EINVAL, "the step's %u tasks are not a whole number of "
					     "model-parallel groups of %ld (%s in %s): give srun a "
					     "multiple of %ld tasks",
			ntasks, mp, k->parallel_text, config, mp);
	return 0;
}

size_t ab_plan_edits(const struct ab_keys *k, const struct ab_result *r, long eval_batch,
		     struct ab_edit edits[4], char values[4][32])
{
	size_t n = 0;

	snprintf(values[n], sizeof(values[n]), "%ld", r->batch);
	edits[n].key = k->micro;
	edits[n].value = values[n];
	n++;
	if (r->global_batch && k->accum) {
		snprintf(values[n], sizeof(values[n]), "%ld", r->grad_accum);
		edits[n].key = k->accum;
		edits[n].value = values[n];
		n++;
	}
	if (r->global_batch && k->global) {
		snprintf(values[n], sizeof(values[n]), "%ld", r->global_batch);
		edits[n].key = k->global;
		edits[n].value = values[n];
		n++;
	}
	if (eval_batch > 0 && k->eval) {
		snprintf(values[n], sizeof(values[n]), "%ld", eval_batch);
		edits[n].key = k->eval;
		edits[n].value = values[n];
		n++;
	}
	return n;
}

