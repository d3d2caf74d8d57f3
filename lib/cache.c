/* cache.c - see cache.h. FNV-1a is enough: the key only has to tell configurations of one
 * user apart, and an entry is checked (it must parse as a report) before it is trusted.
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

void ab_hash_init(struct ab_hash *h)
{
	h->h = 0xcbf29ce484222325ULL;
}

void ab_hash_add(struct ab_hash *h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++) {
		h->h ^= p[i];
		h->h *= 0x100000001b3ULL;
	}
}

void ab_hash_str(struct ab_hash *h, const char *s)
{
	uint64_t len = s ? strlen(s) : UINT64_MAX;

	ab_hash_add(h, &len, sizeof(len));
	if (s)
		ab_hash_add(h, s, strlen(s));
}

int ab_hash_config(struct ab_hash *h, const struct ab_config *cfg, const char *const keys[],
		   size_t nkeys)
{
	size_t pos = 0;

	/* the values' spans, in file order, are skipped */
	for (;;) {
		const struct ab_node *next = NULL, *n;

		for (size_t i = 0; i < nkeys; i++)
			if (keys[i] && ab_config_find(cfg, keys[i], -1, &n, NULL, 0) == 0 &&
			    n->start >= pos && (!next || n->start < next->start))
				next = n;
		if (!next)
			break;
		ab_hash_add(h, cfg->buf + pos, next->start - pos);
		ab_hash_add(h, "", 1); /* where a value was */
		pos = next->end;
	}
	ab_hash_add(h, cfg->buf + pos, cfg->len - pos);
	return 0;
}

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
