/* unit.h - included after cmocka.h by every unit test: failure messages also go to stderr,
 * because cmocka's TAP output keeps only the file and line of a failure.
 */
#ifndef AUTOBATCH_TEST_UNIT_H
#define AUTOBATCH_TEST_UNIT_H

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

#endif
