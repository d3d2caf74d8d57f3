/* alloc.c - allocator context (sbatch, salloc): refuse a bad request at submission, so a
 * job does not wait in the queue only to fail in its first srun.
 */
#include "alloc.h"

#include <stdlib.h>

#include "options.h"

int ab_alloc_post_opt(struct ab_ctx *c)
{
	char err[AB_ERR_MAX];

	if (!c->site_ok || c->failed)
		return 0;
	/* No ab_request_check here: a batch script may set --autobatch-config for the job
	 * and leave --autobatch to each srun inside it. */
	if (ab_request_from_env(&c->req, getenv(AB_ENV_REQUEST), err, sizeof(err)) < 0) {
		slurm_error(AB_LOG_PREFIX "%s", err);
		return -1;
	}
	if (!c->req.enabled)
		return 0;
	return ab_options_settle(c);
}
