/* device.c - device specs (see device.h). */
#include "device.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "number.h"
#include "nvml.h"
#include "size.h"

const char *ab_device_kind_name(enum ab_device_kind kind)
{
	return kind == AB_DEVICE_SIM ? "sim" : kind == AB_DEVICE_HOST ? "host" : "cuda";
}

static int open_host(const char *opts, struct ab_device *dev, char *err, size_t errlen)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

	dev->kind = AB_DEVICE_HOST;
	snprintf(dev->name, sizeof(dev->name), "host");
	dev->total_bytes = pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
	if (opts) {
		if (strncmp(opts, "capacity=", 9) != 0)
			return ab_fail(err, errlen, EINVAL, "--device host:%s: the only option is "
							    "capacity=SIZE (e.g. host:capacity=2GiB)",
				       opts);
		if (ab_parse_size(opts + 9, &dev->total_bytes, err, errlen) < 0)
			return -EINVAL;
	}
	if (!dev->total_bytes)
		return ab_fail(err, errlen, EINVAL, "--device host: the capacity must be more than "
						    "0 bytes");
	return 0;
}

static const struct ab_cuda_ops *cuda_ops;

void ab_device_set_cuda(const struct ab_cuda_ops *ops)
{
	cuda_ops = ops;
}

static int parse_index(const char *text, int *out)
{
	long v;

	if (ab_parse_whole(text, 0, 1023, &v) < 0)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

/* Other processes' memory is counted against the budget: the job will share the GPU too. */
static void cuda_others(struct ab_device *dev)
{
	uint64_t ours;
	int rc = ab_nvml_open(dev->pci_bus_id, &dev->nvml, dev->nvml_note, sizeof(dev->nvml_note));
	size_t len = strlen(dev->nvml_note);

	if (rc < 0) /* exec trials fall back to what the trial reports */
		ab_append(dev->nvml_note, sizeof(dev->nvml_note), &len,
			  ": peak memory comes from the trial's own report");
	if (rc == 0 && ab_nvml_usage(dev->nvml, getpgrp(), &ours, &dev->others_bytes, dev->others,
				     sizeof(dev->others)) < 0) {
		ab_copy(dev->nvml_note, sizeof(dev->nvml_note), "NVML cannot list the GPU's processes");
		dev->others[0] = '\0';
	}
}

static int open_cuda(const char *spec, struct ab_device *dev, char *err, size_t errlen)
{
	char safe[48];

	dev->kind = AB_DEVICE_CUDA;
	if (!cuda_ops)
		return ab_fail(err, errlen, ENODEV,
			       "--device %s is not available in this build (configured without "
			       "CUDA): use --device host or sim:SPEC",
			       ab_printable(spec, safe, sizeof(safe)));
	if (strcmp(spec, "cuda") != 0 && parse_index(spec + 5, &dev->index) < 0)
		return ab_fail(err, errlen, EINVAL, "--device %s: write cuda:N, N the GPU's index",
			       ab_printable(spec, safe, sizeof(safe)));
	if (cuda_ops->open(dev->index, dev->name, sizeof(dev->name), dev->pci_bus_id,
			   sizeof(dev->pci_bus_id), &dev->total_bytes, err, errlen) < 0)
		return -ENODEV;
	cuda_others(dev);
	return 0;
}

int ab_device_open(const char *spec, struct ab_device *dev, char *err, size_t errlen)
{
	memset(dev, 0, sizeof(*dev));
	if ((!spec || !*spec) && cuda_ops && cuda_ops->count() > 0)
		spec = "cuda:0";
	/* in a Slurm step (the plugin's probe step): the job holds no GPU on this node */
	if ((!spec || !*spec) && getenv("SLURM_JOB_ID") && !getenv("CUDA_VISIBLE_DEVICES"))
		return ab_fail(err, errlen, ENODEV,
			       "the probe step has no GPU: the job holds none on this node; "
			       "request GPUs (--gpus, --gres), or set probe_args=\"--device "
			       "host\" for sites without GPUs");
	if (!spec || !*spec)
		return ab_fail(err, errlen, EINVAL,
			       "no GPU is visible here: give --device host[:capacity=SIZE] "
			       "or --device sim:SPEC");
	if (strncmp(spec, "sim:", 4) == 0) {
		dev->kind = AB_DEVICE_SIM;
		snprintf(dev->name, sizeof(dev->name), "sim");
		if (ab_sim_parse(spec + 4, &dev->sim, err, errlen) < 0)
			return -EINVAL;
		dev->total_bytes = dev->sim.total_bytes;
		return 0;
	}
	if (strcmp(spec, "host") == 0 || strncmp(spec, "host:", 5) == 0)
		return open_host(spec[4] ? spec + 5 : NULL, dev, err, errlen);
	if (strncmp(spec, "cuda:", 5) == 0 || strcmp(spec, "cuda") == 0)
		return open_cuda(spec, dev, err, errlen);
	return ab_fail(err, errlen, EINVAL, "unknown device '%.40s': use cuda:N, "
					    "host[:capacity=SIZE] or sim:SPEC",
		       spec);
}

void ab_device_close(struct ab_device *dev)
{
	if (dev->kind == AB_DEVICE_SIM)
		ab_sim_free(&dev->sim);
	ab_nvml_close(dev->nvml);
	dev->nvml = NULL;
}
