/* cmd_run.c - `autobatch-probe run`: wires the options to a device, the trial function
 * (the simulator, or the user's command in exec mode) and the search, then reports.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "clock.h"
#include "config_edit.h"
#include "device.h"
#include "error.h"
#include "nvml.h"
#include "number.h"
#include "presets.h"
#include "report.h"
#include "search.h"
#include "settings.h"
#include "cuda_module.h"
#include "run.h"
#include "size.h"
#include "trial_exec.h"

volatile sig_atomic_t run_interrupted;

static void on_signal(int sig)
{
	(void)sig;
	run_interrupted = 1;
}

static int usage(void)
{
	fprintf(stderr,
		"Usage: autobatch-probe run [OPTIONS] [-- COMMAND [ARGS...]]\n"
		"  --fraction F[,F...]   memory target(s), 0 < F <= 1 (default 0.8)\n"
		"  --objective memory|throughput\n"
		"  --device cuda:N | host[:capacity=SIZE] | sim:SPEC\n"
		"  --mode exec|model     exec runs COMMAND per candidate batch; model runs the\n"
		"                        proxy transformer step (--model or --config dimensions)\n"
		"  --model layers=N,hidden=N,heads=N,seq=N,vocab=N[,ffn=N,dtype=bf16|fp32,recompute=1]\n"
		"  --comm-reserve SIZE   memory kept for NCCL when the probe sees one GPU\n"
		"  --config FILE [--preset NAME | --key KEY] [--document N]\n"
		"  --min N --max N --multiple-of N --start N\n"
		"  --global-batch G --devices N   keep G = batch x devices x accumulation\n"
		"  --phase train|eval    --steps K (default 3, after one warm-up step)\n"
		"  --startup-seconds S   allowance to the first step: loading, compiling (default 600)\n"
		"  --trial-seconds S     allowance for the steps, from the first (default 60)\n"
		"  --instrument on|off   count a Python trial's PyTorch optimizer steps (default on)\n"
		"  --hook-dir DIR        where the Python step hook is (default: installed)\n"
		"  --max-trials N        --json FILE|-           --plot FILE.svg\n"
		"  --keep-trials         keep each trial's directory (output, report, config)\n");
	return 2;
}

static int parse_long(const char *text, long min, long max, const char *name, long *out)
{
	long v;

	if (ab_parse_whole(text, min, max, &v) < 0) {
		fprintf(stderr, "autobatch-probe: --%s %s: give a whole number from %ld to %ld\n",
			name, text, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_fractions(const char *text, struct run_opts *o)
{
	char buf[256], err[AB_ERR_MAX], *item, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", text);
	o->nfractions = 0;
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (o->nfractions == MAX_FRACTIONS) {
			fprintf(stderr, "autobatch-probe: --fraction: at most %d fractions\n",
				MAX_FRACTIONS);
			return -1;
		}
		if (ab_parse_fraction(item, &o->fractions[o->nfractions++], err, sizeof(err)) < 0) {
			fprintf(stderr, "autobatch-probe: --fraction: %s\n", err);
			return -1;
		}
	}
	return o->nfractions ? 0 : -1;
}

static int parse_numeric(int opt, const char *arg, struct run_opts *o)
{
	long v;

	switch (opt) {
	case 'n': return parse_long(arg, 1, AB_BATCH_MAX, "min", &o->min);
	case 'x': return parse_long(arg, 1, AB_BATCH_MAX, "max", &o->max);
	case 'm': return parse_long(arg, 1, AB_BATCH_MAX, "multiple-of", &o->multiple_of);
	case 'g': return parse_long(arg, 1, AB_GLOBAL_BATCH_MAX, "global-batch", &o->global_batch);
	case 'D': return parse_long(arg, 1, 1 << 20, "devices", &o->devices);
	case 'S': return parse_long(arg, 1, AB_BATCH_MAX, "start", &o->start);
	case 'k':
		if (parse_long(arg, 1, 1000, "steps", &v) < 0)
			return -1;
		o->steps = (int)v;
		return 0;
	case 'T':
		if (parse_long(arg, 1, 100, "max-trials", &v) < 0)
			return -1;
		o->max_trials = (int)v;
		return 0;
	case 'd':
		if (parse_long(arg, 0, 1000000, "document", &v) < 0)
			return -1;
		o->document = (int)v;
		return 0;
	case 't':
		if (parse_long(arg, 1, 86400, "trial-seconds", &v) < 0)
			return -1;
		o->trial_seconds = (double)v;
		return 0;
	case 'u':
		if (parse_long(arg, 1, 86400, "startup-seconds", &v) < 0)
			return -1;
		o->startup_seconds = (double)v;
		return 0;
	}
	return -1;
}

static int parse_opts(int argc, char **argv, struct run_opts *o)
{
	static const struct option longopts[] = {
		{"fraction", 1, 0, 'f'},     {"objective", 1, 0, 'o'},  {"device", 1, 0, 'v'},
		{"mode", 1, 0, 'M'},         {"config", 1, 0, 'c'},     {"preset", 1, 0, 'p'},
		{"key", 1, 0, 'K'},          {"document", 1, 0, 'd'},   {"min", 1, 0, 'n'},
		{"max", 1, 0, 'x'},          {"multiple-of", 1, 0, 'm'}, {"global-batch", 1, 0, 'g'},
		{"devices", 1, 0, 'D'},      {"start", 1, 0, 'S'},      {"phase", 1, 0, 'P'},
		{"steps", 1, 0, 'k'},        {"trial-seconds", 1, 0, 't'}, {"max-trials", 1, 0, 'T'},
		{"json", 1, 0, 'j'},         {"keep-trials", 0, 0, 'e'}, {"help", 0, 0, 'h'},
		{"plot", 1, 0, 'G'},         {"model", 1, 0, 'L'},      {"comm-reserve", 1, 0, 'R'},
		{"startup-seconds", 1, 0, 'u'}, {"instrument", 1, 0, 'I'}, {"hook-dir", 1, 0, 'H'},
		{0, 0, 0, 0},
	};
	char err[AB_ERR_MAX];
	int opt;

	bool instrument = true;

	*o = (struct run_opts){.fractions = {0.8}, .nfractions = 1, .phase = "train",
			       .document = -1, .steps = 3, .devices = 1,
			       .startup_seconds = AB_STARTUP_SECONDS_DEFAULT,
			       .trial_seconds = AB_TRIAL_SECONDS_DEFAULT, .hook_dir = AB_DEFAULT_HOOK_DIR};
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		switch (opt) {
		case 'f': if (parse_fractions(optarg, o) < 0) return -1; break;
		case 'o':
			if (strcmp(optarg, "memory") && strcmp(optarg, "throughput"))
				return fprintf(stderr, "autobatch-probe: --objective memory|throughput\n"), -1;
			o->objective = optarg[0] == 't' ? AB_OBJECTIVE_THROUGHPUT : AB_OBJECTIVE_MEMORY;
			break;
		case 'v': o->device = optarg; break;
		case 'M': o->mode = optarg; break;
		case 'c': o->config = optarg; break;
		case 'p': o->preset = optarg; break;
		case 'K': o->key = optarg; break;
		case 'j': o->json = optarg; break;
		case 'G': o->plot = optarg; break;
		case 'e': o->keep = true; break;
		case 'L': o->model = optarg; break;
		case 'H': o->hook_dir = optarg; break;
		case 'I':
			if (strcmp(optarg, "on") && strcmp(optarg, "off"))
				return fprintf(stderr, "autobatch-probe: --instrument on|off\n"), -1;
			instrument = !strcmp(optarg, "on");
			break;
		case 'R':
			if (ab_parse_size(optarg, &o->comm_reserve, err, sizeof(err)) < 0)
				return fprintf(stderr, "autobatch-probe: --comm-reserve: %s\n", err), -1;
			break;
		case 'P':
			if (strcmp(optarg, "train") && strcmp(optarg, "eval"))
				return fprintf(stderr, "autobatch-probe: --phase train|eval\n"), -1;
			o->phase = optarg;
			break;
		case 'h': return -1;
		case '?': return -1;
		default:
			if (parse_numeric(opt, optarg, o) < 0)
				return -1;
		}
	}
	o->command = optind < argc ? argv + optind : NULL;
	if (!instrument)
		o->hook_dir = NULL;
	if (o->mode && strcmp(o->mode, "exec") && strcmp(o->mode, "model"))
		return fprintf(stderr, "autobatch-probe: --mode exec|model\n"), -1;
	return 0;
}

/* ---- the batch key and the starting batch from the config --------------------------- */

void start_from_value(const char *value, long *start)
{
	double v;

	if (*start || !ab_is_number(value, strlen(value)))
		return;
	v = strtod(value, NULL);
	if (v >= 1 && v <= (double)AB_BATCH_MAX)
		*start = (long)v;
}

static int config_key(struct run_opts *o, long *start, char *err, size_t errlen)
{
	const struct ab_preset *p = NULL;
	struct ab_config *cfg;
	char value[64];
	int rc;

	if (!o->config)
		return 0;
	if ((rc = ab_config_load(o->config, AB_FORMAT_AUTO, &cfg, err, errlen)) < 0)
		return rc;
	if (!o->key) {
		if (o->preset)
			rc = ab_preset_lookup(o->preset, &p, err, errlen);
		else
			rc = ab_preset_detect(cfg, o->document, &p, err, errlen);
		if (rc == 0) {
			o->key = p->keys[strcmp(o->phase, "eval") ? AB_ROLE_MICRO_BATCH
								  : AB_ROLE_EVAL_BATCH];
			if (!o->key)
				rc = ab_fail(err, errlen, EINVAL, "preset %s has no eval batch key: "
								  "name it with --key KEY",
					     p->name);
		}
	}
	if (rc == 0)
		rc = ab_config_get(cfg, o->key, o->document, value, sizeof(value), err, errlen);
	if (rc == 0)
		start_from_value(value, start);
	ab_config_free(cfg);
	return rc;
}

/* ---- progress ---------------------------------------------------------------------- */

struct progress {
	uint64_t total;
};

/* A slow first trial tells how long probing will take: start-up is paid per trial. */
#define ESTIMATE_AFTER_SECONDS 10
#define USUAL_TRIALS 3
#define IRREGULAR_TRIALS 5

static void print_estimate(const struct ab_trial *t)
{
	char usual[32], most[32];

	if (t->seconds < ESTIMATE_AFTER_SECONDS || !(t->startup_s > 0))
		return;
	ab_format_duration(USUAL_TRIALS * t->seconds, usual, sizeof(usual));
	ab_format_duration(IRREGULAR_TRIALS * t->seconds, most, sizeof(most));
	fprintf(stderr, "autobatch: trial 1 started in %.0f s%s; each trial costs about %.0f s: "
			"expect about %s of probing (%d trials; %s if the memory curve is "
			"irregular)\n",
		t->startup_s, t->has_step ? "" : " (no step time)", t->seconds, usual,
		USUAL_TRIALS, most);
}

static void print_trial(void *arg, size_t index, const struct ab_trial *t, bool fits,
			uint64_t limit, uint64_t margin)
{
	struct progress *p = arg;
	char line[512];

	ab_report_trial_line(index, t, fits, limit, margin, p->total, line, sizeof(line));
	fprintf(stderr, "autobatch: %s\n", line);
	if (index == 0)
		print_estimate(t);
	fflush(stderr);
}

static void print_note(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "autobatch: %s\n", line);
	fflush(stderr);
}

/* The hook is part of the installation; a probe built but not installed is told where it is
 * with --hook-dir. Without it, Python trials must report their steps themselves, which a
 * trial that reports none is told. */
static const char *hook_dir(const char *dir, const char **missing)
{
	char path[AB_PATH_MAX];

	*missing = NULL;
	if (!dir)
		return NULL;
	if (ab_format(path, sizeof(path), "%s/sitecustomize.py", dir) == 0 &&
	    access(path, R_OK) == 0)
		return dir;
	*missing = dir;
	return NULL;
}

static int write_json(const char *path, const char *text)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
	int rc = 0;

	if (!f)
		return fprintf(stderr, "autobatch-probe: cannot write %s: %s\n", path,
			       strerror(errno)),
		       -1;
	if (fprintf(f, "%s\n", text) < 0 || fflush(f) != 0)
		rc = -1;
	if (f != stdout && fclose(f) != 0)
		rc = -1;
	if (rc < 0)
		fprintf(stderr, "autobatch-probe: writing %s failed: %s\n", path, strerror(errno));
	return rc;
}

static int write_plot(const char *path, const struct ab_report *r)
{
	FILE *f = fopen(path, "w");
	int rc;

	if (!f)
		return fprintf(stderr, "autobatch-probe: cannot write %s: %s\n", path,
			       strerror(errno)),
		       -1;
	rc = ab_report_svg(r, f);
	if (fclose(f) != 0 || rc < 0)
		return fprintf(stderr, "autobatch-probe: writing %s failed\n", path), -1;
	return 0;
}

/* ---- the run ----------------------------------------------------------------------- */

/* The GPU module loads only when a GPU is asked for, or none is named (cuda:0 if visible). */
static int open_device(const struct run_opts *o, struct setup *s, char *err, size_t errlen)
{
	const struct cuda_module *m = NULL;
	char why[AB_ERR_MAX] = "";
	bool gpu = !o->device || !strncmp(o->device, "cuda", 4);
	int rc;

	if (gpu && (m = cuda_module(why, sizeof(why))))
		ab_device_set_cuda(m->ops);
	rc = ab_device_open(o->device, &s->dev, err, errlen);
	if (rc < 0 && gpu && !m && o->device)
		return ab_fail(err, errlen, ENODEV, "--device %s is not available: %s; use --device "
						    "host or sim:SPEC",
			       o->device, why);
	return rc;
}

static int set_up(struct run_opts *o, struct setup *s, long *start, char *err, size_t errlen)
{
	const char *hook, *missing;
	int rc;

	if ((rc = open_device(o, s, err, errlen)) < 0)
		return rc;
	if (o->mode && !strcmp(o->mode, "model"))
		return setup_model(o, s, start, err, errlen);
	if (!o->command) {
		if (s->dev.kind != AB_DEVICE_SIM || s->dev.sim.only_total)
			return ab_fail(err, errlen, EINVAL, "nothing to measure: give the command "
							    "to run as a trial after --");
		s->fn = ab_sim_trial;
		s->ctx = &s->dev.sim;
		s->mode = "sim";
		return 0;
	}
	if (s->dev.kind == AB_DEVICE_SIM && !s->dev.sim.only_total)
		return ab_fail(err, errlen, EINVAL, "with a command, --device sim:SPEC gives only "
						    "the capacity (sim:total=SIZE); the trials report "
						    "their peak");
	if ((rc = config_key(o, start, err, errlen)) < 0)
		return rc;
	hook = hook_dir(o->hook_dir, &missing);
	s->exec = (struct ab_exec){
		.argv = o->command, .config = o->config, .key = o->key, .document = o->document,
		.phase = o->phase, .steps = o->steps, .trial_seconds = o->trial_seconds,
		.startup_seconds = o->startup_seconds, .hook_dir = hook, .hook_missing = missing,
		.note = print_note,
		.peak_source = s->dev.kind == AB_DEVICE_HOST   ? AB_PEAK_FROM_RSS
			       : s->dev.kind == AB_DEVICE_CUDA ? AB_PEAK_FROM_GPU
							       : AB_PEAK_FROM_REPORT,
		.capacity = s->dev.total_bytes, .keep = o->keep, .interrupted = &run_interrupted,
		.gpu_usage = s->dev.nvml ? ab_nvml_group_usage : NULL, .gpu_arg = s->dev.nvml,
	};
	/* exec mode knows the model only when told: then NCCL can be measured too */
	if (o->model && (rc = ab_model_parse(o->model, &s->model, err, errlen)) < 0)
		return rc;
	s->has_model = o->model != NULL;
	if ((rc = ab_exec_init(&s->exec, err, errlen)) < 0)
		return rc;
	s->fn = ab_exec_trial;
	s->ctx = &s->exec;
	s->mode = "exec";
	return 0;
}

int cmd_run(int argc, char **argv)
{
	struct ab_report_fraction fr[MAX_FRACTIONS] = {{0}};
	struct ab_trials trials = {0};
	struct setup s = {0};
	struct ab_report r = {0};
	struct run_opts o;
	struct progress prog;
	double t0;
	struct sigaction sa = {.sa_handler = on_signal};
	char line[2048], *json;
	long start = 0;
	int rc;

	if (parse_opts(argc, argv, &o) < 0)
		return usage();
	t0 = ab_now();
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	start = o.start;
	r.ok = (rc = set_up(&o, &s, &start, r.error, sizeof(r.error))) == 0;
	if (r.ok)
		setup_reserve(&o, &s);
	prog.total = s.dev.total_bytes;
	for (size_t i = 0; r.ok && i < o.nfractions; i++) {
		struct ab_search_params p = {
			.total_bytes = s.dev.total_bytes, .fraction = o.fractions[i],
			.reserve_bytes = s.reserve,
			.objective = o.objective, .min = o.min, .max = o.max,
			.multiple_of = o.multiple_of, .global_batch = o.global_batch,
			.devices = o.devices, .start = start, .max_trials = o.max_trials,
			.progress = print_trial, .progress_arg = &prog,
		};

		fr[i].fraction = o.fractions[i];
		rc = ab_search(&p, &trials, s.fn, s.ctx, &fr[i].decision, r.error, sizeof(r.error));
		fr[i].ok = rc == 0;
		r.ok = rc == 0 || (i > 0 && rc == -ENOSPC); /* a later, lower target may not fit */
		if (rc == -ENOSPC && i > 0)
			r.error[0] = '\0';
	}
	r.mode = s.mode ? s.mode : (o.command ? "exec" : "sim");
	r.objective = ab_objective_name(o.objective);
	r.phase = o.phase;
	r.device_kind = ab_device_kind_name(s.dev.kind);
	r.device_name = s.dev.name[0] ? s.dev.name : "none";
	r.total_bytes = s.dev.total_bytes;
	r.fractions = fr;
	r.nfractions = r.ok || fr[0].ok ? o.nfractions : 0;
	r.global_batch = o.global_batch;
	r.devices = o.devices;
	r.trials = &trials;
	r.model = s.has_model ? s.model_desc : NULL;
	r.reserve_bytes = s.reserve;
	r.others = s.dev.others[0] ? s.dev.others : NULL;
	r.comm = s.comm.gpus ? &s.comm : NULL;
	r.elapsed_s = ab_now() - t0;
	r.interrupted = !r.ok && run_interrupted;
	if (!r.ok && !r.error[0])
		snprintf(r.error, sizeof(r.error), "the probe failed");
	ab_report_decision_line(&r, line, sizeof(line));
	fprintf(stderr, "autobatch: %s\n", line);
	json = ab_report_json(&r);
	if (o.json && json && write_json(o.json, json) < 0)
		r.ok = false;
	free(json);
	if (o.plot && write_plot(o.plot, &r) < 0)
		r.ok = false;
	ab_exec_cleanup(&s.exec);
	ab_device_close(&s.dev);
	ab_trials_free(&trials);
	if (run_interrupted)
		return 130;
	return r.ok ? 0 : 1;
}
