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

