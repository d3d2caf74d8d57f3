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
#include "hostlist.h"
#include "nvml.h"
#include "number.h"
#include "presets.h"
#include "report.h"
#include "search.h"
#include "request.h"
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

/* --ranks N: each trial is `autobatch-probe ranks N --capacity B -- COMMAND`, this program's
 * own launcher, which measures every rank against the device and reports the worst: on a GPU
 * (--gpu) each rank's memory on the node's GPUs as NVML sees its processes, measured by the
 * rank's own `autobatch-probe task --gpu` in a trial step (--step-nodes). */
static int ranks_argv(const struct run_opts *o, struct setup *s, char *err, size_t errlen)
{
	char **own = s->ranks_owned, **v;
	size_t n = 0, k = 0;

	if (s->dev.kind == AB_DEVICE_SIM)
		return ab_fail(err, errlen, EINVAL, "--ranks %ld measures each rank's memory on the host "
						    "or a GPU (--device host or cuda:N), not on a "
						    "simulated device", o->ranks);
	if (o->parallel != 1)
		return ab_fail(err, errlen, EINVAL, "--ranks and --parallel: a trial of several ranks "
						    "takes the node; give one or the other");
	while (o->command[n])
		n++;
	if (!(v = s->ranks_argv = calloc(n + 13 + 2 * AB_STEP_OPTIONS_MAX, sizeof(*v))) ||
	    !(own[0] = realpath("/proc/self/exe", NULL)) || asprintf(&own[1], "%ld", o->ranks) < 0 ||
	    asprintf(&own[2], "%llu", (unsigned long long)s->dev.total_bytes) < 0 ||
	    asprintf(&own[3], "%ld", o->ranks_per_node) < 0)
		return ab_fail(err, errlen, ENOMEM, "cannot name this program for --ranks");
	v[k++] = own[0], v[k++] = "ranks", v[k++] = own[1], v[k++] = "--capacity", v[k++] = own[2];
	if (s->dev.kind == AB_DEVICE_CUDA)
		v[k++] = "--gpu";
	if (o->node_memory)
		v[k++] = "--node-memory", v[k++] = (char *)o->node_memory;
	if (o->step_nodes) {
		v[k++] = "--nodes", v[k++] = (char *)o->step_nodes;
		if (o->ranks_per_node)
			v[k++] = "--per-node", v[k++] = own[3];
		for (int i = 0; i < o->nstep_options; i++)
			v[k++] = "--srun-option", v[k++] = (char *)o->step_option[i];
	}
	v[k++] = "--";
	memcpy(v + k, o->command, n * sizeof(*v));
	return 0;
}

/* The largest of the fractions asked: the trials' cap on XLA's pool, which every target's
 * trials must be able to reach. */
static double largest(const double *fractions, size_t n)
{
	double most = 0;

	for (size_t i = 0; i < n; i++)
		most = fractions[i] > most ? fractions[i] : most;
	return most;
}

/* Trials whose ranks run on other nodes read their config copy there: it is made beside the
 * config, which the real step's tasks read on every node, not in this node's $TMPDIR. */
static const char *shared_parent(const struct run_opts *o, struct setup *s)
{
	char *dir;

	if (!o->step_nodes || !o->config || !o->step_nodes[strcspn(o->step_nodes, ",[")] ||
	    !realpath(o->config, s->shared_dir))
		return NULL;
	dir = strrchr(s->shared_dir, '/');
	dir[dir == s->shared_dir] = '\0';
	return s->shared_dir;
}

static void free_ranks_argv(struct setup *s)
{
	for (size_t i = 0; i < sizeof(s->ranks_owned) / sizeof(s->ranks_owned[0]); i++)
		free(s->ranks_owned[i]), s->ranks_owned[i] = NULL;
	free(s->ranks_argv);
	s->ranks_argv = NULL;
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
	if ((rc = run_config_key(o, start, err, errlen)) < 0)
		return rc;
	if ((o->ranks > 1 || o->step_nodes) && (rc = ranks_argv(o, s, err, errlen)) < 0)
		return rc;
	hook = run_hook_dir(o->hook_dir, &missing);
	s->exec = (struct ab_exec){
		.argv = s->ranks_argv ? s->ranks_argv : o->command, .config = o->config, .key = o->key, .document = o->document,
		.accum_key = o->config_accum > 1 ? o->accum_key : NULL, .ramp_key = o->ramp_key,
		.pin_key = o->pin_key, .pin_batch = o->pin_batch, .global_key = o->global_key,
		.eval_key = o->eval_key, .save_key = o->save_key,
		.metrics_key = o->metrics_key, .checkpoint_key = o->checkpoint_key, .pad_to = o->length_cap,
		.phase = o->phase, .steps = o->steps, .trial_seconds = o->trial_seconds,
		.max_trial_seconds = o->max_trial_seconds, .deadline = o->deadline,
		.startup_seconds = o->startup_seconds, .hook_dir = hook, .hook_missing = missing,
		.workdir_parent = shared_parent(o, s),
		.note = run_print_note,
		/* one process whose config it opens when released: not a launcher of ranks (nor
		 * trials in parallel rounds: set_up_parallel) */
		.start_ahead = o->start_ahead && o->config && hook && !s->ranks_argv,
		.peak_source = s->ranks_argv ? AB_PEAK_FROM_REPORT /* the ranks' launcher's */
			       : s->dev.kind == AB_DEVICE_HOST ? AB_PEAK_FROM_RSS
			       : s->dev.kind == AB_DEVICE_CUDA ? AB_PEAK_FROM_GPU
							       : AB_PEAK_FROM_REPORT,
		.capacity = s->dev.total_bytes, .pool_fraction = largest(o->fractions, o->nfractions),
		.keep = o->keep, .interrupted = &run_interrupted,
		.stop_grace_s = s->ranks_argv ? AB_RANKS_STOP_S : 0,
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
	if (s->exec.accum_key)
		fprintf(stderr, "autobatch: accumulation in trials: 1 of %ld (%s): peak memory does "
				"not depend on it, a step's time does\n",
			o->config_accum, o->accum_key);
	if (o->global_key)
		fprintf(stderr, "autobatch: global batch in trials: %s null, derived by the framework "
				"from each trial's micro-batch, accumulation and world\n",
			o->global_key);
	return 0;
}

#define BUSY_SHARE 0.05 /* of a GPU's memory held by other processes: not a trial's GPU */

/* cuda: each slot's GPU by its PCI bus id for NVML, all of one model (a round's trials must
 * be alike) and free; another model's GPUs and busy ones are left out, and the probe says so. */
static int cuda_slots(struct setup *s, char *err, size_t errlen)
{
	size_t kept = 1;

	snprintf(s->round.slot[0].pci_bus_id, sizeof(s->round.slot[0].pci_bus_id), "%s",
		 s->dev.pci_bus_id);
	for (size_t i = 1; i < s->round.nslots; i++) {
		struct ab_device d = {0};
		char spec[32];

		snprintf(spec, sizeof(spec), "cuda:%zu", i);
		if (ab_device_open(spec, &d, err, errlen) < 0)
			return -ENODEV;
		if (strcmp(d.name, s->dev.name) || d.total_bytes != s->dev.total_bytes)
			fprintf(stderr, "autobatch: GPU %zu is a %s, not a %s like GPU 0: no trials "
					"on it\n", i, d.name, s->dev.name);
		else if (d.others_bytes > BUSY_SHARE * (double)d.total_bytes)
			/* another step of the job (or anyone) holds it: a trial there would be
			 * judged against less memory than the others have */
			fprintf(stderr, "autobatch: GPU %zu is in use (%s): no trials on it\n", i,
				d.others);
		else {
			s->round.slot[kept] = s->round.slot[i];
			snprintf(s->round.slot[kept++].pci_bus_id, sizeof(s->round.slot[0].pci_bus_id),
				 "%s", d.pci_bus_id);
		}
		ab_device_close(&d);
	}
	s->round.nslots = kept;
	return 0;
}

/* --parallel: the slots, one per GPU of CUDA_VISIBLE_DEVICES. Model mode runs in this
 * process, one trial at a time. */
static int set_up_parallel(const struct run_opts *o, struct setup *s, char *err, size_t errlen)
{
	const char *visible = getenv("CUDA_VISIBLE_DEVICES");
	const struct cuda_module *m;
	char all[128] = "", why[AB_ERR_MAX];
	size_t len = 0;
	int rc;

	if (o->parallel == 1 || !strcmp(s->mode, "model"))
		return 0;
	/* outside Slurm, with no CUDA_VISIBLE_DEVICES: every GPU the CUDA runtime sees */
	if (!visible && s->dev.kind == AB_DEVICE_CUDA && (m = cuda_module(why, sizeof(why)))) {
		for (int i = 0; i < m->ops->count() && i < AB_ROUND_MAX_SLOTS; i++)
			ab_append(all, sizeof(all), &len, "%s%d", i ? "," : "", i);
		visible = all;
	}
	if ((rc = ab_round_slots(&s->round, o->parallel, visible, err, errlen)) < 0)
		return rc;
	if (s->dev.kind == AB_DEVICE_CUDA && (rc = cuda_slots(s, err, errlen)) < 0)
		return rc;
	s->round.x = &s->exec;
	if (s->round.nslots > 1) /* a round's workers start their own trials */
		s->exec.start_ahead = false;
	if (s->round.nslots > 1)
		fprintf(stderr, "autobatch: up to %zu trials at once, one per GPU (%s)\n",
			s->round.nslots, visible ? visible : "");
	return 0;
}

/* --describe-device: what srun asks one node of each GPU model of a step that spans several
 * (spank/srun_gpus.c), to probe on the smallest. */
static int describe_device(const struct run_opts *o)
{
	struct setup s = {0};
	char err[AB_ERR_MAX], *json;
	int rc = open_device(o, &s, err, sizeof(err));

	json = ab_report_device_json(ab_device_kind_name(s.dev.kind), s.dev.name, s.dev.total_bytes,
				     rc < 0 ? err : NULL);
	if (json && run_write_json(o->json ? o->json : "-", json) < 0)
		rc = -EIO;
	free(json);
	ab_device_close(&s.dev);
	return rc < 0 || !json ? 1 : 0;
}

/* What of --time-limit went before this probe started (--since: its step's start, and a
 * container's import in it), by the wall clock: the step's own limit counts from there. */
static double before_start(const struct run_opts *o)
{
	double before = o->since ? difftime(time(NULL), o->since) : 0;

	return before > 0 && before < o->time_limit ? before : 0;
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
	long start = 0, run_steps;
	int rc;

	/* The message above names the option; 50 lines of options after it would bury it. */
	if (run_parse_opts(argc, argv, &o) < 0)
		return fputs("usage: autobatch-probe run [OPTIONS] [-- COMMAND [ARGS...]] "
			     "('autobatch-probe run --help' lists the options)\n", stderr), 2;
	if (o.describe_device)
		return describe_device(&o);
	t0 = ab_now();
	o.deadline = o.time_limit > 0 ? t0 + o.time_limit - before_start(&o) : 0;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	start = o.start;
	r.ok = (rc = set_up(&o, &s, &start, r.error, sizeof(r.error))) == 0;
	if (r.ok)
		setup_reserve(&o, &s);
	if (r.ok)
		r.ok = (rc = set_up_parallel(&o, &s, r.error, sizeof(r.error))) == 0;
	prog.total = s.dev.total_bytes;
	prog.parallel = (int)s.round.nslots;
	/* the training run's length: an eval batch's probe is not sized for it */
	run_steps = o.run_steps > 0 && !strcmp(o.phase, "train") ? o.run_steps : 0;
	for (size_t i = 0; r.ok && i < o.nfractions; i++) {
		struct ab_search_params p = {
			.total_bytes = s.dev.total_bytes, .fraction = o.fractions[i],
			.reserve_bytes = s.reserve,
			.objective = o.objective, .min = o.min, .max = o.max,
			.multiple_of = o.multiple_of, .global_batch = o.global_batch,
			.devices = o.devices, .start = start, .max_trials = o.max_trials,
			.ramp_start = o.ramp_start, .ramp_step = o.ramp_step,
			.ramp_global = o.ramp_global,
			.run_steps = run_steps, .run_accum = o.config_accum,
			.trial_accum = s.exec.accum_key ? 1 : o.config_accum,
			.trial_cap = o.trial_cap,
			.deadline = o.deadline,
			.progress = run_print_trial, .progress_arg = &prog, .note = run_print_note,
			.parallel = (int)s.round.nslots,
			.warm_batch = i == 0 ? o.warm_start : 0,
			.warm_per_sample = (double)o.warm_per_sample,
			.flat_ok = o.pin_key != NULL,
			.round = s.fn == ab_exec_trial ? ab_exec_round : NULL, .round_ctx = &s.round,
		};

		fr[i].fraction = o.fractions[i];
		rc = ab_search(&p, &trials, s.fn, s.ctx, &fr[i].decision, r.error, sizeof(r.error));
		fr[i].ok = rc == 0;
		fr[i].out_of_time = rc == -ETIME;
		/* a later, lower target may not fit, or the time may be spent by then */
		r.ok = rc == 0 || (i > 0 && (rc == -ENOSPC || rc == -ETIME));
		if ((rc == -ENOSPC || rc == -ETIME) && i > 0)
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
	r.parallel = (int)s.round.nslots;
	r.ranks = s.ranks_argv ? (int)o.ranks : 1;
	r.step_nodes = s.ranks_argv && o.step_nodes ? ab_hostlist_count(o.step_nodes) : 0;
	r.container = r.step_nodes ? ab_env_carried_container() : NULL;
	r.warm_from = o.warm_start ? (o.warm_from ? o.warm_from : "--warm-start") : NULL;
	r.warm_batch = o.warm_start;
	r.accum_key = s.exec.accum_key;
	r.config_accum = o.config_accum;
	r.ramp = (struct ab_ramp){o.ramp_start, o.ramp_step, o.ramp_global, ""};
	snprintf(r.ramp.key, sizeof(r.ramp.key), "%s", o.ramp_key ? o.ramp_key : "");
	r.length_cap = o.length_cap, r.length_cap_key = o.length_cap_key;
	r.eval_every = o.eval_every, r.eval_key = o.eval_key;
	r.run_steps = run_steps, r.run_steps_key = o.run_steps_key;
	r.elapsed_s = ab_now() - t0;
	r.interrupted = !r.ok && run_interrupted;
	r.nothing_fits = !r.ok && fr[0].decision.nothing_fits;
	if (!r.ok && !r.error[0])
		snprintf(r.error, sizeof(r.error), "the probe failed");
	ab_report_decision_line(&r, line, sizeof(line));
	fprintf(stderr, "autobatch: %s\n", line);
	json = ab_report_json(&r);
	if (o.json && json && run_write_json(o.json, json) < 0)
		r.ok = false;
	free(json);
	if (o.plot && run_write_plot(o.plot, &r) < 0)
		r.ok = false;
	ab_exec_cleanup(&s.exec);
	free_ranks_argv(&s);
	ab_device_close(&s.dev);
	ab_trials_free(&trials);
	if (run_interrupted)
		return 130;
	return r.ok ? 0 : 1;
}
