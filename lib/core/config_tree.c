/* config_tree.c - the byte-span tree shared by the YAML and JSON readers: loading checks,
 * key lookup with every refusal users need explained, and the splice that edits values.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "config_path.h"
#include "error.h"

#define SUGGESTIONS 3

/* ---- nodes ------------------------------------------------------------------------- */

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

/* ---- loading ----------------------------------------------------------------------- */

static size_t line_of(const char *buf, size_t offset)
{
	size_t line = 1;

	for (size_t i = 0; i < offset; i++)
		line += buf[i] == '\n';
	return line;
}

/* Length of a valid UTF-8 sequence at p, or 0 (overlong forms and surrogates refused). */
static size_t utf8_valid(const unsigned char *p, size_t left)
{
	size_t n = ab_utf8_len(p[0]);

	if (p[0] < 0x80)
		return 1;
	if (p[0] < 0xc2 || p[0] > 0xf4 || n > left)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
	    (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
		return 0;
	return n;
}

static int check_text(const struct ab_config *cfg, char *err, size_t errlen)
{
	const unsigned char *b = (const unsigned char *)cfg->buf;
	size_t n;

	for (size_t i = 0; i < cfg->len; i += n) {
		if (b[i] == '\0')
			return ab_fail(err, errlen, EINVAL,
				       "%s looks like a binary file (a NUL byte on line %zu): give "
				       "the YAML or JSON config",
				       cfg->name, line_of(cfg->buf, i));
		if (!(n = utf8_valid(b + i, cfg->len - i)))
			return ab_fail(err, errlen, EILSEQ,
				       "%s is not UTF-8 (byte offset %zu, line %zu): convert it, e.g. "
				       "iconv -t UTF-8",
				       cfg->name, i, line_of(cfg->buf, i));
	}
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* By extension; otherwise JSON when json-c accepts the whole file, else YAML. */
static enum ab_format detect_format(const struct ab_config *cfg)
{
	if (ends_with(cfg->name, ".json"))
		return AB_FORMAT_JSON;
	if (ends_with(cfg->name, ".yaml") || ends_with(cfg->name, ".yml"))
		return AB_FORMAT_YAML;
	return ab_json_validate(cfg, NULL, 0) == 0 ? AB_FORMAT_JSON : AB_FORMAT_YAML;
}

int ab_config_parse(const char *name, const char *buf, size_t len, enum ab_format format,
		    struct ab_config **out, char *err, size_t errlen)
{
	struct ab_config *cfg = calloc(1, sizeof(*cfg));
	int rc = -ENOMEM;

	if (!cfg || !(cfg->name = strdup(name)) || !(cfg->buf = malloc(len + 1))) {
		ab_fail(err, errlen, ENOMEM, "%s: out of memory", name);
		goto fail;
	}
	memcpy(cfg->buf, buf, len);
	cfg->buf[len] = '\0';
	cfg->len = len;
	if (len > AB_CONFIG_MAX_BYTES) {
		rc = ab_fail(err, errlen, EFBIG, "%s is %zu bytes, more than the %u a config may "
						 "have: is it the right file?",
			     name, len, AB_CONFIG_MAX_BYTES);
		goto fail;
	}
	if ((rc = check_text(cfg, err, errlen)) < 0)
		goto fail;
	cfg->format = format == AB_FORMAT_AUTO ? detect_format(cfg) : format;
	rc = cfg->format == AB_FORMAT_JSON ? ab_json_read(cfg, err, errlen)
					   : ab_yaml_read(cfg, err, errlen);
	if (rc < 0)
		goto fail;
	*out = cfg;
	return 0;
fail:
	ab_config_free(cfg);
	return rc;
}

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
		else if (strpbrk(k->value, ".[]\"") || !*k->value)
			w = snprintf(v->path + len, sizeof(v->path) - len, "['%s']", k->value);
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

/* Is name reachable through the mapping's '<<' merges? Sets *via to the merge's value. A
 * mapping can merge itself through an alias, and merges can fan out: *budget bounds the
 * mappings visited, so a hostile file costs at most that much (found by fuzzing). */
static const struct ab_node *find_merged(const struct ab_node *map, const char *name,
					 const struct ab_node **via, int depth, int *budget)
{
	if (--*budget < 0)
		return NULL;
	for (size_t i = 0; i < map->n && depth < 32; i++) {
		const struct ab_node *src = map->items[i];
		size_t count = src->kind == AB_NODE_SEQUENCE ? src->n : 1;

		if (!is_merge_key(map->keys[i]))
			continue;
		for (size_t j = 0; j < count; j++) {
			const struct ab_node *m = src->kind == AB_NODE_SEQUENCE ? src->items[j] : src;
			const struct ab_node *t = m->kind == AB_NODE_ALIAS ? m->target : m;

			if (!t || t->kind != AB_NODE_MAPPING)
				continue;
			for (size_t k = 0; k < t->n; k++)
				if (key_is(t->keys[k], name)) {
					*via = m;
					return t->items[k];
				}
			if (t != map && find_merged(t, name, via, depth + 1, budget)) {
				*via = m;
				return t;
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
	int budget = 4096;

	if (find_merged(map, name, &via, 0, &budget))
		return refuse_merge(l, name, via);
	return -ENOENT;
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

	for (size_t i = 0; i < path->n; i++) {
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

int ab_config_find(const struct ab_config *cfg, const char *key, int document,
		   const struct ab_node **out, char *err, size_t errlen)
{
	struct lookup l = {.cfg = cfg, .key = key, .err = err, .errlen = errlen};
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
		rc = resolve(&l, cfg->docs[d], &path, &n);
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
	if (!found)
		return missing_key(cfg, key, err, errlen);
	*out = found;
	return 0;
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

/* ---- edits ------------------------------------------------------------------------- */

bool ab_is_number(const char *t, size_t len)
{
	size_t i = 0, digits = 0;

	if (i < len && (t[i] == '-' || t[i] == '+'))
		i++;
	for (; i < len && t[i] >= '0' && t[i] <= '9'; i++)
		digits++;
	if (i < len && t[i] == '.')
		for (i++; i < len && t[i] >= '0' && t[i] <= '9'; i++)
			digits++;
	if (digits == 0)
		return false;
	if (i < len && (t[i] == 'e' || t[i] == 'E')) {
		size_t exp = 0;

		if (++i < len && (t[i] == '-' || t[i] == '+'))
			i++;
		for (; i < len && t[i] >= '0' && t[i] <= '9'; i++)
			exp++;
		if (!exp)
			return false;
	}
	return i == len;
}

struct splice {
	size_t start, end;
	const char *key;
	char text[AB_VALUE_MAX + 4];
};

/* A quoted number stays a quoted string of the same quotes; anything else that is not a
 * number ("auto", ${oc.env:...}, null) becomes a plain number. */
static void format_value(const struct ab_config *cfg, const struct ab_node *n, const char *v,
			 struct splice *s)
{
	bool quoted = n->style == AB_STYLE_SINGLE || n->style == AB_STYLE_DOUBLE;
	char quote = cfg->buf[n->start];

	s->start = n->start;
	s->end = n->end;
	if (quoted && !n->json_literal && ab_is_number(n->value, n->value_len))
		snprintf(s->text, sizeof(s->text), "%c%s%c", quote, v, quote);
	else if (n->start == n->end && n->start > 0 && cfg->buf[n->start - 1] == ':')
		snprintf(s->text, sizeof(s->text), " %s", v); /* "key:" had no value */
	else
		snprintf(s->text, sizeof(s->text), "%s", v);
}

static size_t count_aliases(const struct ab_node *n, const struct ab_node *target, int depth)
{
	size_t count = 0;

	if (n->kind == AB_NODE_ALIAS)
		return n->target == target;
	for (size_t i = 0; i < n->n && depth < AB_CONFIG_MAX_DEPTH; i++)
		count += count_aliases(n->items[i], target, depth + 1);
	return count;
}

static void note_anchor(const struct ab_config *cfg, const struct ab_node *n, const char *key,
			char *note, size_t notelen)
{
	size_t aliases = 0, len = strlen(note);

	if (!n->anchor || len >= notelen)
		return;
	for (size_t d = 0; d < cfg->ndocs; d++)
		aliases += count_aliases(cfg->docs[d], n, 0);
	snprintf(note + len, notelen - len, "%s%s: line %zu: key '%s' carries the anchor &%s; "
					    "%zu alias%s follow%s the new value",
		 len ? "\n" : "", cfg->name, n->line, key, n->anchor, aliases,
		 aliases == 1 ? "" : "es", aliases == 1 ? "s" : "");
}

static int prepare(const struct ab_config *cfg, const struct ab_edit *e, int document,
		   struct splice *s, char *note, size_t notelen, char *err, size_t errlen)
{
	const struct ab_node *n;
	size_t vlen = e->value ? strlen(e->value) : 0;
	int rc;

	if (!e->value || vlen > AB_VALUE_MAX || !ab_is_number(e->value, vlen))
		return ab_fail(err, errlen, EINVAL, "%s: key '%s': the new value '%.40s' is not a "
						    "number",
			       cfg->name, e->key, e->value ? e->value : "");
	if ((rc = ab_config_find(cfg, e->key, document, &n, err, errlen)) < 0)
		return rc;
	format_value(cfg, n, e->value, s);
	s->key = e->key;
	note_anchor(cfg, n, e->key, note, notelen);
	return 0;
}

static int by_start(const void *a, const void *b)
{
	const struct splice *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int splice_all(const struct ab_config *cfg, struct splice *s, size_t n, char **out,
		      size_t *outlen)
{
	size_t len = cfg->len, pos = 0, w = 0;
	char *buf;

	for (size_t i = 0; i < n; i++)
		len = len - (s[i].end - s[i].start) + strlen(s[i].text);
	if (!(buf = malloc(len + 1)))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		memcpy(buf + w, cfg->buf + pos, s[i].start - pos);
		w += s[i].start - pos;
		memcpy(buf + w, s[i].text, strlen(s[i].text));
		w += strlen(s[i].text);
		pos = s[i].end;
	}
	memcpy(buf + w, cfg->buf + pos, cfg->len - pos);
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	return 0;
}

/* Belt and braces: the edited bytes must parse, and each key must read its new value. */
static int verify(const struct ab_config *cfg, const struct ab_edit *edits, size_t n,
		  int document, const char *buf, size_t len, char *err, size_t errlen)
{
	struct ab_config *again = NULL;
	char value[AB_VALUE_MAX + 1];
	int rc = ab_config_parse(cfg->name, buf, len, cfg->format, &again, err, errlen);

	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = ab_config_get(again, edits[i].key, document, value, sizeof(value), err,
				   errlen);
		if (rc == 0 && strcmp(value, edits[i].value) != 0)
			rc = ab_fail(err, errlen, EIO, "%s: key '%s' would read '%s' after the edit, "
						       "not '%s': file left unchanged",
				     cfg->name, edits[i].key, value, edits[i].value);
	}
	ab_config_free(again);
	return rc;
}

int ab_config_apply(const struct ab_config *cfg, const struct ab_edit *edits, size_t n,
		    int document, char **out, size_t *outlen, char *note, size_t notelen,
		    char *err, size_t errlen)
{
	struct splice *s = calloc(n ? n : 1, sizeof(*s));
	int rc = 0;

	if (notelen)
		note[0] = '\0';
	if (!s)
		return ab_fail(err, errlen, ENOMEM, "out of memory");
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = prepare(cfg, &edits[i], document, &s[i], note, notelen, err, errlen);
	if (rc == 0)
		qsort(s, n, sizeof(*s), by_start);
	for (size_t i = 1; i < n && rc == 0; i++)
		if (s[i].start < s[i - 1].end || s[i].start == s[i - 1].start)
			rc = ab_fail(err, errlen, EINVAL, "%s: keys '%s' and '%s' name the same "
							  "value: give it once",
				     cfg->name, s[i - 1].key, s[i].key);
	if (rc == 0 && splice_all(cfg, s, n, out, outlen) < 0)
		rc = ab_fail(err, errlen, ENOMEM, "out of memory");
	free(s);
	if (rc == 0 && (rc = verify(cfg, edits, n, document, *out, *outlen, err, errlen)) < 0) {
		free(*out);
		*out = NULL;
	}
	return rc;
}
