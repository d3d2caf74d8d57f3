/* srun_comment.c - local context, with the site's comment=on: the step's decision, when it
 * is made, and what its real run held (the report's "real_run", which the tasks' watches
 * added), at srun's end, in the job's Comment, where sacct (AccountingStoreFlags=job_comment)
 * and scontrol show it; the user's own comment is kept before it. Two updates, as the user,
 * per step: an srun that made its own allocation ends after its job, which then keeps the
 * first.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "srun_comment.h"

#include "error.h"
#include "file_replace.h"
#include "job_comment.h"
#include "probe_step.h"

#define REPORT_MAX (4 << 20)

/* srun's own report, written whole by ab_apply: NULL when it is gone or not a plain file of
 * the user's (a name someone replaced meanwhile). */
static char *read_report(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	char *text = NULL;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    st.st_size < REPORT_MAX)
		ab_read_whole(fd, (size_t)st.st_size, &text);
	close(fd);
	return text;
}

void ab_srun_comment(const struct ab_ctx *c, const char *json)
{
	job_info_msg_t *msg = NULL;
	job_desc_msg_t desc;
	job_array_resp_msg_t *resp = NULL;
	char comment[AB_COMMENT_MAX], id[16];
	char *report = NULL;
	bool at_end = !json;
	int rc;

	if (!c->site_ok || !c->site.comment || !c->report[0] || !c->jobid)
		return;
	if (at_end && !(json = report = read_report(c->report))) {
		slurm_error(AB_LOG_PREFIX "the job's comment was not written: %s is gone", c->report);
		return;
	}
	ab_load_job(c->jobid, &msg); /* the user's comment, kept; none when it cannot be read */
	rc = ab_job_comment(json, msg && msg->record_count ? msg->job_array[0].comment : NULL,
			    c->stepid, comment, sizeof(comment));
	slurm_free_job_info_msg(msg);
	free(report);
	if (rc == -ENOSPC)
		slurm_error(AB_LOG_PREFIX "the job's comment was not written: %s",
			    "your own comment leaves no room for the decision beside it");
	if (rc < 0)
		return;
	slurm_init_job_desc_msg(&desc);
	/* by its string, as scontrol names a job: the numeric field moved in Slurm 26.05 */
	snprintf(id, sizeof(id), "%u", c->jobid);
	desc.job_id_str = id;
	desc.comment = comment;
	rc = slurm_update_job2(&desc, &resp); /* the call for a job named by its string */
	if (rc == SLURM_SUCCESS && resp && resp->job_array_count > 0 && resp->error_code)
		rc = (int)resp->error_code[0], errno = rc;
	/* a job already done at srun's end was its own allocation's: the decision stays said */
	if (rc != SLURM_SUCCESS &&
	    !(at_end && (errno == ESLURM_ALREADY_DONE || errno == ESLURM_JOB_FINISHED)))
		slurm_error(AB_LOG_PREFIX "the job's comment was not written: %s", slurm_strerror(errno));
	slurm_free_job_array_resp(resp);
}
