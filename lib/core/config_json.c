/* config_json.c - JSON: json-c decides validity (strict mode) and decodes strings; a
 * scanner over the validated bytes records where each value is, which json-c does not.
 */
#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "config_nodes.h"
#include "config_readers.h"
#include "error.h"

struct scanner {
	struct ab_config *cfg;
	const char *b;
	size_t len, pos;
	size_t line;
	char *err;
	size_t errlen;
};

static void line_column(const char *b, size_t from, size_t offset, size_t *line, size_t *col)
{
	size_t start = from;

	*line = 1;
	for (size_t i = from; i < offset; i++)
		if (b[i] == '\n') {
			(*line)++;
			start = i + 1;
		}
	*col = 1;
	for (size_t i = start; i < offset; i += ab_utf8_len((unsigned char)b[i]))
		(*col)++;
}

/* Whether the first len bytes are one whole JSON value (then what follows is extra text). */
static bool whole_value(const char *b, size_t len)
{
	struct json_tokener *tok = json_tokener_new_ex(AB_CONFIG_MAX_DEPTH);
	struct json_object *obj;
	bool whole;

	if (!tok)
		return false;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	obj = json_tokener_parse_ex(tok, b, (int)len);
	whole = obj && json_tokener_get_error(tok) == json_tokener_success;
	json_object_put(obj);
	json_tokener_free(tok);
	return whole;
}

int ab_json_validate(const struct ab_config *cfg, char *err, size_t errlen)
{
	size_t bom = ab_bom_len(cfg->buf, cfg->len), end, line, col;
	struct json_tokener *tok = json_tokener_new_ex(AB_CONFIG_MAX_DEPTH);
	struct json_object *obj;
	enum json_tokener_error jerr;

	if (!tok)
		return ab_fail(err, errlen, ENOMEM, "%s: out of memory", cfg->name);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	obj = json_tokener_parse_ex(tok, cfg->buf + bom, (int)(cfg->len - bom));
	jerr = json_tokener_get_error(tok);
	end = bom + json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	json_object_put(obj);
	if (jerr == json_tokener_success)
		while (end < cfg->len && strchr(" \t\r\n", cfg->buf[end]))
			end++;
	if (jerr == json_tokener_success && end == cfg->len)
		return 0;
	/* json-c stops on the offending byte, but one past it in a literal it was reading
	 * (01, tru) (json-c 0.16); at the end of input, it points past it */
	if (end > bom && (jerr == json_tokener_error_parse_number ||
			  jerr == json_tokener_error_parse_boolean ||
			  jerr == json_tokener_error_parse_null))
		end--;
	if (jerr == json_tokener_error_parse_unexpected && whole_value(cfg->buf + bom, end - bom))
		jerr = json_tokener_success; /* strict json-c's word for what follows a value */
	line_column(cfg->buf, bom, end, &line, &col);
	return ab_fail(err, errlen, EINVAL, "%s is not valid JSON: line %zu, column %zu: %s",
		       cfg->name, line, col,
		       jerr == json_tokener_success	? "text after the end of the JSON value"
		       : jerr == json_tokener_continue ? "unexpected end of file"
						       : json_tokener_error_desc(jerr));
}

/* ---- the position scanner (input already validated) ------------------------------- */

static void skip_space(struct scanner *s)
{
	while (s->pos < s->len && strchr(" \t\r\n", s->b[s->pos])) {
		if (s->b[s->pos] == '\n')
			s->line++;
		s->pos++;
	}
}

static struct ab_node *start_node(struct scanner *s, enum ab_node_kind kind)
{
	struct ab_node *n = ab_node_new(kind);

	if (!n)
		return NULL;
	n->start = s->pos;
	n->line = n->end_line = s->line;
	return n;
}

/* A string token's text as json-c decodes it (escapes, \u sequences). */
static int decode_string(struct scanner *s, struct ab_node *n)
{
	char *text = strndup(s->b + n->start, n->end - n->start);
	struct json_object *obj = text ? json_tokener_parse(text) : NULL;
	int rc = -ENOMEM;

	free(text);
	if (obj && json_object_is_type(obj, json_type_string)) {
		n->value_len = (size_t)json_object_get_string_len(obj);
		if ((n->value = malloc(n->value_len + 1))) {
			memcpy(n->value, json_object_get_string(obj), n->value_len + 1);
			rc = 0;
		}
	} else if (obj) {
		rc = -EINVAL;
	}
	json_object_put(obj);
	return rc;
}

static int scan_value(struct scanner *s, int depth, struct ab_node **out);

static int scan_string(struct scanner *s, struct ab_node **out)
{
	struct ab_node *n = start_node(s, AB_NODE_SCALAR);
	int rc;

	if (!n)
		return -ENOMEM;
	n->style = AB_STYLE_DOUBLE;
	for (s->pos++; s->pos < s->len && s->b[s->pos] != '"'; s->pos++)
		if (s->b[s->pos] == '\\')
			s->pos++;
	n->end = ++s->pos;
	if ((rc = decode_string(s, n)) < 0) {
		ab_node_free(n);
		return rc;
	}
	*out = n;
	return 0;
}

static int scan_literal(struct scanner *s, struct ab_node **out)
{
	struct ab_node *n = start_node(s, AB_NODE_SCALAR);

	if (!n)
		return -ENOMEM;
	n->json_literal = true;
	/* numbers, true, false, null, and the NaN and Infinity json-c accepts */
	while (s->pos < s->len && (isalnum((unsigned char)s->b[s->pos]) ||
				   strchr("+-.", s->b[s->pos])))
		s->pos++;
	n->end = s->pos;
	n->value_len = n->end - n->start;
	if (n->value_len == 0 || !(n->value = strndup(s->b + n->start, n->value_len))) {
		int rc = n->value_len == 0 ? -EINVAL : -ENOMEM;

		ab_node_free(n);
		return rc;
	}
	*out = n;
	return 0;
}

static int scan_collection(struct scanner *s, int depth, struct ab_node **out)
{
	bool map = s->b[s->pos] == '{';
	struct ab_node *n = start_node(s, map ? AB_NODE_MAPPING : AB_NODE_SEQUENCE);
	struct ab_node *key = NULL, *item;
	int rc = 0;

	if (!n)
		return -ENOMEM;
	for (s->pos++, skip_space(s); s->pos < s->len && s->b[s->pos] != (map ? '}' : ']');) {
		if (map) {
			if ((rc = scan_string(s, &key)) < 0)
				break;
			skip_space(s);
			s->pos++; /* ':' */
			skip_space(s);
		}
		if ((rc = scan_value(s, depth + 1, &item)) < 0)
			break;
		rc = ab_node_push(n, key, item);
		key = NULL;
		if (rc < 0)
			break;
		skip_space(s);
		if (s->pos < s->len && s->b[s->pos] == ',')
			s->pos++;
		skip_space(s);
	}
	if (rc < 0) {
		ab_node_free(key);
		ab_node_free(n);
		return rc;
	}
	n->end = ++s->pos;
	n->end_line = s->line;
	*out = n;
	return 0;
}

static int scan_value(struct scanner *s, int depth, struct ab_node **out)
{
	if (depth > AB_CONFIG_MAX_DEPTH || s->pos >= s->len)
		return -EINVAL;
	if (s->b[s->pos] == '{' || s->b[s->pos] == '[')
		return scan_collection(s, depth, out);
	if (s->b[s->pos] == '"')
		return scan_string(s, out);
	return scan_literal(s, out);
}

int ab_json_read(struct ab_config *cfg, char *err, size_t errlen)
{
	struct scanner s = {.cfg = cfg, .b = cfg->buf, .len = cfg->len, .line = 1};
	struct ab_node *root = NULL;
	int rc;

	if ((rc = ab_json_validate(cfg, err, errlen)) < 0)
		return rc;
	s.pos = ab_bom_len(cfg->buf, cfg->len);
	skip_space(&s);
	if ((rc = scan_value(&s, 0, &root)) < 0)
		return ab_fail(err, errlen, -rc, "%s: line %zu: %s", cfg->name, s.line,
			       rc == -ENOMEM ? "out of memory" : "JSON that json-c accepts but "
								 "autobatch cannot follow");
	if (ab_config_push_doc(cfg, root) < 0)
		return ab_fail(err, errlen, ENOMEM, "%s: out of memory", cfg->name);
	return 0;
}
