/* search_figures.c - benchmark (build/bench/search): trials and accuracy of autobatch's search against the peers'
 * strategies, on simulated memory curves built from published memory models. Prints a
 * table; never passes or fails on time.
 *
 *   bench/search [-v]      (-v: one line per case and strategy)
 *   bench/search --random [SEEDS]   the unit test's random jittered lines, SEEDS draws of 300
 *
 * Curves: transformer training steps (Korthikanti et al. 2022: activations per layer per
 * sample s*h*(34 + 5*a*s/h) bytes in 16-bit, model states 16 bytes per parameter with mixed
 * precision Adam), CNNs, allocator granularity, fragmentation growing with the batch,
 * workspace jumps, allocator jitter, nothing-fits cases and global-batch constraints. The
 * ground truth scans every candidate; the strategies only see trials.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"
#include "sim.h"

#define GiB (1024.0 * 1024 * 1024)
#define MiB (1024.0 * 1024)
#define MAX_CASES 320
#define MAX_B 4096

struct curve_case {
	char name[96];
	double total, base, per_sample;  /* bytes */
	double frag;                     /* peak *= 1 + frag * (b / b_nominal)^2 */
	double jump_at, jump;            /* + jump bytes from batch jump_at */
	double quad;                     /* + quad x b^2 bytes: attention, growing buckets */
	double oom_floor;                /* an OOM reports this share of its peak as a floor */
	double granule, jitter;
	double fraction;
	long global_batch, devices, multiple_of;
	double model_states;             /* what an analytic estimate knows (DeepSpeed-style) */
	double step_s, saturate;
};

static struct curve_case cases[MAX_CASES];
static int ncases, nbase; /* cases[nbase..] are the superlinear families */

static double peak_of(const struct curve_case *c, double b)
{
	double nominal = (c->total - c->base) / c->per_sample, p;

	p = c->base + c->per_sample * b;
	if (c->frag > 0 && nominal > 0)
		p *= 1 + c->frag * (b / nominal) * (b / nominal);
	if (c->jump > 0 && b >= c->jump_at)
		p += c->jump;
	return p + c->quad * b * b;
}

/* A dense curve file in memory: the sim interpolates exactly between integer batches. */
static void build_sim(const struct curve_case *c, struct ab_sim *s)
{
	struct ab_sim_point *pts = calloc(MAX_B, sizeof(*pts));
	char err[256];

	memset(s, 0, sizeof(*s));
	s->total_bytes = (uint64_t)c->total;
	s->granule = (uint64_t)c->granule;
	s->jitter = c->jitter;
	s->seed = 7;
	s->step_s = c->step_s;
	s->saturate = c->saturate;
	s->oom_floor = c->oom_floor;
	for (int i = 0; i < MAX_B; i++) {
		pts[i].batch = i + 1;
		pts[i].peak_bytes = peak_of(c, i + 1);
		pts[i].step_s = c->step_s * (c->saturate > 0 && i + 1 > c->saturate
						     ? (i + 1) / c->saturate
						     : 1);
	}
	if (ab_sim_set_curve(s, pts, MAX_B, err, sizeof(err)) < 0) {
		fprintf(stderr, "bench: %s\n", err);
		exit(1);
	}
}

static void add(struct curve_case c)
{
	if (ncases < MAX_CASES)
		cases[ncases++] = c;
}

/* Korthikanti et al.: 16-bit activations per layer and sample, no recomputation. */
static double transformer_act(double layers, double s, double h, double a)
{
	return layers * s * h * (34 + 5 * a * s / h);
}

/* Curves that bend upward (attention over long inputs, growing sequence buckets): a term
 * quadratic in the batch makes 10% to 50% of the peak at the limit, crossing at batch 24,
 * 69 or 180, at fractions 0.5 to 0.95 of an 80 GiB GPU; with and without 1% jitter; OOMs
 * that report no peak, and OOMs that report their peak as a floor (tests/unit/test_search.c's
 * superlinear families). */
static void superlinear_cases(void)
{
	static const double fractions[] = {0.5, 0.6, 0.7, 0.8, 0.9, 0.95};
	static const double shares[] = {0.1, 0.2, 0.3, 0.4, 0.5};
	static const double crossings[] = {24, 69, 180};

	for (int jitter = 0; jitter < 2; jitter++)
		for (int floor_given = 0; floor_given < 2; floor_given++)
			for (size_t f = 0; f < sizeof(fractions) / sizeof(fractions[0]); f++)
				for (size_t q = 0; q < sizeof(shares) / sizeof(shares[0]); q++) {
					struct curve_case c = {0};
					double L = fractions[f] * 80 * GiB;
					double bx = crossings[(f + q) % 3], sh = shares[q];

					c.total = 80 * GiB;
					c.fraction = fractions[f];
					c.base = c.model_states = 0.05 * L;
					c.per_sample = (0.95 - sh) * L / bx;
					c.quad = sh * L / (bx * bx);
					c.granule = 2 * MiB;
					c.jitter = jitter ? 0.01 : 0;
					c.oom_floor = floor_given;
					c.step_s = 0.1;
					snprintf(c.name, sizeof(c.name),
						 "bend %.0f%% f%.2f x%.0f%s%s", 100 * sh, c.fraction, bx,
						 jitter ? " jitter" : "", floor_given ? " floor" : "");
					add(c);
				}
}

static void build_cases(void)
{
	static const struct { const char *name; double params, layers, s, h, a; } models[] = {
		{"gpt2-124M s1024", 124e6, 12, 1024, 768, 12},
		{"gpt2-350M s1024", 350e6, 24, 1024, 1024, 16},
		{"gpt-1.3B s2048", 1.3e9, 24, 2048, 2048, 16},
		{"llama-1B s4096", 1.2e9, 16, 4096, 2048, 32},
		{"gpt-2.7B s2048", 2.7e9, 32, 2048, 2560, 32},
	};
	static const double gpus[] = {80 * GiB, 40 * GiB, 24 * GiB};
	static const double fractions[] = {0.8, 0.6, 0.9};

	for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++)
		for (size_t g = 0; g < sizeof(gpus) / sizeof(gpus[0]); g++)
			for (int variant = 0; variant < 4; variant++) {
				if (models[m].params > 1e9 && gpus[g] < 30 * GiB)
					continue; /* nobody trains these on a 24 GiB GPU */
				struct curve_case c = {0};
				double act = transformer_act(models[m].layers, models[m].s, models[m].h,
							     models[m].a);
				/* flash attention drops the 5as/h score term */
				double flash = models[m].layers * models[m].s * models[m].h * 34;

				c.total = gpus[g];
				c.model_states = 16 * models[m].params;
				c.base = c.model_states + 1.5 * GiB; /* CUDA context, workspaces */
				c.per_sample = variant == 0 ? act : flash;
				c.fraction = fractions[(m + g + variant) % 3];
				c.granule = 2 * MiB;
				c.step_s = 0.05 * models[m].params / 124e6;
				c.saturate = 8 + 8 * (double)variant;
				if (variant == 1) { /* fragmentation, coarse allocator segments */
					c.frag = 0.06;
					c.granule = 20 * MiB;
				} else if (variant == 2) { /* cuBLAS/cuDNN workspace switch, jitter */
					c.jitter = 0.01;
					c.jump = 1.0 * GiB;
					c.jump_at = floor(0.6 * (c.fraction * c.total - c.base) / c.per_sample);
				} else if (variant == 3) {
					c.global_batch = 2048;
					c.devices = 8;
				}
				snprintf(c.name, sizeof(c.name), "%s %.0fGiB f%.1f v%d", models[m].name,
					 c.total / GiB, c.fraction, variant);
				add(c);
			}
	/* CNNs: small base, per-sample dominated, 224px and 512px inputs. */
	for (int i = 0; i < 6; i++) {
		struct curve_case c = {0};

		c.total = i % 2 ? 16 * GiB : 80 * GiB;
		c.model_states = 16 * 25.6e6;
		c.base = c.model_states + 0.8 * GiB;
		c.per_sample = (i < 3 ? 0.09 : 0.47) * GiB;
		c.fraction = fractions[i % 3];
		c.granule = 2 * MiB;
		c.jitter = i >= 4 ? 0.01 : 0;
		c.multiple_of = i == 2 ? 8 : 0;
		c.step_s = 0.02;
		c.saturate = 64;
		c.frag = i == 5 ? 0.1 : 0;
		snprintf(c.name, sizeof(c.name), "resnet50 %s %.0fGiB f%.1f%s", i < 3 ? "224" : "512",
			 c.total / GiB, c.fraction, c.multiple_of ? " x8" : "");
		add(c);
	}
	/* The shapes that cost a search trials, together: fragmentation that grows toward the
	 * limit (peak x 1.12 at the nominal batch), a workspace switch at 40% of it, and
	 * allocator noise of 2% of the peak (cuDNN autotuning, caching allocator timing). */
	for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		struct curve_case c = {0};

		c.total = 80 * GiB;
		c.model_states = 16 * models[m].params;
		c.base = c.model_states + 1.5 * GiB;
		c.per_sample = transformer_act(models[m].layers, models[m].s, models[m].h,
					       models[m].a);
		c.fraction = 0.85;
		c.granule = 20 * MiB;
		c.frag = 0.12;
		c.jitter = 0.02;
		c.jump = 0.5 * GiB;
		c.jump_at = floor(0.4 * (c.fraction * c.total - c.base) / c.per_sample);
		c.step_s = 0.05 * models[m].params / 124e6;
		c.saturate = 4;
		snprintf(c.name, sizeof(c.name), "%s 80GiB f0.85 hard", models[m].name);
		add(c);
	}
	/* Large models whose samples are a small share of the GPU: a 32B-class model at
	 * sequence 4096 sharded over 16 GPUs (FSDP/ZeRO-3: 16 bytes a parameter / 16 = 32 GB,
	 * and the gathered layer), full recomputation (a layer's input kept per layer, one
	 * layer's activations live), on an 80 GiB H100 at fractions 0.6-0.9: the answer is a
	 * few samples to a few dozen. Plain, with 1% jitter, with a workspace jump. */
	for (int i = 0; i < 24; i++) {
		struct curve_case c = {0};
		static const double fr[] = {0.6, 0.7, 0.8, 0.9};
		static const double shard[] = {16, 32, 64}; /* GPUs the states are sharded over */
		double layers = 64, s = 4096, h = 5120;

		c.total = 80 * GiB;
		c.fraction = fr[i % 4];
		c.model_states = 16 * 32e9 / shard[(i / 4) % 3];
		c.base = c.model_states + 2 * 2 * 32e9 / layers + 1.5 * GiB;
		c.per_sample = layers * s * h * 2 + s * h * 34;
		c.granule = 20 * MiB;
		c.step_s = 4;
		c.saturate = 2;
		if (i >= 12) {
			c.jitter = 0.01;
			if (i >= 18) {
				c.jump = 2 * GiB;
				c.jump_at = floor(0.5 * (c.fraction * c.total - c.base) / c.per_sample);
			}
		}
		snprintf(c.name, sizeof(c.name), "32B s4096 /%.0f f%.1f%s%s", shard[(i / 4) % 3],
			 c.fraction, c.jitter > 0 ? " jitter" : "", c.jump > 0 ? " jump" : "");
		add(c);
	}
	/* The same, with the samples an even smaller share: the fixed part 70-95% of the limit
	 * (states, gathered layers, NCCL and allocator reserves), the limit crossed at batch 24,
	 * 96 or 384, so that batches 1 and 4 differ by less than a peak's noise; plain and with
	 * 1% jitter. */
	for (int i = 0; i < 36; i++) {
		struct curve_case c = {0};
		static const double bf[] = {0.7, 0.85, 0.95}, bx[] = {24, 96, 384};
		double L;

		c.total = 80 * GiB;
		c.fraction = i % 2 ? 0.9 : 0.6;
		L = c.fraction * c.total;
		c.base = c.model_states = bf[(i / 2) % 3] * L;
		c.per_sample = (1 - bf[(i / 2) % 3]) * L / bx[(i / 6) % 3];
		c.granule = 2 * MiB;
		c.step_s = 2;
		c.saturate = 8;
		c.jitter = i >= 18 ? 0.01 : 0;
		snprintf(c.name, sizeof(c.name), "large fixed %.0f%% f%.1f x%.0f%s",
			 100 * bf[(i / 2) % 3], c.fraction, bx[(i / 6) % 3], c.jitter > 0 ? " jitter" : "");
		add(c);
	}
	/* Nothing fits: the model states alone exceed the limit. */
	for (int i = 0; i < 2; i++) {
		struct curve_case c = {0};

		c.total = 80 * GiB;
		c.model_states = 16 * 7e9;
		c.base = c.model_states * (i ? 0.5 : 1) + GiB;
		c.per_sample = 2 * GiB;
		c.fraction = i ? 0.5 : 0.8;
		c.granule = 2 * MiB;
		c.step_s = 0.5;
		snprintf(c.name, sizeof(c.name), "llama-7B nothing fits %d", i);
		add(c);
	}
	nbase = ncases;
	superlinear_cases();
}

/* ---- ground truth and the strategies ----------------------------------------------- */

struct outcome {
	long chosen;
	int trials;
	double seconds;
	int verified;     /* the chosen batch was itself run and fit */
	char path[128];   /* the batches tried, for -v */
	int failed;       /* reported no batch */
	int rounds;       /* autobatch: rounds of trials run at once */
	int confidence;   /* autobatch: the decision's tier */
};

struct env {
	const struct curve_case *c;
	struct ab_sim sim;
	uint64_t limit;
	int trials;
	double seconds;
};

static bool allowed(const struct curve_case *c, long b)
{
	if (c->multiple_of && b % c->multiple_of)
		return false;
	if (c->global_batch && (c->global_batch / c->devices) % b)
		return false;
	return true;
}

/* One trial as a peer would see it: fits or "OOM" at the limit. */
static bool peer_trial(struct env *e, long b, double *peak)
{
	struct ab_trial t;
	char err[64];

	ab_sim_trial(&e->sim, b, &t, err, sizeof(err));
	e->trials++;
	e->seconds += t.seconds;
	if (peak)
		*peak = t.has_peak ? (double)t.peak_bytes : INFINITY;
	return ab_trial_fits(&t, e->limit, 0);
}

static bool truly_fits(struct env *e, long b)
{
	struct ab_trial t;
	char err[64];

	if (b < 1)
		return false;
	ab_sim_trial(&e->sim, b, &t, err, sizeof(err));
	return ab_trial_fits(&t, e->limit, 0);
}

/* The largest allowed batch below the first allowed one that does not fit: with jitter a
 * size above a failure may fit by luck, and nobody should run at it. */
static long best_of(struct env *e)
{
	long best = 0;

	for (long b = 1; b <= MAX_B; b++) {
		if (!allowed(e->c, b))
			continue;
		if (!truly_fits(e, b))
			break;
		best = b;
	}
	return best;
}

/* The case's simulated GPU and limit; returns the best batch (the ground truth). */
static long env_open(struct env *e, const struct curve_case *c)
{
	*e = (struct env){.c = c};
	build_sim(c, &e->sim);
	e->limit = (uint64_t)floor(c->fraction * c->total);
	return best_of(e);
}

/* The probe's clock under a time limit: each trial takes a round's time (time_table). */
static double clock_s, round_s;

static double bench_clock(void) { return clock_s; }

static int timed_sim_trial(void *ctx, long b, struct ab_trial *t, char *err, size_t errlen)
{
	clock_s += round_s;
	return ab_sim_trial(ctx, b, t, err, errlen);
}

/* autobatch with G GPUs, and a time limit of that many seconds on bench_clock (0: none) */
static struct outcome ours_timed(struct env *e, int gpus, double limit_s)
{
	struct ab_search_params p = {
		.total_bytes = e->sim.total_bytes, .fraction = e->c->fraction,
		.objective = AB_OBJECTIVE_MEMORY, .multiple_of = e->c->multiple_of,
		.global_batch = e->c->global_batch, .devices = e->c->devices, .max = MAX_B,
		.parallel = gpus,
	};
	struct ab_trials trials = {0};
	struct ab_decision d;
	struct outcome o = {0};
	char err[256];

	if (limit_s > 0) {
		clock_s = 0;
		p.deadline = limit_s;
		p.clock = bench_clock;
	}
	if (ab_search(&p, &trials, limit_s > 0 ? timed_sim_trial : ab_sim_trial, &e->sim, &d, err,
		      sizeof(err)) == 0) {
		o.chosen = d.batch;
		o.verified = 1;
		o.confidence = d.confidence;
	} else {
		o.failed = 1;
	}
	o.trials = (int)trials.n;
	o.rounds = (int)trials.rounds;
	for (size_t i = 0, len = 0; i < trials.n; i++) {
		o.seconds += trials.v[i].seconds;
		len += (size_t)snprintf(o.path + len, len < sizeof(o.path) ? sizeof(o.path) - len : 0,
					"%s%ld", i ? "," : "", trials.v[i].batch);
	}
	ab_trials_free(&trials);
	return o;
}

static struct outcome ours_on(struct env *e, int gpus)
{
	return ours_timed(e, gpus, 0);
}

static struct outcome ours(struct env *e)
{
	return ours_on(e, 1);
}

/* Lightning power: double from 2 until OOM; the last that ran. */
static struct outcome lightning_power(struct env *e)
{
	struct outcome o = {0};
	long b = 2, last = 0;

	while (b <= MAX_B && peer_trial(e, b, NULL)) {
		last = b;
		b *= 2;
	}
	o.chosen = last;
	o.verified = last > 0;
	o.failed = last == 0;
	return o;
}

/* Lightning binsearch: double until OOM, bisect to a gap of 1, keep 95% (unverified). */
static struct outcome lightning_binsearch(struct env *e)
{
	struct outcome o = {0};
	long lo = 0, hi = 2;

	while (hi <= MAX_B && peer_trial(e, hi, NULL)) {
		lo = hi;
		hi *= 2;
	}
	while (lo > 0 && hi - lo > 1) {
		long mid = (lo + hi) / 2;

		if (peer_trial(e, mid, NULL))
			lo = mid;
		else
			hi = mid;
	}
	o.chosen = (long)(lo * 0.95);
	o.failed = o.chosen == 0;
	o.verified = 0;
	return o;
}

/* Ultralytics AutoBatch: 1,2,4,8,16, a straight-line fit, solve for the limit; unverified;
 * falls back to 16 silently when the fit is unusable. */
static struct outcome ultralytics(struct env *e)
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0, n = 0, peak;
	struct outcome o = {0};

	for (long b = 1; b <= 16; b *= 2)
		if (peer_trial(e, b, &peak) && isfinite(peak)) {
			sx += b, sy += peak, sxx += (double)b * b, sxy += b * peak, n++;
		}
	double slope = n >= 2 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : 0;
	double icpt = n >= 2 ? (sy - slope * sx) / n : 0;

	o.chosen = slope > 0 ? (long)floor(((double)e->limit - icpt) / slope) : 16;
	if (o.chosen < 1)
		o.chosen = 16;
	if (o.chosen > MAX_B)
		o.chosen = MAX_B;
	o.verified = 0;
	return o;
}

/* Accelerate: start at 128, x0.9 after each OOM; the first that runs. */
static struct outcome accelerate(struct env *e)
{
	struct outcome o = {0};
	long b = 128;

	while (b >= 1 && !peer_trial(e, b, NULL))
		b = (long)(b * 0.9);
	o.chosen = b;
	o.verified = b >= 1;
	o.failed = b < 1;
	return o;
}

/* DeepSpeed-autotuning style: profile batch 1, activation per sample from the analytic
 * model states, estimate the maximum, then try 1x and 1.05x (or 0.95x). */
static struct outcome deepspeed(struct env *e)
{
	struct outcome o = {0};
	double p1;

	if (!peer_trial(e, 1, &p1) || !isfinite(p1)) {
		o.failed = 1;
		return o;
	}
	double act = p1 - e->c->model_states;
	long est = act > 0 ? (long)(((double)e->limit - e->c->model_states) / act) : MAX_B;

	est = est < 1 ? 1 : est > MAX_B ? MAX_B : est;
	if (peer_trial(e, est, NULL)) {
		long up = (long)(est * 1.05);

		o.chosen = up > est && peer_trial(e, up, NULL) ? up : est;
		o.verified = 1;
	} else {
		long down = (long)(est * 0.95);

		o.chosen = down >= 1 ? down : 1;
		o.verified = down >= 1 && peer_trial(e, down, NULL);
	}
	return o;
}

struct strategy {
	const char *name;
	struct outcome (*run)(struct env *e);
};

static const struct strategy strategies[] = {
	{"autobatch", ours},
	{"lightning-power", lightning_power},
	{"lightning-binsearch", lightning_binsearch},
	{"ultralytics-fit", ultralytics},
	{"accelerate-shrink", accelerate},
	{"deepspeed-estimate", deepspeed},
};
#define NSTRATEGIES (sizeof(strategies) / sizeof(strategies[0]))

struct tally {
	int trials[MAX_CASES], n, max_trials, over, unverified, under97;
	int fit_trials[MAX_CASES], nfit; /* cases where some batch fits */
	double worst_ratio, seconds, ratio_sum;
	int scored;
};

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Each trial of a real job: a fixed start-up (loading, compiling) and 1 warm-up + 3
 * measured steps. A round costs one trial's time whatever its number of trials. */
#define TRIAL_STARTUP_S 60.0
#define TRIAL_STEP_S 1.0
#define TRIAL_STEPS 4

static const int gpu_counts[] = {1, 2, 4, 8};
#define NGPUS (sizeof(gpu_counts) / sizeof(gpu_counts[0]))

/* autobatch with G GPUs on the probe's node: rounds, trials and wall time per case of
 * cases[from..to). */
static void parallel_table(int from, int to, bool verbose)
{
	printf("\nparallel trials: rounds of up to G trials at once, one per GPU; each trial %.0f s "
	       "of start-up and %d steps of %.0f s\n\n",
	       TRIAL_STARTUP_S, TRIAL_STEPS, TRIAL_STEP_S);
	printf("%-6s %8s %6s %8s %6s %10s %10s %9s %6s\n", "GPUs", "median", "max", "median",
	       "max", "median", "max", "<97%", "over");
	printf("%-6s %8s %6s %8s %6s %10s %10s %9s %6s\n", "", "rounds", "rounds", "trials",
	       "trials", "wall s", "wall s", "of best", "limit");
	for (size_t g = 0; g < NGPUS; g++) {
		int rounds[MAX_CASES], trials[MAX_CASES], n = 0, under = 0, over = 0;
		double per_round = TRIAL_STARTUP_S + TRIAL_STEPS * TRIAL_STEP_S;

		for (int i = from; i < to; i++) {
			struct env e;
			long best = env_open(&e, &cases[i]);
			struct outcome o = ours_on(&e, gpu_counts[g]);

			bool fits = o.chosen > 0 && truly_fits(&e, o.chosen);

			over += o.chosen > 0 && !fits;
			under += best > 0 && (!fits || o.chosen < (1 - AB_SEARCH_TOLERANCE) * best);
			rounds[n] = o.rounds;
			trials[n++] = o.trials;
			if (verbose)
				printf("G=%d %-44s best %5ld chosen %5ld rounds %d trials %2d %s\n",
				       gpu_counts[g], cases[i].name, best, o.chosen, o.rounds, o.trials,
				       o.path);
			ab_sim_free(&e.sim);
		}
		qsort(rounds, (size_t)n, sizeof(int), cmp_int);
		qsort(trials, (size_t)n, sizeof(int), cmp_int);
		printf("%-6d %8d %6d %8d %6d %10.0f %10.0f %9d %6d\n", gpu_counts[g], rounds[n / 2],
		       rounds[n - 1], trials[n / 2], trials[n - 1], rounds[n / 2] * per_round,
		       rounds[n - 1] * per_round, under, over);
	}
}

/* autobatch under the probe's time limit (--time-limit: no round started that 1.25 times the
 * longest would end past it; the best fit seen stands), of K trials' time, one GPU: how far
 * below the best the choice stays, and how often none fit in time. */
static void time_table(int from, int to)
{
	static const double limits[] = {1.5, 2.5, 3.5, 4.5, 6.5, 0};
	int cases_fit = 0;

	round_s = TRIAL_STARTUP_S + TRIAL_STEPS * TRIAL_STEP_S;
	printf("\nthe probe's time limit, in trials' time (each %.0f s); one GPU\n\n", round_s);
	printf("%-12s %8s %8s %9s %10s %6s\n", "time limit", "median", "no fit", "<97%",
	       "median %", "over");
	printf("%-12s %8s %8s %9s %10s %6s\n", "", "trials", "in time", "of best", "of best",
	       "limit");
	for (size_t l = 0; l < sizeof(limits) / sizeof(limits[0]); l++) {
		int trials[MAX_CASES], share[MAX_CASES], n = 0, ns = 0, under = 0, over = 0, none = 0;
		char name[32];

		for (int i = from; i < to; i++) {
			struct env e;
			long best = env_open(&e, &cases[i]);
			struct outcome o = ours_timed(&e, 1, limits[l] * round_s);
			bool fits = o.chosen > 0 && truly_fits(&e, o.chosen);

			if (best > 0) {
				over += o.chosen > 0 && !fits;
				none += o.chosen == 0;
				under += !fits || o.chosen < (1 - AB_SEARCH_TOLERANCE) * best;
				share[ns++] = fits ? (int)(100.0 * o.chosen / best) : 0;
				trials[n++] = o.trials;
			}
			ab_sim_free(&e.sim);
		}
		qsort(trials, (size_t)n, sizeof(int), cmp_int);
		qsort(share, (size_t)ns, sizeof(int), cmp_int);
		if (limits[l] > 0)
			snprintf(name, sizeof(name), "%.1f trials", limits[l]);
		else
			snprintf(name, sizeof(name), "none");
		printf("%-12s %8d %8d %9d %9d%% %6d\n", name, n ? trials[n / 2] : 0, none, under,
		       ns ? share[ns / 2] : 0, over);
		cases_fit = n;
	}
	printf("(over the %d cases where some batch fits)\n", cases_fit);
}

/* tests/unit/test_search.c's random curves (affine, base up to 60% of the GPU, jitter 0, 0.5
 * or 1% of the peak, 2 MiB granules or none), drawn with other seeds: how often the 6-trial
 * budget ends below 97% of the best (the largest batch whose noise-free peak fits the limit
 * less the jitter). */
static int random_curves(int seeds)
{
	printf("random jittered lines (tests/unit/test_search.c's draw, srand seeds 1-%d):\n", seeds);
	for (int seed = 1; seed <= seeds; seed++) {
		int hist[10] = {0}, n = 0, under = 0, over = 0, said = 0;

		srand((unsigned)seed);
		for (int i = 0; i < 300; i++) {
			struct curve_case c = {0};
			struct env e;
			double fraction = 0.5 + (rand() % 50) / 100.0;

			c.total = (double)(16 + rand() % 128) * GiB;
			c.base = c.total * (rand() % 60) / 100.0;
			c.per_sample = c.total / (double)(8 + rand() % 2000);
			c.jitter = (rand() % 3) * 0.005;
			c.granule = (rand() % 2) * 2 * MiB;
			c.fraction = fraction;
			c.step_s = 0.1;
			if (c.base + c.per_sample > fraction * c.total)
				continue;
			env_open(&e, &c);
			e.sim.seed = (uint64_t)i; /* as the unit test draws each curve's noise */
			double j = e.sim.jitter;
			e.sim.jitter = 0; /* the honest best: noise-free, under the limit less jitter */
			uint64_t limit = e.limit;
			e.limit = (uint64_t)((double)limit * (1 - j));
			long best = best_of(&e);
			e.limit = limit;
			e.sim.jitter = j;
			struct outcome o = ours(&e);

			n++;
			hist[o.trials < 9 ? o.trials : 9]++;
			if (o.chosen < (1 - AB_SEARCH_TOLERANCE) * (double)best) {
				under++;
				said += o.confidence == 70 || o.confidence == 71; /* budget or cap spent */
			}
			over += o.chosen > 0 && !truly_fits(&e, o.chosen);
			ab_sim_free(&e.sim);
		}
		printf("  seed %2d: %d curves, trials 2:%d 3:%d 4:%d 5:%d 6:%d 7:%d 8:%d 9+:%d, below "
		       "97%% of the best %d (%d said 'trial budget/cap spent'), over the limit %d\n",
		       seed, n, hist[2], hist[3], hist[4], hist[5], hist[6], hist[7], hist[8],
		       hist[9], under, said, over);
	}
	return 0;
}

/* Every strategy on cases[from..to): the table's rows. */
static void strategy_table(int from, int to, bool verbose)
{
	struct tally t[NSTRATEGIES];

	memset(t, 0, sizeof(t));
	for (size_t s = 0; s < NSTRATEGIES; s++)
		t[s].worst_ratio = INFINITY;
	for (int i = from; i < to; i++) {
		for (size_t s = 0; s < NSTRATEGIES; s++) {
			struct env e;
			struct outcome o;
			long best = env_open(&e, &cases[i]);

			e.trials = 0;
			e.seconds = 0;
			o = strategies[s].run(&e);
			if (s > 0) {
				o.trials = e.trials;
				o.seconds = e.seconds;
			}
			struct tally *ts = &t[s];
			bool fits = o.chosen > 0 && truly_fits(&e, o.chosen) && allowed(&cases[i], o.chosen);
			double ratio = best > 0 && fits ? (double)o.chosen / (double)best : 0;

			ts->trials[ts->n++] = o.trials;
			if (o.trials > ts->max_trials)
				ts->max_trials = o.trials;
			ts->seconds += o.seconds;
			if (best == 0) {
				ts->over += o.chosen > 0; /* claimed a batch where none fits */
			} else {
				ts->over += o.chosen > 0 && !fits;
				ts->unverified += !o.failed && !o.verified;
				ts->under97 += ratio < 1 - AB_SEARCH_TOLERANCE;
				ts->worst_ratio = fmin(ts->worst_ratio, ratio);
				ts->ratio_sum += ratio;
				ts->scored++;
				ts->fit_trials[ts->nfit++] = o.trials;
			}
			if (verbose)
				printf("%-44s %-20s best %5ld chosen %5ld%s trials %2d %s\n",
				       cases[i].name, strategies[s].name, best, o.chosen,
				       o.chosen > 0 && !fits ? " OVER" : o.failed ? " fail" : "     ",
				       o.trials, o.path);
			ab_sim_free(&e.sim);
		}
	}
	printf("%-20s %8s %8s %6s %10s %10s %9s %10s %10s %12s\n", "strategy", "median", "median",
	       "max", "worst", "mean", "<97%", "over", "unverified", "sim seconds");
	printf("%-20s %8s %8s %6s %10s %10s %9s %10s %10s %12s\n", "", "trials", "(fits)",
	       "trials", "chosen/best", "chosen/best", "of best", "limit", "choices",
	       "(all cases)");
	for (size_t s = 0; s < NSTRATEGIES; s++) {
		struct tally *ts = &t[s];

		qsort(ts->trials, (size_t)ts->n, sizeof(int), cmp_int);
		qsort(ts->fit_trials, (size_t)ts->nfit, sizeof(int), cmp_int);
		printf("%-20s %8d %8d %6d %10.3f %10.3f %9d %10d %10d %12.0f\n", strategies[s].name,
		       ts->trials[ts->n / 2], ts->fit_trials[ts->nfit / 2], ts->max_trials,
		       ts->worst_ratio, ts->ratio_sum / ts->scored, ts->under97, ts->over,
		       ts->unverified, ts->seconds);
	}
}

int main(int argc, char **argv)
{
	bool verbose = argc > 1 && !strcmp(argv[1], "-v");
	int nothing = 0;

	if (argc > 1 && !strcmp(argv[1], "--random"))
		return random_curves(argc > 2 ? atoi(argv[2]) : 11);
	build_cases();
	for (int i = 0; i < nbase; i++) {
		struct env e;

		nothing += env_open(&e, &cases[i]) == 0;
		ab_sim_free(&e.sim);
	}
	printf("autobatch search benchmark: %d simulated curves (transformers per Korthikanti et "
	       "al. 2022, CNNs, granularity, fragmentation, workspace jumps, jitter, global-batch "
	       "and multiple-of constraints); in %d of them nothing fits\n\n",
	       nbase, nothing);
	strategy_table(0, nbase, verbose);
	printf("\n%d curves that bend upward: a quadratic term 10-50%% of the peak at the limit, "
	       "fractions 0.5-0.95, with and without 1%% jitter, OOMs with and without a floor\n\n",
	       ncases - nbase);
	strategy_table(nbase, ncases, verbose);
	printf("\nmedian (fits): over the cases where some batch fits. "
	       "best: the largest allowed batch below the first that does not fit. "
	       "<97%% of best: cases whose choice is below 97%% of the best "
	       "(an over-limit or missing choice counts as 0). over limit: choices whose peak "
	       "exceeds fraction x total. unverified: choices never run.\n");
	parallel_table(0, nbase, verbose);
	printf("\nthe same, on the %d curves that bend upward:\n", ncases - nbase);
	parallel_table(nbase, ncases, verbose);
	time_table(0, nbase);
	return 0;
}
