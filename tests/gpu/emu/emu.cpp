/* emu.cpp - the CPU emulator behind the headers in tests/gpu/emu: each block's threads are coroutines
 * (a stack each, see ctx_switch) run until they all finish; __syncthreads waits for the block's live threads, a
 * warp shuffle for its warp's; device memory is host memory between guard pages, with a byte
 * budget (AUTOBATCH_EMU_MEMORY, default 4 GiB) so an oversize allocation fails as on a GPU.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <map>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#include "clock.h"
#include "cublas_v2.h"

enum state { RUN, WAIT_BLOCK, WAIT_WARP, DONE };

static const size_t STACK = 256 * 1024;

/* Coroutine switches without a system call: swapcontext saves and restores the signal mask
 * (rt_sigprocmask) at every switch, and each thread of each block switches at least twice
 * (measured: 1 min 31 s of this test's 3 min 10 s of CPU went to the kernel). On x86-64
 * (System V), a context is a stack pointer: emu_switch saves the callee-saved registers on
 * the running stack, stores its pointer, loads the other and returns into what was switched
 * out there. Elsewhere, ucontext. */
#if defined(__x86_64__)
typedef void *emu_ctx;
extern "C" void emu_switch(emu_ctx *save, emu_ctx load);
asm(".text\n"
    ".globl emu_switch\n"
    ".type emu_switch, @function\n"
    "emu_switch:\n"
    "	pushq %rbp\n	pushq %rbx\n	pushq %r12\n	pushq %r13\n	pushq %r14\n	pushq %r15\n"
    "	movq %rsp, (%rdi)\n"
    "	movq %rsi, %rsp\n"
    "	popq %r15\n	popq %r14\n	popq %r13\n	popq %r12\n	popq %rbx\n	popq %rbp\n"
    "	ret\n"
    ".size emu_switch, .-emu_switch\n");

static void ctx_switch(emu_ctx *save, emu_ctx *load)
{
	emu_switch(save, *load);
}

/* A fresh stack that emu_switch enters at entry as if entry had been called: six zero
 * registers, entry's address for emu_switch's ret, then a null return address for entry
 * (which never returns), 16-byte aligned above it as the ABI wants at a call. */
static void ctx_start(emu_ctx *c, char *stack, void (*entry)(void))
{
	void **sp = (void **)(((uintptr_t)stack + STACK) & ~(uintptr_t)15);

	*--sp = NULL;
	*--sp = (void *)entry;
	for (int i = 0; i < 6; i++)
		*--sp = NULL;
	*c = sp;
}
#else
#include <ucontext.h>
typedef ucontext_t emu_ctx;

static void ctx_switch(emu_ctx *save, emu_ctx *load)
{
	swapcontext(save, load);
}

static void ctx_start(emu_ctx *c, char *stack, void (*entry)(void))
{
	getcontext(c);
	c->uc_stack.ss_sp = stack;
	c->uc_stack.ss_size = STACK;
	c->uc_link = NULL;
	makecontext(c, entry, 0);
}
#endif

struct emu_thread {
	dim3 tid;
	int lane, warp;
	enum state state;
	float shfl;
	uint32_t mma_a[4], mma_b[2]; /* this lane's fragments, while an mma runs */
	const void *ldm_row;         /* this lane's row address, while an ldmatrix runs */
	emu_ctx ctx;
	char *stack;
};

emu_thread *emu_cur;
dim3 emu_block_idx, emu_block_dim, emu_grid_dim;

static emu_ctx scheduler;
static std::vector<emu_thread> threads;
static const std::function<void()> *body;
static const char *kernel_name; /* the kernel running now, for the fault report */

const dim3 &emu_thread_idx(void)
{
	return emu_cur->tid;
}

static void trampoline(void)
{
	(*body)();
	emu_cur->state = DONE;
	ctx_switch(&emu_cur->ctx, &scheduler);
}

static void wait(enum state s)
{
	emu_cur->state = s;
	ctx_switch(&emu_cur->ctx, &scheduler);
}

void __syncthreads(void)
{
	wait(WAIT_BLOCK);
}

float __shfl_xor_sync(unsigned mask, float v, int lane_mask)
{
	emu_thread *me = emu_cur;
	float r;

	(void)mask;
	me->shfl = v;
	wait(WAIT_WARP);
	r = threads[(size_t)(me->warp * 32 + (me->lane ^ lane_mask))].shfl;
	wait(WAIT_WARP); /* nobody overwrites a value before every lane has read */
	return r;
}

static float bf16_half(uint32_t reg, int hi)
{
	__nv_bfloat16 h;

	h.x = (uint16_t)(hi ? reg >> 16 : reg & 0xffffu);
	return __bfloat162float(h);
}

/* Each lane publishes its fragments, then computes its own four sums. The PTX ISA's layout
 * ("matrix fragments for mma.m16n8k16"), lane = 4 g + t: A (16x16) row g in a[0] (columns
 * 2t, 2t+1) and a[2] (2t+8, 2t+9), row g+8 in a[1] and a[3]; B (16x8) column g, rows 2t,
 * 2t+1 in b[0] and 2t+8, 2t+9 in b[1]; C (16x8) c[0], c[1] at row g, columns 2t, 2t+1, and
 * c[2], c[3] at row g+8. The lower index is a register's low half. */
void emu_mma_bf16_16816(float *c, const uint32_t *a, const uint32_t *b)
{
	emu_thread *me = emu_cur;
	const emu_thread *w = &threads[(size_t)me->warp * 32];
	int g = me->lane / 4, t = me->lane % 4;

	memcpy(me->mma_a, a, sizeof(me->mma_a));
	memcpy(me->mma_b, b, sizeof(me->mma_b));
	wait(WAIT_WARP);
	for (int i = 0; i < 4; i++) {
		int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
		float sum = 0;

		for (int k = 0; k < 16; k++) {
			int owner = k % 8 / 2, hi = k & 1;
			uint32_t ar = w[row % 8 * 4 + owner].mma_a[(row >= 8) + 2 * (k >= 8)];
			uint32_t br = w[col * 4 + owner].mma_b[k >= 8];

			sum += bf16_half(ar, hi) * bf16_half(br, hi);
		}
		c[i] += sum;
	}
	wait(WAIT_WARP); /* nobody overwrites a fragment before every lane has read */
}

/* Each lane publishes its row's address; lanes 8j..8j+7 name matrix j's rows 0-7. The
 * PTX ISA's layout ("warp-level matrix load instruction: ldmatrix"): without .trans lane 4g+t
 * gets row g's elements 2t, 2t+1 of each matrix; .trans gives the transpose, rows 2t and
 * 2t+1 of column g, the lower row in the low half. */
void emu_ldmatrix_x4(uint32_t *r, const void *row, bool trans)
{
	emu_thread *me = emu_cur;
	const emu_thread *w = &threads[(size_t)me->warp * 32];
	int g = me->lane / 4, t = me->lane % 4;

	me->ldm_row = row;
	wait(WAIT_WARP);
	for (int j = 0; j < 4; j++) {
		const uint16_t *lo, *hi;

		if (trans) {
			lo = (const uint16_t *)w[8 * j + 2 * t].ldm_row + g;
			hi = (const uint16_t *)w[8 * j + 2 * t + 1].ldm_row + g;
		} else {
			lo = (const uint16_t *)w[8 * j + g].ldm_row + 2 * t;
			hi = lo + 1;
		}
		r[j] = (uint32_t)*lo | (uint32_t)*hi << 16;
	}
	wait(WAIT_WARP);
}

float atomicAdd(float *p, float v)
{
	float old = *p; /* one coroutine runs at a time: a plain add is atomic */

	*p += v;
	return old;
}

__nv_bfloat16 atomicAdd(__nv_bfloat16 *p, __nv_bfloat16 v)
{
	__nv_bfloat16 old = *p;

	*p = __float2bfloat16(__bfloat162float(*p) + __bfloat162float(v));
	return old;
}

/* Releases the waiters of a barrier once every live thread of its scope waits there. */
static bool release(void)
{
	bool any = false;
	size_t nwarps = (threads.size() + 31) / 32;

	for (size_t w = 0; w < nwarps; w++) {
		size_t lo = w * 32, hi = std::min(threads.size(), lo + 32), waiting = 0, live = 0;

		for (size_t i = lo; i < hi; i++) {
			live += threads[i].state != DONE;
			waiting += threads[i].state == WAIT_WARP;
		}
		if (live && waiting == live) {
			for (size_t i = lo; i < hi; i++)
				if (threads[i].state == WAIT_WARP)
					threads[i].state = RUN;
			any = true;
		}
	}
	if (any)
		return true;
	size_t live = 0, waiting = 0;
	for (emu_thread &t : threads) {
		live += t.state != DONE;
		waiting += t.state == WAIT_BLOCK;
	}
	if (live && waiting == live) {
		for (emu_thread &t : threads)
			t.state = RUN;
		return true;
	}
	if (live) {
		fprintf(stderr, "emu: deadlock in block (%u,%u,%u): threads wait at different "
				"barriers\n",
			emu_block_idx.x, emu_block_idx.y, emu_block_idx.z);
		abort();
	}
	return false;
}

static void start_thread(size_t i)
{
	emu_thread &t = threads[i];

	t.tid = dim3((unsigned)(i % emu_block_dim.x),
		     (unsigned)(i / emu_block_dim.x % emu_block_dim.y),
		     (unsigned)(i / emu_block_dim.x / emu_block_dim.y));
	t.lane = (int)(i % 32);
	t.warp = (int)(i / 32);
	t.state = RUN;
	ctx_start(&t.ctx, t.stack, trampoline);
}

static void run_block(void)
{
	size_t n = threads.size();

	for (size_t i = 0; i < n; i++)
		start_thread(i);
	do {
		for (size_t i = 0; i < n; i++)
			while (threads[i].state == RUN) {
				emu_cur = &threads[i];
				ctx_switch(&scheduler, &threads[i].ctx);
			}
	} while (release());
}

static cudaError_t last_error;

void emu_launch(dim3 grid, dim3 block, const char *name, const std::function<void()> &fn)
{
	size_t n = (size_t)block.x * block.y * block.z;

	if (n == 0 || n > 1024 || grid.x == 0) {
		last_error = cudaErrorInvalidValue;
		return;
	}
	if (threads.size() != n) {
		for (emu_thread &t : threads)
			free(t.stack);
		threads.assign(n, emu_thread());
		for (emu_thread &t : threads)
			t.stack = (char *)malloc(STACK);
	}
	body = &fn;
	kernel_name = name;
	emu_grid_dim = grid;
	emu_block_dim = block;
	for (unsigned z = 0; z < grid.z; z++)
		for (unsigned y = 0; y < grid.y; y++)
			for (unsigned x = 0; x < grid.x; x++) {
				emu_block_idx = dim3(x, y, z);
				run_block();
			}
	kernel_name = NULL;
}

/* ---- the runtime (C linkage, as cuda_runtime.h declares it) -------------------- */

extern "C" {

/* a live allocation: the buffer, its size, and the mapping it sits at the end of */
struct emu_alloc {
	size_t n;
	void *map;
	size_t maplen;
};
static std::map<void *, emu_alloc> allocations;
static size_t allocated;

static size_t budget(void)
{
	const char *e = getenv("AUTOBATCH_EMU_MEMORY");

	return e ? (size_t)strtoull(e, NULL, 10) : (size_t)4 << 30;
}

/* Each buffer ends (16-byte aligned) against a PROT_NONE page and has one before it, so a
 * kernel that reads or writes outside its buffer faults here, as compute-sanitizer would
 * report on a GPU, instead of silently using a neighbour's memory. */
cudaError_t cudaMalloc(void **p, size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), body = (n + 15) / 16 * 16;
	size_t maplen = (body + page - 1) / page * page + 2 * page;
	char *m;

	if (allocated + n > budget())
		return last_error = cudaErrorMemoryAllocation;
	m = (char *)mmap(NULL, maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			 -1, 0);
	if (m == MAP_FAILED)
		return last_error = cudaErrorMemoryAllocation;
	if (mprotect(m + page, maplen - 2 * page, PROT_READ | PROT_WRITE)) {
		munmap(m, maplen);
		return last_error = cudaErrorMemoryAllocation;
	}
	*p = m + maplen - page - body;
	allocations[*p] = emu_alloc{n, m, maplen};
	allocated += n;
	return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
	auto it = allocations.find(p);

	if (it == allocations.end())
		return p ? cudaErrorInvalidValue : cudaSuccess;
	allocated -= it->second.n;
	munmap(it->second.map, it->second.maplen);
	allocations.erase(it);
	return cudaSuccess;
}

/* A fault in a guard page is reported with the kernel, the block and thread, and where the
 * access fell relative to its buffer; then the default action (a SIGSEGV death) follows. Not
 * async-signal-safe (it walks the allocation map), which is fine in a process about to die. */
static void on_fault(int sig, siginfo_t *si, void *ctx)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	char where[160] = "outside every device buffer", msg[512];
	int len;

	(void)ctx;
	for (const auto &kv : allocations) {
		uintptr_t m = (uintptr_t)kv.second.map, base = (uintptr_t)kv.first;

		if (a >= m && a < m + kv.second.maplen) {
			snprintf(where, sizeof(where), "byte %lld of a %zu-byte device buffer",
				 (long long)(a - base), kv.second.n);
			break;
		}
	}
	if (kernel_name && emu_cur)
		len = snprintf(msg, sizeof(msg), "emu: out-of-bounds access in %s, block (%u,%u,%u) "
			       "thread (%u,%u,%u): %s\n", kernel_name, emu_block_idx.x,
			       emu_block_idx.y, emu_block_idx.z, emu_cur->tid.x, emu_cur->tid.y,
			       emu_cur->tid.z, where);
	else
		len = snprintf(msg, sizeof(msg), "emu: out-of-bounds access in host code "
			       "(cudaMemcpy, cudaMemset or cuBLAS): %s\n", where);
	if (write(2, msg, (size_t)len) < 0) {
		/* nothing more to say */
	}
	signal(sig, SIG_DFL); /* the faulting access runs again and kills the process */
}

/* before main: an alternate stack, so a fault on a thread's coroutine stack is reported too */
static struct fault_report {
	fault_report()
	{
		static char alt[64 * 1024];
		stack_t ss = {};
		struct sigaction sa = {};

		ss.ss_sp = alt;
		ss.ss_size = sizeof(alt);
		sigaltstack(&ss, NULL);
		sa.sa_sigaction = on_fault;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
		sigaction(SIGSEGV, &sa, NULL);
	}
} fault_report_installed;

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	(void)kind;
	memmove(dst, src, n);
	return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t n)
{
	memset(p, v, n);
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
	(void)s;
	return cudaMemset(p, v, n);
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;

	last_error = cudaSuccess;
	return e;
}

const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaSuccess ? "no error"
	       : e == cudaErrorMemoryAllocation ? "out of memory (emulator budget)"
						: "invalid argument";
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
	*total_b = budget();
	*free_b = budget() - allocated;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidValue; }

cudaError_t cudaGetDeviceCount(int *n)
{
	*n = 1;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
	(void)d;
	snprintf(p->name, sizeof(p->name), "CPU emulator");
	p->totalGlobalMem = budget();
	p->multiProcessorCount = 1;
	return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int d)
{
	(void)d;
	snprintf(bus, (size_t)len, "0000:00:00.0");
	return cudaSuccess;
}

struct CUevent_st {
	double t;
};

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	*e = new CUevent_st();
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	delete e;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	(void)s;
	e->t = ab_now();
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	(void)e;
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	*ms = (float)((b->t - a->t) * 1e3);
	return cudaSuccess;
}

} /* extern "C" */

/* ---- cuBLAS ------------------------------------------------------------------------- */

struct emu_cublas {
	int unused;
};

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
	*h = new emu_cublas();
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
	delete h;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *w, size_t n)
{
	(void)h, (void)w, (void)n;
	return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t s)
{
	return s == CUBLAS_STATUS_SUCCESS ? "success" : "failure (emulator)";
}

static float load(const void *p, cudaDataType_t t, size_t i)
{
	return t == CUDA_R_32F ? ((const float *)p)[i]
			       : __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

static void store(void *p, cudaDataType_t t, size_t i, float v)
{
	if (t == CUDA_R_32F)
		((float *)p)[i] = v;
	else
		((__nv_bfloat16 *)p)[i] = __float2bfloat16(v);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
					  cublasOperation_t tb, int m, int n, int k,
					  const void *alpha, const void *A, cudaDataType_t at,
					  int lda, long long sa, const void *B, cudaDataType_t bt,
					  int ldb, long long sb, const void *beta, void *C,
					  cudaDataType_t ct, int ldc, long long sc, int batch,
					  cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
	float al = *(const float *)alpha, be = *(const float *)beta;

	(void)h, (void)compute, (void)algo;
	if (m < 0 || n < 0 || k < 0 || lda < (ta ? k : m) || ldb < (tb ? n : k) || ldc < m)
		return CUBLAS_STATUS_INVALID_VALUE;
	for (int b = 0; b < batch; b++)
		for (int j = 0; j < n; j++)
			for (int i = 0; i < m; i++) {
				double acc = 0;

				for (int p = 0; p < k; p++) {
					size_t ai = ta ? (size_t)p + (size_t)i * lda : (size_t)i + (size_t)p * lda;
					size_t bi = tb ? (size_t)j + (size_t)p * ldb : (size_t)p + (size_t)j * ldb;

					acc += (double)load(A, at, (size_t)b * sa + ai) *
					       load(B, bt, (size_t)b * sb + bi);
				}
				size_t ci = (size_t)b * sc + (size_t)i + (size_t)j * ldc;
				/* beta == 0: C is not read (it may hold anything, NaN included) */
				store(C, ct, ci, al * (float)acc + (be != 0 ? be * load(C, ct, ci) : 0));
			}
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
			    int n, int k, const void *alpha, const void *A, cudaDataType_t at,
			    int lda, const void *B, cudaDataType_t bt, int ldb, const void *beta,
			    void *C, cudaDataType_t ct, int ldc, cublasComputeType_t compute,
			    cublasGemmAlgo_t algo)
{
	return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0,
					  beta, C, ct, ldc, 0, 1, compute, algo);
}
