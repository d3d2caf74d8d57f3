/* config_nodes.c - the byte-span tree the YAML and JSON readers build: nodes, documents,
 * and freeing them (see config_nodes.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_nodes.h"
#include "error.h"

struct ab_node *ab_node_new(enum ab_node_kind kind)
{
	struct ab_node *n = calloc(1, sizeof(*n));

	if (n)
		n->kind = kind;
	return n;
}

void ab_node_free(struct ab_node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++) {
		if (n->keys)
			ab_node_free(n->keys[i]);
		ab_node_free(n->items[i]);
	}
	free(n->keys);
	free(n->items);
	free(n->value);
	free(n->anchor);
	free(n->tag);
	free(n);
}

int ab_node_push(struct ab_node *parent, struct ab_node *key, struct ab_node *item)
{
	bool map = parent->kind == AB_NODE_MAPPING;
	struct ab_node **items = realloc(parent->items, (parent->n + 1) * sizeof(*items));
	struct ab_node **keys = NULL;

	if (items)
		parent->items = items;
	if (items && map && (keys = realloc(parent->keys, (parent->n + 1) * sizeof(*keys))))
		parent->keys = keys;
	if (!items || (map && !keys)) {
		ab_node_free(key);
		ab_node_free(item);
		return -ENOMEM;
	}
	if (map)
		parent->keys[parent->n] = key;
	parent->items[parent->n++] = item;
	return 0;
}

int ab_config_push_doc(struct ab_config *cfg, struct ab_node *root)
{
	struct ab_node **docs = realloc(cfg->docs, (cfg->ndocs + 1) * sizeof(*docs));

	if (!docs) {
		ab_node_free(root);
		return -ENOMEM;
	}
	cfg->docs = docs;
	cfg->docs[cfg->ndocs++] = root;
	return 0;
}

void ab_config_free(struct ab_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->ndocs; i++)
		ab_node_free(cfg->docs[i]);
	free(cfg->docs);
	free(cfg->buf);
	free(cfg->name);
	free(cfg);
}

size_t ab_bom_len(const char *buf, size_t len)
{
	return len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3) ? 3 : 0;
}
