/* plugin.h - state shared by the SPANK dispatch and its per-context modules: the site
 * policy parsed once from plugstack.conf and the user's request from the options.
 */
#ifndef AUTOBATCH_PLUGIN_H
#define AUTOBATCH_PLUGIN_H

#include <slurm/spank.h>
#include <stdbool.h>

#include "settings.h"

#define AB_LOG_PREFIX "autobatch: "
/* The environment form of --autobatch that srun and sbatch read (see dispatch.c). */
#define AB_OPTION_ENV "SLURM_SPANK__SLURM_SPANK_OPTION_autobatch_autobatch"

struct ab_plugin {
	bool site_ok;                /* plugstack arguments parsed and consistent */
	char site_err[AB_ERR_MAX];   /* why not, for every later hook to repeat */
	bool failed;                 /* a hook refused the request: later hooks do nothing */
	bool env_alias;              /* AB_OPTION_ENV was set by us from AUTOBATCH */
	struct ab_site site;
	struct ab_request req;
	double fraction;             /* effective, after site policy */
};

extern struct ab_plugin ab_state;

/* options.c: every context registers the options so srun/sbatch/salloc --help list them. */
int ab_options_register(spank_t sp);

/* Resolves the fraction under the site policy into ab_state.fraction; prints one line and
 * returns -1 on refusal. quiet suppresses the note of a clamp or an override. */
int ab_request_resolve(bool quiet);

/* srun.c: local context. */
int ab_srun_post_opt(spank_t sp, int ac, char **av);
int ab_srun_user_init(spank_t sp, int ac, char **av);

/* alloc.c: sbatch/salloc, where a bad request should fail at submission, not in the job. */
int ab_alloc_post_opt(spank_t sp, int ac, char **av);

#endif
