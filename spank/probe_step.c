/* probe_step.c - srun side: run autobatch-probe as a nested job step on the step's first
 * node, as the user, from an argv array; stream its progress; read its report.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "probe_step.h"
#include "probe_args.h"

#include "error.h"
#include "hostlist.h"
#include "presets.h"
#include "step_gpus.h"
#include "subprocess.h"

#define GRACE_S 10.0
/* The least time a probe step is started with, where the job's time limit bounds it: a
 * trial alone takes seconds to start. */
#define AB_PROBE_MIN_S 60

/* The job's steps, and one killed (a step ends with its tasks): the calls' forms changed in
 * Slurm 26.05. */
static int list_steps(uint32_t jobid, job_step_info_response_msg_t **steps)
{
#ifdef HAVE_SLURM_SIGNAL_STEP_ID
	slurm_step_id_t id = {.job_id = jobid, .step_id = NO_VAL, .step_het_comp = NO_VAL};

	return slurm_get_job_steps(&id, steps, SHOW_ALL);
#else
	return slurm_get_job_steps((time_t)0, jobid, NO_VAL, steps, SHOW_ALL);
#endif
}

static int kill_step(const job_step_info_t *s)
{
#ifdef HAVE_SLURM_SIGNAL_STEP_ID
	slurm_step_id_t id = s->step_id;

	return slurm_signal_job_step(&id, SIGKILL);
#else
	return slurm_signal_job_step(s->step_id.job_id, s->step_id.step_id, SIGKILL);
#endif
}

/* The call's form changed in 26.05 with the step calls'. */
int ab_load_job(uint32_t jobid, job_info_msg_t **msg)
{
#ifdef HAVE_SLURM_SIGNAL_STEP_ID
	slurm_step_id_t id = {.job_id = jobid, .step_id = NO_VAL, .step_het_comp = NO_VAL};

	return slurm_load_job(msg, id, SHOW_ALL);
#else
	return slurm_load_job(msg, jobid, SHOW_ALL);
#endif
}

/* The job's nodes when its GPUs were asked for as a whole (--gpus=N), else 0. A step of such
 * a job over fewer nodes than it holds gets GPUs only as --gpus=K: with --gres=gpu:1, or no
 * GPU option, it is "Invalid generic resource (gres) specification" and no probe ran
 * (measured on 22.05). */
static uint32_t gpus_per_job_nodes(const slurm_job_info_t *j)
{
	if (!j || !j->tres_per_job || !strstr(j->tres_per_job, "gpu"))
		return 0;
	return j->num_nodes ? j->num_nodes : 1;
}

/* The probe step's GPUs: one (--gres=gpu:1), or for parallel trials none named, which gives
 * a step all of the job's GPUs on the node (srun(1), --gres) and the probe one trial per GPU.
 * In a job of --gpus=N, --gpus=1; there the parallel rounds keep all of the node's GPUs only
 * when the job holds that node alone (a step of one node of several must name a count). */
static const char *probe_step_gpus(const struct ab_probe_job *job, const slurm_job_info_t *j)
{
	const struct ab_site *site = &job->ctx->site;
	bool gpu = ab_probe_args_gpu(site->probe_args);
	uint32_t per_job = gpus_per_job_nodes(j);

	if (per_job > 1 || (per_job && gpu && !site->parallel))
		return "--gpus=1";
	if (!per_job && gpu && !site->parallel)
		return "--gres=gpu:1";
	return NULL;
}

/* The real step's GPU request (--gpus-per-task, --gres, --gpu-bind...), from its record in
 * slurmctld, for the trial steps: each task of a trial sees the GPUs its task of the real
 * step sees (CUDA_VISIBLE_DEVICES), where the job's default would give it all of its node's.
 * Unreadable (slurmctld busy): none, the job's default, which srun -v says. */
/* The real step's record among the job's steps, or NULL. */
static const job_step_info_t *own_step(const job_step_info_response_msg_t *steps,
				       unsigned stepid)
{
	for (uint32_t i = 0; i < steps->job_step_count; i++)
		if (steps->job_steps[i].step_id.step_id == stepid)
			return &steps->job_steps[i];
	return NULL;
}

static int read_step_gpus(struct ab_probe_job *job, char *err, size_t errlen)
{
	job_step_info_response_msg_t *steps = NULL;
	const job_step_info_t *s;
	int rc = 0;

	if (list_steps(job->jobid, &steps) != SLURM_SUCCESS || !steps) {
		slurm_verbose(AB_LOG_PREFIX "cannot read step %u.%u's GPU request: its trials get "
					    "the job's GPUs",
			      job->jobid, job->stepid);
		return 0;
	}
	if ((s = own_step(steps, job->stepid)))
		rc = ab_step_gpus_from_tres(s->tres_per_task, s->tres_per_node, s->tres_per_step,
					    s->tres_bind, s->cpus_per_tres, &job->step_gpus, err,
					    errlen);
	slurm_free_job_step_info_response_msg(steps);
	return rc;
}

/* The environment of the nested srun: ours, less what would reshape its step and what would
 * put it in the user's container (carried for the trial steps instead: protocol.h), plus the
 * guard that tells the nested srun's copy of this plugin to stay out of the way. The carried
 * entries are allocated, in *carried (NULL-terminated; free with probe_env_free). */
static char **probe_env(char *const *base, char *guard, size_t guardlen, char ***carried_out)
{
	extern char **environ;
	size_t n = 0, k = 0, c = 0;
	char **env, **carried;
	bool carry;

	if (!base)
		base = environ;
	while (base[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	carried = calloc(n + 1, sizeof(*carried));
	if (!env || !carried)
		return free(env), free(carried), NULL;
	*carried_out = carried;
	for (size_t i = 0; i < n; i++) {
		if (ab_env_reshapes_srun(base[i]))
			continue;
		if (!ab_env_pyxis(base[i], &carry))
			env[k++] = base[i];
		else if (carry && asprintf(&carried[c], "%s%s", AB_ENV_CARRIED, base[i]) < 0)
			carried[c] = NULL;
		else if (carry)
			env[k++] = carried[c++];
	}
	snprintf(guard, guardlen, "%s=%ld", AB_GUARD_ENV, (long)getpid());
	env[k++] = guard;
	env[k] = NULL;
	return env;
}

static void probe_env_free(char **env, char **carried)
{
	for (char **c = carried; c && *c; c++)
		free(*c);
	free(carried);
	free(env);
}

struct relay {
	char last[512];  /* the last line that is not our own progress, to quote on failure */
	char cause[512]; /* the first of Slurm's lines that names why the probe could not run */
	bool interrupted; /* the probe step's srun says it was interrupted */
	char node_failure[512]; /* Slurm's line saying the job lost a node, or "" */
	char cancel[512]; /* slurmstepd's "*** STEP|JOB ... CANCELLED AT ... ***", or "" */
	bool quoting;     /* in the lines the probe's failure quotes ("  | ..."), said again */
};

static void relay_line(void *arg, const char *line)
{
	struct relay *r = arg;

	/* the probe's own verdict, and the trial output its failure quotes, are said again,
	 * with what was applied, by the plugin */
	r->quoting = !strncmp(line, "autobatch: failed: ", 19) ||
		     (r->quoting && !strncmp(line, "  | ", 4));
	if (strncmp(line, "autobatch: chose ", 17) && !r->quoting) {
		fprintf(stderr, "%s\n", line);
		fflush(stderr);
	}
	if (strncmp(line, "autobatch: ", 11) != 0)
		ab_printable(line, r->last, sizeof(r->last));
	/* the order of slurmstepd's and srun's lines varies: keep the cause when it passes */
	if (!r->cause[0] && (strstr(line, "execve()") || strstr(line, "No such file") ||
			     strstr(line, "GRES") || strstr(line, "gres")))
		ab_printable(line, r->cause, sizeof(r->cause));
	/* with --quit-on-interrupt srun forces termination on a Ctrl-C; the task may then end by
	 * SIGKILL rather than SIGINT */
	if (strstr(line, "srun: forcing job termination") || strstr(line, "srun: interrupt"))
		r->interrupted = true;
	/* slurmctld cancels every step of a job that lost a node: "*** STEP J.S ON node3
	 * CANCELLED AT ... DUE TO NODE FAILURE ...", "srun: error: Node failure on node1" */
	if (!r->node_failure[0] && strstr(line, "DUE TO NODE FAILURE"))
		ab_printable(line, r->node_failure, sizeof(r->node_failure));
	/* the line that names the node that failed wins over one naming where a step was
	 * cancelled (slurmstepd-node1 for a failure of node2; their order varies) */
	if (strstr(line, "Node failure on ") && !strstr(r->node_failure, "Node failure on "))
		ab_printable(line, r->node_failure, sizeof(r->node_failure));
	/* the job's time limit, or an scancel: the step's SIGTERM then reads as an interrupt.
	 * slurmstepd's own line ("slurmstepd-node1: error: *** STEP ...", 26.05: "[time]
	 * error: *** STEP ..."), never one the probe quotes from a trial (a trial step that
	 * srun --kill-on-bad-exit cancelled says the same words) */
	if (!r->cancel[0] && !r->quoting && strncmp(line, "  | ", 4) &&
	    strstr(line, " CANCELLED AT ") &&
	    (strstr(line, "error: *** STEP ") || strstr(line, "error: *** JOB ")))
		ab_printable(line, r->cancel, sizeof(r->cancel));
}

static int cancelled(char *err, size_t errlen)
{
	return ab_fail(err, errlen, ECANCELED, "srun ended while probing; the probe step was "
					       "cancelled");
}

static double left_s(const struct ab_probe_job *job)
{
	double left = difftime(job->ends_at, time(NULL));

	return left > 0 ? left : 0;
}

static int timed_out(const struct ab_probe_job *job, unsigned budget, char *err,
		     size_t errlen)
{
	const struct ab_site *site = &job->ctx->site;

	if (budget < site->probe_timeout)
		return ab_fail(err, errlen, ETIMEDOUT,
			       "the probe step did not finish within %u s, its share of half of what "
			       "was left of the %s's time limit (probe_timeout=%us), and was "
			       "cancelled: give the %s more time",
			       budget, job->ends_by, site->probe_timeout, job->ends_by);
	return ab_fail(err, errlen, ETIMEDOUT,
		       "the probe step did not finish within probe_timeout=%us and was cancelled",
		       site->probe_timeout);
}

/* The least probing window a probe step is started in: a minute, or probe_timeout. */
static unsigned min_window_s(const struct ab_probe_job *job)
{
	unsigned timeout = job->ctx->site.probe_timeout;

	return timeout < AB_PROBE_MIN_S ? timeout : AB_PROBE_MIN_S;
}

/* Half of what is left is under min_window_s, or spent: no probe step. */
static int no_time(const struct ab_probe_job *job, char *err, size_t errlen)
{
	return ab_fail(err, errlen, ETIME,
		       "the %s's time limit leaves %.0f s, too little to probe (probing takes "
		       "at most half of what is left, and needs %u s): give the %s more time "
		       "(--time), or run this step without --autobatch",
		       job->ends_by, left_s(job), min_window_s(job), job->ends_by);
}

static int lost_node(const struct relay *r, char *err, size_t errlen)
{
	return ab_fail(err, errlen, EHOSTDOWN, "the job lost a node while probing, and Slurm "
					       "cancelled the probe step (%s)",
		       r->node_failure);
}

/* A Ctrl-C ended the step: the step's srun exits as its SIGINT says, or, where it has no
 * answer of its own (answered false), its lines say it was interrupted. No srun passes the
 * probe's 130 on after a --quit-on-interrupt Ctrl-C: 22.05 lets the task end, waits ("Timed
 * out waiting for job step to complete") and exits 0; 26.05 kills the step at once and exits
 * 137 (measured on both). srun's "forcing job termination" tells where the probe was killed
 * before it answered. */
static bool ended_by_ctrl_c(const struct ab_subprocess *p, const struct relay *r, bool answered)
{
	return (WIFEXITED(p->status) && WEXITSTATUS(p->status) == 130) ||
	       (WIFSIGNALED(p->status) && WTERMSIG(p->status) == SIGINT) ||
	       (!answered && r->interrupted);
}

/* Slurm cancelled the step, not a Ctrl-C of this srun (whose own lines say it): the job's
 * time limit, or an scancel. Like an interrupt, nothing is launched: the job is ending. */
static bool cancelled_by_slurm(const struct relay *r)
{
	return r->cancel[0] && !r->interrupted;
}

static int slurm_cancelled(const struct ab_site *site, const struct relay *r, char *err,
			   size_t errlen)
{
	if (strstr(r->cancel, "TIME LIMIT"))
		return ab_fail(err, errlen, EINTR, "the job's time limit ran out while probing (%s): "
						   "give the job time for the probe too (up to "
						   "probe_timeout=%us)",
			       r->cancel, site->probe_timeout);
	return ab_fail(err, errlen, EINTR, "Slurm cancelled the probe step while probing (%s: "
					   "scancel, or the job ended)",
		       r->cancel);
}

int ab_probe_interrupted(char *err, size_t errlen)
{
	return ab_fail(err, errlen, EINTR, "probing was interrupted (Ctrl-C); the probe step was "
					   "cancelled");
}

static int judge(const struct ab_probe_job *job, unsigned budget,
		 const struct ab_subprocess *p, const struct relay *r, struct ab_result *res,
		 char *err, size_t errlen)
{
	const struct ab_site *site = &job->ctx->site;
	char why[512];
	bool parsed;

	if (p->stopped)
		return cancelled(err, errlen);
	if (p->timed_out)
		return timed_out(job, budget, err, errlen);
	parsed = ab_result_parse(p->out, p->out_len, res, why, sizeof(why)) == 0;
	if (r->node_failure[0] && !(parsed && res->ok))
		return lost_node(r, err, errlen);
	if (cancelled_by_slurm(r) && !(parsed && res->ok))
		return slurm_cancelled(site, r, err, errlen);
	/* a report wins over srun's "interrupt" lines (a trial step the probe stopped says them
	 * too), not over the probe's own exit by SIGINT or its report saying so */
	if ((parsed && res->interrupted) || ended_by_ctrl_c(p, r, parsed))
		return ab_probe_interrupted(err, errlen);
	if (parsed)
		return res->ok ? 0 : ab_fail(err, errlen, ENOSPC, "the probe failed: %s%s",
					    res->error, ab_probe_option_note(res->error));
	if (strstr(r->cause, "execve()") || strstr(r->cause, "No such file"))
		return ab_fail(err, errlen, ENOENT,
			       "the probe %s could not be run on the node (%s): check probe= in "
			       "plugstack.conf",
			       site->probe, r->cause);
	if (r->cause[0])
		return ab_fail(err, errlen, ENODEV,
			       "the probe step could not get a GPU (%s): run on GPU nodes, or "
			       "set probe_args=\"--device host\" for sites without GPUs",
			       r->cause);
	return ab_fail(err, errlen, EPROTO, "%s (probe step exit status %d%s%s)", why,
		       WIFEXITED(p->status) ? WEXITSTATUS(p->status) : 128 + WTERMSIG(p->status),
		       r->last[0] ? "; it said: " : "", r->last);
}

/* Runs the step argv b for at most timeout_s (the probe's stdout kept in p->out, its stderr
 * relayed). */
static int run_step(const struct ab_probe_job *job, struct ab_argv *b, unsigned timeout_s,
		    const volatile sig_atomic_t *stop, struct ab_subprocess *p, struct relay *relay,
		    char *err, size_t errlen)
{
	char guard[64], **env, **carried = NULL;
	int rc;

	/* srun is ending, or a Ctrl-C came between two steps: none is started */
	if (stop && *stop)
		return cancelled(err, errlen);
	if (!(env = probe_env(job->env, guard, sizeof(guard), &carried)))
		return ab_fail(err, errlen, ENOMEM, "out of memory");
	/* it dies with srun: its own srun's shepherd then cancels the probe step */
	*p = (struct ab_subprocess){.argv = b->v, .envp = env, .on_line = relay_line,
				    .arg = relay, .timeout_s = timeout_s,
				    .interrupted = stop, .die_with_parent = true,
				    .tick = job->tick, .tick_arg = job->tick_arg};
	rc = ab_subprocess_run(p, GRACE_S, err, errlen);
	probe_env_free(env, carried);
	return rc;
}

/* The trial steps of this srun's probe (autobatch-trial.PID, named by `autobatch-probe ranks
 * --nodes` after the guard) that outlive it: the probe stops each trial step it ends itself
 * (ranks closes its tasks' standard input), but a cancelled probe step (Ctrl-C,
 * probe_timeout, a lost node) or a launcher killed outright takes the srun that ran the trial
 * step with it, and a step whose srun is gone keeps its tasks running until the job ends. */
static void cancel_trial_steps(const struct ab_probe_job *job)
{
	job_step_info_response_msg_t *steps = NULL;
	char name[64];

	snprintf(name, sizeof(name), "autobatch-trial.%ld", (long)getpid());
	if (list_steps(job->jobid, &steps) != SLURM_SUCCESS || !steps)
		return;
	for (uint32_t i = 0; i < steps->job_step_count; i++) {
		const job_step_info_t *s = &steps->job_steps[i];

		if (s->name && !strcmp(s->name, name) && kill_step(s) == SLURM_SUCCESS)
			slurm_spank_log(AB_LOG_PREFIX "cancelled the trial step %u.%u that the probe "
						      "left",
					job->jobid, s->step_id.step_id);
	}
	slurm_free_job_step_info_response_msg(steps);
}

/* The trial steps' container (pyxis keeps a named one after its step) removed on every node
 * of the step, whatever ended the probe: a Ctrl-C too, so no stop stops this short step. */
static void remove_trial_container(const struct ab_probe_job *job)
{
	struct ab_argv b = {0};
	struct relay relay = {.last = ""};
	struct ab_subprocess p = {0};
	char err[256];

	if (ab_probe_cleanup_argv(job, &b, err, sizeof(err)) < 0 ||
	    run_step(job, &b, job->ctx->site.probe_timeout, NULL, &p, &relay, err,
		     sizeof(err)) < 0 ||
	    p.status != 0)
		slurm_spank_log(AB_LOG_PREFIX "could not remove the trials' container: %s",
				err[0] ? err : relay.last);
	ab_subprocess_free(&p);
	ab_argv_free(&b);
}

/* Nothing fit in trials of one process of a step of several: the process held the whole
 * model, which the step may shard over its tasks (FSDP, ZeRO); said after the probe's own
 * words, with what would size the step. */
static void why_nothing_fits(const struct ab_probe_job *job, char *err, size_t errlen)
{
	const struct ab_ctx *c = job->ctx;
	size_t len = strlen(err);

	if (job->ntasks < 2 || ab_probe_trial_ranks(job) > 0 || c->req.mode == AB_MODE_MODEL)
		return;
	snprintf(err + len, errlen - len, "; each trial was one process of the step's %u "
			 "tasks (%s), holding the whole model where the step may shard it (FSDP, "
			 "ZeRO): --autobatch-trial-shape=step tries the step itself",
			 job->ntasks, c->req.trial_command[0] ? "--autobatch-trial-command"
							      : "--autobatch-trial-shape=gpu");
}

/* What a probe step may take: probe_timeout, or its share of the probing window (half of
 * what was left of the job's time when probing began) where that is less. The run needs the
 * rest: a probe that the time limit ends leaves it nothing, where one cut short leaves it its
 * original settings (on_failure=continue). 0: no time left. */
static unsigned budget_s(const struct ab_probe_job *job, double share)
{
	unsigned timeout = job->ctx->site.probe_timeout;
	double left;

	if (!job->probe_until)
		return timeout;
	left = difftime(job->probe_until, time(NULL)) * share;
	if (left >= timeout)
		return timeout;
	return left >= 1 ? (unsigned)left : 0;
}

/* A train probe with an eval probe after it takes two thirds of what is left of the window. */
static double share_of(const struct ab_probe_job *job, const char *phase)
{
	return job->ctx->req.eval && !strcmp(phase, "train") ? 2.0 / 3 : 1;
}

unsigned ab_probe_train_limit_s(const struct ab_probe_job *job)
{
	unsigned budget = job->no_time ? 0 : budget_s(job, share_of(job, "train"));
	unsigned limit = ab_probe_time_limit_s(budget);

	return limit ? limit : budget;
}

/* The probing window, from the job's end: said once, before, where it bounds the probe below
 * probe_timeout; none where half of what is left is under a minute (or probe_timeout). */
static void set_window(struct ab_probe_job *job)
{
	unsigned timeout = job->ctx->site.probe_timeout;
	double half = left_s(job) / 2;

	job->probe_until = 0;
	job->no_time = false;
	if (!job->ends_at || half >= timeout)
		return;
	job->probe_until = time(NULL) + (time_t)half;
	if ((job->no_time = half < min_window_s(job)))
		return;
	slurm_spank_log(AB_LOG_PREFIX "the %s's time limit leaves %.0f s: probing takes at most "
				      "half of it, %.0f s (probe_timeout=%us)",
			job->ends_by, left_s(job), half, timeout);
}

static bool limited(uint32_t minutes)
{
	return minutes != INFINITE && minutes != NO_VAL && minutes != 0;
}

/* The real step's own time limit (srun -t inside an allocation), counted from its launch:
 * its tasks wait while srun probes. Unreadable: the job's alone. */
static void step_end(struct ab_probe_job *job)
{
	job_step_info_response_msg_t *steps = NULL;
	const job_step_info_t *s;

	if (list_steps(job->jobid, &steps) != SLURM_SUCCESS || !steps)
		return;
	if ((s = own_step(steps, job->stepid)) && limited(s->time_limit) && s->start_time) {
		time_t end = s->start_time + (time_t)s->time_limit * 60;

		if (!job->ends_at || end < job->ends_at) {
			job->ends_at = end;
			job->ends_by = "step";
		}
	}
	slurm_free_job_step_info_response_msg(steps);
}

void ab_probe_read_job(struct ab_probe_job *job)
{
	job_info_msg_t *msg = NULL;
	const slurm_job_info_t *j = NULL;

	/* an array's first task shares its id with the array: each task is a record */
	if (ab_load_job(job->jobid, &msg) == SLURM_SUCCESS && msg)
		for (uint32_t i = 0; i < msg->record_count && !j; i++)
			if (msg->job_array[i].job_id == job->jobid)
				j = &msg->job_array[i];
	job->probe_gpus = probe_step_gpus(job, j);
	job->ends_at = 0;
	job->ends_by = "job";
	/* a job without a time limit has none (INFINITE), or an end_time years away */
	if (j && limited(j->time_limit))
		job->ends_at = j->end_time;
	slurm_free_job_info_msg(msg);
	if (job->step_time)
		step_end(job);
	set_window(job);
}

int ab_probe_read_step(struct ab_probe_job *job, char *err, size_t errlen)
{
	int rc;

	/* one process driving several GPUs (JAX), or a launcher starting a worker per GPU
	 * (torchrun --nproc_per_node=gpu, deepspeed): a global batch's replicas are the GPUs */
	bool by_gpu = job->per_device || job->workers == 0;

	job->step_gpus.n = 0;
	if (ab_probe_trial_ranks(job) <= 0 && !(by_gpu && job->global_batch))
		return 0;
	if ((rc = read_step_gpus(job, err, errlen)) < 0)
		return rc;
	job->gpus = by_gpu ? ab_step_gpus_count(&job->step_gpus, job->ntasks, job->nnodes) : 0;
	if (job->gpus > job->ntasks && job->gpus % (unsigned long)job->model_parallel == 0)
		job->dp_width = job->gpus / (unsigned)job->model_parallel;
	return 0;
}

int ab_probe_run(const struct ab_probe_job *job, const char *phase,
		 const volatile sig_atomic_t *stop, struct ab_result *res, char **json, char *err,
		 size_t errlen)
{
	struct ab_argv b = {0};
	struct relay relay = {.last = ""};
	struct ab_subprocess p = {0};
	char args[AB_ARGS_MAX];
	unsigned budget = budget_s(job, share_of(job, phase));
	int rc;

	if (job->no_time || !budget)
		return no_time(job, err, errlen);
	snprintf(args, sizeof(args), "%s", job->ctx->site.probe_args);
	if ((rc = ab_probe_argv(job, phase, budget, args, &b, err, errlen)) < 0 ||
	    (rc = run_step(job, &b, budget, stop, &p, &relay, err, errlen)) < 0)
		goto done;
	if ((rc = judge(job, budget, &p, &relay, res, err, errlen)) == 0 && json) {
		*json = p.out;
		p.out = NULL;
	}
	if (rc == -ENOSPC && res->nothing_fits)
		why_nothing_fits(job, err, errlen);
	/* what is left of the trial steps of a probe that was killed, or whose launcher was,
	 * ends here, before the real step starts */
	if (ab_probe_trial_ranks(job) > 0)
		cancel_trial_steps(job);
done:
	if (ab_probe_trial_ranks(job) > 0 && ab_env_container(job->env))
		remove_trial_container(job);
	ab_subprocess_free(&p);
	ab_argv_free(&b);
	return rc;
}

int ab_probe_device(const struct ab_probe_job *job, const char *node,
		    const volatile sig_atomic_t *stop, char *name, size_t namelen, uint64_t *total,
		    char *err, size_t errlen)
{
	struct ab_argv b = {0};
	struct relay relay = {.last = ""};
	struct ab_subprocess p = {0};
	char args[AB_ARGS_MAX];
	unsigned budget = budget_s(job, 1);
	int rc;

	if (job->no_time || !budget)
		return no_time(job, err, errlen);
	snprintf(args, sizeof(args), "%s", job->ctx->site.probe_args);
	if ((rc = ab_probe_device_argv(job, node, args, &b, err, errlen)) < 0 ||
	    (rc = run_step(job, &b, budget, stop, &p, &relay, err, errlen)) < 0)
		goto done;
	/* the same ends as the probe step's: a Ctrl-C here stops the probing, whatever the
	 * step printed before it */
	if (p.stopped)
		rc = cancelled(err, errlen);
	else if (p.timed_out)
		rc = timed_out(job, budget, err, errlen);
	else if (relay.node_failure[0])
		rc = lost_node(&relay, err, errlen);
	else if (cancelled_by_slurm(&relay))
		rc = slurm_cancelled(&job->ctx->site, &relay, err, errlen);
	else if (ended_by_ctrl_c(&p, &relay, false))
		rc = ab_probe_interrupted(err, errlen);
	else if ((rc = ab_device_parse(p.out, p.out_len, name, namelen, total, err, errlen)) ==
			 -EPROTO && relay.last[0])
		rc = ab_fail(err, errlen, EPROTO, "the probe printed no device (it said: %s)",
			     relay.last);
done:
	ab_subprocess_free(&p);
	ab_argv_free(&b);
	return rc;
}

bool ab_is_probe_step(void)
{
	const char *guard = getenv(AB_GUARD_ENV);
	char parent[32];

	snprintf(parent, sizeof(parent), "%ld", (long)getppid());
	return guard && strcmp(guard, parent) == 0;
}
