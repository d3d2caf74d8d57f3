/* dispatch.c - the SPANK entry points: parse plugstack.conf once, register the options,
 * then hand each hook to the module of the context it runs in.
 */
#include <slurm/spank.h>
#include <stdlib.h>

#include "plugin.h"

SPANK_PLUGIN(autobatch, 1)

struct ab_plugin ab_state;

/* AUTOBATCH=F is handed to Slurm as the environment form of --autobatch=F, so Slurm
 * validates it like the option (a bad value stops srun even for an optional plugin) and a
 * --autobatch on the command line still wins. An option already in the environment (an
 * sbatch --autobatch job) is the user's explicit choice and stays. */
static void alias_env_option(void)
{
	const char *value = getenv(AB_ENV_REQUEST);

	if (!value || getenv(AB_OPTION_ENV))
		return;
	if (setenv(AB_OPTION_ENV, value, 0) == 0)
		ab_state.env_alias = true;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();

	if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR && ctx != S_CTX_REMOTE)
		return 0;
	ab_site_init(&ab_state.site);
	ab_request_init(&ab_state.req);
	ab_state.site_ok = ab_site_parse(&ab_state.site, ac, (char *const *)av,
					 ab_state.site_err, sizeof(ab_state.site_err)) == 0;
	if (ab_options_register(sp) < 0)
		return -1;
	if (ctx != S_CTX_REMOTE && !(ctx == S_CTX_LOCAL && ab_is_probe_step()))
		alias_env_option();
	if (!ab_state.site_ok) {
		slurm_error(AB_LOG_PREFIX "%s (fix plugstack.conf)", ab_state.site_err);
		return -1;
	}
	return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
		return ab_srun_post_opt(sp, ac, av);
	case S_CTX_ALLOCATOR:
		return ab_alloc_post_opt(sp, ac, av);
	default:
		return 0;
	}
}

int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	return ab_srun_user_init(sp, ac, av);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	return spank_context() == S_CTX_REMOTE ? ab_remote_user_init(sp, ac, av) : 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	return spank_context() == S_CTX_REMOTE ? ab_remote_task_init(sp, ac, av) : 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp, (void)ac, (void)av;
	if (spank_context() == S_CTX_LOCAL)
		ab_srun_exit();
	return 0;
}
