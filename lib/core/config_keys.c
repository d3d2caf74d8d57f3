/* config_keys.c - which keys of a job's config hold what (see config_keys.h). */
#include "config_keys.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static bool has_number(const struct ab_config *cfg, const char *key, long *value)
{
	char text[64];

	if (!key || ab_config_get(cfg, key, -1, text, sizeof(text), NULL, 0) < 0)
		return false;
	if (value)
		*value = ab_is_number(text, strlen(text)) && fabs(strtod(text, NULL)) < 2e9
				 ? (long)strtod(text, NULL)
				 : 0;
	return true;
}

/* The preset's model-parallel sizes in the file: each a whole number from 1 to 65536. */
static int model_parallel(const struct ab_config *cfg, const struct ab_preset *p,
			  struct ab_keys *k, char *err, size_t errlen)
{
	static const char *const names[] = {"tensor", "pipeline", "context"};
	size_t len = 0;

	k->model_parallel = 1;
	for (int r = AB_ROLE_TENSOR_PAR; p && r <= AB_ROLE_CONTEXT_PAR; r++) {
		long v = 0;

		if (!has_number(cfg, p->keys[r], &v))
			continue;
		if (v < 1 || v > 65536)
			return ab_fail(err, errlen, EINVAL, "%s is not a parallel size (a whole number "
							    "from 1): fix it in the config",
				       p->keys[r]);
		k->model_parallel *= v;
		if (v > 1)
			ab_append(k->parallel_text, sizeof(k->parallel_text), &len, "%s%s %ld",
				  len ? " x " : "", names[r - AB_ROLE_TENSOR_PAR], v);
	}
	return 0;
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
	if (!p && key_override && *key_override)
		ab_preset_detect(cfg, -1, &p, NULL, 0); /* for the other keys, if it is clear */
	k->micro = key_override && *key_override ? key_override : p->keys[AB_ROLE_MICRO_BATCH];
	k->preset = p;
	if ((rc = ab_config_find(cfg, k->micro, -1, &n, err, errlen)) < 0)
		return rc;
	if (p) {
		if (p->keys[AB_ROLE_GRAD_ACCUM] &&
		    ab_config_find(cfg, p->keys[AB_ROLE_GRAD_ACCUM], -1, &n, NULL, 0) == 0)
			k->accum = p->keys[AB_ROLE_GRAD_ACCUM];
		if (has_number(cfg, p->keys[AB_ROLE_GLOBAL_BATCH], &k->file_global))
			k->global = p->keys[AB_ROLE_GLOBAL_BATCH];
		if (has_number(cfg, p->keys[AB_ROLE_EVAL_BATCH], NULL))
			k->eval = p->keys[AB_ROLE_EVAL_BATCH];
	}
	return model_parallel(cfg, p, k, err, errlen);
}

unsigned ab_keys_data_parallel(const struct ab_keys *k, unsigned ntasks, const char *config,
			       char *err, size_t errlen)
{
	long mp = k->model_parallel > 1 ? k->model_parallel : 1;

	if (ntasks % (unsigned long)mp == 0)
		return ntasks / (unsigned)mp;
	ab_fail(err, errlen, EINVAL, "the step's %u tasks are not a whole number of model-parallel "
				     "groups of %ld (%s in %s): give srun a multiple of %ld tasks",
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

