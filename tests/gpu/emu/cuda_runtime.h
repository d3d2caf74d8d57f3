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

/* the toolkit's headers, host side: the bf16 type, dim3, and the runtime's own types */
#include <cuda_bf16.h>
#include <driver_types.h>
#include <library_types.h>
#include <vector_types.h>

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


/* The runtime's functions are declared by the toolkit's cuda_runtime_api.h (pulled in by
 * cuda_bf16.h); emu.cpp defines the ones the library calls. */
#include <cuda_runtime_api.h>

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
float atomicAdd(float *p, float v);
__nv_bfloat16 atomicAdd(__nv_bfloat16 *p, __nv_bfloat16 v);
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

/* kernel<<<grid, block, shared, stream>>>(args) is rewritten to this (translate.py) */
void emu_launch(dim3 grid, dim3 block, const std::function<void()> &body);

#endif
