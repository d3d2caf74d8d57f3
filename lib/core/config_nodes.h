/* config_nodes.h - the byte-span tree the readers build and lookups and edits walk: nodes
 * and documents. Not for use outside lib/core/config_*.c.
 */
#ifndef AUTOBATCH_CONFIG_NODES_H
#define AUTOBATCH_CONFIG_NODES_H

#include "config_edit.h"

struct ab_node *ab_node_new(enum ab_node_kind kind);
void ab_node_free(struct ab_node *node);
/* Appends a child (key NULL for a sequence); takes ownership of both, even on failure. */
int ab_node_push(struct ab_node *parent, struct ab_node *key, struct ab_node *item);
/* Takes ownership of root, even on failure. */
int ab_config_push_doc(struct ab_config *cfg, struct ab_node *root);

/* Length of a UTF-8 sequence from its lead byte (input is validated before parsing). */
static inline size_t ab_utf8_len(unsigned char lead)
{
	return lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
}

/* Bytes of a leading UTF-8 byte order mark, 0 or 3. */
size_t ab_bom_len(const char *buf, size_t len);

#endif
