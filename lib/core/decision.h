/* decision.h - what the plugin does with the probe's answer: read its JSON report (bytes
 * from another process: validated, bounded), and plan the config edits it implies.
 */
#ifndef AUTOBATCH_DECISION_H
#define AUTOBATCH_DECISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config_edit.h"
#include "presets.h"

struct ab_result {
	bool ok;
	bool interrupted;      /* the probe was stopped by a signal (Ctrl-C, a cancel) */
	char error[512];       /* the probe's sentence when not ok */
	long batch, grad_accum, global_batch;
	double fraction;
	int confidence;
	size_t trials;
	double elapsed_s;
	char device[128];
	uint64_t total_bytes;
	long eval_batch;       /* from a cached entry that also holds the eval decision */
};

/* The report with the eval batch added (when > 0) and "cache" set (when not NULL: "hit" for
 * a report served from the cache), as the cache keeps it (malloc'ed, or NULL). */
char *ab_result_with_eval(const char *json, long eval_batch, const char *cache);

/* Parses the probe's --json output. -EPROTO with a message when it is not a report. */
int ab_result_parse(const char *json, size_t len, struct ab_result *out, char *err,
		    size_t errlen);

/* Which keys of the config hold what: the micro-batch key always; the accumulation and
 * global keys when the preset names them and the file has them. */
struct ab_keys {
	const char *micro, *accum, *global, *eval;
	long file_global; /* the global batch the file already states (0: none) */
};

/* Finds the keys: key_override (--autobatch-key) or the preset (named or detected). */
int ab_keys_find(const struct ab_config *cfg, const char *preset_name,
		 const char *key_override, struct ab_keys *keys, char *err, size_t errlen);

/* The edits for a decision: micro-batch, and with a global batch the accumulation and the
 * global batch; values written into the caller's buffers. Returns the number of edits. */
size_t ab_plan_edits(const struct ab_keys *keys, const struct ab_result *r, long eval_batch,
		     struct ab_edit edits[4], char values[4][32]);

#endif
