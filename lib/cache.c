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

int ab_cache_path(const char *dir, const struct ab_hash *h, char *path, size_t pathlen,
		  char *err, size_t errlen)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return ab_fail(err, errlen, errno, "cannot create the cache directory %s: %s", dir,
			       strerror(errno));
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return ab_fail(err, errlen, EPERM, "the cache directory %s is not a directory of "
						   "yours",
			       dir);
	if (ab_format(path, pathlen, "%s/%016llx.json", dir, (unsigned long long)h->h) < 0)
		return ab_fail(err, errlen, ENAMETOOLONG, "cache path too long");
	return 0;
}

int ab_cache_load(const char *path, char **json)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	ssize_t n;
	char *buf;

	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > AB_CACHE_MAX_BYTES ||
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

int ab_cache_store(const char *path, const char *json, char *err, size_t errlen)
{
	char tmp[4200];
	size_t len = strlen(json);
	int fd, rc = 0;

	if (ab_format(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid()) < 0)
		return ab_fail(err, errlen, ENAMETOOLONG, "cache path too long");
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return ab_fail(err, errlen, errno, "cannot write the cache entry %s: %s", tmp,
			       strerror(errno));
	if (write(fd, json, len) != (ssize_t)len || fsync(fd) < 0)
		rc = errno ? -errno : -EIO;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0) {
		unlink(tmp);
		return ab_fail(err, errlen, -rc, "cannot write the cache entry %s: %s", path,
			       strerror(-rc));
	}
	return 0;
}

int ab_cache_lock(const char *path, double timeout_s)
{
	struct timespec pause = {0, 50 * 1000 * 1000};
	char lock[4200];
	int fd;

	if (ab_format(lock, sizeof(lock), "%s.lock", path) < 0)
		return -ENAMETOOLONG;
	fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	for (double waited = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; waited += 0.05) {
		if ((errno != EWOULDBLOCK && errno != EINTR) || waited >= timeout_s) {
			close(fd);
			return -ETIMEDOUT;
		}
		nanosleep(&pause, NULL);
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
