/* config_readers.h - the YAML (libyaml) and JSON (json-c) readers: each fills a config's
 * tree from its text. Not for use outside lib/core/config_*.c.
 */
#ifndef AUTOBATCH_CONFIG_READERS_H
#define AUTOBATCH_CONFIG_READERS_H

#include <stddef.h>

#include "config_edit.h"

/* Fill cfg->docs from cfg->buf, or fail with a message naming line and column. */
int ab_yaml_read(struct ab_config *cfg, char *err, size_t errlen);
int ab_json_read(struct ab_config *cfg, char *err, size_t errlen);
/* Strict JSON check by json-c; 0 when cfg->buf is one valid JSON value. */
int ab_json_validate(const struct ab_config *cfg, char *err, size_t errlen);

#endif
