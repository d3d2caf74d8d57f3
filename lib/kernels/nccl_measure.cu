/* nccl_measure.cu - what data parallelism will cost the job: all-reduce bandwidth across
 * the GPUs the probe sees, and the memory NCCL's communicator takes on each of them.
 */
#include <algorithm>
#include <errno.h>
#include <nccl.h>
#include <string.h>
#include <time.h>
#include <vector>

#include "gpt.h"
#include "layers.cuh"

extern "C" {
#include "error.h"
}

#define MAX_GPUS 16

static int nccl_rc(ncclResult_t r, const char *what, const char *file, int line)
{
	if (r == ncclSuccess)
		return 0;
	return ab_cuda_fail(-EIO, what, ncclGetErrorString(r), file, line);
}
#define NCCL_CHECK(call) TRY(nccl_rc((call), #call, __FILE__, __LINE__))

struct ranks {
	int n;
	ncclComm_t comm[MAX_GPUS];
	bf16 *buf[MAX_GPUS];
	size_t used_before[MAX_GPUS];
};

static int used(int dev, size_t *out)
{
	size_t f, t;

	CUDA_CHECK(cudaSetDevice(dev));
	CUDA_CHECK(cudaMemGetInfo(&f, &t));
	*out = t - f;
	return 0;
}

static int allreduce_all(struct ranks *r, size_t elems)
{
	NCCL_CHECK(ncclGroupStart());
	for (int i = 0; i < r->n; i++) {
		CUDA_CHECK(cudaSetDevice(i));
		NCCL_CHECK(ncclAllReduce(r->buf[i], r->buf[i], elems, ncclBfloat16, ncclSum,
					 r->comm[i], 0));
	}
	NCCL_CHECK(ncclGroupEnd());
	for (int i = 0; i < r->n; i++) {
		CUDA_CHECK(cudaSetDevice(i));
		CUDA_CHECK(cudaDeviceSynchronize());
	}
	return 0;
}

/* free memory on the tightest GPU decides the message size */
static int message_elems(struct ranks *r, uint64_t bytes, size_t *elems)
{
	size_t least = SIZE_MAX, f, t;

	for (int i = 0; i < r->n; i++) {
		CUDA_CHECK(cudaSetDevice(i));
		CUDA_CHECK(cudaMemGetInfo(&f, &t));
		least = std::min(least, f);
	}
	*elems = (size_t)std::min<uint64_t>(bytes, least / 4) / 2;
	return 0;
}

static int measure(struct ranks *r, uint64_t bytes, struct ab_comm *out)
{
	int devs[MAX_GPUS];
	size_t elems, after;
	std::vector<double> s;

	for (int i = 0; i < r->n; i++) {
		devs[i] = i;
		TRY(used(i, &r->used_before[i]));
	}
	NCCL_CHECK(ncclCommInitAll(r->comm, r->n, devs));
	TRY(message_elems(r, bytes, &elems));
	if (elems < 1024)
		return ab_cuda_fail(-ENOMEM, "NCCL measurement", "no memory left for a message",
				    __FILE__, __LINE__);
	for (int i = 0; i < r->n; i++) {
		CUDA_CHECK(cudaSetDevice(i));
		CUDA_CHECK(cudaMalloc((void **)&r->buf[i], elems * 2));
		CUDA_CHECK(cudaMemset(r->buf[i], 0, elems * 2));
	}
	for (int k = 0; k < 7; k++) { /* two warm-ups: NCCL sets up its channels lazily */
		struct timespec a, b;

		clock_gettime(CLOCK_MONOTONIC, &a);
		TRY(allreduce_all(r, elems));
		clock_gettime(CLOCK_MONOTONIC, &b);
		if (k >= 2)
			s.push_back((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
	}
	std::sort(s.begin(), s.end());
	for (int i = 0; i < r->n; i++) { /* NCCL's own: what is used beyond the message */
		TRY(used(i, &after));
		out->nccl_bytes = std::max<uint64_t>(out->nccl_bytes,
						     after - r->used_before[i] - elems * 2);
	}
	out->measured_bytes = elems * 2;
	out->busbw = (double)out->measured_bytes / s[s.size() / 2] * 2.0 * (r->n - 1) / r->n;
	out->seconds = (double)bytes / (out->busbw * r->n / (2.0 * (r->n - 1)));
	return 0;
}

extern "C" int ab_nccl_measure(uint64_t bytes, struct ab_comm *out, char *err, size_t errlen)
{
	struct ranks r = {};
	int rc;

	memset(out, 0, sizeof(*out));
	if (cudaGetDeviceCount(&r.n) != cudaSuccess || r.n < 2) {
		cudaGetLastError();
		return ab_fail(err, errlen, ENODEV, "all-reduce needs two or more GPUs; %d visible",
			       r.n);
	}
	r.n = std::min(r.n, MAX_GPUS);
	out->gpus = r.n;
	out->bytes = bytes;
	rc = measure(&r, bytes, out);
	for (int i = 0; i < r.n; i++) {
		cudaSetDevice(i);
		if (r.buf[i])
			cudaFree(r.buf[i]);
		if (r.comm[i])
			ncclCommDestroy(r.comm[i]);
	}
	cudaSetDevice(0);
	if (rc)
		return ab_fail(err, errlen, -rc, "measuring all-reduce: %s", ab_kernels_message());
	return 0;
}
