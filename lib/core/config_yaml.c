/* config_yaml.c - reads YAML with libyaml's event parser into the byte-span tree.
 * libyaml never keeps comments or layout, so we keep only where each value's bytes are.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_nodes.h"
#include "config_readers.h"
#include "error.h"

#define CHECKPOINT 64 /* characters between remembered byte offsets */

struct anchor {
	char *name;
	struct ab_node *node;
};

struct reader {
	yaml_parser_t parser;
	struct ab_config *cfg;
	bool ascii;
	size_t *checkpoints; /* byte offset of character k * CHECKPOINT */
	size_t ncheckpoints;
	struct anchor *anchors;
	size_t nanchors;
	char *err;
	size_t errlen;
};

/* ---- character marks to byte offsets ----------------------------------------------- */

/* libyaml's mark.index counts characters after a leading BOM (libyaml detects the
 * encoding and skips it: told UTF-8, it took the BOM for a character of the first line,
 * whose key then stood a column right of the next one's), our splices need bytes. */
static int index_characters(struct reader *r)
{
	const unsigned char *b = (const unsigned char *)r->cfg->buf;
	size_t len = r->cfg->len, pos = ab_bom_len(r->cfg->buf, len), chars = 0;

	r->ascii = true;
	for (size_t i = 0; i < len; i++)
		if (b[i] >= 0x80)
			r->ascii = false;
	if (r->ascii)
		return 0;
	r->checkpoints = malloc((len / CHECKPOINT + 2) * sizeof(size_t));
	if (!r->checkpoints)
		return -ENOMEM;
	for (; pos < len; pos += ab_utf8_len(b[pos]), chars++)
		if (chars % CHECKPOINT == 0)
			r->checkpoints[r->ncheckpoints++] = pos;
	if (chars % CHECKPOINT == 0)
		r->checkpoints[r->ncheckpoints++] = pos;
	return 0;
}

static size_t byte_offset(const struct reader *r, size_t index)
{
	const unsigned char *b = (const unsigned char *)r->cfg->buf;
	size_t k, pos, chars;

	if (r->ascii) /* a BOM is not ASCII */
		return index;
	k = index / CHECKPOINT;
	if (k >= r->ncheckpoints)
		k = r->ncheckpoints - 1;
	pos = r->checkpoints[k];
	for (chars = k * CHECKPOINT; chars < index && pos < r->cfg->len; chars++)
		pos += ab_utf8_len(b[pos]);
	return pos;
}

/* ---- errors ------------------------------------------------------------------------ */

static int parser_error(struct reader *r)
{
	yaml_parser_t *p = &r->parser;

	if (p->error == YAML_MEMORY_ERROR)
		return ab_fail(r->err, r->errlen, ENOMEM, "%s: out of memory", r->cfg->name);
	return ab_fail(r->err, r->errlen, EINVAL,
		       "%s is not valid YAML: line %zu, column %zu: %s%s%s", r->cfg->name,
		       p->problem_mark.line + 1, p->problem_mark.column + 1,
		       p->problem ? p->problem : "parse error", p->context ? " " : "",
		       p->context ? p->context : "");
}

static int next_event(struct reader *r, yaml_event_t *ev)
{
	return yaml_parser_parse(&r->parser, ev) ? 0 : parser_error(r);
}

/* ---- nodes ------------------------------------------------------------------------- */

static void set_span(struct reader *r, struct ab_node *n, const yaml_mark_t *start,
		     const yaml_mark_t *end)
{
	n->start = byte_offset(r, start->index);
	n->end = byte_offset(r, end->index);
	n->line = start->line + 1;
	n->end_line = end->line + 1;
}

/* A scalar's start mark sits on its &anchor or !tag; the value's bytes start after them. */
static void skip_properties(const struct ab_config *cfg, struct ab_node *n)
{
	const char *b = cfg->buf;

	while (n->start < n->end && (b[n->start] == '&' || b[n->start] == '!')) {
		while (n->start < n->end && !strchr(" \t\r\n", b[n->start]))
			n->start++;
		while (n->start < n->end && strchr(" \t\r\n#", b[n->start])) {
			if (b[n->start] == '#') /* a comment after the anchor: to its line's end */
				while (n->start + 1 < n->end && b[n->start + 1] != '\n')
					n->start++;
			if (b[n->start] == '\n')
				n->line++;
			n->start++;
		}
	}
}

static int remember_anchor(struct reader *r, const yaml_char_t *name, struct ab_node *node)
{
	struct anchor *a;

	if (!name)
		return 0;
	if (!(node->anchor = strdup((const char *)name)))
		return -ENOMEM;
	a = realloc(r->anchors, (r->nanchors + 1) * sizeof(*a));
	if (!a)
		return -ENOMEM;
	r->anchors = a;
	r->anchors[r->nanchors].name = node->anchor;
	r->anchors[r->nanchors++].node = node;
	return 0;
}

static struct ab_node *find_anchor(const struct reader *r, const char *name)
{
	for (size_t i = r->nanchors; i-- > 0;) /* the latest definition wins */
		if (strcmp(r->anchors[i].name, name) == 0)
			return r->anchors[i].node;
	return NULL;
}

static int read_node(struct reader *r, yaml_event_t *ev, int depth, struct ab_node **out);

static int read_scalar(struct reader *r, yaml_event_t *ev, struct ab_node *n)
{
	yaml_scalar_style_t style = ev->data.scalar.style;

	n->style = style == YAML_SINGLE_QUOTED_SCALAR_STYLE   ? AB_STYLE_SINGLE
		   : style == YAML_DOUBLE_QUOTED_SCALAR_STYLE ? AB_STYLE_DOUBLE
		   : style == YAML_LITERAL_SCALAR_STYLE ||
				   style == YAML_FOLDED_SCALAR_STYLE
			   ? AB_STYLE_BLOCK
			   : AB_STYLE_PLAIN;
	n->value_len = ev->data.scalar.length;
	if (!(n->value = malloc(n->value_len + 1)))
		return -ENOMEM;
	memcpy(n->value, ev->data.scalar.value, n->value_len);
	n->value[n->value_len] = '\0';
	set_span(r, n, &ev->start_mark, &ev->end_mark);
	if (ev->data.scalar.anchor || ev->data.scalar.tag)
		skip_properties(r->cfg, n);
	if (ev->data.scalar.tag && !(n->tag = strdup((const char *)ev->data.scalar.tag)))
		return -ENOMEM;
	return remember_anchor(r, ev->data.scalar.anchor, n);
}

static int read_alias(struct reader *r, yaml_event_t *ev, struct ab_node *n)
{
	const char *name = (const char *)ev->data.alias.anchor;

	set_span(r, n, &ev->start_mark, &ev->end_mark);
	if (!(n->value = strdup(name)))
		return -ENOMEM;
	n->value_len = strlen(name);
	if (!(n->target = find_anchor(r, name)))
		return ab_fail(r->err, r->errlen, EINVAL,
			       "%s is not valid YAML: line %zu: the alias *%s has no anchor &%s "
			       "before it",
			       r->cfg->name, n->line, name, name);
	return 0;
}

/* Reads children until the collection's end event; keys alternate with values. */
static int read_collection(struct reader *r, struct ab_node *n, int depth,
			   yaml_event_type_t end_type)
{
	yaml_event_t ev;
	struct ab_node *key = NULL, *child;
	int rc;

	for (;;) {
		if ((rc = next_event(r, &ev)) < 0)
			goto fail;
		if (ev.type == end_type) {
			n->end = byte_offset(r, ev.end_mark.index);
			n->end_line = ev.end_mark.line + 1;
			yaml_event_delete(&ev);
			return 0;
		}
		if ((rc = read_node(r, &ev, depth + 1, &child)) < 0)
			goto fail;
		if (n->kind == AB_NODE_MAPPING && !key) {
			key = child;
			continue;
		}
		rc = ab_node_push(n, key, child);
		key = NULL;
		if (rc < 0)
			goto fail;
	}
fail:
	ab_node_free(key);
	return rc;
}

static int read_node(struct reader *r, yaml_event_t *ev, int depth, struct ab_node **out)
{
	struct ab_node *n = NULL;
	int rc = -EINVAL;

	if (depth > AB_CONFIG_MAX_DEPTH) {
		rc = ab_fail(r->err, r->errlen, E2BIG, "%s: line %zu: nested more than %d levels",
			     r->cfg->name, (size_t)ev->start_mark.line + 1, AB_CONFIG_MAX_DEPTH);
		goto done;
	}
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		n = ab_node_new(AB_NODE_SCALAR);
		rc = n ? read_scalar(r, ev, n) : -ENOMEM;
		break;
	case YAML_ALIAS_EVENT:
		n = ab_node_new(AB_NODE_ALIAS);
		rc = n ? read_alias(r, ev, n) : -ENOMEM;
		break;
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT: {
		bool map = ev->type == YAML_MAPPING_START_EVENT;

		if (!(n = ab_node_new(map ? AB_NODE_MAPPING : AB_NODE_SEQUENCE))) {
			rc = -ENOMEM;
			break;
		}
		set_span(r, n, &ev->start_mark, &ev->end_mark);
		rc = remember_anchor(r, map ? ev->data.mapping_start.anchor
					    : ev->data.sequence_start.anchor,
				     n);
		if (rc == 0)
			rc = read_collection(r, n, depth,
					     map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT);
		break;
	}
	default:
		rc = ab_fail(r->err, r->errlen, EINVAL, "%s: line %zu: unexpected YAML event",
			     r->cfg->name, (size_t)ev->start_mark.line + 1);
	}
done:
	yaml_event_delete(ev);
	if (rc < 0) {
		ab_node_free(n);
		if (rc == -ENOMEM)
			ab_fail(r->err, r->errlen, ENOMEM, "%s: out of memory", r->cfg->name);
		return rc;
	}
	*out = n;
	return 0;
}

static int read_documents(struct reader *r)
{
	yaml_event_t ev;
	struct ab_node *root;
	int rc;

	for (;;) {
		if ((rc = next_event(r, &ev)) < 0)
			return rc;
		if (ev.type == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		if (ev.type != YAML_DOCUMENT_START_EVENT) { /* STREAM_START */
			yaml_event_delete(&ev);
			continue;
		}
		yaml_event_delete(&ev);
		r->nanchors = 0; /* anchors are scoped to their document */
		if ((rc = next_event(r, &ev)) < 0 || (rc = read_node(r, &ev, 0, &root)) < 0)
			return rc;
		if ((rc = ab_config_push_doc(r->cfg, root)) < 0)
			return ab_fail(r->err, r->errlen, ENOMEM, "%s: out of memory", r->cfg->name);
		if ((rc = next_event(r, &ev)) < 0) /* DOCUMENT_END */
			return rc;
		yaml_event_delete(&ev);
	}
}

int ab_yaml_read(struct ab_config *cfg, char *err, size_t errlen)
{
	struct reader r = {.cfg = cfg, .err = err, .errlen = errlen};
	int rc;

	if (index_characters(&r) < 0)
		return ab_fail(err, errlen, ENOMEM, "%s: out of memory", cfg->name);
	if (!yaml_parser_initialize(&r.parser)) {
		free(r.checkpoints);
		return ab_fail(err, errlen, ENOMEM, "%s: out of memory", cfg->name);
	}
	/* the encoding detected, not set: the input is UTF-8 (ab_config_parse checked it) */
	yaml_parser_set_input_string(&r.parser, (const unsigned char *)cfg->buf, cfg->len);
	rc = read_documents(&r);
	yaml_parser_delete(&r.parser);
	free(r.checkpoints);
	free(r.anchors);
	return rc;
}
