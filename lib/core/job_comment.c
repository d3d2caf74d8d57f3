/* job_comment.c - see job_comment.h. */
#include "job_comment.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "json_field.h"
#include "size.h"

/* A field of o, -1 when absent (json_field.h). */
static int64_t field(struct json_object *o, const char *key)
{
	return ab_json_int(o, key, -1);
}

/* The user's part of a comment: up to our tag, without the separator before it. */
static size_t user_part(const char *old)
{
	const char *tag = old ? strstr(old, AB_COMMENT_TAG) : NULL;
	size_t n = old ? (tag ? (size_t)(tag - old) : strlen(old)) : 0;

	while (n > 0 && (old[n - 1] == ' ' || old[n - 1] == '|'))
		n--;
	return n;
}

/* "; run peak P (task T on NODE), N tasks, M over", or "; run: not reported". */
static void run_text(struct json_object *run, char *buf, size_t buflen, size_t *len)
{
	char peak[32];
	const char *node = ab_json_text(run, "node");

	if (field(run, "peak_bytes") < 0 || field(run, "tasks") < 1) {
		ab_append(buf, buflen, len, "; run: not reported");
		return;
	}
	ab_append(buf, buflen, len, "; run peak %s (task %lld%s%s), %lld tasks, %lld over",
		  ab_format_size((uint64_t)field(run, "peak_bytes"), peak, sizeof(peak)),
		  (long long)field(run, "task"), *node ? " on " : "", node,
		  (long long)field(run, "tasks"), (long long)(field(run, "over") > 0 ? field(run, "over") : 0));
}

int ab_job_comment(const char *report, const char *old, unsigned step, char *out, size_t outlen)
{
	struct json_object *j = json_tokener_parse(report), *run = NULL, *dev = NULL;
	char limit[32], total[32];
	size_t len = 0, keep = user_part(old);
	int rc = 0;

	out[0] = '\0';
	if (!j || field(j, "batch_size") < 1 || field(j, "limit_bytes") < 1) {
		rc = -EINVAL;
		goto fail;
	}
	json_object_object_get_ex(j, "real_run", &run);
	json_object_object_get_ex(j, "device", &dev);
	if (keep)
		ab_append(out, outlen, &len, "%.*s | ", (int)keep, old);
	ab_append(out, outlen, &len, AB_COMMENT_TAG " step %u batch %lld, limit %s", step,
		  (long long)field(j, "batch_size"),
		  ab_format_size((uint64_t)field(j, "limit_bytes"), limit, sizeof(limit)));
	if (field(dev, "total_bytes") > 0)
		ab_append(out, outlen, &len, " of %s",
			  ab_format_size((uint64_t)field(dev, "total_bytes"), total, sizeof(total)));
	run_text(run, out, outlen, &len);
fail:
	json_object_put(j);
	return rc;
}
