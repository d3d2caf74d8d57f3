/* cache.h - decisions remembered per user, keyed by everything that shapes them (what srun
 * knows of the hardware, the command, the config less its batch values, the settings), so
 * a second identical srun --autobatch decides in milliseconds without a probe step.
 */
#ifndef AUTOBATCH_CACHE_H
#define AUTOBATCH_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "config_edit.h"
#include "fingerprint.h"

#define AB_CACHE_MAX_BYTES (1u << 20)

/* The entry's path under dir (created 0700 if missing): DIR/<16 hex digits>.json. */
int ab_cache_path(const char *dir, const struct ab_hash *h, char *path, size_t pathlen,
		  char *err, size_t errlen);

/* 0 with the entry's JSON (malloc'ed), -ENOENT when there is none, another negative errno
 * when it cannot be read (the caller treats that as a miss and replaces it). */
int ab_cache_load(const char *path, char **json);

/* Writes the entry atomically (temp file, rename): a reader never sees half of one. */
int ab_cache_store(const char *path, const char *json, char *err, size_t errlen);

/* Takes the entry's lock (PATH.lock), waiting up to timeout_s: concurrent identical sruns
 * then probe once, and the others find the decision in the cache. A file descriptor, or a
 * negative errno (the caller then probes without the lock). */
int ab_cache_lock(const char *path, double timeout_s);
void ab_cache_unlock(int fd);

#endif
