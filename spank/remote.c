/* remote.c - slurmstepd (root): copies the decision's SLURM_AUTOBATCH_* twins back to
 * AUTOBATCH_* (they survive --export=NONE), with their twins for a container named in the
 * command (protocol.h), and, with enforce=on, exports the memory caps.
 * It reads only the job's environment and options: no file is opened, nothing is run. In
 * each task (as the user, before the command), a step launched before its decision waits
 * for srun's answer on the hold channel, a decided step's task starts its watch, and the
 * trials' container cleanup gets slurmstepd's own PATH (the site's, not a secret).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remote.h"

#include "error.h"
#include "hold.h"
#include "number.h"
#include "subprocess.h"
#include "cache.h"

static const char *const decision_vars[] = {
	AB_ENV_BATCH_SIZE, AB_ENV_GRAD_ACCUM, AB_ENV_GLOBAL_BATCH, AB_ENV_EVAL_BATCH_SIZE,
	AB_ENV_FRACTION,
};

/* Hostile input: only short decimal numbers are copied. */
static bool plain_number(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 20)
		return false;
	for (; *s; s++)
		if (!strchr("0123456789.", *s))
			return false;
	return true;
}

static bool decision_var(const char *name)
{
	for (size_t i = 0; i < sizeof(decision_vars) / sizeof(decision_vars[0]); i++)
		if (!strcmp(name, decision_vars[i]))
			return true;
	return false;
}

/* Whether the task's environment has NAME, not empty (srun --export, the job's own). */
static bool task_has(spank_t sp, const char *name)
{
	char value[64];
	spank_err_t rc = spank_getenv(sp, name, value, sizeof(value));

	return rc == ESPANK_NOSPACE || (rc == ESPANK_SUCCESS && value[0]);
}

/* XLA's pool (protocol.h): whether NAME is one of the names a decided step's tasks may get */
static bool xla_pool_var(const char *name)
{
	static const char *const all[] = AB_XLA_RUN_NAMES;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(name, all[i]))
			return true;
	return false;
}

/* Whether the task's own environment names XLA's cap (srun --export): it then decides both
 * of the cap's names; preallocation stays off, as in the trials, unless the task names it. */
static bool xla_capped(spank_t sp)
{
	static const char *const caps[] = AB_XLA_FRACTION_NAMES;

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		if (task_has(sp, caps[i]))
			return true;
	return false;
}

/* A command that runs its program in a container (apptainer exec --cleanenv, which keeps
 * only APPTAINERENV_ and SINGULARITYENV_ variables) gets the decision through their twins;
 * without overwrite, a twin already there (the user's) is kept. */
static void container_twins(spank_t sp, const char *name, const char *value, int overwrite)
{
	char twin[96];

	for (int i = 0; i < AB_CONTAINER_RUNTIMES; i++)
		if (ab_env_container_twin(i, name, twin, sizeof(twin)) == 0)
			spank_setenv(sp, twin, value, overwrite);
}

/* A step decided before its launch (a cache hit): the decision's variables back where
 * --export=NONE dropped them, and their container twins; XLA's pool's twins too (srun's
 * environment gave the tasks the pool; a twin the user set is kept). */
static void reexport(spank_t sp)
{
	static const char *const pool[] = AB_XLA_RUN_NAMES;
	char twin[64], value[64];
	bool decided = false;

	for (size_t i = 0; i < sizeof(decision_vars) / sizeof(decision_vars[0]); i++) {
		if (ab_env_twin(decision_vars[i], twin, sizeof(twin)) < 0 ||
		    spank_getenv(sp, twin, value, sizeof(value)) != ESPANK_SUCCESS ||
		    !plain_number(value))
			continue; /* no decision */
		decided = true;
		/* not overwritten where present: --export=NONE did not drop it */
		spank_setenv(sp, decision_vars[i], value, 0);
		container_twins(sp, decision_vars[i], value, 1);
	}
	/* a fraction, or XLA's preallocation switch (JAX reads true and false in any case):
	 * nothing else is copied in root's context */
	for (size_t i = 0; decided && i < sizeof(pool) / sizeof(pool[0]); i++)
		if (spank_getenv(sp, pool[i], value, sizeof(value)) == ESPANK_SUCCESS &&
		    (plain_number(value) || !strcasecmp(value, "true") ||
		     !strcasecmp(value, "false")))
			container_twins(sp, pool[i], value, 0);
}

/* A cap of enforce=on, under its name and its container twins: Apptainer gives its
 * APPTAINERENV_ copy precedence, so a copy the user set would lift the cap. */
static void set_cap(spank_t sp, const char *name, const char *value)
{
	spank_setenv(sp, name, value, 1);
	container_twins(sp, name, value, 1);
}

/* Under MPS the driver enforces a per-client limit: fraction x the GPU's memory, for each
 * GPU the task sees. The memory is the site's device_memory= only: a size from the job's
 * environment would let a user set their own cap. Set whether or not CUDA_MPS_PIPE_DIRECTORY
 * is (MPS has a default pipe directory); without MPS the driver ignores it. */
static void mps_limit(spank_t sp, const struct ab_site *site, double fraction)
{
	char gpus[256], limit[1024];
	unsigned long long mib = (unsigned long long)(fraction * (double)site->device_memory /
						      1048576.0);
	size_t len = 0, n = 0;

	if (!site->device_memory) {
		slurm_info(AB_LOG_PREFIX "enforce=on exports no MPS memory cap: plugstack.conf "
					 "sets no device_memory=");
		return;
	}
	if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", gpus, sizeof(gpus)) != ESPANK_SUCCESS)
		snprintf(gpus, sizeof(gpus), "0");
	for (char *p = gpus; *p; n++) {
		ab_append(limit, sizeof(limit), &len, "%s%zu=%lluM", n ? "," : "", n, mib);
		p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p);
	}
	if (len)
		set_cap(sp, AB_ENV_MPS_LIMIT, limit);
	slurm_info(AB_LOG_PREFIX "enforce=on: fraction %g, %s=%s", fraction, AB_ENV_MPS_LIMIT,
		   len ? limit : "(none)");
}

/* The cap comes from the option and the site policy, resolved here in slurmstepd's own
 * context by the rule srun used: a variable the user sets cannot raise it. */
static void enforce(spank_t sp, const struct ab_site *site)
{
	struct spank_option opt = {.name = (char *)ab_options[AB_OPT_AUTOBATCH].name,
				   .has_arg = ab_options[AB_OPT_AUTOBATCH].has_arg};
	struct ab_request req;
	struct ab_effective eff;
	char *arg = NULL, err[AB_ERR_MAX], value[32];
	double fraction;
	int rc;

	if (spank_option_getopt(sp, &opt, &arg) != ESPANK_SUCCESS)
		return; /* not an --autobatch step */
	ab_request_init(&req);
	rc = ab_request_set(&req, AB_OPT_AUTOBATCH, ab_option_value(arg), err, sizeof(err));
	if (rc == 0 && req.off)
		return; /* --autobatch=off: not autobatch's step, so no cap (its fraction is 0) */
	if (rc < 0 || ab_settings_resolve(site, &req, &eff, err, sizeof(err)) < 0)
		fraction = site->max_fraction; /* srun refused it already; be strict */
	else
		fraction = eff.fraction;
	snprintf(value, sizeof(value), "%g", fraction);
	set_cap(sp, AB_ENV_MEM_FRACTION, value);
	set_cap(sp, AB_ENV_XLA_MEM_FRACTION, value);
	set_cap(sp, AB_ENV_XLA_CLIENT_MEM_FRACTION, value);
	/* the pool grows to the cap as the trials' did, unless the user chose: one taken whole at
	 * the cap reads over the limit by the CUDA context in the closed loop's watch */
	if (!task_has(sp, AB_ENV_XLA_PREALLOCATE))
		set_cap(sp, AB_ENV_XLA_PREALLOCATE, "false");
	mps_limit(sp, site, fraction);
}

int ab_remote_user_init(spank_t sp, const struct ab_ctx *c)
{
	if (!c->site_ok)
		return 0; /* errors from remote hooks would only fail jobs (Slurm bug 7573) */
	reexport(sp);
	if (c->site.enforce)
		enforce(sp, &c->site);
	return 0;
}

static void __attribute__((noreturn)) not_started(const char *why)
{
	fprintf(stderr, "autobatch: task not started: %s\n", why);
	fflush(stderr);
	_exit(1);
}

/* One line per node for what went wrong on it, one for the whole step for srun's verdict. */
static bool first_task(spank_t sp, bool of_step)
{
	uint32_t id = 0;

	return spank_get_item(sp, of_step ? S_TASK_GLOBAL_ID : S_TASK_ID, &id) != ESPANK_SUCCESS ||
	       id == 0;
}

/* SLURM_AUTOBATCH_HOLD: srun launched this step before deciding and answers when it has
 * (hold.h). The wait is the task's own, as the user: nothing here runs as root. */
static void hold(spank_t sp, const char *ticket)
{
	char host[256], err[AB_ERR_MAX], node[64] = "", why[2 * AB_ERR_MAX];
	struct ab_hold_ticket t;
	struct ab_hold_answer a;
	bool capped;
	int rc;

	spank_unsetenv(sp, AB_HOLD_ENV); /* the command and its own sruns never see it */
	if (spank_getenv(sp, "SLURM_SRUN_COMM_HOST", host, sizeof(host)) != ESPANK_SUCCESS &&
	    spank_getenv(sp, "SLURM_LAUNCH_NODE_IPADDR", host, sizeof(host)) != ESPANK_SUCCESS)
		snprintf(host, sizeof(host), "localhost");
	rc = ab_hold_ticket_parse(ticket, &t, err, sizeof(err));
	if (rc == 0 && spank_get_item(sp, S_TASK_GLOBAL_ID, &t.task) != ESPANK_SUCCESS)
		rc = ab_fail(err, sizeof(err), EINVAL, "Slurm did not say which task this is");
	/* srun names the node of a task that went away while it probed */
	if (rc == 0 && spank_getenv(sp, "SLURMD_NODENAME", t.node, sizeof(t.node)) != ESPANK_SUCCESS)
		t.node[0] = '\0';
	if (rc == 0)
		rc = ab_hold_wait(host, &t, &a, err, sizeof(err));
	if (rc < 0) {
		if (!first_task(sp, false))
			_exit(1);
		gethostname(node, sizeof(node) - 1);
		snprintf(why, sizeof(why), "on %s: %s", node, err);
		not_started(why);
	}
	if (a.verdict == AB_HOLD_ABORT) {
		if (!first_task(sp, true))
			_exit(1);
		not_started(a.message);
	}
	/* XLA's pool: the task's own cap, read before the answer's is set, decides both of the
	 * cap's names; a name of the task's own (each comes once in the answer) decides itself */
	capped = a.verdict == AB_HOLD_DECIDED && xla_capped(sp);
	for (size_t i = 0; a.verdict == AB_HOLD_DECIDED && i < a.nvars; i++) {
		bool pool = xla_pool_var(a.vars[i].name);
		bool cap = pool && strcmp(a.vars[i].name, AB_ENV_XLA_PREALLOCATE) != 0;

		if (pool && ((capped && cap) || task_has(sp, a.vars[i].name)))
			continue;
		spank_setenv(sp, a.vars[i].name, a.vars[i].value, 1);
		if (decision_var(a.vars[i].name) || pool)
			container_twins(sp, a.vars[i].name, a.vars[i].value, 1);
	}
}

/* "LIMIT:ENTRY:DIR" or "LIMIT:" (hostile input, though only the user's own watch acts on
 * it, as the user): LIMIT digits, ENTRY a cache entry's name (16 hex digits and .json), DIR
 * an absolute path. */
static bool watch_spec(const char *spec, char *limit, size_t limitlen, char *entry,
		       size_t entrylen, const char **dir)
{
	size_t digits = strspn(spec, "0123456789");
	const char *e = spec + digits + 1;

	*dir = "";
	entry[0] = '\0';
	if (digits == 0 || digits >= limitlen || spec[digits] != ':')
		return false;
	memcpy(limit, spec, digits);
	limit[digits] = '\0';
	if (!*e)
		return true;
	if (strspn(e, "0123456789abcdef") != 16 || strncmp(e + 16, ".json:/", 7) != 0 ||
	    entrylen < 22)
		return false;
	memcpy(entry, e, 21);
	entry[21] = '\0';
	*dir = e + 22;
	return true;
}

/* In the watch's process: its standard error the task's (the job's output), the cache on
 * descriptor 3, a session of its own (the step's end signals the task's process group). */
static void __attribute__((noreturn)) exec_watch(const struct ab_site *site, int cache_fd,
						 char **argv, char **envp)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
	    (cache_fd >= 0 && cache_fd != 3 && dup2(cache_fd, 3) < 0) ||
	    (cache_fd == 3 && fcntl(3, F_SETFD, 0) < 0)) /* dup2 onto itself keeps CLOEXEC */
		_exit(127);
	ab_close_from(cache_fd >= 0 ? 4 : 3);
	setsid();
	execve(site->probe, argv, envp); /* not slurmstepd's own environment */
	_exit(127);
}

/* The closed loop (AB_ENV_WATCH): the site's probe follows this task to its end and says
 * when it went over the limit its decision promised (autobatch-probe watch). It is no child
 * of the task (the command's own wait() must not meet it): started through a child that
 * exits at once. The variables are removed, so the command's own sruns start none. */
static void watch(spank_t sp, const struct ab_ctx *c)
{
	char spec[AB_HOLD_VALUE_MAX], twin[64], limit[24], entry[AB_CACHE_NAME_MAX], batch[24];
	char report[AB_HOLD_VALUE_MAX];
	char pid[24], task[24], err[AB_ERR_MAX], node[96] = "SLURMD_NODENAME=";
	char *envp[] = {"PATH=/usr/bin:/bin", node, NULL};
	const char *dir;
	char *argv[20] = {"autobatch-probe", "watch", "--pid", pid, "--limit", limit, "--batch",
			  batch, "--task", task};
	struct ab_cache cache = {.fd = -1};
	uint32_t id = 0;
	int n = 10;
	long whole;
	pid_t child;

	if (ab_env_twin(AB_ENV_WATCH, twin, sizeof(twin)) < 0 ||
	    (spank_getenv(sp, AB_ENV_WATCH, spec, sizeof(spec)) != ESPANK_SUCCESS &&
	     spank_getenv(sp, twin, spec, sizeof(spec)) != ESPANK_SUCCESS))
		return;
	spank_unsetenv(sp, AB_ENV_WATCH);
	spank_unsetenv(sp, twin);
	if (!c->site_ok || !watch_spec(spec, limit, sizeof(limit), entry, sizeof(entry), &dir) ||
	    spank_getenv(sp, AB_ENV_BATCH_SIZE, batch, sizeof(batch)) != ESPANK_SUCCESS ||
	    ab_parse_whole(batch, 1, LONG_MAX, &whole) < 0 ||
	    ab_probe_args_sim(c->site.probe_args))
		return; /* a simulated device has no memory of the run's to measure */
	spank_get_item(sp, S_TASK_GLOBAL_ID, &id);
	if (spank_getenv(sp, "SLURMD_NODENAME", node + 16, sizeof(node) - 16) != ESPANK_SUCCESS)
		node[16] = '\0';
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	snprintf(task, sizeof(task), "%u", id);
	if (ab_probe_args_gpu(c->site.probe_args))
		argv[n++] = "--gpu";
	/* the report srun wrote (the task's own variable): the watch, as the user, adds the
	 * run's peak to it */
	if (spank_getenv(sp, AB_ENV_REPORT, report, sizeof(report)) == ESPANK_SUCCESS &&
	    report[0] == '/')
		argv[n++] = "--report", argv[n++] = report;
	/* srun's cache, by the path srun opened: this process's own environment is
	 * slurmstepd's, not the job's */
	if (entry[0] && ab_cache_open_dir(dir, &cache, err, sizeof(err)) == 0) {
		argv[n++] = "--entry", argv[n++] = entry;
		argv[n++] = "--cache-fd", argv[n++] = "3";
	}
	if ((child = fork()) == 0) {
		if (fork() == 0)
			exec_watch(&c->site, cache.fd, argv, envp);
		_exit(0);
	}
	if (child > 0)
		waitpid(child, NULL, 0);
	if (cache.fd >= 0)
		ab_cache_close(&cache);
}

/* The step that removes the trials' container after a probe (spank/probe_args.c) runs enroot
 * as pyxis does: from slurmstepd's own PATH (this process's environment, the site's), which
 * the job's may lack. Only a PATH is handed to the user's own task; nothing runs here. */
static void node_path(spank_t sp)
{
	const char *path = getenv("PATH");
	char mark[8];

	if (path && spank_getenv(sp, AB_ENV_CLEANUP, mark, sizeof(mark)) == ESPANK_SUCCESS &&
	    !strcmp(mark, "1"))
		spank_setenv(sp, AB_ENV_NODE_PATH, path, 1);
}

/* In the task, as the user, before the command: a held launch waits for its decision; a
 * refused launch ends here; a decided one starts its watch. */
int ab_remote_task_init(spank_t sp, const struct ab_ctx *c)
{
	uint32_t job = 0, step = 0;
	char mark[64], mine[64], ticket[256];

	node_path(sp);
	if (spank_getenv(sp, AB_HOLD_ENV, ticket, sizeof(ticket)) == ESPANK_SUCCESS)
		hold(sp, ticket);
	watch(sp, c);
	if (spank_getenv(sp, AB_ABORT_ENV, mark, sizeof(mark)) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
		return 0;
	snprintf(mine, sizeof(mine), "%u.%u", job, step);
	if (strcmp(mark, mine) != 0)
		return 0; /* not this step's verdict */
	fprintf(stderr, "autobatch: task not started: probing failed or the request was refused, "
			"and on_failure=abort (or it was interrupted)\n");
	fflush(stderr);
	_exit(1);
}
