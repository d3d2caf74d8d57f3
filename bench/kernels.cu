/* kernels.cu - bench/kernels: the proxy step's achieved TFLOP/s against the GPU's measured
 * bf16 GEMM rate, and the seconds (and trials) of a model-mode decision, for GPT-2 124M, a
 * 1.3B and a 7B shape, and where a step of each goes by kind of launch, with the fused
 * attention (flash_attention.cu) and, at the same batch, the unfused one. Prints figures;
 * never passes or fails on time.
 */
#include <cstdio>
#include <cstring>
#include <ctime>

#include "gpt.h"
extern "C" {
#include "clock.h"
#include "search.h"
}

struct shape {
	const char *name;
	struct ab_model m;
};

static const struct shape shapes[] = {
	{"GPT-2 124M", {12, 768, 12, 3072, 1024, 50257, AB_DTYPE_BF16, false}},
	{"1.3B", {24, 2048, 16, 8192, 2048, 50304, AB_DTYPE_BF16, false}},
	{"1.3B recompute", {24, 2048, 16, 8192, 2048, 50304, AB_DTYPE_BF16, true}},
	{"7B (Llama-2 shape)", {32, 4096, 32, 11008, 4096, 32000, AB_DTYPE_BF16, true}},
};

/* where one step at `batch` goes, by kind of launch (after one warm-up step); unfused: the
 * same step with the cuBLAS attention instead of the fused one (a shape neither takes: no
 * line), for the comparison */
static void print_profile(const struct ab_model *m, long batch, bool unfused)
{
	struct ab_gpt *g;
	struct ab_gpt_profile p;
	char err[1024], line[1024];
	double kinds = 0;
	int at;

	if (ab_gpt_create(m, (int)batch, 1, &g, err, sizeof(err)) < 0)
		goto fail;
	if (unfused && ab_gpt_set_flash(g, 1) < 0) {
		ab_gpt_destroy(g);
		return;
	}
	if (unfused)
		ab_gpt_set_flash(g, 0);
	if (ab_gpt_step(g, 1e-4f, NULL, err, sizeof(err)) < 0 ||
	    ab_gpt_profile_step(g, 1e-4f, NULL, &p, err, sizeof(err)) < 0) {
		ab_gpt_destroy(g);
		goto fail;
	}
	ab_gpt_destroy(g);
	at = snprintf(line, sizeof(line), "%-20s %swhere a step goes (%.1f ms):", "",
		      unfused ? "unfused attention: " : "", p.step_ms);
	for (int k = 0; k < AB_K_COUNT; k++) {
		kinds += p.ms[k];
		at += snprintf(line + at, sizeof(line) - at, " %s %.1f%% (%.1f ms, %d),",
			       ab_gpt_kind_names[k], 100 * p.ms[k] / p.step_ms, p.ms[k],
			       p.launches[k]);
	}
	printf("%s other %.1f%%\n", line, 100 * (p.step_ms - kinds) / p.step_ms);
	return;
fail:
	printf("%-20s %swhere a step goes: not measured: %s\n", "",
	       unfused ? "unfused attention: " : "", err);
}

int main(int argc, char **argv)
{
	char err[1024], name[128];
	double peak = 0, fraction = argc > 1 ? atof(argv[1]) : 0.9;
	size_t free_b, total_b;
	cudaDeviceProp prop;

	if (ab_cuda_runtime_ops.count() < 1)
		return fprintf(stderr, "bench/kernels: no CUDA GPU visible\n"), 1;
	cudaGetDeviceProperties(&prop, 0);
	cudaFree(0);
	cudaMemGetInfo(&free_b, &total_b);
	snprintf(name, sizeof(name), "%.120s", prop.name);
	if (ab_gemm_peak(8192, 20, &peak, err, sizeof(err)) < 0)
		return fprintf(stderr, "bench/kernels: %s\n", err), 1;
	printf("device: %s, %.1f GiB; measured bf16 GEMM (cuBLAS, 8192^3): %.0f TFLOP/s\n", name,
	       (double)total_b / (1 << 30), peak / 1e12);
	printf("fraction %.2f; model-mode decision = the search over the proxy step, 3 timed steps "
	       "a trial\n\n",
	       fraction);
	printf("%-20s %8s %6s %7s %9s %8s %9s %10s\n", "model", "params", "batch", "trials",
	       "decision", "step", "TFLOP/s", "of GEMM");
	for (const struct shape &s : shapes) {
		struct ab_model_trial t = {s.m, 0, 3, 0}; /* the context counts, as in the probe */
		struct ab_search_params p = {};
		struct ab_trials trials = {};
		struct ab_decision d;
		double t0 = ab_now(), secs;
		int rc;

		p.total_bytes = total_b;
		p.fraction = fraction;
		p.objective = AB_OBJECTIVE_MEMORY;
		rc = ab_search(&p, &trials, ab_model_cuda_trial, &t, &d, err, sizeof(err));
		secs = ab_now() - t0;
		if (rc < 0) {
			printf("%-20s %7.2fB %6s %7zu %8.1fs  %s\n", s.name,
			       (double)ab_model_params(&s.m) / 1e9, "-", trials.n, secs, err);
		} else {
			const struct ab_trial *c = &trials.v[d.chosen];
			double tflops = ab_model_flops(&s.m, d.batch) / c->step_s / 1e12;

			printf("%-20s %7.2fB %6ld %7zu %8.1fs %7.3fs %9.0f %9.0f%%\n", s.name,
			       (double)ab_model_params(&s.m) / 1e9, d.batch, trials.n, secs, c->step_s,
			       tflops, 100 * tflops * 1e12 / peak);
			print_profile(&s.m, d.batch, false);
			print_profile(&s.m, d.batch, true);
		}
		ab_trials_free(&trials);
	}
	return 0;
}
