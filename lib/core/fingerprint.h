/* fingerprint.h - a 64-bit fingerprint (FNV-1a) of settings, of a config with the values
 * autobatch writes left out, and of the program files a command names: the cache's key, and
 * how a rewrite tells a user's edit apart.
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
/* Only the values of keys (absent ones too), in keys' order: what ab_hash_config skips. */
void ab_hash_config_values(struct ab_hash *h, const struct ab_config *cfg,
			   const char *const keys[], size_t nkeys);

/* Adds the program files the command names, relative to dir (NULL: here): its program
 * (argv[0], as srun found it) and each word, or what follows '=' in one, naming a script
 * (.py, .sh, .bash), other than the file skip names (the config, fingerprinted without its
 * batch values). Each adds its word and its bytes, or past AB_HASH_FILE_MAX its size,
 * modification time, head and tail: an edited train.py is another program. At most
 * AB_HASH_FILES files; only regular files are opened. */
#define AB_HASH_FILES 16
#define AB_HASH_FILE_MAX (128 << 10)
void ab_hash_command_files(struct ab_hash *h, int argc, char *const argv[], const char *dir,
			   const char *skip);

#endif
