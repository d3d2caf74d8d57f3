/* gpu_models.c - the GPU models of a step's nodes (gpu_models.h), from their GRES strings.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gpu_models.h"
#include "hostlist.h"
#include "number.h"

static bool all_digits(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* One entry, "gpu[:TYPE][:COUNT][(S:...)]": its type ("" for none), or -1 when not a GPU. */
static int entry_type(const char *e, size_t len, char *type, size_t typelen)
{
	const char *c1, *c2, *end;
	size_t tl;

	end = memchr(e, '(', len) ? memchr(e, '(', len) : e + len;
	if ((size_t)(end - e) < 3 || strncmp(e, "gpu", 3) != 0 || (end - e > 3 && e[3] != ':'))
		return -1;
	type[0] = '\0';
	if (end - e == 3)
		return 0;
	c1 = e + 4;
	c2 = memchr(c1, ':', (size_t)(end - c1));
	tl = (size_t)((c2 ? c2 : end) - c1);
	if (!c2 && all_digits(c1, tl)) /* gpu:4 */
		return 0;
	if (tl >= typelen)
		tl = typelen - 1;
	memcpy(type, c1, tl);
	type[tl] = '\0';
	return 0;
}

int ab_gres_gpu_types(const char *gres, void (*add)(const char *type, void *arg), void *arg)
{
	char type[AB_GPU_TYPE_MAX];
	int n = 0;

	for (const char *p = gres; p && *p;) {
		size_t len = 0;
		int depth = 0;

		/* a comma inside "(S:0,1)" does not end the entry */
		while (p[len] && (p[len] != ',' || depth > 0)) {
			depth += p[len] == '(' ? 1 : p[len] == ')' ? -1 : 0;
			len++;
		}
		if (entry_type(p, len, type, sizeof(type)) == 0) {
			add(type, arg);
			n++;
		}
		p += len + (p[len] == ',');
	}
	return n;
}

struct adding {
	struct ab_gpu_models *m;
	const char *node;
	bool typed;
	bool counted[AB_GPU_MODELS_MAX]; /* this node counted for the model already */
};

static void add_type(const char *type, void *arg)
{
	struct adding *a = arg;
	struct ab_gpu_models *m = a->m;
	size_t i;

	if (!type[0])
		return;
	a->typed = true;
	for (i = 0; i < m->n && strcmp(m->v[i].type, type) != 0; i++)
		;
	if (i == m->n) {
		if (m->n == AB_GPU_MODELS_MAX) {
			m->unknown = true;
			return;
		}
		m->n++;
		snprintf(m->v[i].type, sizeof(m->v[i].type), "%s", type);
		snprintf(m->v[i].node, sizeof(m->v[i].node), "%s", a->node);
		m->v[i].total_bytes = 0;
		m->v[i].nodes = 0;
		m->v[i].list[0] = '\0';
	}
	if (!a->counted[i]) {
		size_t len = strlen(m->v[i].list);

		m->v[i].nodes++;
		if (len + strlen(a->node) + 2 > sizeof(m->v[i].list))
			m->unlisted = true;
		else
			snprintf(m->v[i].list + len, sizeof(m->v[i].list) - len, "%s%s",
				 len ? "," : "", a->node);
	}
	a->counted[i] = true;
}

void ab_gpu_models_add(struct ab_gpu_models *m, const char *node, const char *gres)
{
	struct adding a = {.m = m, .node = node};

	ab_gres_gpu_types(gres, add_type, &a);
	if (!a.typed)
		m->unknown = true;
}

static int by_type(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void ab_gpu_models_key(const struct ab_gpu_models *m, char *buf, size_t buflen)
{
	const char *types[AB_GPU_MODELS_MAX];
	size_t len = 0;

	buf[0] = '\0';
	if (m->unknown || m->n == 0)
		return;
	for (size_t i = 0; i < m->n; i++)
		types[i] = m->v[i].type;
	qsort(types, m->n, sizeof(types[0]), by_type);
	ab_append(buf, buflen, &len, "gpu:");
	for (size_t i = 0; i < m->n; i++)
		ab_append(buf, buflen, &len, "%s%s", i ? "," : "", types[i]);
}

const struct ab_gpu_model *ab_gpu_models_smallest(const struct ab_gpu_models *m)
{
	const struct ab_gpu_model *best = NULL;

	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].total_bytes && (!best || m->v[i].total_bytes < best->total_bytes))
			best = &m->v[i];
	return best;
}

int ab_gpu_models_node_memory(const struct ab_gpu_models *m, char *buf, size_t buflen)
{
	size_t len = 0;

	buf[0] = '\0';
	if (m->unknown || m->unlisted || m->n == 0)
		return -ENODATA;
	for (size_t i = 0; i < m->n; i++) {
		if (!m->v[i].total_bytes || !m->v[i].list[0])
			return -ENODATA;
		ab_append(buf, buflen, &len, "%s%" PRIu64 ":%s", i ? ";" : "", m->v[i].total_bytes,
			  m->v[i].list);
	}
	return len + 1 >= buflen ? -E2BIG : 0;
}

/* One "BYTES:NODE,NODE" of the table, s[0..len). */
static int node_memory_entry(const char *s, size_t len, struct ab_node_memory *t, char *err,
			     size_t errlen)
{
	const char *colon = memchr(s, ':', len), *end = s + len, *p;
	char num[24];
	long bytes;

	if (!colon || colon == s || colon + 1 >= end || (size_t)(colon - s) >= sizeof(num))
		return ab_fail(err, errlen, EINVAL, "--node-memory: each entry is BYTES:NODE[,NODE]");
	memcpy(num, s, (size_t)(colon - s));
	num[colon - s] = '\0';
	if (ab_parse_whole(num, 1, LONG_MAX, &bytes) < 0)
		return ab_fail(err, errlen, EINVAL, "--node-memory: '%s' is no count of bytes", num);
	for (p = colon + 1; p < end;) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		size_t n = (size_t)((comma ? comma : end) - p), i;

		if (!ab_hostname_ok(p, n) || n >= sizeof(t->v[0].node))
			return ab_fail(err, errlen, EINVAL, "--node-memory: '%.*s' is no node name",
				       (int)(n > 64 ? 64 : n), p);
		for (i = 0; i < t->n && (strlen(t->v[i].node) != n || memcmp(t->v[i].node, p, n));
		     i++)
			;
		if (i == t->n) {
			if (t->n == AB_NODE_MEMORY_MAX)
				return ab_fail(err, errlen, EINVAL, "--node-memory names more than %d "
								    "nodes", AB_NODE_MEMORY_MAX);
			memcpy(t->v[i].node, p, n);
			t->v[i].node[n] = '\0';
			t->v[i].bytes = (uint64_t)bytes;
			t->n++;
		} else if ((uint64_t)bytes < t->v[i].bytes) {
			t->v[i].bytes = (uint64_t)bytes;
		}
		p += n + 1;
	}
	return 0;
}

int ab_node_memory_parse(const char *spec, struct ab_node_memory *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	if (!spec || !*spec)
		return ab_fail(err, errlen, EINVAL, "--node-memory: empty");
	for (const char *p = spec; *p;) {
		size_t n = strcspn(p, ";");
		int rc = node_memory_entry(p, n, t, err, errlen);

		if (rc < 0)
			return rc;
		p += n + (p[n] == ';');
	}
	return 0;
}

uint64_t ab_node_memory_of(const struct ab_node_memory *t, const char *node)
{
	for (size_t i = 0; t && node && i < t->n; i++)
		if (!strcmp(t->v[i].node, node))
			return t->v[i].bytes;
	return 0;
}
