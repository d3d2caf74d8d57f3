/* hostlist.c - see hostlist.h. For the first host only the first range of the first bracket
 * is read, its zero padding kept; counting reads every range.
 */
#include "hostlist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static int valid_host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_';
}

bool ab_hostname_ok(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!valid_host_char(s[i]))
			return false;
	return len > 0;
}

int ab_hostlist_first(const char *list, char *out, size_t outlen)
{
	size_t n = 0;
	const char *p = list;

	if (!list)
		return -EINVAL;
	for (; *p && *p != ',' && *p != '['; p++) {
		if (!valid_host_char(*p) || n + 1 >= outlen)
			return -EINVAL;
		out[n++] = *p;
	}
	if (*p == '[') {
		const char *digits = ++p;

		while (*p >= '0' && *p <= '9')
			p++;
		if (p == digits || (*p != '-' && *p != ',' && *p != ']') || !strchr(p, ']') ||
		    n + (size_t)(p - digits) + 1 >= outlen)
			return -EINVAL;
		memcpy(out + n, digits, (size_t)(p - digits));
		n += (size_t)(p - digits);
		p = strchr(p, ']') + 1;
		for (; *p && *p != ','; p++) { /* a suffix after the bracket */
			if (!valid_host_char(*p) || n + 1 >= outlen)
				return -EINVAL;
			out[n++] = *p;
		}
	}
	if (n == 0)
		return -EINVAL;
	out[n] = '\0';
	return 0;
}

#define RANGE_MAX 1000000000L /* a host number; strtol saturates at LONG_MAX, not this */

/* The hosts one bracket names, "[1-3,7]" from just after '[' to its ']' (*end after it). */
static long bracket_count(const char *p, const char **end)
{
	long n = 0;

	for (;;) {
		char *e;
		long a = strtol(p, &e, 10), b = a;

		if (e == p || *p < '0' || *p > '9' || a > RANGE_MAX)
			return -EINVAL;
		if (*e == '-') {
			p = e + 1;
			b = strtol(p, &e, 10);
			if (e == p || *p < '0' || *p > '9' || b < a || b > RANGE_MAX)
				return -EINVAL;
		}
		n += b - a + 1;
		if (n > 1000000)
			return -EINVAL;
		if (*e == ']') {
			*end = e + 1;
			return n;
		}
		if (*e != ',')
			return -EINVAL;
		p = e + 1;
	}
}

int ab_hostlist_count(const char *list)
{
	long total = 0, one = 1;
	bool named = false;
	const char *p = list;

	if (!list || !*list)
		return -EINVAL;
	for (;;) {
		if (*p == '[') {
			long n = bracket_count(p + 1, &p);

			if (n < 0 || one * n > 1000000)
				return -EINVAL;
			one *= n, named = true;
		} else if (*p == ',' || !*p) {
			if (!named)
				return -EINVAL;
			total += one, one = 1, named = false;
			if (total > 1000000)
				return -EINVAL;
			if (!*p)
				return (int)total;
			p++;
		} else if (valid_host_char(*p)) {
			named = true, p++;
		} else {
			return -EINVAL;
		}
	}
}
