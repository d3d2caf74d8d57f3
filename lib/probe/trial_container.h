/* trial_container.h - what a trial passes to a container named in its command (apptainer or
 * singularity exec/run, straight or from a script): the trial's variables and its mounts.
 */
#ifndef AUTOBATCH_TRIAL_CONTAINER_H
#define AUTOBATCH_TRIAL_CONTAINER_H

/* In a trial's child, after its variables are set: each AUTOBATCH_* variable and PYTHONPATH
 * also as the runtimes' twins (protocol.h), which such a container passes in under
 * --cleanenv too, and the step hook's directory (read-only) and the trial's directory (its
 * config copy and report) added to their bind paths. A user's own twin of PYTHONPATH or bind
 * path is kept after ours. 0, or -1 with errno (no memory). */
int ab_trial_container_env(const char *hook_dir, const char *trial_dir);

/* NAME=VALUE and its twins: what a trial's launcher (a rank, a task of a trial step) sets
 * for its own process after the trial's variables were set. 0, or -1 with errno. */
int ab_trial_container_setenv(const char *name, const char *value);

/* A command whose container a trial cannot measure: podman or docker run/exec/start, whose
 * program runs under conmon or dockerd, outside the command's processes (a trial's peak and
 * its stop reach neither). 0, or -ENOTSUP with the reason and the fix in err. */
int ab_trial_container_check(char *const *argv, char *err, size_t errlen);

#endif
