/* error.h - the error convention of autobatch's libraries: functions return 0 or a negative
 * errno value and describe a failure in one sentence written into a caller-owned buffer.
 */
#ifndef AUTOBATCH_ERROR_H
#define AUTOBATCH_ERROR_H

#include <stdbool.h>
#include <stddef.h>

#define AB_ERR_MAX 512 /* size of every error/message buffer */

/* Formats into err (always NUL-terminated, truncated if needed) and returns -code, so a
 * failure path reads `return ab_fail(err, errlen, EINVAL, "...", ...);`. err may be NULL. */
int ab_fail(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* snprintf that reports truncation as -ENAMETOOLONG instead of silently cutting. */
int ab_format(char *buf, size_t buflen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Appends to buf at *len (kept <= buflen - 1, so repeated calls never overflow). */
void ab_append(char *buf, size_t buflen, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Copies a value into a fixed buffer, refusing (-ENAMETOOLONG) rather than truncating. */
int ab_copy(char *dst, size_t dstlen, const char *src);

/* Copies text for quoting in a message: non-printable bytes become '?' and text longer
 * than the buffer ends in "...", so hostile input never reaches a terminal or a log raw. */
const char *ab_printable(const char *text, char *buf, size_t buflen);

/* The last component of path: what follows its last '/', or path itself. */
const char *ab_base_name(const char *path);

/* ab_printable, keeping newlines: for a message of several lines (a trial's quoted output),
 * each said on a line of its own with its prefix. */
const char *ab_printable_lines(const char *text, char *buf, size_t buflen);

/* True when name is one to put in a command line or a path as it is: only letters, digits,
 * '.', '_' and '-' (a preset's name, a cache entry's). */
bool ab_plain_name(const char *name);

/* The index of word in names[0..n), or -EINVAL: a value from a fixed set of choices. */
int ab_parse_choice(const char *word, const char *const names[], int n);

#endif
