/* cuda_common.cuh - what every kernel file shares: the bf16/fp32 storage types, warp and
 * block reductions, and the checks that turn a CUDA or cuBLAS failure into -ENOMEM/-EIO.
 */
#ifndef AUTOBATCH_CUDA_COMMON_CUH
#define AUTOBATCH_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <stddef.h>

typedef __nv_bfloat16 bf16;

/* Records "file:line: what: detail" as the library's last message (ab_kernels_message) and
 * returns code. A library never exits: the probe reports, the search goes on or stops. */
int ab_cuda_fail(int code, const char *what, const char *detail, const char *file, int line);

static inline int ab_cuda_rc(cudaError_t e, const char *what, const char *file, int line)
{
	if (e == cudaSuccess)
		return 0;
	cudaGetLastError(); /* clear a non-sticky error so the next trial starts clean */
	return ab_cuda_fail(e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO, what,
			    cudaGetErrorString(e), file, line);
}

static inline int ab_cublas_rc(cublasStatus_t s, const char *what, const char *file, int line)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return 0;
	return ab_cuda_fail(s == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO, what,
			    cublasGetStatusString(s), file, line);
}

#define CUDA_CHECK(call)                                                                   \
	do {                                                                               \
		int rc_ = ab_cuda_rc((call), #call, __FILE__, __LINE__);                   \
		if (rc_)                                                                   \
			return rc_;                                                        \
	} while (0)
#define CUBLAS_CHECK(call)                                                                 \
	do {                                                                               \
		int rc_ = ab_cublas_rc((call), #call, __FILE__, __LINE__);                 \
		if (rc_)                                                                   \
			return rc_;                                                        \
	} while (0)
/* after every launch */
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())
#define TRY(call)                                                                          \
	do {                                                                               \
		int rc_ = (call);                                                          \
		if (rc_)                                                                   \
			return rc_;                                                        \
	} while (0)

/* ---- storage types: compute is always fp32 ---------------------------------------- */

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 from_f<bf16>(float x) { return __float2bfloat16(x); }

template <typename T> struct cuda_dtype;
template <> struct cuda_dtype<float> { static constexpr cudaDataType_t value = CUDA_R_32F; };
template <> struct cuda_dtype<bf16> { static constexpr cudaDataType_t value = CUDA_R_16BF; };

/* ---- reductions --------------------------------------------------------------------- */

/* over the warp, or over each group of `lanes` neighbours (a power of two) */
__device__ __forceinline__ float warp_sum(float v, int lanes = 32)
{
	for (int o = lanes / 2; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v, int lanes = 32)
{
	for (int o = lanes / 2; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* Over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets it. */
__device__ __forceinline__ float block_reduce(float v, bool is_max)
{
	__shared__ float part[32];
	int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;

	v = is_max ? warp_max(v) : warp_sum(v);
	__syncthreads(); /* part[] may still be read by a previous call */
	if (lane == 0)
		part[warp] = v;
	__syncthreads();
	v = lane < nwarps ? part[lane] : (is_max ? -INFINITY : 0.0f);
	return is_max ? warp_max(v) : warp_sum(v);
}

static inline unsigned int ceil_div(size_t a, size_t b)
{
	return (unsigned int)((a + b - 1) / b);
}

/* grid for a grid-stride loop over n elements */
static inline unsigned int grid_for(size_t n, int block)
{
	size_t g = (n + (size_t)block - 1) / (size_t)block;

	return (unsigned int)(g > 65535u * 16u ? 65535u * 16u : (g ? g : 1));
}

#endif
