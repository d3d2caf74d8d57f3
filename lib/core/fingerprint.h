/* fingerprint.h - a 64-bit fingerprint (FNV-1a) of settings and of a config with the values
 * autobatch writes left out: the cache's key, and how a rewrite tells a user's edit apart.
 */
#ifndef AUTOBATCH_FINGERPRINT_H
#define AUTOBATCH_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

#include "config_edit.h"

struct ab_hash {
	uint64_t h;
};

void ab_hash_init(struct ab_hash *h);
void ab_hash_add(struct ab_hash *h, const void *data, size_t len);
/* A string with its length, so ("ab","c") and ("a","bc") differ. */
void ab_hash_str(struct ab_hash *h, const char *s);

/* Adds the config's bytes with the values of keys (those the plugin rewrites) left out:
 * the fingerprint stays the same when only those values change. */
int ab_hash_config(struct ab_hash *h, const struct ab_config *cfg, const char *const keys[],
		   size_t nkeys);

#endif
