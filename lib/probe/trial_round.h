/* trial_round.h - parallel trials: the GPUs of the probe's node as slots, one exec trial per
 * slot at once (CUDA_VISIBLE_DEVICES and NVML per slot), fewer at once where host memory
 * would not hold them all.
 */
#ifndef AUTOBATCH_TRIAL_ROUND_H
#define AUTOBATCH_TRIAL_ROUND_H

#include <stddef.h>
#include <stdint.h>

#include "trial.h"
#include "trial_exec.h"

#define AB_ROUND_MAX_SLOTS 16

struct ab_round_slot {
	char visible[64];    /* the trial's CUDA_VISIBLE_DEVICES; "" leaves it as it is */
	char pci_bus_id[32]; /* cuda: its NVML device; "" without */
};

struct ab_exec_round {
	struct ab_exec *x;
	struct ab_round_slot slot[AB_ROUND_MAX_SLOTS];
	size_t nslots;
	uint64_t host_bytes; /* the most host memory one trial used so far */
	/* host memory free for trials (MemAvailable); replaceable for tests; 0: unknown */
	uint64_t (*available)(void);
};

/* The slots for N trials at once (0: one per GPU visible in CUDA_VISIBLE_DEVICES) with
 * CUDA_VISIBLE_DEVICES split one GPU per slot. 0, or -EINVAL with a message when N asks for
 * more GPUs than are visible. */
int ab_round_slots(struct ab_exec_round *r, long n, const char *visible, char *err,
		   size_t errlen);

/* How many of the round's trials may run at once: the slots, fewer when the host memory
 * the largest trial used so far would not fit that many times in what is available. */
size_t ab_round_width(const struct ab_exec_round *r, size_t n, char *why, size_t whylen);

/* The round function (ab_round_fn): ctx is a struct ab_exec_round. Each trial runs in a
 * worker process of its own on its slot; the round ends when all have. */
int ab_exec_round(void *ctx, const long *batches, size_t n, struct ab_trial *out, char *err,
		  size_t errlen);

/* MemAvailable from /proc/meminfo; 0 when unknown. */
uint64_t ab_host_available(void);

#endif
