/* fingerprint.c - see fingerprint.h. FNV-1a is enough: it only has to tell one user's
 * configurations apart, and a cache entry is checked before it is trusted.
 */
#include "fingerprint.h"

#include <string.h>

void ab_hash_init(struct ab_hash *h)
{
	h->h = 0xcbf29ce484222325ULL;
}

void ab_hash_add(struct ab_hash *h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++) {
		h->h ^= p[i];
		h->h *= 0x100000001b3ULL;
	}
}

void ab_hash_str(struct ab_hash *h, const char *s)
{
	uint64_t len = s ? strlen(s) : UINT64_MAX;

	ab_hash_add(h, &len, sizeof(len));
	if (s)
		ab_hash_add(h, s, strlen(s));
}

int ab_hash_config(struct ab_hash *h, const struct ab_config *cfg, const char *const keys[],
		   size_t nkeys)
{
	size_t pos = 0;

	/* the values' spans, in file order, are skipped */
	for (;;) {
		const struct ab_node *next = NULL, *n;

		for (size_t i = 0; i < nkeys; i++)
			if (keys[i] && ab_config_find(cfg, keys[i], -1, &n, NULL, 0) == 0 &&
			    n->start >= pos && (!next || n->start < next->start))
				next = n;
		if (!next)
			break;
		ab_hash_add(h, cfg->buf + pos, next->start - pos);
		ab_hash_add(h, "", 1); /* where a value was */
		pos = next->end;
	}
	ab_hash_add(h, cfg->buf + pos, cfg->len - pos);
	return 0;
}

