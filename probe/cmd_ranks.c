/* cmd_ranks.c - autobatch-probe ranks N [--capacity BYTES] -- COMMAND: one trial's N ranks
 * on this node, started as a launcher starts them (RANK, LOCAL_RANK, WORLD_SIZE,
 * MASTER_ADDR/PORT and their SLURM_ twins), each its own process group measured on its own
 * and reporting to its own file. Their steps reach the trial's report as the slowest rank's,
 * its peak is the worst rank's (with every rank's), and the first rank to fail or to go over
 * BYTES ends them all at once: the others would wait in a collective until the allowance.
 * What `run --ranks N` runs as each trial; not meant to be run by hand.
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
#include "group_memory.h"
#include "number.h"
#include "protocol.h"
#include "subprocess.h"
#include "trial_report.h"

#define POLL_NS 50000000L

struct rank {
	struct ab_proc proc;
	bool ended;
	int status;
	char report[PATH_MAX];
	struct ab_report_watch w; /* its report, read as it is written */
	struct ab_group_peak group;
	uint64_t peak;
};

struct ranks {
	int n, port, out; /* out: the trial's report, appended to */
	const char *batch;
	uint64_t capacity; /* 0: none */
	char **argv;
	size_t merged;     /* step lines written to the trial's report */
	struct rank *r;
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
	uint64_t p = ab_group_peak_bytes(&r->group, (uint64_t)r->proc.ru.ru_maxrss * 1024);

	return p > r->peak ? p : r->peak;
}

/* Every rank's peak so far, the worst the trial's: written with each step, so that a trial
 * the probe stops once it has its steps (SIGKILL, no time to write more) has its peak. */
static void write_peaks(const struct ranks *rs)
{
	uint64_t worst = 0;
	int bound = 0;

	dprintf(rs->out, "{\"rank_peaks\": [");
	for (int i = 0; i < rs->n; i++) {
		uint64_t p = rank_peak(&rs->r[i]);

		dprintf(rs->out, "%s%llu", i ? ", " : "", (unsigned long long)p);
		if (p > worst)
			worst = p, bound = i;
	}
	dprintf(rs->out, "], \"bound_rank\": %d, \"peak_bytes\": %llu}\n", bound,
		(unsigned long long)worst);
}

/* The steps every rank has taken, each as long as its slowest rank's. */
static void merge_steps(struct ranks *rs)
{
	size_t common = SIZE_MAX, before = rs->merged;

	for (int i = 0; i < rs->n; i++)
		common = rs->r[i].w.rep.steps < common ? rs->r[i].w.rep.steps : common;
	for (; rs->merged < common; rs->merged++) {
		double slowest = 0;

		for (int i = 0; i < rs->n; i++)
			if (rs->r[i].w.rep.step_s[rs->merged] > slowest)
				slowest = rs->r[i].w.rep.step_s[rs->merged];
		dprintf(rs->out, "{\"step_s\": %.9f, \"samples\": %s}\n", slowest, rs->batch);
	}
	if (rs->merged > before)
		write_peaks(rs);
}

static void stop_all(struct ranks *rs)
{
	for (int i = 0; i < rs->n; i++)
		if (rs->r[i].proc.pid > 0 && !rs->r[i].ended)
			kill(-rs->r[i].proc.pid, SIGKILL);
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

/* Rank i failed (or went over): the others stopped at once, the trial told why. */
static int finish_failed(struct ranks *rs, int i, uint64_t over)
{
	struct rank *r = &rs->r[i];
	int st = r->status;

	stop_all(rs);
	merge_steps(rs);
	if (over) {
		fprintf(stderr, "autobatch-probe ranks: rank %d of %d went over the device's memory "
				"(%llu bytes held): every rank was stopped\n",
			i, rs->n, (unsigned long long)over);
		dprintf(rs->out, "{\"oom\": true, \"%s\": %llu, \"bound_rank\": %d}\n", AB_FIELD_FLOOR,
			(unsigned long long)over, i);
		return 1;
	}
	fprintf(stderr, "autobatch-probe ranks: rank %d of %d ended (%s %d) after %zu steps: the "
			"other ranks were stopped\n",
		i, rs->n, WIFSIGNALED(st) ? "signal" : "status",
		WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), r->w.rep.steps);
	if (r->w.rep.oom)
		dprintf(rs->out, "{\"oom\": true, \"%s\": %llu, \"bound_rank\": %d}\n", AB_FIELD_FLOOR,
			(unsigned long long)(r->w.rep.floor_bytes > rank_peak(r) ? r->w.rep.floor_bytes
									       : rank_peak(r)),
			i);
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st) ? WEXITSTATUS(st) : 1;
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
		now = ab_group_sample(&r->group);
		r->peak = now > r->peak ? now : r->peak;
		ab_report_watch_read(&r->w, r->ended);
		if (rs->capacity && now > rs->capacity)
			return finish_failed(rs, i, now);
		if (wait4(r->proc.pid, &r->status, WNOHANG, &r->proc.ru) == r->proc.pid) {
			kill(-r->proc.pid, SIGKILL); /* what it left in its group */
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

static int usage(void)
{
	fprintf(stderr, "usage: autobatch-probe ranks N [--capacity BYTES] -- COMMAND [ARGS...]\n"
			"  (a trial's N ranks on this node; run --ranks N runs it)\n");
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
		close(fd);
		if (ab_proc_start(&r->proc, AB_PROC_GROUP | AB_PROC_PDEATHSIG, rank_body,
				  &(struct start){rs, i}, err, sizeof(err)) < 0)
			return fprintf(stderr, "autobatch-probe ranks: %s\n", err), -1;
		r->group.leader = r->proc.pid;
	}
	return 0;
}

int cmd_ranks(int argc, char **argv)
{
	struct ranks rs = {0};
	const char *report = getenv(AB_ENV_TRIAL_REPORT);
	long n, cap = 0;
	int i = 2, rc = -1;

	if (argc < 4 || ab_parse_whole(argv[1], 2, AB_REPORT_MAX_RANKS, &n) < 0)
		return usage();
	if (!strcmp(argv[i], "--capacity")) {
		if (i + 1 >= argc || ab_parse_whole(argv[i + 1], 1, LONG_MAX, &cap) < 0)
			return usage();
		i += 2;
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
		while (!stop_signal && (rc = poll_ranks(&rs)) < 0)
			nanosleep(&(struct timespec){0, POLL_NS}, NULL);
	stop_all(&rs);
	if (stop_signal)
		rc = 128 + stop_signal;
	for (int k = 0; k < rs.n; k++)
		if (rs.r[k].w.fd > 0)
			close(rs.r[k].w.fd);
	free(rs.r);
	close(rs.out);
	return rc < 0 ? 1 : rc;
}
