/* reference.h - the proxy training step in plain C, fp32: one function per layer family,
 * forward and backward, and the whole step. What every CUDA kernel is checked against.
 */
#ifndef AUTOBATCH_REFERENCE_H
#define AUTOBATCH_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* B = batch, T = seq, C = channels, NH = heads, OC = output channels, V = vocab */
void ref_encoder_forward(float *out, const int *inp, const float *wte, const float *wpe,
			 int B, int T, int C);
/* out (B,T,C), inp (B,T), wte (V,C), wpe (T,C) */
void ref_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
			  int T, int C);
void ref_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
			   const float *weight, const float *bias, int B, int T, int C);
/* out, inp (B,T,C); mean, rstd (B,T); weight, bias (C) */
void ref_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			    const float *inp, const float *weight, const float *mean,
			    const float *rstd, int B, int T, int C);
void ref_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
			int B, int T, int C, int OC);
/* out (B,T,OC), inp (B,T,C), weight (OC,C), bias (OC) or NULL; backward accumulates */
void ref_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			 const float *inp, const float *weight, int B, int T, int C, int OC);
void ref_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
			   int NH);
/* out (B,T,C), att (B,NH,T,T) causal softmax, qkv (B,T,3C); backward accumulates dqkv */
void ref_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
			    int B, int T, int C, int NH);
void ref_gelu_forward(float *out, const float *inp, size_t n);
void ref_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
void ref_residual_forward(float *out, const float *a, const float *b, size_t n);
/* probs and dlogits (B,T,V) (dlogits may be probs), losses (B,T); mean loss over B*T */
void ref_crossentropy_softmax(float *probs, float *losses, float *dlogits, const float *logits,
			      const int *targets, int B, int T, int V);
void ref_adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr,
	       float beta1, float beta2, float eps, float weight_decay, int t);

/* The whole model: parameters in ab_model_layout's order, one malloc'ed block each. */
struct ref_gpt {
	struct ab_model m;
	int B;
	float *params, *grads, *adam_m, *adam_v;
	float *param[AB_P_COUNT], *grad[AB_P_COUNT];
	float *acts, *act[AB_A_COUNT];
	float *scratch; /* backward: dresidual, two wide buffers, d(att) */
	int *inputs, *targets;
	size_t nparams, nacts;
	int step;
};

/* Allocates (and touches, so resident memory is real) everything for batch B, with GPT-2's
 * initialisation from seed; -ENOMEM when an allocation fails. fp32 whatever m->dtype says. */
int ref_gpt_init(struct ref_gpt *g, const struct ab_model *m, int B, uint64_t seed, char *err,
		 size_t errlen);
void ref_gpt_free(struct ref_gpt *g);
float ref_gpt_forward(struct ref_gpt *g); /* mean loss */
void ref_gpt_backward(struct ref_gpt *g);  /* grads = d(mean loss) */
void ref_gpt_update(struct ref_gpt *g, float lr);

/* xorshift64*: the same stream on CPU and in tests/gpu; uniform in [-1, 1). */
float ref_rand(uint64_t *state);

#endif
