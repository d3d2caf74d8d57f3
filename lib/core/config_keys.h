/* config_keys.h - which keys of a job's config hold the micro-batch, the accumulation, the
 * global and the eval batch (--autobatch-key, or the preset named or detected), and the
 * edits a decision makes there.
 */
#ifndef AUTOBATCH_CONFIG_KEYS_H
#define AUTOBATCH_CONFIG_KEYS_H

#include <stddef.h>

#include "config_edit.h"
#include "decision.h"
#include "presets.h"

/* Which keys of the config hold what: the micro-batch key always; the accumulation and
 * global keys when the preset names them and the file has them. */
struct ab_keys {
	const char *micro, *accum, *global, *eval;
	long file_global; /* the global batch the file already states (0: none) */
	const struct ab_preset *preset; /* named or detected; NULL with a key alone */
	/* the config's tensor x pipeline x context parallel sizes (1 where it names none), and
	 * how it names them ("tensor 2 x pipeline 2"; "" for none) */
	long model_parallel;
	char parallel_text[96];
};

/* The step's data-parallel replicas: its tasks (or a launcher's workers: launcher names it,
 * else NULL) over the config's model-parallel product; 0 with err when they do not divide
 * (Megatron and NeMo refuse such a step too). */
unsigned ab_keys_data_parallel(const struct ab_keys *k, unsigned ntasks, const char *launcher,
			       const char *config, char *err, size_t errlen);

/* A global batch (--autobatch-global-batch) needs a key to take the accumulation it derives
 * (or the global batch, which the framework divides itself) where the preset's framework
 * reads its accumulation from the file: 0, or -EINVAL naming the key to add. */
int ab_keys_check_global(const struct ab_keys *k, const struct ab_config *cfg,
			 long global_batch, const char *config, char *err, size_t errlen);

/* Finds the keys: key_override (--autobatch-key) or the preset (named or detected). */
int ab_keys_find(const struct ab_config *cfg, const char *preset_name,
		 const char *key_override, struct ab_keys *keys, char *err, size_t errlen);

/* The edits for a decision: micro-batch, and with a global batch the accumulation and the
 * global batch; values written into the caller's buffers. Returns the number of edits. */
size_t ab_plan_edits(const struct ab_keys *keys, const struct ab_result *r, long eval_batch,
		     struct ab_edit edits[4], char values[4][32]);

#endif
