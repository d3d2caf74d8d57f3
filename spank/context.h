/* context.h - what the hooks of one process share, owned by dispatch.c: the site policy
 * parsed once from plugstack.conf, the user's request and its effective settings, and what a
 * hook leaves for the hooks after it. Modules are handed it; none keeps state of its own.
 */
#ifndef AUTOBATCH_CONTEXT_H
#define AUTOBATCH_CONTEXT_H

#include <slurm/spank.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "settings.h"

#define AB_LOG_PREFIX "autobatch: "

struct ab_deferred; /* srun_hold.h */

/* One per process: Slurm loads the plugin once into each srun, sbatch, salloc and
 * slurmstepd, and calls its hooks one after another. Each field says why it outlives the hook
 * that sets it. */
struct ab_ctx {
	/* slurm_spank_init parses plugstack.conf; every later hook must know it was sound */
	bool site_ok;
	char site_err[AB_ERR_MAX];
	struct ab_site site;
	/* the option callbacks record the request between the hooks */
	struct ab_request req;
	/* resolved once all options are recorded (init_post_opt; early where --autobatch is, for
	 * a denied fraction): the probe, the cache key and the caps use this one result */
	struct ab_effective eff;
	/* a hook refused the request: later hooks do nothing, but Slurm ignores an optional
	 * plugin's refusal, so under on_failure=abort srun's local_user_init still tells the
	 * step's tasks to end (srun.c) */
	bool failed;
	/* init set the option's environment form from AUTOBATCH: the first callback is it */
	bool env_alias;
	/* srun runs inside salloc/sbatch: only init_post_opt can tell, before srun allocates */
	bool in_allocation;
	/* srun: the decision made after the launch, whose thread outlives local_user_init until
	 * slurm_spank_exit joins it */
	struct ab_deferred *deferred;
	/* srun: the report its decision wrote (ab_apply, in the deferred thread: read after
	 * slurm_spank_exit joined it), for the job's Comment with the site's comment=on */
	char report[PATH_MAX];
	uint32_t jobid, stepid;
};

#endif
