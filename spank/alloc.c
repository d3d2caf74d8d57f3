/* alloc.c - allocator context (sbatch, salloc): refuse a bad request at submission, so a
 * job does not wait in the queue only to fail in its first srun.
 */
#include <stdlib.h>

#include "plugin.h"

int ab_alloc_post_opt(spank_t sp, int ac, char **av)
{
	char err[AB_ERR_MAX];

	(void)sp, (void)ac, (void)av;
	if (!ab_state.site_ok || ab_state.failed)
		return 0;
	/* No ab_request_check here: a batch script may set --autobatch-config for the job
	 * and leave --autobatch to each srun inside it. */
	if (ab_request_from_env(&ab_state.req, getenv(AB_ENV_REQUEST), err, sizeof(err)) < 0) {
		slurm_error(AB_LOG_PREFIX "%s", err);
		return -1;
	}
	if (!ab_state.req.enabled)
		return 0;
	return ab_request_resolve(false);
}
