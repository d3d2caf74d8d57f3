/* report_run.c - see report_run.h. Tasks on several nodes update one report (the job's
 * working directory, shared): each takes a POSIX lock on the file, reads it, and replaces it;
 * a task that waited on a file another one replaced meanwhile starts again on the new one. */
#include "report_run.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "file_replace.h"
#include "json_field.h"

#define REPORT_MAX (4 << 20) /* a report is a few KiB; a larger file is not ours */
#define REOPENS 8	     /* replaced under us this often: give up, the figure is not vital */
/* A task holds the lock for a read and a rename. Anyone who can read the report can hold a
 * lock on it too (a read lock, for ever): the watch never waits on it past this, and keeps
 * watching (its over-limit verdict does not go through the report). */
#define LOCK_WAIT_S 3.0
#define LOCK_RETRY_NS 20000000L

/* The lock lk on fd, tried until seconds have passed: 0, or -1 with errno (EAGAIN or EACCES
 * where another process still holds one). */
static int lock_within(int fd, struct flock *lk, double seconds)
{
	const struct timespec pause = {0, LOCK_RETRY_NS};
	double until = ab_now() + seconds;

	while (fcntl(fd, F_SETLK, lk) < 0) {
		if ((errno != EAGAIN && errno != EACCES && errno != EINTR) || ab_now() >= until)
			return -1;
		nanosleep(&pause, NULL);
	}
	return 0;
}

/* The report, locked, as the file now at path: the descriptor, or a negative errno. */
static int open_locked(const char *path, char *err, size_t errlen)
{
	for (int i = 0; i < REOPENS; i++) {
		struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
		struct stat held, now;
		int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

		if (fd < 0)
			return ab_fail(err, errlen, errno, "cannot open %s: %s", path, strerror(errno));
		if (fstat(fd, &held) < 0 || !S_ISREG(held.st_mode) || held.st_uid != geteuid() ||
		    held.st_size > REPORT_MAX) {
			close(fd);
			return ab_fail(err, errlen, EPERM, "%s is not a report of yours", path);
		}
		if (lock_within(fd, &lk, LOCK_WAIT_S) < 0) {
			int e = errno;

			close(fd);
			return e == EAGAIN || e == EACCES
				       ? ab_fail(err, errlen, EAGAIN, "%s stayed locked by another "
								      "process for %.0f s",
						 path, LOCK_WAIT_S)
				       : ab_fail(err, errlen, e, "cannot lock %s: %s", path,
						 strerror(e));
		}
		if (lstat(path, &now) == 0 && now.st_ino == held.st_ino && now.st_dev == held.st_dev)
			return fd;
		close(fd); /* another task replaced it while this one waited */
	}
	return ab_fail(err, errlen, EAGAIN, "%s kept changing", path);
}

static struct json_object *read_json(int fd)
{
	struct json_object *j = NULL;
	struct stat st;
	char *text;

	if (fstat(fd, &st) < 0 || ab_read_whole(fd, (size_t)st.st_size, &text) < 0)
		return NULL;
	j = json_tokener_parse(text);
	free(text);
	if (j && !json_object_is_type(j, json_type_object)) {
		json_object_put(j);
		j = NULL;
	}
	return j;
}

static void set_int(struct json_object *o, const char *key, int64_t v)
{
	json_object_object_add(o, key, json_object_new_int64(v));
}

/* A count the file holds, as the user's to edit: one out of any task count's range (json-c
 * reads a huge one as INT64_MAX, where adding one is undefined) starts again from 0. */
static int64_t count(struct json_object *run, const char *key)
{
	int64_t n = ab_json_int(run, key, 0);

	return n >= 0 && n < (int64_t)1 << 32 ? n : 0;
}

/* The task's figure merged into run: counts once per task, the largest peak kept. */
static void merge(struct json_object *run, const struct ab_run_figure *f)
{
	set_int(run, "limit_bytes", (int64_t)f->limit_bytes);
	set_int(run, "batch", f->batch);
	json_object_object_add(run, "measured", json_object_new_string(f->measured));
	set_int(run, "tasks", count(run, "tasks") + (f->first ? 1 : 0));
	set_int(run, "over", count(run, "over") + (f->first_over ? 1 : 0));
	if ((int64_t)f->peak_bytes < ab_json_int(run, "peak_bytes", 0))
		return;
	set_int(run, "peak_bytes", (int64_t)f->peak_bytes);
	set_int(run, "task", f->task);
	json_object_object_add(run, "node", json_object_new_string(f->node ? f->node : ""));
}

int ab_report_add_run(const char *path, const struct ab_run_figure *f, char *err, size_t errlen)
{
	struct json_object *j = NULL, *run;
	char copy[PATH_MAX], name[NAME_MAX + 1];
	int fd, dirfd = -1, rc;

	if (ab_format(copy, sizeof(copy), "%s", path) < 0)
		return ab_fail(err, errlen, ENAMETOOLONG, "%s: path too long", path);
	snprintf(name, sizeof(name), "%s", basename(copy));
	snprintf(copy, sizeof(copy), "%s", path);
	if ((fd = open_locked(path, err, errlen)) < 0)
		return fd;
	if (!(j = read_json(fd))) {
		rc = ab_fail(err, errlen, EINVAL, "%s is not a JSON report", path);
		goto fail;
	}
	if (!json_object_object_get_ex(j, "real_run", &run) ||
	    !json_object_is_type(run, json_type_object)) {
		run = json_object_new_object();
		json_object_object_add(j, "real_run", run);
	}
	merge(run, f);
	if ((dirfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		rc = ab_fail(err, errlen, errno, "cannot open %s's directory: %s", path, strerror(errno));
		goto fail;
	}
	rc = ab_file_replace(dirfd, name, json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
			     0644, path, err, errlen);
fail:
	if (dirfd >= 0)
		close(dirfd);
	json_object_put(j);
	close(fd); /* the lock goes with it, after the rename */
	return rc;
}
