/* report_run.h - the real run's figure in the probe's report: each task's watch adds what
 * its task held against the limit (the most any task held, how many reported, how many went over).
 */
#ifndef AUTOBATCH_REPORT_RUN_H
#define AUTOBATCH_REPORT_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ab_run_figure {
	uint64_t limit_bytes, peak_bytes; /* the task's peak so far */
	long task, batch;
	const char *node;
	const char *measured;	  /* "gpu" (NVML) or "host" (the process tree) */
	bool first;		  /* this task's first report: counted in "tasks" */
	bool first_over;	  /* its first report over the limit: counted in "over" */
};

/* Adds f to the "real_run" object of the JSON report at path (a file of the caller's, as
 * srun wrote it), under a lock on the file, rewritten whole (a temp file and a rename):
 * "limit_bytes", "batch", "tasks", "over", and "peak_bytes", "task", "node" of the largest
 * peak any task reported. 0, or a negative errno with a message. */
int ab_report_add_run(const char *path, const struct ab_run_figure *f, char *err, size_t errlen);

#endif
