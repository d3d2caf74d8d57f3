/* nvml.h - per-process GPU memory from NVML, loaded with dlopen at run time (no NVML header
 * is packaged here, and a probe without the driver's library must still run): what it owns.
 */
#ifndef AUTOBATCH_NVML_H
#define AUTOBATCH_NVML_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ab_nvml;

/* Loads libnvidia-ml.so.1 and finds the device by its PCI bus id ("0000:17:00.0", from the
 * CUDA runtime, so CUDA_VISIBLE_DEVICES renumbering does not matter), or with a NULL id every
 * device of the node (a trial's ranks, each on a GPU of its own). -ENOENT with a message
 * when the library or the device is not there. */
int ab_nvml_open(const char *pci_bus_id, struct ab_nvml **out, char *err, size_t errlen);
void ab_nvml_close(struct ab_nvml *nv);

/* GPU memory of the processes in process group pgid (ours) and of every other process on
 * the device, or the devices (others); the others are listed as "pid 123 (python3) 2.1 GiB,
 * ..." in desc. */
int ab_nvml_usage(struct ab_nvml *nv, pid_t pgid, uint64_t *ours, uint64_t *others, char *desc,
		  size_t desclen);

/* The GPU memory of processes pids[0..n) (a trial step's task and its workers, whatever
 * their process groups): the most any one device holds of them, each process's own largest
 * on one device in each[k]. A device NVML cannot list counts as holding none. */
uint64_t ab_nvml_pids_usage(struct ab_nvml *nv, const pid_t *pids, size_t n, uint64_t *each);

/* Adapts ab_nvml_usage to the exec trial's GPU watch (struct ab_gpu_watch's usage). */
uint64_t ab_nvml_group_usage(void *nv, pid_t pgid);

#endif
