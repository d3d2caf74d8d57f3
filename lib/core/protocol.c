/* protocol.c - the rules over the shared names of protocol.h: the SLURM_ twin, sbatch's
 * "(null)" and the global batch, each written once.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "error.h"
#include "protocol.h"

int ab_env_twin(const char *name, char *buf, size_t buflen)
{
	return ab_format(buf, buflen, "SLURM_%s", name);
}

const char *ab_option_value(const char *arg)
{
	return arg && strcmp(arg, "(null)") == 0 ? NULL : arg;
}

long ab_global_batch(long requested, long batch, long grad_accum, long devices)
{
	long global;

	if (requested > 0)
		return requested;
	if (batch <= 0)
		return 0;
	if (grad_accum <= 0)
		grad_accum = 1;
	if (devices <= 0)
		devices = 1;
	if (__builtin_mul_overflow(batch, grad_accum, &global) ||
	    __builtin_mul_overflow(global, devices, &global))
		return 0;
	return global;
}

bool ab_srun_het_step(const char *args, size_t len)
{
	/* the first word is srun itself */
	for (size_t i = strnlen(args, len) + 1; i < len; i += strnlen(args + i, len - i) + 1)
		if (args[i] == ':' && (i + 1 == len || args[i + 1] == '\0'))
			return true;
	return false;
}
