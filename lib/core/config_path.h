/* config_path.h - dot-path keys into YAML/JSON trees: `a.b[2].c`, `flags["x.y"]`.
 * Owns parsing a key text into segments (mapping keys and sequence indices).
 */
#ifndef AUTOBATCH_CONFIG_PATH_H
#define AUTOBATCH_CONFIG_PATH_H

#include <stdbool.h>
#include <stddef.h>

#define AB_PATH_SEGMENTS_MAX 64

struct ab_path_segment {
	bool is_index;
	size_t index;
	char *key; /* owned; NULL for an index */
};

struct ab_path {
	size_t n;
	struct ab_path_segment seg[AB_PATH_SEGMENTS_MAX];
};

/* Parses key text into path; 0 or -EINVAL with a message naming the character at fault. */
int ab_path_parse(const char *text, struct ab_path *path, char *err, size_t errlen);
void ab_path_free(struct ab_path *path);

/* Writes the canonical text of the first n segments (keys needing it are bracket-quoted). */
void ab_path_format(const struct ab_path *path, size_t n, char *buf, size_t buflen);

#endif
