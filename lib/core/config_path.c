/* config_path.c - dot-path keys (see config_path.h). */
#include "config_path.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static int add_key(struct ab_path *path, const char *start, size_t len)
{
	char *key;

	if (path->n >= AB_PATH_SEGMENTS_MAX)
		return -E2BIG;
	if (!(key = strndup(start, len)))
		return -ENOMEM;
	path->seg[path->n].is_index = false;
	path->seg[path->n++].key = key;
	return 0;
}

/* ["quoted key"] or ['quoted key']: no escapes, the key may hold dots and brackets. */
static int parse_bracket(const char **p, struct ab_path *path)
{
	const char *s = *p + 1, *end;
	char quote = *s;
	size_t index = 0;

	if (quote == '"' || quote == '\'') {
		if (!(end = strchr(s + 1, quote)) || end[1] != ']')
			return -EINVAL;
		*p = end + 2;
		return add_key(path, s + 1, (size_t)(end - s - 1));
	}
	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (index > 100000000)
			return -EINVAL;
		index = index * 10 + (size_t)(*s - '0');
	}
	if (*s != ']' || path->n >= AB_PATH_SEGMENTS_MAX)
		return *s != ']' ? -EINVAL : -E2BIG;
	path->seg[path->n].is_index = true;
	path->seg[path->n].key = NULL;
	path->seg[path->n++].index = index;
	*p = s + 1;
	return 0;
}

int ab_path_parse(const char *text, struct ab_path *path, char *err, size_t errlen)
{
	const char *p = text, *start;
	int rc = 0;

	memset(path, 0, sizeof(*path));
	if (!text || !*text)
		return ab_fail(err, errlen, EINVAL, "empty key: give a dot path such as "
						    "train_micro_batch_size_per_gpu or model.micro_batch_size");
	while (*p && rc == 0) {
		if (*p == '[') {
			rc = parse_bracket(&p, path);
		} else {
			for (start = p; *p && *p != '.' && *p != '['; p++)
				;
			rc = p == start ? -EINVAL : add_key(path, start, (size_t)(p - start));
		}
		if (rc == 0 && *p == '.' && (p[1] == '\0' || p[1] == '.' || p[1] == '[')) {
			p++; /* point at what follows the dot */
			rc = -EINVAL;
		}
		else if (rc == 0 && *p == '.')
			p++;
	}
	if (rc < 0) {
		ab_path_free(path);
		if (rc == -ENOMEM)
			return ab_fail(err, errlen, ENOMEM, "out of memory");
		if (rc == -E2BIG)
			return ab_fail(err, errlen, E2BIG, "key '%.60s' has more than %d parts",
				       text, AB_PATH_SEGMENTS_MAX);
		return ab_fail(err, errlen, EINVAL,
			       "invalid key '%.200s' at character %zu: use a.b.c, list[2].x, or "
			       "a[\"key.with.dots\"]",
			       text, (size_t)(p - text) + 1);
	}
	return 0;
}

void ab_path_free(struct ab_path *path)
{
	for (size_t i = 0; i < path->n; i++)
		free(path->seg[i].key);
	path->n = 0;
}

void ab_path_format(const struct ab_path *path, size_t n, char *buf, size_t buflen)
{
	size_t len = 0;

	if (!buflen)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < n && i < path->n && len < buflen; i++) {
		const struct ab_path_segment *s = &path->seg[i];
		int w;

		if (s->is_index)
			w = snprintf(buf + len, buflen - len, "[%zu]", s->index);
		else if (strpbrk(s->key, ".[]") || !*s->key)
			w = snprintf(buf + len, buflen - len, "[\"%s\"]", s->key);
		else
			w = snprintf(buf + len, buflen - len, "%s%s", i ? "." : "", s->key);
		if (w < 0)
			break;
		len += (size_t)w;
	}
}
