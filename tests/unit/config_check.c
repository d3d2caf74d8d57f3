/* config_check.c - see config_check.h. */
#include "config_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct leaves {
	const struct ab_node **skip;
	size_t nskip;
	char **line;
	size_t n;
};

static int collect(size_t doc, const char *path, const struct ab_node *node, void *arg)
{
	struct leaves *l = arg;
	char **grown;
	size_t len;

	for (size_t i = 0; i < l->nskip; i++)
		if (l->skip[i] == node)
			return 0;
	if (!(grown = realloc(l->line, (l->n + 1) * sizeof(*grown))))
		return -1;
	l->line = grown;
	len = strlen(path) + node->value_len + 32;
	if (!(l->line[l->n] = malloc(len)))
		return -1;
	snprintf(l->line[l->n++], len, "%zu\t%s\t%d\t%s", doc, path, (int)node->kind,
		 node->value);
	return 0;
}

static void release(struct leaves *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->line[i]);
	free(l->line);
	free(l->skip);
}

static int targets(const struct ab_config *cfg, const struct ab_edit *edits, size_t n,
		   int document, struct leaves *l, char *why, size_t whylen)
{
	char err[512];

	l->skip = calloc(n ? n : 1, sizeof(*l->skip));
	for (size_t i = 0; i < n && l->skip; i++)
		if (ab_config_find(cfg, edits[i].key, document, &l->skip[i], err, sizeof(err)) < 0) {
			snprintf(why, whylen, "key %s: %s", edits[i].key, err);
			return -1;
		}
	l->nskip = n;
	return l->skip ? 0 : -1;
}

int check_only_targets_changed(const struct ab_config *before, const char *after,
			       size_t afterlen, const struct ab_edit *edits, size_t n,
			       int document, char *why, size_t whylen)
{
	struct leaves a = {0}, b = {0};
	struct ab_config *again = NULL;
	char err[512];
	int rc = -1;

	if (ab_config_parse(before->name, after, afterlen, before->format, &again, err,
			    sizeof(err)) < 0) {
		snprintf(why, whylen, "the edited file does not parse: %s", err);
		return -1;
	}
	if (targets(before, edits, n, document, &a, why, whylen) < 0 ||
	    targets(again, edits, n, document, &b, why, whylen) < 0)
		goto done;
	for (size_t i = 0; i < n; i++)
		if (strcmp(b.skip[i]->value, edits[i].value) != 0) {
			snprintf(why, whylen, "key %s reads '%s', not '%s'", edits[i].key,
				 b.skip[i]->value, edits[i].value);
			goto done;
		}
	if (ab_config_visit(before, collect, &a) < 0 || ab_config_visit(again, collect, &b) < 0) {
		snprintf(why, whylen, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < a.n || i < b.n; i++)
		if (i >= a.n || i >= b.n || strcmp(a.line[i], b.line[i]) != 0) {
			snprintf(why, whylen, "value %zu changed: '%s' became '%s'", i,
				 i < a.n ? a.line[i] : "(none)", i < b.n ? b.line[i] : "(none)");
			goto done;
		}
	rc = 0;
done:
	release(&a);
	release(&b);
	ab_config_free(again);
	return rc;
}
