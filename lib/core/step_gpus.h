/* step_gpus.h - the real step's GPU request, read from its Slurm record (its TRES fields), as
 * the srun options that give each trial step the same GPUs per task, node and step; and the
 * check the probe makes of such an option before it hands it to srun.
 */
#ifndef AUTOBATCH_STEP_GPUS_H
#define AUTOBATCH_STEP_GPUS_H

#include <stdbool.h>
#include <stddef.h>

#define AB_STEP_OPTIONS_MAX 5 /* one of each: per task, per node, per step, binding, CPUs */
#define AB_STEP_OPTION_LEN 160

struct ab_step_gpus {
	char opt[AB_STEP_OPTIONS_MAX][AB_STEP_OPTION_LEN]; /* "--gpus-per-task=1", ... */
	int n;
};

/* The step's TRES request as Slurm keeps it (any may be NULL or ""): per task, per node, per
 * step ("gres:gpu:2,cpu:4" in 22.05, "gres/gpu:a100:2" later), its binding ("gpu:closest")
 * and CPUs per GPU. What is not a GPU (cpu, other GRES per task or step) is left out: the
 * trial step gets the job's default for it, as the real step would without it. */
int ab_step_gpus_from_tres(const char *per_task, const char *per_node, const char *per_step,
			   const char *bind, const char *cpus_per_tres, struct ab_step_gpus *out,
			   char *err, size_t errlen);

/* The step's GPUs in all, from those options: per task x ntasks, per node x nnodes, or per
 * step; 0 when they say none. */
unsigned ab_step_gpus_count(const struct ab_step_gpus *g, unsigned ntasks, unsigned nnodes);

/* True for one option that ab_step_gpus_from_tres makes: a known srun option, "=", and a
 * value of letters, digits and "_:,.-" only. */
bool ab_step_option_ok(const char *opt);

#endif
