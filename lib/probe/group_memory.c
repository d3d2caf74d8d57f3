/* group_memory.c - a process group's memory from /proc (see group_memory.h). */
#include "group_memory.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

/* /proc/PID/NAME into buf, NUL-terminated; its length, or -1 (the process is gone). */
static ssize_t read_proc(long pid, const char *name, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/%s", pid, name);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* A process's parent, process group and resident pages, from /proc/PID/stat. */
static int read_stat(long pid, long *ppid, long *pgrp, long *rss)
{
	char buf[1024], *p;

	if (read_proc(pid, "stat", buf, sizeof(buf)) < 0)
		return -1;
	/* after "pid (comm)", which may hold anything: state ppid pgrp ... rss is field 24 */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %ld %ld %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
			  "%*d %*d %*u %*u %ld",
		   ppid, pgrp, rss) != 3)
		return -1;
	return 0;
}

/* The sum, in bytes, of the "FIELD...: N kB" lines of a /proc file whose name starts with
 * field; 0 when the process is gone. */
static uint64_t proc_kib(long pid, const char *name, const char *field)
{
	char buf[4096], key[32], *p;
	unsigned long long kib, total = 0;

	if (read_proc(pid, name, buf, sizeof(buf)) < 0)
		return 0;
	snprintf(key, sizeof(key), "\n%s", field);
	for (p = buf; (p = strstr(p, key)); p++)
		if (strchr(p, ':') && sscanf(strchr(p, ':') + 1, " %llu kB", &kib) == 1)
			total += kib;
	return (uint64_t)total * 1024;
}

/* The memory only this process holds and wrote: a forked worker shares the pages of its
 * parent's libraries and heap, which its resident size would count a second time. Clean
 * private pages are files' (libraries) mapped by no other process at the moment: a helper
 * that outlives the trainer (Python's forkserver) would otherwise count all of torch's
 * libraries again the instant the trainer exits (measured: 163 MiB, then 269 MiB). */
static uint64_t read_private(long pid)
{
	return proc_kib(pid, "smaps_rollup", "Private_Dirty:");
}

/* True when pid runs in its parent's memory: a vfork()ed child before its exec (Python's
 * subprocess and multiprocessing start helpers so), whose "private" pages are its parent's,
 * counted already (measured: a resource tracker read 6 MiB, then 235 MiB, in one run of
 * eight). kcmp(2) answers exactly; without it, no process is taken for such a child. */
static bool same_memory(pid_t pid, pid_t parent)
{
	return parent > 0 && syscall(SYS_kcmp, pid, parent, KCMP_VM, 0, 0) == 0;
}

/* A process's own peak resident memory, kept by the kernel: no sample misses it. */
static uint64_t read_hwm(long pid)
{
	return proc_kib(pid, "status", "VmHWM:");
}

/* A member's own memory. One forked from another member without exec (a worker of Python's
 * forkserver), or one that has such children (the forkserver), shares its dirty pages with
 * them: each is counted by its proportional share (Pss_Dirty), so the family's pages count
 * once whether its members live or not. Any other member (a worker forked by the leader,
 * whose shared pages are in the leader's resident size; a helper the leader started) counts
 * what only it wrote (Private_Dirty). A kernel without Pss_Dirty gives Private_Dirty. */
static uint64_t member_bytes(long pid, bool family)
{
	uint64_t pss = family ? proc_kib(pid, "smaps_rollup", "Pss_Dirty:") : 0;

	return pss ? pss : read_private(pid);
}

struct member {
	pid_t pid, ppid;
	long rss; /* resident pages, from stat */
};

static bool in_members(const struct member *m, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].pid == pid)
			return true;
	return false;
}

static bool has_member_child(const struct member *m, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].ppid == pid)
			return true;
	return false;
}

/* Member pid's index in the table; g->n when it has none. */
static size_t member_index(const struct ab_group_peak *g, pid_t pid)
{
	size_t i = 0;

	while (i < g->n && g->pid[i] != pid)
		i++;
	return i;
}

/* Member pid's index in the table, taking a free slot for a new one; g->n when the table is
 * full (the caller then counts it in the sample's sum). */
static size_t member_slot(struct ab_group_peak *g, pid_t pid)
{
	size_t i = member_index(g, pid);

	if (i == g->n && g->n < AB_GROUP_TRACKED) {
		g->pid[g->n++] = pid;
		g->own[i] = 0, g->rss_read[i] = -1;
	}
	return i;
}

/* A tracked member's own memory this sample: read afresh (member_bytes) when asked, when
 * its resident size moved by more than 1/32 or 1 MiB since the last read, else that read's
 * answer. Resident size is free to know (stat, read for every process anyway). */
static uint64_t member_own(struct ab_group_peak *g, size_t i, const struct member *m,
			   bool family, bool fresh, long page)
{
	long moved = m->rss - g->rss_read[i], slack = g->rss_read[i] / 32;

	slack = slack > (1L << 20) / page ? slack : (1L << 20) / page;
	if (fresh || g->rss_read[i] < 0 || moved > slack || -moved > slack) {
		g->own[i] = member_bytes(m->pid, family);
		g->rss_read[i] = m->rss;
	}
	return g->own[i];
}

/* Whether this sample reads every member afresh: every AB_GROUP_REREAD samples, and when
 * a member came or went (a family's shares move to its others as one exits, with no
 * change in their resident sizes). */
static bool reread_all(struct ab_group_peak *g, const struct member *m, size_t n)
{
	bool changed = n != g->live;

	for (size_t i = 0; i < n && !changed; i++)
		changed = member_index(g, m[i].pid) == g->n;
	g->live = n;
	return changed || g->samples % AB_GROUP_REREAD == 0;
}

/* One process of /proc: whether it is the trial's is known once all are read. */
struct row {
	pid_t pid, ppid;
	long pgrp, rss;
	bool trial;
};

/* Every process's row, in /proc's order (ascending pids); NULL when /proc cannot be read. */
static struct row *read_rows(size_t *n)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	struct row *rows = NULL, *more;
	size_t cap = 0;
	long ppid, pgrp, rss;

	*n = 0;
	while (d && (e = readdir(d))) {
		pid_t pid = (pid_t)atol(e->d_name);

		if (e->d_name[0] < '0' || e->d_name[0] > '9' || read_stat(pid, &ppid, &pgrp, &rss) < 0)
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 512;
			if (!(more = realloc(rows, cap * sizeof(*rows))))
				break;
			rows = more;
		}
		rows[(*n)++] = (struct row){pid, (pid_t)ppid, pgrp, rss, false};
	}
	if (d)
		closedir(d);
	return rows;
}

static const struct row *find_row(const struct row *rows, size_t n, pid_t pid)
{
	size_t lo = 0, hi = n;

	while (lo < hi) { /* rows ascend by pid */
		size_t mid = lo + (hi - lo) / 2;

		if (rows[mid].pid == pid)
			return &rows[mid];
		if (rows[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = 0; i < n; i++) /* a /proc not in order */
		if (rows[i].pid == pid)
			return &rows[i];
	return NULL;
}

/* The rows of the trial's processes seen at the last sample (g->nseen > 0), those still there
 * with the same parent (a pid reused meanwhile is not the trial's), all marked the trial's;
 * NULL when none is left or on no memory, and the caller scans /proc instead. */
static struct row *read_seen(const struct ab_group_peak *g, size_t *n)
{
	struct row *rows = calloc(g->nseen, sizeof(*rows));
	long ppid, pgrp, rss;

	*n = 0;
	for (size_t i = 0; rows && i < g->nseen; i++)
		if (read_stat(g->seen[i], &ppid, &pgrp, &rss) == 0 && ppid == g->seen_ppid[i])
			rows[(*n)++] = (struct row){g->seen[i], (pid_t)ppid, pgrp, rss, true};
	if (rows && !*n) {
		free(rows);
		rows = NULL;
	}
	return rows;
}

/* Keeps the trial's rows for read_seen; none (so the next sample scans) when they are more
 * than fit. */
static void keep_seen(struct ab_group_peak *g, const struct row *rows, size_t n)
{
	size_t k = 0, cap = sizeof(g->seen) / sizeof(g->seen[0]);

	for (size_t i = 0; i < n; i++)
		if (rows[i].trial && k < cap)
			g->seen[k] = rows[i].pid, g->seen_ppid[k++] = rows[i].ppid;
		else if (rows[i].trial)
			k = cap + 1;
	g->nseen = k <= cap ? k : 0;
}

/* Marks the trial's processes: the leader's group and every descendant of a member that
 * left it. PyTorch 2's torchrun starts each worker in a session of its own
 * (start_new_session=True): by group alone, its workers' memory went unseen until their
 * step reports, and a SIGKILL to the group left them running. Parents mostly come first in
 * pid order, so this takes one pass and a check, more only after pids wrapped. */
static void mark_trial(struct row *rows, size_t n, pid_t leader, bool tree_only)
{
	bool changed = true;

	for (size_t i = 0; i < n; i++)
		rows[i].trial = rows[i].pid == leader || (!tree_only && rows[i].pgrp == (long)leader);
	while (changed) {
		changed = false;
		for (size_t i = 0; i < n; i++) {
			const struct row *parent;

			if (rows[i].trial || !(parent = find_row(rows, n, rows[i].ppid)) ||
			    !parent->trial)
				continue;
			rows[i].trial = changed = true;
		}
	}
}

/* One sample of the trial led by g->leader (its group and the descendants that left it, see
 * mark_trial; DataLoader workers, a launcher's workers): the leader's resident memory plus
 * the other members' own (member_bytes); returns that sum and keeps the leader's largest,
 * each member's largest, and the largest one-sample sum of the forked families (whose shares
 * move between members as they come and go) and of members beyond the table. */
static uint64_t scan_processes(struct ab_group_peak *g)
{
	struct member m[4 * AB_GROUP_TRACKED];
	uint64_t total = 0, members = 0, shared = 0, page = (uint64_t)sysconf(_SC_PAGESIZE);
	size_t n = 0, nrows;
	struct row *rows = NULL;
	bool fresh;

	if (g->samples % AB_GROUP_RESCAN && g->nseen)
		rows = read_seen(g, &nrows);
	if (!rows && (rows = read_rows(&nrows)))
		mark_trial(rows, nrows, g->leader, g->tree_only);
	if (!rows)
		return 0;
	keep_seen(g, rows, nrows);
	for (size_t i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];

		if (r->pid == g->leader) {
			uint64_t own = (uint64_t)r->rss * page, hwm = read_hwm(r->pid);

			total += own;
			g->leader_max = hwm > g->leader_max ? hwm : g->leader_max;
			g->leader_max = own > g->leader_max ? own : g->leader_max;
		} else if (r->trial && r->rss > 0 && n < sizeof(m) / sizeof(m[0]) &&
			   !same_memory(r->pid, r->ppid)) {
			m[n++] = (struct member){r->pid, r->ppid, r->rss};
		}
	}
	free(rows);
	fresh = reread_all(g, m, n);
	for (size_t i = 0; i < n; i++) {
		bool family = has_member_child(m, n, m[i].pid) ||
			      (m[i].ppid != g->leader && in_members(m, n, m[i].ppid));
		size_t j = member_slot(g, m[i].pid);
		uint64_t own = j < g->n ? member_own(g, j, &m[i], family, fresh, (long)page)
					: member_bytes(m[i].pid, family),
			 hwm = read_hwm(m[i].pid);

		members += own;
		if (j < g->n) {
			g->max[j] = own > g->max[j] ? own : g->max[j];
			g->family[j] = g->family[j] || family;
		}
		if (j == g->n || family)
			shared += own;
		g->single_max = hwm > g->single_max ? hwm : g->single_max;
	}
	g->shared_max = shared > g->shared_max ? shared : g->shared_max;
	g->samples++;
	return total + members;
}

uint64_t ab_group_sample(struct ab_group_peak *g)
{
	return g->leader > 0 ? scan_processes(g) : 0;
}

void ab_group_sample_leader(struct ab_group_peak *g)
{
	uint64_t hwm = g->leader > 0 ? read_hwm(g->leader) : 0;

	g->leader_max = hwm > g->leader_max ? hwm : g->leader_max;
}

void ab_group_kill(pid_t leader)
{
	size_t n;
	struct row *rows;

	if (leader <= 0)
		return;
	/* who is the trial's is read first: once its members die, their children that left
	 * the group are re-parented and no longer descend from it */
	rows = read_rows(&n);
	kill(-leader, SIGKILL);
	if (rows)
		mark_trial(rows, n, leader, false);
	for (size_t i = 0; rows && i < n; i++)
		if (rows[i].trial && rows[i].pgrp != (long)leader)
			kill(rows[i].pid, SIGKILL);
	free(rows);
}

/* How long the members of a killed group may take to die (a process freeing gigabytes takes
 * a while) before what they leave is given up on. */
#define REAP_WAIT_S 5.0

void ab_group_reap_escaped(pid_t keep, pid_t group)
{
	double until = ab_now() + REAP_WAIT_S;

	for (;;) {
		size_t n;
		struct row *rows = read_rows(&n);
		bool left = false;

		for (size_t i = 0; rows && i < n; i++) {
			if (rows[i].ppid == getpid() && rows[i].pid != keep) {
				kill(rows[i].pid, SIGKILL);
				waitpid(rows[i].pid, NULL, 0);
				left = true; /* its own children come to us next */
			} else if (group > 0 && rows[i].pgrp == (long)group) {
				left = true; /* a member still dying: its children come to us after */
			}
		}
		free(rows);
		if (!rows || !left || ab_now() > until)
			return;
		nanosleep(&(struct timespec){0, 2000000}, NULL);
	}
}

/* The leader's peak (its kernel-kept high-water mark: no sample misses it), each other
 * member's largest (steady from run to run: a worker's prefetched batches come and go between
 * samples, their largest does not), and the families' largest one-sample sum (a member's
 * share grows as its family's others exit: each one's largest would count the shared pages
 * again). A member's own pages are sampled, so a peak it frees within one sample period (a
 * trainer started by a shell, which allocates, steps and frees) can fall between samples:
 * the group held at least any one process's kernel-kept high-water mark at some moment (a
 * member's VmHWM; the leader's ru_maxrss, which covers the children it waited for), so the
 * peak is never less than the largest of those (measured: 46 MiB read as 34 MiB under load). */
uint64_t ab_group_peak_bytes(const struct ab_group_peak *g, uint64_t leader_maxrss)
{
	uint64_t total = g->leader_max + g->shared_max;

	for (size_t i = 0; i < g->n; i++)
		if (!g->family[i])
			total += g->max[i];
	total = g->single_max > total ? g->single_max : total;
	return leader_maxrss > total ? leader_maxrss : total;
}

/* A process holding less than this (and 2% of the peak) is a wrapper, not a helper. */
#define HELPER_MIN_BYTES (16ULL << 20)

bool ab_group_helpers(const struct ab_group_peak *g, uint64_t peak)
{
	uint64_t least = peak / 50 > HELPER_MIN_BYTES ? peak / 50 : HELPER_MIN_BYTES;
	int holders = g->leader_max >= least;

	for (size_t i = 0; i < g->n; i++)
		holders += g->max[i] >= least;
	return holders >= 2;
}


size_t ab_group_pids(const struct ab_group_peak *g, pid_t *pids)
{
	size_t n = 0;

	pids[n++] = g->leader;
	for (size_t i = 0; i < g->n; i++)
		if (g->pid[i] != g->leader)
			pids[n++] = g->pid[i];
	return n;
}
