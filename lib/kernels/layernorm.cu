/* layernorm.cu - layer normalisation over channels, forward and backward (eps 1e-5). */
#include "layers.cuh"

/* ---- kernels ------------------------------------------------------------------------ */

/* one warp per row */
template <typename T>
__global__ void layernorm_forward_kernel(T *out, float *mean, float *rstd, const T *inp,
					 const T *w, const T *b, size_t N, int C)
{
	size_t row = blockIdx.x * (size_t)(blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	float m = 0, v = 0, r;

	if (row >= N)
		return;
	const T *x = inp + row * C;
	for (int c = lane; c < C; c += 32)
		m += to_f(x[c]);
	m = warp_sum(m) / (float)C;
	for (int c = lane; c < C; c += 32)
		v += (to_f(x[c]) - m) * (to_f(x[c]) - m);
	r = rsqrtf(warp_sum(v) / (float)C + 1e-5f);
	for (int c = lane; c < C; c += 32)
		out[row * C + c] = from_f<T>((to_f(x[c]) - m) * r * to_f(w[c]) + to_f(b[c]));
	if (lane == 0) {
		mean[row] = m;
		rstd[row] = r;
	}
}

/* d(input), one warp per row */
template <typename T>
__global__ void layernorm_dinp_kernel(T *dinp, const T *dout, const T *inp, const T *w,
				      const float *mean, const float *rstd, size_t N, int C)
{
	size_t row = blockIdx.x * (size_t)(blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	float dmean = 0, dnorm_mean = 0;

	if (row >= N)
		return;
	const T *x = inp + row * C, *dy = dout + row * C;
	float m = mean[row], r = rstd[row];
	for (int c = lane; c < C; c += 32) {
		float dnorm = to_f(w[c]) * to_f(dy[c]);

		dmean += dnorm;
		dnorm_mean += dnorm * (to_f(x[c]) - m) * r;
	}
	dmean = warp_sum(dmean) / (float)C;
	dnorm_mean = warp_sum(dnorm_mean) / (float)C;
	for (int c = lane; c < C; c += 32) {
		float norm = (to_f(x[c]) - m) * r, dnorm = to_f(w[c]) * to_f(dy[c]);

		dinp[row * C + c] = from_f<T>(to_f(dinp[row * C + c]) +
					      (dnorm - dmean - norm * dnorm_mean) * r);
	}
}

/* ---- launchers ---------------------------------------------------------------------- */

template <typename T>
int layernorm_forward(T *out, float *mean, float *rstd, const T *inp, const T *w, const T *b,
		      size_t N, int C, cudaStream_t s)
{
	layernorm_forward_kernel<<<ceil_div(N, 8), 256, 0, s>>>(out, mean, rstd, inp, w, b, N, C);
	LAUNCH_CHECK();
	return 0;
}

template <typename T>
int layernorm_backward(T *dinp, T *dw, T *db, const T *dout, const T *inp, const T *w,
		       const float *mean, const float *rstd, size_t N, int C, float *scratch,
		       size_t scratch_bytes, cudaStream_t s)
{
	layernorm_dinp_kernel<<<ceil_div(N, 8), 256, 0, s>>>(dinp, dout, inp, w, mean, rstd, N, C);
	LAUNCH_CHECK();
	return column_sums<T>(dw, db, dout, inp, mean, rstd, N, C, scratch, scratch_bytes, s);
}

#define INSTANTIATE(T)                                                                     \
	template int layernorm_forward<T>(T *, float *, float *, const T *, const T *,      \
					  const T *, size_t, int, cudaStream_t);            \
	template int layernorm_backward<T>(T *, T *, T *, const T *, const T *, const T *,  \
					   const float *, const float *, size_t, int,       \
					   float *, size_t, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(bf16)
