/* loss.cu - the LM head's softmax cross-entropy, fused with its backward: the logits become
 * d(mean loss)/d(logits) in place, so the (B,T,V) buffer is never doubled.
 */
#include "layers.cuh"

/* ---- kernels ------------------------------------------------------------------------ */

/* one block per row of V logits */
template <typename T>
__global__ void crossentropy_softmax_kernel(T *logits, float *losses, const int *targets,
					    size_t N, int V)
{
	size_t row = blockIdx.x;
	T *x = logits + row * V;
	float mx = -INFINITY, sum = 0, inv_n = 1.0f / (float)N;
	int target = targets[row];

	for (int i = threadIdx.x; i < V; i += blockDim.x)
		mx = fmaxf(mx, to_f(x[i]));
	mx = block_reduce(mx, true);
	for (int i = threadIdx.x; i < V; i += blockDim.x)
		sum += expf(to_f(x[i]) - mx);
	sum = block_reduce(sum, false);
	if (threadIdx.x == 0)
		losses[row] = logf(sum) + mx - to_f(x[target]);
	__syncthreads(); /* x[target] is read above before it is overwritten below */
	for (int i = threadIdx.x; i < V; i += blockDim.x)
		x[i] = from_f<T>((expf(to_f(x[i]) - mx) / sum - (i == target ? 1.0f : 0.0f)) * inv_n);
}

/* ---- launchers ---------------------------------------------------------------------- */

template <typename T>
int crossentropy_softmax(T *logits, float *losses, const int *targets, size_t N, int V,
			 cudaStream_t s)
{
	if (N > 0x7fffffffu)
		return ab_cuda_fail(-EINVAL, "crossentropy_softmax", "more than 2^31 rows",
				    __FILE__, __LINE__);
	crossentropy_softmax_kernel<<<(unsigned int)N, 512, 0, s>>>(logits, losses, targets, N, V);
	LAUNCH_CHECK();
	return 0;
}

template int crossentropy_softmax<float>(float *, float *, const int *, size_t, int,
					 cudaStream_t);
template int crossentropy_softmax<bf16>(bf16 *, float *, const int *, size_t, int, cudaStream_t);
