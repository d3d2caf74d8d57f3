/* gpu_models.h - the GPU models of a step's nodes as Slurm names them (each node's GRES,
 * "gpu:TYPE:N"): the set that keys the cache, a node of each model to measure it on, and each
 * node's memory once measured, which a trial step holds each of its ranks to.
 */
#ifndef AUTOBATCH_GPU_MODELS_H
#define AUTOBATCH_GPU_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AB_GPU_MODELS_MAX 8
#define AB_GPU_TYPE_MAX 64
#define AB_GPU_NODES_MAX 1024 /* a model's nodes, "a,b,c": beyond, none are listed */
#define AB_NODE_MEMORY_MAX 64 /* the nodes a --node-memory table names (a trial's ranks') */

struct ab_gpu_model {
	char type[AB_GPU_TYPE_MAX];
	char node[AB_GPU_TYPE_MAX]; /* the step's first node that holds it */
	unsigned nodes;             /* how many of the step's nodes hold it */
	uint64_t total_bytes;       /* its memory, once measured on node; 0 before */
	char list[AB_GPU_NODES_MAX]; /* every node of the step that holds it, "a,b,c" */
};

struct ab_gpu_models {
	size_t n;
	bool unknown; /* a node without a GPU type, or more models than fit: the set is unsure */
	bool unlisted; /* a model's nodes did not fit its list */
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

/* "BYTES:NODE,NODE;BYTES:NODE": each measured model's memory and its nodes, which a trial
 * step's ranks are each held to (autobatch-probe run --node-memory). 0, -ENODATA when the set
 * is unsure, a model unmeasured or a list full, -E2BIG when buf is too short. */
int ab_gpu_models_node_memory(const struct ab_gpu_models *m, char *buf, size_t buflen);

/* That text, read back: each node's memory. */
struct ab_node_memory {
	size_t n;
	struct {
		char node[AB_GPU_TYPE_MAX];
		uint64_t bytes;
	} v[AB_NODE_MEMORY_MAX];
};

/* 0, or -EINVAL with one sentence; a node named twice (two models) keeps the smaller. */
int ab_node_memory_parse(const char *spec, struct ab_node_memory *t, char *err, size_t errlen);

/* The memory of node's GPU; 0 when the table does not name it. */
uint64_t ab_node_memory_of(const struct ab_node_memory *t, const char *node);

#endif
