/* reference.c - the proxy step in plain C (see reference.h). Written for clarity, not
 * speed: the GPU kernels are judged against it, so it must be obviously right.
 */
#include "reference.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#define GELU_SCALE 0.7978845608f /* sqrt(2/pi) */

/* ---- embedding ----------------------------------------------------------------------- */

void ref_encoder_forward(float *out, const int *inp, const float *wte, const float *wpe,
			 int B, int T, int C)
{
	for (int bt = 0; bt < B * T; bt++)
		for (int c = 0; c < C; c++)
			out[(size_t)bt * C + c] =
				wte[(size_t)inp[bt] * C + c] + wpe[(size_t)(bt % T) * C + c];
}

void ref_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
			  int T, int C)
{
	for (int bt = 0; bt < B * T; bt++)
		for (int c = 0; c < C; c++) {
			dwte[(size_t)inp[bt] * C + c] += dout[(size_t)bt * C + c];
			dwpe[(size_t)(bt % T) * C + c] += dout[(size_t)bt * C + c];
		}
}

/* ---- layernorm ----------------------------------------------------------------------- */

void ref_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
			   const float *weight, const float *bias, int B, int T, int C)
{
	for (int bt = 0; bt < B * T; bt++) {
		const float *x = inp + (size_t)bt * C;
		float m = 0, v = 0, s;

		for (int c = 0; c < C; c++)
			m += x[c];
		m /= (float)C;
		for (int c = 0; c < C; c++)
			v += (x[c] - m) * (x[c] - m);
		s = 1.0f / sqrtf(v / (float)C + 1e-5f);
		for (int c = 0; c < C; c++)
			out[(size_t)bt * C + c] = (x[c] - m) * s * weight[c] + bias[c];
		mean[bt] = m;
		rstd[bt] = s;
	}
}

void ref_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			    const float *inp, const float *weight, const float *mean,
			    const float *rstd, int B, int T, int C)
{
	for (int bt = 0; bt < B * T; bt++) {
		const float *x = inp + (size_t)bt * C, *dy = dout + (size_t)bt * C;
		float dnorm_mean = 0, dnorm_norm_mean = 0;

		for (int c = 0; c < C; c++) {
			float norm = (x[c] - mean[bt]) * rstd[bt], dnorm = weight[c] * dy[c];

			dnorm_mean += dnorm;
			dnorm_norm_mean += dnorm * norm;
		}
		dnorm_mean /= (float)C;
		dnorm_norm_mean /= (float)C;
		for (int c = 0; c < C; c++) {
			float norm = (x[c] - mean[bt]) * rstd[bt], dnorm = weight[c] * dy[c];

			dbias[c] += dy[c];
			dweight[c] += norm * dy[c];
			dinp[(size_t)bt * C + c] +=
				(dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[bt];
		}
	}
}

/* ---- matmul -------------------------------------------------------------------------- */

void ref_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
			int B, int T, int C, int OC)
{
	for (int bt = 0; bt < B * T; bt++)
		for (int o = 0; o < OC; o++) {
			float acc = bias ? bias[o] : 0;

			for (int c = 0; c < C; c++)
				acc += inp[(size_t)bt * C + c] * weight[(size_t)o * C + c];
			out[(size_t)bt * OC + o] = acc;
		}
}

void ref_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			 const float *inp, const float *weight, int B, int T, int C, int OC)
{
	for (int bt = 0; bt < B * T; bt++)
		for (int o = 0; o < OC; o++) {
			float d = dout[(size_t)bt * OC + o];

			if (dbias)
				dbias[o] += d;
			for (int c = 0; c < C; c++) {
				dinp[(size_t)bt * C + c] += weight[(size_t)o * C + c] * d;
				dweight[(size_t)o * C + c] += inp[(size_t)bt * C + c] * d;
			}
		}
}

/* ---- attention ----------------------------------------------------------------------- */

/* qkv (B,T,3C): per token [q | k | v], head h at channels h*HS..(h+1)*HS of each */
void ref_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
			   int NH)
{
	int HS = C / NH;
	float scale = 1.0f / sqrtf((float)HS);

	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * HS;
				float *a = att + (((size_t)b * NH + h) * T + t) * T, max = -INFINITY;
				float sum = 0, *o = out + ((size_t)b * T + t) * C + h * HS;

				for (int u = 0; u <= t; u++) {
					const float *k = qkv + ((size_t)b * T + u) * 3 * C + C + h * HS;
					float dot = 0;

					for (int i = 0; i < HS; i++)
						dot += q[i] * k[i];
					a[u] = dot * scale;
					max = a[u] > max ? a[u] : max;
				}
				for (int u = 0; u <= t; u++)
					sum += a[u] = expf(a[u] - max);
				for (int u = 0; u < T; u++)
					a[u] = u <= t ? a[u] / sum : 0;
				for (int i = 0; i < HS; i++)
					o[i] = 0;
				for (int u = 0; u <= t; u++) {
					const float *v = qkv + ((size_t)b * T + u) * 3 * C + 2 * C + h * HS;

					for (int i = 0; i < HS; i++)
						o[i] += a[u] * v[i];
				}
			}
}

void ref_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
			    int B, int T, int C, int NH)
{
	int HS = C / NH;
	float scale = 1.0f / sqrtf((float)HS);
	float *datt = malloc((size_t)T * sizeof(float));

	if (!datt)
		abort(); /* test-size buffers: T floats */
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				const float *a = att + (((size_t)b * NH + h) * T + t) * T;
				const float *dy = dout + ((size_t)b * T + t) * C + h * HS;
				const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * HS;
				float *dq = dqkv + ((size_t)b * T + t) * 3 * C + h * HS, dot = 0;

				for (int u = 0; u <= t; u++) {
					size_t ru = ((size_t)b * T + u) * 3 * C + h * HS;

					datt[u] = 0;
					for (int i = 0; i < HS; i++) {
						datt[u] += dy[i] * qkv[ru + 2 * C + i];
						dqkv[ru + 2 * C + i] += a[u] * dy[i];
					}
					dot += datt[u] * a[u];
				}
				for (int u = 0; u <= t; u++) {
					size_t ru = ((size_t)b * T + u) * 3 * C + h * HS;
					float dpre = a[u] * (datt[u] - dot) * scale;

					for (int i = 0; i < HS; i++) {
						dq[i] += dpre * qkv[ru + C + i];
						dqkv[ru + C + i] += dpre * q[i];
					}
				}
			}
	free(datt);
}

/* ---- GELU (tanh approximation, as GPT-2), residual ----------------------------------- */

void ref_gelu_forward(float *out, const float *inp, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float x = inp[i];

		out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + 0.044715f * x * x * x)));
	}
}

void ref_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float x = inp[i], u = GELU_SCALE * (x + 0.044715f * x * x * x), th = tanhf(u);
		float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);

		dinp[i] += (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du) * dout[i];
	}
}

void ref_residual_forward(float *out, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = a[i] + b[i];
}

/* ---- loss ---------------------------------------------------------------------------- */

void ref_crossentropy_softmax(float *probs, float *losses, float *dlogits, const float *logits,
			      const int *targets, int B, int T, int V)
{
	float inv = 1.0f / (float)(B * T);

	for (int bt = 0; bt < B * T; bt++) {
		const float *x = logits + (size_t)bt * V;
		float *p = probs + (size_t)bt * V, *d = dlogits + (size_t)bt * V;
		float max = -INFINITY, sum = 0;

		for (int i = 0; i < V; i++)
			max = x[i] > max ? x[i] : max;
		for (int i = 0; i < V; i++)
			sum += p[i] = expf(x[i] - max);
		for (int i = 0; i < V; i++)
			p[i] /= sum;
		losses[bt] = -logf(p[targets[bt]]);
		for (int i = 0; i < V; i++)
			d[i] = (p[i] - (i == targets[bt] ? 1.0f : 0.0f)) * inv;
	}
}

/* ---- AdamW --------------------------------------------------------------------------- */

void ref_adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr,
	       float beta1, float beta2, float eps, float weight_decay, int t)
{
	float c1 = 1.0f - powf(beta1, (float)t), c2 = 1.0f - powf(beta2, (float)t);

	for (size_t i = 0; i < n; i++) {
		m[i] = beta1 * m[i] + (1 - beta1) * grads[i];
		v[i] = beta2 * v[i] + (1 - beta2) * grads[i] * grads[i];
		params[i] -= lr * ((m[i] / c1) / (sqrtf(v[i] / c2) + eps) + weight_decay * params[i]);
	}
}

/* ---- the whole model ----------------------------------------------------------------- */

float ref_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return (float)((x * 0x2545F4914F6CDD1DULL) >> 40) / (float)(1u << 23) - 1.0f;
}

static void carve(float *base, const uint64_t *elems, int count, float **out)
{
	for (int i = 0; i < count; i++) {
		out[i] = base;
		base += elems[i];
	}
}

/* GPT-2's initialisation (ab_param_init), from the reference's own random stream. */
static void init_params(struct ref_gpt *g, uint64_t seed)
{
	struct ab_model_layout lay;

	ab_model_layout(&g->m, g->B, &lay);
	for (int p = 0; p < AB_P_COUNT; p++) {
		float constant, scale = ab_param_init(&g->m, (enum ab_param)p, &constant);

		for (uint64_t i = 0; i < lay.param_elems[p]; i++) {
			float r = ref_rand(&seed); /* drawn for every element: one stream */

			g->param[p][i] = scale ? r * scale : constant;
		}
	}
}

/* Random tokens below vocab as inputs and the next token as targets. */
static void ref_gpt_tokens(struct ref_gpt *g, uint64_t seed);

int ref_gpt_init(struct ref_gpt *g, const struct ab_model *m, int B, uint64_t seed, char *err,
		 size_t errlen)
{
	struct ab_model_layout lay;
	size_t BT = (size_t)B * (size_t)m->seq, wide, nscratch;

	memset(g, 0, sizeof(*g));
	g->m = *m;
	g->m.recompute = false;
	g->B = B;
	ab_model_layout(&g->m, B, &lay);
	g->nparams = lay.nparams;
	for (int i = 0; i < AB_A_COUNT; i++)
		g->nacts += lay.act_elems[i];
	wide = (size_t)(3 * m->hidden > m->ffn ? 3 * m->hidden : m->ffn);
	nscratch = BT * (size_t)m->hidden + 2 * BT * wide + (size_t)B * (size_t)m->heads * (size_t)m->seq;
	/* calloc may hand back untouched zero pages: resident memory would not show them */
	g->params = malloc(g->nparams * sizeof(float));
	g->grads = malloc(g->nparams * sizeof(float));
	g->adam_m = malloc(g->nparams * sizeof(float));
	g->adam_v = malloc(g->nparams * sizeof(float));
	g->acts = malloc(g->nacts * sizeof(float));
	g->scratch = malloc(nscratch * sizeof(float));
	g->inputs = malloc(BT * sizeof(int));
	g->targets = malloc(BT * sizeof(int));
	if (!g->params || !g->grads || !g->adam_m || !g->adam_v || !g->acts || !g->scratch ||
	    !g->inputs || !g->targets) {
		ref_gpt_free(g);
		return ab_fail(err, errlen, ENOMEM, "out of memory allocating the reference model "
						    "at batch %d",
			       B);
	}
	memset(g->grads, 0, g->nparams * sizeof(float));
	memset(g->adam_m, 0, g->nparams * sizeof(float));
	memset(g->adam_v, 0, g->nparams * sizeof(float));
	memset(g->acts, 0, g->nacts * sizeof(float));
	memset(g->scratch, 0, nscratch * sizeof(float));
	carve(g->params, lay.param_elems, AB_P_COUNT, g->param);
	carve(g->grads, lay.param_elems, AB_P_COUNT, g->grad);
	carve(g->acts, lay.act_elems, AB_A_COUNT, g->act);
	init_params(g, seed);
	ref_gpt_tokens(g, seed ^ 0x9E3779B97F4A7C15ULL);
	return 0;
}

void ref_gpt_free(struct ref_gpt *g)
{
	free(g->params);
	free(g->grads);
	free(g->adam_m);
	free(g->adam_v);
	free(g->acts);
	free(g->scratch);
	free(g->inputs);
	free(g->targets);
	memset(g, 0, sizeof(*g));
}

static void ref_gpt_tokens(struct ref_gpt *g, uint64_t seed)
{
	size_t BT = (size_t)g->B * (size_t)g->m.seq;

	for (size_t i = 0; i <= BT; i++) {
		int tok = (int)((ref_rand(&seed) + 1.0f) * 0.5f * (float)g->m.vocab) %
			  (int)g->m.vocab;

		if (i < BT)
			g->inputs[i] = tok;
		if (i > 0)
			g->targets[i - 1] = tok;
	}
}

/* Per-layer slices of the parameters and activations. */
#define LP(g, p, l, n) ((g)->param[p] + (size_t)(l) * (n))
#define LA(g, a, l, n) ((g)->act[a] + (size_t)(l) * (n))

float ref_gpt_forward(struct ref_gpt *g)
{
	int B = g->B, T = (int)g->m.seq, C = (int)g->m.hidden, NH = (int)g->m.heads;
	int F = (int)g->m.ffn, V = (int)g->m.vocab;
	size_t BTC = (size_t)B * T * C, BTF = (size_t)B * T * F, BT = (size_t)B * T;
	const float *residual = g->act[AB_A_ENCODED];
	float loss = 0;

	ref_encoder_forward(g->act[AB_A_ENCODED], g->inputs, g->param[AB_P_WTE],
			    g->param[AB_P_WPE], B, T, C);
	for (int l = 0; l < g->m.layers; l++) {
		float *ln1 = LA(g, AB_A_LN1, l, BTC), *st1 = LA(g, AB_A_LN1_STATS, l, 2 * BT);
		float *qkv = LA(g, AB_A_QKVR, l, 3 * BTC), *att = LA(g, AB_A_ATT, l, BT * NH * T);
		float *atty = LA(g, AB_A_ATTY, l, BTC), *res2 = LA(g, AB_A_RESIDUAL2, l, BTC);
		float *ln2 = LA(g, AB_A_LN2, l, BTC), *st2 = LA(g, AB_A_LN2_STATS, l, 2 * BT);
		float *fch = LA(g, AB_A_FCH, l, BTF), *gel = LA(g, AB_A_FCH_GELU, l, BTF);
		float *res3 = LA(g, AB_A_RESIDUAL3, l, BTC), *tmp = g->scratch;

		ref_layernorm_forward(ln1, st1, st1 + BT, residual, LP(g, AB_P_LN1W, l, C),
				      LP(g, AB_P_LN1B, l, C), B, T, C);
		ref_matmul_forward(qkv, ln1, LP(g, AB_P_QKVW, l, 3 * C * C),
				   LP(g, AB_P_QKVB, l, 3 * C), B, T, C, 3 * C);
		ref_attention_forward(atty, att, qkv, B, T, C, NH);
		ref_matmul_forward(tmp, atty, LP(g, AB_P_ATTPROJW, l, C * C),
				   LP(g, AB_P_ATTPROJB, l, C), B, T, C, C);
		ref_residual_forward(res2, residual, tmp, BTC);
		ref_layernorm_forward(ln2, st2, st2 + BT, res2, LP(g, AB_P_LN2W, l, C),
				      LP(g, AB_P_LN2B, l, C), B, T, C);
		ref_matmul_forward(fch, ln2, LP(g, AB_P_FCW, l, (size_t)F * C),
				   LP(g, AB_P_FCB, l, F), B, T, C, F);
		ref_gelu_forward(gel, fch, BTF);
		ref_matmul_forward(tmp, gel, LP(g, AB_P_FCPROJW, l, (size_t)F * C),
				   LP(g, AB_P_FCPROJB, l, C), B, T, F, C);
		ref_residual_forward(res3, res2, tmp, BTC);
		residual = res3;
	}
	ref_layernorm_forward(g->act[AB_A_LNF], g->act[AB_A_LNF_STATS],
			      g->act[AB_A_LNF_STATS] + BT, residual, g->param[AB_P_LNFW],
			      g->param[AB_P_LNFB], B, T, C);
	ref_matmul_forward(g->act[AB_A_LOGITS], g->act[AB_A_LNF], g->param[AB_P_WTE], NULL, B, T,
			   C, V);
	ref_crossentropy_softmax(g->act[AB_A_LOGITS], g->act[AB_A_LOSSES], g->act[AB_A_LOGITS],
				 g->act[AB_A_LOGITS], g->targets, B, T, V);
	for (size_t i = 0; i < BT; i++)
		loss += g->act[AB_A_LOSSES][i];
	return loss / (float)BT;
}

/* One layer's backward: dres (B,T,C) holds d(layer output) and becomes d(layer input). */
static void layer_backward(struct ref_gpt *g, int l, float *dres)
{
	int B = g->B, T = (int)g->m.seq, C = (int)g->m.hidden, NH = (int)g->m.heads;
	int F = (int)g->m.ffn;
	size_t BTC = (size_t)B * T * C, BTF = (size_t)B * T * F, BT = (size_t)B * T;
	size_t wide = (size_t)(3 * C > F ? 3 * C : F) * BT;
	const float *input = l ? LA(g, AB_A_RESIDUAL3, l - 1, BTC) : g->act[AB_A_ENCODED];
	float *d1 = g->scratch + BTC, *d2 = d1 + wide;

	/* MLP: res3 = res2 + fcproj(gelu(fc(ln2(res2)))) */
	memset(d1, 0, BTF * sizeof(float));
	ref_matmul_backward(d1, g->grad[AB_P_FCPROJW] + (size_t)l * F * C,
			    g->grad[AB_P_FCPROJB] + (size_t)l * C, dres, LA(g, AB_A_FCH_GELU, l, BTF),
			    LP(g, AB_P_FCPROJW, l, (size_t)F * C), B, T, F, C);
	memset(d2, 0, BTF * sizeof(float));
	ref_gelu_backward(d2, LA(g, AB_A_FCH, l, BTF), d1, BTF);
	memset(d1, 0, BTC * sizeof(float));
	ref_matmul_backward(d1, g->grad[AB_P_FCW] + (size_t)l * F * C,
			    g->grad[AB_P_FCB] + (size_t)l * F, d2, LA(g, AB_A_LN2, l, BTC),
			    LP(g, AB_P_FCW, l, (size_t)F * C), B, T, C, F);
	ref_layernorm_backward(dres, g->grad[AB_P_LN2W] + (size_t)l * C,
			       g->grad[AB_P_LN2B] + (size_t)l * C, d1, LA(g, AB_A_RESIDUAL2, l, BTC),
			       LP(g, AB_P_LN2W, l, C), LA(g, AB_A_LN2_STATS, l, 2 * BT),
			       LA(g, AB_A_LN2_STATS, l, 2 * BT) + BT, B, T, C);
	/* attention: res2 = input + attproj(attention(qkv(ln1(input)))) */
	memset(d1, 0, BTC * sizeof(float));
	ref_matmul_backward(d1, g->grad[AB_P_ATTPROJW] + (size_t)l * C * C,
			    g->grad[AB_P_ATTPROJB] + (size_t)l * C, dres, LA(g, AB_A_ATTY, l, BTC),
			    LP(g, AB_P_ATTPROJW, l, (size_t)C * C), B, T, C, C);
	memset(d2, 0, 3 * BTC * sizeof(float));
	ref_attention_backward(d2, d1, LA(g, AB_A_QKVR, l, 3 * BTC), LA(g, AB_A_ATT, l, BT * NH * T),
			       B, T, C, NH);
	memset(d1, 0, BTC * sizeof(float));
	ref_matmul_backward(d1, g->grad[AB_P_QKVW] + (size_t)l * 3 * C * C,
			    g->grad[AB_P_QKVB] + (size_t)l * 3 * C, d2, LA(g, AB_A_LN1, l, BTC),
			    LP(g, AB_P_QKVW, l, (size_t)3 * C * C), B, T, C, 3 * C);
	ref_layernorm_backward(dres, g->grad[AB_P_LN1W] + (size_t)l * C,
			       g->grad[AB_P_LN1B] + (size_t)l * C, d1, input, LP(g, AB_P_LN1W, l, C),
			       LA(g, AB_A_LN1_STATS, l, 2 * BT), LA(g, AB_A_LN1_STATS, l, 2 * BT) + BT,
			       B, T, C);
}

void ref_gpt_backward(struct ref_gpt *g)
{
	int B = g->B, T = (int)g->m.seq, C = (int)g->m.hidden, V = (int)g->m.vocab;
	size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;
	float *dres = g->scratch;
	const float *last = g->act[AB_A_RESIDUAL3] + (size_t)(g->m.layers - 1) * BTC;
	float *dlnf = g->scratch + BTC; /* first wide buffer, free until the layers */

	memset(g->grads, 0, g->nparams * sizeof(float));
	memset(dlnf, 0, BTC * sizeof(float));
	/* the forward left d(loss)/d(logits) in the logits buffer */
	ref_matmul_backward(dlnf, g->grad[AB_P_WTE], NULL, g->act[AB_A_LOGITS], g->act[AB_A_LNF],
			    g->param[AB_P_WTE], B, T, C, V);
	memset(dres, 0, BTC * sizeof(float));
	ref_layernorm_backward(dres, g->grad[AB_P_LNFW], g->grad[AB_P_LNFB], dlnf, last,
			       g->param[AB_P_LNFW], g->act[AB_A_LNF_STATS],
			       g->act[AB_A_LNF_STATS] + BT, B, T, C);
	for (int l = (int)g->m.layers - 1; l >= 0; l--)
		layer_backward(g, l, dres);
	ref_encoder_backward(g->grad[AB_P_WTE], g->grad[AB_P_WPE], dres, g->inputs, B, T, C);
}

void ref_gpt_update(struct ref_gpt *g, float lr)
{
	ref_adamw(g->params, g->grads, g->adam_m, g->adam_v, g->nparams, lr, 0.9f, 0.95f, 1e-8f,
		  0.1f, ++g->step);
}
