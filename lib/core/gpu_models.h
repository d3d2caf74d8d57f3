/* gpu_models.h - the GPU models of a step's nodes as Slurm names them (each node's GRES,
 * "gpu:TYPE:N"): the set that keys the cache, and a node of each model to measure it on.
 */
#ifndef AUTOBATCH_GPU_MODELS_H
#define AUTOBATCH_GPU_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AB_GPU_MODELS_MAX 8
#define AB_GPU_TYPE_MAX 64

struct ab_gpu_model {
	char type[AB_GPU_TYPE_MAX];
	char node[AB_GPU_TYPE_MAX]; /* the step's first node that holds it */
	unsigned nodes;             /* how many of the step's nodes hold it */
	uint64_t total_bytes;       /* its memory, once measured on node; 0 before */
};

struct ab_gpu_models {
	size_t n;
	bool unknown; /* a node without a GPU type, or more models than fit: the set is unsure */
	struct ab_gpu_model v[AB_GPU_MODELS_MAX];
};

/* The GPU types a node's GRES string names ("gpu:a100:4(S:0-1),gpu:h100:2,nic:1" -> a100,
 * h100), each passed to add(type, arg). Returns how many GPU entries it had; an entry
 * without a type ("gpu:4") is passed as "". */
int ab_gres_gpu_types(const char *gres, void (*add)(const char *type, void *arg), void *arg);

/* Adds a node of the step with its GRES string. */
void ab_gpu_models_add(struct ab_gpu_models *m, const char *node, const char *gres);

/* "gpu:TYPE[,TYPE...]" sorted, what keys the cache: "" when the set is unsure (the step's
 * node names key it then). */
void ab_gpu_models_key(const struct ab_gpu_models *m, char *buf, size_t buflen);

/* The model with the least memory among those measured; NULL when none was. */
const struct ab_gpu_model *ab_gpu_models_smallest(const struct ab_gpu_models *m);

#endif
