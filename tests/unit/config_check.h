/* config_check.h - the property every edit must keep, shared by the unit tests and the
 * fuzzer: after the edit the file parses, each edited key reads its new value, and every
 * other value (path and text, in order) is exactly what it was.
 */
#ifndef AUTOBATCH_TEST_CONFIG_CHECK_H
#define AUTOBATCH_TEST_CONFIG_CHECK_H

#include <stddef.h>

#include "config_edit.h"

/* 0 when the property holds; otherwise -1 with the reason in why. */
int check_only_targets_changed(const struct ab_config *before, const char *after,
			       size_t afterlen, const struct ab_edit *edits, size_t n,
			       int document, char *why, size_t whylen);

#endif
