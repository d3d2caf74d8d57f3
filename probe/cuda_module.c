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

static int module_path(char *path, size_t len, char *err, size_t errlen)
{
	const char *env = getenv("AUTOBATCH_CUDA_MODULE");
	char self[PATH_MAX];
	ssize_t n;

	if (env && *env)
		return ab_copy(path, len, env) < 0 ? ab_fail(err, errlen, ENAMETOOLONG,
							     "AUTOBATCH_CUDA_MODULE is too long")
						   : 0;
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) < 0)
		return ab_fail(err, errlen, errno, "cannot find the probe's own path: %s",
			       strerror(errno));
	self[n] = '\0';
	if (ab_format(path, len, "%s/autobatch-cuda.so", dirname(self)) < 0)
		return ab_fail(err, errlen, ENAMETOOLONG, "the probe's path is too long");
	return 0;
}

const struct cuda_module *cuda_module(char *err, size_t errlen)
{
	static struct cuda_module m;
	static int state; /* 0 not tried, 1 loaded, -1 failed (the message is kept) */
	static char why[512];
	char path[PATH_MAX];
	void *lib;

	if (state == 0) {
		state = -1;
#ifndef HAVE_CUDA
		snprintf(why, sizeof(why), "this build has no CUDA (configured without it)");
#else
		if (module_path(path, sizeof(path), why, sizeof(why)) == 0) {
			if (!(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
				snprintf(why, sizeof(why), "the GPU module did not load: %s",
					 dlerror());
			else if (!(m.ops = dlsym(lib, "ab_cuda_runtime_ops")) ||
				 !(*(void **)&m.model_trial = dlsym(lib, "ab_model_cuda_trial")))
				snprintf(why, sizeof(why), "%.400s is not autobatch's GPU module", path);
			else {
				*(void **)&m.nccl_measure = dlsym(lib, "ab_nccl_measure");
				state = 1;
			}
		}
#endif
	}
	if (state < 0)
		ab_fail(err, errlen, ENODEV, "%s", why);
	return state > 0 ? &m : NULL;
}
