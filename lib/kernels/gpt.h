/* gpt.h - the proxy training step on a GPU, for C callers (the probe, tests/gpu, bench/):
 * the model's buffers as real cudaMallocs, one step, the model-mode trial, the CUDA device.
 */
#ifndef AUTOBATCH_GPT_H
#define AUTOBATCH_GPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "device.h"
#include "model.h"
#include "trial.h"

struct ab_gpt;

/* Allocates every buffer of the step at batch B on the current device (parameters,
 * gradients, fp32 master, AdamW moments, saved activations, backward scratch, cuBLAS
 * workspace) and initialises the weights from seed. -ENOMEM when the device is out of
 * memory, with everything freed; -EIO on any other CUDA failure. */
int ab_gpt_create(const struct ab_model *m, int B, uint64_t seed, struct ab_gpt **out,
		  char *err, size_t errlen);
void ab_gpt_destroy(struct ab_gpt *g);
/* bf16 steps take attention from flash_attention.cu where its shapes fit (head size 64 or
 * 128, T a multiple of 64), else the unfused cuBLAS path; on = 0 forces the latter (tests,
 * bench/kernels' comparison), from the next forward on. -EINVAL asking for the fused one
 * where it does not fit. */
int ab_gpt_set_flash(struct ab_gpt *g, int on);

/* forward, backward and the AdamW update; *loss is the forward's mean loss */
int ab_gpt_step(struct ab_gpt *g, float lr, float *loss, char *err, size_t errlen);
int ab_gpt_forward(struct ab_gpt *g, float *loss, char *err, size_t errlen);
int ab_gpt_backward(struct ab_gpt *g, char *err, size_t errlen);

/* Where a step's time goes, for bench/kernels: one step as ab_gpt_step, each launcher
 * timed by CUDA events and summed by kind (a kind's GPU time, its launches); step_ms runs
 * from the first launch's start to the last's end, so what no kind holds (memsets, gaps
 * between launches) is step_ms less the kinds' sum. */
enum ab_gpt_kind {
	AB_K_MATMUL,    /* the linear layers: cuBLAS GEMMs, bias add and bias gradient */
	AB_K_ATTENTION, /* head split, q.k^T and att.v (cuBLAS), causal softmax, backward */
	AB_K_LAYERNORM,
	AB_K_GELU,
	AB_K_RESIDUAL,
	AB_K_EMBEDDING, /* token and position embeddings, forward and backward */
	AB_K_LOSS,      /* softmax cross-entropy and its d(logits) */
	AB_K_ADAMW,
	AB_K_COUNT
};
extern const char *const ab_gpt_kind_names[AB_K_COUNT];
struct ab_gpt_profile {
	double ms[AB_K_COUNT];
	int launches[AB_K_COUNT];
	double step_ms;
};
int ab_gpt_profile_step(struct ab_gpt *g, float lr, float *loss, struct ab_gpt_profile *out,
			char *err, size_t errlen);

/* For the checks against the CPU reference: fp32 host arrays in ab_model_layout's order. */
int ab_gpt_set_params(struct ab_gpt *g, const float *params, char *err, size_t errlen);
int ab_gpt_get_grads(struct ab_gpt *g, float *grads, char *err, size_t errlen);
int ab_gpt_set_tokens(struct ab_gpt *g, const int *inputs, const int *targets, char *err,
		      size_t errlen);

/* Model mode: one trial of the proxy step at `batch` on device `index`. A batch that does
 * not fit is a result (oom), not an error. Peak = the device's used memory after the step,
 * less what other processes held when the device was opened. */
struct ab_model_trial {
	struct ab_model model;
	int device;
	int steps;              /* timed steps, after one warm-up step */
	uint64_t others_bytes;  /* other processes' memory (NVML), not ours */
};
int ab_model_cuda_trial(void *ctx, long batch, struct ab_trial *out, char *err, size_t errlen);

/* The CUDA runtime behind `--device cuda:N` (see device.h). */
extern const struct ab_cuda_ops ab_cuda_runtime_ops;

/* Measured bf16 GEMM rate (cuBLAS, fp32 accumulate, n x n x n, median of reps) in FLOP/s. */
int ab_gemm_peak(int n, int reps, double *flops, char *err, size_t errlen);

/* NCCL (nccl_measure.cu, built when NCCL is found): all-reduce of `bytes` (a model's
 * gradients) across every visible GPU, one process driving all. The message is capped at a
 * quarter of free memory and the time scaled to `bytes` (all-reduce is bandwidth-bound). */
struct ab_comm {
	int gpus;
	uint64_t bytes;           /* what one step all-reduces */
	uint64_t measured_bytes;  /* the message actually timed */
	double seconds;           /* predicted all-reduce time for `bytes` */
	double busbw;             /* bytes/s, NCCL's definition: algbw * 2(n-1)/n */
	uint64_t nccl_bytes;      /* device memory NCCL itself took on a rank (max) */
};
int ab_nccl_measure(uint64_t bytes, struct ab_comm *out, char *err, size_t errlen);

/* The library's last CUDA/cuBLAS message ("file:line: call: reason"). */
const char *ab_kernels_message(void);

#ifdef __cplusplus
}
#endif

#endif
