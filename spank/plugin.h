/* plugin.h - state shared by the SPANK dispatch and its per-context modules: the site
 * policy parsed once from plugstack.conf and the user's request from the options.
 */
#ifndef AUTOBATCH_PLUGIN_H
#define AUTOBATCH_PLUGIN_H

#include <signal.h>
#include <slurm/spank.h>
#include <stdbool.h>

#include "decision.h"
#include "protocol.h"
#include "settings.h"

#define AB_LOG_PREFIX "autobatch: "

struct ab_plugin {
	bool site_ok;                /* plugstack arguments parsed and consistent */
	char site_err[AB_ERR_MAX];   /* why not, for every later hook to repeat */
	bool failed;                 /* a hook refused the request: later hooks do nothing */
	bool env_alias;              /* AB_OPTION_ENV was set by us from AUTOBATCH */
	bool in_allocation;          /* srun runs inside salloc/sbatch, not its own job */
	unsigned jobid, stepid;      /* the step about to launch, once known */
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
void ab_srun_exit(void); /* srun ends: a decision still being made is stopped */

/* What the probe step needs to know of the step srun is about to launch. */
struct ab_probe_job {
	const char *srun;       /* this srun's own binary */
	unsigned jobid;
	unsigned ntasks;        /* the data-parallel width for a global batch */
	const char *nodelist;   /* the step's nodes; the probe runs on the first */
	int argc;
	char **argv;            /* the step's command */
	const char *config;     /* absolute path, or NULL */
	const char *key;        /* the micro-batch key in it */
	const char *accum_key;  /* its gradient accumulation key (1 in trials), or NULL */
	long global_batch;      /* 0: none */
	/* a warm start: a cached decision of a job differing only in memory-neutral values */
	long warm_batch;        /* 0: none */
	uint64_t warm_per_sample;
	const char *warm_from;  /* its cache entry's name */
	char *const *env;       /* srun's environment when it decided (NULL: environ now) */
	void (*tick)(void *arg); /* called every 0.2 s while the probe step runs; or NULL */
	void *tick_arg;
};

/* probe_step.c: runs the probe step; 0 with the result (and its JSON in *json, malloc'ed,
 * when json is not NULL), or a negative errno with one sentence naming the cause. Once *stop
 * is set (srun is ending) the probe step is cancelled. */
int ab_probe_run(const struct ab_probe_job *job, const char *phase,
		 const volatile sig_atomic_t *stop, struct ab_result *res, char **json, char *err,
		 size_t errlen);

/* True in the nested srun that runs the probe step. */
bool ab_is_probe_step(void);

/* remote.c: slurmstepd. */
int ab_remote_user_init(spank_t sp, int ac, char **av);
int ab_remote_task_init(spank_t sp, int ac, char **av);

/* alloc.c: sbatch/salloc, where a bad request should fail at submission, not in the job. */
int ab_alloc_post_opt(spank_t sp, int ac, char **av);

#endif
