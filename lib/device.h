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
};

/* Parses "sim:SPEC", "host", "host:capacity=SIZE" or "cuda:N". A CUDA device fails with a
 * message saying it is not available in this build: nothing pretends to measure a GPU. */
int ab_device_open(const char *spec, struct ab_device *dev, char *err, size_t errlen);
void ab_device_close(struct ab_device *dev);

const char *ab_device_kind_name(enum ab_device_kind kind);

#endif
