/* gpu_models.c - the GPU models of a step's nodes (gpu_models.h), from their GRES strings.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gpu_models.h"

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
	}
	if (!a->counted[i])
		m->v[i].nodes++;
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
