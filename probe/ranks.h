/* ranks.h - one trial's ranks (autobatch-probe ranks): what cmd_ranks.c (ranks on this
 * node, the command line) and ranks_step.c (the trial as a Slurm step of this job) share.
 */
#ifndef AUTOBATCH_PROBE_RANKS_H
#define AUTOBATCH_PROBE_RANKS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpu_models.h"
#include "group_memory.h"
#include "nvml.h"
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

/* The ranks' step lines, merged into the trial's report as they come (the slowest rank's). */
void ranks_merge_steps(struct ranks *rs);
/* The ranks all ended well: their steps and peaks into the trial's report; 0. */
int ranks_finish_ok(struct ranks *rs);
/* Rank i failed (or went over: over, its bytes): the others stopped at once, the trial told
 * why; the exit status. */
int ranks_finish_failed(struct ranks *rs, int i, uint64_t over);
/* " (on NODE)" for a rank of a trial step, "" for one on this node. */
const char *ranks_where(const struct rank *r, char *buf, size_t len);

/* The user's container (pyxis), for a trial step: on when the step that probes runs in one. */
struct ranks_container {
	bool on;
	char mounts[8192]; /* the user's, then this program's files, the hook, the config copy */
	size_t len;
	char loader[NAME_MAX + 1], self[NAME_MAX + 1]; /* their names inside */
};

struct ab_argv;
/* An id the environment holds in name (the srun that probes: its pid, the guard its probe
 * step carries; the job's id), digits only, else "0" (ranks_step.c). */
const char *ranks_env_id(const char *name);
/* The user's container options given back (its name and save kept for the user's step),
 * with what the trial's task needs mounted beside the user's mounts; 1 when the trial runs
 * in a container, 0 when not, or -errno with err (ranks_container.c). */
int ranks_container_args(struct ab_argv *a, struct ranks_container *c, char *err,
			 size_t errlen);
/* The task's command inside: this program through the host's loader. */
void ranks_container_command(struct ab_argv *a, const struct ranks_container *c);
/* In srun's child: the carried entries out of its environment, pyxis' own variables back. */
void ranks_container_environ(const struct ranks_container *c);

/* --nodes: the trial step started by srun over the nodes (0, or -1 said); one poll of its
 * tasks' lines (-1 while it runs, else the exit status); and its stop (ranks_step.c). */
int ranks_step_start(struct ranks *rs);
int ranks_step_poll(struct ranks *rs);
void ranks_step_stop(struct ranks *rs);

#endif
