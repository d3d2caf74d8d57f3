/* probe_args.c - srun side: the probe step's command line, from the job and the site: the
 * nested srun's options, the trial's shape (ranks, nodes, GPUs), the probe's own options.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "probe_args.h"

#include "argv.h"
#include "error.h"
#include "hostlist.h"
#include "presets.h"
#include "protocol.h"

/* The nested srun's options and the probe up to its own options: a step of one task on the
 * node, within the job's resources. */
static int build_step(const struct ab_probe_job *job, const char *on_node, struct ab_argv *b,
		      char *err, size_t errlen)
{
	const struct ab_site *site = &job->ctx->site;
	char node[256];

	if (on_node)
		snprintf(node, sizeof(node), "%s", on_node);
	else if (ab_hostlist_first(job->probe_node ? job->probe_node : job->nodelist, node,
				   sizeof(node)) < 0)
		return ab_fail(err, errlen, EINVAL, "cannot tell the step's first node from '%.80s'",
			       job->nodelist ? job->nodelist : "(none)");
	ab_argv_add(b, job->srun);
	ab_argv_addf(b, "--jobid=%u", job->jobid);
	ab_argv_addf(b, "--nodelist=%s", node);
	ab_argv_add(b, "--nodes=1");
	ab_argv_add(b, "--ntasks=1");
	ab_argv_add(b, "--overlap"); /* the step srun is about to launch already holds the resources */
	ab_argv_add(b, "--mem=0");
	ab_argv_add(b, "--quit-on-interrupt"); /* one Ctrl-C cancels the probe step */
	ab_argv_add(b, "--job-name=autobatch-probe");
	if (job->chdir) /* the trials start where the step's tasks will (srun -D) */
		ab_argv_addf(b, "--chdir=%s", job->chdir);
	if (job->probe_gpus)
		ab_argv_add(b, job->probe_gpus);
	ab_argv_add(b, site->probe);
	ab_argv_add(b, "run");
	ab_argv_add(b, "--json");
	ab_argv_add(b, "-");
	return 0;
}

/* The short step that names the device on node (ab_probe_device). */
int ab_probe_device_argv(const struct ab_probe_job *job, const char *node, char *probe_args_copy,
			 struct ab_argv *b, char *err, size_t errlen)
{
	int rc;

	if ((rc = build_step(job, node, b, err, errlen)) < 0)
		return rc;
	ab_argv_add_words(b, probe_args_copy);
	ab_argv_add(b, "--describe-device");
	return ab_argv_done(b, "the probe's command line", err, errlen);
}

int ab_probe_cleanup_argv(const struct ab_probe_job *job, struct ab_argv *b, char *err,
			  size_t errlen)
{
	char pid[24], jobid[16], name[64];
	unsigned nodes = job->nnodes ? job->nnodes : 1;

	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	snprintf(jobid, sizeof(jobid), "%u", job->jobid);
	snprintf(name, sizeof(name), AB_TRIAL_CONTAINER, jobid, pid);
	ab_argv_add(b, job->srun);
	ab_argv_addf(b, "--jobid=%u", job->jobid);
	ab_argv_addf(b, "--nodes=%u", nodes);
	ab_argv_addf(b, "--ntasks=%u", nodes);
	ab_argv_add(b, "--ntasks-per-node=1");
	ab_argv_add(b, "--overlap");
	ab_argv_add(b, "--mem=0");
	ab_argv_add(b, "--job-name=autobatch-cleanup");
	ab_argv_add(b, "--export=ALL," AB_ENV_CLEANUP "=1");
	ab_argv_add(b, "/bin/sh");
	ab_argv_add(b, "-c");
	/* this probe's container, and those of probes in jobs that no longer run (a job
	 * cancelled at once, by a second Ctrl-C, takes its probe with it); the words are ours
	 * (a job id and a pid), nothing of the user's reaches this shell */
	ab_argv_addf(b, "PATH=${" AB_ENV_NODE_PATH ":+$" AB_ENV_NODE_PATH ":}$PATH; "
			"command -v enroot >/dev/null || { echo \"autobatch: could not remove the "
			"trials' container pyxis_%s on $(hostname): no enroot on the node's PATH\" >&2; "
			"exit 0; }; "
			"for n in $(enroot list | grep -x 'pyxis_\\([0-9]*_\\)\\{0,1\\}"
			"autobatch-trial-[0-9]*-[0-9]*'); do j=${n#*autobatch-trial-}; j=${j%%-*}; "
			"if [ \"$n\" = pyxis_%s ] || [ \"$n\" = pyxis_%s_%s ] || "
			"{ [ \"$j\" != %s ] && command -v squeue >/dev/null && "
			"! squeue -h -j \"$j\" -t PD,R,S -o %%i 2>/dev/null | grep -qx \"$j\"; }; "
			"then enroot remove -f \"$n\" >/dev/null || echo \"autobatch: could not "
			"remove the trials' container $n on $(hostname)\" >&2; fi; done; exit 0",
		     name, name, jobid, name, jobid);
	return ab_argv_done(b, "the cleanup step's command line", err, errlen);
}

/* How many ranks each trial runs, and where (--autobatch-trial-shape): the whole step's
 * tasks over its nodes, or its first node's, each trial a step of the job; 0 for a trial of
 * one process (the gpu shape, a step of one task, model mode, a site's simulated device,
 * which measures one process: the decision line says so). */
static int trial_ranks(const struct ab_probe_job *job, unsigned *per_node, bool *whole,
		       char *err, size_t errlen)
{
	const struct ab_ctx *c = job->ctx;
	unsigned nodes = job->nnodes ? job->nnodes : 1, ranks;
	/* a launcher's workers each hold a GPU: its one task is a step trial too, whose task
	 * measures each worker (autobatch-probe task) */
	bool launcher = !c->req.trial_command[0] && ab_launcher_name(job->argc, job->argv);
	/* a step in a container (pyxis): each trial is a step too, which pyxis puts in it */
	bool container = ab_env_container(job->env) != NULL;

	if (c->req.mode == AB_MODE_MODEL)
		return 0;
	if (container && (job->ntasks < 2 || c->eff.shape == AB_SHAPE_GPU))
		return *whole = false, *per_node = 1, 1;
	if ((job->ntasks < 2 && !launcher) || c->eff.shape == AB_SHAPE_GPU ||
	    ab_probe_args_sim(c->site.probe_args))
		return 0;
	*whole = c->eff.shape == AB_SHAPE_STEP && nodes > 1;
	*per_node = job->ntasks % nodes ? 0 : job->ntasks / nodes;
	ranks = *whole ? job->ntasks : (job->ntasks + nodes - 1) / nodes;
	if (ranks > AB_TRIAL_MAX_RANKS)
		return ab_fail(err, errlen, E2BIG, "a trial of %u tasks is more than the %d a trial "
				       "measures; use --autobatch-trial-shape=%s", ranks,
			       AB_TRIAL_MAX_RANKS, *whole ? "node or gpu" : "gpu");
	return ranks > 1 || launcher || container ? (int)ranks : 0;
}

int ab_probe_trial_ranks(const struct ab_probe_job *job)
{
	unsigned per_node;
	bool whole;
	char err[8];

	return trial_ranks(job, &per_node, &whole, err, sizeof(err));
}

bool ab_probe_per_rank_limits(const struct ab_probe_job *job)
{
	unsigned per_node;
	bool whole = false;
	char err[8], memory[16];

	return job->models && trial_ranks(job, &per_node, &whole, err, sizeof(err)) > 0 && whole &&
	       ab_gpu_models_node_memory(job->models, memory, sizeof(memory)) != -ENODATA;
}

/* The trial's shape on the probe's command line: N ranks as a step over the nodes, with the
 * real step's GPU request. */
static int add_shape(const struct ab_probe_job *job, struct ab_argv *b, char *err,
		     size_t errlen)
{
	unsigned per_node = 0;
	bool whole = false;
	char first[256];
	int ranks = trial_ranks(job, &per_node, &whole, err, errlen);

	if (ranks <= 0)
		return ranks;
	ab_argv_addf(b, "--ranks=%d", ranks);
	for (int i = 0; i < job->step_gpus.n; i++)
		ab_argv_addf(b, "--step-option=%s", job->step_gpus.opt[i]);
	if (whole) {
		char memory[AB_GPU_MODELS_MAX * (AB_GPU_NODES_MAX + 24)];

		ab_argv_addf(b, "--step-nodes=%s", job->nodelist);
		if (per_node)
			ab_argv_addf(b, "--ranks-per-node=%u", per_node);
		/* each rank held to its own GPU's memory, measured for its model */
		if (job->models && ab_gpu_models_node_memory(job->models, memory, sizeof(memory)) == 0)
			ab_argv_addf(b, "--node-memory=%s", memory);
		return 1;
	}
	if (ab_hostlist_first(job->probe_node ? job->probe_node : job->nodelist, first,
			      sizeof(first)) < 0)
		return ab_fail(err, errlen, EINVAL, "cannot tell the step's first node");
	ab_argv_addf(b, "--step-nodes=%s", first);
	return 1;
}

/* The probe's own time limit inside the step's: no trial round is started that would end
 * past it, so a probe near its end keeps the best fit it saw where the step's cancellation
 * would lose every trial. The slack is for the step's start and the report's writing; a step
 * too short for any (a test's probe_timeout=3) has none. */
unsigned ab_probe_time_limit_s(unsigned budget_s)
{
	unsigned slack = budget_s / 10 > 10 ? budget_s / 10 : 10;

	return budget_s < 40 ? 0 : budget_s - slack;
}

static void add_time_limit(struct ab_argv *b, unsigned budget_s)
{
	unsigned limit = ab_probe_time_limit_s(budget_s);

	if (!limit)
		return;
	ab_argv_addf(b, "--time-limit=%u", limit);
	/* counted from now, not from the probe's start: the step's start, a container's import */
	ab_argv_addf(b, "--since=%lld", (long long)time(NULL));
}

int ab_probe_argv(const struct ab_probe_job *job, const char *phase, unsigned budget_s,
		  char *probe_args_copy, struct ab_argv *b, char *err, size_t errlen)
{
	const struct ab_site *site = &job->ctx->site;
	const struct ab_request *req = &job->ctx->req;
	int rc, ranks;

	if ((rc = build_step(job, NULL, b, err, errlen)) < 0)
		return rc;
	if ((ranks = add_shape(job, b, err, errlen)) < 0)
		return ranks;
	if (site->parallel && !ranks) /* a trial of several ranks takes the node */
		ab_argv_add(b, "--parallel=auto");
	ab_argv_addf(b, "--fraction=%g", job->ctx->eff.fraction);
	ab_argv_add(b, "--objective");
	ab_argv_add(b, ab_objective_name(req->objective));
	ab_argv_add(b, "--phase");
	ab_argv_add(b, phase);
	if (req->mode == AB_MODE_MODEL)
		ab_argv_add(b, "--mode=model");
	ab_argv_addf(b, "--startup-seconds=%u", site->startup_seconds);
	ab_argv_addf(b, "--max-trial-seconds=%u", site->max_trial_seconds);
	ab_argv_addf(b, "--trial-cap=%u", site->trial_cap);
	add_time_limit(b, budget_s);
	if (!job->ctx->eff.instrument)
		ab_argv_add(b, "--instrument=off");
	if (job->config) {
		ab_argv_add(b, "--config");
		ab_argv_add(b, job->config);
		ab_argv_add(b, "--key");
		ab_argv_add(b, job->key);
		/* the preset the plugin read the file by, named or detected: the probe reads its
		 * run length, ramp-up and lengths by the same, whatever the batch key */
		if (job->preset) {
			ab_argv_add(b, "--preset");
			ab_argv_add(b, job->preset);
		}
		if (job->accum_key) {
			ab_argv_add(b, "--accum-key");
			ab_argv_add(b, job->accum_key);
		}
		if (job->pin_key)
			ab_argv_addf(b, "--pin=%s=%ld", job->pin_key, job->pin_batch);
	}
	if (job->warm_batch) {
		ab_argv_addf(b, "--warm-start=%ld", job->warm_batch);
		if (job->warm_per_sample)
			ab_argv_addf(b, "--warm-per-sample=%llu", (unsigned long long)job->warm_per_sample);
		ab_argv_addf(b, "--warm-from=%s", job->warm_from);
	}
	if (job->max_batch)
		ab_argv_addf(b, "--max=%ld", job->max_batch);
	if (req->run_steps == AB_RUN_STEPS_OFF)
		ab_argv_add(b, "--run-steps=off");
	else if (req->run_steps > 0)
		ab_argv_addf(b, "--run-steps=%ld", req->run_steps);
	if (job->global_batch) {
		ab_argv_addf(b, "--global-batch=%ld", job->global_batch);
		ab_argv_addf(b, "--devices=%u", job->dp_width ? job->dp_width : job->ntasks);
	}
	/* the step's ranks will hold NCCL buffers a one-process trial cannot see */
	if (job->ntasks > 1 && !ranks && ab_probe_args_gpu(site->probe_args) && site->comm_reserve)
		ab_argv_addf(b, "--comm-reserve=%llu", (unsigned long long)site->comm_reserve);
	ab_argv_add_words(b, probe_args_copy);
	ab_argv_add(b, "--");
	if (req->trial_command[0]) {
		ab_argv_add(b, "/bin/sh"); /* the user's own command line, run as the user in the step */
		ab_argv_add(b, "-c");
		ab_argv_add(b, req->trial_command);
	} else {
		for (int i = 0; i < job->argc; i++)
			ab_argv_add(b, job->argv[i]);
	}
	return ab_argv_done(b, "the probe's command line", err, errlen);
}

