/* cuda_module.c - dlopen of autobatch-cuda.so (see cuda_module.h). Keeping CUDA out of the
 * probe's own links makes it start in milliseconds and run where no CUDA is installed.
 */
#include "cuda_module.h"

#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "protocol.h"

#ifdef HAVE_CUDA
static int module_path(char *path, size_t len, char *err, size_t errlen)
{
	const char *env = getenv(AB_ENV_CUDA_MODULE);
	char self[PATH_MAX];
	ssize_t n;

	if (env && *env)
		return ab_copy(path, len, env) < 0 ? ab_fail(err, errlen, ENAMETOOLONG,
							     AB_ENV_CUDA_MODULE " is too long")
						   : 0;
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) < 0)
		return ab_fail(err, errlen, errno, "cannot find the probe's own path: %s",
			       strerror(errno));
	self[n] = '\0';
	if (ab_format(path, len, "%s/autobatch-cuda.so", dirname(self)) < 0)
		return ab_fail(err, errlen, ENAMETOOLONG, "the probe's path is too long");
	return 0;
}

/* dlopen, then the entry points; on failure why says what went wrong */
static int load(struct cuda_module *m, char *why, size_t whylen)
{
	char path[PATH_MAX];
	void *lib;

	if (module_path(path, sizeof(path), why, whylen) < 0)
		return -1;
	if (!(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
		return snprintf(why, whylen, "the GPU module did not load: %s", dlerror()), -1;
	if (!(m->ops = dlsym(lib, "ab_cuda_runtime_ops")) ||
	    !(*(void **)&m->model_trial = dlsym(lib, "ab_model_cuda_trial")))
		return snprintf(why, whylen, "%.400s is not autobatch's GPU module", path), -1;
	*(void **)&m->nccl_measure = dlsym(lib, "ab_nccl_measure");
	return 0;
}
#endif

const struct cuda_module *cuda_module(char *err, size_t errlen)
{
	static struct cuda_module m;
	static int state; /* 0 not tried, 1 loaded, -1 failed (the message is kept) */
	static char why[512];

	if (state == 0) {
#ifdef HAVE_CUDA
		state = load(&m, why, sizeof(why)) == 0 ? 1 : -1;
#else
		state = -1;
		snprintf(why, sizeof(why), "this build has no CUDA (configured without it)");
#endif
	}
	if (state < 0)
		ab_fail(err, errlen, ENODEV, "%s", why);
	return state > 0 ? &m : NULL;
}
