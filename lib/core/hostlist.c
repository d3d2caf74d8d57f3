/* hostlist.c - see hostlist.h. Only the first host is needed, so only the first range of
 * the first bracket is read; its zero padding is kept.
 */
#include "hostlist.h"

#include <errno.h>
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
