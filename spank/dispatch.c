/* dispatch.c - the SPANK entry points: parse plugstack.conf once, register the options,
 * then hand each hook to the module of the context it runs in, with the process's context.
 */
#include <slurm/spank.h>
#include <stdlib.h>

#include "alloc.h"
#include "context.h"
#include "options.h"
#include "probe_step.h"
#include "remote.h"
#include "srun.h"

SPANK_PLUGIN(autobatch, 1)

/* The only state of the plugin, one per process (see context.h). Option callbacks take no
 * argument of ours, so theirs is reached here. */
static struct ab_ctx ctx;

static int option_cb(int val, const char *value, int remote)
{
	return ab_option_record(&ctx, val, value, remote);
}

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
		ctx.env_alias = true;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t sc = spank_context();

	if (sc != S_CTX_LOCAL && sc != S_CTX_ALLOCATOR && sc != S_CTX_REMOTE)
		return 0;
	ab_site_init(&ctx.site);
	ab_request_init(&ctx.req);
	ctx.site_ok = ab_site_parse(&ctx.site, ac, (char *const *)av, ctx.site_err,
				    sizeof(ctx.site_err)) == 0;
	if (ab_options_register(sp, option_cb) < 0)
		return -1;
	if (sc != S_CTX_REMOTE && !(sc == S_CTX_LOCAL && ab_is_probe_step()))
		alias_env_option();
	if (!ctx.site_ok) {
		slurm_error(AB_LOG_PREFIX "%s (fix plugstack.conf)", ctx.site_err);
		return -1;
	}
	return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	(void)sp, (void)ac, (void)av;
	switch (spank_context()) {
	case S_CTX_LOCAL:
		return ab_srun_post_opt(&ctx);
	case S_CTX_ALLOCATOR:
		return ab_alloc_post_opt(&ctx);
	default:
		return 0;
	}
}

int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	(void)ac, (void)av;
	return ab_srun_user_init(sp, &ctx);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	(void)ac, (void)av;
	return spank_context() == S_CTX_REMOTE ? ab_remote_user_init(sp, &ctx) : 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac, (void)av;
	return spank_context() == S_CTX_REMOTE ? ab_remote_task_init(sp, &ctx) : 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp, (void)ac, (void)av;
	if (spank_context() == S_CTX_LOCAL)
		ab_srun_exit(&ctx);
	return 0;
}
