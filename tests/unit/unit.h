/* unit.h - included after cmocka.h by every unit test: failure messages also go to stderr,
 * because cmocka's TAP output keeps only the file and line of a failure.
 */
#ifndef AUTOBATCH_TEST_UNIT_H
#define AUTOBATCH_TEST_UNIT_H

#include <limits.h>
#include <stdio.h>
#include <string.h>

#undef fail_msg
#define fail_msg(...)                                                                          \
	do {                                                                                   \
		fprintf(stderr, "# ");                                                         \
		fprintf(stderr, __VA_ARGS__);                                                  \
		fprintf(stderr, "\n");                                                         \
		_fail(__FILE__, __LINE__);                                                     \
	} while (0)

/* Fails, naming both texts and the caller's line, unless needle is in haystack. */
#define assert_contains(haystack, needle)                                                      \
	do {                                                                                   \
		const char *haystack_ = (haystack), *needle_ = (needle);                       \
		if (!strstr(haystack_, needle_))                                               \
			fail_msg("expected \"%s\" in \"%s\"", needle_, haystack_);           \
	} while (0)

/* Writes text to dir/name: a real file for the code under test to read. */
static inline void unit_put(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX + NAME_MAX + 2];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

#endif
