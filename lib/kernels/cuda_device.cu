/* cuda_device.cu - the GPU as the probe sees it: `--device cuda:N` through the CUDA runtime,
 * the model-mode trial (the proxy step, timed with CUDA events), the bf16 GEMM rate, and the
 * kernels' last message (ab_cuda_fail).
 */
#include <algorithm>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <vector>

#include "gpt.h"
#include "layers.cuh"

extern "C" {
#include "clock.h"
#include "error.h"
#include "trial_report.h"
}

/* ---- the kernels' messages --------------------------------------------------------- */

static thread_local char last_message[512];

int ab_cuda_fail(int code, const char *what, const char *detail, const char *file, int line)
{
	const char *base = strrchr(file, '/');

	snprintf(last_message, sizeof(last_message), "%s:%d: %s: %s", base ? base + 1 : file,
		 line, what, detail);
	return code;
}

extern "C" const char *ab_kernels_message(void)
{
	return last_message;
}

static int report(int rc, const char *doing, char *err, size_t errlen)
{
	if (rc)
		ab_fail(err, errlen, -rc, "%s: %s", doing, ab_kernels_message());
	return rc;
}

/* ---- --device cuda:N ---------------------------------------------------------------- */

static int cuda_count(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess)
		n = 0;
	cudaGetLastError();
	return n;
}

static int cuda_open(int index, char *name, size_t namelen, char *bus, size_t buslen,
		     uint64_t *total, char *err, size_t errlen)
{
	cudaDeviceProp prop;
	size_t free_b = 0, total_b = 0;
	cudaError_t e;
	int n = 0;

	if ((e = cudaGetDeviceCount(&n)) != cudaSuccess || n == 0)
		return ab_fail(err, errlen, ENODEV, "--device cuda:%d: no CUDA GPU is visible (%s): "
						    "run inside a GPU allocation, or use --device "
						    "host or sim:SPEC",
			       index, e != cudaSuccess ? cudaGetErrorString(e) : "none found");
	if (index >= n)
		return ab_fail(err, errlen, ENODEV, "--device cuda:%d: only %d GPU%s visible "
						    "(CUDA_VISIBLE_DEVICES renumbers them from 0)",
			       index, n, n == 1 ? " is" : "s are");
	if ((e = cudaSetDevice(index)) != cudaSuccess ||
	    (e = cudaGetDeviceProperties(&prop, index)) != cudaSuccess ||
	    (e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess ||
	    (e = cudaDeviceGetPCIBusId(bus, (int)buslen, index)) != cudaSuccess)
		return ab_fail(err, errlen, EIO, "--device cuda:%d: %s", index, cudaGetErrorString(e));
	snprintf(name, namelen, "%s", prop.name);
	*total = total_b;
	return 0;
}

extern "C" const struct ab_cuda_ops ab_cuda_runtime_ops = {cuda_open, cuda_count};

/* ---- the model-mode trial ----------------------------------------------------------- */

static int timed_steps(struct ab_gpt *g, int steps, double *median, char *err, size_t errlen)
{
	std::vector<double> ms(steps);
	cudaEvent_t a, b;
	int rc = 0;

	if (ab_cuda_rc(cudaEventCreate(&a), "event", __FILE__, __LINE__) ||
	    ab_cuda_rc(cudaEventCreate(&b), "event", __FILE__, __LINE__))
		return report(-EIO, "timing", err, errlen);
	for (int s = 0; s < steps && rc == 0; s++) {
		cudaEventRecord(a);
		rc = ab_gpt_step(g, 1e-4f, NULL, err, errlen);
		cudaEventRecord(b);
		cudaEventSynchronize(b);
		float elapsed = 0;
		cudaEventElapsedTime(&elapsed, a, b);
		ms[s] = elapsed;
	}
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	*median = ab_median(ms.data(), ms.size()) / 1e3;
	return rc;
}

extern "C" int ab_model_cuda_trial(void *ctx, long batch, struct ab_trial *out, char *err,
				   size_t errlen)
{
	struct ab_model_trial *t = (struct ab_model_trial *)ctx;
	struct ab_gpt *g = NULL;
	size_t free_b = 0, total_b = 0;
	double start = ab_now(), step = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	out->batch = batch;
	if ((rc = ab_cuda_rc(cudaSetDevice(t->device), "cudaSetDevice", __FILE__, __LINE__)))
		return report(rc, "model trial", err, errlen);
	rc = batch > 1 << 24 ? -ENOMEM : ab_gpt_create(&t->model, (int)batch, 1, &g, err, errlen);
	if (rc == 0)
		rc = ab_gpt_step(g, 1e-4f, NULL, err, errlen); /* warm-up: cuBLAS picks kernels */
	if (rc == 0)
		rc = timed_steps(g, t->steps > 0 ? t->steps : 3, &step, err, errlen);
	if (rc == 0)
		rc = ab_cuda_rc(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo", __FILE__,
				__LINE__);
	ab_gpt_destroy(g);
	out->seconds = ab_now() - start;
	if (rc == -ENOMEM) { /* a result: the batch does not fit */
		out->oom = true;
		return 0;
	}
	if (rc)
		return rc;
	out->has_peak = true;
	out->peak_bytes = total_b - free_b > t->others_bytes ? total_b - free_b - t->others_bytes : 0;
	out->has_step = true;
	out->steps = 1 + (t->steps > 0 ? t->steps : 3); /* the warm-up and the timed steps */
	out->step_s = step;
	out->samples_per_s = step > 0 ? (double)batch / step : 0;
	return 0;
}

/* ---- the GEMM rate the step is measured against ------------------------------------- */

extern "C" int ab_gemm_peak(int n, int reps, double *flops, char *err, size_t errlen)
{
	size_t elems = (size_t)n * n;
	bf16 *a = NULL, *b = NULL, *c = NULL;
	cublasHandle_t h = NULL;
	std::vector<float> ms(reps);
	cudaEvent_t e0, e1;
	int rc = 0;

#define G(call) if (rc == 0) rc = (call)
	G(ab_cuda_rc(cudaMalloc((void **)&a, elems * 2), "a", __FILE__, __LINE__));
	G(ab_cuda_rc(cudaMalloc((void **)&b, elems * 2), "b", __FILE__, __LINE__));
	G(ab_cuda_rc(cudaMalloc((void **)&c, elems * 2), "c", __FILE__, __LINE__));
	G(ab_cublas_rc(cublasCreate(&h), "cublasCreate", __FILE__, __LINE__));
	G(ab_cuda_rc(cudaEventCreate(&e0), "event", __FILE__, __LINE__));
	G(ab_cuda_rc(cudaEventCreate(&e1), "event", __FILE__, __LINE__));
	if (rc == 0) { /* random data: zeros run faster than real operands */
		std::vector<bf16> host(elems);
		uint64_t s = 42;

		for (size_t i = 0; i < elems; i++) {
			s = s * 6364136223846793005ULL + 1442695040888963407ULL;
			host[i] = __float2bfloat16((float)(s >> 40) / (float)(1u << 24) - 0.5f);
		}
		G(ab_cuda_rc(cudaMemcpy(a, host.data(), elems * 2, cudaMemcpyHostToDevice), "copy",
			     __FILE__, __LINE__));
		G(ab_cuda_rc(cudaMemcpy(b, host.data(), elems * 2, cudaMemcpyHostToDevice), "copy",
			     __FILE__, __LINE__));
	}
	for (int r = -3; r < reps && rc == 0; r++) { /* three warm-ups */
		cudaEventRecord(e0);
		rc = gemm<bf16>(h, false, false, n, n, n, a, n, 0, b, n, 0, 0.0f, c, n, 0, 1);
		cudaEventRecord(e1);
		cudaEventSynchronize(e1);
		if (r >= 0)
			cudaEventElapsedTime(&ms[r], e0, e1);
	}
#undef G
	if (h)
		cublasDestroy(h);
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	if (rc)
		return report(rc, "bf16 GEMM rate", err, errlen);
	std::sort(ms.begin(), ms.end());
	*flops = 2.0 * n * (double)n * n / (ms[reps / 2] / 1e3);
	return 0;
}
