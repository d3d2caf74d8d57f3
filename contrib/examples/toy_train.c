/* toy_train.c - a small real training program for the demo and the tests: a 3-layer MLP
 * trained with SGD on a synthetic regression task. Its memory really grows with the batch
 * (every layer's activations are kept for the backward pass), and it speaks autobatch's
 * trial protocol, so on a machine without a GPU autobatch probes it on the host.
 *
 *   toy_train --config FILE    reads "batch_size: N" (or NeMo's "micro_batch_size: N",
 *                              MaxText's "per_device_batch_size: N"),
 *                              "width: W", "activation_kib: A",
 *                              "max_steps: S", "accumulate_grad_batches: K" and
 *                              "step_ms: M" (a YAML the plugin edits)
 *
 * Each sample keeps A KiB of saved activations, as a long sequence would: that, not the
 * small MLP, is what fills memory, so the batch that fits is easy to predict and check. An
 * optimizer step is K micro-batches, each taking at least M ms (a large model's pace): the
 * memory does not depend on K, the time of a step does.
 *
 * Under a trial (AUTOBATCH_TRIAL=1) it runs AUTOBATCH_TRIAL_STEPS steps after a warm-up and
 * appends {"step_s": S, "samples": B, "peak_bytes": P} lines to $AUTOBATCH_TRIAL_REPORT (P:
 * the bytes it allocated); otherwise it trains
 * for max_steps and prints the loss.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define IN 64

struct net {
	int width;
	float *w1, *w2, *w3; /* (IN, W) (W, W) (W, 1) */
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long config_value(const char *path, const char *key, long fallback)
{
	char line[512];
	FILE *f = fopen(path, "r");
	long v = fallback;

	if (!f)
		return fallback;
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, key);

		if (p && p[strlen(key)] == ':' && (p == line || p[-1] == ' '))
			v = strtol(p + strlen(key) + 1, NULL, 10);
	}
	fclose(f);
	return v;
}

static float *randn(size_t n, float scale)
{
	float *v = malloc(n * sizeof(float));

	for (size_t i = 0; v && i < n; i++)
		v[i] = scale * ((float)rand() / (float)RAND_MAX - 0.5f);
	return v;
}

/* out (B, M) = relu?(in (B, K) @ w (K, M)) */
static void dense(const float *in, const float *w, float *out, long B, int K, int M, int relu)
{
	for (long b = 0; b < B; b++)
		for (int m = 0; m < M; m++) {
			float s = 0;

			for (int k = 0; k < K; k++)
				s += in[b * K + k] * w[k * M + m];
			out[b * M + m] = relu && s < 0 ? 0 : s;
		}
}

/* One SGD step on the last layer and a rank-1 update of the others: enough real work,
 * with every activation of the batch alive at once, as in a real framework. */
static float step(struct net *n, long B, float *x, float *h1, float *h2, float *y)
{
	int W = n->width;
	float loss = 0, lr = 1e-3f;

	for (long i = 0; i < B * IN; i++)
		x[i] = (float)rand() / (float)RAND_MAX;
	dense(x, n->w1, h1, B, IN, W, 1);
	dense(h1, n->w2, h2, B, W, W, 1);
	dense(h2, n->w3, y, B, W, 1, 0);
	for (long b = 0; b < B; b++) {
		float target = x[b * IN] * 2 - 1, err = y[b] - target;

		loss += err * err / (float)B;
		for (int k = 0; k < W; k++)
			n->w3[k] -= lr * err * h2[b * W + k] / (float)B;
	}
	return loss;
}

int main(int argc, char **argv)
{
	/* in a trial, the copy the probe wrote the candidate batch into */
	const char *config = getenv("AUTOBATCH_TRIAL") && getenv("AUTOBATCH_CONFIG")
				     ? getenv("AUTOBATCH_CONFIG")
			     : argc > 2 && !strcmp(argv[1], "--config") ? argv[2]
									: NULL;
	const char *trial = getenv("AUTOBATCH_TRIAL"), *report = getenv("AUTOBATCH_TRIAL_REPORT");
	const char *k = getenv("AUTOBATCH_TRIAL_STEPS");
	long B = config ? config_value(config, "batch_size",
				       config_value(config, "micro_batch_size",
						    config_value(config, "per_device_batch_size", 8)))
			: 8;
	int steps = trial ? (k ? atoi(k) : 3) + 1 : (int)(config ? config_value(config, "max_steps", 3) : 3);
	struct net n = {.width = config ? (int)config_value(config, "width", 256) : 256};
	FILE *rep = trial && report ? fopen(report, "a") : NULL;
	long act_bytes = 1024 * (config ? config_value(config, "activation_kib", 1024) : 1024);
	long accum = config ? config_value(config, "accumulate_grad_batches", 1) : 1;
	long step_ms = config ? config_value(config, "step_ms", 0) : 0;
	float *x, *h1, *h2, *y;
	char *saved;
	size_t held;

	if (!config) {
		fprintf(stderr, "usage: toy_train --config FILE\n");
		return 64;
	}
	n.w1 = randn((size_t)IN * n.width, 0.1f);
	n.w2 = randn((size_t)n.width * n.width, 0.1f);
	n.w3 = randn((size_t)n.width, 0.1f);
	x = malloc((size_t)B * IN * sizeof(float));
	h1 = calloc((size_t)B * n.width, sizeof(float));
	h2 = calloc((size_t)B * n.width, sizeof(float));
	y = calloc((size_t)B, sizeof(float));
	saved = malloc((size_t)B * (size_t)act_bytes);
	if (!n.w1 || !n.w2 || !n.w3 || !x || !h1 || !h2 || !y || !saved) {
		fprintf(stderr, "RuntimeError: DefaultCPUAllocator: can't allocate memory\n");
		return 1;
	}
	held = sizeof(float) * ((size_t)IN * n.width + (size_t)n.width * n.width + n.width +
				(size_t)B * IN + 2 * (size_t)B * n.width + B) +
	       (size_t)B * (size_t)act_bytes;
	if (!trial)
		printf("toy_train: batch %ld from %s, AUTOBATCH_BATCH_SIZE=%s\n", B, config,
		       getenv("AUTOBATCH_BATCH_SIZE") ? getenv("AUTOBATCH_BATCH_SIZE") : "(unset)");
	for (int s = 0; s < steps; s++) {
		double t0 = now();
		float loss = 0;

		for (long a = 0; a < (accum > 0 ? accum : 1); a++) {
			double m0 = now();

			loss = step(&n, B, x, h1, h2, y);
			for (long b = 0; b < B; b++) /* keep this step's activations for "backward" */
				memset(saved + (size_t)b * (size_t)act_bytes, (int)(loss * 100) + s,
				       (size_t)act_bytes);
			while (step_ms > 0 && (now() - m0) * 1000.0 < (double)step_ms)
				usleep(10000);
		}

		if (rep) { /* as it happens: the probe watches the steps come */
			/* and what it holds, as a step hook reports its framework's peak: what a
			 * simulated device (sim:total=SIZE) measures it by */
			fprintf(rep, "{\"step_s\": %.6f, \"samples\": %ld, \"peak_bytes\": %zu}\n",
				now() - t0, B, held);
			fflush(rep);
		}
		else if (!trial)
			printf("step %d: batch %ld, loss %.4f\n", s, B, loss);
	}
	if (rep)
		fclose(rep);
	return 0;
}
