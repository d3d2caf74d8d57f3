/* srun_gpus.h - srun side: a step's nodes (how many) and their GPU models as slurmctld knows
 * them, and for a step that spans several models, each one's memory measured on one node.
 */
#ifndef AUTOBATCH_SRUN_GPUS_H
#define AUTOBATCH_SRUN_GPUS_H

#include <signal.h>
#include <stddef.h>

#include "gpu_models.h"
#include "srun_apply.h"

/* How many nodes a Slurm host list names; 0 when it cannot be read. */
unsigned ab_srun_node_count(const char *nodelist);

/* The step's nodes' GPU models from each node's GRES (one RPC to slurmctld per node up to a
 * few nodes, one for all beyond). A node slurmctld does not describe makes the set unsure
 * (m->unknown), which keys the cache by node names as before. */
void ab_srun_gpu_models(const char *nodelist, struct ab_gpu_models *m);

/* A step over several GPU models: each model's memory from a short step on one of its nodes;
 * the probe then runs on the smallest (pl->job.probe_node), and one line says so. 0 (nothing
 * to do for one model), or a negative errno with err. */
int ab_srun_smallest_gpu(struct ab_plan *pl, const volatile sig_atomic_t *stop, char *err,
			 size_t errlen);

#endif
