/* device.h - what `--device` names: a simulated GPU, the host (a real process measured by
 * its resident memory), or a CUDA GPU; parsing the spec and knowing the capacity.
 */
#ifndef AUTOBATCH_DEVICE_H
#define AUTOBATCH_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "sim.h"

enum ab_device_kind { AB_DEVICE_SIM, AB_DEVICE_HOST, AB_DEVICE_CUDA };

struct ab_device {
	enum ab_device_kind kind;
	char name[128];       /* for the report: "sim", "host", the GPU's name */
	uint64_t total_bytes; /* capacity the fraction applies to */
	int index;            /* cuda:N */
	struct ab_sim sim;    /* AB_DEVICE_SIM */
	/* AB_DEVICE_CUDA */
	char pci_bus_id[32];
	struct ab_nvml *nvml;     /* NULL when NVML is absent */
	char nvml_note[256];      /* why it is absent */
	uint64_t others_bytes;    /* other processes' memory on the GPU when it was opened */
	char others[512];         /* who they are */
};

/* What the probe's CUDA runtime supplies (lib/kernels/cuda_device.cu): the plugin never links
 * CUDA, so the engine reaches the GPU only through these hooks, set by the probe. */
struct ab_cuda_ops {
	int (*open)(int index, char *name, size_t namelen, char *pci_bus_id, size_t buslen,
		    uint64_t *total, char *err, size_t errlen);
	int (*count)(void); /* visible GPUs; 0 on any error */
};
void ab_device_set_cuda(const struct ab_cuda_ops *ops);

/* Parses "sim:SPEC", "host", "host:capacity=SIZE" or "cuda:N" (NULL: cuda:0 when a GPU is
 * visible). Without the CUDA hooks (a build without CUDA) cuda:N fails with a message saying
 * so: nothing pretends to measure a GPU. */
int ab_device_open(const char *spec, struct ab_device *dev, char *err, size_t errlen);
void ab_device_close(struct ab_device *dev);

const char *ab_device_kind_name(enum ab_device_kind kind);

#endif
