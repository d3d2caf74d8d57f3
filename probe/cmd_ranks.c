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
#include "trial_container.h"
#include "trial_report.h"
#include "ranks.h"


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
	/* and its twins, for a container named in the command (trial_container.h) */
	if (ab_trial_container_setenv(AB_ENV_TRIAL_REPORT, rs->r[s->i].report) < 0)
		_exit(127);
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

/* Rank i's peak: its group's resident memory as the probe measures a host trial, or what it
 * reported when more (a rank whose trainer exec'd another program after its steps, before a
 * sample came: CI saw a 4-rank trial read 3.2 MiB so, where its repeat read 117). */
static uint64_t rank_peak(struct rank *r)
{
	uint64_t p = r->group.leader ? ab_group_peak_bytes(&r->group,
							   (uint64_t)r->proc.ru.ru_maxrss * 1024)
				     : 0; /* a task's peak comes in its lines */

	return ab_trial_report_peak_over(&r->w.rep, p > r->peak ? p : r->peak);
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
void ranks_merge_steps(struct ranks *rs)
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

static void stop_all(struct ranks *rs)
{
	if (rs->nodes) {
		ranks_step_stop(rs);
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

int ranks_finish_ok(struct ranks *rs)
{
	ranks_merge_steps(rs);
	write_peaks(rs);
	return 0;
}

/* " (on NODE)" for a rank of a trial step, "" for one on this node. */
const char *ranks_where(const struct rank *r, char *buf, size_t len)
{
	snprintf(buf, len, r->node[0] ? " (on %s)" : "%s", r->node);
	return buf;
}

/* Rank i failed (or went over): the others stopped at once, the trial told why. */
int ranks_finish_failed(struct ranks *rs, int i, uint64_t over)
{
	struct rank *r = &rs->r[i];
	int st = r->status;
	char where[80];

	stop_all(rs);
	ranks_merge_steps(rs);
	write_peaks(rs); /* every rank's, the trial's count of ranks with them */
	if (over) {
		fprintf(stderr, "autobatch-probe ranks: rank %d of %d%s went over the device's "
				"memory (%llu bytes held): every rank was stopped\n",
			i, rs->n, ranks_where(r, where, sizeof(where)), (unsigned long long)over);
		dprintf(rs->out, "{\"oom\": true, \"%s\": %llu, \"bound_rank\": %d%s%s%s}\n",
			AB_FIELD_FLOOR, (unsigned long long)as_share(rs, r, over), i,
			r->node[0] ? ", \"bound_node\": \"" : "", r->node, r->node[0] ? "\"" : "");
		return 1;
	}
	fprintf(stderr, "autobatch-probe ranks: rank %d of %d%s ended (%s %d) after %zu steps: "
			"the other ranks were stopped\n",
		i, rs->n, ranks_where(r, where, sizeof(where)), WIFSIGNALED(st) ? "signal" : "status",
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
	return ab_trial_report_peak_over(&r->w.rep, ab_nvml_group_usage(rs->nv, r->proc.pid));
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
			return ranks_finish_failed(rs, i, now);
		if (wait4(r->proc.pid, &r->status, WNOHANG, &r->proc.ru) == r->proc.pid) {
			ab_group_kill(r->proc.pid); /* what it left in its group */
			r->ended = true;
			ab_report_watch_read(&r->w, r->ended);
			if (!WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0)
				return ranks_finish_failed(rs, i, 0);
			continue;
		}
		live++;
	}
	ranks_merge_steps(rs);
	return live ? -1 : ranks_finish_ok(rs);
}

void ranks_usage(FILE *out)
{
	fprintf(out, "usage: autobatch-probe ranks N [--capacity BYTES] [--gpu] [--node-memory TABLE] "
			"[--nodes LIST [--per-node T] [--srun-option OPT]...] -- COMMAND [ARGS...]\n"
			"  (a trial's N ranks, on this node or as a step over LIST; run --ranks N "
			"runs it)\n");
}

static int usage(void)
{
	ranks_usage(stderr);
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
	return rs->nodes ? ranks_step_start(rs) : 0;
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
		while (!stop_signal && (rc = rs.nodes ? ranks_step_poll(&rs) : poll_ranks(&rs)) < 0)
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
