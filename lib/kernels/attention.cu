/* attention.cu - causal multi-head self-attention: q.k^T and att.v as cuBLAS strided-batched
 * GEMMs over (B*NH) heads, our own kernels for the head split, the scaled causal softmax and
 * its backward. Saves q, k, v split by head and the softmax for the backward.
 */
#include "layers.cuh"

/* ---- kernels ------------------------------------------------------------------------ */

/* Where element i of a head-major tensor (B,NH,T,HS) sits in a token-major one whose rows
 * (one per b, t) are `row` elements long, heads side by side: (B,T,NH,HS) has row = C,
 * the q part of (B,T,3,NH,HS) has row = 3C. */
__device__ __forceinline__ size_t token_major(size_t i, int Tn, int NH, int HS, size_t row)
{
	size_t b = i / ((size_t)NH * Tn * HS), rest = i % ((size_t)NH * Tn * HS);
	size_t h = rest / ((size_t)Tn * HS), t = (rest / HS) % Tn, d = rest % HS;

	return (b * Tn + t) * row + h * HS + d;
}

/* qkv (B,T,3,NH,HS) <-> q, k, v each (B,NH,T,HS); to_heads picks the direction */
template <typename T>
__global__ void qkv_heads_kernel(T *q, T *k, T *v, T *qkv, int B, int Tn, int NH, int HS,
				 bool to_heads)
{
	size_t n = (size_t)B * NH * Tn * HS, C = (size_t)NH * HS;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t at = token_major(i, Tn, NH, HS, 3 * C);

		if (to_heads) {
			q[i] = qkv[at];
			k[i] = qkv[at + C];
			v[i] = qkv[at + 2 * C];
		} else {
			qkv[at] = q[i];
			qkv[at + C] = k[i];
			qkv[at + 2 * C] = v[i];
		}
	}
}

/* (B,NH,T,HS) <-> (B,T,NH,HS) = (B,T,C); to_heads picks the direction */
template <typename T>
__global__ void permute_heads_kernel(T *out, const T *inp, int B, int Tn, int NH, int HS,
				     bool to_heads)
{
	size_t n = (size_t)B * NH * Tn * HS;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t flat = token_major(i, Tn, NH, HS, (size_t)NH * HS);

		if (to_heads)
			out[i] = inp[flat];
		else
			out[flat] = inp[i];
	}
}

/* one warp per row t of (B*NH*T, T): softmax of scale*preatt over u <= t, 0 above */
template <typename T>
__global__ void softmax_causal_kernel(T *att, const T *preatt, size_t rows, int Tn, float scale)
{
	size_t row = blockIdx.x * (size_t)(blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	float mx = -INFINITY, sum = 0;

	if (row >= rows)
		return;
	int t = (int)(row % Tn);
	const T *x = preatt + row * Tn;
	T *y = att + row * Tn;
	for (int u = lane; u <= t; u += 32)
		mx = fmaxf(mx, to_f(x[u]) * scale);
	mx = warp_max(mx);
	for (int u = lane; u <= t; u += 32)
		sum += expf(to_f(x[u]) * scale - mx);
	sum = warp_sum(sum);
	for (int u = lane; u < Tn; u += 32)
		y[u] = from_f<T>(u <= t ? expf(to_f(x[u]) * scale - mx) / sum : 0.0f);
}

/* in place: datt becomes d(preatt) = att * (datt - sum(att * datt)) * scale */
template <typename T>
__global__ void softmax_causal_backward_kernel(T *datt, const T *att, size_t rows, int Tn,
					       float scale)
{
	size_t row = blockIdx.x * (size_t)(blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	float dot = 0;

	if (row >= rows)
		return;
	int t = (int)(row % Tn);
	const T *a = att + row * Tn;
	T *d = datt + row * Tn;
	for (int u = lane; u <= t; u += 32)
		dot += to_f(a[u]) * to_f(d[u]);
	dot = warp_sum(dot);
	for (int u = lane; u < Tn; u += 32)
		d[u] = from_f<T>(u <= t ? to_f(a[u]) * (to_f(d[u]) - dot) * scale : 0.0f);
}

/* ---- launchers ---------------------------------------------------------------------- */

template <typename T>
int attention_forward(cublasHandle_t h, T *out, T *qkvr, T *att, T *preatt, T *vaccum,
		      const T *qkv, int B, int Tn, int C, int NH, cudaStream_t s)
{
	int HS = C / NH, heads = B * NH;
	size_t n = (size_t)B * Tn * C, rows = (size_t)heads * Tn;
	long long sq = (long long)Tn * HS, sa = (long long)Tn * Tn;
	T *q = qkvr, *k = qkvr + n, *v = qkvr + 2 * n;

	qkv_heads_kernel<<<grid_for(n, 256), 256, 0, s>>>(q, k, v, (T *)qkv, B, Tn, NH, HS, true);
	LAUNCH_CHECK();
	/* preatt[t][u] = q_t . k_u: (T_u, T_t) col-major = k^T q per head */
	TRY(gemm<T>(h, true, false, Tn, Tn, HS, k, HS, sq, q, HS, sq, 0.0f, preatt, Tn, sa, heads));
	softmax_causal_kernel<<<ceil_div(rows, 8), 256, 0, s>>>(att, preatt, rows, Tn,
								 1.0f / sqrtf((float)HS));
	LAUNCH_CHECK();
	/* y[t] = sum_u att[t][u] v[u]: (HS, T) col-major = v . att^T */
	TRY(gemm<T>(h, false, false, HS, Tn, Tn, v, HS, sq, att, Tn, sa, 0.0f, vaccum, HS, sq,
		    heads));
	permute_heads_kernel<<<grid_for(n, 256), 256, 0, s>>>(out, vaccum, B, Tn, NH, HS, false);
	LAUNCH_CHECK();
	return 0;
}

template <typename T>
int attention_backward(cublasHandle_t h, T *dqkv, T *datt, T *dqkvr, T *dvaccum, const T *dout,
		       const T *qkvr, const T *att, int B, int Tn, int C, int NH,
		       cudaStream_t s)
{
	int HS = C / NH, heads = B * NH;
	size_t n = (size_t)B * Tn * C, rows = (size_t)heads * Tn;
	long long sq = (long long)Tn * HS, sa = (long long)Tn * Tn;
	const T *q = qkvr, *k = qkvr + n, *v = qkvr + 2 * n;
	T *dq = dqkvr, *dk = dqkvr + n, *dv = dqkvr + 2 * n;

	permute_heads_kernel<<<grid_for(n, 256), 256, 0, s>>>(dvaccum, dout, B, Tn, NH, HS, true);
	LAUNCH_CHECK();
	/* datt[t][u] = dy_t . v_u; dv[u] = sum_t att[t][u] dy_t. dv is written after dout's
	 * last read (dout shares dq's third of the buffer only when the caller says so). */
	TRY(gemm<T>(h, true, false, Tn, Tn, HS, v, HS, sq, dvaccum, HS, sq, 0.0f, datt, Tn, sa,
		    heads));
	TRY(gemm<T>(h, false, true, HS, Tn, Tn, dvaccum, HS, sq, att, Tn, sa, 0.0f, dv, HS, sq,
		    heads));
	softmax_causal_backward_kernel<<<ceil_div(rows, 8), 256, 0, s>>>(datt, att, rows, Tn,
									  1.0f / sqrtf((float)HS));
	LAUNCH_CHECK();
	/* dq[t] = sum_u dpre[t][u] k_u; dk[u] = sum_t dpre[t][u] q_t */
	TRY(gemm<T>(h, false, false, HS, Tn, Tn, k, HS, sq, datt, Tn, sa, 0.0f, dq, HS, sq, heads));
	TRY(gemm<T>(h, false, true, HS, Tn, Tn, q, HS, sq, datt, Tn, sa, 0.0f, dk, HS, sq, heads));
	qkv_heads_kernel<<<grid_for(n, 256), 256, 0, s>>>(dq, dk, dv, dqkv, B, Tn, NH, HS, false);
	LAUNCH_CHECK();
	return 0;
}

#define INSTANTIATE(T)                                                                     \
	template int attention_forward<T>(cublasHandle_t, T *, T *, T *, T *, T *,          \
					  const T *, int, int, int, int, cudaStream_t);     \
	template int attention_backward<T>(cublasHandle_t, T *, T *, T *, T *, const T *,   \
					   const T *, const T *, int, int, int, int,        \
					   cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(bf16)
