/* ranks_step.c - a trial's ranks as a Slurm step of this job (autobatch-probe ranks
 * --nodes): srun over the nodes, each task wrapped by `autobatch-probe task`, its lines read.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "argv.h"
#include "commands.h"
#include "error.h"
#include "gpu_models.h"
#include "group_memory.h"
#include "hostlist.h"
#include "number.h"
#include "nvml.h"
#include "protocol.h"
#include "step_gpus.h"
#include "subprocess.h"
#include "trial_report.h"
#include "ranks.h"

/* Whether srun ended within polls. */
static bool srun_ends(struct ranks *rs, int polls)
{
	for (int t = 0; t < polls; t++) {
		if (waitpid(rs->srun.pid, &rs->srun.status, WNOHANG) == rs->srun.pid)
			return rs->srun_ended = true;
		nanosleep(&(struct timespec){0, POLL_NS}, NULL);
	}
	return false;
}

/* The trial step ended: the end of the tasks' standard input stops each (it ends its command,
 * removes its files, exits), which a cancellation's SIGKILL would not let it do; then srun's
 * --quit-on-interrupt makes one SIGINT cancel the step on every node; SIGKILL (its tasks then
 * end with the step's cancellation) when srun does not end in time. */
void ranks_step_stop(struct ranks *rs)
{
	if (rs->srun_in >= 0)
		close(rs->srun_in), rs->srun_in = -1;
	if (rs->srun.pid <= 0 || rs->srun_ended || srun_ends(rs, STOP_EOF_POLLS))
		return;
	kill(rs->srun.pid, SIGINT);
	if (srun_ends(rs, STOP_GRACE_POLLS))
		return;
	kill(-rs->srun.pid, SIGKILL);
	waitpid(rs->srun.pid, &rs->srun.status, 0);
	rs->srun_ended = true;
}

const char *ranks_env_id(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strlen(v) < 16 && !v[strspn(v, "0123456789")] ? v : "0";
}

/* srun --overlap over the step's nodes, each task `autobatch-probe task` around the command.
 * --label marks each task's lines with its rank; --input=all gives every task our pipe, whose
 * end is our stop (stop_step); --kill-on-bad-exit ends every task when one fails (or goes
 * over: the task exits 3) and has not seen that stop; --quit-on-interrupt makes our one SIGINT
 * cancel it. */
static int step_argv(const struct ranks *rs, struct ranks_container *c, struct ab_argv *a,
		     char *err, size_t errlen)
{
	char *self = realpath("/proc/self/exe", NULL);
	int rc;

	if (!self)
		return ab_fail(err, errlen, errno, "cannot find this program: %s", strerror(errno));
	ab_argv_add(a, "srun");
	ab_argv_add(a, "--overlap");
	ab_argv_addf(a, "--nodelist=%s", rs->nodes);
	ab_argv_addf(a, "--ntasks=%d", rs->n);
	if (rs->per_node)
		ab_argv_addf(a, "--ntasks-per-node=%ld", rs->per_node);
	ab_argv_add(a, "--kill-on-bad-exit=1");
	ab_argv_add(a, "--input=all");
	ab_argv_add(a, "--label");
	ab_argv_add(a, "--quit-on-interrupt");
	ab_argv_add(a, "--mem=0");
	ab_argv_add(a, "--export=ALL");
	/* after the srun that probes (the guard its probe step carries), so that it can cancel
	 * those its cancelled probe step left (spank/probe_step.c) */
	ab_argv_addf(a, "--job-name=autobatch-trial.%s", ranks_env_id(AB_GUARD_ENV));
	for (int i = 0; i < rs->nsrun_options; i++) /* the GPUs of the real step's tasks */
		ab_argv_add(a, rs->srun_option[i]);
	if ((rc = ranks_container_args(a, c, err, errlen)) < 0)
		return free(self), rc;
	ab_argv_add(a, "--");
	if (c->on) /* the same program, in the user's container */
		ranks_container_command(a, c);
	else /* this program, `autobatch-probe task` around the command */
		ab_argv_addf(a, "%s", self);
	free(self);
	ab_argv_add(a, "task");
	if (rs->gpu)
		ab_argv_add(a, "--gpu");
	if (rs->capacity) {
		ab_argv_add(a, "--capacity");
		ab_argv_addf(a, "%llu", (unsigned long long)rs->capacity);
	}
	if (rs->node_memory) { /* each task holds itself to its node's */
		ab_argv_add(a, "--node-memory");
		ab_argv_add(a, rs->node_memory);
	}
	ab_argv_add(a, "--stop-on-eof");
	ab_argv_add(a, "--");
	for (size_t n = 0; rs->argv[n]; n++)
		ab_argv_add(a, rs->argv[n]);
	return ab_argv_done(a, "the trial step's command line", err, errlen);
}

struct srun_start {
	char **argv;
	int in, out; /* the pipes' read and write ends */
	const struct ranks_container *container;
};

/* The probe step's own description of the allocation, which srun would take for the job's:
 * the probe step holds one node, and SLURM_JOB_NODELIST there names that node alone. srun
 * asks slurmctld for the job (SLURM_JOB_ID) instead. */
static bool describes_probe_step(const char *entry)
{
	static const char *const names[] = {"SLURM_JOB_NODELIST=", "SLURM_NODELIST=",
					    "SLURM_JOB_NUM_NODES=", "SLURM_TASKS_PER_NODE=",
					    "SLURM_JOB_CPUS_PER_NODE", "SLURM_STEP_"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strncmp(entry, names[i], strlen(names[i])))
			return true;
	return false;
}

/* In the child: srun with an environment that cannot reshape its step (the probe step's own
 * task count and the like), its plugin kept out by the guard naming us, its parent. */
static void srun_body(void *arg)
{
	const struct srun_start *s = arg;
	extern char **environ;
	char guard[64];
	size_t k = 0;

	for (size_t i = 0; environ[i]; i++)
		if (!ab_env_reshapes_srun(environ[i]) && !describes_probe_step(environ[i]))
			environ[k++] = environ[i];
	environ[k] = NULL;
	ranks_container_environ(s->container);
	unsetenv(AB_ENV_REQUEST);
	snprintf(guard, sizeof(guard), "%ld", (long)getppid());
	setenv(AB_GUARD_ENV, guard, 1);
	if (dup2(s->in, 0) < 0 || dup2(s->out, 1) < 0)
		_exit(127);
	execvp(s->argv[0], s->argv);
	dprintf(2, "autobatch-probe ranks: cannot run srun for the trial step: %s\n",
		strerror(errno));
	_exit(127);
}

int ranks_step_start(struct ranks *rs)
{
	struct ab_argv a = {0};
	static struct ranks_container c; /* once per trial: this process runs one */
	int p[2] = {-1, -1}, in[2] = {-1, -1}, rc = -1;
	char err[256];

	if (step_argv(rs, &c, &a, err, sizeof(err)) < 0) {
		fprintf(stderr, "autobatch-probe ranks: %s\n", err);
		goto out;
	}
	if (pipe2(p, O_CLOEXEC) < 0 || pipe2(in, O_CLOEXEC) < 0) {
		fprintf(stderr, "autobatch-probe ranks: cannot set up the trial step: %s\n",
			strerror(errno));
		goto out;
	}
	/* srun_body's dup2 clears the ends' close-on-exec in the child only */
	if (ab_proc_start(&rs->srun, AB_PROC_GROUP | AB_PROC_PDEATHSIG, srun_body,
			  &(struct srun_start){a.v, in[0], p[1], &c}, err, sizeof(err)) < 0) {
		fprintf(stderr, "autobatch-probe ranks: %s\n", err);
		goto out;
	}
	rs->srun_out = p[0], p[0] = -1;
	rs->srun_in = in[1], in[1] = -1;
	fcntl(rs->srun_out, F_SETFL, O_NONBLOCK);
	rc = 0;
out:
	for (int i = 0; i < 2; i++) {
		if (p[i] >= 0)
			close(p[i]);
		if (in[i] >= 0)
			close(in[i]);
	}
	ab_argv_free(&a);
	return rc;
}

/* One task line, "R: @autobatch-task ...": into rank R's state. Returns the rank it failed
 * (ended other than 0, or went over: *over then its bytes), else -1. */
static int task_line(struct ranks *rs, char *line, uint64_t *over)
{
	char *rest;
	long i = strtol(line, &rest, 10);
	struct rank *r;
	unsigned long long v;
	char how[16];
	int code;

	if (rest == line || i < 0 || i >= rs->n || strncmp(rest, ": ", 2))
		return -1; /* not a task's line: srun's own, or the command's */
	r = &rs->r[i], rest += 2;
	if (!strncmp(rest, AB_TASK_REPORT " ", sizeof(AB_TASK_REPORT))) {
		rest += sizeof(AB_TASK_REPORT);
		dprintf(r->wfd, "%s\n", rest);
	} else if (!strncmp(rest, AB_TASK_NODE " ", sizeof(AB_TASK_NODE))) {
		rest += sizeof(AB_TASK_NODE);
		if (strlen(rest) < sizeof(r->node) && ab_hostname_ok(rest, strlen(rest)))
			snprintf(r->node, sizeof(r->node), "%s", rest);
	} else if (sscanf(rest, AB_TASK_PEAK " %llu", &v) == 1) {
		r->peak = v > r->peak ? v : r->peak;
	} else if (sscanf(rest, AB_TASK_OVER " %llu", &v) == 1) {
		r->peak = v > r->peak ? v : r->peak;
		r->ended = true;
		*over = v;
		return (int)i;
	} else if (sscanf(rest, AB_TASK_END " %15s %d", how, &code) == 2) {
		r->ended = true;
		/* a wait status as wait(2) encodes it, for the messages finish_failed writes */
		r->status = !strcmp(how, "signal") ? (code & 0x7f) : (code & 0xff) << 8;
		ab_report_watch_read(&r->w, true);
		if (r->status)
			return (int)i;
	}
	return -1;
}

/* What srun relayed since the last poll, line by line. Returns as task_line. */
static int read_step(struct ranks *rs, uint64_t *over)
{
	char buf[4096];
	ssize_t n;
	int failed = -1;

	while (failed < 0 && (n = read(rs->srun_out, buf, sizeof(buf))) > 0) {
		for (ssize_t k = 0; k < n && failed < 0; k++) {
			if (buf[k] != '\n') {
				if (rs->line_len < sizeof(rs->line) - 1)
					rs->line[rs->line_len++] = buf[k];
				continue;
			}
			rs->line[rs->line_len] = '\0';
			rs->line_len = 0;
			failed = task_line(rs, rs->line, over);
		}
	}
	return failed;
}

/* One poll of the trial step. Returns -1 while it runs, else the exit status. */
int ranks_step_poll(struct ranks *rs)
{
	char where[80];
	uint64_t over = 0;
	int failed = read_step(rs, &over), live = 0;

	for (int i = 0; i < rs->n; i++)
		ab_report_watch_read(&rs->r[i].w, rs->r[i].ended);
	if (failed >= 0)
		return ranks_finish_failed(rs, failed, over);
	if (!rs->srun_ended && waitpid(rs->srun.pid, &rs->srun.status, WNOHANG) == rs->srun.pid) {
		rs->srun_ended = true;
		if ((failed = read_step(rs, &over)) >= 0) /* what it relayed last */
			return ranks_finish_failed(rs, failed, over);
	}
	for (int i = 0; i < rs->n; i++)
		live += !rs->r[i].ended;
	ranks_merge_steps(rs);
	if (!rs->srun_ended)
		return -1;
	if (live) { /* srun ended before a task said how it ended: it never started, or died */
		for (int i = 0; i < rs->n; i++)
			if (!rs->r[i].ended) {
				fprintf(stderr, "autobatch-probe ranks: the trial step ended (srun %s %d) "
						"before rank %d of %d%s ended: see srun's lines above\n",
					WIFSIGNALED(rs->srun.status) ? "signal" : "status",
					WIFSIGNALED(rs->srun.status) ? WTERMSIG(rs->srun.status)
								     : WEXITSTATUS(rs->srun.status),
					i, rs->n, ranks_where(&rs->r[i], where, sizeof(where)));
				break;
			}
		return WIFEXITED(rs->srun.status) && WEXITSTATUS(rs->srun.status)
			       ? WEXITSTATUS(rs->srun.status) : 1;
	}
	return ranks_finish_ok(rs);
}
