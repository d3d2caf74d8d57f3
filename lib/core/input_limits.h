/* input_limits.h - the sizes of what users and admins may give autobatch (paths, names, keys,
 * commands, fractions as typed): longer input is refused with a message, never cut.
 */
#ifndef AUTOBATCH_INPUT_LIMITS_H
#define AUTOBATCH_INPUT_LIMITS_H

#define AB_PATH_MAX 4096
#define AB_ARGS_MAX 1024   /* probe_args */
#define AB_NAME_MAX 64     /* preset names */
#define AB_KEY_MAX 256     /* dot-path config keys */
#define AB_COMMAND_MAX 4096
#define AB_FRACTION_TEXT_MAX 32 /* longer fraction text is refused before parsing */
#define AB_TIMEOUT_MAX (7 * 24 * 3600)
#define AB_TRIAL_SECONDS_MAX 86400 /* a trial's step or start-up allowance: the probe's bound */
#define AB_GLOBAL_BATCH_MAX 2147483647L
#define AB_TRIAL_CAP_MAX 100 /* --max-trials, --trial-cap, trial_cap= */

#endif
