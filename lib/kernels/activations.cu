/* activations.cu - GELU (GPT-2's tanh approximation) forward and backward, residual add. */
#include "layers.cuh"

#define GELU_SCALE 0.7978845608f /* sqrt(2/pi) */

/* ---- kernels ------------------------------------------------------------------------ */

template <typename T> __global__ void gelu_forward_kernel(T *out, const T *inp, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float x = to_f(inp[i]);

		out[i] = from_f<T>(0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + 0.044715f * x * x * x))));
	}
}

template <typename T>
__global__ void gelu_backward_kernel(T *dinp, const T *inp, const T *dout, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float x = to_f(inp[i]), u = GELU_SCALE * (x + 0.044715f * x * x * x), th = tanhf(u);
		float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);

		dinp[i] = from_f<T>((0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du) *
				    to_f(dout[i]));
	}
}

template <typename T> __global__ void residual_kernel(T *out, const T *a, const T *b, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		out[i] = from_f<T>(to_f(a[i]) + to_f(b[i]));
}

/* ---- launchers ---------------------------------------------------------------------- */

template <typename T> int gelu_forward(T *out, const T *inp, size_t n, cudaStream_t s)
{
	gelu_forward_kernel<<<grid_for(n, 256), 256, 0, s>>>(out, inp, n);
	LAUNCH_CHECK();
	return 0;
}

template <typename T>
int gelu_backward(T *dinp, const T *inp, const T *dout, size_t n, cudaStream_t s)
{
	gelu_backward_kernel<<<grid_for(n, 256), 256, 0, s>>>(dinp, inp, dout, n);
	LAUNCH_CHECK();
	return 0;
}

template <typename T> int residual_forward(T *out, const T *a, const T *b, size_t n, cudaStream_t s)
{
	residual_kernel<<<grid_for(n, 256), 256, 0, s>>>(out, a, b, n);
	LAUNCH_CHECK();
	return 0;
}

#define INSTANTIATE(T)                                                                     \
	template int gelu_forward<T>(T *, const T *, size_t, cudaStream_t);                 \
	template int gelu_backward<T>(T *, const T *, const T *, size_t, cudaStream_t);     \
	template int residual_forward<T>(T *, const T *, const T *, size_t, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(bf16)
