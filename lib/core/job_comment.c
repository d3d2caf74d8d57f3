/* job_comment.c - see job_comment.h. */
#include "job_comment.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
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

/* Ours: "autobatch: step " and a step number, as we write it; "autobatch: step" of the
 * user's own (no number) stays theirs. */
static bool ours_at(const char *p)
{
	size_t n = strlen(AB_COMMENT_TAG " step ");

	return !strncmp(p, AB_COMMENT_TAG " step ", n) && p[n] >= '0' && p[n] <= '9';
}

/* The user's part of a comment, byte for byte: all of it but the part an earlier step of
 * ours appended, at its end (" | autobatch: step N ...", or the whole comment where the user
 * had none). Their own "autobatch:" anywhere else is theirs. */
static size_t user_part(const char *old)
{
	const char *at, *last = NULL;
	size_t sep = strlen(AB_COMMENT_SEPARATOR);

	if (!old || ours_at(old))
		return 0;
	for (at = strstr(old, AB_COMMENT_SEPARATOR); at; at = strstr(at + 1, AB_COMMENT_SEPARATOR))
		if (ours_at(at + sep))
			last = at;
	return last ? (size_t)(last - old) : strlen(old);
}

/* "; run peak P (task T on NODE), N tasks, M over", or "; run: not reported". */
static void run_text(struct json_object *run, char *buf, size_t buflen, size_t *len)
{
	char peak[32];
	const char *node = ab_json_text(run, "node");

	/* the report is the user's file: a node name is a plain one or none, counts are counts */
	if (!ab_plain_name(node) || strlen(node) > 64)
		node = "";
	if (field(run, "peak_bytes") < 0 || field(run, "tasks") < 1 || field(run, "task") < 0 ||
	    field(run, "over") > field(run, "tasks")) {
		ab_append(buf, buflen, len, "; run: not reported");
		return;
	}
	ab_append(buf, buflen, len, "; run peak %s (task %lld%s%s), %lld tasks, %lld over",
		  ab_format_size((uint64_t)field(run, "peak_bytes"), peak, sizeof(peak)),
		  (long long)field(run, "task"), *node ? " on " : "", node,
		  (long long)field(run, "tasks"),
		  (long long)(field(run, "over") > 0 ? field(run, "over") : 0));
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
		ab_append(out, outlen, &len, "%.*s" AB_COMMENT_SEPARATOR, (int)keep, old);
	ab_append(out, outlen, &len, AB_COMMENT_TAG " step %u batch %lld, limit %s", step,
		  (long long)field(j, "batch_size"),
		  ab_format_size((uint64_t)field(j, "limit_bytes"), limit, sizeof(limit)));
	if (field(dev, "total_bytes") > 0)
		ab_append(out, outlen, &len, " of %s",
			  ab_format_size((uint64_t)field(dev, "total_bytes"), total, sizeof(total)));
	run_text(run, out, outlen, &len);
	/* the user's comment and ours, both whole, or nothing (ab_append stops short of the end) */
	if (len + 1 >= outlen) {
		out[0] = '\0';
		rc = -ENOSPC;
	}
fail:
	json_object_put(j);
	return rc;
}
