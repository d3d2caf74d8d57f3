/* search_check.h - the search's promises under any evidence, shared by the unit tests and
 * the search fuzzer: bytes pick the constraints and every trial's outcome, then we check.
 */
#ifndef AUTOBATCH_TEST_SEARCH_CHECK_H
#define AUTOBATCH_TEST_SEARCH_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* Runs ab_search on the parameters and trial outcomes data spells (curves with noise,
 * jumps and bends, OOMs with floors below or above any fit, steps too few to count, peaks
 * off the curve, helpers' noise, trial errors) and checks what it promises whatever the
 * trials say: a choice was measured to fit within the limit less the margin, is an allowed
 * size, came from a bounded number of trials, and every trial ran an allowed size once; a
 * refusal says why. 0 when it holds; -1 with the violation in why. */
int search_check(const uint8_t *data, size_t size, char *why, size_t whylen);

#endif
