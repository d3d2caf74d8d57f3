/* cache.h - decisions remembered per user, keyed by everything that shapes them (what srun
 * knows of the hardware, the command, the config less its batch values, the settings), so
 * a second identical srun --autobatch decides in milliseconds without a probe step.
 *
 * Every access is relative to one directory descriptor, opened once and checked: a shared
 * site directory is other users' ground, so no path under it is ever followed by name.
 */
#ifndef AUTOBATCH_CACHE_H
#define AUTOBATCH_CACHE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "fingerprint.h"
#include "input_limits.h"

#define AB_CACHE_MAX_BYTES (1u << 20)
#define AB_CACHE_NAME_MAX 32

/* The user's cache directory, open. */
struct ab_cache {
	int fd;                 /* -1: no cache */
	char dir[AB_PATH_MAX];  /* for messages */
};

/* Opens the site's cache_dir: it must exist, be a real directory of root's (or of the
 * caller's own euid, for tests and single-user installs) that no one else can write to
 * except under the sticky bit; then the caller's subdirectory named by its uid, created
 * 0700 if missing, which must be the caller's and closed to others. -EPERM with a message
 * for the admin when the site directory is unsafe; -EEXIST when the caller's subdirectory
 * is (someone else made it first, or it is open): the caller's own cache can stand in. */
int ab_cache_open_site(const char *site_dir, struct ab_cache *c, char *err, size_t errlen);

/* Opens (creating 0700) a personal cache directory, such as $XDG_CACHE_HOME/autobatch: a
 * real directory of the caller's. */
int ab_cache_open_dir(const char *dir, struct ab_cache *c, char *err, size_t errlen);

void ab_cache_close(struct ab_cache *c);

/* The entry's name in the directory: <16 hex digits>.json, or warm-<16 hex digits>.json for
 * the start a sweep's next job verifies. */
void ab_cache_entry_name(const struct ab_hash *h, bool warm, char *name, size_t len);

/* 0 with the entry's JSON (malloc'ed), -ENOENT when there is none, another negative errno
 * when it cannot be trusted (not a regular file of the caller's with one link, too large):
 * the caller treats that as a miss and replaces it. Never blocks on a FIFO. */
int ab_cache_load(const struct ab_cache *c, const char *name, char **json);

/* Writes the entry atomically (temp file, rename): a reader never sees half of one. */
int ab_cache_store(const struct ab_cache *c, const char *name, const char *json, char *err,
		   size_t errlen);

/* Takes the entry's lock (NAME.lock), waiting up to timeout_s or until *stop (may be NULL)
 * is set, calling tick(tick_arg) (when not NULL) between tries: concurrent identical sruns
 * then probe once, and the others find the decision in the cache (and answer their tasks
 * meanwhile). A file descriptor, or a negative errno (the caller then probes without it). */
int ab_cache_lock(const struct ab_cache *c, const char *name, double timeout_s,
		  const volatile sig_atomic_t *stop, void (*tick)(void *), void *tick_arg);
void ab_cache_unlock(int fd);

/* What a task's watch saw when the real run of an entry's batch went over the limit its
 * decision promised, kept as NAME.over beside the entry: autobatch-probe watch writes it,
 * srun's next lookup of NAME reads it, and a new decision of NAME clears it. */
struct ab_cache_over {
	long batch, task;
	uint64_t peak_bytes, limit_bytes;
	char node[64];
};

/* Marks NAME with o, unless its mark already holds as much or more for the same batch (another
 * task of the step went further over), under the mark's lock where it can be taken within
 * 2 s (else without it: a mark late is worse than one racing): 0 when NAME is marked. */
int ab_cache_mark_over(const struct ab_cache *c, const char *name,
		       const struct ab_cache_over *o, char *err, size_t errlen);
/* 0 with *o; -ENOENT when there is no mark; -EPROTO when it is unreadable or says no run
 * over its limit (the caller clears it). */
int ab_cache_read_over(const struct ab_cache *c, const char *name, struct ab_cache_over *o);
void ab_cache_clear_over(const struct ab_cache *c, const char *name);
/* The largest batch the next probe may choose after a real run of o->batch went over: the
 * smaller of the batch scaled by limit / peak (what grows with the batch) and the batch less
 * the samples the excess holds on the entry's line, per_sample bytes each (what the run added
 * beside the batch: memory held after some steps is no share of the batch, and the scaled
 * cap took three over runs to get under it); per_sample 0: the scaled one. At least 1, below
 * the batch. */
long ab_cache_over_cap(const struct ab_cache_over *o, uint64_t per_sample);

#endif
