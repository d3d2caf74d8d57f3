/* config_lookup.c - keys found in the tree: visiting every key, dot paths resolved with every
 * refusal users need explained (aliases, merges, kinds), suggestions for a missing key.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_nodes.h"
#include "config_path.h"
#include "error.h"

#define SUGGESTIONS 3

/* ---- visiting ---------------------------------------------------------------------- */

struct visit {
	ab_config_visit_fn fn;
	void *arg;
	size_t doc;
	char path[1024];
};

static int visit_node(struct visit *v, const struct ab_node *n, size_t len, int depth)
{
	int rc = 0;

	if (n->kind == AB_NODE_SCALAR || n->kind == AB_NODE_ALIAS)
		return len ? v->fn(v->doc, v->path, n, v->arg) : 0;
	if (depth > AB_CONFIG_MAX_DEPTH)
		return 0;
	for (size_t i = 0; i < n->n && rc == 0; i++) {
		const struct ab_node *k = n->keys ? n->keys[i] : NULL;
		int w;

		if (k && k->kind != AB_NODE_SCALAR)
			continue;
		if (!k)
			w = snprintf(v->path + len, sizeof(v->path) - len, "[%zu]", i);
		else if (strchr(k->value, '\'') && strchr(k->value, '"'))
			continue; /* no quotes can name it */
		else if (strpbrk(k->value, ".[]\"'") || !*k->value) /* quoted as it can be typed */
			w = snprintf(v->path + len, sizeof(v->path) - len, "[%c%s%c]",
				     strchr(k->value, '\'') ? '"' : '\'', k->value,
				     strchr(k->value, '\'') ? '"' : '\'');
		else
			w = snprintf(v->path + len, sizeof(v->path) - len, "%s%s", len ? "." : "",
				     k->value);
		if (w < 0 || (size_t)w >= sizeof(v->path) - len)
			continue; /* a path too long to name is not one to suggest */
		rc = visit_node(v, n->items[i], len + (size_t)w, depth + 1);
		v->path[len] = '\0';
	}
	return rc;
}

int ab_config_visit(const struct ab_config *cfg, ab_config_visit_fn fn, void *arg)
{
	struct visit v = {.fn = fn, .arg = arg};
	int rc = 0;

	for (v.doc = 0; v.doc < cfg->ndocs && rc == 0; v.doc++) {
		v.path[0] = '\0';
		rc = visit_node(&v, cfg->docs[v.doc], 0, 0);
	}
	return rc;
}

/* ---- suggestions for a missing key ------------------------------------------------- */

static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), *row, best;

	if (la > 256 || lb > 256 || !(row = malloc((lb + 1) * sizeof(*row))))
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], cost = a[i - 1] == b[j - 1] ? 0 : 1;
			size_t v = diag + cost;

			if (up + 1 < v)
				v = up + 1;
			if (row[j - 1] + 1 < v)
				v = row[j - 1] + 1;
			row[j] = v;
			diag = up;
		}
	}
	best = row[lb];
	free(row);
	return best;
}

struct nearest {
	const char *want;
	char path[SUGGESTIONS][256];
	size_t line[SUGGESTIONS], dist[SUGGESTIONS], n;
};

static int consider(size_t doc, const char *path, const struct ab_node *node, void *arg)
{
	struct nearest *s = arg;
	size_t d = distance(s->want, path), at;

	/* A key that contains what was typed, or is contained in it, is the likely one. */
	if (d != (size_t)-1 && (strstr(path, s->want) || strstr(s->want, path)))
		d /= 4;

	(void)doc;
	if (d == (size_t)-1)
		return 0;
	for (at = s->n; at > 0 && s->dist[at - 1] > d; at--)
		;
	if (at >= SUGGESTIONS)
		return 0;
	for (size_t i = (s->n < SUGGESTIONS ? s->n : SUGGESTIONS - 1); i > at; i--) {
		memcpy(s->path[i], s->path[i - 1], sizeof(s->path[i]));
		s->line[i] = s->line[i - 1];
		s->dist[i] = s->dist[i - 1];
	}
	snprintf(s->path[at], sizeof(s->path[at]), "%s", path);
	s->line[at] = node->line;
	s->dist[at] = d;
	if (s->n < SUGGESTIONS)
		s->n++;
	return 0;
}

static int missing_key(const struct ab_config *cfg, const char *key, char *err, size_t errlen)
{
	struct nearest s = {.want = key};
	char list[1024] = "";
	size_t len = 0;

	ab_config_visit(cfg, consider, &s);
	for (size_t i = 0; i < s.n; i++)
		ab_append(list, sizeof(list), &len, "%s%s (line %zu)", i ? ", " : "", s.path[i],
			  s.line[i]);
	if (s.n == 0)
		return ab_fail(err, errlen, ENOENT, "%s: key '%s' not found: the file has no "
						    "values",
			       cfg->name, key);
	return ab_fail(err, errlen, ENOENT, "%s: key '%s' not found; nearest keys: %s", cfg->name,
		       key, list);
}

/* ---- lookup ------------------------------------------------------------------------ */

struct lookup {
	const struct ab_config *cfg;
	const char *key;
	char *err;
	size_t errlen;
	bool reading; /* a value read, never edited: aliases and merges followed */
};

static bool key_is(const struct ab_node *k, const char *name)
{
	return k && k->kind == AB_NODE_SCALAR && strlen(name) == k->value_len &&
	       memcmp(k->value, name, k->value_len) == 0;
}

static bool is_merge_key(const struct ab_node *k)
{
	return k && k->kind == AB_NODE_SCALAR && k->style == AB_STYLE_PLAIN &&
	       strcmp(k->value, "<<") == 0;
}

/* MERGE_WORK: the keys a lookup compares through '<<' merges at most. Merges can fan out
 * (each level merging the one below twice) and a mapping can merge itself through an alias:
 * counted in keys, not mappings, a hostile file costs at most that much (found by fuzzing;
 * 40,000 merges of a 40,000-key mapping took minutes inside srun when mappings were counted). */
#define MERGE_WORK (1 << 20)

/* name's value through the mapping's '<<' merges in their order (the first merged mapping
 * that has it wins, as YAML's merge says), merges of merges too; *via is the merge of map's
 * own it came through. *budget is the work left; below 0, the search stopped unfinished. */
static const struct ab_node *find_merged(const struct ab_node *map, const char *name,
					 const struct ab_node **via, int depth, long *budget)
{
	for (size_t i = 0; i < map->n && depth < 32 && *budget >= 0; i++) {
		const struct ab_node *src = map->items[i];
		size_t count = src->kind == AB_NODE_SEQUENCE ? src->n : 1;

		for (size_t j = 0; is_merge_key(map->keys[i]) && j < count; j++) {
			const struct ab_node *m = src->kind == AB_NODE_SEQUENCE ? src->items[j] : src;
			const struct ab_node *t = m->kind == AB_NODE_ALIAS ? m->target : m, *v;

			if (!t || t->kind != AB_NODE_MAPPING)
				continue;
			if ((*budget -= (long)t->n + 1) < 0)
				return NULL;
			for (size_t k = 0; k < t->n; k++)
				if (key_is(t->keys[k], name)) {
					*via = m;
					return t->items[k];
				}
			if (t != map && (v = find_merged(t, name, via, depth + 1, budget))) {
				*via = m;
				return v;
			}
		}
	}
	return NULL;
}

static int refuse_merge(const struct lookup *l, const char *part, const struct ab_node *via)
{
	if (via->kind == AB_NODE_ALIAS)
		return ab_fail(l->err, l->errlen, EPERM,
			       "%s: line %zu: key '%s' comes only from the merge '<<: *%s': edit "
			       "'%s' under the anchor &%s (line %zu), which changes every mapping "
			       "merging it, or add '%s' to this mapping",
			       l->cfg->name, via->line, l->key, via->value, part, via->value,
			       via->target->line, part);
	return ab_fail(l->err, l->errlen, EPERM,
		       "%s: line %zu: key '%s' comes only from a '<<' merge: edit '%s' in the merged "
		       "mapping at line %zu, or add it to this mapping",
		       l->cfg->name, via->line, l->key, part, via->line);
}

static int child_by_key(const struct lookup *l, const struct ab_node *map, const char *name,
			const struct ab_node **out)
{
	const struct ab_node *found = NULL, *first_key = NULL, *via = NULL;

	for (size_t i = 0; i < map->n; i++) {
		if (!key_is(map->keys[i], name))
			continue;
		if (found)
			return ab_fail(l->err, l->errlen, EEXIST,
				       "%s: key '%s' occurs twice (lines %zu and %zu): remove one, "
				       "programs disagree on which counts",
				       l->cfg->name, l->key, first_key->line, map->keys[i]->line);
		found = map->items[i];
		first_key = map->keys[i];
	}
	if (found) {
		*out = found;
		return 0;
	}
	long budget = MERGE_WORK;

	found = find_merged(map, name, &via, 0, &budget);
	if (budget < 0)
		return ab_fail(l->err, l->errlen, E2BIG,
			       "%s: line %zu: key '%s': its mapping's '<<' merges hold more than the "
			       "%d keys autobatch compares: write the key out in it",
			       l->cfg->name, map->line, l->key, MERGE_WORK);
	if (!found)
		return -ENOENT;
	if (!l->reading)
		return refuse_merge(l, name, via);
	*out = found;
	return 0;
}

static int refuse_alias(const struct lookup *l, const struct ab_node *alias, bool last)
{
	return ab_fail(l->err, l->errlen, EPERM,
		       "%s: line %zu: key '%s' %s the alias *%s, which repeats the anchor &%s at "
		       "line %zu: edit the value there (every alias follows it)",
		       l->cfg->name, alias->line, l->key, last ? "is" : "goes through",
		       alias->value, alias->value, alias->target->line);
}

static const char *kind_name(const struct ab_node *n)
{
	return n->kind == AB_NODE_MAPPING ? "a mapping" : n->kind == AB_NODE_SEQUENCE ? "a list"
										   : "a value";
}

static int step(const struct lookup *l, const struct ab_node *cur,
		const struct ab_path_segment *seg, const struct ab_node **out)
{
	if (seg->is_index) {
		if (cur->kind != AB_NODE_SEQUENCE)
			return cur->kind == AB_NODE_MAPPING
				       ? ab_fail(l->err, l->errlen, EINVAL,
						 "%s: line %zu: key '%s' indexes [%zu] into a "
						 "mapping: name one of its keys instead",
						 l->cfg->name, cur->line, l->key, seg->index)
				       : -ENOENT;
		if (seg->index >= cur->n)
			return ab_fail(l->err, l->errlen, ERANGE,
				       "%s: line %zu: key '%s': the list has %zu items (index from "
				       "0)",
				       l->cfg->name, cur->line, l->key, cur->n);
		*out = cur->items[seg->index];
		return 0;
	}
	if (cur->kind == AB_NODE_SEQUENCE)
		return ab_fail(l->err, l->errlen, EINVAL,
			       "%s: line %zu: key '%s': '%s' is looked up in a list: add an index, "
			       "e.g. [0]",
			       l->cfg->name, cur->line, l->key, seg->key);
	if (cur->kind != AB_NODE_MAPPING)
		return -ENOENT;
	return child_by_key(l, cur, seg->key, out);
}

static int check_target(const struct lookup *l, const struct ab_node *n)
{
	if (n->kind == AB_NODE_ALIAS)
		return refuse_alias(l, n, true);
	if (l->reading && n->kind == AB_NODE_SCALAR)
		return 0; /* its text, on one line or several */
	if (n->kind != AB_NODE_SCALAR)
		return ab_fail(l->err, l->errlen, EISDIR,
			       "%s: line %zu: key '%s' is %s, not a single value: name %s inside "
			       "it",
			       l->cfg->name, n->line, l->key, kind_name(n),
			       n->kind == AB_NODE_SEQUENCE ? "an item ([0])" : "a key");
	if (n->style == AB_STYLE_BLOCK)
		return ab_fail(l->err, l->errlen, EPERM,
			       "%s: line %zu: key '%s' is a block scalar ('|' or '>'): write it on "
			       "one line to let autobatch edit it",
			       l->cfg->name, n->line, l->key);
	if (n->end_line != n->line)
		return ab_fail(l->err, l->errlen, EPERM,
			       "%s: lines %zu-%zu: key '%s' spans several lines: write it on one "
			       "line to let autobatch edit it",
			       l->cfg->name, n->line, n->end_line, l->key);
	return 0;
}

static int resolve(const struct lookup *l, const struct ab_node *root,
		   const struct ab_path *path, const struct ab_node **out)
{
	const struct ab_node *cur = root;
	int rc;

	for (size_t i = 0; i <= path->n; i++) {
		if (cur->kind == AB_NODE_ALIAS && l->reading && cur->target)
			cur = cur->target; /* an anchor's node is never an alias itself */
		if (i == path->n)
			break;
		if (cur->kind == AB_NODE_ALIAS)
			return refuse_alias(l, cur, false);
		if ((rc = step(l, cur, &path->seg[i], &cur)) < 0)
			return rc;
	}
	if ((rc = check_target(l, cur)) < 0)
		return rc;
	*out = cur;
	return 0;
}

bool ab_config_has(const struct ab_config *cfg, const char *key, int document)
{
	const struct ab_node *n;

	return key && ab_config_find(cfg, key, document, &n, NULL, 0) == 0;
}

/* ab_config_find; name_missing: a key the file lacks gets its message (the nearest keys). */
static int find(const struct lookup *l, int document, const struct ab_node **out,
		bool name_missing)
{
	const struct ab_config *cfg = l->cfg;
	const char *key = l->key;
	char *err = l->err;
	size_t errlen = l->errlen;
	const struct ab_node *found = NULL, *n = NULL;
	size_t found_doc = 0;
	struct ab_path path;
	int rc;

	if ((rc = ab_path_parse(key, &path, err, errlen)) < 0)
		return rc;
	if (document >= 0 && (size_t)document >= cfg->ndocs) {
		ab_path_free(&path);
		return ab_fail(err, errlen, EINVAL, "%s has %zu document%s: --document %d is out "
						    "of range (they count from 0)",
			       cfg->name, cfg->ndocs, cfg->ndocs == 1 ? "" : "s", document);
	}
	for (size_t d = 0; d < cfg->ndocs; d++) {
		if (document >= 0 && d != (size_t)document)
			continue;
		rc = resolve(l, cfg->docs[d], &path, &n);
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			break;
		if (found) {
			rc = ab_fail(err, errlen, EEXIST,
				     "%s: key '%s' is in documents %zu (line %zu) and %zu (line "
				     "%zu): pick one with --document N",
				     cfg->name, key, found_doc, found->line, d, n->line);
			break;
		}
		found = n;
		found_doc = d;
	}
	ab_path_free(&path);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	if (!found) /* the nearest keys only for a message: a walk over every leaf */
		return name_missing && err && errlen ? missing_key(cfg, key, err, errlen) : -ENOENT;
	*out = found;
	return 0;
}

int ab_config_find(const struct ab_config *cfg, const char *key, int document,
		   const struct ab_node **out, char *err, size_t errlen)
{
	struct lookup l = {.cfg = cfg, .key = key, .err = err, .errlen = errlen};

	return find(&l, document, out, true);
}

int ab_config_lookup(const struct ab_config *cfg, const char *key, int document,
		     const struct ab_node **out, char *err, size_t errlen)
{
	struct lookup l = {.cfg = cfg, .key = key, .err = err, .errlen = errlen};

	return key ? find(&l, document, out, false) : -ENOENT;
}

int ab_config_read(const struct ab_config *cfg, const char *key, int document,
		   const struct ab_node **out, char *err, size_t errlen)
{
	struct lookup l = {.cfg = cfg, .key = key, .err = err, .errlen = errlen, .reading = true};

	return key ? find(&l, document, out, false) : -ENOENT;
}

int ab_config_bool(const char *text)
{
	static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on",
					  "On", "ON", "y", "Y", "1"};
	static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO", "off",
					 "Off", "OFF", "n", "N", "0"};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcmp(text, yes[i]))
			return 1;
		if (!strcmp(text, no[i]))
			return 0;
	}
	return -EINVAL;
}

int ab_config_get(const struct ab_config *cfg, const char *key, int document, char *buf,
		  size_t buflen, char *err, size_t errlen)
{
	const struct ab_node *n;
	int rc;

	if ((rc = ab_config_find(cfg, key, document, &n, err, errlen)) < 0)
		return rc;
	if (ab_copy(buf, buflen, n->value) < 0)
		return ab_fail(err, errlen, ENAMETOOLONG, "%s: line %zu: key '%s' has a value "
							  "longer than %zu bytes",
			       cfg->name, n->line, key, buflen - 1);
	return 0;
}
