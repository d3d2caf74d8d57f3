/* model.h - the proxy model of `--mode model`: a decoder-only transformer's dimensions (from
 * `--model` or a config through the presets), its tensor sizes, and its analytic memory.
 */
#ifndef AUTOBATCH_MODEL_H
#define AUTOBATCH_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config_edit.h"
#include "presets.h"

enum ab_dtype { AB_DTYPE_BF16, AB_DTYPE_FP32 };

/* B = batch, T = seq, C = hidden, NH = heads, F = ffn, V = vocab, L = layers */
struct ab_model {
	long layers, hidden, heads, ffn, seq, vocab;
	enum ab_dtype dtype; /* activations and weights; master weights and AdamW are fp32 */
	bool recompute;      /* keep only each layer's input; redo its forward in backward */
};

/* Parses "layers=12,hidden=768,heads=12,ffn=3072,seq=1024,vocab=50257,dtype=bf16"
 * (ffn defaults to 4*hidden, dtype to bf16, recompute=0|1); every other field is required. */
int ab_model_parse(const char *spec, struct ab_model *m, char *err, size_t errlen);

/* The same without the completeness check: the fields a config file does not have. */
int ab_model_parse_fields(const char *spec, struct ab_model *m, char *err, size_t errlen);

/* Reads the dimensions through the preset's keys (HF config.json, MaxText, NeMo, Cerebras);
 * a key the file lacks is named in the error with the `--model` field that replaces it.
 * Fields already set in *m (non-zero) win over the file. */
int ab_model_from_config(const struct ab_config *cfg, int document, const struct ab_preset *p,
			 struct ab_model *m, char *err, size_t errlen);

size_t ab_dtype_bytes(enum ab_dtype dtype);

/* Parameters, layer by layer, in the order they are laid out in memory. */
enum ab_param {
	AB_P_WTE,   /* (V, C) token embedding, tied to the LM head */
	AB_P_WPE,   /* (T, C) position embedding */
	AB_P_LN1W,  /* (L, C) */
	AB_P_LN1B,  /* (L, C) */
	AB_P_QKVW,  /* (L, 3*C, C) */
	AB_P_QKVB,  /* (L, 3*C) */
	AB_P_ATTPROJW, /* (L, C, C) */
	AB_P_ATTPROJB, /* (L, C) */
	AB_P_LN2W,  /* (L, C) */
	AB_P_LN2B,  /* (L, C) */
	AB_P_FCW,   /* (L, F, C) */
	AB_P_FCB,   /* (L, F) */
	AB_P_FCPROJW, /* (L, C, F) */
	AB_P_FCPROJB, /* (L, C) */
	AB_P_LNFW,  /* (C) */
	AB_P_LNFB,  /* (C) */
	AB_P_COUNT
};

/* GPT-2's initialisation of parameter tensor p, the same on the CPU and the GPU: uniform in
 * [-scale, scale) with the standard deviation of N(0, 0.02), the projections into the
 * residual scaled by 1/sqrt(2L); scale 0: every element is *constant (layernorm weights 1,
 * biases 0). */
float ab_param_init(const struct ab_model *m, enum ab_param p, float *constant);

/* Activations saved for the backward pass; "per layer" ones come L times (once with
 * recompute, plus the layer inputs kept in AB_A_RESIDUAL3). */
enum ab_act {
	AB_A_ENCODED,   /* (B, T, C) */
	AB_A_LN1,       /* (L, B, T, C) per layer */
	AB_A_LN1_STATS, /* (L, 2, B, T) fp32 mean, rstd, per layer */
	AB_A_QKVR,      /* (L, 3, B, NH, T, HS) per layer: q, k, v split by head */
	AB_A_ATT,       /* (L, B, NH, T, T) per layer: causal softmax */
	AB_A_ATTY,      /* (L, B, T, C) per layer: attention output, input of the projection */
	AB_A_RESIDUAL2, /* (L, B, T, C) per layer */
	AB_A_LN2,       /* (L, B, T, C) per layer */
	AB_A_LN2_STATS, /* (L, 2, B, T) fp32 per layer */
	AB_A_FCH,       /* (L, B, T, F) per layer: before GELU */
	AB_A_FCH_GELU,  /* (L, B, T, F) per layer */
	AB_A_RESIDUAL3, /* (L, B, T, C): each layer's output, always kept for all layers */
	AB_A_LNF,       /* (B, T, C) */
	AB_A_LNF_STATS, /* (2, B, T) fp32 */
	AB_A_LOGITS,    /* (B, T, V): softmax probabilities, then d(loss)/d(logits) in place */
	AB_A_LOSSES,    /* (B, T) fp32 */
	AB_A_COUNT
};

/* Element counts and bytes of every buffer of one training step at batch B. */
struct ab_model_layout {
	uint64_t param_elems[AB_P_COUNT];
	uint64_t nparams;
	uint64_t act_elems[AB_A_COUNT];
	size_t act_bytes_per_elem[AB_A_COUNT];
	uint64_t params_bytes;     /* weights in dtype */
	uint64_t grads_bytes;      /* gradients in dtype */
	uint64_t master_bytes;     /* fp32 copy (bf16 only) */
	uint64_t optimizer_bytes;  /* AdamW m and v, fp32 */
	uint64_t acts_bytes;       /* saved activations */
	uint64_t scratch_bytes;    /* one layer's activation gradients + dresidual + attention scratch */
	uint64_t workspace_bytes;  /* cuBLAS workspace */
	uint64_t total_bytes;
};

#define AB_CUBLAS_WORKSPACE (32u << 20)

uint64_t ab_model_params(const struct ab_model *m);

/* Whether every buffer of the step at this batch can be counted in 64 bits (with room to
 * spare): a batch beyond it is treated as not fitting, never sized with wrapped numbers. */
bool ab_model_sizeable(const struct ab_model *m, long batch);

void ab_model_layout(const struct ab_model *m, long batch, struct ab_model_layout *out);

/* The analytic count the measured peak is checked against: 16 bytes per parameter (weights,
 * gradients, fp32 master, AdamW m and v; fp32 mode has no master but 4-byte weights and
 * gradients: also 16) plus activations per Korthikanti et al. 2022, "Reducing Activation
 * Recomputation in Large Transformer Models", eq. 2, without its dropout terms (the proxy
 * has no dropout; model.c spells out each term), plus the logits and embedding output the
 * paper leaves out. */
uint64_t ab_model_analytic_bytes(const struct ab_model *m, long batch);

/* Floating-point operations of one training step (forward + backward, 3x the forward's
 * matrix products, attention included). */
double ab_model_flops(const struct ab_model *m, long batch);

/* "12 layers, hidden 768, 12 heads, ffn 3072, seq 1024, vocab 50257, bf16, 124.4M params" */
void ab_model_describe(const struct ab_model *m, char *buf, size_t buflen);

#endif
