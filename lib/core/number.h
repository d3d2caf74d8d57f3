/* number.h - the one strict parser of numbers people and files write: whole numbers and
 * plain decimals, digits only, every overflow caught. Used wherever a number is read.
 */
#ifndef AUTOBATCH_NUMBER_H
#define AUTOBATCH_NUMBER_H

#include <stddef.h>

#include "input_limits.h"

#define AB_EXACT_DIGITS 15 /* a decimal of this many digits is exact in a double */

/* A whole number in decimal digits only (no sign, space or base prefix) from min to max:
 * 0, -EINVAL when text is not one, -ERANGE when it is out of [min, max] or overflows. */
int ab_parse_whole(const char *text, long min, long max, long *out);

/* ab_parse_config_whole's flag: a decimal or exponent whose value is whole counts too. */
#define AB_WHOLE_DECIMAL 1u

/* A whole number as the config readers of frameworks read one (PyYAML, OmegaConf, json):
 * decimal digits with a sign, YAML 1.1's underscores after the first digit (MaxText's
 * "steps: 150_001") and 0x hex; with AB_WHOLE_DECIMAL also 4.0 or 1e3 (MaxText declares its
 * ramp's fields floats). A leading 0 before digits (010: eight to PyYAML, ten to others) is
 * none. 0, -EINVAL when text is not one, -ERANGE when it is outside [min, max]. */
int ab_parse_config_whole(const char *text, unsigned flags, long min, long max, long *out);

/* The decimal at the start of text ("0.8", "12", "1.5" of "1.5GiB"): digits with at most one
 * dot and at most max_digits digits (15 are exact in a double; at most 19), no sign or
 * exponent. *end is where it stops. 0, -EINVAL when no digit starts text, -ERANGE when it has
 * more digits. */
int ab_parse_decimal_prefix(const char *text, unsigned max_digits, double *out,
			    const char **end);

/* A whole text as such a decimal: 0, -EINVAL, or -ERANGE (too many digits, or outside
 * [min, max]). */
int ab_parse_decimal(const char *text, unsigned max_digits, double min, double max,
		     double *out);

/* Parses "0.8", ".8" or "80%" into 0 < f <= 1. Refuses anything else, including exponents,
 * hex floats, signs, spaces, nan/inf and text longer than AB_FRACTION_TEXT_MAX; err says why
 * and what to give. */
int ab_parse_fraction(const char *text, double *out, char *err, size_t errlen);

#endif
