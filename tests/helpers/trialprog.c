/* trialprog.c - a small real training-step stand-in for exec-mode tests: it allocates and
 * touches memory that grows with $AUTOBATCH_BATCH_SIZE and behaves as asked.
 *
 *   trialprog alloc BASE_MiB PER_SAMPLE_MiB CAP_MiB [HOW [STARTUP_S]]
 *       sleeps STARTUP_S (a model loading), allocates BASE + b * PER_SAMPLE MiB; beyond CAP
 *       prints PyTorch's OOM message and exits 1. HOW: "report" (default) speaks the trial
 *       protocol (steps and peak_bytes), "steps" reports its steps only, "train" reports
 *       steps and goes on training (never exits), "spike" frees its memory at once, then
 *       does as "train" (a peak no sample may see), "warmup" reports one step and exits,
 *       "quiet" reports nothing, "sleep" reports nothing and never exits, "brief" reports
 *       nothing and exits 0.1 s later (a task shorter than a sample), "segv" dies of
 *       SIGSEGV before its first step
 *   trialprog curve BASE PER_SAMPLE_BYTES CAP_BYTES   reports a peak without allocating
 *   trialprog hang | crash | fork-child | fork-grandchild | flood
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB (1024.0 * 1024.0)

static FILE *report(void)
{
	const char *path = getenv("AUTOBATCH_TRIAL_REPORT");

	return path ? fopen(path, "a") : NULL;
}

static long batch(void)
{
	const char *b = getenv("AUTOBATCH_BATCH_SIZE");

	return b ? atol(b) : 1;
}

static void steps(FILE *r, long b, double step_s)
{
	const char *k = getenv("AUTOBATCH_TRIAL_STEPS");
	int n = k ? atoi(k) : 3;

	for (int i = 0; i <= n && r; i++) {
		fprintf(r, "{\"step_s\": %.4f, \"samples\": %ld}\n", i ? step_s : step_s * 3, b);
		fflush(r);
	}
}

static int alloc(int argc, char **argv)
{
	double base = atof(argv[2]), per = atof(argv[3]), cap = atof(argv[4]);
	const char *how = argc > 5 ? argv[5] : "report";
	long b = batch();
	double want = (base + per * (double)b) * MiB;
	char *mem;
	FILE *r;

	if (argc > 6)
		usleep((useconds_t)(atof(argv[6]) * 1e6));
	if (want > cap * MiB) {
		fprintf(stderr, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
				"%.0f MiB\n", want / MiB);
		return 1;
	}
	if (!(mem = malloc((size_t)want)))
		return 2;
	for (size_t i = 0; i < (size_t)want; i += 4096)
		mem[i] = (char)i; /* resident, not just reserved */
	if (!strcmp(how, "sleep"))
		for (;;)
			pause();
	if (!strcmp(how, "segv"))
		raise(SIGSEGV);
	if (!strcmp(how, "brief"))
		usleep(100000);
	if (!strcmp(how, "spike")) {
		free(mem);
		mem = NULL;
		how = "train";
	}
	if (!strcmp(how, "warmup") && (r = report())) {
		fprintf(r, "{\"step_s\": 0.5}\n");
		fclose(r);
	}
	if ((!strcmp(how, "report") || !strcmp(how, "steps") || !strcmp(how, "train")) &&
	    (r = report())) {
		steps(r, b, 0.01 * (double)(b < 16 ? 16 : b));
		if (!strcmp(how, "report"))
			fprintf(r, "{\"peak_bytes\": %.0f}\n", want);
		fclose(r);
	}
	if (!strcmp(how, "train"))
		for (;;)
			pause();
	free(mem);
	return 0;
}

/* Reports a peak from a line without touching memory: exec mode on sim:total=SIZE. */
static int curve(char **argv)
{
	double base = atof(argv[2]), per = atof(argv[3]), cap = atof(argv[4]);
	long b = batch();
	double peak = base + per * (double)b;
	FILE *r = report();

	if (!r)
		return 3;
	if (peak > cap) {
		fprintf(r, "{\"oom\": true}\n");
		fclose(r);
		return 1;
	}
	steps(r, b, 0.1);
	fprintf(r, "{\"peak_bytes\": %.0f}\n", peak);
	fclose(r);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "alloc"))
		return alloc(argc, argv);
	if (argc >= 5 && !strcmp(argv[1], "curve"))
		return curve(argv);
	if (argc >= 2 && !strcmp(argv[1], "hang")) {
		FILE *r = report();

		if (r) { /* a protocol-aware program that stalls after its warm-up */
			fprintf(r, "{\"step_s\": 0.5, \"samples\": %ld}\n", batch());
			fclose(r);
		}
		for (;;)
			pause();
	}
	if (argc >= 2 && !strcmp(argv[1], "crash")) {
		fprintf(stderr, "Traceback (most recent call last):\n  File \"train.py\", line 3\n"
				"ValueError: mismatched shapes\n");
		return 3;
	}
	if (argc >= 2 && !strcmp(argv[1], "fork-child")) {
		if (fork() == 0) { /* a dataloader worker that would outlive the trial */
			setsid();
			for (;;)
				pause();
		}
		return curve((char *[]){argv[0], "curve", "1048576", "1048576", "1e15"});
	}
	if (argc >= 2 && !strcmp(argv[1], "fork-grandchild")) {
		int ready[2];
		char c;

		if (pipe(ready) < 0)
			return 1;
		if (fork() == 0) { /* a member of the group, slow to die: 256 MiB to free */
			size_t n = 256u << 20;
			char *held = malloc(n);

			for (size_t i = 0; held && i < n; i += 4096)
				held[i] = 1;
			if (fork() == 0) { /* its child, in a session of its own */
				setsid();
				close(ready[1]);
				for (;;)
					pause();
			}
			close(ready[1]);
			for (;;)
				pause();
		}
		close(ready[1]);
		if (read(ready[0], &c, 1) != 0) /* both forked: the pipe's writers are gone */
			return 1;
		return curve((char *[]){argv[0], "curve", "1048576", "1048576", "1e15"});
	}
	fprintf(stderr, "usage: see trialprog.c\n");
	return 64;
}
