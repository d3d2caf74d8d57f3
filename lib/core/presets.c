/* presets.c - the framework table (data, one row per framework) and detection. */
#include "presets.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

#define K(role, key) [AB_ROLE_##role] = key

const struct ab_preset ab_presets[] = {
	{"deepspeed", "DeepSpeed JSON",
	 {K(MICRO_BATCH, "train_micro_batch_size_per_gpu"),
	  K(GRAD_ACCUM, "gradient_accumulation_steps"), K(GLOBAL_BATCH, "train_batch_size")}},
	{"huggingface", "Hugging Face Trainer, TRL, alignment-handbook (and HF config.json)",
	 {K(MICRO_BATCH, "per_device_train_batch_size"),
	  K(GRAD_ACCUM, "gradient_accumulation_steps"),
	  K(EVAL_BATCH, "per_device_eval_batch_size"), K(HIDDEN, "hidden_size"),
	  K(LAYERS, "num_hidden_layers"), K(HEADS, "num_attention_heads"),
	  K(FFN, "intermediate_size"), K(SEQ_LEN, "max_position_embeddings"),
	  K(VOCAB, "vocab_size"), K(DTYPE, "torch_dtype")}},
	{"axolotl", "axolotl",
	 {K(MICRO_BATCH, "micro_batch_size"), K(GRAD_ACCUM, "gradient_accumulation_steps"),
	  K(EVAL_BATCH, "eval_batch_size"), K(SEQ_LEN, "sequence_len")}},
	{"maxtext", "MaxText",
	 {K(MICRO_BATCH, "per_device_batch_size"), K(GRAD_ACCUM, "gradient_accumulation_steps"),
	  K(HIDDEN, "base_emb_dim"), K(LAYERS, "base_num_decoder_layers"),
	  K(HEADS, "base_num_query_heads"), K(FFN, "base_mlp_dim"),
	  K(SEQ_LEN, "max_target_length"), K(VOCAB, "vocab_size"), K(DTYPE, "dtype")}},
	{"nemo", "NeMo, Megatron-LM YAML",
	 {K(MICRO_BATCH, "model.micro_batch_size"), K(GLOBAL_BATCH, "model.global_batch_size"),
	  K(HIDDEN, "model.hidden_size"), K(LAYERS, "model.num_layers"),
	  K(HEADS, "model.num_attention_heads"), K(FFN, "model.ffn_hidden_size"),
	  K(SEQ_LEN, "model.encoder_seq_length"), K(DTYPE, "trainer.precision")}},
	{"cerebras", "Cerebras Model Zoo params",
	 {K(MICRO_BATCH, "train_input.micro_batch_size"),
	  K(GLOBAL_BATCH, "train_input.batch_size"), K(EVAL_BATCH, "eval_input.batch_size"),
	  K(HIDDEN, "model.hidden_size"), K(LAYERS, "model.num_hidden_layers"),
	  K(HEADS, "model.num_heads"), K(FFN, "model.filter_size"),
	  K(SEQ_LEN, "model.max_position_embeddings"), K(VOCAB, "model.vocab_size")}},
	{"lightning", "PyTorch Lightning CLI, Hydra",
	 {K(MICRO_BATCH, "data.batch_size"), K(GRAD_ACCUM, "trainer.accumulate_grad_batches")}},
	{"ultralytics", "Ultralytics YOLO", {K(MICRO_BATCH, "batch")}},
	{"torchtune", "torchtune",
	 {K(MICRO_BATCH, "batch_size"), K(GRAD_ACCUM, "gradient_accumulation_steps")}},
	{"linnaeus", "Linnaeus",
	 {K(MICRO_BATCH, "DATA.BATCH_SIZE"), K(EVAL_BATCH, "DATA.BATCH_SIZE_VAL")}},
};

const size_t ab_npresets = sizeof(ab_presets) / sizeof(ab_presets[0]);

static const char *const role_names[AB_ROLE_COUNT] = {
	"micro_batch", "grad_accum", "global_batch", "eval_batch", "hidden", "layers",
	"heads",       "ffn",        "seq_len",      "vocab",      "dtype",
};

const char *ab_role_name(enum ab_role role)
{
	return (unsigned)role < AB_ROLE_COUNT ? role_names[role] : "?";
}

const struct ab_preset *ab_preset_find(const char *name)
{
	for (size_t i = 0; i < ab_npresets; i++)
		if (strcmp(ab_presets[i].name, name) == 0)
			return &ab_presets[i];
	return NULL;
}

int ab_preset_lookup(const char *name, const struct ab_preset **out, char *err, size_t errlen)
{
	if ((*out = ab_preset_find(name)))
		return 0;
	return ab_fail(err, errlen, EINVAL, "unknown preset '%s': 'autobatch-probe presets' lists "
					    "them",
		       name);
}

static bool has_key(const struct ab_config *cfg, int document, const char *key)
{
	const struct ab_node *n;

	return key && ab_config_find(cfg, key, document, &n, NULL, 0) == 0;
}

/* How well the file matches the preset's training keys: its micro-batch key counts twice,
 * accumulation, global and eval batch once each (a DeepSpeed file may name only
 * train_batch_size). */
static int score(const struct ab_preset *p, const struct ab_config *cfg, int document)
{
	int s = 2 * has_key(cfg, document, p->keys[AB_ROLE_MICRO_BATCH]);

	for (int r = AB_ROLE_GRAD_ACCUM; r <= AB_ROLE_EVAL_BATCH; r++)
		s += has_key(cfg, document, p->keys[r]);
	return s;
}

int ab_preset_detect(const struct ab_config *cfg, int document, const struct ab_preset **out,
		     char *err, size_t errlen)
{
	int best = 0, scores[sizeof(ab_presets) / sizeof(ab_presets[0])];
	char list[1024] = "";
	size_t len = 0, ties = 0;

	for (size_t i = 0; i < ab_npresets; i++)
		if ((scores[i] = score(&ab_presets[i], cfg, document)) > best)
			best = scores[i];
	for (size_t i = 0; i < ab_npresets && best > 0; i++)
		if (scores[i] == best) {
			*out = &ab_presets[i];
			ties++;
			ab_append(list, sizeof(list), &len, "%s%s (%s)", ties > 1 ? ", " : "",
				  ab_presets[i].name, ab_presets[i].keys[AB_ROLE_MICRO_BATCH]);
		}
	if (ties == 1)
		return 0;
	if (ties > 1)
		return ab_fail(err, errlen, EEXIST, "%s matches several presets: %s; pick one with "
						    "--preset NAME (or --autobatch-preset=NAME)",
			       cfg->name, list);
	for (size_t i = 0; i < ab_npresets; i++)
		ab_append(list, sizeof(list), &len, "%s%s", i ? ", " : "",
			  ab_presets[i].keys[AB_ROLE_MICRO_BATCH]);
	return ab_fail(err, errlen, ENOENT,
		       "%s has none of the batch keys autobatch knows (%s): name yours with "
		       "--key KEY (or --autobatch-key=KEY)",
		       cfg->name, list);
}

int ab_preset_detect_model(const struct ab_config *cfg, int document,
			   const struct ab_preset **out, char *err, size_t errlen)
{
	int best = 2;

	*out = NULL;
	for (size_t i = 0; i < ab_npresets; i++) {
		int s = 0;

		for (int r = AB_ROLE_HIDDEN; r <= AB_ROLE_VOCAB; r++)
			s += has_key(cfg, document, ab_presets[i].keys[r]);
		if (s > best) {
			best = s;
			*out = &ab_presets[i];
		}
	}
	if (*out)
		return 0;
	return ab_fail(err, errlen, ENOENT,
		       "%s has too few model dimensions autobatch knows (Hugging Face hidden_size, "
		       "MaxText base_emb_dim, NeMo model.hidden_size, ...): name the preset with "
		       "--preset NAME or give --model layers=N,hidden=N,heads=N,seq=N,vocab=N",
		       cfg->name);
}
