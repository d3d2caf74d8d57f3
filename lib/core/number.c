/* number.c - strict whole and decimal numbers (see number.h). */
#include "number.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "error.h"

#define UINT64_DIGITS 19 /* 10^19 - 1 fits in a uint64_t */

int ab_parse_whole(const char *text, long min, long max, long *out)
{
	long v = 0;
	const char *p = text;

	if (!p || !*p)
		return -EINVAL;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		if (v > (LONG_MAX - (*p - '0')) / 10) {
			/* keep reading: "12x" with many digits is not a number, not too large */
			while (*p >= '0' && *p <= '9')
				p++;
			return *p ? -EINVAL : -ERANGE;
		}
		v = v * 10 + (*p - '0');
	}
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

/* Digits of base (10 or 16) with underscores after the first, to the end of p: 0, -EINVAL,
 * or -ERANGE past LONG_MAX. */
static int config_digits(const char *p, int base, long *out)
{
	long v = 0;
	int d;

	if (*p == '_')
		return -EINVAL;
	for (; *p; p++) {
		if (*p == '_')
			continue;
		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (base == 16 && ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'f'))
			d = (*p | 0x20) - 'a' + 10;
		else
			return -EINVAL;
		if (v > (LONG_MAX - d) / base) /* too large, unless what follows is no number */
			return p[strspn(p, base == 16 ? "0123456789abcdefABCDEF_" : "0123456789_")]
				       ? -EINVAL
				       : -ERANGE;
		v = v * base + d;
	}
	*out = v;
	return 0;
}

/* A decimal or exponent whose value is whole (4.0, 1e3), unsigned, as a double reads it. */
static int whole_decimal(const char *text, long *out)
{
	char *end;
	double v;

	if (!(*text >= '0' && *text <= '9') && *text != '.')
		return -EINVAL;
	if (text[strspn(text, "0123456789.eE+-")] != '\0')
		return -EINVAL; /* no hex float, inf or nan */
	v = strtod(text, &end);
	if (*end || !isfinite(v) || fmod(v, 1) != 0)
		return -EINVAL;
	if (v >= 0x1p62)
		return -ERANGE;
	*out = (long)v;
	return 0;
}

int ab_parse_config_whole(const char *text, unsigned flags, long min, long max, long *out)
{
	const char *p = text;
	bool neg = false;
	long v = 0;
	int rc;

	if (!p || !*p)
		return -EINVAL;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (p[0] == '0' && p[1] == 'x' && p[2]) /* lower case: PyYAML's 0X1F is a string */
		rc = config_digits(p + 2, 16, &v);
	else if (p[0] == '0' && p[1] && p[1] != '.' && p[1] != 'e' && p[1] != 'E')
		rc = -EINVAL; /* octal to PyYAML, decimal to others */
	else if ((rc = *p >= '0' && *p <= '9' ? config_digits(p, 10, &v) : -EINVAL) == -EINVAL &&
		 (flags & AB_WHOLE_DECIMAL) && !strchr(p, '_') &&
		 (rc = whole_decimal(p, &v)) < 0)
		return rc;
	if (rc < 0)
		return rc;
	if (neg)
		v = -v;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int ab_parse_decimal_prefix(const char *text, unsigned max_digits, double *out,
			    const char **end)
{
	uint64_t mantissa = 0;
	unsigned digits = 0, decimals = 0;
	int dot = 0;
	const char *p = text;

	for (; p && *p; p++) {
		if (*p == '.' && !dot) {
			dot = 1;
		} else if (*p >= '0' && *p <= '9') {
			if (++digits > max_digits || digits > UINT64_DIGITS)
				return -ERANGE;
			mantissa = mantissa * 10 + (uint64_t)(*p - '0');
			decimals += (unsigned)dot;
		} else {
			break;
		}
	}
	if (digits == 0)
		return -EINVAL;
	*out = (double)mantissa;
	while (decimals--)
		*out /= 10.0;
	*end = p;
	return 0;
}

int ab_parse_decimal(const char *text, unsigned max_digits, double min, double max,
		     double *out)
{
	const char *end;
	double v;
	int rc = ab_parse_decimal_prefix(text, max_digits, &v, &end);

	if (rc < 0)
		return rc;
	if (*end)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

#define FRACTION_HINT "give a number greater than 0 and at most 1, such as 0.8 or 80%"

int ab_parse_fraction(const char *text, double *out, char *err, size_t errlen)
{
	char shown[AB_FRACTION_TEXT_MAX + 4];
	const char *end = NULL;
	double v;

	if (!text || !*text)
		return ab_fail(err, errlen, EINVAL, "empty fraction: %s", FRACTION_HINT);
	if (strlen(text) > AB_FRACTION_TEXT_MAX)
		return ab_fail(err, errlen, EINVAL, "fraction '%s' is too long: %s",
			       ab_printable(text, shown, 16), FRACTION_HINT);
	ab_printable(text, shown, sizeof(shown));
	if (ab_parse_decimal_prefix(text, AB_EXACT_DIGITS, &v, &end) < 0 ||
	    (*end && strcmp(end, "%") != 0))
		return ab_fail(err, errlen, EINVAL, "invalid fraction '%s': %s", shown,
			       FRACTION_HINT);
	if (!(v > 0.0))
		return ab_fail(err, errlen, ERANGE, "fraction '%s' must be greater than 0: %s",
			       shown, FRACTION_HINT);
	/* 0.8% is a fraction of a percent of the GPU: a slip for 0.8 or 80%, never a limit */
	if (*end == '%' && v < 1.0)
		return ab_fail(err, errlen, ERANGE, "fraction '%s' is under 1%% of the GPU's memory: "
						    "%s",
			       shown, FRACTION_HINT);
	if (*end == '%')
		v /= 100.0;
	if (v > 1.0)
		return ab_fail(err, errlen, ERANGE,
			       "fraction '%s' is more than the whole GPU memory: %s", shown,
			       FRACTION_HINT);
	*out = v;
	return 0;
}
