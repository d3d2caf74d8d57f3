/* job_comment.h - the job's Comment with the step's decision and its real run (the site's
 * comment=on): what sacct and scontrol show, the user's own comment kept before it.
 */
#ifndef AUTOBATCH_JOB_COMMENT_H
#define AUTOBATCH_JOB_COMMENT_H

#include <stddef.h>

#define AB_COMMENT_TAG "autobatch:" /* where our part of a comment begins */
#define AB_COMMENT_SEPARATOR " | "   /* between the user's comment and ours */
#define AB_COMMENT_MAX 4096

/* The comment: old (the job's, NULL for none) byte for byte without the part an earlier step
 * of ours appended, then " | autobatch: step S batch B, limit L of TOTAL; run peak P (task T
 * on NODE), N tasks, M over" from report (the step's JSON report, its "real_run" if any tasks
 * added one, else "run: not reported"). 0; -EINVAL when the report says no decision; -ENOSPC
 * when the user's comment and ours do not both fit in outlen (nothing is written). */
int ab_job_comment(const char *report, const char *old, unsigned step, char *out, size_t outlen);

#endif
