/* nvml.c - the few NVML entry points we use, declared here and resolved with dlsym. */
#include "nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "size.h"

/* From NVML's API (nvml.h): 0 is NVML_SUCCESS, 7 NVML_ERROR_INSUFFICIENT_SIZE. */
typedef int nvml_return;
typedef void *nvml_device;
struct nvml_process { /* nvmlProcessInfo_v2_t, what the _v3 call fills */
	unsigned int pid;
	unsigned long long used_gpu_memory;
	unsigned int gpu_instance_id;
	unsigned int compute_instance_id;
};
#define NVML_INSUFFICIENT_SIZE 7
#define MAX_PROCS 256
#define MAX_DEVICES 64

struct ab_nvml {
	void *lib;
	nvml_device dev[MAX_DEVICES];
	unsigned int ndev;
	nvml_return (*shutdown)(void);
	nvml_return (*processes)(nvml_device, unsigned int *, struct nvml_process *);
	const char *(*error_string)(nvml_return);
};

static void *sym(void *lib, const char *a, const char *b)
{
	void *p = dlsym(lib, a);

	return p || !b ? p : dlsym(lib, b);
}

/* every device NVML sees (a node's ranks each on its own GPU), into nv->dev */
static nvml_return all_devices(struct ab_nvml *nv)
{
	nvml_return (*count)(unsigned int *), (*by_index)(unsigned int, nvml_device *), rc;
	unsigned int n = 0;

	*(void **)&count = sym(nv->lib, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
	*(void **)&by_index = sym(nv->lib, "nvmlDeviceGetHandleByIndex_v2",
				  "nvmlDeviceGetHandleByIndex");
	if (!count || !by_index)
		return 3; /* NVML_ERROR_NOT_SUPPORTED */
	if ((rc = count(&n)) != 0)
		return rc;
	for (nv->ndev = 0; nv->ndev < n && nv->ndev < MAX_DEVICES; nv->ndev++)
		if ((rc = by_index(nv->ndev, &nv->dev[nv->ndev])) != 0)
			return rc;
	return 0;
}

int ab_nvml_open(const char *pci_bus_id, struct ab_nvml **out, char *err, size_t errlen)
{
	nvml_return (*init)(void), (*by_bus)(const char *, nvml_device *);
	struct ab_nvml *nv = calloc(1, sizeof(*nv));
	nvml_return rc;

	*out = NULL;
	if (!nv)
		return ab_fail(err, errlen, ENOMEM, "out of memory");
	if (!(nv->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL))) {
		free(nv);
		return ab_fail(err, errlen, ENOENT, "NVML (libnvidia-ml.so.1) is not installed");
	}
	*(void **)&init = sym(nv->lib, "nvmlInit_v2", "nvmlInit");
	*(void **)&by_bus = sym(nv->lib, "nvmlDeviceGetHandleByPciBusId_v2",
				"nvmlDeviceGetHandleByPciBusId");
	*(void **)&nv->shutdown = sym(nv->lib, "nvmlShutdown", NULL);
	*(void **)&nv->processes = sym(nv->lib, "nvmlDeviceGetComputeRunningProcesses_v3", NULL);
	*(void **)&nv->error_string = sym(nv->lib, "nvmlErrorString", NULL);
	if (!init || !by_bus || !nv->shutdown || !nv->processes || !nv->error_string) {
		dlclose(nv->lib);
		free(nv);
		return ab_fail(err, errlen, ENOENT, "libnvidia-ml.so.1 is older than NVML 11.5 "
						    "(no per-process memory)");
	}
	if ((rc = init()) != 0 ||
	    (rc = pci_bus_id ? by_bus(pci_bus_id, &nv->dev[0]) : all_devices(nv)) != 0) {
		ab_fail(err, errlen, ENOENT, "NVML cannot see %s%s: %s", pci_bus_id ? "GPU " : "",
			pci_bus_id ? pci_bus_id : "this node's GPUs", nv->error_string(rc));
		if (rc != 0)
			nv->shutdown();
		dlclose(nv->lib);
		free(nv);
		return -ENOENT;
	}
	if (pci_bus_id)
		nv->ndev = 1;
	*out = nv;
	return 0;
}

void ab_nvml_close(struct ab_nvml *nv)
{
	if (!nv)
		return;
	nv->shutdown();
	dlclose(nv->lib);
	free(nv);
}

static void comm_of(unsigned int pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	snprintf(buf, len, "?");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* One device's processes into *procs: stack (MAX_PROCS of them), or when more run a buffer
 * of the heap the caller frees (*procs != stack). */
static int device_processes(struct ab_nvml *nv, nvml_device dev, struct nvml_process *stack,
			    struct nvml_process **procs, unsigned int *count, char *err,
			    size_t errlen)
{
	struct nvml_process *heap = NULL;
	nvml_return rc;

	*procs = stack;
	*count = MAX_PROCS;
	rc = nv->processes(dev, count, stack);
	/* Too small a buffer: NVML says how many there are and fills none; ask again with
	 * room for that many (and a few that start meanwhile). */
	for (int tries = 0; rc == NVML_INSUFFICIENT_SIZE && tries < 3; tries++) {
		*count += 16;
		free(heap);
		if (!(*procs = heap = calloc(*count, sizeof(*heap)))) {
			*procs = stack;
			return ab_fail(err, errlen, ENOMEM, "NVML: out of memory for %u processes",
				       *count);
		}
		rc = nv->processes(dev, count, *procs);
	}
	if (rc != 0) {
		free(heap);
		*procs = stack;
		return ab_fail(err, errlen, EIO, "NVML: %s", nv->error_string(rc));
	}
	return 0;
}

/* one device's processes: added to *ours (those in pgid) and *others, listed in desc */
static int device_usage(struct ab_nvml *nv, nvml_device dev, pid_t pgid, uint64_t *ours,
			uint64_t *others, char *desc, size_t desclen, size_t *dlen)
{
	struct nvml_process stack[MAX_PROCS], *procs;
	unsigned int count;
	size_t len = *dlen;
	int rc = device_processes(nv, dev, stack, &procs, &count, desc, desclen);

	if (rc < 0)
		return rc;
	for (unsigned int i = 0; i < count; i++) {
		uint64_t used = procs[i].used_gpu_memory;
		char comm[32], size[32], safe[32];

		if (used == ~0ULL) /* NVML_VALUE_NOT_AVAILABLE */
			continue;
		if (pgid > 0 && getpgid((pid_t)procs[i].pid) == pgid) {
			*ours += used;
			continue;
		}
		*others += used;
		comm_of(procs[i].pid, comm, sizeof(comm));
		if (desc)
			ab_append(desc, desclen, &len, "%spid %u (%s) %s", len ? ", " : "",
				  procs[i].pid, ab_printable(comm, safe, sizeof(safe)),
				  ab_format_size(used, size, sizeof(size)));
	}
	if (procs != stack)
		free(procs);
	*dlen = len;
	return 0;
}

uint64_t ab_nvml_pids_usage(struct ab_nvml *nv, const pid_t *pids, size_t n, uint64_t *each)
{
	uint64_t most = 0;

	memset(each, 0, n * sizeof(*each));
	for (unsigned int d = 0; d < nv->ndev; d++) {
		struct nvml_process stack[MAX_PROCS], *procs;
		unsigned int count;
		uint64_t here = 0;

		if (device_processes(nv, nv->dev[d], stack, &procs, &count, NULL, 0) < 0)
			continue;
		for (unsigned int i = 0; i < count; i++)
			for (size_t k = 0; k < n; k++)
				if ((pid_t)procs[i].pid == pids[k] &&
				    procs[i].used_gpu_memory != ~0ULL) {
					here += procs[i].used_gpu_memory;
					if (procs[i].used_gpu_memory > each[k])
						each[k] = procs[i].used_gpu_memory;
				}
		most = here > most ? here : most;
		if (procs != stack)
			free(procs);
	}
	return most;
}

int ab_nvml_usage(struct ab_nvml *nv, pid_t pgid, uint64_t *ours, uint64_t *others, char *desc,
		  size_t desclen)
{
	size_t len = 0;
	int rc = 0;

	*ours = *others = 0;
	if (desc && desclen)
		desc[0] = '\0';
	for (unsigned int d = 0; d < nv->ndev && rc == 0; d++)
		rc = device_usage(nv, nv->dev[d], pgid, ours, others, desc, desclen, &len);
	return rc;
}

uint64_t ab_nvml_group_usage(void *nv, pid_t pgid)
{
	uint64_t ours = 0, others = 0;

	if (ab_nvml_usage(nv, pgid, &ours, &others, NULL, 0) < 0)
		return 0;
	return ours;
}
