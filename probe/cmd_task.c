/* cmd_task.c - autobatch-probe task [--capacity BYTES] [--gpu] [--node-memory TABLE] -- COMMAND:
 * one task of a trial that is a Slurm step (run --ranks N --step-nodes LIST), on whichever node
 * Slurm put it. It runs the command as its own process group with Slurm's environment
 * untouched (SLURM_PROCID and the rest are the real step's), measures that group and the
 * descendants that left it (group_memory.h), and says on
 * its standard output (which the launcher, `autobatch-probe ranks --nodes`, reads through srun
 * --label) its node, each line its command writes to its report, its peak, and how it
 * ended. The command's own standard output goes to standard error, so that the launcher reads
 * nothing else. A group
 * that goes over BYTES is killed at once and the task exits 3: srun's --kill-on-bad-exit then
 * ends every other task of the trial. A command that is a launcher (torchrun, accelerate
 * launch) starts workers, one per GPU: each Python process then reports on its own
 * (AUTOBATCH_TRIAL_PER_PROCESS, REPORT.pid.PID), the task's steps are those every worker took,
 * as long as the slowest's, and its peak and the BYTES check are the largest worker's, not
 * the group's sum. TABLE (each node's GPU memory) holds it to its own node's instead of BYTES
 * when it names the node. With --gpu (a GPU device) its memory is what NVML sees its
 * processes hold on the GPUs Slurm bound to the task, the most any one GPU holds (a worker's:
 * its own), or what its step hook reported (PyTorch's reserved peak) when more. With
 * --stop-on-eof (the launcher's srun --input=all), the end of its standard input is the
 * launcher's stop: the task ends its command and removes its report directory itself, where
 * a step's cancellation (SIGKILL) would leave both (the next task on the node removes what it
 * left: setup); a task that failed
 * waits for that stop (up to LINGER_S) before it exits non-zero, which --kill-on-bad-exit
 * answers with SIGKILL for the others. Not meant to be run by hand.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "error.h"
#include "gpu_models.h"
#include "group_memory.h"
#include "number.h"
#include "nvml.h"
#include "presets.h"
#include "protocol.h"
#include "subprocess.h"
#include "trial_container.h"
#include "trial_files.h"
#include "trial_report.h"

#define POLL_NS 50000000L
#define TASK_OVER_STATUS 3
#define WORKERS_MAX 64
#define LINGER_S 10 /* a failed task's wait for the launcher's stop */

/* A process of the command that reports on its own (a launcher's worker). */
struct worker {
	pid_t pid;
	struct ab_report_watch w;
};

struct task {
	char **argv;
	char dir[PATH_MAX], report[PATH_MAX + 16];
	int lock; /* on dir while the task runs: a task that finds it unlocked removes it */
	struct ab_report_watch base; /* its report, read as it is written */
	uint64_t said;  /* the peak last said */
	struct ab_proc proc;
	struct ab_group_peak group;
	uint64_t peak;
	struct worker workers[WORKERS_MAX];
	size_t nworkers;
	size_t merged;  /* steps every worker took, said */
	bool oom_said;
	struct ab_merge_said evidence; /* the workers' evidence beyond their steps, relayed */
	bool stop_on_eof; /* the end of standard input is the launcher's stop */
	bool launcher;    /* the command is a framework launcher (torchrun): see task_peak */
	/* --gpu: its processes' memory on the GPUs Slurm bound to the task, not their resident
	 * memory; each process's largest on one GPU, and the most one GPU held of them all */
	struct ab_nvml *nv;
	pid_t gpu_pid[AB_GROUP_TRACKED + 1];
	uint64_t gpu_max[AB_GROUP_TRACKED + 1];
	size_t ngpu;
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void task_body(void *arg)
{
	const struct task *t = arg;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC); /* dup2's copy stays open */

	/* and their twins, for a container named in the command (trial_container.h) */
	if (ab_trial_container_setenv(AB_ENV_TRIAL_REPORT, t->report) < 0 ||
	    ab_trial_container_setenv(AB_ENV_TRIAL_PER_PROCESS, "1") < 0)
		_exit(127);
	/* the task's standard input is the launcher's, its end a stop: not the command's */
	if (null < 0 || dup2(null, 0) < 0 || dup2(2, 1) < 0)
		_exit(127);
	execvp(t->argv[0], t->argv);
	dprintf(2, "autobatch-probe task: cannot run %s: %s\n", t->argv[0], strerror(errno));
	_exit(127);
}

/* One protocol line on standard output, in one write: srun relays it whole. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char line[AB_REPORT_MAX_LINE + 64];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line) - 1)
		return;
	line[n] = '\n';
	(void)!write(1, line, (size_t)n + 1);
}

/* Each line of a run of whole lines its command appended to its report, as it is; read too
 * on a GPU, where its step hook's peak (PyTorch's reserved memory) counts. */
static void say_lines(void *arg, const char *buf, size_t len)
{
	struct task *t = arg;

	if (t->nv)
		ab_trial_report_feed(buf, len, &t->base.rep);
	for (const char *end = buf + len, *nl; buf < end; buf = nl + 1) {
		nl = memchr(buf, '\n', (size_t)(end - buf));
		nl = nl ? nl : end;
		if (nl > buf)
			say("%s %.*s", AB_TASK_REPORT, (int)(nl - buf), buf);
	}
}

/* The lines its command appended to its report since the last call, each relayed once (a
 * line too long to be a report line is dropped: the launcher's parser would count it bad). */
static void relay_report(struct task *t, int final)
{
	ab_report_watch_lines(&t->base, final, say_lines, t);
}

/* The largest process pid held: on its GPUs (--gpu), or of host memory as the group's
 * sampling kept it. */
static uint64_t process_max(const struct task *t, pid_t pid)
{
	for (size_t i = 0; t->nv && i < t->ngpu; i++)
		if (t->gpu_pid[i] == pid)
			return t->gpu_max[i];
	for (size_t i = 0; !t->nv && i < t->group.n; i++)
		if (t->group.pid[i] == pid)
			return t->group.max[i];
	return 0;
}

/* A worker's own memory: what sampling kept for its process, or what it reported (its
 * resident high-water mark, or CUDA's reserved peak), the larger. */
static uint64_t worker_peak(const struct task *t, const struct worker *k)
{
	return ab_trial_report_peak_over(&k->w.rep, process_max(t, k->pid));
}

/* One sample of its processes on the GPUs (the group's sampling has just found them: the
 * leader, its group, the descendants that left it): the most one GPU holds of them now. */
static uint64_t gpu_sample(struct task *t)
{
	pid_t pids[AB_GROUP_TRACKED + 1];
	uint64_t each[AB_GROUP_TRACKED + 1], now;
	size_t n = ab_group_pids(&t->group, pids);

	now = ab_nvml_pids_usage(t->nv, pids, n, each);
	for (size_t k = 0; k < n; k++) {
		size_t i = 0;

		while (i < t->ngpu && t->gpu_pid[i] != pids[k])
			i++;
		if (i == t->ngpu && t->ngpu < AB_GROUP_TRACKED + 1)
			t->gpu_pid[t->ngpu++] = pids[k], t->gpu_max[i] = 0;
		if (i < t->ngpu && each[k] > t->gpu_max[i])
			t->gpu_max[i] = each[k];
	}
	return now;
}

/* On a GPU, before its workers report: the most any one of its processes held. */
static uint64_t largest_gpu_process(const struct task *t)
{
	uint64_t p = 0;

	for (size_t i = 0; i < t->ngpu; i++)
		p = t->gpu_max[i] > p ? t->gpu_max[i] : p;
	return p;
}

/* True when each of the command's processes is a worker with a GPU of its own in the real
 * step: a launcher by name from its start, any command once two processes report. */
static bool per_worker(const struct task *t)
{
	return t->launcher || t->nworkers > 1;
}

/* The task's peak: its group's, or with several workers the largest worker's (each has a
 * GPU of its own in the real step; the launcher's own process holds none). A framework
 * launcher's task counts so from the start, before its workers' reports come, by each
 * process's own high-water mark: the group's sum in that window (the launcher and both of
 * torchrun's workers: 930 MiB where its largest worker held 591) is no GPU's. */
static uint64_t task_peak(struct task *t)
{
	uint64_t p = !t->launcher ? 0 : t->nv ? largest_gpu_process(t) : t->group.single_max;

	if (t->nv && !per_worker(t)) /* the most one GPU held, or its hook's reserved peak */
		return ab_trial_report_peak_over(&t->base.rep, t->peak);
	if (per_worker(t)) {
		for (size_t i = 0; i < t->nworkers; i++)
			if (worker_peak(t, &t->workers[i]) > p)
				p = worker_peak(t, &t->workers[i]);
		return p;
	}
	p = ab_group_peak_bytes(&t->group, (uint64_t)t->proc.ru.ru_maxrss * 1024);
	return p > t->peak ? p : t->peak;
}

/* Workers that began to report since the last call ("report.pid.PID" beside the report). */
static void find_workers(struct task *t)
{
	DIR *d = t->nworkers < WORKERS_MAX ? opendir(t->dir) : NULL;
	struct dirent *e;

	while (d && (e = readdir(d)) && t->nworkers < WORKERS_MAX) {
		char path[PATH_MAX + 300];
		long pid;
		bool known = false;

		if (strncmp(e->d_name, "report.pid.", 11) ||
		    ab_parse_whole(e->d_name + 11, 1, INT_MAX, &pid) < 0)
			continue;
		for (size_t i = 0; i < t->nworkers; i++)
			known |= t->workers[i].pid == (pid_t)pid;
		if (known)
			continue;
		snprintf(path, sizeof(path), "%s/%s", t->dir, e->d_name);
		t->workers[t->nworkers].pid = (pid_t)pid;
		if ((t->workers[t->nworkers].w.fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) >= 0)
			t->nworkers++;
	}
	if (d)
		closedir(d);
}

/* The steps every worker took, each as long as its slowest worker's and with the longest
 * batch any had; an OOM in any; their lengths, allocator retries and evaluation (as a step's
 * ranks, trial_report.h). */
static void relay_workers(struct task *t, int final)
{
	const struct ab_trial_report *v[WORKERS_MAX];
	size_t common = SIZE_MAX, evidence;
	char lines[512], said[48];

	find_workers(t);
	for (size_t i = 0; i < t->nworkers; i++) {
		struct ab_trial_report *r = &t->workers[i].w.rep;

		ab_report_watch_read(&t->workers[i].w, final);
		v[i] = r;
		common = r->steps < common ? r->steps : common;
		if (r->oom && !t->oom_said) {
			say("%s {\"oom\": true, \"%s\": %llu}", AB_TASK_REPORT, AB_FIELD_FLOOR,
			    (unsigned long long)(r->floor_bytes > worker_peak(t, &t->workers[i])
						     ? r->floor_bytes
						     : worker_peak(t, &t->workers[i])));
			t->oom_said = true;
		}
	}
	for (; t->nworkers && t->merged < common; t->merged++) {
		double slowest = 0, samples = 0;
		long length = ab_trial_merge_length(v, t->nworkers);

		/* the task's step is every worker's: their samples add up (0, unknown, when one
		 * worker's report has none: the launcher then counts the batch) */
		for (size_t i = 0; i < t->nworkers; i++) {
			double n = t->workers[i].w.rep.samples[t->merged];

			if (t->workers[i].w.rep.step_s[t->merged] > slowest)
				slowest = t->workers[i].w.rep.step_s[t->merged];
			samples = samples >= 0 && n > 0 ? samples + n : -1;
		}
		said[0] = '\0';
		if (length)
			snprintf(said, sizeof(said), ", \"length\": %ld", length);
		say("%s {\"step_s\": %.9f, \"samples\": %.0f%s}", AB_TASK_REPORT, slowest,
		    samples > 0 ? samples : 0, said);
	}
	if (t->nworkers && (evidence = ab_trial_merge_evidence(v, t->nworkers, &t->evidence, lines,
							       sizeof(lines))))
		say_lines(t, lines, evidence);
}

static void say_peak(struct task *t)
{
	uint64_t p = task_peak(t);

	if (p != t->said)
		say("%s %llu", AB_TASK_PEAK, (unsigned long long)(t->said = p));
}

/* Waits up to wait_ms for the launcher's stop: its end of our standard input closed (what
 * comes before is read and dropped). Without --stop-on-eof, a sleep. */
static bool launcher_stopped(const struct task *t, int wait_ms)
{
	struct pollfd p = {0, POLLIN, 0};
	char buf[512];

	if (!t->stop_on_eof) {
		nanosleep(&(struct timespec){wait_ms / 1000, (wait_ms % 1000) * 1000000L}, NULL);
		return false;
	}
	while (poll(&p, 1, wait_ms) > 0) {
		if (!(p.revents & POLLIN))
			return true; /* POLLHUP, POLLERR, POLLNVAL */
		if (read(0, buf, sizeof(buf)) <= 0)
			return true;
	}
	return false;
}

/* A failed task under a launcher that stops it: the launcher, which read why, stops every
 * task at once (0); else, after LINGER_S, status itself. */
static int linger(const struct task *t, int status)
{
	if (!t->stop_on_eof || status == 0 || stop_signal)
		return status;
	for (int i = 0; i < LINGER_S * 10 && !stop_signal; i++)
		if (launcher_stopped(t, 100))
			return 0;
	return status;
}

/* After the command's process ended: what is left of its group, their descendants that left
 * it (a launcher's workers in sessions of their own) and those re-parented to us (the
 * task is their subreaper), killed and reaped. */
static void end_leftovers(pid_t leader)
{
	ab_group_kill(leader);
	ab_group_reap_escaped(0, leader);
}

/* Runs until the command ends, goes over, the launcher stops it or a signal comes; the task's
 * exit status. */
static int watch(struct task *t, uint64_t capacity)
{
	for (;;) {
		uint64_t now = ab_group_sample(&t->group);
		int st;

		if (t->nv)
			now = gpu_sample(t);
		t->peak = now > t->peak ? now : t->peak;
		relay_report(t, 0);
		relay_workers(t, 0);
		say_peak(t);
		if (per_worker(t))
			now = task_peak(t);
		if (capacity && now > capacity) {
			ab_group_kill(t->proc.pid);
			say("%s %llu", AB_TASK_OVER, (unsigned long long)now);
			return TASK_OVER_STATUS;
		}
		if (wait4(t->proc.pid, &st, WNOHANG, &t->proc.ru) == t->proc.pid) {
			end_leftovers(t->proc.pid); /* what it left behind */
			relay_report(t, 1);
			relay_workers(t, 1);
			say_peak(t);
			say("%s %s %d", AB_TASK_END, WIFSIGNALED(st) ? "signal" : "status",
			    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			t->proc.pid = 0;
			return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
		}
		if (stop_signal)
			return 128 + stop_signal;
		if (launcher_stopped(t, (int)(POLL_NS / 1000000)))
			return 0;
	}
}

/* The node Slurm ran this task on (its slurmd's name), or this host's name. */
static const char *own_node(char *host, size_t len)
{
	const char *name = getenv("SLURMD_NODENAME");

	if (name && *name)
		return name;
	host[0] = '\0';
	gethostname(host, len - 1);
	host[len - 1] = '\0';
	return host;
}

/* Its directory under $TMPDIR, locked, and its report in it. A cancelled trial step's
 * SIGKILL leaves both; the next task on this node removes them (ab_workdir_create_as). */
static int setup(struct task *t, char *err, size_t errlen)
{
	char host[256];
	int fd, rc;

	if ((rc = ab_workdir_create_as(NULL, "autobatch-task", t->dir, sizeof(t->dir), &t->lock,
				       err, errlen)) < 0) {
		t->dir[0] = '\0';
		return rc;
	}
	snprintf(t->report, sizeof(t->report), "%s/report", t->dir);
	fd = open(t->report, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || (t->base.fd = open(t->report, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return ab_fail(err, errlen, -rc, "cannot make its report under %s: %s", t->dir,
			       strerror(-rc));
	}
	close(fd);
	say("%s %s", AB_TASK_NODE, own_node(host, sizeof(host)));
	return 0;
}

void task_usage(FILE *out)
{
	fprintf(out, "usage: autobatch-probe task [--capacity BYTES] [--gpu] [--node-memory TABLE] "
		     "[--stop-on-eof] -- COMMAND [ARGS...]\n"
		     "  (one task of a trial step; run --ranks N --step-nodes LIST runs it)\n");
}

int cmd_task(int argc, char **argv)
{
	struct task t = {.base.fd = -1, .lock = -1};
	struct ab_node_memory table = {0};
	long cap = 0;
	uint64_t own;
	char err[256], host[256];
	int i = 1, rc;

	for (; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--stop-on-eof"))
			t.stop_on_eof = true;
		else if (!strcmp(argv[i], "--gpu") && !t.nv) {
			if (ab_nvml_open(NULL, &t.nv, err, sizeof(err)) < 0)
				return fprintf(stderr, "autobatch-probe task: --gpu on %s: %s\n",
					       own_node(host, sizeof(host)), err), 1;
		}
		else if (!strcmp(argv[i], "--node-memory") && i + 1 < argc) {
			if (ab_node_memory_parse(argv[++i], &table, err, sizeof(err)) < 0)
				return fprintf(stderr, "autobatch-probe task: %s\n", err), 2;
		} else if (strcmp(argv[i], "--capacity") || ++i >= argc ||
			   ab_parse_whole(argv[i], 1, LONG_MAX, &cap) < 0)
			goto usage;
	/* its own node's memory, where the table names it */
	if ((own = ab_node_memory_of(&table, own_node(host, sizeof(host)))))
		cap = (long)own;
	if (i >= argc - 1)
		goto usage;
	t.argv = argv + i + 1;
	t.launcher = ab_launcher_name(argc - i - 1, t.argv) != NULL;
	/* what leaves the command's group and outlives its parent comes back to us, not to
	 * init: none outlives the task */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGHUP, on_signal);
	if (setup(&t, err, sizeof(err)) < 0) {
		fprintf(stderr, "autobatch-probe task: %s\n", err);
		rc = 1;
		goto out;
	}
	if (ab_proc_start(&t.proc, AB_PROC_GROUP | AB_PROC_PDEATHSIG, task_body, &t, err,
			  sizeof(err)) < 0) {
		fprintf(stderr, "autobatch-probe task: %s\n", err);
		rc = 1;
		goto out;
	}
	t.group.leader = t.proc.pid;
	rc = watch(&t, (uint64_t)cap);
	if (t.proc.pid > 0) {
		ab_group_kill(t.proc.pid); /* the command, its group and what left it */
		waitpid(t.proc.pid, NULL, 0);
		ab_group_reap_escaped(0, t.proc.pid); /* what was re-parented to us meanwhile */
	}
out:
	if (t.base.fd >= 0)
		close(t.base.fd);
	for (size_t k = 0; k < t.nworkers; k++)
		close(t.workers[k].w.fd);
	if (t.dir[0])
		ab_trial_tree_remove(t.dir);
	if (t.lock >= 0)
		close(t.lock);
	ab_nvml_close(t.nv);
	return linger(&t, rc);
usage:
	task_usage(stderr);
	return 2;
}
