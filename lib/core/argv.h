/* argv.h - an argument vector built up for execvp, for srun's probe step (spank/) and the
 * probe's trial steps (probe/): borrowed and owned strings, NULL-terminated, bounded.
 */
#ifndef AB_ARGV_H
#define AB_ARGV_H

#include <stdbool.h>
#include <stddef.h>

/* A command line longer than this is refused, not built: its words come from configs and
 * the user's command, and one loop over them must not grow without end in srun. */
#define AB_ARGV_MAX 4096

struct ab_argv {
	char **v;      /* v[n] is NULL once anything was added */
	size_t n, cap;
	char **owned;  /* what addf formatted, freed with the vector */
	size_t nowned, capowned;
	bool failed;   /* out of memory, or past AB_ARGV_MAX: ab_argv_done says so */
};

/* Appends arg, borrowed: it must outlive the vector. */
void ab_argv_add(struct ab_argv *a, const char *arg);
/* Appends a formatted argument, owned by the vector. */
void ab_argv_addf(struct ab_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends each blank-separated word of copy (modified in place, borrowed): an admin's
 * argument list, split without a shell. */
void ab_argv_add_words(struct ab_argv *a, char *copy);
/* 0 when the vector is complete; -E2BIG (past AB_ARGV_MAX) or -ENOMEM, with err. */
int ab_argv_done(const struct ab_argv *a, const char *what, char *err, size_t errlen);
void ab_argv_free(struct ab_argv *a);

#endif
