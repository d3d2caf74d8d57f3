/* srun_gpus.c - the GPU models of a step's nodes (srun_gpus.h): Slurm's view of each node's
 * GRES, then the memory of each model measured where it is.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "srun_gpus.h"

#include "context.h"
#include "error.h"
#include "probe_step.h"
#include "size.h"

#define SINGLE_MAX 8 /* up to this many nodes, a small RPC each; beyond, one for them all */

static void add_node(struct ab_gpu_models *m, const node_info_t *n)
{
	ab_gpu_models_add(m, n->name, n->gres);
}

/* How many nodes the list names (0: unknown). */
unsigned ab_srun_node_count(const char *nodelist)
{
	__typeof__(slurm_hostlist_create(NULL)) hl = nodelist ? slurm_hostlist_create(nodelist)
							      : NULL;
	int n = hl ? slurm_hostlist_count(hl) : 0;

	if (hl)
		slurm_hostlist_destroy(hl);
	return n > 0 ? (unsigned)n : 0;
}

/* Slurm 23.11 made hostlist_t a struct where it was a pointer: __typeof__ takes whichever the
 * slurm.h of this build says (the handle is a pointer in both). */
void ab_srun_gpu_models(const char *nodelist, struct ab_gpu_models *m)
{
	__typeof__(slurm_hostlist_create(NULL)) hl = nodelist ? slurm_hostlist_create(nodelist)
							      : NULL;
	node_info_msg_t *msg = NULL;
	int count;
	char *name;

	memset(m, 0, sizeof(*m));
	m->unknown = true;
	if (!hl)
		return;
	count = slurm_hostlist_count(hl);
	m->unknown = count <= 0;
	if (count > SINGLE_MAX) {
		size_t seen = 0;

		if (slurm_load_node((time_t)0, &msg, SHOW_ALL) != SLURM_SUCCESS || !msg) {
			m->unknown = true;
		} else {
			for (uint32_t i = 0; i < msg->record_count; i++) {
				node_info_t *n = &msg->node_array[i];

				if (n->name && slurm_hostlist_find(hl, n->name) >= 0)
					add_node(m, n), seen++;
			}
			m->unknown |= seen != (size_t)count;
			slurm_free_node_info_msg(msg);
		}
		slurm_hostlist_destroy(hl);
		return;
	}
	while ((name = slurm_hostlist_shift(hl))) {
		msg = NULL;
		if (slurm_load_node_single(&msg, name, SHOW_ALL) == SLURM_SUCCESS && msg &&
		    msg->record_count == 1)
			add_node(m, &msg->node_array[0]);
		else
			m->unknown = true;
		if (msg)
			slurm_free_node_info_msg(msg);
		free(name);
	}
	slurm_hostlist_destroy(hl);
}

static void say_models(const struct ab_gpu_models *m, const struct ab_gpu_model *small)
{
	char line[1024], size[32];
	size_t len = 0;

	for (size_t i = 0; i < m->n; i++) {
		ab_format_size(m->v[i].total_bytes, size, sizeof(size));
		ab_append(line, sizeof(line), &len, "%s%s %s (%u node%s; measured on %s)",
			  i ? ", " : "", m->v[i].type, size, m->v[i].nodes,
			  m->v[i].nodes == 1 ? "" : "s", m->v[i].node);
	}
	slurm_spank_log(AB_LOG_PREFIX "the step's nodes hold %zu GPU models: %s; probing on %s, "
				      "a node of the smallest (%s)",
			m->n, line, small->node, small->type);
}

int ab_srun_smallest_gpu(struct ab_plan *pl, const volatile sig_atomic_t *stop, char *err,
			 size_t errlen)
{
	struct ab_gpu_models *m = &pl->models;
	const struct ab_gpu_model *small;
	char name[128], why[AB_ERR_MAX];
	int rc;

	if (m->n < 2 || m->unknown)
		return 0;
	for (size_t i = 0; i < m->n; i++) {
		rc = ab_probe_device(&pl->job, m->v[i].node, stop, name, sizeof(name),
				     &m->v[i].total_bytes, why, sizeof(why));
		/* a Ctrl-C, or srun ending, is said as it is for the probe step */
		if (rc == -EINTR || rc == -ECANCELED)
			return ab_fail(err, errlen, -rc, "%s", why);
		if (rc < 0)
			return ab_fail(err, errlen, -rc,
				       "the step spans %zu GPU models, and the memory of %s on %s "
				       "could not be measured: %s",
				       m->n, m->v[i].type, m->v[i].node, why);
	}
	small = ab_gpu_models_smallest(m);
	pl->job.probe_node = small->node;
	pl->job.models = m;
	pl->bound = small;
	say_models(m, small);
	return 0;
}
