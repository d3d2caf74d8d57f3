/* protocol.c - the rules over the shared names of protocol.h: the SLURM_ twin, sbatch's
 * "(null)" and the global batch, each written once.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "protocol.h"

int ab_env_twin(const char *name, char *buf, size_t buflen)
{
	return ab_format(buf, buflen, "SLURM_%s", name);
}

int ab_env_container_twin(int i, const char *name, char *buf, size_t buflen)
{
	static const char *const prefix[AB_CONTAINER_RUNTIMES] = AB_CONTAINER_ENV_PREFIXES;

	if (i < 0 || i >= AB_CONTAINER_RUNTIMES)
		return -EINVAL;
	return ab_format(buf, buflen, "%s%s", prefix[i], name);
}

int ab_env_set_container_twins(const char *name, const char *value)
{
	char twin[160];

	for (int i = 0; i < AB_CONTAINER_RUNTIMES; i++)
		if (ab_env_container_twin(i, name, twin, sizeof(twin)) < 0 ||
		    setenv(twin, value, 1) < 0)
			return -1;
	return 0;
}

bool ab_env_xla_fraction_named(void)
{
	static const char *const names[] = AB_XLA_FRACTION_NAMES;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *v = getenv(names[i]);

		if (v && *v)
			return true;
	}
	return false;
}

int ab_env_xla_fraction(const char *value)
{
	static const char *const names[] = AB_XLA_FRACTION_NAMES;

	if (ab_env_xla_fraction_named())
		return 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (setenv(names[i], value, 1) < 0 || ab_env_set_container_twins(names[i], value) < 0)
			return -1;
	return 0;
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

int ab_step_path(const char *dir, const char *path, char *buf, size_t len)
{
	bool in_dir = dir && *dir && path[0] != '/';

	return ab_format(buf, len, "%s%s%s", in_dir ? dir : "", in_dir ? "/" : "", path);
}

const char *const ab_shape_names[AB_SHAPE_COUNT] = {"step", "node", "gpu"};

/* srun reads these as defaults for its own options (srun(1), INPUT ENVIRONMENT VARIABLES);
 * the last four are this plugin's own request and the probe's guards. */
static const char *const srun_reshaping_env[] = {
	"SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NNODES", "SLURM_CPUS_PER_", "SLURM_GPUS",
	"SLURM_TRES_PER_TASK", "SLURM_MEM_PER_", "SLURM_DISTRIBUTION", "SLURM_EXCLUSIVE",
	"SLURM_EXACT", "SLURM_EXPORT_ENV", "SLURM_CPU_BIND", "SLURM_MEM_BIND", "SLURM_OVERLAP",
	"SLURM_HINT", "SLURM_THREADS_PER_CORE", "SLURM_ARBITRARY_NODELIST", "SLURM_GRES",
	"SLURM_STEP_GRES", "SLURM_WAIT", "SLURM_KILL_BAD_EXIT", "SLURM_LABELIO",
	"SLURM_UNBUFFEREDIO", "SLURM_OPEN_MODE", "SLURM_NTASKS_PER_", AB_OPTION_ENV_PREFIX,
	"_SLURM_SPANK_OPTION_autobatch_", AB_GUARD_ENV "=", AB_HOLD_ENV "=",
};

/* pyxis' image or container name, by the routes slurmstepd and pyxis read (pyxis args.c) */
static const char *const container_env[] = {
	"_SLURM_SPANK_OPTION_pyxis_container_image=",
	"_SLURM_SPANK_OPTION_pyxis_container_name=",
	"SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image=",
	"SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_name=",
	"PYXIS_CONTAINER_IMAGE=",
	"PYXIS_CONTAINER_NAME=",
};

/* The container in env, its entries behind prefix ("" or AB_ENV_CARRIED). */
static const char *find_container(char *const *env, const char *prefix)
{
	size_t p = strlen(prefix);

	for (char *const *e = env; e && *e; e++)
		for (size_t i = 0; i < sizeof(container_env) / sizeof(container_env[0]); i++) {
			size_t n = strlen(container_env[i]);

			if (!strncmp(*e, prefix, p) && !strncmp(*e + p, container_env[i], n) &&
			    (*e)[p + n])
				return *e + p + n;
		}
	return NULL;
}

const char *ab_env_container(char *const *env)
{
	extern char **environ;

	return find_container(env ? env : environ, "");
}

const char *ab_env_carried_container(void)
{
	extern char **environ;

	return find_container(environ, AB_ENV_CARRIED);
}

bool ab_env_pyxis(const char *entry, bool *carry)
{
	*carry = !strncmp(entry, AB_PYXIS_OPTION, strlen(AB_PYXIS_OPTION)) ||
		 !strncmp(entry, AB_PYXIS_ENV, strlen(AB_PYXIS_ENV));
	return *carry || !strncmp(entry, AB_PYXIS_ALLOC_OPTION, strlen(AB_PYXIS_ALLOC_OPTION));
}

bool ab_env_reshapes_srun(const char *entry)
{
	for (size_t i = 0; i < sizeof(srun_reshaping_env) / sizeof(srun_reshaping_env[0]); i++)
		if (!strncmp(entry, srun_reshaping_env[i], strlen(srun_reshaping_env[i])))
			return true;
	return false;
}
