/* options.h - the user options in every context: registered from the library's table,
 * recorded by one idempotent callback, and resolved against the site policy in one place.
 */
#ifndef AUTOBATCH_OPTIONS_H
#define AUTOBATCH_OPTIONS_H

#include <slurm/spank.h>
#include <stdbool.h>

#include "context.h"

/* Registers every option (so srun/sbatch/salloc --help list them) with callback cb. */
int ab_options_register(spank_t sp, spank_opt_cb_f cb);

/* The callback's work: records option val into c->req and, for --autobatch, resolves the
 * effective settings (a denied fraction fails here, where srun stops even for an optional
 * plugin). 0 or -1 after one line. */
int ab_option_record(struct ab_ctx *c, int val, const char *value, int remote);

/* Resolves c's effective settings from its site and request into c->eff; prints one line and
 * returns -1 on refusal (c->failed). quiet: no note of a clamp or an override. */
int ab_options_resolve(struct ab_ctx *c, bool quiet);

/* After the options (init_post_opt): the effective settings, resolved with every option
 * (one given after --autobatch included), and the note of a clamp or an override said once. */
int ab_options_settle(struct ab_ctx *c);

#endif
