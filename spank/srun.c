/* srun.c - local context: turn the options and AUTOBATCH= into the effective settings, run
 * the probe step, apply its decision (config, environment, report), and on failure follow
 * the site's on_failure policy.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "file_replace.h"
#include "error.h"
#include "plugin.h"

static int refuse(const char *err)
{
	slurm_error(AB_LOG_PREFIX "%s", err);
	ab_state.failed = true;
	return -1;
}

static void describe(void)
{
	char desc[AB_ERR_MAX * 4], *line, *save = NULL;

	if (ab_settings_describe(&ab_state.site, &ab_state.req, ab_state.fraction, desc,
				 sizeof(desc)) < 0)
		return;
	for (line = strtok_r(desc, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		slurm_verbose(AB_LOG_PREFIX "%s", line);
}

bool ab_is_probe_step(void)
{
	const char *guard = getenv(AB_GUARD_ENV);
	char parent[32];

	snprintf(parent, sizeof(parent), "%ld", (long)getppid());
	return guard && strcmp(guard, parent) == 0;
}

int ab_srun_post_opt(spank_t sp, int ac, char **av)
{
	char err[AB_ERR_MAX];

	(void)sp, (void)ac, (void)av;
	if (!ab_state.site_ok || ab_state.failed || ab_is_probe_step())
		return 0; /* already reported; nothing of ours may act */
	if (ab_request_from_env(&ab_state.req, getenv(AB_ENV_REQUEST), err, sizeof(err)) < 0)
		return refuse(err);
	if (ab_request_check(&ab_state.req, err, sizeof(err)) < 0)
		return refuse(err);
	if (!ab_state.req.enabled)
		return 0;
	/* before srun makes its own job, only an existing allocation has an id */
	ab_state.in_allocation = getenv("SLURM_JOB_ID") != NULL;
	return ab_request_resolve(false);
}

/* ---- exporting the decision -------------------------------------------------------- */

/* setenv(3): srun merges its environment into the launch after this hook (spank_setenv is
 * refused in local context). The SLURM_ twin survives --export=NONE; slurmstepd copies it
 * back (remote.c). */
static int export(const char *name, const char *value)
{
	char twin[128];

	if (ab_env_twin(name, twin, sizeof(twin)) < 0 || setenv(name, value, 1) < 0 ||
	    setenv(twin, value, 1) < 0) {
		slurm_error(AB_LOG_PREFIX "cannot export %s: %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

static int export_long(const char *name, long value)
{
	char text[32];

	snprintf(text, sizeof(text), "%ld", value);
	return export(name, text);
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

	snprintf(name, sizeof(name), "autobatch-%u.%u.json", jobid, stepid);
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

/* ---- the probe and its application ------------------------------------------------- */

struct plan {
	struct ab_probe_job job;
	struct ab_keys keys;
	char srun[PATH_MAX];
	char config[PATH_MAX];
	unsigned stepid;
	bool cached;
	const char *written[4]; /* the keys autobatch writes */
	struct ab_expect seen;  /* the config when the job was planned */
};

static int plan_job(spank_t sp, struct plan *pl, char *err, size_t errlen)
{
	const struct ab_request *req = &ab_state.req;
	struct ab_config *cfg;
	ssize_t n = readlink("/proc/self/exe", pl->srun, sizeof(pl->srun) - 1);
	uint32_t jobid = 0, stepid = 0, ntasks = 1;
	int rc;

	if (n <= 0)
		return ab_fail(err, errlen, errno, "cannot find srun itself: %s", strerror(errno));
	pl->srun[n] = '\0';
	if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_ARGV, &pl->job.argc, &pl->job.argv) != ESPANK_SUCCESS)
		return ab_fail(err, errlen, EINVAL, "Slurm did not say which job and command this is");
	spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks);
	pl->job = (struct ab_probe_job){.srun = pl->srun, .jobid = jobid, .ntasks = ntasks,
					.argc = pl->job.argc, .argv = pl->job.argv,
					.global_batch = req->global_batch};
	pl->stepid = stepid;
	ab_state.jobid = jobid;
	ab_state.stepid = stepid;
	pl->job.nodelist = getenv("SLURM_STEP_NODELIST") ? getenv("SLURM_STEP_NODELIST")
							 : getenv("SLURM_NODELIST");
	if (!req->config[0])
		return 0;
	/* the user's own file, read as the user (srun runs as the user) */
	if (!realpath(req->config, pl->config))
		return ab_fail(err, errlen, errno, "cannot read --autobatch-config=%s: %s",
			       req->config, strerror(errno));
	if ((rc = ab_config_load(pl->config, AB_FORMAT_AUTO, &cfg, err, errlen)) < 0)
		return rc;
	rc = ab_keys_find(cfg, req->preset, req->key, &pl->keys, err, errlen);
	/* what the decision is made for: apply refuses a file the user changed meanwhile */
	if (rc == 0) {
		struct ab_hash h;

		pl->written[0] = pl->keys.micro, pl->written[1] = pl->keys.accum;
		pl->written[2] = pl->keys.global, pl->written[3] = pl->keys.eval;
		ab_hash_init(&h);
		ab_hash_config(&h, cfg, pl->written, 4);
		pl->seen = (struct ab_expect){pl->written, 4, h.h};
	}
	ab_config_free(cfg);
	if (rc < 0)
		return rc;
	if (req->eval && !pl->keys.eval)
		return ab_fail(err, errlen, EINVAL, "--autobatch-eval: %s has no eval batch key "
						    "the preset knows",
			       req->config);
	pl->job.config = pl->config;
	pl->job.key = pl->keys.micro;
	if (!pl->job.global_batch)
		pl->job.global_batch = pl->keys.file_global;
	return 0;
}

static void decision_line(const struct plan *pl, const struct ab_result *res, long eval_batch,
			  const char *wrote)
{
	char line[3 * PATH_MAX];
	size_t len = 0;

	ab_append(line, sizeof(line), &len, "%s batch %ld", pl->cached ? "cached decision:" : "chose",
		  res->batch);
	if (res->global_batch)
		ab_append(line, sizeof(line), &len, " (gradient accumulation %ld, global %ld)",
			  res->grad_accum, res->global_batch);
	if (eval_batch)
		ab_append(line, sizeof(line), &len, ", eval batch %ld", eval_batch);
	if (pl->cached)
		ab_append(line, sizeof(line), &len, " (probed earlier in %zu trials; "
						    "--autobatch-refresh probes again)",
			  res->trials);
	else
		ab_append(line, sizeof(line), &len, " in %zu trials, %.0f s", res->trials,
			  res->elapsed_s);
	slurm_spank_log(AB_LOG_PREFIX "%s%s", line, wrote);
}

static int apply(struct plan *pl, const struct ab_result *res, long eval_batch,
		 const char *json, char *err, size_t errlen)
{
	const struct ab_request *req = &ab_state.req;
	char values[4][32], note[AB_ERR_MAX], report[PATH_MAX];
	char wrote[2 * PATH_MAX] = "";
	char *marked = NULL;
	struct ab_edit edits[4];
	size_t n;
	int rc;

	if (req->config[0]) {
		char real[PATH_MAX];
		struct stat st;

		/* by the name the user gave (srun's cwd is theirs), for messages they know; the
		 * backup lies beside the file really rewritten (a symlink's target) */
		n = ab_plan_edits(&pl->keys, res, eval_batch, edits, values);
		if ((rc = ab_config_set_file_expect(req->config, AB_FORMAT_AUTO, edits, n, -1,
						    &pl->seen, note, sizeof(note), err,
						    errlen)) < 0)
			return rc;
		if (rc == 0)
			ab_format(wrote, sizeof(wrote), "; %s already says so", req->config);
		else
			ab_format(wrote, sizeof(wrote), "; wrote %s (backup %s.autobatch~)%s%s",
				  req->config,
				  lstat(req->config, &st) == 0 && S_ISLNK(st.st_mode) &&
						  realpath(req->config, real)
					  ? real
					  : req->config,
				  note[0] ? "; " : "", note);
	}
	if (pl->cached && (marked = ab_result_with_eval(json, 0, "hit")))
		json = marked; /* the entry was the probe's report: it said "miss" then */
	write_report(pl->job.jobid, pl->stepid, json, report, sizeof(report));
	free(marked);
	if (export_long(AB_ENV_BATCH_SIZE, res->batch) < 0 ||
	    export_long(AB_ENV_GRAD_ACCUM, res->grad_accum) < 0 ||
	    export_long(AB_ENV_GLOBAL_BATCH, ab_global_batch(res->global_batch, res->batch,
							      res->grad_accum, pl->job.ntasks)) < 0 ||
	    (eval_batch && export_long(AB_ENV_EVAL_BATCH_SIZE, eval_batch) < 0) ||
	    (res->total_bytes && export_long(AB_ENV_DEVICE_BYTES, (long)res->total_bytes) < 0) ||
	    (report[0] && export(AB_ENV_REPORT, report) < 0) ||
	    (req->config[0] && export(AB_ENV_CONFIG, pl->config) < 0))
		return ab_fail(err, errlen, EIO, "the decision could not be exported to the tasks");
	decision_line(pl, res, eval_batch, wrote);
	return 0;
}

/* ---- the cache --------------------------------------------------------------------- */

/* Everything that shapes the decision and that srun knows before any step runs. */
static void cache_key(const struct plan *pl, struct ab_hash *h)
{
	const struct ab_request *req = &ab_state.req;
	char num[64];

	ab_hash_init(h);
	ab_hash_str(h, PACKAGE_VERSION);
	ab_hash_str(h, ab_mode_name(req->mode));
	ab_hash_str(h, ab_objective_name(req->objective));
	snprintf(num, sizeof(num), "%.6g %ld %u %d", ab_state.fraction, pl->job.global_batch,
		 pl->job.ntasks, req->eval);
	ab_hash_str(h, num);
	ab_hash_str(h, ab_state.site.probe);
	ab_hash_str(h, ab_state.site.probe_args);
	ab_hash_add(h, &ab_state.site.comm_reserve, sizeof(ab_state.site.comm_reserve));
	ab_hash_str(h, getenv("SLURM_JOB_PARTITION"));
	ab_hash_str(h, pl->job.nodelist); /* the node (and so its GPU type) */
	ab_hash_str(h, req->trial_command);
	for (int i = 0; i < pl->job.argc; i++)
		ab_hash_str(h, pl->job.argv[i]);
	ab_hash_str(h, pl->keys.micro);
	/* the config less its batch values, as plan_job fingerprinted it: no second read */
	if (req->config[0])
		ab_hash_add(h, &pl->seen.fingerprint, sizeof(pl->seen.fingerprint));
}

/* The user's cache, open; c->fd -1 when there is none. An unsafe site directory is the
 * admin's to fix: said on srun's stderr, and the job goes on without the cache. */
static void cache_open(struct ab_cache *c)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char dir[AB_PATH_MAX], err[AB_ERR_MAX];
	int rc = -ENOENT;

	c->fd = -1;
	if (!ab_state.site.cache)
		return;
	if (ab_state.site.cache_dir[0]) { /* a site directory, one subdirectory per user */
		if ((rc = ab_cache_open_site(ab_state.site.cache_dir, c, err, sizeof(err))) < 0)
			slurm_error(AB_LOG_PREFIX "%s; deciding without the cache", err);
		return;
	}
	if (xdg && *xdg == '/' && (mkdir(xdg, 0700) == 0 || errno == EEXIST) &&
	    ab_format(dir, sizeof(dir), "%s/autobatch", xdg) == 0)
		rc = ab_cache_open_dir(dir, c, err, sizeof(err));
	else if (home && *home == '/' && ab_format(dir, sizeof(dir), "%s/.cache", home) == 0 &&
		 (mkdir(dir, 0700) == 0 || errno == EEXIST) &&
		 ab_format(dir, sizeof(dir), "%s/.cache/autobatch", home) == 0)
		rc = ab_cache_open_dir(dir, c, err, sizeof(err));
	else
		snprintf(err, sizeof(err), "neither XDG_CACHE_HOME nor HOME is an absolute path");
	if (rc < 0)
		slurm_verbose(AB_LOG_PREFIX "no cache: %s", err);
}

/* 0 and *json on a hit; -ENOENT on a miss (name then names where the entry goes). */
static int cache_lookup(const struct plan *pl, const struct ab_cache *c, char *name,
			size_t namelen, struct ab_result *res, char **json)
{
	char err[AB_ERR_MAX];
	struct ab_hash h;
	int rc;

	name[0] = '\0';
	if (c->fd < 0)
		return -ENOENT;
	cache_key(pl, &h);
	ab_cache_entry_name(&h, name, namelen);
	if (ab_state.req.refresh || (rc = ab_cache_load(c, name, json)) == -ENOENT)
		return -ENOENT;
	if (rc == 0 && ab_result_parse(*json, strlen(*json), res, err, sizeof(err)) == 0 && res->ok)
		return 0;
	slurm_verbose(AB_LOG_PREFIX "ignoring the corrupt cache entry %s/%s; it is replaced",
		      c->dir, name);
	if (rc == 0)
		free(*json);
	*json = NULL;
	return -ENOENT;
}

static void cache_store(const struct ab_cache *c, const char *name, const char *json,
			long eval_batch)
{
	char err[AB_ERR_MAX], *entry;

	if (c->fd < 0 || !name[0] || !(entry = ab_result_with_eval(json, eval_batch, NULL)))
		return;
	if (ab_cache_store(c, name, entry, err, sizeof(err)) < 0)
		slurm_verbose(AB_LOG_PREFIX "%s", err);
	free(entry);
}

static int probe(struct plan *pl, struct ab_result *res, long *eval_batch, char **json,
		 char *err, size_t errlen)
{
	struct ab_result eval = {0};
	int rc;

	if ((rc = ab_probe_run(&pl->job, "train", res, json, err, errlen)) < 0)
		return rc;
	if (ab_state.req.eval) {
		struct ab_probe_job ej = pl->job;

		ej.key = pl->keys.eval;
		ej.global_batch = 0;
		if ((rc = ab_probe_run(&ej, "eval", &eval, NULL, err, errlen)) < 0)
			return rc;
	}
	*eval_batch = eval.batch;
	return 0;
}

static int probe_and_apply(spank_t sp, char *err, size_t errlen)
{
	struct plan pl;
	struct ab_result res;
	struct ab_cache cache;
	char *json = NULL, entry[AB_CACHE_NAME_MAX];
	long eval_batch = 0;
	int rc, lock = -1;
	bool hit;

	memset(&pl, 0, sizeof(pl));
	if ((rc = plan_job(sp, &pl, err, errlen)) < 0)
		return rc;
	cache_open(&cache);
	hit = cache_lookup(&pl, &cache, entry, sizeof(entry), &res, &json) == 0;
	if (!hit && entry[0]) {
		/* identical sruns started together probe once: the others wait, then hit */
		lock = ab_cache_lock(&cache, entry, ab_state.site.probe_timeout + 60.0);
		hit = cache_lookup(&pl, &cache, entry, sizeof(entry), &res, &json) == 0;
	}
	if (hit)
		eval_batch = res.eval_batch;
	else if ((rc = probe(&pl, &res, &eval_batch, &json, err, errlen)) < 0)
		goto done;
	if (!pl.job.global_batch)
		res.global_batch = 0; /* the report's product, not a batch the user keeps */
	pl.cached = hit;
	if ((rc = apply(&pl, &res, eval_batch, json, err, errlen)) == 0 && !hit)
		cache_store(&cache, entry, json, eval_batch);
done:
	ab_cache_unlock(lock);
	ab_cache_close(&cache);
	free(json);
	return rc;
}

/* Refuses the launch. Slurm ignores an optional plugin's refusal, and 22.05 leaks a step
 * refused inside an existing allocation (it stays RUNNING and blocks later sruns), so the
 * step's tasks are also told to end before running the command (remote.c); inside an
 * allocation that is the only refusal, which lets the step complete normally. */
static int refuse_launch(void)
{
	char mark[64];

	snprintf(mark, sizeof(mark), "%u.%u", ab_state.jobid, ab_state.stepid);
	setenv(AB_ABORT_ENV, mark, 1);
	return ab_state.in_allocation ? 0 : -1;
}

static int follow_policy(const char *err, int rc)
{
	if (rc == -EINTR) {
		slurm_error(AB_LOG_PREFIX "%s; nothing was changed", err);
		/* srun aborts on a second interrupt within a second: give it, as the user's
		 * one Ctrl-C was meant for the whole srun */
		kill(getpid(), SIGINT);
		return refuse_launch();
	}
	if (ab_state.site.on_failure == AB_ON_FAILURE_ABORT) {
		slurm_error(AB_LOG_PREFIX "%s; the step is not launched (on_failure=abort)", err);
		return refuse_launch();
	}
	slurm_error(AB_LOG_PREFIX "%s; launching with the original settings "
				  "(on_failure=continue)",
		    err);
	return 0;
}

int ab_srun_user_init(spank_t sp, int ac, char **av)
{
	char value[32], err[2 * AB_ERR_MAX];
	int rc;

	(void)ac, (void)av;
	if (!ab_state.site_ok || ab_state.failed || !ab_state.req.enabled || ab_is_probe_step())
		return 0;
	describe(); /* here, not earlier: srun applies -v only after init_post_opt */
	snprintf(value, sizeof(value), "%g", ab_state.fraction);
	if (export(AB_ENV_FRACTION, value) < 0)
		return -1;
	if ((rc = probe_and_apply(sp, err, sizeof(err))) < 0)
		return follow_policy(err, rc);
	return 0;
}
