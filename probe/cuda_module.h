/* cuda_module.h - the probe's GPU half, loaded only when a GPU is asked for: autobatch-cuda.so,
 * next to the probe, holds the kernel library and links CUDA, cuBLAS and NCCL.
 */
#ifndef AUTOBATCH_PROBE_CUDA_MODULE_H
#define AUTOBATCH_PROBE_CUDA_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "trial.h"

struct ab_comm;

struct cuda_module {
	const struct ab_cuda_ops *ops;
	ab_trial_fn model_trial;
	/* NULL when the module was built without NCCL */
	int (*nccl_measure)(uint64_t bytes, struct ab_comm *out, char *err, size_t errlen);
};

/* Loads the module once (AUTOBATCH_CUDA_MODULE names another file; the probe runs as the
 * user, so this is the user's own choice). NULL, with a message, when this build has no
 * CUDA or the module (or the CUDA libraries it needs) does not load. */
const struct cuda_module *cuda_module(char *err, size_t errlen);

#endif
