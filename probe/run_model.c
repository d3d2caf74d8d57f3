/* run_model.c - `run --mode model`: the proxy model's dimensions, its trial on the device,
 * and the memory reserve (other processes, NCCL) taken off the budget.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_edit.h"
#include "cuda_module.h"
#include "error.h"
#include "presets.h"
#include "run.h"
#include "size.h"

static int preset_for(const struct run_opts *o, const struct ab_config *cfg,
		      const struct ab_preset **p, char *err, size_t errlen)
{
	if (!o->preset)
		return ab_preset_detect_model(cfg, o->document, p, err, errlen);
	return ab_preset_lookup(o->preset, p, err, errlen);
}

/* The config's own micro-batch, where the search starts; absent is fine (config.json). */
static void start_from(const struct run_opts *o, const struct ab_config *cfg,
		       const struct ab_preset *p, long *start)
{
	const char *key = o->key ? o->key : p->keys[AB_ROLE_MICRO_BATCH];
	char value[64], why[AB_ERR_MAX];

	if (key && ab_config_get(cfg, key, o->document, value, sizeof(value), why, sizeof(why)) == 0)
		start_from_value(value, start);
}

static int model_dims(const struct run_opts *o, struct ab_model *m, long *start, char *err,
		      size_t errlen)
{
	const struct ab_preset *p = NULL;
	struct ab_config *cfg;
	int rc;

	if (!o->config && !o->model)
		return ab_fail(err, errlen, EINVAL,
			       "--mode model needs the model's dimensions: --config FILE (a Hugging "
			       "Face config.json, MaxText, NeMo/Megatron or Cerebras config) or "
			       "--model layers=N,hidden=N,heads=N,seq=N,vocab=N[,ffn=N,dtype=bf16]");
	if (!o->config)
		return ab_model_parse(o->model, m, err, errlen);
	if (o->model && (rc = ab_model_parse_fields(o->model, m, err, errlen)) < 0)
		return rc;
	if ((rc = ab_config_load(o->config, AB_FORMAT_AUTO, &cfg, err, errlen)) < 0)
		return rc;
	if ((rc = preset_for(o, cfg, &p, err, errlen)) == 0 &&
	    (rc = ab_model_from_config(cfg, o->document, p, m, err, errlen)) == 0)
		start_from(o, cfg, p, start);
	ab_config_free(cfg);
	return rc;
}

int setup_model(struct run_opts *o, struct setup *s, long *start, char *err, size_t errlen)
{
	int rc;

	s->mode = "model";
	if ((rc = model_dims(o, &s->model, start, err, errlen)) < 0)
		return rc;
	s->has_model = true;
	ab_model_describe(&s->model, s->model_desc, sizeof(s->model_desc));
	fprintf(stderr, "autobatch: proxy model: %s\n", s->model_desc);
	if (s->dev.kind == AB_DEVICE_SIM)
		return ab_fail(err, errlen, EINVAL, "--mode model runs the proxy step for real: use "
						    "--device cuda:N, or --device host for a small "
						    "model on the CPU");
	if (s->dev.kind == AB_DEVICE_HOST) {
		s->host = (struct ab_model_host){.model = s->model, .steps = o->steps,
						 .capacity = s->dev.total_bytes,
						 .trial_seconds = o->trial_seconds,
						 .interrupted = &run_interrupted};
		s->fn = ab_model_host_trial;
		s->ctx = &s->host;
		return 0;
	}
#ifdef HAVE_CUDA
	s->gpu = (struct ab_model_trial){.model = s->model, .device = s->dev.index,
					 .steps = o->steps, .others_bytes = s->dev.others_bytes};
	s->fn = cuda_module(err, errlen)->model_trial; /* loaded: the device is cuda:N */
	s->ctx = &s->gpu;
	return 0;
#else
	return ab_fail(err, errlen, ENODEV, "this build has no CUDA kernel library");
#endif
}

#ifdef HAVE_CUDA
/* Two or more GPUs in the probe step: measure what data parallelism costs instead of
 * guessing it. A failure keeps the configured reserve and says why. */
static bool measure_comm(struct setup *s)
{
	const struct cuda_module *m = cuda_module(NULL, 0);
	struct ab_comm c;
	char err[AB_ERR_MAX], size[32];
	uint64_t bytes = ab_model_params(&s->model) * ab_dtype_bytes(s->model.dtype);

	if (!m || !m->nccl_measure || m->ops->count() < 2)
		return false;
	if (m->nccl_measure(bytes, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "autobatch: %s; keeping the configured communication reserve\n", err);
		return false;
	}
	s->comm = (struct ab_report_comm){.gpus = c.gpus, .bytes = c.bytes,
					  .nccl_bytes = c.nccl_bytes, .busbw = c.busbw,
					  .seconds = c.seconds};
	fprintf(stderr, "autobatch: all-reduce of %s across %d GPUs: %.1f GB/s bus bandwidth, "
			"%.3f s a step; NCCL takes %s a GPU\n",
		ab_format_size(c.bytes, size, sizeof(size)), c.gpus, c.busbw / 1e9, c.seconds,
		ab_format_size(c.nccl_bytes, err, sizeof(err)));
	return true;
}
#endif

void setup_reserve(const struct run_opts *o, struct setup *s)
{
	uint64_t comm = o->comm_reserve;
	char a[32], b[32];

#ifdef HAVE_CUDA
	if (s->dev.kind == AB_DEVICE_CUDA && s->has_model && measure_comm(s))
		comm = s->comm.nccl_bytes;
#endif
	s->reserve = comm + (s->dev.kind == AB_DEVICE_CUDA ? s->dev.others_bytes : 0);
	if (s->dev.kind == AB_DEVICE_CUDA && s->dev.others_bytes)
		fprintf(stderr, "autobatch: other processes hold %s of the GPU (%s): counted "
				"against the budget\n",
			ab_format_size(s->dev.others_bytes, a, sizeof(a)), s->dev.others);
	if (s->dev.kind == AB_DEVICE_CUDA && !s->dev.nvml)
		fprintf(stderr, "autobatch: %s\n", s->dev.nvml_note);
	if (comm)
		fprintf(stderr, "autobatch: reserving %s for communication (NCCL)%s\n",
			ab_format_size(comm, b, sizeof(b)),
			s->comm.gpus ? ", as measured" : "");
}
