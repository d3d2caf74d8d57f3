/* group_memory.h - how much memory a trial's processes hold, sampled from /proc (its process
 * group and the descendants that left it): the leader's resident memory, each other
 * member's own pages, forked families' shared pages once; and ending all of them.
 */
#ifndef AUTOBATCH_GROUP_MEMORY_H
#define AUTOBATCH_GROUP_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* How a host trial's memory is measured: samples of its process group and the descendants
 * that left it (the leader's resident memory; each other member's own dirty pages, a forked
 * family's shared ones counted once), the leader's and each member's largest kept, families'
 * summed per sample. */
#define AB_GROUP_TRACKED 64
struct ab_group_peak {
	pid_t leader;
	/* the leader and its descendants only, not its group: a Slurm task's process group is
	 * all of its node's tasks of the step (the first one's pid), which a task's watch
	 * (autobatch-probe watch) must not count */
	bool tree_only;
	uint64_t leader_max;
	pid_t pid[AB_GROUP_TRACKED];
	uint64_t max[AB_GROUP_TRACKED]; /* each member's largest */
	bool family[AB_GROUP_TRACKED];  /* shares pages with other members: summed per sample */
	size_t n;
	uint64_t shared_max; /* the largest one-sample sum of families and untracked members */
	uint64_t single_max; /* the largest high-water mark of any one member (VmHWM) */
	/* what each member's last smaps_rollup read gave and its resident pages then: that
	 * read walks every page the process maps (22 ms a sample for four processes sharing
	 * 400 MiB), so it is repeated only when the member's resident size moved, the members
	 * changed, or every AB_GROUP_REREAD samples */
	uint64_t own[AB_GROUP_TRACKED];
	long rss_read[AB_GROUP_TRACKED];
	unsigned samples;
	size_t live; /* members alive at the last sample */
	/* the trial's processes at the last sample: between scans of all of /proc (every
	 * AB_GROUP_RESCAN samples; each reads every process's stat, 14 us apiece) only these
	 * are read again, so a new member is seen within that many samples */
	pid_t seen[4 * AB_GROUP_TRACKED], seen_ppid[4 * AB_GROUP_TRACKED];
	size_t nseen;
};

/* Every this many samples all of /proc is scanned for the trial's new processes. */
#define AB_GROUP_RESCAN 4

/* Every this many samples each member's own memory is read afresh even when its resident
 * size stayed: pages it inherited and now writes (copy-on-write) move to it without that
 * size changing. */
#define AB_GROUP_REREAD 8

/* One sample; returns the group's memory now. */
uint64_t ab_group_sample(struct ab_group_peak *g);

/* Between samples: the leader's own high-water mark alone (one read of its status), into its
 * peak. It holds the leader's whole peak once read after it, so a few such reads catch a
 * process that lives shorter than a sample period. */
void ab_group_sample_leader(struct ab_group_peak *g);

/* The group's processes at the last sample, the leader first, into pids (room for
 * AB_GROUP_TRACKED + 1): those whose GPU memory NVML is asked for. Returns how many. */
size_t ab_group_pids(const struct ab_group_peak *g, pid_t *pids);

/* The peak to judge: the leader's (its high-water mark), each other member's largest, and
 * the families' largest one-sample sum; never less than one process's own high-water mark
 * (any member's VmHWM, or leader_maxrss: the leader's and its waited-for children's). */
uint64_t ab_group_peak_bytes(const struct ab_group_peak *g, uint64_t leader_maxrss);

/* True when at least two processes of the group each held a real share of its peak (a
 * trainer and its DataLoader workers), not a shell and its one child. */
bool ab_group_helpers(const struct ab_group_peak *g, uint64_t peak);

/* SIGKILL to the trial led by leader: its process group and the members' descendants that
 * left it (setsid), which a signal to the group misses. */
void ab_group_kill(pid_t leader);

/* Kills and reaps every child of ours but keep (0: none): after a trial, its descendants that
 * left its group (setsid) and were re-parented to us, their subreaper. Until no member of
 * the killed group (0: none) is left, and no child of ours but keep: a member's escaped
 * children are ours only once it has died, and theirs once they have. */
void ab_group_reap_escaped(pid_t keep, pid_t group);

#endif
