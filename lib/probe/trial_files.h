/* trial_files.h - where exec-mode trials keep their files: the probe's work directory under
 * $TMPDIR (created; those of killed probes, or of a trial step's killed tasks, cleaned up;
 * removed), and per trial a directory
 * with its report file, its log, the private config copy at its batch, and the command's
 * words that name the config pointed at that copy.
 */
#ifndef AUTOBATCH_TRIAL_FILES_H
#define AUTOBATCH_TRIAL_FILES_H

#include <limits.h>
#include <stddef.h>

#include "config_edit.h"

/* Creates DIR as PARENT/autobatch-probe.HOST.PID.XXXXXX (mode 0700; PARENT NULL: $TMPDIR),
 * locked (*lock, held until the probe closes it or ends), first removing those of this host's
 * probes that are gone (unlocked). 0 or a negative errno with a message. */
int ab_workdir_create(const char *parent, char *dir, size_t len, int *lock, char *err,
		      size_t errlen);
/* The same as WHAT.HOST.PID.XXXXXX (a trial step's task: "autobatch-task"), removing those of
 * this host's WHAT that are gone. */
int ab_workdir_create_as(const char *parent, const char *what, char *dir, size_t len, int *lock,
			 char *err, size_t errlen);

/* Marks a work directory kept (--keep-trials): no later probe takes it for a killed one's.
 * 0 or a negative errno. */
int ab_workdir_keep(const char *dir);

/* Removes a directory of ours and everything in it, never following a link. */
void ab_trial_tree_remove(const char *path);

/* What the trials of one probe share. */
struct ab_trial_place {
	const char *workdir;
	const char *config; /* the user's config, or NULL */
	const char *key;    /* the batch key written into the copy */
	const char *accum_key; /* the accumulation key, written as 1 into the copy; or NULL */
	int document;       /* -1: the key's only document */
	const char *ramp_key; /* a batch ramp-up's switch, written false into it; or NULL */
	const char *eval_key; /* evaluation inside training every N steps, written as eval_at */
	int eval_at;          /* the trial's last step: the warm-up and the measured steps */
	/* saving every N steps beside eval_key: written as a multiple of eval_at that no trial
	 * reaches (Hugging Face's load_best_model_at_end refuses a save interval that is not a
	 * multiple of the evaluation's, and a save would write into the user's output_dir) */
	const char *save_key;
	const char *metrics_key;    /* the program's metrics file: the trial's report; or NULL */
	const char *checkpoint_key; /* its checkpoint switch, written false; or NULL */
	const char *pin_key;        /* a key written as pin_batch (the eval probe's train batch) */
	long pin_batch;
	const char *global_key;     /* the global batch beside accum_key, written null (DeepSpeed
				     * derives it from the micro-batch, the accumulation and its
				     * world, and refuses one that disagrees); or NULL */
};

struct ab_trial_files {
	char dir[PATH_MAX];
	char report[PATH_MAX]; /* the trial's report (AUTOBATCH_TRIAL_REPORT), created empty */
	char log[PATH_MAX];    /* its stdout and stderr */
	char config[PATH_MAX]; /* the private copy, or "" */
	/* a trial started ahead (AUTOBATCH_TRIAL_HOLD): waits for this file, its batch */
	char go[PATH_MAX];
};

/* Creates trial COUNT's directory and files, the config copy with BATCH at the key (and 1 at
 * the accumulation key) written by the same editor the plugin uses. BATCH 0: a trial started
 * ahead of its turn, its batch not known yet: no config copy until ab_trial_release. */
int ab_trial_files_create(const struct ab_trial_place *t, int count, long batch,
			  struct ab_trial_files *f, char *err, size_t errlen);

/* Writes the config copy with BATCH (as ab_trial_files_create does) over none. */
int ab_trial_config_write(const struct ab_trial_place *t, long batch,
			  const struct ab_trial_files *f, char *err, size_t errlen);

/* Gives a trial started ahead its BATCH: the config copy, then the go file that releases it. */
int ab_trial_release(const struct ab_trial_place *t, long batch, const struct ab_trial_files *f,
		     char *err, size_t errlen);

/* A command that sets KEY on its own command line (KEY=V, +KEY=V, ++KEY=V: MaxText's and
 * Hydra's overrides; --KEY=V, --KEY V) takes that over the config file, in trials and run
 * alike: -EINVAL with the word, the reason and the fix in err; 0 otherwise. */
int ab_trial_argv_check(char *const *cmd, const char *key, const char *config, char *err,
			size_t errlen);

/* The trial's argv: CMD with each word that names CONFIG (by any path, or as --opt=PATH)
 * naming the copy instead; words it had to build are in owned[i] (free them). NULL when out
 * of memory. */
char **ab_trial_argv(char *const *cmd, const char *config, const struct ab_trial_files *f,
		     char **owned);

#endif
