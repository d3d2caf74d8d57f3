/* cache.c - see cache.h. An entry is checked (it must parse as a report) before it is
 * trusted; a corrupt one is a miss.
 */
#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "error.h"
#include "file_replace.h"
#include "json_field.h"

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

static int fail_closed(int fd, char *err, size_t errlen, int code, const char *what,
		       const char *dir)
{
	if (fd >= 0)
		close(fd);
	return ab_fail(err, errlen, code, "%s %s", what, dir);
}

/* A directory others share is safe when only its owner (root, or ourselves) can replace
 * what is in it: not writable by group or others, or sticky. */
static bool safe_shared(const struct stat *st)
{
	return S_ISDIR(st->st_mode) && (st->st_uid == 0 || st->st_uid == geteuid()) &&
	       (!(st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_mode & S_ISVTX));
}

/* Ours alone: a directory we own that no one else can enter. */
static bool private_dir(const struct stat *st)
{
	return S_ISDIR(st->st_mode) && st->st_uid == geteuid() && !(st->st_mode & 077);
}

int ab_cache_open_site(const char *site_dir, struct ab_cache *c, char *err, size_t errlen)
{
	char name[32];
	struct stat st;
	int site, fd, e;

	c->fd = -1;
	if (ab_format(c->dir, sizeof(c->dir), "%s/%u", site_dir, (unsigned)getuid()) < 0)
		return ab_fail(err, errlen, ENAMETOOLONG, "cache_dir %s is too long", site_dir);
	if ((site = open(site_dir, DIR_FLAGS)) < 0)
		return ab_fail(err, errlen, errno, "the site cache directory %s cannot be opened "
						   "(%s): the admin must create it, owned by root "
						   "with mode 1777",
			       site_dir, strerror(errno));
	if (fstat(site, &st) < 0 || !safe_shared(&st)) {
		close(site);
		return ab_fail(err, errlen, EPERM,
			       "the site cache directory %s is unsafe (owner uid %u, mode %04o): "
			       "anyone but root could replace other users' entries; the admin "
			       "must make it owned by root with mode 1777",
			       site_dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	}
	snprintf(name, sizeof(name), "%u", (unsigned)getuid());
	if (mkdirat(site, name, 0700) < 0 && errno != EEXIST)
		return fail_closed(site, err, errlen, errno, "cannot create the cache directory",
				   c->dir);
	fd = openat(site, name, DIR_FLAGS);
	e = errno;
	close(site);
	if (fd < 0)
		return ab_fail(err, errlen, EEXIST,
			       "not using the site cache: %s cannot be opened as your directory "
			       "(%s): someone else's, or not a directory; the admin must remove it",
			       c->dir, strerror(e));
	if (fstat(fd, &st) < 0)
		return fail_closed(fd, err, errlen, errno, "cannot read the cache directory", c->dir);
	if (!private_dir(&st)) {
		close(fd);
		/* in a 1777 directory anyone can make anyone's name first, and only its maker or
		 * root can remove it: said with its owner, for the admin */
		return ab_fail(err, errlen, EEXIST,
			       "not using the site cache: someone else's or an open directory is "
			       "at %s (owner uid %u, mode %04o); %s",
			       c->dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
			       st.st_uid == geteuid() ? "make it yours alone: chmod 700 it"
						      : "the admin must remove it");
	}
	c->fd = fd;
	return 0;
}

int ab_cache_open_dir(const char *dir, struct ab_cache *c, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	c->fd = -1;
	if (ab_copy(c->dir, sizeof(c->dir), dir) < 0)
		return ab_fail(err, errlen, ENAMETOOLONG, "the cache directory %s is too long", dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return ab_fail(err, errlen, errno, "cannot create the cache directory %s: %s", dir,
			       strerror(errno));
	fd = open(dir, DIR_FLAGS);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return fail_closed(fd, err, errlen, EPERM,
				   "not using the cache: it is not a directory of yours:", dir);
	c->fd = fd;
	return 0;
}

void ab_cache_close(struct ab_cache *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

void ab_cache_entry_name(const struct ab_hash *h, bool warm, char *name, size_t len)
{
	snprintf(name, len, "%s%016llx.json", warm ? "warm-" : "", (unsigned long long)h->h);
}

/* A file of the directory that is what we wrote: regular, ours, one link. */
static bool own_file(int fd, struct stat *st)
{
	return fstat(fd, st) == 0 && S_ISREG(st->st_mode) && st->st_uid == geteuid() &&
	       st->st_nlink == 1;
}

int ab_cache_load(const struct ab_cache *c, const char *name, char **json)
{
	int fd = openat(c->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	int rc;

	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -errno;
	rc = own_file(fd, &st) && st.st_size <= AB_CACHE_MAX_BYTES
		     ? ab_read_whole(fd, (size_t)st.st_size, json)
		     : -EPROTO;
	close(fd);
	return rc == -ENOMEM ? -EPROTO : rc;
}

int ab_cache_store(const struct ab_cache *c, const char *name, const char *json, char *err,
		   size_t errlen)
{
	char shown[AB_PATH_MAX + AB_CACHE_NAME_MAX + 16];

	snprintf(shown, sizeof(shown), "the cache entry %s/%s", c->dir, name);
	return ab_file_replace(c->fd, name, json, 0600, shown, err, errlen);
}

int ab_cache_lock(const struct ab_cache *c, const char *name, double timeout_s,
		  const volatile sig_atomic_t *stop, void (*tick)(void *), void *tick_arg)
{
	struct timespec pause = {0, 50 * 1000 * 1000};
	char lock[AB_CACHE_NAME_MAX + 8];
	struct stat st;
	int fd;

	snprintf(lock, sizeof(lock), "%s.lock", name);
	fd = openat(c->fd, lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (!own_file(fd, &st)) {
		close(fd);
		return -EPERM;
	}
	for (double waited = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; waited += 0.05) {
		if ((errno != EWOULDBLOCK && errno != EINTR) || waited >= timeout_s ||
		    (stop && *stop)) {
			close(fd);
			return -ETIMEDOUT;
		}
		nanosleep(&pause, NULL);
		if (tick)
			tick(tick_arg);
	}
	return fd;
}

void ab_cache_unlock(int fd)
{
	if (fd >= 0) {
		flock(fd, LOCK_UN);
		close(fd);
	}
}

/* NAME.over, beside entry NAME. */
static void over_name(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s.over", name);
}

/* How long a task's watch waits for another task's mark of the same entry. */
#define MARK_LOCK_S 2.0

int ab_cache_mark_over(const struct ab_cache *c, const char *name,
		       const struct ab_cache_over *o, char *err, size_t errlen)
{
	struct json_object *j;
	struct ab_cache_over had;
	char over[AB_CACHE_NAME_MAX + 8];
	int rc, lock;

	over_name(name, over, sizeof(over));
	/* the tasks of one step mark at once: the largest of their peaks is the evidence (the
	 * next srun's cap), never the last one written */
	lock = ab_cache_lock(c, over, MARK_LOCK_S, NULL, NULL, NULL);
	if (ab_cache_read_over(c, name, &had) == 0 && had.batch == o->batch &&
	    had.peak_bytes >= o->peak_bytes) {
		ab_cache_unlock(lock);
		return 0;
	}
	j = json_object_new_object();
	json_object_object_add(j, "batch", json_object_new_int64(o->batch));
	json_object_object_add(j, "peak_bytes", json_object_new_int64((int64_t)o->peak_bytes));
	json_object_object_add(j, "limit_bytes", json_object_new_int64((int64_t)o->limit_bytes));
	json_object_object_add(j, "task", json_object_new_int64(o->task));
	json_object_object_add(j, "node", json_object_new_string(o->node));
	rc = ab_cache_store(c, over, json_object_to_json_string(j), err, errlen);
	json_object_put(j);
	ab_cache_unlock(lock);
	return rc;
}

int ab_cache_read_over(const struct ab_cache *c, const char *name, struct ab_cache_over *o)
{
	struct json_object *j;
	char over[AB_CACHE_NAME_MAX + 8], *text;
	int64_t batch, task, peak, limit;
	int rc;

	over_name(name, over, sizeof(over));
	if ((rc = ab_cache_load(c, over, &text)) < 0)
		return rc;
	j = json_tokener_parse(text);
	free(text);
	/* absent or mistyped: -1, which the checks below refuse, as they do a negative value */
	batch = ab_json_int(j, "batch", -1), task = ab_json_int(j, "task", -1);
	peak = ab_json_int(j, "peak_bytes", -1), limit = ab_json_int(j, "limit_bytes", -1);
	memset(o, 0, sizeof(*o));
	/* printed in srun's line: a node name of plain characters, or none */
	if (ab_plain_name(ab_json_text(j, "node")))
		snprintf(o->node, sizeof(o->node), "%s", ab_json_text(j, "node"));
	json_object_put(j);
	if (batch < 1 || task < 0 || limit < 1 || peak <= limit)
		return -EPROTO;
	o->batch = batch, o->task = task;
	o->peak_bytes = (uint64_t)peak, o->limit_bytes = (uint64_t)limit;
	return 0;
}

long ab_cache_over_cap(const struct ab_cache_over *o, uint64_t per_sample)
{
	long cap = o->peak_bytes ? (long)((double)o->batch * (double)o->limit_bytes /
					  (double)o->peak_bytes)
				 : o->batch - 1;

	if (per_sample && o->peak_bytes > o->limit_bytes) {
		uint64_t fewer = (o->peak_bytes - o->limit_bytes + per_sample - 1) / per_sample;

		if (fewer >= (uint64_t)o->batch)
			cap = 1;
		else if (o->batch - (long)fewer < cap)
			cap = o->batch - (long)fewer;
	}
	return cap >= o->batch ? o->batch - 1 : cap < 1 ? 1 : cap;
}

void ab_cache_clear_over(const struct ab_cache *c, const char *name)
{
	char over[AB_CACHE_NAME_MAX + 8];

	over_name(name, over, sizeof(over));
	unlinkat(c->fd, over, 0);
}
