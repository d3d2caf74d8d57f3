/* cmd_ranks.c - autobatch-probe ranks N [--capacity BYTES] [--gpu] [--node-memory TABLE]
 * [--nodes LIST [--per-node T]] -- COMMAND: one trial's N ranks. On this node they start as a
 * launcher starts them (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT and their SLURM_
 * twins), each its own process group measured on its own and reporting to its own file. With
 * --nodes they are the tasks of a Slurm step of this job over LIST, as the real step's are
 * (srun sets their ranks), each wrapped by `autobatch-probe task`, whose lines srun relays
 * here. Either way their steps reach the trial's report as the slowest rank's, its peak is the
 * worst rank's (with every rank's), and the first rank to fail or to go over BYTES ends them
 * all at once: the others would wait in a collective until the allowance. With TABLE (each
 * node's GPU memory, the step's nodes holding models of different memory) each rank is held
 * to its own node's: the worst rank is the one holding the largest share of its own, and the
 * trial's peak that share of BYTES. With --gpu (the ranks of this node, each on a GPU) a
 * rank's memory is what NVML sees its process group hold on the node's GPUs, the CUDA context
 * included, or what its step hook reported if more, not its resident memory. What
 * `run --ranks N` runs as each trial; not meant to be run by hand.
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

#define POLL_NS 50000000L
#define STOP_EOF_POLLS 100   /* 5 s for the tasks to end their commands at our stop */
#define STOP_GRACE_POLLS 300 /* 15 s for srun to cancel a trial step */

struct rank {
	struct ab_proc proc;
	bool ended;
	int status;
	char report[PATH_MAX];
	int wfd;       /* --nodes: its report, written from its task's lines */
	char node[64]; /* --nodes: where Slurm ran it */
	struct ab_report_watch w; /* its report, read as it is written */
	struct ab_group_peak group;
	uint64_t peak;
};

struct ranks {
	int n, port, out; /* out: the trial's report, appended to */
	const char *batch;
	uint64_t capacity; /* 0: none */
	struct ab_nvml *nv; /* --gpu: every GPU of the node; NULL: resident memory */
	const char *node_memory; /* --node-memory, as given (for the tasks); NULL: none */
	struct ab_node_memory table; /* and read */
	char **argv;
	size_t merged;     /* step lines written to the trial's report */
	struct ab_merge_said said; /* their evidence beyond the steps, written (merge_steps) */
	struct rank *r;
	/* --nodes: the trial is a Slurm step over nodes, launched by srun, whose output is read */
	const char *nodes;
	long per_node;     /* 0: as srun lays them out */
	bool gpu;          /* --gpu: each task measures its processes on its GPUs (task --gpu) */
	const char *srun_option[AB_STEP_OPTIONS_MAX]; /* the real step's GPU request, for srun */
	int nsrun_options;
	struct ab_proc srun;
	int srun_out;      /* srun's standard output: the tasks' lines */
	int srun_in;       /* srun's standard input, every task's (--input=all): closed to stop */
	bool srun_ended;
	char line[AB_REPORT_MAX_LINE + 128];
	size_t line_len;
};

struct start {
	const struct ranks *rs;
	int i;
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void set_int(const char *name, long v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%ld", v);
	setenv(name, buf, 1);
}

/* In rank i: what torchrun and srun would have set, its own report, then the command. */
static void rank_body(void *arg)
{
	const struct start *s = arg;
	const struct ranks *rs = s->rs;
	static const char *const world[] = {"WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_NTASKS",
					    "SLURM_NPROCS", "SLURM_STEP_NUM_TASKS"};
	static const char *const rank[] = {"RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID"};

	for (size_t k = 0; k < sizeof(world) / sizeof(world[0]); k++)
		set_int(world[k], rs->n);
	for (size_t k = 0; k < sizeof(rank) / sizeof(rank[0]); k++)
		set_int(rank[k], s->i);
	set_int("GROUP_RANK", 0);
	set_int("SLURM_NODEID", 0);
	set_int("SLURM_NNODES", 1);
	set_int("SLURM_STEP_NUM_NODES", 1);
	set_int("MASTER_PORT", rs->port);
	setenv("MASTER_ADDR", "127.0.0.1", 1);
	setenv(AB_ENV_TRIAL_REPORT, rs->r[s->i].report, 1);
	execvp(rs->argv[0], rs->argv);
	dprintf(2, "autobatch-probe ranks: cannot run %s: %s\n", rs->argv[0], strerror(errno));
	_exit(127);
}

/* A TCP port free on the loopback now, for the ranks' rendezvous (never the job's own
 * MASTER_PORT: the real step may use it at the same time). */
static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Rank i's peak: its group's resident memory as the probe measures a host trial. */
static uint64_t rank_peak(struct rank *r)
{
	uint64_t p = r->group.leader ? ab_group_peak_bytes(&r->group,
							   (uint64_t)r->proc.ru.ru_maxrss * 1024)
				     : 0; /* a task's peak comes in its lines */

	return p > r->peak ? p : r->peak;
}

/* The memory rank r is held to: its node's in the table, else the trial's (0: none). */
static uint64_t rank_capacity(const struct ranks *rs, const struct rank *r)
{
	uint64_t own = ab_node_memory_of(&rs->table, r->node); /* 0: no table, or not named */

	return own ? own : rs->capacity;
}

/* bytes of rank r's own memory as the same share of the trial's capacity */
static uint64_t as_share(const struct ranks *rs, const struct rank *r, uint64_t bytes)
{
	uint64_t own = rank_capacity(rs, r);

	return own && rs->capacity && own != rs->capacity
		       ? (uint64_t)((double)bytes * (double)rs->capacity / (double)own)
		       : bytes;
}

/* Every rank's peak so far, the worst the trial's: written with each step, so that a trial
 * the probe stops once it has its steps (SIGKILL, no time to write more) has its peak. Ranks
 * held to memories of different size compare by their share of their own; the trial's peak is
 * the worst share of the trial's capacity, with the rank's own bytes and memory beside it. */
static void write_peaks(const struct ranks *rs)
{
	uint64_t worst = 0, bound_peak = 0, own;
	int bound = 0;

	dprintf(rs->out, "{\"rank_peaks\": [");
	for (int i = 0; i < rs->n; i++) {
		uint64_t p = rank_peak(&rs->r[i]), share = as_share(rs, &rs->r[i], p);

		dprintf(rs->out, "%s%llu", i ? ", " : "", (unsigned long long)p);
		if (share > worst || i == 0)
			worst = share, bound = i, bound_peak = p;
	}
	dprintf(rs->out, "], \"bound_rank\": %d, %s%s%s\"peak_bytes\": %llu", bound,
		rs->r[bound].node[0] ? "\"bound_node\": \"" : "", rs->r[bound].node,
		rs->r[bound].node[0] ? "\", " : "", (unsigned long long)worst);
	own = rank_capacity(rs, &rs->r[bound]);
	if (own != rs->capacity)
		dprintf(rs->out, ", \"bound_peak_bytes\": %llu, \"bound_capacity_bytes\": %llu",
			(unsigned long long)bound_peak, (unsigned long long)own);
	dprintf(rs->out, "}\n");
}

/* The ranks' reports, as the merging functions of trial_report.h take them. */
static size_t rank_reports(const struct ranks *rs, const struct ab_trial_report **v)
{
	for (int i = 0; i < rs->n; i++)
		v[i] = &rs->r[i].w.rep;
	return (size_t)rs->n;
}

/* The steps every rank has taken, each as long as its slowest rank's and of the samples of
 * every rank (each its own report's, else the batch): the whole step's throughput, which the
 * throughput objective ranks a distributed step's batches by. */
static void merge_steps(struct ranks *rs)
{
	const struct ab_trial_report *v[AB_REPORT_MAX_RANKS];
	size_t common = SIZE_MAX, before = rs->merged, n = rank_reports(rs, v);
	double batch = strtod(rs->batch, NULL);
	char lines[512];
	long length;

	for (int i = 0; i < rs->n; i++)
		common = rs->r[i].w.rep.steps < common ? rs->r[i].w.rep.steps : common;
	for (; rs->merged < common; rs->merged++) {
		double slowest = 0, samples = 0;
		char said[48] = "";

		for (int i = 0; i < rs->n; i++) {
			const struct ab_trial_report *rep = &rs->r[i].w.rep;

			if (rep->step_s[rs->merged] > slowest)
				slowest = rep->step_s[rs->merged];
			samples += rep->samples[rs->merged] > 0 ? rep->samples[rs->merged] : batch;
		}
		/* the longest batch a rank has had so far (issue 41) */
		if ((length = ab_trial_merge_length(v, n)))
			snprintf(said, sizeof(said), ", \"length\": %ld", length);
		dprintf(rs->out, "{\"step_s\": %.9f, \"samples\": %.0f%s}\n", slowest, samples, said);
	}
	if (ab_trial_merge_evidence(v, n, &rs->said, lines, sizeof(lines)))
		dprintf(rs->out, "%s", lines);
	if (rs->merged > before)
		write_peaks(rs);
}

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
static void stop_step(struct ranks *rs)
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

static void stop_all(struct ranks *rs)
{
	if (rs->nodes) {
		stop_step(rs);
		return;
	}
	for (int i = 0; i < rs->n; i++)
		if (rs->r[i].proc.pid > 0 && !rs->r[i].ended)
			ab_group_kill(rs->r[i].proc.pid);
	for (int i = 0; i < rs->n; i++) {
		struct rank *r = &rs->r[i];

		if (r->proc.pid > 0 && !r->ended && wait4(r->proc.pid, &r->status, 0, &r->proc.ru) > 0)
			r->ended = true;
	}
}

static int finish_ok(struct ranks *rs)
{
	merge_steps(rs);
	write_peaks(rs);
	return 0;
}

/* " (on NODE)" for a rank of a trial step, "" for one on this node. */
static const char *rank_where(const struct rank *r, char *buf, size_t len)
{
	snprintf(buf, len, r->node[0] ? " (on %s)" : "%s", r->node);
	return buf;
}

/* Rank i failed (or went over): the others stopped at once, the trial told why. */
static int finish_failed(struct ranks *rs, int i, uint64_t over)
{
	struct rank *r = &rs->r[i];
	int st = r->status;
	char where[80];

	stop_all(rs);
	merge_steps(rs);
	write_peaks(rs); /* every rank's, the trial's count of ranks with them */
	if (over) {
		fprintf(stderr, "autobatch-probe ranks: rank %d of %d%s went over the device's "
				"memory (%llu bytes held): every rank was stopped\n",
			i, rs->n, rank_where(r, where, sizeof(where)), (unsigned long long)over);
		dprintf(rs->out, "{\"oom\": true, \"%s\": %llu, \"bound_rank\": %d%s%s%s}\n",
			AB_FIELD_FLOOR, (unsigned long long)as_share(rs, r, over), i,
			r->node[0] ? ", \"bound_node\": \"" : "", r->node, r->node[0] ? "\"" : "");
		return 1;
	}
	fprintf(stderr, "autobatch-probe ranks: rank %d of %d%s ended (%s %d) after %zu steps: "
			"the other ranks were stopped\n",
		i, rs->n, rank_where(r, where, sizeof(where)), WIFSIGNALED(st) ? "signal" : "status",
		WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), r->w.rep.steps);
	if (r->w.rep.oom)
		dprintf(rs->out, "{\"oom\": true, \"%s\": %llu, \"bound_rank\": %d}\n", AB_FIELD_FLOOR,
			(unsigned long long)(r->w.rep.floor_bytes > rank_peak(r) ? r->w.rep.floor_bytes
									       : rank_peak(r)),
			i);
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st) ? WEXITSTATUS(st) : 1;
}

/* Rank r's memory on the node's GPUs now: its process group's as NVML sees it (the CUDA
 * context and the allocator's reserve included), or the largest its hook reported (PyTorch's
 * reserved peak, which a 50 ms poll can miss) when that is more. */
static uint64_t gpu_sample(const struct ranks *rs, const struct rank *r)
{
	uint64_t now = ab_nvml_group_usage(rs->nv, r->proc.pid);

	return r->w.rep.has_peak && r->w.rep.peak_bytes > now ? r->w.rep.peak_bytes : now;
}

/* One poll: memory, reports, ends. Returns -1 while they run, else the exit status. */
static int poll_ranks(struct ranks *rs)
{
	int live = 0;

	for (int i = 0; i < rs->n; i++) {
		struct rank *r = &rs->r[i];
		uint64_t now;

		if (r->ended)
			continue;
		ab_report_watch_read(&r->w, r->ended);
		now = rs->nv ? gpu_sample(rs, r) : ab_group_sample(&r->group);
		r->peak = now > r->peak ? now : r->peak;
		if (rs->capacity && now > rs->capacity)
			return finish_failed(rs, i, now);
		if (wait4(r->proc.pid, &r->status, WNOHANG, &r->proc.ru) == r->proc.pid) {
			ab_group_kill(r->proc.pid); /* what it left in its group */
			r->ended = true;
			ab_report_watch_read(&r->w, r->ended);
			if (!WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0)
				return finish_failed(rs, i, 0);
			continue;
		}
		live++;
	}
	merge_steps(rs);
	return live ? -1 : finish_ok(rs);
}

/* ---- the trial as a Slurm step of this job (--nodes) ---- */

struct step_argv {
	char **v;
	char *owned[6];
};

/* The srun that probes (the guard its probe step carries): trial steps are named after it,
 * so that it can cancel those its cancelled probe step left (spank/probe_step.c). */
static const char *guard_pid(void)
{
	const char *g = getenv(AB_GUARD_ENV);

	return g && *g && strlen(g) < 16 && !g[strspn(g, "0123456789")] ? g : "0";
}

/* srun --overlap over the step's nodes, each task `autobatch-probe task` around the command.
 * --label marks each task's lines with its rank; --input=all gives every task our pipe, whose
 * end is our stop (stop_step); --kill-on-bad-exit ends every task when one fails (or goes
 * over: the task exits 3) and has not seen that stop; --quit-on-interrupt makes our one SIGINT
 * cancel it. */
static int step_argv(const struct ranks *rs, struct step_argv *a)
{
	size_t n = 0, k = 0;

	while (rs->argv[n])
		n++;
	if (!(a->v = calloc(n + 27 + AB_STEP_OPTIONS_MAX, sizeof(*a->v))) ||
	    !(a->owned[0] = realpath("/proc/self/exe", NULL)) ||
	    asprintf(&a->owned[1], "--nodelist=%s", rs->nodes) < 0 ||
	    asprintf(&a->owned[2], "--ntasks=%d", rs->n) < 0 ||
	    asprintf(&a->owned[3], "%llu", (unsigned long long)rs->capacity) < 0 ||
	    asprintf(&a->owned[4], "--job-name=autobatch-trial.%s", guard_pid()) < 0 ||
	    asprintf(&a->owned[5], "--ntasks-per-node=%ld", rs->per_node) < 0)
		return -1;
	a->v[k++] = "srun";
	a->v[k++] = "--overlap";
	a->v[k++] = a->owned[1];
	a->v[k++] = a->owned[2];
	if (rs->per_node)
		a->v[k++] = a->owned[5];
	a->v[k++] = "--kill-on-bad-exit=1";
	a->v[k++] = "--input=all";
	a->v[k++] = "--label";
	a->v[k++] = "--quit-on-interrupt";
	a->v[k++] = "--mem=0";
	a->v[k++] = "--export=ALL";
	a->v[k++] = a->owned[4];
	for (int i = 0; i < rs->nsrun_options; i++) /* the GPUs of the real step's tasks */
		a->v[k++] = (char *)rs->srun_option[i];
	a->v[k++] = "--";
	a->v[k++] = a->owned[0];
	a->v[k++] = "task";
	if (rs->gpu)
		a->v[k++] = "--gpu";
	if (rs->capacity) {
		a->v[k++] = "--capacity";
		a->v[k++] = a->owned[3];
	}
	if (rs->node_memory) { /* each task holds itself to its node's */
		a->v[k++] = "--node-memory";
		a->v[k++] = (char *)rs->node_memory;
	}
	a->v[k++] = "--stop-on-eof";
	a->v[k++] = "--";
	memcpy(a->v + k, rs->argv, n * sizeof(*a->v));
	return 0;
}

static void free_step_argv(struct step_argv *a)
{
	for (size_t i = 0; i < sizeof(a->owned) / sizeof(a->owned[0]); i++)
		free(a->owned[i]);
	free(a->v);
}

struct srun_start {
	char **argv;
	int in, out; /* the pipes' read and write ends */
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

static int start_step(struct ranks *rs)
{
	struct step_argv a = {0};
	int p[2] = {-1, -1}, in[2] = {-1, -1}, rc = -1;
	char err[256];

	if (step_argv(rs, &a) < 0 || pipe2(p, O_CLOEXEC) < 0 || pipe2(in, O_CLOEXEC) < 0) {
		fprintf(stderr, "autobatch-probe ranks: cannot set up the trial step: %s\n",
			strerror(errno));
		goto out;
	}
	/* srun_body's dup2 clears the ends' close-on-exec in the child only */
	if (ab_proc_start(&rs->srun, AB_PROC_GROUP | AB_PROC_PDEATHSIG, srun_body,
			  &(struct srun_start){a.v, in[0], p[1]}, err, sizeof(err)) < 0) {
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
	free_step_argv(&a);
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
static int poll_step(struct ranks *rs)
{
	char where[80];
	uint64_t over = 0;
	int failed = read_step(rs, &over), live = 0;

	for (int i = 0; i < rs->n; i++)
		ab_report_watch_read(&rs->r[i].w, rs->r[i].ended);
	if (failed >= 0)
		return finish_failed(rs, failed, over);
	if (!rs->srun_ended && waitpid(rs->srun.pid, &rs->srun.status, WNOHANG) == rs->srun.pid) {
		rs->srun_ended = true;
		if ((failed = read_step(rs, &over)) >= 0) /* what it relayed last */
			return finish_failed(rs, failed, over);
	}
	for (int i = 0; i < rs->n; i++)
		live += !rs->r[i].ended;
	merge_steps(rs);
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
					i, rs->n, rank_where(&rs->r[i], where, sizeof(where)));
				break;
			}
		return WIFEXITED(rs->srun.status) && WEXITSTATUS(rs->srun.status)
			       ? WEXITSTATUS(rs->srun.status) : 1;
	}
	return finish_ok(rs);
}

static int usage(void)
{
	fprintf(stderr, "usage: autobatch-probe ranks N [--capacity BYTES] [--gpu] [--node-memory TABLE] "
			"[--nodes LIST [--per-node T] [--srun-option OPT]...] -- COMMAND [ARGS...]\n"
			"  (a trial's N ranks, on this node or as a step over LIST; run --ranks N "
			"runs it)\n");
	return 2;
}

static int start_ranks(struct ranks *rs, const char *report)
{
	char err[256];

	for (int i = 0; i < rs->n; i++) {
		struct rank *r = &rs->r[i];
		int fd;

		snprintf(r->report, sizeof(r->report), "%s.rank%d", report, i);
		if ((fd = open(r->report, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
			       0600)) < 0 ||
		    (r->w.fd = open(r->report, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
			return fprintf(stderr, "autobatch-probe ranks: cannot create %s: %s\n",
				       r->report, strerror(errno)), -1;
		if (rs->nodes) { /* written from its task's lines */
			r->wfd = fd;
			continue;
		}
		close(fd);
		if (ab_proc_start(&r->proc, AB_PROC_GROUP | AB_PROC_PDEATHSIG, rank_body,
				  &(struct start){rs, i}, err, sizeof(err)) < 0)
			return fprintf(stderr, "autobatch-probe ranks: %s\n", err), -1;
		r->group.leader = rs->nv ? 0 : r->proc.pid; /* on a GPU: NVML, not its RSS */
	}
	return rs->nodes ? start_step(rs) : 0;
}

int cmd_ranks(int argc, char **argv)
{
	struct ranks rs = {.srun_in = -1};
	const char *report = getenv(AB_ENV_TRIAL_REPORT);
	long n, cap = 0;
	int i = 2, rc = -1;

	if (argc < 4 || ab_parse_whole(argv[1], 1, AB_REPORT_MAX_RANKS, &n) < 0)
		return usage();
	if (!strcmp(argv[i], "--capacity")) {
		if (i + 1 >= argc || ab_parse_whole(argv[i + 1], 1, LONG_MAX, &cap) < 0)
			return usage();
		i += 2;
	}
	if (i + 1 < argc && !strcmp(argv[i], "--gpu"))
		rs.gpu = true, i++;
	if (i + 1 < argc && !strcmp(argv[i], "--node-memory")) {
		char err[256];

		if (ab_node_memory_parse(argv[i + 1], &rs.table, err, sizeof(err)) < 0)
			return fprintf(stderr, "autobatch-probe ranks: %s\n", err), 2;
		rs.node_memory = argv[i + 1];
		i += 2;
	}
	if (i + 1 < argc && !strcmp(argv[i], "--nodes")) {
		rs.nodes = argv[i + 1];
		i += 2;
	}
	if (rs.nodes && i + 1 < argc && !strcmp(argv[i], "--per-node")) {
		if (ab_parse_whole(argv[i + 1], 1, AB_REPORT_MAX_RANKS, &rs.per_node) < 0)
			return usage();
		i += 2;
	}
	for (; rs.nodes && i + 1 < argc && !strcmp(argv[i], "--srun-option"); i += 2)
		if (!ab_step_option_ok(argv[i + 1]) || rs.nsrun_options >= AB_STEP_OPTIONS_MAX)
			return usage();
		else
			rs.srun_option[rs.nsrun_options++] = argv[i + 1];
	/* the ranks of this node on its GPUs are measured here; a step's by each task */
	if (rs.gpu && !rs.nodes) {
		char err[256];

		if (ab_nvml_open(NULL, &rs.nv, err, sizeof(err)) < 0)
			return fprintf(stderr, "autobatch-probe ranks: --gpu: %s\n", err), 1;
	}
	if (i >= argc - 1 || strcmp(argv[i], "--"))
		return usage();
	if (!report || !*report || !(rs.batch = getenv(AB_ENV_BATCH_SIZE)))
		return fprintf(stderr, "autobatch-probe ranks: runs as a trial of run --ranks "
				       "(%s and %s unset)\n", AB_ENV_TRIAL_REPORT, AB_ENV_BATCH_SIZE), 2;
	rs.n = (int)n, rs.capacity = (uint64_t)cap, rs.argv = argv + i + 1;
	rs.out = open(report, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	rs.r = calloc((size_t)rs.n, sizeof(*rs.r));
	if (rs.out < 0 || !rs.r || (rs.port = free_port()) < 0)
		return fprintf(stderr, "autobatch-probe ranks: cannot set up (%s)\n", strerror(errno)), 1;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGHUP, on_signal);
	if (start_ranks(&rs, report) == 0)
		while (!stop_signal && (rc = rs.nodes ? poll_step(&rs) : poll_ranks(&rs)) < 0)
			nanosleep(&(struct timespec){0, POLL_NS}, NULL);
	stop_all(&rs);
	if (stop_signal)
		rc = 128 + stop_signal;
	for (int k = 0; k < rs.n; k++) {
		if (rs.r[k].w.fd > 0)
			close(rs.r[k].w.fd);
		if (rs.r[k].wfd > 0)
			close(rs.r[k].wfd);
	}
	if (rs.srun_out > 0)
		close(rs.srun_out);
	if (rs.srun_in >= 0)
		close(rs.srun_in);
	free(rs.r);
	close(rs.out);
	ab_nvml_close(rs.nv);
	return rc < 0 ? 1 : rc;
}
