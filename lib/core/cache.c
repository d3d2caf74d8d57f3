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

#include "error.h"
#include "file_replace.h"

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
	int site, fd;

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
	close(site);
	if (fd < 0 || fstat(fd, &st) < 0 || !private_dir(&st))
		return fail_closed(fd, err, errlen, EPERM,
				   "not using the cache: someone else's or an open directory is at",
				   c->dir);
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
	ssize_t n;
	char *buf;

	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -errno;
	if (!own_file(fd, &st) || st.st_size > AB_CACHE_MAX_BYTES ||
	    !(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return -EPROTO;
	}
	n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n != st.st_size) {
		free(buf);
		return -EPROTO;
	}
	buf[n] = '\0';
	*json = buf;
	return 0;
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
