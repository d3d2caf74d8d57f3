/* run_opts.c - `autobatch-probe run`'s command line: the options, each number parsed
 * strictly and named in its error, and where the Python step hook is.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "gpu_models.h"
#include "input_limits.h"
#include "commands.h"
#include "run.h"
#include "number.h"
#include "size.h"

void run_usage(FILE *out)
{
	fprintf(out,
		"Usage: autobatch-probe run [OPTIONS] [-- COMMAND [ARGS...]]\n"
		"  --fraction F[,F...]   memory target(s), 0 < F <= 1 (default 0.8)\n"
		"  --objective memory|throughput\n"
		"  --device cuda:N | host[:capacity=SIZE] | sim:SPEC\n"
		"  --describe-device     print the device (--json) and run nothing\n"
		"  --mode exec|model     exec runs COMMAND per candidate batch; model runs the\n"
		"                        proxy transformer step (--model or --config dimensions)\n"
		"  --model layers=N,hidden=N,heads=N,seq=N,vocab=N[,ffn=N,dtype=bf16|fp32,recompute=1]\n"
		"  --comm-reserve SIZE   memory kept for NCCL when the probe sees one GPU\n"
		"  --config FILE [--preset NAME | --key KEY] [--document N]\n"
		"  --accum-key KEY       gradient accumulation key, 1 in trials (default: preset's)\n"
		"  --pin KEY=N           KEY written as N in every trial's config copy (an eval\n"
		"                        phase's trials train at the batch chosen for training)\n"
		"  --run-steps N|off     the run's optimizer steps: a trial whose held memory grows\n"
		"                        is judged at the last (default: the preset's max_steps)\n"
		"  --min N --max N --multiple-of N --start N\n"
		"  --global-batch G --devices N   keep G = batch x devices x accumulation\n"
		"  --phase train|eval    --steps K (default 3, after one warm-up step)\n"
		"  --startup-seconds S   allowance to the first step: loading, compiling (default 600)\n"
		"  --trial-seconds S     allowance for the steps, from the first (default 60)\n"
		"  --max-trial-seconds S a measured step gets twice a slow warm-up step, or twice\n"
		"                        what earlier trials' pace predicts, up to S (default 1800)\n"
		"  --instrument on|off   count a Python trial's PyTorch optimizer steps (default on)\n"
		"  --hook-dir DIR        where the Python step hook is (default: installed)\n"
		"  --start-ahead on|off  start each next trial while one runs; it waits in the hook\n"
		"                        for its batch before it reads its config (default on)\n"
		"  --ranks N             each trial is N ranks of the command on this node, each with\n"
		"                        RANK, WORLD_SIZE, MASTER_ADDR/PORT (and SLURM_PROCID...):\n"
		"                        every rank measured, the worst decides (--device host)\n"
		"  --step-nodes LIST [--ranks-per-node T]\n"
		"                        each trial is a Slurm step of this job over LIST (srun\n"
		"                        --overlap, --ranks N tasks), Slurm setting the ranks; a\n"
		"                        launcher's workers (torchrun) are each measured\n"
		"  --step-option OPT     the real step's GPU request (--gpus-per-task=N, --gres=,\n"
		"                        --gpus=, --gpu-bind=, --cpus-per-gpu=), given to the\n"
		"                        trial step's srun too (repeatable)\n"
		"  --node-memory BYTES:NODE[,NODE][;...]\n"
		"                        each node's GPU memory: a trial step's ranks are each held\n"
		"                        to their own node's, not all to this device's\n"
		"  --parallel N|auto     trials at once, one per GPU of CUDA_VISIBLE_DEVICES (auto:\n"
		"                        all of them; default 1); --max-trials then bounds rounds\n"
		"  --warm-start B [--warm-per-sample SIZE] [--warm-from ENTRY]\n"
		"                        verify a cached batch first (a sweep's jobs)\n"
		"  --max-trials N        trials the search plans for (default 6)\n"
		"  --trial-cap N         past them, a best fit under 90%% of a failure goes on up to\n"
		"                        N trials in all (default 12)\n"
		"  --time-limit S        no trial round is started that would end past S seconds\n"
		"                        from the start (by the longest round so far), and a trial\n"
		"                        still running then is stopped; the best fit seen stands\n"
		"                        (\"time limit reached\")\n"
		"  --since EPOCH         the time limit counts from then (seconds since 1970, when\n"
		"                        the probe's step was started: a container's import)\n"
		"  --json FILE|-         --plot FILE.svg\n"
		"  --keep-trials         keep each trial's directory (output, report, config); says where\n");
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
	case 'W': return parse_long(arg, 1, AB_BATCH_MAX, "warm-start", &o->warm_start);
	case 'Z': return parse_long(arg, 1, AB_REPORT_MAX_RANKS, "ranks", &o->ranks);
	case 'B':
		return parse_long(arg, 1, AB_REPORT_MAX_RANKS, "ranks-per-node", &o->ranks_per_node);
	case 'N':
		if (!strcmp(arg, "auto"))
			return o->parallel = 0, 0;
		return parse_long(arg, 1, AB_ROUND_MAX_SLOTS, "parallel", &o->parallel);
	case 'k':
		if (parse_long(arg, 1, 1000, "steps", &v) < 0)
			return -1;
		o->steps = (int)v;
		return 0;
	case 'T':
	case 'C':
		if (parse_long(arg, 1, AB_TRIAL_CAP_MAX, opt == 'T' ? "max-trials" : "trial-cap",
			       &v) < 0)
			return -1;
		*(opt == 'T' ? &o->max_trials : &o->trial_cap) = (int)v;
		return 0;
	case 'd':
		if (parse_long(arg, 0, 1000000, "document", &v) < 0)
			return -1;
		o->document = (int)v;
		return 0;
	case 't':
		if (parse_long(arg, 1, AB_TRIAL_SECONDS_MAX, "trial-seconds", &v) < 0)
			return -1;
		o->trial_seconds = (double)v;
		return 0;
	case 'u':
		if (parse_long(arg, 1, AB_TRIAL_SECONDS_MAX, "startup-seconds", &v) < 0)
			return -1;
		o->startup_seconds = (double)v;
		return 0;
	case 'X':
		if (parse_long(arg, 1, AB_TRIAL_SECONDS_MAX, "max-trial-seconds", &v) < 0)
			return -1;
		o->max_trial_seconds = (double)v;
		return 0;
	case 'l':
		if (parse_long(arg, 1, 7 * 86400, "time-limit", &v) < 0)
			return -1;
		o->time_limit = (double)v;
		return 0;
	case 'i':
		if (parse_long(arg, 1, LONG_MAX, "since", &v) < 0)
			return -1;
		o->since = (time_t)v;
		return 0;
	}
	return -1;
}

/* --pin KEY=N: the last '=' ends the key (a dot path has none of its own to split on) */
static int parse_pin(char *arg, struct run_opts *o)
{
	char *eq = strrchr(arg, '=');

	if (!eq || eq == arg)
		return fprintf(stderr, "autobatch-probe: --pin KEY=N: a config key and a batch\n"),
		       -1;
	*eq = '\0';
	o->pin_key = arg;
	return parse_long(eq + 1, 1, AB_BATCH_MAX, "pin", &o->pin_batch);
}

/* Names printed back in the decision and its messages: a newline or an escape in one could
 * forge a line of autobatch's or drive the terminal. */
static bool names_printable(const struct run_opts *o)
{
	const char *const names[][2] = {{"--key", o->key}, {"--preset", o->preset},
					{"--accum-key", o->accum_key}, {"--pin", o->pin_key}};
	char shown[80];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		for (const char *c = names[i][1]; c && *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f) {
				fprintf(stderr, "autobatch-probe: %s '%s': a control character in "
						"a name\n",
					names[i][0], ab_printable(names[i][1], shown, sizeof(shown)));
				return false;
			}
	return true;
}

int run_parse_opts(int argc, char **argv, struct run_opts *o)
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
		{"parallel", 1, 0, 'N'},     {"warm-start", 1, 0, 'W'}, {"warm-per-sample", 1, 0, 'Y'},
		{"warm-from", 1, 0, 'F'},    {"accum-key", 1, 0, 'A'}, {"max-trial-seconds", 1, 0, 'X'},
		{"trial-cap", 1, 0, 'C'},    {"describe-device", 0, 0, 'Q'}, {"ranks", 1, 0, 'Z'},
		{"step-nodes", 1, 0, 'O'},   {"ranks-per-node", 1, 0, 'B'},
		{"node-memory", 1, 0, 'E'},  {"step-option", 1, 0, 'V'},
		{"start-ahead", 1, 0, 'J'},  {"run-steps", 1, 0, 'r'},
		{"time-limit", 1, 0, 'l'},   {"since", 1, 0, 'i'},      {"pin", 1, 0, 'q'},
		{0, 0, 0, 0},
	};
	char err[AB_ERR_MAX];
	int opt;

	bool instrument = true;

	*o = (struct run_opts){.fractions = {0.8}, .nfractions = 1, .phase = "train",
			       .document = -1, .steps = 3, .devices = 1, .parallel = 1, .ranks = 1,
			       .startup_seconds = AB_STARTUP_SECONDS_DEFAULT,
			       .trial_seconds = AB_TRIAL_SECONDS_DEFAULT,
			       .max_trial_seconds = AB_MAX_TRIAL_SECONDS_DEFAULT,
			       .hook_dir = AB_DEFAULT_HOOK_DIR, .start_ahead = true};
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
		case 'A': o->accum_key = optarg; break;
		case 'q': if (parse_pin(optarg, o) < 0) return -1; break;
		case 'r': /* off: never sized, whatever the config says */
			if (ab_parse_run_steps(optarg, &o->run_steps) < 0)
				return fprintf(stderr, "autobatch-probe: --run-steps %s: give a whole "
						       "number from 1 to %ld, or off\n",
					       optarg, AB_RUN_STEPS_MAX), -1;
			o->run_steps_key = o->run_steps > 0 ? "as asked" : NULL;
			break;
		case 'j': o->json = optarg; break;
		case 'G': o->plot = optarg; break;
		case 'e': o->keep = true; break;
		case 'Q': o->describe_device = true; break;
		case 'L': o->model = optarg; break;
		case 'H': o->hook_dir = optarg; break;
		case 'O':
			/* a Slurm host list, handed to srun as one argument: nothing else */
			if (!*optarg || strlen(optarg) > 1024 ||
			    optarg[strspn(optarg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
						  "0123456789,[]-._")])
				return fprintf(stderr, "autobatch-probe: --step-nodes: a Slurm host "
						       "list (node[1-4],gpu7)\n"), -1;
			o->step_nodes = optarg;
			break;
		case 'V':
			if (!ab_step_option_ok(optarg) || o->nstep_options >= AB_STEP_OPTIONS_MAX)
				return fprintf(stderr, "autobatch-probe: --step-option %s: one of "
						       "--gpus-per-task=, --gres=, --gpus=, --gpu-bind=, "
						       "--cpus-per-gpu= with a GRES value, at most %d\n",
					       optarg, AB_STEP_OPTIONS_MAX), -1;
			o->step_option[o->nstep_options++] = optarg;
			break;
		case 'E': {
			struct ab_node_memory t;

			if (ab_node_memory_parse(optarg, &t, err, sizeof(err)) < 0)
				return fprintf(stderr, "autobatch-probe: %s\n", err), -1;
			o->node_memory = optarg;
			break;
		}
		case 'I':
			if (strcmp(optarg, "on") && strcmp(optarg, "off"))
				return fprintf(stderr, "autobatch-probe: --instrument on|off\n"), -1;
			instrument = !strcmp(optarg, "on");
			break;
		case 'J':
			if (strcmp(optarg, "on") && strcmp(optarg, "off"))
				return fprintf(stderr, "autobatch-probe: --start-ahead on|off\n"), -1;
			o->start_ahead = !strcmp(optarg, "on");
			break;
		case 'R':
			if (ab_parse_size(optarg, &o->comm_reserve, err, sizeof(err)) < 0)
				return fprintf(stderr, "autobatch-probe: --comm-reserve: %s\n", err), -1;
			break;
		case 'Y':
			if (ab_parse_size(optarg, &o->warm_per_sample, err, sizeof(err)) < 0)
				return fprintf(stderr, "autobatch-probe: --warm-per-sample: %s\n", err), -1;
			break;
		case 'F':
			if (strlen(optarg) > 64 || !ab_plain_name(optarg))
				return fprintf(stderr, "autobatch-probe: --warm-from: a cache entry's "
						       "name (letters, digits, '.', '_', '-')\n"), -1;
			o->warm_from = optarg;
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
	if (!names_printable(o))
		return -1;
	if (!instrument)
		o->hook_dir = NULL;
	if (o->mode && strcmp(o->mode, "exec") && strcmp(o->mode, "model"))
		return fprintf(stderr, "autobatch-probe: --mode exec|model\n"), -1;
	if (o->ranks_per_node && o->ranks < 2)
		return fprintf(stderr, "autobatch-probe: --ranks-per-node lays out a trial of several "
				       "ranks: give --ranks N (N > 1) too\n"), -1;
	if (o->node_memory && !o->step_nodes)
		return fprintf(stderr, "autobatch-probe: --node-memory holds a trial step's ranks to "
				       "their nodes' memory: give --step-nodes LIST too\n"), -1;
	if (o->nstep_options && !o->step_nodes)
		return fprintf(stderr, "autobatch-probe: --step-option shapes a trial step: give "
				       "--step-nodes LIST too\n"), -1;
	if (o->ranks_per_node && !o->step_nodes)
		return fprintf(stderr, "autobatch-probe: --ranks-per-node lays out a trial step: "
				       "give --step-nodes LIST too\n"), -1;
	return 0;
}

/* The hook is part of the installation; a probe built but not installed is told where it is
 * with --hook-dir. Without it, Python trials must report their steps themselves, which a
 * trial that reports none is told. */
const char *run_hook_dir(const char *dir, const char **missing)
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

