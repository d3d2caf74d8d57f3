/* file_replace.c - see file_replace.h. */
#include "file_replace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

int ab_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int ab_read_whole(int fd, size_t size, char **out)
{
	char *buf = malloc(size + 1);
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	if ((n = pread(fd, buf, size, 0)) < 0 || (size_t)n != size) {
		free(buf);
		return -EPROTO;
	}
	buf[size] = '\0';
	*out = buf;
	return 0;
}

/* A new file beside name to write and rename into place: a name no one can guess, so that
 * another user cannot plant it first in a shared (sticky) directory. Its descriptor, or a
 * negative errno. */
static int create_temp(int dirfd, const char *name, mode_t mode, char *tmp, size_t len)
{
	for (int attempt = 0; attempt < 16; attempt++) {
		unsigned long long r;
		int fd;

		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
			r = (unsigned long long)getpid() << 8 | (unsigned)attempt;
		if (ab_format(tmp, len, ".%.200s.%016llx.tmp", name, r) < 0)
			return -ENAMETOOLONG;
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd >= 0 || errno != EEXIST)
			return fd >= 0 ? fd : -errno;
	}
	return -EEXIST;
}

int ab_file_replace(int dirfd, const char *name, const char *text, mode_t mode,
		    const char *shown, char *err, size_t errlen)
{
	char tmp[320];
	struct stat st;
	int fd, rc;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    (!S_ISREG(st.st_mode) || st.st_uid != geteuid()))
		return ab_fail(err, errlen, EEXIST, "%s exists and is not a regular file of yours: "
						    "it was left alone",
			       shown);
	if ((fd = create_temp(dirfd, name, mode, tmp, sizeof(tmp))) == -ENAMETOOLONG)
		return ab_fail(err, errlen, ENAMETOOLONG, "%s: name too long", shown);
	if (fd < 0)
		return ab_fail(err, errlen, -fd, "cannot write %s: %s", shown, strerror(-fd));
	rc = ab_write_all(fd, text, strlen(text));
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		rc = -errno;
	if (rc < 0) {
		unlinkat(dirfd, tmp, 0);
		return ab_fail(err, errlen, -rc, "cannot write %s: %s", shown, strerror(-rc));
	}
	return 0;
}
