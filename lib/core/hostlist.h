/* hostlist.h - the first host of a Slurm host list ("gpu[003-010,12],login1" -> "gpu003"),
 * which is where the probe step runs, how many hosts it names, and what a host name may hold.
 */
#ifndef AUTOBATCH_HOSTLIST_H
#define AUTOBATCH_HOSTLIST_H

#include <stdbool.h>
#include <stddef.h>

/* 0, or -EINVAL when the list is empty or malformed. */
int ab_hostlist_first(const char *list, char *out, size_t outlen);

/* How many hosts the list names ("gpu[003-010,12],login1" -> 10); -EINVAL when it is empty
 * or malformed. */
int ab_hostlist_count(const char *list);

/* s[0..len) is a host name as Slurm's host lists write it (letters, digits, '-', '.', '_'),
 * safe to show as it is; the empty name is not. */
bool ab_hostname_ok(const char *s, size_t len);

#endif
