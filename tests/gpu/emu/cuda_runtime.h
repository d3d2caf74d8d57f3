/* cuda_runtime.h (emulator) - runs the kernel library's CUDA C++ on the CPU for tests/gpu when
 * no GPU is there: the thread hierarchy, __syncthreads and warp shuffles on coroutines, device
 * memory as host memory. It checks what the code computes (indexing, layouts, the cuBLAS
 * calls' shapes), not speed, and nothing about the hardware itself.
 */
#ifndef AUTOBATCH_EMU_CUDA_RUNTIME_H
#define AUTOBATCH_EMU_CUDA_RUNTIME_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>

/* Self-contained: the types and calls below are the subset of the CUDA runtime the kernel
 * library uses, so CI needs no CUDA toolkit to run tests/gpu on the CPU. */
#include "cuda_bf16.h"

struct dim3 {
	unsigned x, y, z;
	dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2 };
typedef enum cudaError cudaError_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1,
		      cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
typedef enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
struct cudaDeviceProp {
	char name[256];
	size_t totalGlobalMem;
	int multiProcessorCount;
};

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
/* one block runs at a time, so a static is that block's shared memory */
#define __shared__ static


/* defined in emu.cpp */
extern "C" {
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemset(void *p, int v, size_t n);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d);
cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int d);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
}

/* the thread hierarchy: per coroutine thread and per block */
struct emu_thread;
extern emu_thread *emu_cur;
extern dim3 emu_block_idx, emu_block_dim, emu_grid_dim;
const dim3 &emu_thread_idx(void);
#define threadIdx (emu_thread_idx())
#define blockIdx (emu_block_idx)
#define blockDim (emu_block_dim)
#define gridDim (emu_grid_dim)

void __syncthreads(void);
float __shfl_xor_sync(unsigned mask, float v, int lane_mask);
/* the warp's tensor-core instruction mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32:
 * c (4 fp32) += a (4 registers of two bf16) x b (2 such), the fragments laid out over the
 * warp's lanes as the PTX ISA says */
void emu_mma_bf16_16816(float *c, const uint32_t *a, const uint32_t *b);
/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: row is this lane's row address */
void emu_ldmatrix_x4(uint32_t *r, const void *row, bool trans);
float atomicAdd(float *p, float v);
__nv_bfloat16 atomicAdd(__nv_bfloat16 *p, __nv_bfloat16 v);
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

/* kernel<<<grid, block, shared, stream>>>(args) is rewritten to this (translate.py) */
void emu_launch(dim3 grid, dim3 block, const char *name, const std::function<void()> &body);

#endif
