/* cmd_watch.c - autobatch-probe watch --pid PID --limit BYTES --batch N [--task ID] [--gpu]
 * [--entry NAME --cache-fd FD]: the closed loop's half on the node. Started by the plugin in
 * each task of a step whose batch autobatch decided (as the user, before the command), it
 * follows that task's process tree (host: its resident memory, group_memory.h; --gpu: what
 * NVML sees the tree hold on one GPU) against the limit the decision promised. The first
 * sample over it, while the task still runs (at its end a step's stragglers are killed, and
 * its standard error must not be held open): with a cache entry, NAME.over written beside it
 * in the cache directory open on FD, so that srun's next identical step probes again below
 * that batch instead of trusting the entry; one line on its standard error, which is the
 * task's (the job's output); then it ends. Not meant to be run by hand.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cache.h"
#include "error.h"
#include "commands.h"
#include "group_memory.h"
#include "number.h"
#include "nvml.h"
#include "protocol.h"
#include "size.h"

#define SAMPLE_MS 500
#define SAMPLE_MAX_S 10 /* a sample that hangs (NVML, /proc) ends the watch, not the step */

struct watch {
	pid_t pid;
	long task, batch;
	uint64_t limit;
	const char *entry;
	int cache_fd;
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

static bool ended(pid_t pid, int handle)
{
	struct pollfd p = {handle, POLLIN, 0};

	if (handle >= 0)
		return poll(&p, 1, SAMPLE_MS) > 0;
	usleep(SAMPLE_MS * 1000);
	return kill(pid, 0) < 0 && errno == ESRCH;
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
		{"gpu", no_argument, NULL, 'g'},	 {NULL, 0, NULL, 0},
	};
	long v;
	int o;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == 'g') {
			*gpu = true;
			continue;
		}
		if (o == 'e') {
			w->entry = optarg;
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

/* Over the limit, said once: the mark first, so that the line says whether it was made. */
static void over(const struct watch *w, uint64_t peak)
{
	const char *node = getenv("SLURMD_NODENAME");
	char have[32], limit[32];
	bool marked;

	node = node && *node ? node : "";
	alarm(SAMPLE_MAX_S);
	marked = w->entry && w->cache_fd >= 0 && mark(w, peak, node);
	alarm(0);
	fprintf(stderr, "autobatch: task %ld on %s reached %s, over the %s limit its decision "
			"(batch %ld) promised: the trials did not see what the run grew to later%s\n",
		w->task, *node ? node : "this node", ab_format_size(peak, have, sizeof(have)),
		ab_format_size(w->limit, limit, sizeof(limit)), w->batch,
		marked ? "; the cached decision is marked, and the next identical srun probes "
			 "again below it"
		       : "");
}

int cmd_watch(int argc, char **argv)
{
	struct watch w = {.cache_fd = -1};
	char err[AB_ERR_MAX];
	bool gpu = false;
	uint64_t peak = 0;
	int handle;

	if (parse(argc, argv, &w, &gpu) < 0) {
		fprintf(stderr, "usage: autobatch-probe watch --pid PID --limit BYTES --batch N "
				"[--task ID] [--gpu] [--entry NAME --cache-fd FD]\n");
		return 2;
	}
	w.group.leader = w.pid;
	w.group.tree_only = true;
	/* a GPU's limit is not judged by the host's memory: without NVML, no verdict */
	if (gpu && ab_nvml_open(NULL, &w.nv, err, sizeof(err)) < 0)
		return 0;
	handle = pid_handle(w.pid);
	while ((peak = now(&w)) <= w.limit && !ended(w.pid, handle))
		;
	if (peak > w.limit)
		over(&w, peak);
	if (w.nv)
		ab_nvml_close(w.nv);
	return 0;
}
