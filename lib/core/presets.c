/* presets.c - the framework table (data, one row per framework) and detection. */
#include "presets.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "number.h"

#define K(role, key) [AB_ROLE_##role] = key
#define NEUTRAL(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Memory-neutral keys per framework, from each one's documented options. Optimizer and
 * scheduler *types* are left out on purpose: Adam keeps two moments, SGD none. */
static const char *const *const hf_neutral = NEUTRAL(
	"learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon",
	"max_grad_norm", "num_train_epochs", "max_steps", "lr_scheduler_type", "warmup_ratio",
	"warmup_steps", "logging_steps", "logging_dir", "logging_strategy", "logging_first_step",
	"save_steps", "save_strategy", "save_total_limit", "eval_steps", "eval_strategy",
	"evaluation_strategy", "output_dir", "run_name", "report_to", "seed", "data_seed",
	"push_to_hub", "hub_model_id");

const struct ab_preset ab_presets[] = {
	{"deepspeed", "DeepSpeed JSON",
	 {K(MICRO_BATCH, "train_micro_batch_size_per_gpu"),
	  K(GRAD_ACCUM, "gradient_accumulation_steps"), K(GLOBAL_BATCH, "train_batch_size"),
	  /* DeepSpeed divides train_batch_size by the world over AutoTP's tensor width (its
	   * data_parallel mesh) and over Ulysses' sequence width (DeepSpeedConfig.world_size);
	   * pipeline stages are a PipelineModule argument, not in this file */
	  K(TENSOR_PAR, "tensor_parallel.autotp_size"),
	  K(CONTEXT_PAR, "sequence_parallel_size")},
	 NEUTRAL("optimizer.params.lr", "optimizer.params.weight_decay", "optimizer.params.betas",
		 "optimizer.params.eps", "scheduler.params.warmup_min_lr",
		 "scheduler.params.warmup_max_lr", "scheduler.params.warmup_num_steps",
		 "scheduler.params.total_num_steps", "gradient_clipping", "steps_per_print",
		 "wall_clock_breakdown", "seed"), false},
	{"huggingface", "Hugging Face Trainer, TRL, alignment-handbook (and HF config.json)",
	 {K(MICRO_BATCH, "per_device_train_batch_size"),
	  K(GRAD_ACCUM, "gradient_accumulation_steps"),
	  K(EVAL_BATCH, "per_device_eval_batch_size"), K(MAX_LENGTH, "max_length"),
	  K(EVAL_EVERY, "eval_steps"), K(SAVE_EVERY, "save_steps"),
	  K(RUN_STEPS, "max_steps"), K(HIDDEN, "hidden_size"),
	  K(LAYERS, "num_hidden_layers"), K(HEADS, "num_attention_heads"),
	  K(FFN, "intermediate_size"), K(SEQ_LEN, "max_position_embeddings"),
	  K(VOCAB, "vocab_size"), K(DTYPE, "torch_dtype")},
	 hf_neutral, false},
	{"axolotl", "axolotl",
	 {K(MICRO_BATCH, "micro_batch_size"), K(GRAD_ACCUM, "gradient_accumulation_steps"),
	  K(EVAL_BATCH, "eval_batch_size"), K(SEQ_LEN, "sequence_len"),
	  K(MAX_LENGTH, "sequence_len"), K(EVAL_EVERY, "eval_steps"),
	  K(SAVE_EVERY, "save_steps"), K(RUN_STEPS, "max_steps")},
	 NEUTRAL("learning_rate", "lr_scheduler", "warmup_steps", "warmup_ratio", "num_epochs",
		 "max_steps", "weight_decay", "max_grad_norm", "output_dir", "seed",
		 "logging_steps", "save_steps", "eval_steps", "saves_per_epoch", "evals_per_epoch",
		 "wandb_project", "wandb_name", "wandb_run_id", "wandb_entity"), false},
	{"maxtext", "MaxText",
	 {K(MICRO_BATCH, "per_device_batch_size"), K(GRAD_ACCUM, "gradient_accumulation_steps"),
	  K(HIDDEN, "base_emb_dim"), K(LAYERS, "base_num_decoder_layers"),
	  K(HEADS, "base_num_query_heads"), K(FFN, "base_mlp_dim"),
	  K(SEQ_LEN, "max_target_length"), K(VOCAB, "vocab_size"), K(DTYPE, "dtype"),
	  K(RAMP_SWITCH, "enable_rampup_batch_size"),
	  K(RAMP_START, "per_device_batch_size_start"),
	  K(RAMP_STEP, "per_device_batch_size_increment"), K(EVAL_EVERY, "eval_interval"),
	  K(METRICS_FILE, "metrics_file"), K(CHECKPOINTING, "enable_checkpointing"),
	  K(RUN_STEPS, "steps")},
	 NEUTRAL("learning_rate", "run_name", "base_output_directory", "steps", "log_period",
		 "checkpoint_period", "warmup_steps_fraction", "learning_rate_schedule_steps",
		 "cosine_learning_rate_final_fraction", "adam_b1", "adam_b2", "adam_eps",
		 "adam_weight_decay", "gradient_clipping_threshold", "data_shuffle_seed",
		 "init_weights_seed"),
	 true},
	{"nemo", "NeMo, Megatron-LM YAML",
	 {K(MICRO_BATCH, "model.micro_batch_size"), K(GLOBAL_BATCH, "model.global_batch_size"),
	  K(HIDDEN, "model.hidden_size"), K(LAYERS, "model.num_layers"),
	  K(HEADS, "model.num_attention_heads"), K(FFN, "model.ffn_hidden_size"),
	  K(SEQ_LEN, "model.encoder_seq_length"), K(DTYPE, "trainer.precision"),
	  K(TENSOR_PAR, "model.tensor_model_parallel_size"),
	  K(PIPELINE_PAR, "model.pipeline_model_parallel_size"),
	  K(CONTEXT_PAR, "model.context_parallel_size"),
	  K(GLOBAL_RAMP_START, "model.rampup_batch_size[0]"),
	  K(GLOBAL_RAMP_STEP, "model.rampup_batch_size[1]"),
	  K(EVAL_EVERY, "trainer.val_check_interval"), K(RUN_STEPS, "trainer.max_steps")},
	 NEUTRAL("model.optim.lr", "model.optim.weight_decay", "model.optim.betas",
		 "model.optim.sched.warmup_steps", "model.optim.sched.constant_steps",
		 "model.optim.sched.min_lr", "model.seed", "trainer.max_steps", "trainer.max_epochs",
		 "trainer.log_every_n_steps", "trainer.val_check_interval",
		 "trainer.gradient_clip_val", "exp_manager.exp_dir", "exp_manager.name",
		 "exp_manager.wandb_logger_kwargs.name"), false},
	{"cerebras", "Cerebras Model Zoo params",
	 {K(MICRO_BATCH, "train_input.micro_batch_size"),
	  K(GLOBAL_BATCH, "train_input.batch_size"), K(EVAL_BATCH, "eval_input.batch_size"),
	  K(HIDDEN, "model.hidden_size"), K(LAYERS, "model.num_hidden_layers"),
	  K(HEADS, "model.num_heads"), K(FFN, "model.filter_size"),
	  K(SEQ_LEN, "model.max_position_embeddings"), K(VOCAB, "model.vocab_size"),
	  K(RUN_STEPS, "runconfig.max_steps")},
	 NEUTRAL("optimizer.learning_rate", "optimizer.weight_decay", "optimizer.max_gradient_norm",
		 "runconfig.max_steps", "runconfig.num_epochs", "runconfig.checkpoint_steps",
		 "runconfig.log_steps", "runconfig.seed", "runconfig.model_dir"), false},
	{"lightning", "PyTorch Lightning CLI, Hydra",
	 {K(MICRO_BATCH, "data.batch_size"), K(GRAD_ACCUM, "trainer.accumulate_grad_batches"),
	  K(EVAL_EVERY, "trainer.val_check_interval"), K(RUN_STEPS, "trainer.max_steps")},
	 NEUTRAL("model.lr", "model.learning_rate", "model.weight_decay", "optimizer.lr",
		 "optimizer.init_args.lr", "optimizer.init_args.weight_decay",
		 "lr_scheduler.init_args.warmup_steps", "lr_scheduler.init_args.max_epochs",
		 "trainer.max_epochs", "trainer.max_steps", "trainer.log_every_n_steps",
		 "trainer.default_root_dir", "trainer.val_check_interval",
		 "trainer.check_val_every_n_epoch", "trainer.gradient_clip_val", "seed_everything",
		 "ckpt_path"), false},
	{"ultralytics", "Ultralytics YOLO", {K(MICRO_BATCH, "batch")},
	 NEUTRAL("lr0", "lrf", "momentum", "weight_decay", "warmup_epochs", "warmup_momentum",
		 "warmup_bias_lr", "epochs", "patience", "seed", "name", "project", "save_period",
		 "exist_ok", "plots", "verbose"), false},
	{"torchtune", "torchtune",
	 {K(MICRO_BATCH, "batch_size"), K(GRAD_ACCUM, "gradient_accumulation_steps"),
	  K(MAX_LENGTH, "tokenizer.max_seq_len")},
	 NEUTRAL("optimizer.lr", "optimizer.weight_decay", "lr_scheduler.num_warmup_steps",
		 "epochs", "max_steps_per_epoch", "seed", "output_dir", "log_every_n_steps",
		 "metric_logger.log_dir", "clip_grad_norm"), false},
	{"linnaeus", "Linnaeus",
	 {K(MICRO_BATCH, "DATA.BATCH_SIZE"), K(EVAL_BATCH, "DATA.BATCH_SIZE_VAL")},
	 NEUTRAL("TRAIN.EPOCHS", "SEED", "OUTPUT"), false},
};

const size_t ab_npresets = sizeof(ab_presets) / sizeof(ab_presets[0]);

static const char *const role_names[AB_ROLE_COUNT] = {
	"micro_batch", "grad_accum", "global_batch",   "eval_batch",     "hidden", "layers",
	"heads",       "ffn",        "seq_len",        "vocab",          "dtype",  "tensor_par",
	"pipeline_par", "context_par", "ramp_switch", "ramp_start", "ramp_step",
	"global_ramp_start", "global_ramp_step", "max_length", "eval_every", "save_every",
	"metrics_file", "checkpointing", "run_steps",
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

/* How well the file matches the preset's training keys: its micro-batch key counts twice,
 * accumulation, global and eval batch once each (a DeepSpeed file may name only
 * train_batch_size). */
static int score(const struct ab_preset *p, const struct ab_config *cfg, int document)
{
	int s = 2 * ab_config_has(cfg, p->keys[AB_ROLE_MICRO_BATCH], document);

	for (int r = AB_ROLE_GRAD_ACCUM; r <= AB_ROLE_EVAL_BATCH; r++)
		s += ab_config_has(cfg, p->keys[r], document);
	return s;
}

#define NPRESETS (sizeof(ab_presets) / sizeof(ab_presets[0]))

/* Every preset's score into scores; the best of them. */
static int score_all(const struct ab_config *cfg, int document, int scores[NPRESETS])
{
	int best = 0;

	for (size_t i = 0; i < ab_npresets; i++)
		if ((scores[i] = score(&ab_presets[i], cfg, document)) > best)
			best = scores[i];
	return best;
}

int ab_preset_detect(const struct ab_config *cfg, int document, const struct ab_preset **out,
		     char *err, size_t errlen)
{
	int scores[NPRESETS], best = score_all(cfg, document, scores);
	char list[1024] = "";
	size_t len = 0, ties = 0;

	for (size_t i = 0; i < ab_npresets && best > 0; i++)
		if (scores[i] == best) {
			if (!ties)
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
	/* a batch key the file has, but that cannot be read (twice in a mapping, in two
	 * documents, a block scalar): its own refusal names the fix, "none" would not */
	for (size_t i = 0; i < ab_npresets; i++) {
		const char *key = ab_presets[i].keys[AB_ROLE_MICRO_BATCH];
		const struct ab_node *n;
		int rc;

		if (key && (rc = ab_config_find(cfg, key, document, &n, NULL, 0)) < 0 &&
		    rc != -ENOENT)
			return ab_config_find(cfg, key, document, &n, err, errlen);
	}
	for (size_t i = 0; i < ab_npresets; i++)
		ab_append(list, sizeof(list), &len, "%s%s", i ? ", " : "",
			  ab_presets[i].keys[AB_ROLE_MICRO_BATCH]);
	return ab_fail(err, errlen, ENOENT,
		       "%s has none of the batch keys autobatch knows (%s): name yours with "
		       "--key KEY (or --autobatch-key=KEY)",
		       cfg->name, list);
}

static bool batch_key_is(const struct ab_preset *p, const char *key)
{
	return (p->keys[AB_ROLE_MICRO_BATCH] && !strcmp(p->keys[AB_ROLE_MICRO_BATCH], key)) ||
	       (p->keys[AB_ROLE_EVAL_BATCH] && !strcmp(p->keys[AB_ROLE_EVAL_BATCH], key));
}

int ab_preset_detect_key(const struct ab_config *cfg, int document, const char *key,
			 const struct ab_preset **out)
{
	const struct ab_preset *found = NULL;
	int scores[NPRESETS], best = key ? score_all(cfg, document, scores) : 0;
	size_t n = 0;

	for (size_t i = 0; best > 0 && i < ab_npresets; i++)
		if (scores[i] == best && batch_key_is(&ab_presets[i], key)) {
			found = &ab_presets[i];
			n++;
		}
	if (n != 1)
		return -ENOENT;
	*out = found;
	return 0;
}

int ab_preset_detect_model(const struct ab_config *cfg, int document,
			   const struct ab_preset **out, char *err, size_t errlen)
{
	int best = 2;

	*out = NULL;
	for (size_t i = 0; i < ab_npresets; i++) {
		int s = 0;

		for (int r = AB_ROLE_HIDDEN; r <= AB_ROLE_VOCAB; r++)
			s += ab_config_has(cfg, ab_presets[i].keys[r], document);
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

/* Whether argv[i] is the launcher's own, not its program's: the launcher's options come
 * before the program (an option takes the next word as its value unless it is one of the
 * launchers' flags). */
static bool launcher_word(char *const argv[], int i)
{
	/* torch's and deepspeed's, and accelerate launch's store_true flags (its --help) */
	static const char *const flags[] = {
		"--standalone", "--no_python", "--no-python", "--run_path", "--run-path",
		"--module", "-m", "--use_env", "--use-env", "--multi_gpu", "--multi-gpu", "--cpu",
		"--debug", "--use_deepspeed", "--use-deepspeed", "--use_fsdp", "--use-fsdp",
		"--use_megatron_lm", "--use-megatron-lm", "--use_xpu", "--use-xpu", "--tpu",
		"--tpu_cluster", "--tpu-cluster", "--tpu_use_sudo", "--tpu-use-sudo", "--ipex",
		"--same_network", "--same-network", "--enable_cpu_affinity",
		"--enable-cpu-affinity", "--dynamo_use_fullgraph", "--dynamo-use-fullgraph",
		"--dynamo_use_dynamic", "--dynamo-use-dynamic", "--downcast_bf16",
		"--downcast-bf16", "--quiet", "-q"};
	const char *prev = argv[i - 1];

	if (argv[i][0] == '-')
		return true;
	if (prev[0] != '-' || strchr(prev, '='))
		return false;
	for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
		if (!strcmp(prev, flags[k]))
			return false;
	return true; /* the value of the option before it */
}

/* The value of option name in argv[i] ("--name=V" or "--name V"), or NULL. */
static const char *option_value(int argc, char *const argv[], int i, const char *name)
{
	size_t n = strlen(name);

	if (strncmp(argv[i], name, n))
		return NULL;
	if (argv[i][n] == '=')
		return argv[i] + n + 1;
	return !argv[i][n] && i + 1 < argc ? argv[i + 1] : NULL;
}

/* Where "python ... -m MODULE" names its module: the index of MODULE, or 0. */
static int module_at(int argc, char *const argv[])
{
	for (int i = 1; i + 1 < argc && argv[i][0] == '-'; i++)
		if (!strcmp(argv[i], "-m"))
			return i + 1;
	return 0;
}

/* Where the launcher's options begin: after "python -m MODULE" or "accelerate launch". */
static int start_of_options(int argc, char *const argv[])
{
	int m = module_at(argc, argv);

	if (m)
		return m + 1;
	return argc > 1 && !strcmp(argv[1], "launch") ? 2 : 1;
}

const char *ab_launcher_option(int argc, char *const argv[], const char *option,
			       const char *dashed)
{
	const char *v;

	if (!ab_launcher_name(argc, argv))
		return NULL;
	for (int i = start_of_options(argc, argv); i < argc && launcher_word(argv, i); i++)
		if ((v = option_value(argc, argv, i, option)) ||
		    (dashed && (v = option_value(argc, argv, i, dashed))))
			return v;
	return NULL;
}

long ab_launcher_workers(int argc, char *const argv[], bool *world)
{
	/* each launcher's option for its workers, its spelling with '-', and what it starts
	 * without one: torch's launchers 1 (--nproc_per_node's default), deepspeed one per GPU
	 * (all it sees), accelerate what its config file says (not known here) */
	static const struct {
		const char *launcher, *option, *dashed;
		long none;
		bool world;
	} known[] = {
		{"torchrun", "--nproc_per_node", "--nproc-per-node", 1, false},
		{"torch.distributed.run", "--nproc_per_node", "--nproc-per-node", 1, false},
		{"torch.distributed.launch", "--nproc_per_node", "--nproc-per-node", 1, false},
		{"deepspeed", "--num_gpus", "--num-gpus", 0, false},
		{"accelerate launch", "--num_processes", "--num-processes", -1, true},
		{"accelerate.commands.launch", "--num_processes", "--num-processes", -1, true},
	};
	const char *name = ab_launcher_name(argc, argv), *v;
	long n;

	*world = false;
	for (size_t k = 0; name && k < sizeof(known) / sizeof(known[0]); k++) {
		if (strcmp(name, known[k].launcher))
			continue;
		*world = known[k].world;
		if (!(v = ab_launcher_option(argc, argv, known[k].option, known[k].dashed)))
			return known[k].none;
		if (!strcmp(v, "gpu") || !strcmp(v, "auto")) {
			*world = false; /* one on each GPU of each launcher's node */
			return 0;
		}
		return ab_parse_whole(v, 1, 1 << 20, &n) == 0 ? n : -1;
	}
	return -1;
}

const char *ab_launcher_name(int argc, char *const argv[])
{
	static const char *const modules[] = {"torch.distributed.run", "torch.distributed.launch",
					      "accelerate.commands.launch"};
	const char *prog;
	int m;

	if (argc < 1 || !argv[0])
		return NULL;
	prog = ab_base_name(argv[0]);
	if (!strcmp(prog, "torchrun") || !strcmp(prog, "deepspeed"))
		return prog;
	if (!strcmp(prog, "accelerate") && argc > 1 && !strcmp(argv[1], "launch"))
		return "accelerate launch";
	if (strncmp(prog, "python", 6) || !(m = module_at(argc, argv)))
		return NULL;
	for (size_t k = 0; k < sizeof(modules) / sizeof(modules[0]); k++)
		if (!strcmp(argv[m], modules[k]))
			return modules[k];
	return NULL;
}
