/* size.c - byte sizes (see size.h). */
#include "size.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "number.h"

#define SIZE_MAX_BYTES (1ULL << 60)

static int unit_multiplier(const char *u, double *mult)
{
	static const char units[] = "KMGT";
	const char *p;
	double base;

	if (!*u) {
		*mult = 1;
		return 0;
	}
	if (!(p = strchr(units, u[0] & ~0x20)) || !*p)
		return -EINVAL;
	if (!strcmp(u + 1, "iB") || !u[1])
		base = 1024;
	else if (!strcmp(u + 1, "B"))
		base = 1000;
	else
		return -EINVAL;
	*mult = 1;
	for (const char *q = units; q <= p; q++)
		*mult *= base;
	return 0;
}

int ab_parse_size(const char *text, uint64_t *out, char *err, size_t errlen)
{
	double num, mult, v;
	const char *p;

	if (!text || strlen(text) > 32 || ab_parse_decimal_prefix(text, 18, &num, &p) < 0 ||
	    unit_multiplier(p, &mult) < 0)
		goto bad;
	if (mult == 1 && num != (double)(uint64_t)num)
		goto bad; /* a fraction of a byte */
	v = num * mult;
	if (v > (double)SIZE_MAX_BYTES)
		return ab_fail(err, errlen, ERANGE, "size '%s' is too large", text);
	*out = (uint64_t)v;
	return 0;
bad:
	return ab_fail(err, errlen, EINVAL,
		       "invalid size '%.40s': give bytes or a number with K, M, G or T and iB "
		       "(1024) or B (1000), such as 80GiB or 300MB",
		       text ? text : "");
}

void ab_format_sizes_apart(uint64_t a, uint64_t b, char *sa, char *sb, size_t len)
{
	if (strcmp(ab_format_size(a, sa, len), ab_format_size(b, sb, len)) || a == b)
		return;
	snprintf(sa, len, "%.1f MiB", (double)a / 1048576.0);
	snprintf(sb, len, "%.1f MiB", (double)b / 1048576.0);
}

const char *ab_format_size(uint64_t bytes, char *buf, size_t buflen)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, buflen, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, buflen, v >= 100 ? "%.0f %s" : "%.1f %s", v, units[u]);
	return buf;
}
