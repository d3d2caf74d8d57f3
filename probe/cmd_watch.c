/* cmd_watch.c - autobatch-probe watch --pid PID --limit BYTES --batch N [--task ID] [--gpu]
 * [--entry NAME --cache-fd FD] [--report PATH]: the closed loop's half on the node. Started by
 * the plugin in each task of a step whose batch autobatch decided (as the user, before the
 * command), it follows that task's process tree (host: its resident memory, group_memory.h;
 * --gpu: what NVML sees the tree hold on one GPU) against the limit the decision promised, to
 * the task's end. The first sample over it: with a cache entry, NAME.over written beside it in
 * the cache directory open on FD, so that srun's next identical step probes again below that
 * batch instead of trusting the entry (and at the task's end again with the run's peak, if
 * higher); one line on its standard error, which is the task's
 * (the job's output), then closed (at a step's end its stragglers are killed, and the task's
 * output must not wait on this one). With --report (srun's JSON report, AUTOBATCH_REPORT):
 * the task's peak in its "real_run", when it first goes over, as it grows, and at the task's
 * end. Not meant to be run by hand.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cache.h"
#include "clock.h"
#include "error.h"
#include "commands.h"
#include "group_memory.h"
#include "number.h"
#include "nvml.h"
#include "protocol.h"
#include "report_run.h"
#include "size.h"

/* a peak must be seen while the task still holds it: a process's high-water mark goes
 * with it, and a padded epoch's longest batch can be its last step (a Python program's
 * exit takes a few hundred ms after it) */
#define SAMPLE_MS 200
#define SAMPLE_MAX_S 10 /* a sample that hangs (NVML, /proc) ends the watch, not the step */
/* In a task's first seconds, between samples, its leader's high-water mark is read every
 * FAST_MS (one file read): a task shorter than a sample period (the README demo's
 * toy_train runs about 60 ms after its exec) was otherwise reported at the few MiB its
 * process held before the exec (2 MiB of 193). The mark starts afresh at exec, and the
 * process's memory goes at its exit: only a read between the two holds its peak. */
#define FAST_MS 10
#define FAST_S 2.0
/* the report while the task runs: each peak this much above the one written, when it is
 * seen. The step's end kills the watch (SIGKILL to the step's processes) as it wakes for
 * its last write, and on a loaded node it often loses: the figure written as the task ran
 * must already hold its peak (written at most once a second, a padded epoch whose longest
 * batch came in its last second left it out of the report). The writes stay few: each is
 * 1% more than the last. */
#define REPORT_GROWTH 1.01
/* A report another process kept locked: tried again this much later, and at the end (a
 * step's hundreds of tasks all write theirs at their first sample) */
#define LOCKED_RETRY_S 30.0

struct watch {
	pid_t pid;
	long task, batch;
	uint64_t limit;
	const char *entry, *report, *node;
	int cache_fd;
	bool reported, said_over;
	bool over_unsaid, told_locked; /* the report was locked: its over count still to add */
	double retry_at;               /* not before then (ab_now), after a locked report */
	uint64_t reported_peak, marked_peak;
	struct ab_group_peak group;
	struct ab_nvml *nv;
	uint64_t gpu_peak;
};

/* A descriptor that becomes readable when pid ends (it is not our child); -1 without
 * pidfd_open (Linux before 5.3), where the watch polls for the pid instead. */
static int pid_handle(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	return -1;
#endif
}

static bool gone(pid_t pid, int handle, int ms)
{
	struct pollfd p = {handle, POLLIN, 0};

	if (handle >= 0)
		return poll(&p, 1, ms) > 0;
	usleep((useconds_t)ms * 1000);
	return kill(pid, 0) < 0 && errno == ESRCH;
}

/* Waits one sample period, or less when the task ends; in its first FAST_S, reading its
 * leader's high-water mark every FAST_MS meanwhile (host only: NVML's figure is the GPU's). */
static bool ended(struct watch *w, int handle, double start)
{
	if (w->nv || ab_now() - start > FAST_S)
		return gone(w->pid, handle, SAMPLE_MS);
	for (int waited = 0; waited < SAMPLE_MS; waited += FAST_MS) {
		if (gone(w->pid, handle, FAST_MS))
			return true;
		ab_group_sample_leader(&w->group);
	}
	return false;
}

/* One sample: the tree's resident memory, and with NVML its GPU memory. */
static void sample(struct watch *w)
{
	pid_t pids[AB_GROUP_TRACKED + 1];
	uint64_t gpu, each[AB_GROUP_TRACKED + 1];

	ab_group_sample(&w->group);
	if (!w->nv)
		return;
	gpu = ab_nvml_pids_usage(w->nv, pids, ab_group_pids(&w->group, pids), each);
	w->gpu_peak = gpu > w->gpu_peak ? gpu : w->gpu_peak;
}

/* NAME.over beside the entry: what srun's next lookup of NAME takes as evidence. */
static bool mark(const struct watch *w, uint64_t peak, const char *node)
{
	struct ab_cache c = {.fd = w->cache_fd, .dir = "the cache"};
	struct ab_cache_over o = {w->batch, w->task, peak, w->limit, ""};
	char err[AB_ERR_MAX];

	snprintf(o.node, sizeof(o.node), "%s", node);
	if (ab_cache_mark_over(&c, w->entry, &o, err, sizeof(err)) == 0)
		return true;
	fprintf(stderr, "autobatch: %s\n", err);
	return false;
}

static int parse(int argc, char **argv, struct watch *w, bool *gpu)
{
	static const struct option opts[] = {
		{"pid", required_argument, NULL, 'p'},	 {"limit", required_argument, NULL, 'l'},
		{"batch", required_argument, NULL, 'b'}, {"task", required_argument, NULL, 't'},
		{"entry", required_argument, NULL, 'e'}, {"cache-fd", required_argument, NULL, 'c'},
		{"gpu", no_argument, NULL, 'g'},	 {"report", required_argument, NULL, 'r'},
		{NULL, 0, NULL, 0},
	};
	long v;
	int o;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == 'g') {
			*gpu = true;
			continue;
		}
		if (o == 'e' || o == 'r') {
			*(o == 'e' ? &w->entry : &w->report) = optarg;
			continue;
		}
		if (o == '?' || ab_parse_whole(optarg, 0, 1L << 50, &v) < 0)
			return -EINVAL;
		if (o == 'p')
			w->pid = (pid_t)v;
		else if (o == 'l')
			w->limit = (uint64_t)v;
		else if (o == 'b')
			w->batch = v;
		else if (o == 't')
			w->task = v;
		else
			w->cache_fd = (int)v;
	}
	return w->pid > 1 && w->limit > 0 && w->batch > 0 ? 0 : -EINVAL;
}

/* The task's memory now: the GPU's, or the host's. */
static uint64_t now(struct watch *w)
{
	alarm(SAMPLE_MAX_S);
	sample(w);
	alarm(0);
	return w->nv ? w->gpu_peak : ab_group_peak_bytes(&w->group, 0);
}

/* The task's peak into the report's "real_run"; a failure said once, on the task's
 * standard error while it is still open. */
static void report(struct watch *w, uint64_t peak, bool first_over)
{
	struct ab_run_figure f = {w->limit,	    peak, w->task, w->batch, w->node,
				  w->nv ? "gpu" : "host", !w->reported, first_over || w->over_unsaid};
	char err[AB_ERR_MAX];
	int rc;

	if (!w->report)
		return;
	alarm(SAMPLE_MAX_S);
	rc = ab_report_add_run(w->report, &f, err, sizeof(err));
	alarm(0);
	if (rc == -EAGAIN) { /* kept for later: the figure is not given up for a lock */
		w->over_unsaid = f.first_over;
		w->retry_at = ab_now() + LOCKED_RETRY_S;
		if (!w->told_locked && !w->said_over)
			fprintf(stderr, "autobatch: the run's peak is not in the report yet: %s; "
					"tried again later\n", err);
		w->told_locked = true;
		return;
	}
	w->reported = true, w->reported_peak = peak, w->over_unsaid = false;
	if (rc == 0)
		return;
	/* not on this node's file systems (srun's $TMPDIR, a directory not shared): quietly */
	if (rc != -ENOENT && !w->said_over)
		fprintf(stderr, "autobatch: the run's peak is not in the report: %s\n", err);
	w->report = NULL;
}

/* Over the limit, said once: the mark first, so that the line says whether it was made;
 * then the task's standard error is let go. */
static void over(struct watch *w, uint64_t peak)
{
	char have[32], limit[32];
	bool marked;
	int null;

	alarm(SAMPLE_MAX_S);
	marked = w->entry && w->cache_fd >= 0 && mark(w, peak, w->node);
	alarm(0);
	w->marked_peak = peak;
	report(w, peak, true);
	ab_format_sizes_apart(peak, w->limit, have, limit, sizeof(have));
	fprintf(stderr, "autobatch: task %ld on %s reached %s, over the %s limit its decision "
			"(batch %ld) promised: the trials did not see what the run grew to later%s\n",
		w->task, *w->node ? w->node : "this node", have, limit, w->batch,
		marked ? "; the cached decision is marked, and the next identical srun probes "
			 "again below it"
		       : "");
	w->said_over = true;
	if ((null = open("/dev/null", O_WRONLY | O_CLOEXEC)) >= 0) {
		dup2(null, 2);
		close(null);
	}
}

/* While the task runs: the report gets each peak that grew by REPORT_GROWTH. */
static bool report_due(const struct watch *w, uint64_t peak)
{
	return w->report && ab_now() >= w->retry_at &&
	       (!w->reported || (double)peak > REPORT_GROWTH * (double)w->reported_peak);
}

void watch_usage(FILE *out)
{
	fprintf(out, "usage: autobatch-probe watch --pid PID --limit BYTES --batch N "
		     "[--task ID] [--gpu] [--entry NAME --cache-fd FD] [--report PATH]\n");
}

int cmd_watch(int argc, char **argv)
{
	struct watch w = {.cache_fd = -1};
	const char *node = getenv("SLURMD_NODENAME");
	char err[AB_ERR_MAX];
	bool gpu = false;
	uint64_t peak = 0;
	double start;
	int handle;

	if (parse(argc, argv, &w, &gpu) < 0) {
		watch_usage(stderr);
		return 2;
	}
	w.node = node && *node ? node : "";
	w.group.leader = w.pid;
	w.group.tree_only = true;
	/* a GPU's limit is not judged by the host's memory: without NVML, no verdict */
	if (gpu && ab_nvml_open(NULL, &w.nv, err, sizeof(err)) < 0)
		return 0;
	handle = pid_handle(w.pid);
	start = ab_now();
	do {
		peak = now(&w);
		if (peak > w.limit && !w.said_over)
			over(&w, peak);
		else if (report_due(&w, peak))
			report(&w, peak, false);
	} while (!ended(&w, handle, start));
	/* what the reads between the last samples saw (a task that ended within them) */
	if (!w.nv && (peak = ab_group_peak_bytes(&w.group, 0)) > w.limit && !w.said_over)
		over(&w, peak);
	if (!w.reported || peak != w.reported_peak || w.over_unsaid)
		report(&w, peak, false);
	/* the mark holds the run's peak, not its first sample over (the next srun's cap), unless
	 * another task's mark holds more (ab_cache_mark_over keeps the larger) */
	if (w.said_over && peak > w.marked_peak && w.entry && w.cache_fd >= 0) {
		alarm(SAMPLE_MAX_S);
		mark(&w, peak, w.node);
		alarm(0);
	}
	if (w.nv)
		ab_nvml_close(w.nv);
	return 0;
}
