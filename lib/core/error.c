/* error.c - the error convention of autobatch's libraries (see error.h). */
#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ab_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -code;
}

int ab_format(char *buf, size_t buflen, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, buflen, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= buflen)
		return -ENAMETOOLONG;
	return 0;
}

int ab_copy(char *dst, size_t dstlen, const char *src)
{
	size_t n = strlen(src);

	if (n >= dstlen)
		return -ENAMETOOLONG;
	memcpy(dst, src, n + 1);
	return 0;
}

bool ab_plain_name(const char *name)
{
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
	       strlen(name);
}

const char *ab_base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

static const char *printable(const char *text, char *buf, size_t buflen, bool lines)
{
	size_t i, n;

	if (buflen < 4) {
		if (buflen)
			buf[0] = '\0';
		return buf;
	}
	for (i = 0, n = 0; text[i] && n < buflen - 1; i++, n++) {
		unsigned char c = (unsigned char)text[i];
		buf[n] = (c >= 0x20 && c < 0x7f) || (lines && c == '\n') ? (char)c : '?';
	}
	buf[n] = '\0';
	if (text[i])
		memcpy(buf + buflen - 4, "...", 4);
	return buf;
}

const char *ab_printable(const char *text, char *buf, size_t buflen)
{
	return printable(text, buf, buflen, false);
}

const char *ab_printable_lines(const char *text, char *buf, size_t buflen)
{
	return printable(text, buf, buflen, true);
}

void ab_append(char *buf, size_t buflen, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*len + 1 >= buflen)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *len, buflen - *len, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len = *len + (size_t)n < buflen ? *len + (size_t)n : buflen - 1;
}

int ab_parse_choice(const char *word, const char *const names[], int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(word, names[i]) == 0)
			return i;
	return -EINVAL;
}
