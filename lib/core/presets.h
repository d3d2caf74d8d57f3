/* presets.h - the table of training frameworks and where each keeps its batch keys and
 * model dimensions; detecting which one a config file follows, and which launcher a command is.
 */
#ifndef AUTOBATCH_PRESETS_H
#define AUTOBATCH_PRESETS_H

#include <stdbool.h>
#include <stddef.h>

#include "config_edit.h"

/* What a preset can name; NULL where the framework has no such key. */
enum ab_role {
	AB_ROLE_MICRO_BATCH,
	AB_ROLE_GRAD_ACCUM,
	AB_ROLE_GLOBAL_BATCH,
	AB_ROLE_EVAL_BATCH,
	AB_ROLE_HIDDEN,
	AB_ROLE_LAYERS,
	AB_ROLE_HEADS,
	AB_ROLE_FFN,
	AB_ROLE_SEQ_LEN,
	AB_ROLE_VOCAB,
	AB_ROLE_DTYPE,
	/* model-parallel sizes: the step's tasks over their product are its data-parallel
	 * replicas, which a global batch is divided among */
	AB_ROLE_TENSOR_PAR,
	AB_ROLE_PIPELINE_PAR,
	AB_ROLE_CONTEXT_PAR,
	/* a batch ramp-up: per device (MaxText: a switch, the start, the step), or of the global
	 * batch (Megatron, NeMo: [start, step, samples]) */
	AB_ROLE_RAMP_SWITCH,
	AB_ROLE_RAMP_START,
	AB_ROLE_RAMP_STEP,
	AB_ROLE_GLOBAL_RAMP_START,
	AB_ROLE_GLOBAL_RAMP_STEP,
	/* the longest sequence the run trains on (truncation, or padding to it): a cap on what
	 * dynamic padding can reach, said where the step hook cannot read the dataset */
	AB_ROLE_MAX_LENGTH,
	/* evaluation inside training every N steps: a trial evaluates after its last step, so
	 * that the peak holds the eval loop beside the optimizer's state */
	AB_ROLE_EVAL_EVERY,
	/* saving every N steps, a multiple of EVAL_EVERY where the best model is kept: a trial
	 * that evaluates at its last step saves past its end (Hugging Face refuses otherwise) */
	AB_ROLE_SAVE_EVERY,
	/* the program's own per-step metrics file (MaxText's metrics_file): a trial's copy names
	 * the trial's report there, whose lines are then the trial's step evidence with no hook;
	 * and the switch of its checkpoint saving, false in a trial's copy */
	AB_ROLE_METRICS_FILE,
	AB_ROLE_CHECKPOINTING,
	/* the run's length in optimizer steps: a trial whose held memory grows between its steps
	 * is judged by its peak at the run's last step */
	AB_ROLE_RUN_STEPS,
	AB_ROLE_COUNT
};

struct ab_preset {
	const char *name;
	const char *frameworks; /* who writes configs this way */
	const char *keys[AB_ROLE_COUNT];
	/* Keys whose values do not move memory (learning rates, seeds, logging, output paths,
	 * epochs and step counts, schedules): jobs that differ only there warm-start from each
	 * other's decision. NULL-terminated; a key not listed is never taken as neutral. */
	const char *const *neutral;
	/* the micro-batch is per device whatever runs them: one process may drive all of a
	 * node's GPUs (MaxText on JAX), so a global batch is divided among the step's GPUs */
	bool per_device;
};

extern const struct ab_preset ab_presets[];
extern const size_t ab_npresets;

const char *ab_role_name(enum ab_role role);
const struct ab_preset *ab_preset_find(const char *name);
/* ab_preset_find, with the message that says where the names are listed when it fails. */
int ab_preset_lookup(const char *name, const struct ab_preset **out, char *err, size_t errlen);

/* The preset whose batch keys the file has. Several matching equally well is an error that
 * lists them (pick one with --preset); none matching is an error naming what was looked for. */
int ab_preset_detect(const struct ab_config *cfg, int document, const struct ab_preset **out,
		     char *err, size_t errlen);

/* With the user's own batch key: the preset detected as ab_preset_detect does, where its
 * train or eval batch key is key, or of several matching equally well the one whose is (a
 * file with both per_device_train_batch_size and batch_size); -ENOENT otherwise. */
int ab_preset_detect_key(const struct ab_config *cfg, int document, const char *key,
			 const struct ab_preset **out);

/* The preset whose model dimension keys (hidden, layers, heads, ffn, seq, vocab) the file
 * has most of, at least three: a Hugging Face config.json has no batch keys at all. */
int ab_preset_detect_model(const struct ab_config *cfg, int document,
			   const struct ab_preset **out, char *err, size_t errlen);

/* The framework launcher the command is, which starts one worker per GPU itself (torchrun,
 * python -m torch.distributed.run or .launch, accelerate launch, deepspeed), or NULL. */
const char *ab_launcher_name(int argc, char *const argv[]);

/* The workers the launcher command starts, as its arguments say: N for each launcher
 * (torchrun's and torch.distributed's --nproc_per_node, deepspeed's --num_gpus) or for all
 * of them (accelerate launch's --num_processes: *world true); 0 for one per GPU (gpu or auto,
 * deepspeed by default); torch's default of 1; -1 when the command is no launcher or its
 * arguments do not say (accelerate's config file). */
long ab_launcher_workers(int argc, char *const argv[], bool *world);

/* The value of a launcher's own option (before its program: "--name=V" or "--name V", or
 * its spelling dashed, which may be NULL), or NULL. */
const char *ab_launcher_option(int argc, char *const argv[], const char *option,
			       const char *dashed);

/* The workers accelerate launch starts where its arguments do not say (launcher_config.c):
 * its config file's num_processes, for all its nodes (*world true), from --config_file or
 * accelerate's default ($HF_HOME, $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface, then
 * accelerate/default_config.yaml); 0 without a default file (one per GPU, as accelerate
 * counts them); -1 for another command, an unreadable file or no such number (-1 there). A
 * relative --config_file is in dir (srun -D's directory; NULL: here). */
long ab_launcher_config_workers(int argc, char *const argv[], const char *dir, bool *world);

#endif
