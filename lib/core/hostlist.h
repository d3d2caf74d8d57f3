/* hostlist.h - the first host of a Slurm host list ("gpu[003-010,12],login1" -> "gpu003"),
 * which is where the probe step runs.
 */
#ifndef AUTOBATCH_HOSTLIST_H
#define AUTOBATCH_HOSTLIST_H

#include <stddef.h>

/* 0, or -EINVAL when the list is empty or malformed. */
int ab_hostlist_first(const char *list, char *out, size_t outlen);

#endif
