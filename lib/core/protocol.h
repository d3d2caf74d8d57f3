/* protocol.h - the names the processes of autobatch share (srun, slurmstepd, the probe, a
 * trial): environment variables, the JSON report's fields, and the rules over them.
 *
 * A name is written here once; the Python step hook (contrib/python) and the man pages
 * repeat the ones users see, and tests check them against each other.
 */
#ifndef AUTOBATCH_PROTOCOL_H
#define AUTOBATCH_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>

/* ---- what the user sets ---- */
#define AB_ENV_REQUEST "AUTOBATCH" /* AUTOBATCH=0.8: --autobatch=0.8 */
/* The environment form of --autobatch that srun and sbatch read (spank/dispatch.c). */
#define AB_OPTION_ENV_PREFIX "SLURM_SPANK__SLURM_SPANK_OPTION_autobatch_"
#define AB_OPTION_ENV AB_OPTION_ENV_PREFIX "autobatch"

/* ---- what the plugin exports to the job's tasks (each with its SLURM_ twin) ---- */
#define AB_ENV_BATCH_SIZE "AUTOBATCH_BATCH_SIZE"
#define AB_ENV_GRAD_ACCUM "AUTOBATCH_GRAD_ACCUM"
#define AB_ENV_GLOBAL_BATCH "AUTOBATCH_GLOBAL_BATCH"
#define AB_ENV_EVAL_BATCH_SIZE "AUTOBATCH_EVAL_BATCH_SIZE"
#define AB_ENV_FRACTION "AUTOBATCH_FRACTION"
#define AB_ENV_DEVICE_BYTES "AUTOBATCH_DEVICE_BYTES"
#define AB_ENV_REPORT "AUTOBATCH_REPORT"
/* "LIMIT:ENTRY:DIR" to each task of a decided step: the limit its decision promised, in
 * bytes, its cache entry's name and the cache's directory (or nothing after LIMIT:), which
 * the task's watch marks when it goes over */
#define AB_ENV_WATCH "AUTOBATCH_WATCH"
#define AB_ENV_CONFIG "AUTOBATCH_CONFIG"
/* slurmstepd, for frameworks that cap their own allocator */
#define AB_ENV_MEM_FRACTION "AUTOBATCH_MEM_FRACTION"
#define AB_ENV_XLA_MEM_FRACTION "XLA_PYTHON_CLIENT_MEM_FRACTION"
/* the same for newer JAX, which deprecates the XLA_PYTHON_ name */
#define AB_ENV_XLA_CLIENT_MEM_FRACTION "XLA_CLIENT_MEM_FRACTION"
#define AB_ENV_MPS_LIMIT "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"

/* ---- between the plugin's own processes ---- */
/* Set to the probing srun's pid for the nested srun, whose copy of the plugin then does
 * nothing: only a direct child of that srun matches, so no user trips it by accident. */
#define AB_GUARD_ENV "AUTOBATCH_PROBE_GUARD"
/* Set to JOB.STEP when the launch is refused: that step's tasks end before the command. */
#define AB_ABORT_ENV "SLURM_AUTOBATCH_ABORT"
/* The ticket of a step launched before its decision: its tasks wait for srun's answer on the
 * hold channel (hold.h). SLURM_-named so that --export=NONE keeps it. */
#define AB_HOLD_ENV "SLURM_AUTOBATCH_HOLD"

/* ---- the trial protocol: what the probe gives a trial (the hook reads these) ---- */
#define AB_ENV_TRIAL "AUTOBATCH_TRIAL"
#define AB_ENV_TRIAL_STEPS "AUTOBATCH_TRIAL_STEPS"
#define AB_ENV_TRIAL_REPORT "AUTOBATCH_TRIAL_REPORT"
#define AB_ENV_TRIAL_PHASE "AUTOBATCH_TRIAL_PHASE"
/* "1": the config evaluates inside training; the trial evaluates after its last step */
#define AB_ENV_TRIAL_EVAL "AUTOBATCH_TRIAL_EVAL"
/* the config's maximum length (N): batches of a loader whose samples cannot be read ahead (a
 * stream) are padded to it, the longest any batch of the run can be */
#define AB_ENV_TRIAL_PAD_TO "AUTOBATCH_TRIAL_PAD_TO"
/* "1" in a trial step's task: each Python process writes its own report, REPORT.pid.PID (a
 * launcher's workers, each sized as a rank) */
#define AB_ENV_TRIAL_PER_PROCESS "AUTOBATCH_TRIAL_PER_PROCESS"
/* A trial started while the one before it runs (its imports hidden behind that one): the
 * file whose appearance releases it, holding its batch. The hook waits for it before the
 * program opens its config copy, uses the GPU or steps; AB_ENV_BATCH_SIZE is set then. */
#define AB_ENV_TRIAL_HOLD "AUTOBATCH_TRIAL_HOLD"
/* "1": the program writes its own per-step lines to the trial's report (the config's
 * metrics file names it: MaxText's); the hook counts no steps of its own beside them */
#define AB_ENV_TRIAL_OWN_STEPS "AUTOBATCH_TRIAL_OWN_STEPS"
/* and AB_ENV_BATCH_SIZE, AB_ENV_CONFIG (the trial's copy of the config) */
/* TensorFlow maps nearly all of a GPU's memory at start unless told to grow: a trial tells
 * it (unless the user chose), so the device's count follows the program's demand */
#define AB_ENV_TF_GROWTH "TF_FORCE_GPU_ALLOW_GROWTH"
/* XLA (JAX) takes its whole pool at start (75% of the GPU by default): a trial tells it not
 * to, so the device's count is the program's demand, not the pool; the pool's cap
 * (AB_ENV_XLA_MEM_FRACTION and its newer name) is the real run's (ab_env_xla_fraction) */
#define AB_ENV_XLA_PREALLOCATE "XLA_PYTHON_CLIENT_PREALLOCATE"

/* ---- a trial that is a Slurm step: each task's lines to the ranks' launcher ----
 * `autobatch-probe task` says these on its standard output, which srun --label relays to
 * `autobatch-probe ranks --nodes` as "R: LINE": its node, each line of its report, its peak
 * in bytes, that it went over its capacity (bytes), and how it ended ("status N",
 * "signal N"). */
#define AB_TRIAL_MAX_RANKS 64 /* the ranks (tasks) one trial measures */
#define AB_TASK_NODE "@autobatch-task node"
#define AB_TASK_REPORT "@autobatch-task report"
#define AB_TASK_PEAK "@autobatch-task peak"
#define AB_TASK_OVER "@autobatch-task over"
#define AB_TASK_END "@autobatch-task end"

/* True for an environment entry ("NAME=value") that a nested srun must not inherit: srun
 * reads it as a default of its own options (the outer step's task count, memory, GPU or
 * binding requests, --export=NONE) or it is this plugin's own request or guard. */
bool ab_env_reshapes_srun(const char *entry);

/* The container another SPANK plugin runs the step in, from srun's environment (NULL for
 * environ): pyxis' --container-image or --container-name as srun, or sbatch and salloc
 * around it, hand it on, or its PYXIS_CONTAINER_ variables; NULL when there is none. Points
 * into the environment. */
const char *ab_env_container(char *const *env);

/* ---- the user's container, carried past the probe step to its trial steps (issue 42) ----
 * The probe step runs on the host: pyxis' routes into a container (srun's options as its
 * steps see them, sbatch's and salloc's as srun reads them, pyxis' own variables) are not in
 * its environment. srun's and pyxis' own are carried there as AB_ENV_CARRIED followed by the
 * entry, and `autobatch-probe ranks` gives them back to each trial step (ranks_step.c). */
#define AB_PYXIS_OPTION "_SLURM_SPANK_OPTION_pyxis_"
#define AB_PYXIS_ALLOC_OPTION "SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_"
#define AB_PYXIS_ENV "PYXIS_CONTAINER_"
#define AB_ENV_CARRIED "AUTOBATCH_CARRIED_"
/* The container of a probe's trial steps, after the job and the srun that probes (its pid):
 * imported once, reused by each trial, removed after the probe (spank/probe_step.c). pyxis
 * calls it pyxis_NAME, or pyxis_JOBID_NAME where its containers are the job's. */
#define AB_TRIAL_CONTAINER "autobatch-trial-%s-%s"
/* "1" in the environment of the step that removes the trials' container after a probe; its
 * task then gets AB_ENV_NODE_PATH: slurmstepd's own PATH (the site's), on which pyxis finds
 * enroot, and which the job's may lack (a batch script running in a container) */
#define AB_ENV_CLEANUP "AUTOBATCH_CLEANUP"
#define AB_ENV_NODE_PATH "AUTOBATCH_NODE_PATH"

/* Whether entry ("NAME=value") is one of pyxis' routes into a container; *carry then says
 * whether the probe step carries it (srun's options and pyxis' variables; sbatch's reach
 * srun's already). */
bool ab_env_pyxis(const char *entry, bool *carry);

/* The container the probe step carried (its image, else its name), from this process's
 * environment; NULL when it carried none. */
const char *ab_env_carried_container(void);

/* ---- a container named in the command (apptainer or singularity exec/run) ----
 * It passes APPTAINERENV_X (SINGULARITYENV_X for SingularityCE) in as X, under --cleanenv
 * too, and mounts what APPTAINER_BINDPATH (SINGULARITY_BINDPATH) lists: the decision and a
 * trial's variables reach such a container through their twins under both prefixes. */
#define AB_CONTAINER_ENV_PREFIXES {"APPTAINERENV_", "SINGULARITYENV_"}
#define AB_CONTAINER_BINDPATHS {"APPTAINER_BINDPATH", "SINGULARITY_BINDPATH"}
#define AB_CONTAINER_RUNTIMES 2

/* NAME's container twins (AB_CONTAINER_ENV_PREFIXES), each set to VALUE, for a container
 * named in the command that drops the environment (apptainer exec --cleanenv); 0 or -1. */
int ab_env_set_container_twins(const char *name, const char *value);

/* XLA's pool cap names, both JAX's (newer JAX reads either); whether the environment
 * names one, not empty (the user's own, which wins). A decided step's tasks get the fraction
 * asked where it names none (spank/srun_apply.c), and no preallocation unless the user chose
 * (with a cap of their own too):
 * the run then allocates as its trials did, so its pool holds what was measured (XLA's
 * default, 75% of the GPU, is below a larger fraction's choice) and the GPU's count is its
 * demand (a pool preallocated at the limit would read over it by the CUDA context). */
#define AB_XLA_FRACTION_NAMES {AB_ENV_XLA_MEM_FRACTION, AB_ENV_XLA_CLIENT_MEM_FRACTION}
/* and what a decided step's tasks may get of XLA's, all three */
#define AB_XLA_RUN_NAMES {AB_ENV_XLA_MEM_FRACTION, AB_ENV_XLA_CLIENT_MEM_FRACTION, \
			  AB_ENV_XLA_PREALLOCATE}
bool ab_env_xla_fraction_named(void);

/* A trial's cap, the same: VALUE (a fraction) by both names and their container twins,
 * unless the environment names one. 0 or -1. */
int ab_env_xla_fraction(const char *value);

/* NAME's twin for command container runtime i (0: Apptainer, 1: SingularityCE). */
int ab_env_container_twin(int i, const char *name, char *buf, size_t buflen);

/* ---- the probe's own ---- */
#define AB_ENV_CUDA_MODULE "AUTOBATCH_CUDA_MODULE" /* autobatch-cuda.so elsewhere than beside it */

/* ---- the probe's JSON report (autobatch-probe(1), design "JSON report") ---- */
#define AB_FIELD_STATUS "status"
#define AB_STATUS_OK "ok"
#define AB_STATUS_FAILED "failed"
#define AB_STATUS_INTERRUPTED "interrupted"
#define AB_STATUS_DEVICE "device" /* run --describe-device: the device, nothing run */
#define AB_FIELD_ERROR "error"
/* with a failure: true when the smallest batch tried went over the limit (nothing fits), so
 * the plugin can say why a sharded step's one-process trials found nothing */
#define AB_FIELD_NOTHING_FITS "nothing_fits"
#define AB_FIELD_BATCH_SIZE "batch_size"
#define AB_FIELD_GRAD_ACCUM "grad_accum"
#define AB_FIELD_GLOBAL_BATCH "global_batch"
#define AB_FIELD_EVAL_BATCH_SIZE "eval_batch_size"
/* what the eval batch's own probe cost and measured: {"trials": N, "elapsed_s": S,
 * "peak_bytes": P} (its trials trained beside the chosen train batch; P is its chosen pair's
 * peak; the report's "trials" are the train probe's) */
#define AB_FIELD_EVAL_PROBE "eval_probe"
#define AB_FIELD_FRACTION "fraction"
#define AB_FIELD_CONFIDENCE "confidence"
/* its tier where the probe's time limit ended the search (search.h): the plugin says so */
#define AB_CONFIDENCE_TIME_LIMIT 65
#define AB_FIELD_ELAPSED_S "elapsed_s"
#define AB_FIELD_TRIALS "trials"
/* each trial's batch, whether it fit, and what its steps showed */
#define AB_FIELD_BATCH "batch"
#define AB_FIELD_FITS "fits"
#define AB_FIELD_PEAK_BYTES "peak_bytes"
/* a trial that ran out of memory: its peak was at least this many bytes (the trial protocol's
 * {"oom": true, "peak_at_least_bytes": N}, and the report's trials) */
#define AB_FIELD_FLOOR "peak_at_least_bytes"
#define AB_FIELD_DEVICE "device"
#define AB_FIELD_DEVICE_NAME "name"
#define AB_FIELD_GPU_MODELS "gpu_models" /* a step over several: each {type, total_bytes, nodes, node} */
#define AB_FIELD_SIZED_FOR "sized_for"   /* of those, the smallest, which was probed */
#define AB_FIELD_PER_RANK_LIMITS "per_rank_limits" /* or none: each rank held to its own */
#define AB_FIELD_GPU_TYPE "type"
#define AB_FIELD_NODE "node"
#define AB_FIELD_NODES "nodes"
#define AB_FIELD_TOTAL_BYTES "total_bytes"
#define AB_FIELD_CACHE "cache"
#define AB_FIELD_ROUNDS "rounds"     /* rounds of trials run at once */
#define AB_FIELD_PARALLEL "parallel" /* trials at most at once (1: one after another) */
#define AB_FIELD_RANKS "ranks"       /* ranks (tasks) of each trial (1: one process) */
#define AB_FIELD_TRIAL_NODES "trial_nodes" /* each trial a step of the job over N nodes; 0: not */
#define AB_FIELD_CONTAINER "container" /* the user's container the trial steps ran in, or null */
#define AB_FIELD_RAMP_UP "ramp_up" /* {"of": "device"|"global", "start", "step", "trials_off"} */
/* {"key", "every", "seen"}: evaluation inside training, and its batches the chosen trial ran */
#define AB_FIELD_EVAL_IN_TRAINING "eval_in_training"
/* what the chosen trial held between its steps rose by at each, {"bytes_per_step": N,
 * "steps_to_limit": S}: at that rate its run reaches the limit after about S steps */
#define AB_FIELD_HELD_GROWTH "held_growth"
#define AB_FIELD_LENGTHS "lengths" /* what the chosen batch was measured at, of the run's longest */
#define AB_FIELD_PER_SAMPLE "per_sample_bytes" /* the memory line's slope at the choice */
#define AB_FIELD_WARM_START "warm_start" /* {"from": entry, "batch": B, "verified": bool} */
#define AB_FIELD_WARM_FROM "from"
/* {"key": K, "trials": 1, "config": N}: trials ran with accumulation 1 of the config's N */
#define AB_FIELD_TRIAL_ACCUM "accumulation_in_trials"

/* What the search optimizes: named on the probe's command line and in the report. */
enum ab_objective { AB_OBJECTIVE_MEMORY, AB_OBJECTIVE_THROUGHPUT };
/* How a trial runs: the user's command, or the proxy training step of the model. */
enum ab_mode { AB_MODE_EXEC, AB_MODE_MODEL };
/* What a trial of a step of several tasks is (--autobatch-trial-shape): the whole step (its
 * nodes and tasks, as a step of the job), the step's tasks of its first node, or one process
 * on one GPU. */
enum ab_shape { AB_SHAPE_STEP, AB_SHAPE_NODE, AB_SHAPE_GPU };
#define AB_SHAPE_COUNT 3
extern const char *const ab_shape_names[AB_SHAPE_COUNT];

/* The name of NAME's twin, "SLURM_NAME", which srun exports beside it: Slurm keeps SLURM_*
 * through --export=NONE, and slurmstepd copies it back (spank/remote.c). 0 or
 * -ENAMETOOLONG. */
int ab_env_twin(const char *name, char *buf, size_t buflen);

/* An option's value as Slurm hands it over: sbatch propagates a bare --autobatch as the
 * text "(null)", which means no value. */
const char *ab_option_value(const char *arg);

/* path as the step's tasks see it: in dir (srun -D's, NULL or "": none) when relative. 0, or
 * -ENAMETOOLONG when it does not fit buf. */
int ab_step_path(const char *dir, const char *path, char *buf, size_t len);

/* The global batch of a decision: the one the user asked for, else micro-batch x
 * accumulation x data-parallel width (devices <= 0 counts as 1); 0 when it overflows. */
long ab_global_batch(long requested, long batch, long grad_accum, long devices);

#endif
