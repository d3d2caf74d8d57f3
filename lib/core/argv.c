/* argv.c - an argument vector built up for execvp: grown as needed, bounded by AB_ARGV_MAX,
 * a failure remembered and said once when the vector is used.
 */
#include "argv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* Room for one more in *v (of *cap), with a NULL after it. */
static bool grow(char ***v, size_t n, size_t *cap)
{
	size_t want = *cap ? 2 * *cap : 16;
	char **nv;

	if (n + 2 <= *cap)
		return true;
	if (n + 2 > AB_ARGV_MAX + 1 || !(nv = realloc(*v, want * sizeof(**v))))
		return false;
	*v = nv, *cap = want;
	return true;
}

void ab_argv_add(struct ab_argv *a, const char *arg)
{
	if (a->failed || a->n >= AB_ARGV_MAX || !grow(&a->v, a->n, &a->cap)) {
		a->failed = true;
		return;
	}
	a->v[a->n++] = (char *)arg;
	a->v[a->n] = NULL;
}

void ab_argv_addf(struct ab_argv *a, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (!s || a->failed || !grow(&a->owned, a->nowned, &a->capowned)) {
		free(s);
		a->failed = true;
		return;
	}
	a->owned[a->nowned++] = s;
	ab_argv_add(a, s);
}

void ab_argv_add_words(struct ab_argv *a, char *copy)
{
	char *save = NULL;

	for (char *w = copy ? strtok_r(copy, " \t", &save) : NULL; w; w = strtok_r(NULL, " \t", &save))
		ab_argv_add(a, w);
}

int ab_argv_done(const struct ab_argv *a, const char *what, char *err, size_t errlen)
{
	if (!a->failed && a->v)
		return 0;
	if (a->n >= AB_ARGV_MAX)
		return ab_fail(err, errlen, E2BIG, "%s is longer than %d arguments", what,
			       AB_ARGV_MAX);
	return ab_fail(err, errlen, ENOMEM, "out of memory building %s", what);
}

void ab_argv_free(struct ab_argv *a)
{
	for (size_t i = 0; i < a->nowned; i++)
		free(a->owned[i]);
	free(a->owned);
	free(a->v);
	*a = (struct ab_argv){0};
}
