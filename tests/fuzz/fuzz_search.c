/* fuzz_search.c - libFuzzer target over the batch-size search: the bytes are a search's
 * constraints and every trial's outcome (tests/unit/search_check.c), and whatever they say,
 * the search must not crash, hang or leak, and must keep its promises; a broken promise
 * aborts with the reason.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "search_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[512];

	if (search_check(data, size, why, sizeof(why)) < 0) {
		fprintf(stderr, "search property violated: %s\n", why);
		abort();
	}
	return 0;
}
