/* clock.h - the one clock every deadline and trial timing in autobatch reads: monotonic
 * seconds, so a wall-clock change never stretches or cuts a trial.
 */
#ifndef AUTOBATCH_CLOCK_H
#define AUTOBATCH_CLOCK_H

#include <time.h>

static inline double ab_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
