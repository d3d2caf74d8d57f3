/* srun_apply.c - srun (local context): plans the step about to launch (its command, its
 * config and the keys in it) and applies a decision to it: the config rewritten, the report
 * written beside the job's files, the decision exported to the tasks.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srun_apply.h"
#include "srun_comment.h"
#include "srun_gpus.h"

#include "error.h"
#include "presets.h"
#include "file_replace.h"
#include "fingerprint.h"
#include "number.h"
#include "size.h"
#include "srun_line.h"

/* setenv(3): srun merges its environment into the launch after this hook (spank_setenv is
 * refused in local context). The SLURM_ twin survives --export=NONE; slurmstepd copies it
 * back (remote.c). */
int ab_export(const char *name, const char *value)
{
	char twin[128];

	if (ab_env_twin(name, twin, sizeof(twin)) < 0 || setenv(name, value, 1) < 0 ||
	    setenv(twin, value, 1) < 0) {
		slurm_error(AB_LOG_PREFIX "cannot export %s: %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

int ab_export_vars(const struct ab_hold_answer *vars)
{
	for (size_t i = 0; i < vars->nvars; i++)
		if (setenv(vars->vars[i].name, vars->vars[i].value, 1) < 0) {
			slurm_error(AB_LOG_PREFIX "cannot export %s: %s", vars->vars[i].name,
				    strerror(errno));
			return -1;
		}
	return 0;
}

/* NAME=VALUE and its SLURM_ twin, for the tasks */
static int add_var(struct ab_hold_answer *vars, const char *name, const char *value)
{
	char twin[AB_HOLD_NAME_MAX];

	if (ab_env_twin(name, twin, sizeof(twin)) < 0 || ab_hold_answer_add(vars, name, value) < 0 ||
	    ab_hold_answer_add(vars, twin, value) < 0)
		return -1;
	return 0;
}

static int add_long(struct ab_hold_answer *vars, const char *name, long value)
{
	char text[32];

	snprintf(text, sizeof(text), "%ld", value);
	return add_var(vars, name, text);
}

/* The report's name: autobatch-JOB.STEP.json, and for a requeued job's rerun (Slurm's
 * SLURM_RESTART_COUNT, 1 and up) autobatch-JOB.STEP.rN.json: a rerun has the job's and the
 * step's ids again, and would replace the report whose real_run the first run's tasks left. */
static void report_name(unsigned jobid, unsigned stepid, char *name, size_t len)
{
	const char *restarts = getenv("SLURM_RESTART_COUNT");
	long n = 0;

	if (restarts && ab_parse_whole(restarts, 1, 1L << 30, &n) == 0)
		snprintf(name, len, "autobatch-%u.%u.r%ld.json", jobid, stepid, n);
	else
		snprintf(name, len, "autobatch-%u.%u.json", jobid, stepid);
}

/* The probe's report beside the job's files, else in $TMPDIR: written whole through a
 * temp file and a rename, never through what someone planted at its name (a FIFO would
 * hang srun, a hard link would be truncated). */
static void write_report(unsigned jobid, unsigned stepid, const char *json, char *path,
			 size_t pathlen)
{
	const char *tmp = getenv("TMPDIR");
	char cwd[PATH_MAX], name[64], err[AB_ERR_MAX] = "";
	int rc = -ENOENT;

	report_name(jobid, stepid, name, sizeof(name));
	for (int i = 0; i < 2 && rc < 0; i++) {
		const char *dir = i == 0 ? getcwd(cwd, sizeof(cwd)) : (tmp && *tmp == '/' ? tmp : "/tmp");
		int dirfd;

		if (!dir || ab_format(path, pathlen, "%s/%s", dir, name) < 0)
			continue;
		if ((dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
			snprintf(err, sizeof(err), "cannot open %s: %s", dir, strerror(errno));
			continue;
		}
		rc = ab_file_replace(dirfd, name, json, 0644, path, err, sizeof(err));
		close(dirfd);
	}
	if (rc < 0) {
		slurm_error(AB_LOG_PREFIX "the report was not written: %s", err);
		path[0] = '\0';
	}
}

/* ---- planning and applying ---------------------------------------------------------- */

#define WARM_KEYS_MAX 96

/* The config's fingerprint without the values of the batch keys, the preset's
 * memory-neutral keys and those the user named (--autobatch-neutral): equal for the jobs of
 * a learning-rate sweep. */
static uint64_t warm_fingerprint(const struct ab_config *cfg, const struct ab_plan *pl)
{
	const char *keys[WARM_KEYS_MAX];
	char list[AB_KEY_MAX], *save = NULL;
	struct ab_hash h;
	size_t n = 0;

	for (size_t i = 0; i < 4; i++)
		keys[n++] = pl->written[i];
	for (size_t i = 0; pl->keys.preset && pl->keys.preset->neutral &&
			   pl->keys.preset->neutral[i] && n < WARM_KEYS_MAX; i++)
		keys[n++] = pl->keys.preset->neutral[i];
	ab_copy(list, sizeof(list), pl->ctx->req.neutral);
	for (char *k = strtok_r(list, ",", &save); k && n < WARM_KEYS_MAX;
	     k = strtok_r(NULL, ",", &save))
		keys[n++] = k;
	ab_hash_init(&h);
	ab_hash_config(&h, cfg, keys, n);
	return h.h;
}

/* srun's own command line, NUL-separated, into args (its length, or -1): where a bare ':'
 * separates a heterogeneous step's components, and -D names where the tasks start */
static ssize_t srun_args(char *args, size_t len)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, args, len) : -1;

	if (fd >= 0)
		close(fd);
	return n;
}

/* srun -D DIR, resolved into dir: where the step's tasks start, and so where its relative
 * --autobatch-config lies and the probe runs its trials (srun's own directory otherwise); ""
 * for none, or an error where DIR does not resolve. Without -D, srun takes DIR from its
 * SLURM_WORKING_DIR (srun(1), INPUT ENVIRONMENT VARIABLES), and so does this. */
static int step_dir(const char *d, char *dir, char *err, size_t errlen)
{
	bool env = !d && (d = getenv("SLURM_WORKING_DIR")) && *d;

	dir[0] = '\0';
	if (d && *d && !realpath(d, dir))
		return ab_fail(err, errlen, errno, "%s%s: %s", env ? "SLURM_WORKING_DIR=" : "srun -D ",
			       d, strerror(errno));
	return 0;
}

/* The step's training processes: a launcher's workers where its arguments say how many
 * (torchrun --nproc_per_node=4 in each task; accelerate launch --num_processes 8 in all),
 * or accelerate's config file does (num_processes); 0 for a launcher's worker per GPU
 * (counted once the GPUs are read, ab_probe_read_step); else its tasks. *by_launcher: a
 * launcher set the count; *unknown: a launcher whose count nothing says. */
static unsigned step_workers(const struct ab_probe_job *job, bool *by_launcher, bool *unknown)
{
	bool world;
	long n = ab_launcher_workers(job->argc, job->argv, &world);

	if (n < 0) /* the user's own file, read as the user (srun runs as the user) */
		n = ab_launcher_config_workers(job->argc, job->argv, job->chdir, &world);
	*by_launcher = n >= 0;
	*unknown = n < 0 && ab_launcher_name(job->argc, job->argv);
	if (n == 0)
		return 0;
	if (n < 0 || (!world && (unsigned long)n * job->ntasks > UINT_MAX))
		return job->ntasks;
	return world ? (unsigned)n : (unsigned)n * job->ntasks;
}

/* --autobatch 0.8, with a space: the value is optional, so 0.8 became the step's command,
 * which no probe can run; said before one is tried (a file so named is a command) */
static int fraction_as_command(const struct ab_probe_job *job, char *err, size_t errlen)
{
	double f;
	char shown[32];

	if (job->argc < 1 || ab_parse_fraction(job->argv[0], &f, NULL, 0) < 0 ||
	    access(job->argv[0], F_OK) == 0)
		return 0;
	ab_printable(job->argv[0], shown, sizeof(shown));
	return ab_fail(err, errlen, EINVAL, "the step's command is '%s': write --autobatch=%s with "
					    "'=' (with a space, the optional value is taken as the "
					    "command)",
		       shown, shown);
}

int ab_plan_job(spank_t sp, struct ab_ctx *c, struct ab_plan *pl, char *err,
		size_t errlen)
{
	const struct ab_request *req = &c->req;
	struct ab_config *cfg;
	ssize_t n = readlink("/proc/self/exe", pl->srun, sizeof(pl->srun) - 1);
	uint32_t jobid = 0, stepid = 0, ntasks = 1;
	bool by_launcher, unknown;
	struct ab_srun_line line;
	const char *launcher;
	char args[1 << 16];
	ssize_t nargs = srun_args(args, sizeof(args));
	int rc;

	pl->ctx = c;
	pl->job.ctx = c;
	if (n <= 0)
		return ab_fail(err, errlen, errno, "cannot find srun itself: %s", strerror(errno));
	pl->srun[n] = '\0';
	if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_ARGV, &pl->job.argc, &pl->job.argv) != ESPANK_SUCCESS)
		return ab_fail(err, errlen, EINVAL, "Slurm did not say which job and command this is");
	spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks);
	pl->job = (struct ab_probe_job){.ctx = c, .srun = pl->srun, .jobid = jobid, .stepid = stepid,
					.ntasks = ntasks, .dp_width = ntasks,
					.argc = pl->job.argc, .argv = pl->job.argv,
					.global_batch = req->global_batch};
	ab_srun_line_read(args, nargs > 0 ? (size_t)nargs : 0, pl->job.argc, pl->job.argv, &line);
	/* srun -t, or its input variable */
	pl->job.step_time = line.time || getenv("SLURM_TIMELIMIT");
	if ((rc = step_dir(line.chdir, pl->chdir, err, errlen)) < 0)
		return rc;
	pl->job.chdir = pl->chdir[0] ? pl->chdir : NULL;
	pl->job.workers = step_workers(&pl->job, &by_launcher, &unknown);
	/* a global batch divided by a guess: a count that is no number, accelerate's file
	 * unreadable or -1 there */
	if (req->global_batch && unknown)
		return ab_fail(err, errlen, EINVAL, "--autobatch-global-batch=%ld: how many workers "
						    "%s starts is not known (its arguments, or "
						    "accelerate's config file, give no number): give "
						    "it the count",
			       req->global_batch, ab_launcher_name(pl->job.argc, pl->job.argv));
	pl->stepid = stepid;
	if ((rc = fraction_as_command(&pl->job, err, errlen)) < 0)
		return rc;
	if (line.multi_prog && pl->job.argc > 0)
		return ab_fail(err, errlen, EINVAL,
			       "srun --multi-prog is not probed: each task runs its own line of %s, "
			       "and no one command is the training program; give --autobatch to an "
			       "srun of the training program alone",
			       pl->job.argv[0]);
	if (line.het_step)
		return ab_fail(err, errlen, EINVAL,
			       "a heterogeneous step (srun ... : ..., or --het-group of several "
			       "components) is not probed: its components hold different programs "
			       "or resources, and Slurm hands the decision to the first one only; "
			       "give --autobatch to an srun of the training component alone");
	pl->job.nodelist = getenv("SLURM_STEP_NODELIST") ? getenv("SLURM_STEP_NODELIST")
							 : getenv("SLURM_NODELIST");
	pl->job.nnodes = ab_srun_node_count(pl->job.nodelist);
	if (!req->config[0])
		return 0;
	/* the user's own file, read as the user (srun runs as the user), where the tasks will
	 * read it: in srun -D's directory when relative */
	if (ab_step_path(pl->chdir, req->config, pl->named, sizeof(pl->named)) < 0)
		return ab_fail(err, errlen, ENAMETOOLONG, "--autobatch-config=%s in srun -D %s: "
							  "the path is too long",
			       req->config, pl->chdir);
	if (!realpath(pl->named, pl->config))
		return ab_fail(err, errlen, errno, "cannot read --autobatch-config=%s%s%s: %s",
			       req->config, strcmp(pl->named, req->config) ? " in srun -D " : "",
			       strcmp(pl->named, req->config) ? pl->chdir : "", strerror(errno));
	if ((rc = ab_config_load(pl->config, AB_FORMAT_AUTO, &cfg, err, errlen)) < 0)
		return rc;
	rc = ab_keys_find(cfg, req->preset, req->key, &pl->keys, err, errlen);
	/* a preset the user named, or one detected with no key of theirs: a program with its
	 * own key may match a preset by chance (batch_size) and read $AUTOBATCH_GRAD_ACCUM */
	if (rc == 0 && (req->preset[0] || !req->key[0]))
		rc = ab_keys_check_global(&pl->keys, cfg, req->global_batch, req->config, err,
					  errlen);
	/* what the decision is made for: apply refuses a file the user changed meanwhile */
	if (rc == 0) {
		pl->written[0] = pl->keys.micro, pl->written[1] = pl->keys.accum;
		pl->written[2] = pl->keys.global, pl->written[3] = pl->keys.eval;
		ab_config_expect(cfg, pl->written, 4, &pl->seen);
		(void)ab_config_expect_dir(pl->config, &pl->seen); /* unknown: not checked */
		pl->warm_fingerprint = warm_fingerprint(cfg, pl);
	}
	ab_config_free(cfg);
	if (rc < 0)
		return rc;
	if (req->eval && !pl->keys.eval)
		return ab_fail(err, errlen, EINVAL, "--autobatch-eval: %s has no eval batch key "
						    "the preset knows",
			       req->config);
	launcher = by_launcher ? ab_launcher_name(pl->job.argc, pl->job.argv) : NULL;
	if (!(pl->job.dp_width = pl->job.workers ? ab_keys_data_parallel(&pl->keys, pl->job.workers,
									  launcher, req->config, err,
									  errlen)
						 : ntasks))
		return -EINVAL;
	pl->job.model_parallel = pl->keys.model_parallel > 1 ? pl->keys.model_parallel : 1;
	pl->job.per_device = pl->keys.preset && pl->keys.preset->per_device;
	pl->job.config = pl->config;
	pl->job.key = pl->keys.micro;
	pl->job.accum_key = pl->keys.accum;
	pl->job.preset = pl->keys.preset ? pl->keys.preset->name : NULL;
	if (!pl->job.global_batch)
		pl->job.global_batch = pl->keys.file_global;
	return 0;
}

/* What each trial was, for a step of several tasks: the whole step, one node's tasks, or
 * one process. */
static void shape_text(const struct ab_plan *pl, const struct ab_result *res, char *line,
		       size_t size, size_t *len)
{
	if (res->ranks > 1 && (res->trial_nodes > 1 || pl->job.nnodes <= 1) &&
	    res->ranks % (res->trial_nodes > 1 ? res->trial_nodes : 1) == 0) {
		long per = res->ranks / (res->trial_nodes > 1 ? res->trial_nodes : 1);

		ab_append(line, size, len, "; trials of the whole step, %ld node%s x %ld task%s",
			  res->trial_nodes > 1 ? res->trial_nodes : 1, res->trial_nodes > 1 ? "s" : "",
			  per, per == 1 ? "" : "s");
	} else if (res->ranks > 1 && res->trial_nodes > 1)
		ab_append(line, size, len, "; trials of the whole step, %ld tasks on %ld nodes",
			  res->ranks, res->trial_nodes);
	else if (res->ranks > 1)
		ab_append(line, size, len, "; trials of one node's %ld tasks of the step's %u nodes",
			  res->ranks, pl->job.nnodes);
	else if (res->ranks == 1 && res->trial_nodes == 1 && !res->container[0])
		ab_append(line, size, len, "; trials of the whole step, %s's workers each measured",
			  ab_launcher_name(pl->job.argc, pl->job.argv)
				  ? ab_launcher_name(pl->job.argc, pl->job.argv) : "its launcher");
	else if (pl->job.ntasks > 1)
		ab_append(line, size, len, "; trials of one process of the step's %u tasks%s",
			  pl->job.ntasks,
			  ab_probe_args_sim(pl->job.ctx->site.probe_args) &&
					  pl->job.ctx->eff.shape != AB_SHAPE_GPU
				  ? " (the site's simulated device measures one process)"
				  : "");
	if (res->container[0]) /* pyxis put each trial step in the user's image */
		ab_append(line, size, len, "; trials ran in its container (pyxis: %s)", res->container);
}

static void decision_line(const struct ab_plan *pl, const struct ab_result *res, long eval_batch,
			  const char *wrote)
{
	char line[3 * PATH_MAX];
	size_t len = 0;

	ab_append(line, sizeof(line), &len, "%s batch %ld", pl->cached ? "cached decision:" : "chose",
		  res->batch);
	if (res->global_batch)
		ab_append(line, sizeof(line), &len, " (gradient accumulation %ld, global %ld)",
			  res->grad_accum, res->global_batch);
	if (eval_batch && pl->ctx->req.config[0]) /* the train key pinned in its trials */
		ab_append(line, sizeof(line), &len, ", eval batch %ld (measured beside training at "
						    "batch %ld)",
			  eval_batch, res->batch);
	else if (eval_batch)
		ab_append(line, sizeof(line), &len, ", eval batch %ld", eval_batch);
	if (pl->cached)
		ab_append(line, sizeof(line), &len, " (probed earlier in %zu trials; "
						    "--autobatch-refresh probes again)",
			  res->trials);
	else if (res->parallel > 1)
		ab_append(line, sizeof(line), &len, " in %zu trials (%ld rounds of up to %ld at "
						    "once), %.0f s",
			  res->trials, res->rounds, res->parallel, res->elapsed_s);
	else
		ab_append(line, sizeof(line), &len, " in %zu trials, %.0f s", res->trials,
			  res->elapsed_s);
	if (!pl->cached && res->eval_trials) /* the eval batch's own probe, after */
		ab_append(line, sizeof(line), &len, ", and %zu trials, %.0f s for the eval batch",
			  res->eval_trials, res->eval_elapsed_s);
	if (!pl->cached)
		shape_text(pl, res, line, sizeof(line), &len);
	if (res->global_batch && pl->job.gpus > pl->job.ntasks && !pl->job.per_device)
		ab_append(line, sizeof(line), &len, "; %u data-parallel replicas (the step's %u GPUs, "
						    "a worker on each from %s)",
			  pl->job.dp_width, pl->job.gpus,
			  ab_launcher_name(pl->job.argc, pl->job.argv));
	else if (res->global_batch && pl->job.gpus > pl->job.ntasks)
		ab_append(line, sizeof(line), &len, "; %u data-parallel replicas (the step's %u GPUs, "
						    "driven by %u task%s: the batch is per device)",
			  pl->job.dp_width, pl->job.gpus, pl->job.ntasks,
			  pl->job.ntasks == 1 ? "" : "s");
	else if (res->global_batch && pl->job.workers && pl->job.workers != pl->job.ntasks)
		ab_append(line, sizeof(line), &len, "; %u data-parallel replicas (the %u workers %s "
						    "starts%s%s)",
			  pl->job.dp_width, pl->job.workers,
			  ab_launcher_name(pl->job.argc, pl->job.argv),
			  pl->keys.model_parallel > 1 ? ", in groups of " : "",
			  pl->keys.model_parallel > 1 ? pl->keys.parallel_text : "");
	else if (res->global_batch && pl->keys.model_parallel > 1)
		ab_append(line, sizeof(line), &len, "; %u data-parallel replicas (the step's %u tasks "
						    "in groups of %s)",
			  pl->job.dp_width, pl->job.ntasks, pl->keys.parallel_text);
	if (res->sized_for[0]) {
		char size[32];

		ab_format_size(res->sized_for_bytes, size, sizeof(size));
		ab_append(line, sizeof(line), &len, "; sized for the step's smallest GPU model, %s "
						    "(%s, on %s)",
			  res->sized_for, size, res->sized_for_node);
	} else if (res->per_rank_limits) {
		ab_append(line, sizeof(line), &len, "; each rank held to %.0f%% of its own GPU's "
						    "memory (the step's GPU models differ)",
			  100.0 * pl->ctx->eff.fraction);
	}
	ab_ramp_text(&res->ramp, res->batch, pl->job.dp_width, line, sizeof(line), &len);
	ab_lengths_text(&res->lengths, line, sizeof(line), &len);
	ab_eval_in_training_text(&res->eval_in_training, line, sizeof(line), &len);
	ab_growth_text(&res->growth, line, sizeof(line), &len);
	if (!pl->cached && res->warm_from[0])
		ab_append(line, sizeof(line), &len, "; warm start from %s%s", res->warm_from,
			  res->warm_verified ? "" : " (its batch no longer fit: searched afresh)");
	if (res->confidence == AB_CONFIDENCE_TIME_LIMIT) /* its cached form too */
		ab_append(line, sizeof(line), &len, "; the best fit seen when the probe's time ran "
						    "out: a larger batch may fit (the next such srun "
						    "probes again, from it)");
	slurm_spank_log(AB_LOG_PREFIX "%s%s", line, wrote);
}

/* XLA's pool (protocol.h): the fraction asked where srun's environment names no cap (a
 * cap of the user's own is theirs), and no preallocation unless the user chose, as the
 * trials had either way. No SLURM_ twin: JAX reads only these names. */
static int add_xla_pool(struct ab_hold_answer *vars, double fraction)
{
	static const char *const names[] = AB_XLA_FRACTION_NAMES;
	const char *prealloc = getenv(AB_ENV_XLA_PREALLOCATE);
	bool theirs = ab_env_xla_fraction_named();
	char text[32];

	snprintf(text, sizeof(text), "%g", fraction);
	for (size_t i = 0; !theirs && i < sizeof(names) / sizeof(names[0]); i++)
		if (ab_hold_answer_add(vars, names[i], text) < 0)
			return -1;
	return prealloc && *prealloc ? 0 : ab_hold_answer_add(vars, AB_ENV_XLA_PREALLOCATE, "false");
}

/* The limit the decision promised (the fraction of the device's memory: what the trials
 * kept aside for NCCL or other processes is the run's too) and its cache entry, for each
 * task's watch (remote.c). */
static int add_watch(struct ab_hold_answer *vars, double limit, const struct ab_plan *pl)
{
	char text[AB_HOLD_VALUE_MAX];

	/* a cache directory too long to name: the watch still says when the run goes over */
	if (!pl->entry[0] || ab_format(text, sizeof(text), "%llu:%s:%s", (unsigned long long)limit,
				       pl->entry, pl->cache_dir) < 0)
		snprintf(text, sizeof(text), "%llu:", (unsigned long long)limit);
	return add_var(vars, AB_ENV_WATCH, text);
}

/* The config's batch values rewritten (by the name the user gave, in srun's directory or
 * srun -D's, for messages they know; the backup lies beside the file really rewritten, a
 * symlink's target), and what was done said into wrote. */
static int rewrite_config(struct ab_plan *pl, const struct ab_result *res, long eval_batch,
			  char *wrote, size_t wrotelen, char *err, size_t errlen)
{
	char values[4][32], note[AB_ERR_MAX], real[PATH_MAX];
	struct ab_edit edits[4];
	struct stat st;
	size_t n = ab_plan_edits(&pl->keys, res, eval_batch, edits, values);
	int rc = ab_config_set_file_expect(pl->named, AB_FORMAT_AUTO, edits, n, -1, &pl->seen,
					   note, sizeof(note), err, errlen);

	if (rc == 0)
		ab_format(wrote, wrotelen, "; %s already says so", pl->named);
	else if (rc > 0)
		ab_format(wrote, wrotelen, "; wrote %s (backup %s.autobatch~)%s%s", pl->named,
			  lstat(pl->named, &st) == 0 && S_ISLNK(st.st_mode) && realpath(pl->named, real)
				  ? real
				  : pl->named,
			  note[0] ? "; " : "", note);
	return rc < 0 ? rc : 0;
}

/* The decision as the tasks' variables: -1 where one cannot be one (a control character) */
static int export_vars(struct ab_plan *pl, const struct ab_result *res, long eval_batch,
		       const char *report, struct ab_hold_answer *vars)
{
	const struct ab_request *req = &pl->ctx->req;

	memset(vars, 0, sizeof(*vars));
	if (add_long(vars, AB_ENV_BATCH_SIZE, res->batch) < 0 ||
	    add_long(vars, AB_ENV_GRAD_ACCUM, res->grad_accum) < 0 ||
	    add_long(vars, AB_ENV_GLOBAL_BATCH, ab_global_batch(res->global_batch, res->batch,
								res->grad_accum, pl->job.dp_width)) < 0 ||
	    (eval_batch && add_long(vars, AB_ENV_EVAL_BATCH_SIZE, eval_batch) < 0) ||
	    (res->total_bytes && add_long(vars, AB_ENV_DEVICE_BYTES, (long)res->total_bytes) < 0) ||
	    (report[0] && add_var(vars, AB_ENV_REPORT, report) < 0) ||
	    (req->config[0] && add_var(vars, AB_ENV_CONFIG, pl->config) < 0) ||
	    (res->total_bytes && add_watch(vars, res->fraction * (double)res->total_bytes, pl) < 0) ||
	    (res->fraction > 0 && add_xla_pool(vars, res->fraction) < 0))
		return -1;
	return 0;
}

/* Applies a decision: the variables first, then the config, so that a decision that cannot
 * reach the tasks leaves the config as it was (the job then runs with its original settings,
 * or not at all); the report of a decision not applied is taken back. */
int ab_apply(struct ab_plan *pl, const struct ab_result *decided, long eval_batch,
	     const char *json, struct ab_hold_answer *vars, char *err, size_t errlen)
{
	const struct ab_request *req = &pl->ctx->req;
	struct ab_result kept = *decided, *res = &kept;
	char report[PATH_MAX], wrote[2 * PATH_MAX] = "";
	char *marked = NULL;
	int rc = 0;

	if (!pl->job.global_batch)
		res->global_batch = 0; /* the report's product, not a batch the user keeps */
	if (pl->cached && (marked = ab_result_with_eval(json, 0, "hit")))
		json = marked; /* the entry was the probe's report: it said "miss" then */
	write_report(pl->job.jobid, pl->stepid, json, report, sizeof(report));
	if (export_vars(pl, res, eval_batch, report, vars) < 0)
		rc = ab_fail(err, errlen, EIO, "the decision could not be exported to the tasks "
					       "(a path with a control character?): nothing was changed");
	if (rc == 0 && req->config[0])
		rc = rewrite_config(pl, res, eval_batch, wrote, sizeof(wrote), err, errlen);
	if (rc < 0) {
		if (report[0])
			unlink(report);
		memset(vars, 0, sizeof(*vars));
		free(marked);
		return rc;
	}
	snprintf(pl->ctx->report, sizeof(pl->ctx->report), "%s", report);
	pl->ctx->jobid = pl->job.jobid, pl->ctx->stepid = pl->stepid;
	decision_line(pl, res, eval_batch, wrote);
	ab_srun_comment(pl->ctx, json);
	free(marked);
	return 0;
}

