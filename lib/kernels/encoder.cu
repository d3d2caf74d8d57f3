/* encoder.cu - token + position embedding, forward and backward. */
#include "layers.cuh"

/* ---- kernels ------------------------------------------------------------------------ */

template <typename T>
__global__ void encoder_forward_kernel(T *out, const int *inp, const T *wte, const T *wpe,
				       size_t n, int Tn, int C)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t bt = i / C;
		int c = (int)(i % C), t = (int)(bt % Tn);

		out[i] = from_f<T>(to_f(wte[(size_t)inp[bt] * C + c]) + to_f(wpe[(size_t)t * C + c]));
	}
}

/* tokens repeat within a batch: their rows of dwte take atomic adds */
template <typename T>
__global__ void encoder_dwte_kernel(T *dwte, const T *dout, const int *inp, size_t n, int C)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		atomicAdd(&dwte[(size_t)inp[i / C] * C + i % C], dout[i]);
}

/* each position's row sums over the batch: one thread per (t, c), no atomics */
template <typename T>
__global__ void encoder_dwpe_kernel(T *dwpe, const T *dout, int B, int Tn, int C)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	float acc = 0;

	if (i >= (size_t)Tn * C)
		return;
	for (int b = 0; b < B; b++)
		acc += to_f(dout[(size_t)b * Tn * C + i]);
	dwpe[i] = from_f<T>(to_f(dwpe[i]) + acc);
}

/* ---- launchers ---------------------------------------------------------------------- */

template <typename T>
int encoder_forward(T *out, const int *inp, const T *wte, const T *wpe, int B, int Tn, int C,
		    cudaStream_t s)
{
	size_t n = (size_t)B * Tn * C;

	encoder_forward_kernel<<<grid_for(n, 256), 256, 0, s>>>(out, inp, wte, wpe, n, Tn, C);
	LAUNCH_CHECK();
	return 0;
}

template <typename T>
int encoder_backward(T *dwte, T *dwpe, const T *dout, const int *inp, int B, int Tn, int C,
		     cudaStream_t s)
{
	size_t n = (size_t)B * Tn * C;

	encoder_dwte_kernel<<<grid_for(n, 256), 256, 0, s>>>(dwte, dout, inp, n, C);
	LAUNCH_CHECK();
	encoder_dwpe_kernel<<<ceil_div((size_t)Tn * C, 256), 256, 0, s>>>(dwpe, dout, B, Tn, C);
	LAUNCH_CHECK();
	return 0;
}

template int encoder_forward<float>(float *, const int *, const float *, const float *, int,
				    int, int, cudaStream_t);
template int encoder_forward<bf16>(bf16 *, const int *, const bf16 *, const bf16 *, int, int,
				   int, cudaStream_t);
template int encoder_backward<float>(float *, float *, const float *, const int *, int, int,
				     int, cudaStream_t);
template int encoder_backward<bf16>(bf16 *, bf16 *, const bf16 *, const int *, int, int, int,
				    cudaStream_t);
