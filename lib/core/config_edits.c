/* config_edits.c - the edits a decision makes: values formatted as the file wrote them,
 * spliced into the original bytes from the end backwards, and the result read again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_nodes.h"
#include "error.h"

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

bool ab_config_null(const char *t)
{
	static const char *const nulls[] = {"", "null", "Null", "NULL", "~", "None"};

	for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
		if (!strcmp(t, nulls[i]))
			return true;
	return false;
}

bool ab_config_word(const char *t)
{
	t += *t == '+' || *t == '-';
	return !(*t >= '0' && *t <= '9') && *t != '.';
}

struct splice {
	size_t start, end;
	const char *key;
	char text[AB_PATH_VALUE_MAX + 4];
};

/* An absolute path that needs no quoting or escaping in YAML or JSON. */
static bool plain_path(const char *v, size_t len)
{
	if (len < 2 || len > AB_PATH_VALUE_MAX || v[0] != '/')
		return false;
	return strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._+-") ==
	       len;
}

/* An empty value right after "key:", a list's "-" or its own anchor: the new value needs a
 * space before it ("-8" is a number, "&a8" another anchor's name). */
static bool after_indicator(const struct ab_config *cfg, const struct ab_node *n)
{
	size_t p = n->start, alen = n->anchor ? strlen(n->anchor) : 0;

	if (p > 0 && (cfg->buf[p - 1] == ':' || cfg->buf[p - 1] == '-'))
		return true;
	return alen && p > alen && cfg->buf[p - alen - 1] == '&' &&
	       !memcmp(cfg->buf + p - alen, n->anchor, alen);
}

/* A quoted number stays a quoted string of the same quotes; anything else that is not a
 * number ("auto", ${oc.env:...}, null) becomes a plain number. */
static void format_value(const struct ab_config *cfg, const struct ab_node *n, const char *v,
			 struct splice *s)
{
	bool quoted = n->style == AB_STYLE_SINGLE || n->style == AB_STYLE_DOUBLE;
	char quote = cfg->buf[n->start];

	s->start = n->start;
	s->end = n->end;
	if (plain_path(v, strlen(v)) && (quoted || cfg->format == AB_FORMAT_JSON))
		snprintf(s->text, sizeof(s->text), "%c%s%c", quoted ? quote : '"', v,
			 quoted ? quote : '"');
	else if (quoted && !n->json_literal && ab_is_number(n->value, n->value_len) &&
		 ab_is_number(v, strlen(v))) /* a quoted "false" would be true in Python */
		snprintf(s->text, sizeof(s->text), "%c%s%c", quote, v, quote);
	else if (n->start == n->end && after_indicator(cfg, n))
		snprintf(s->text, sizeof(s->text), " %s", v); /* "key:", "-", "&a" had no value */
	else
		snprintf(s->text, sizeof(s->text), "%s", v);
}

/* Whether target is n or within it (aliases not followed). */
static bool holds(const struct ab_node *n, const struct ab_node *target, int depth)
{
	if (n == target)
		return true;
	if (n->kind == AB_NODE_ALIAS || depth >= AB_CONFIG_MAX_DEPTH)
		return false;
	for (size_t i = 0; i < n->n; i++)
		if (holds(n->items[i], target, depth + 1))
			return true;
	return false;
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

static size_t all_aliases(const struct ab_config *cfg, const struct ab_node *target)
{
	size_t aliases = 0;

	for (size_t d = 0; d < cfg->ndocs; d++)
		aliases += count_aliases(cfg->docs[d], target, 0);
	return aliases;
}

/* The nearest anchored mapping or list around target that an alias (or a merge) repeats,
 * or NULL: an edit inside it changes what the alias reads too. */
static const struct ab_node *aliased_holder(const struct ab_config *cfg, const struct ab_node *n,
					    const struct ab_node *target, int depth)
{
	for (size_t i = 0; i < n->n; i++) {
		const struct ab_node *c = n->items[i], *inner;

		if (c->kind == AB_NODE_ALIAS || !holds(c, target, depth + 1))
			continue;
		if (c != target && (inner = aliased_holder(cfg, c, target, depth + 1)))
			return inner;
		return n->anchor && all_aliases(cfg, n) ? n : NULL;
	}
	return NULL;
}

static void note_anchor(const struct ab_config *cfg, const struct ab_node *n, const char *key,
			char *note, size_t notelen)
{
	const struct ab_node *holder = NULL;
	size_t len = strlen(note), aliases;

	for (size_t d = 0; d < cfg->ndocs && !n->anchor && !holder; d++)
		holder = aliased_holder(cfg, cfg->docs[d], n, 0);
	if ((!n->anchor && !holder) || len >= notelen)
		return;
	aliases = all_aliases(cfg, holder ? holder : n);
	if (holder)
		snprintf(note + len, notelen - len, "%s%s: line %zu: key '%s' is inside the anchor "
						    "&%s (line %zu); %zu alias%s of it follow%s "
						    "the new value",
			 len ? "\n" : "", cfg->name, n->line, key, holder->anchor, holder->line,
			 aliases, aliases == 1 ? "" : "es", aliases == 1 ? "s" : "");
	else
		snprintf(note + len, notelen - len, "%s%s: line %zu: key '%s' carries the anchor "
						    "&%s; %zu alias%s follow%s the new value",
			 len ? "\n" : "", cfg->name, n->line, key, n->anchor, aliases,
			 aliases == 1 ? "" : "es", aliases == 1 ? "s" : "");
}

#define YAML_TAGS "tag:yaml.org,2002:" /* what !! stands for */

/* A tag under which the number autobatch writes is still read as the value was: int,
 * float, str, or the non-specific "!" (a string); !!bool 16 or !!null 16 are not. */
static bool number_tag(const char *tag)
{
	static const char *const kept[] = {YAML_TAGS "int", YAML_TAGS "float", YAML_TAGS "str",
					   "!"};

	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		if (!strcmp(tag, kept[i]))
			return true;
	return false;
}

static int prepare(const struct ab_config *cfg, const struct ab_edit *e, int document,
		   struct splice *s, char *note, size_t notelen, char *err, size_t errlen)
{
	const struct ab_node *n;
	size_t vlen = e->value ? strlen(e->value) : 0;
	int rc;

	bool path = e->value && plain_path(e->value, vlen);

	/* numbers, the false that turns a trial's batch ramp-up off, the null that leaves a
	 * trial's global batch to its framework, and a trial's path */
	if (!e->value || (!path && vlen > AB_VALUE_MAX) ||
	    !(path || ab_is_number(e->value, vlen) || !strcmp(e->value, "false") ||
	      !strcmp(e->value, "null")))
		return ab_fail(err, errlen, EINVAL, "%s: key '%s': the new value '%.40s' is not a "
						    "number",
			       cfg->name, e->key, e->value ? e->value : "");
	if ((rc = ab_config_find(cfg, e->key, document, &n, err, errlen)) < 0)
		return rc;
	if (n->tag && ab_is_number(e->value, vlen) && !number_tag(n->tag)) {
		bool core = !strncmp(n->tag, YAML_TAGS, strlen(YAML_TAGS));
		char shown[64]; /* libyaml decodes %0A in a tag to a newline */

		return ab_fail(err, errlen, EPERM,
			       "%s: line %zu: key '%s' has the tag %s%s, which the number autobatch "
			       "writes there would not be read as: remove the tag",
			       cfg->name, n->line, e->key, core ? "!!" : "",
			       ab_printable(n->tag + (core ? strlen(YAML_TAGS) : 0), shown,
					    sizeof(shown)));
	}
	/* a path only where the file holds a string: never in place of a number or a map */
	if (path && (n->kind != AB_NODE_SCALAR || ab_is_number(n->value, n->value_len) ||
		     (n->json_literal && !(n->value_len == 4 && !memcmp(n->value, "null", 4)))))
		return ab_fail(err, errlen, EINVAL, "%s: key '%s' does not hold a string, so it "
						    "cannot name %s",
			       cfg->name, e->key, e->value);
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
	char value[AB_PATH_VALUE_MAX + 1];
	char why[AB_ERR_MAX];
	int rc = ab_config_parse(cfg->name, buf, len, cfg->format, &again, why, sizeof(why));
	size_t i = 0;

	for (; rc == 0 && i < n; i++) {
		rc = ab_config_get(again, edits[i].key, document, value, sizeof(value), why,
				   sizeof(why));
		if (rc == 0 && strcmp(value, edits[i].value) != 0)
			rc = ab_fail(err, errlen, EIO, "%s: key '%s' would read '%s' after the edit, "
						       "not '%s': file left unchanged",
				     cfg->name, edits[i].key, value, edits[i].value);
	}
	ab_config_free(again);
	/* what the edited bytes said is not about the user's file: said as the edit's fault */
	if (rc < 0 && rc != -EIO)
		rc = ab_fail(err, errlen, EIO, "%s: key '%s' cannot be edited where it stands (the "
					       "edited file would not read it back: %s): file left "
					       "unchanged; give it a value on its own line (KEY: 1)",
			     cfg->name, edits[i ? i - 1 : 0].key, why);
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
