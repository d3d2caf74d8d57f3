/* gpt.cu - the proxy model: sizes from ab_model_layout, one cudaMalloc per buffer group,
 * the layer loop of forward and backward (with optional per-layer recomputation), AdamW,
 * and the model-mode trial. Shapes: B batch, T seq, C hidden, NH heads, F ffn, V vocab.
 */
#include <algorithm>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#include "gpt.h"
#include "layers.cuh"

static int report(int rc, const char *doing, char *err, size_t errlen)
{
	if (rc && err && errlen)
		snprintf(err, errlen, "%s: %s", doing,
			 rc == -ENOMEM ? "out of GPU memory" : ab_kernels_message());
	return rc;
}

/* ---- the model ---------------------------------------------------------------------- */

struct profiler;

struct ab_gpt {
	struct ab_model m;
	int B;
	struct ab_model_layout lay;
	cublasHandle_t cublas;
	void *workspace;
	void *params, *grads;       /* dtype, nparams */
	float *master, *adam_m, *adam_v;
	void *acts, *scratch;
	int *inputs, *targets;      /* (B,T) */
	void *param[AB_P_COUNT], *grad[AB_P_COUNT], *act[AB_A_COUNT];
	void *dres, *buf1, *buf2, *datt; /* scratch: (B,T,C), 2 x (B,T,max(3C,F)), (B,NH,T,T) */
	size_t datt_bytes;
	bool flash;                 /* attention by flash_attention.cu (bf16, fitting shapes) */
	bool step_flash;            /* what this step's forward took: its backward takes it too */
	int step;
	struct profiler *prof;      /* set while ab_gpt_profile_step runs */
};

/* where bias and layernorm parameter gradients keep their chunks' sums (column_sums):
 * d(attention scores), free at every such call (it lives inside attention_backward) */
#define SCRATCH(g) (float *)(g)->datt, (g)->datt_bytes

static size_t align_up(size_t n)
{
	return (n + 255) & ~(size_t)255;
}

/* carves base into count pieces of elems[i] * bytes[i] (256-byte aligned) */
static size_t carve(void *base, const uint64_t *elems, const size_t *bytes, size_t one,
		    int count, void **out)
{
	size_t off = 0;

	for (int i = 0; i < count; i++) {
		if (out)
			out[i] = (char *)base + off;
		off += align_up(elems[i] * (bytes ? bytes[i] : one));
	}
	return off;
}

static void free_all(struct ab_gpt *g)
{
	void *bufs[] = {g->workspace, g->params, g->grads, g->master, g->adam_m,
			g->adam_v,    g->acts,   g->scratch, g->inputs, g->targets};

	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		if (bufs[i])
			cudaFree(bufs[i]);
	if (g->cublas)
		cublasDestroy(g->cublas);
	cudaGetLastError();
}

static int allocate(struct ab_gpt *g)
{
	const struct ab_model_layout *l = &g->lay;
	size_t x = ab_dtype_bytes(g->m.dtype), BT = (size_t)g->B * g->m.seq;
	size_t C = (size_t)g->m.hidden, wide = std::max(3 * C, (size_t)g->m.ffn);
	size_t pbytes = carve(NULL, l->param_elems, NULL, x, AB_P_COUNT, NULL);
	size_t abytes = carve(NULL, l->act_elems, l->act_bytes_per_elem, 0, AB_A_COUNT, NULL);
	size_t dres = align_up(BT * C * x), buf = align_up(BT * wide * x);
	size_t datt = align_up((size_t)g->B * g->m.heads * g->m.seq * g->m.seq * x);

	CUBLAS_CHECK(cublasCreate(&g->cublas));
	CUDA_CHECK(cudaMalloc(&g->workspace, AB_CUBLAS_WORKSPACE));
	CUBLAS_CHECK(cublasSetWorkspace(g->cublas, g->workspace, AB_CUBLAS_WORKSPACE));
	CUDA_CHECK(cudaMalloc(&g->params, pbytes));
	CUDA_CHECK(cudaMalloc(&g->grads, pbytes));
	if (g->m.dtype == AB_DTYPE_BF16)
		CUDA_CHECK(cudaMalloc((void **)&g->master, l->nparams * sizeof(float)));
	CUDA_CHECK(cudaMalloc((void **)&g->adam_m, l->nparams * sizeof(float)));
	CUDA_CHECK(cudaMalloc((void **)&g->adam_v, l->nparams * sizeof(float)));
	CUDA_CHECK(cudaMalloc(&g->acts, abytes));
	CUDA_CHECK(cudaMalloc(&g->scratch, dres + 2 * buf + datt));
	CUDA_CHECK(cudaMalloc((void **)&g->inputs, BT * sizeof(int)));
	CUDA_CHECK(cudaMalloc((void **)&g->targets, BT * sizeof(int)));
	carve(g->params, l->param_elems, NULL, x, AB_P_COUNT, g->param);
	carve(g->grads, l->param_elems, NULL, x, AB_P_COUNT, g->grad);
	carve(g->acts, l->act_elems, l->act_bytes_per_elem, 0, AB_A_COUNT, g->act);
	g->dres = g->scratch;
	g->buf1 = (char *)g->scratch + dres;
	g->buf2 = (char *)g->buf1 + buf;
	g->datt = (char *)g->buf2 + buf;
	g->datt_bytes = datt;
	/* parameters are laid out contiguously in the fp32 buffers: offsets differ from the
	 * aligned dtype buffers only by padding, so the moments need no carving */
	CUDA_CHECK(cudaMemset(g->adam_m, 0, l->nparams * sizeof(float)));
	CUDA_CHECK(cudaMemset(g->adam_v, 0, l->nparams * sizeof(float)));
	/* touch the activations and scratch: memory that is only reserved is still reserved */
	CUDA_CHECK(cudaMemset(g->acts, 0, abytes));
	CUDA_CHECK(cudaMemset(g->scratch, 0, dres + 2 * buf + datt));
	return 0;
}

/* ---- initialisation ----------------------------------------------------------------- */

__device__ __forceinline__ float hash_uniform(uint64_t seed, size_t i)
{
	uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ULL;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return (float)(z >> 40) / (float)(1u << 23) - 1.0f;
}

/* scale 0: the constant; else uniform in [-scale, scale) */
template <typename T>
__global__ void init_kernel(T *p, size_t n, float scale, float constant, uint64_t seed)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		p[i] = from_f<T>(scale ? hash_uniform(seed, i) * scale : constant);
}

template <typename T> __global__ void widen_kernel(float *out, const T *in, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		out[i] = to_f(in[i]);
}

/* GPT-2's initialisation (ab_param_init), as the CPU reference does it */
template <typename T> static int init_params(struct ab_gpt *g, uint64_t seed)
{
	for (int p = 0; p < AB_P_COUNT; p++) {
		size_t n = g->lay.param_elems[p];
		float constant, scale = ab_param_init(&g->m, (enum ab_param)p, &constant);

		init_kernel<<<grid_for(n, 256), 256>>>((T *)g->param[p], n, scale, constant,
						       seed + (uint64_t)p);
		LAUNCH_CHECK();
	}
	return 0;
}

/* the fp32 master and the dtype copy hold the same values (padding aside) */
template <typename T> static int sync_master(struct ab_gpt *g)
{
	size_t off = 0;

	if (!g->master)
		return 0;
	for (int p = 0; p < AB_P_COUNT; p++) {
		size_t n = g->lay.param_elems[p];

		widen_kernel<<<grid_for(n, 256), 256>>>(g->master + off, (const T *)g->param[p], n);
		LAUNCH_CHECK();
		off += n;
	}
	return 0;
}

/* ---- forward ------------------------------------------------------------------------ */

#define PARAM(g, p, l) ((T *)(g)->param[p] + (size_t)(l) * ((g)->lay.param_elems[p] / (g)->m.layers))
#define GRAD(g, p, l) ((T *)(g)->grad[p] + (size_t)(l) * ((g)->lay.param_elems[p] / (g)->m.layers))
/* per-layer activations: slot l, or slot 0 when the layer is recomputed in backward */
#define ACT(g, a, T_, l) ((T_ *)(g)->act[a] + (size_t)((g)->m.recompute ? 0 : (l)) * \
			  ((g)->lay.act_elems[a] / ((g)->m.recompute ? 1 : (g)->m.layers)))
#define RES3(g, l) ((T *)(g)->act[AB_A_RESIDUAL3] + (size_t)(l) * (size_t)(g)->B * (g)->m.seq * (g)->m.hidden)

/* ---- where a step's time goes ------------------------------------------------------ */

/* A profiled step's CUDA events: a start and an end around each launcher call, by kind.
 * The events cost nothing when no profile runs (g->prof is NULL). */
struct profiler {
	std::vector<cudaEvent_t> ev; /* start, end, start, end, ... */
	std::vector<int> kind;       /* one per pair */
};

/* records an event on the step's stream: a start of `kind`, or with kind < 0 an end */
static int mark(struct ab_gpt *g, int kind)
{
	cudaEvent_t e;

	if (!g->prof)
		return 0;
	CUDA_CHECK(cudaEventCreate(&e));
	g->prof->ev.push_back(e);
	if (kind >= 0)
		g->prof->kind.push_back(kind);
	CUDA_CHECK(cudaEventRecord(e, 0));
	return 0;
}

/* K(kind, launcher(...)): the launcher, timed as `kind` while a profile runs */
#define K(kind, call)                                                                      \
	do {                                                                               \
		TRY(mark(g, kind));                                                        \
		TRY(call);                                                                 \
		TRY(mark(g, -1));                                                          \
	} while (0)

template <typename T> static const T *layer_input(struct ab_gpt *g, int l)
{
	return l ? RES3(g, l - 1) : (const T *)g->act[AB_A_ENCODED];
}

template <typename T> static int layer_forward(struct ab_gpt *g, int l)
{
	int B = g->B, Tn = (int)g->m.seq, C = (int)g->m.hidden, NH = (int)g->m.heads;
	int F = (int)g->m.ffn, BT = B * Tn;
	size_t BTC = (size_t)BT * C;
	const T *input = layer_input<T>(g, l);
	float *st1 = ACT(g, AB_A_LN1_STATS, float, l), *st2 = ACT(g, AB_A_LN2_STATS, float, l);
	T *ln1 = ACT(g, AB_A_LN1, T, l), *qkvr = ACT(g, AB_A_QKVR, T, l);
	T *att = ACT(g, AB_A_ATT, T, l), *atty = ACT(g, AB_A_ATTY, T, l);
	T *res2 = ACT(g, AB_A_RESIDUAL2, T, l), *ln2 = ACT(g, AB_A_LN2, T, l);
	T *fch = ACT(g, AB_A_FCH, T, l), *gel = ACT(g, AB_A_FCH_GELU, T, l);
	T *buf1 = (T *)g->buf1, *buf2 = (T *)g->buf2;
	cublasHandle_t h = g->cublas;

	K(AB_K_LAYERNORM, layernorm_forward<T>(ln1, st1, st1 + BT, input, PARAM(g, AB_P_LN1W, l),
					       PARAM(g, AB_P_LN1B, l), BT, C, 0));
	if (g->step_flash) {
		/* qkvr holds qkv as the matmul writes it; att's buffer the row sums */
		K(AB_K_MATMUL, matmul_forward<T>(h, qkvr, ln1, PARAM(g, AB_P_QKVW, l),
						 PARAM(g, AB_P_QKVB, l), BT, C, 3 * C, 0));
		K(AB_K_ATTENTION, flash_attention_forward<T>(atty, (float *)att, qkvr, B, Tn, C,
							     NH, 0));
	} else {
		K(AB_K_MATMUL, matmul_forward<T>(h, buf1, ln1, PARAM(g, AB_P_QKVW, l),
						 PARAM(g, AB_P_QKVB, l), BT, C, 3 * C, 0));
		K(AB_K_ATTENTION, attention_forward<T>(h, atty, qkvr, att, (T *)g->datt, buf1,
						       buf1, B, Tn, C, NH, 0));
	}
	K(AB_K_MATMUL, matmul_forward<T>(h, buf2, atty, PARAM(g, AB_P_ATTPROJW, l),
					 PARAM(g, AB_P_ATTPROJB, l), BT, C, C, 0));
	K(AB_K_RESIDUAL, residual_forward<T>(res2, input, buf2, BTC, 0));
	K(AB_K_LAYERNORM, layernorm_forward<T>(ln2, st2, st2 + BT, res2, PARAM(g, AB_P_LN2W, l),
					       PARAM(g, AB_P_LN2B, l), BT, C, 0));
	K(AB_K_MATMUL, matmul_forward<T>(h, fch, ln2, PARAM(g, AB_P_FCW, l),
					 PARAM(g, AB_P_FCB, l), BT, C, F, 0));
	K(AB_K_GELU, gelu_forward<T>(gel, fch, (size_t)BT * F, 0));
	K(AB_K_MATMUL, matmul_forward<T>(h, buf2, gel, PARAM(g, AB_P_FCPROJW, l),
					 PARAM(g, AB_P_FCPROJB, l), BT, F, C, 0));
	K(AB_K_RESIDUAL, residual_forward<T>(RES3(g, l), res2, buf2, BTC, 0));
	return 0;
}

template <typename T> static int forward(struct ab_gpt *g)
{
	int B = g->B, Tn = (int)g->m.seq, C = (int)g->m.hidden, V = (int)g->m.vocab, BT = B * Tn;
	float *stf = (float *)g->act[AB_A_LNF_STATS];

	g->step_flash = g->flash; /* ab_gpt_set_flash between forward and backward waits */
	K(AB_K_EMBEDDING, encoder_forward<T>((T *)g->act[AB_A_ENCODED], g->inputs,
					     (T *)g->param[AB_P_WTE], (T *)g->param[AB_P_WPE], B,
					     Tn, C, 0));
	for (int l = 0; l < g->m.layers; l++)
		TRY(layer_forward<T>(g, l));
	K(AB_K_LAYERNORM, layernorm_forward<T>((T *)g->act[AB_A_LNF], stf, stf + BT,
					       RES3(g, g->m.layers - 1), (T *)g->param[AB_P_LNFW],
					       (T *)g->param[AB_P_LNFB], BT, C, 0));
	K(AB_K_MATMUL, matmul_forward<T>(g->cublas, (T *)g->act[AB_A_LOGITS],
					 (T *)g->act[AB_A_LNF], (T *)g->param[AB_P_WTE],
					 (const T *)NULL, BT, C, V, 0));
	K(AB_K_LOSS, crossentropy_softmax<T>((T *)g->act[AB_A_LOGITS],
					     (float *)g->act[AB_A_LOSSES], g->targets, (size_t)BT,
					     V, 0));
	return 0;
}

/* ---- backward ----------------------------------------------------------------------- */

/* dres (B,T,C) holds d(layer l's output) and leaves holding d(its input) */
template <typename T> static int layer_backward(struct ab_gpt *g, int l)
{
	int B = g->B, Tn = (int)g->m.seq, C = (int)g->m.hidden, NH = (int)g->m.heads;
	int F = (int)g->m.ffn, BT = B * Tn;
	float *st1 = ACT(g, AB_A_LN1_STATS, float, l), *st2 = ACT(g, AB_A_LN2_STATS, float, l);
	T *dres = (T *)g->dres, *buf1 = (T *)g->buf1, *buf2 = (T *)g->buf2;
	cublasHandle_t h = g->cublas;

	/* MLP */
	K(AB_K_MATMUL, matmul_backward<T>(h, buf1, GRAD(g, AB_P_FCPROJW, l),
					  GRAD(g, AB_P_FCPROJB, l), dres,
					  ACT(g, AB_A_FCH_GELU, T, l), PARAM(g, AB_P_FCPROJW, l),
					  BT, F, C, SCRATCH(g), 0));
	K(AB_K_GELU, gelu_backward<T>(buf1, ACT(g, AB_A_FCH, T, l), buf1, (size_t)BT * F, 0));
	K(AB_K_MATMUL, matmul_backward<T>(h, buf2, GRAD(g, AB_P_FCW, l), GRAD(g, AB_P_FCB, l),
					  buf1, ACT(g, AB_A_LN2, T, l), PARAM(g, AB_P_FCW, l), BT,
					  C, F, SCRATCH(g), 0));
	K(AB_K_LAYERNORM, layernorm_backward<T>(dres, GRAD(g, AB_P_LN2W, l),
						GRAD(g, AB_P_LN2B, l), buf2,
						ACT(g, AB_A_RESIDUAL2, T, l),
						PARAM(g, AB_P_LN2W, l), st2, st2 + BT, BT, C,
						SCRATCH(g), 0));
	/* attention */
	K(AB_K_MATMUL, matmul_backward<T>(h, buf2, GRAD(g, AB_P_ATTPROJW, l),
					  GRAD(g, AB_P_ATTPROJB, l), dres,
					  ACT(g, AB_A_ATTY, T, l), PARAM(g, AB_P_ATTPROJW, l), BT,
					  C, C, SCRATCH(g), 0));
	if (g->step_flash)
		K(AB_K_ATTENTION,
		  flash_attention_backward<T>(buf1, (float *)g->datt, buf2, ACT(g, AB_A_ATTY, T, l),
					      ACT(g, AB_A_QKVR, T, l),
					      (const float *)ACT(g, AB_A_ATT, T, l), B, Tn, C, NH, 0));
	else
		K(AB_K_ATTENTION, attention_backward<T>(h, buf1, (T *)g->datt, buf2, buf1, buf2,
							ACT(g, AB_A_QKVR, T, l),
							ACT(g, AB_A_ATT, T, l), B, Tn, C, NH, 0));
	K(AB_K_MATMUL, matmul_backward<T>(h, buf2, GRAD(g, AB_P_QKVW, l), GRAD(g, AB_P_QKVB, l),
					  buf1, ACT(g, AB_A_LN1, T, l), PARAM(g, AB_P_QKVW, l),
					  BT, C, 3 * C, SCRATCH(g), 0));
	K(AB_K_LAYERNORM, layernorm_backward<T>(dres, GRAD(g, AB_P_LN1W, l),
						GRAD(g, AB_P_LN1B, l), buf2, layer_input<T>(g, l),
						PARAM(g, AB_P_LN1W, l), st1, st1 + BT, BT, C,
						SCRATCH(g), 0));
	return 0;
}

template <typename T> static int backward(struct ab_gpt *g)
{
	int B = g->B, Tn = (int)g->m.seq, C = (int)g->m.hidden, V = (int)g->m.vocab, BT = B * Tn;
	float *stf = (float *)g->act[AB_A_LNF_STATS];
	size_t x = sizeof(T);

	CUDA_CHECK(cudaMemsetAsync(g->grads, 0, carve(NULL, g->lay.param_elems, NULL, x,
						     AB_P_COUNT, NULL), 0));
	/* the forward left d(loss)/d(logits) in the logits */
	K(AB_K_MATMUL, matmul_backward<T>(g->cublas, (T *)g->buf1, (T *)g->grad[AB_P_WTE],
					  (T *)NULL, (T *)g->act[AB_A_LOGITS],
					  (T *)g->act[AB_A_LNF], (T *)g->param[AB_P_WTE], BT, C,
					  V, SCRATCH(g), 0));
	CUDA_CHECK(cudaMemsetAsync(g->dres, 0, (size_t)BT * C * x, 0));
	K(AB_K_LAYERNORM, layernorm_backward<T>((T *)g->dres, (T *)g->grad[AB_P_LNFW],
						(T *)g->grad[AB_P_LNFB], (T *)g->buf1,
						RES3(g, g->m.layers - 1),
						(T *)g->param[AB_P_LNFW], stf, stf + BT, BT, C,
						SCRATCH(g), 0));
	for (int l = (int)g->m.layers - 1; l >= 0; l--) {
		if (g->m.recompute)
			TRY(layer_forward<T>(g, l));
		TRY(layer_backward<T>(g, l));
	}
	K(AB_K_EMBEDDING, encoder_backward<T>((T *)g->grad[AB_P_WTE], (T *)g->grad[AB_P_WPE],
					      (T *)g->dres, g->inputs, B, Tn, C, 0));
	return 0;
}

/* AdamW over each parameter tensor: the fp32 buffers are contiguous, the dtype ones padded */
template <typename T> static int update(struct ab_gpt *g, float lr)
{
	size_t off = 0;

	g->step++;
	for (int p = 0; p < AB_P_COUNT; p++) {
		size_t n = g->lay.param_elems[p];

		K(AB_K_ADAMW, adamw_update<T>((T *)g->param[p],
					      g->master ? g->master + off : NULL,
					      (const T *)g->grad[p], g->adam_m + off,
					      g->adam_v + off, n, lr, 0.9f, 0.95f, 1e-8f, 0.1f,
					      g->step, 0));
		off += n;
	}
	return 0;
}

/* ---- the C API ---------------------------------------------------------------------- */

static void random_tokens(std::vector<int> &in, std::vector<int> &tg, long vocab, uint64_t seed)
{
	for (size_t i = 0; i <= in.size(); i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		int tok = (int)((seed >> 33) % (uint64_t)vocab);

		if (i < in.size())
			in[i] = tok;
		if (i > 0)
			tg[i - 1] = tok;
	}
}

static int create(struct ab_gpt *g, uint64_t seed)
{
	size_t BT = (size_t)g->B * g->m.seq;
	std::vector<int> in(BT), tg(BT);

	TRY(allocate(g));
	if (g->m.dtype == AB_DTYPE_BF16) {
		TRY(init_params<bf16>(g, seed));
		TRY(sync_master<bf16>(g));
	} else {
		TRY(init_params<float>(g, seed));
	}
	random_tokens(in, tg, g->m.vocab, seed);
	CUDA_CHECK(cudaMemcpy(g->inputs, in.data(), BT * sizeof(int), cudaMemcpyHostToDevice));
	CUDA_CHECK(cudaMemcpy(g->targets, tg.data(), BT * sizeof(int), cudaMemcpyHostToDevice));
	CUDA_CHECK(cudaDeviceSynchronize());
	return 0;
}

/* The fused attention's memory is the unfused one's: it keeps its row sums in the softmax's
 * buffer and its scratch in d(att)'s, so the step allocates, and a decision measures, the
 * same bytes either way (model.c's layout); only its time differs. */
static bool flash_fits(const struct ab_model *m)
{
	return m->dtype == AB_DTYPE_BF16 &&
	       flash_attention_fits((int)m->seq, (int)m->hidden, (int)m->heads);
}

extern "C" int ab_gpt_create(const struct ab_model *m, int B, uint64_t seed,
			     struct ab_gpt **out, char *err, size_t errlen)
{
	struct ab_gpt *g = (struct ab_gpt *)calloc(1, sizeof(*g));
	int rc;

	*out = NULL;
	if (!g)
		return report(-ENOMEM, "allocating the model", err, errlen);
	if ((double)B * (double)m->seq * (double)std::max(3 * m->hidden, m->ffn) > INT_MAX ||
	    !ab_model_sizeable(m, B)) {
		free(g);
		/* past cuBLAS's int dimensions: no GPU has the memory for it anyway */
		return report(-ENOMEM, "sizing the model", err, errlen);
	}
	g->m = *m;
	g->B = B;
	g->flash = flash_fits(m);
	ab_model_layout(m, B, &g->lay);
	if ((rc = create(g, seed)) != 0) {
		free_all(g);
		free(g);
		return report(rc, "setting up the proxy model", err, errlen);
	}
	*out = g;
	return 0;
}

extern "C" int ab_gpt_set_flash(struct ab_gpt *g, int on)
{
	if (on && !flash_fits(&g->m))
		return -EINVAL;
	g->flash = on;
	return 0;
}

extern "C" void ab_gpt_destroy(struct ab_gpt *g)
{
	if (!g)
		return;
	cudaDeviceSynchronize();
	free_all(g);
	free(g);
}

static int mean_loss(struct ab_gpt *g, float *loss)
{
	size_t BT = (size_t)g->B * g->m.seq;
	std::vector<float> losses(BT);
	double sum = 0;

	CUDA_CHECK(cudaMemcpy(losses.data(), g->act[AB_A_LOSSES], BT * sizeof(float),
			      cudaMemcpyDeviceToHost));
	for (float l : losses)
		sum += l;
	*loss = (float)(sum / (double)BT);
	return 0;
}

extern "C" int ab_gpt_forward(struct ab_gpt *g, float *loss, char *err, size_t errlen)
{
	int rc = g->m.dtype == AB_DTYPE_BF16 ? forward<bf16>(g) : forward<float>(g);

	if (rc == 0 && loss)
		rc = mean_loss(g, loss);
	return report(rc, "forward", err, errlen);
}

extern "C" int ab_gpt_backward(struct ab_gpt *g, char *err, size_t errlen)
{
	int rc = g->m.dtype == AB_DTYPE_BF16 ? backward<bf16>(g) : backward<float>(g);

	if (rc == 0)
		rc = ab_cuda_rc(cudaDeviceSynchronize(), "backward", __FILE__, __LINE__);
	return report(rc, "backward", err, errlen);
}

static int run_step(struct ab_gpt *g, float lr, float *loss)
{
	bool bf = g->m.dtype == AB_DTYPE_BF16;
	int rc = bf ? forward<bf16>(g) : forward<float>(g);

	if (rc == 0 && loss)
		rc = mean_loss(g, loss);
	if (rc == 0)
		rc = bf ? backward<bf16>(g) : backward<float>(g);
	if (rc == 0)
		rc = bf ? update<bf16>(g, lr) : update<float>(g, lr);
	if (rc == 0)
		rc = ab_cuda_rc(cudaDeviceSynchronize(), "training step", __FILE__, __LINE__);
	return rc;
}

extern "C" int ab_gpt_step(struct ab_gpt *g, float lr, float *loss, char *err, size_t errlen)
{
	return report(run_step(g, lr, loss), "training step", err, errlen);
}

const char *const ab_gpt_kind_names[AB_K_COUNT] = {
	"matmul", "attention", "layernorm", "GELU", "residual", "embedding", "loss", "AdamW"};

/* sums the pairs' times by kind; the step's own time from its first start to its last end */
static int profile_sum(struct profiler *p, struct ab_gpt_profile *out)
{
	float ms;

	for (size_t i = 0; i + 1 < p->ev.size(); i += 2) {
		int k = p->kind[i / 2];

		CUDA_CHECK(cudaEventElapsedTime(&ms, p->ev[i], p->ev[i + 1]));
		out->ms[k] += ms;
		out->launches[k]++;
	}
	if (p->ev.size() >= 2) {
		CUDA_CHECK(cudaEventElapsedTime(&ms, p->ev.front(), p->ev.back()));
		out->step_ms = ms;
	}
	return 0;
}

extern "C" int ab_gpt_profile_step(struct ab_gpt *g, float lr, float *loss,
				   struct ab_gpt_profile *out, char *err, size_t errlen)
{
	struct profiler p;
	int rc;

	memset(out, 0, sizeof(*out));
	g->prof = &p;
	rc = run_step(g, lr, loss);
	g->prof = NULL;
	if (rc == 0)
		rc = profile_sum(&p, out);
	for (cudaEvent_t e : p.ev)
		cudaEventDestroy(e);
	return report(rc, "profiled training step", err, errlen);
}

/* fp32 host <-> dtype device, tensor by tensor (the device buffers are padded) */
static int transfer(struct ab_gpt *g, void **dev, float *host, bool to_device)
{
	size_t off = 0, x = ab_dtype_bytes(g->m.dtype);

	for (int p = 0; p < AB_P_COUNT; p++) {
		size_t n = g->lay.param_elems[p];
		std::vector<bf16> tmp(x == 2 ? n : 0);

		if (x == 4 && to_device)
			CUDA_CHECK(cudaMemcpy(dev[p], host + off, n * 4, cudaMemcpyHostToDevice));
		else if (x == 4)
			CUDA_CHECK(cudaMemcpy(host + off, dev[p], n * 4, cudaMemcpyDeviceToHost));
		else if (to_device) {
			for (size_t i = 0; i < n; i++)
				tmp[i] = __float2bfloat16(host[off + i]);
			CUDA_CHECK(cudaMemcpy(dev[p], tmp.data(), n * 2, cudaMemcpyHostToDevice));
		} else {
			CUDA_CHECK(cudaMemcpy(tmp.data(), dev[p], n * 2, cudaMemcpyDeviceToHost));
			for (size_t i = 0; i < n; i++)
				host[off + i] = __bfloat162float(tmp[i]);
		}
		off += n;
	}
	return 0;
}

extern "C" int ab_gpt_set_params(struct ab_gpt *g, const float *params, char *err,
				 size_t errlen)
{
	int rc = transfer(g, g->param, (float *)params, true);

	/* the master keeps the exact fp32 values, as a framework's would after loading */
	if (rc == 0 && g->master)
		rc = ab_cuda_rc(cudaMemcpy(g->master, params, g->lay.nparams * sizeof(float),
					   cudaMemcpyHostToDevice),
				"master", __FILE__, __LINE__);
	return report(rc, "setting the parameters", err, errlen);
}

extern "C" int ab_gpt_get_grads(struct ab_gpt *g, float *grads, char *err, size_t errlen)
{
	return report(transfer(g, g->grad, grads, false), "reading the gradients", err, errlen);
}

extern "C" int ab_gpt_set_tokens(struct ab_gpt *g, const int *inputs, const int *targets,
				 char *err, size_t errlen)
{
	size_t BT = (size_t)g->B * g->m.seq * sizeof(int);
	int rc = ab_cuda_rc(cudaMemcpy(g->inputs, inputs, BT, cudaMemcpyHostToDevice), "inputs",
			    __FILE__, __LINE__);

	if (rc == 0)
		rc = ab_cuda_rc(cudaMemcpy(g->targets, targets, BT, cudaMemcpyHostToDevice),
				"targets", __FILE__, __LINE__);
	return report(rc, "setting the tokens", err, errlen);
}
