/* config_file.c - reading a config and rewriting it safely: under an advisory lock on its
 * directory, through a temp file that is fsync'ed and renamed, with the old bytes kept.
 *
 * Symlinks: a link to a file in the same directory is followed; a link elsewhere only when it
 * ends at a regular file the caller owns (so nobody is tricked into rewriting a file they
 * merely can write). The rename then replaces the link's target, and the link stays.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "config_edit.h"
#include "error.h"
#include "file_replace.h"
#include "fingerprint.h"

#define BACKUP_SUFFIX ".autobatch~"
#define LOCK_WAIT_MS 10000

static int read_fd(int fd, const char *name, char **out, size_t *outlen, char *err,
		   size_t errlen)
{
	struct stat st;
	size_t len = 0;
	char *buf;
	ssize_t n;

	if (fstat(fd, &st) < 0)
		return ab_fail(err, errlen, errno, "%s: %s", name, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return ab_fail(err, errlen, EINVAL, "%s is not a regular file: give the config "
						    "file itself",
			       name);
	if ((size_t)st.st_size > AB_CONFIG_MAX_BYTES)
		return ab_fail(err, errlen, EFBIG, "%s is %lld bytes, more than the %u a config "
						   "may have: is it the right file?",
			       name, (long long)st.st_size, AB_CONFIG_MAX_BYTES);
	if (!(buf = malloc((size_t)st.st_size + 1)))
		return ab_fail(err, errlen, ENOMEM, "%s: out of memory", name);
	while ((n = read(fd, buf + len, (size_t)st.st_size - len)) > 0)
		len += (size_t)n;
	if (n < 0) {
		free(buf);
		return ab_fail(err, errlen, errno, "reading %s: %s", name, strerror(errno));
	}
	*out = buf;
	*outlen = len;
	return 0;
}

int ab_config_load(const char *path, enum ab_format format, struct ab_config **out, char *err,
		   size_t errlen)
{
	/* O_NONBLOCK: a FIFO in the config's place is refused, not waited on */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), rc;
	char *buf = NULL;
	size_t len = 0;

	if (fd < 0)
		return ab_fail(err, errlen, errno, "cannot read %s: %s", path, strerror(errno));
	rc = read_fd(fd, path, &buf, &len, err, errlen);
	close(fd);
	if (rc == 0)
		rc = ab_config_parse(path, buf, len, format, out, err, errlen);
	free(buf);
	return rc;
}

/* ---- where to write ---------------------------------------------------------------- */

struct target {
	char dir[PATH_MAX];  /* directory holding the file that is really rewritten */
	char base[NAME_MAX + 1];
	int dirfd;
};

static int split(const char *path, struct target *t)
{
	char a[PATH_MAX], b[PATH_MAX];

	if (ab_copy(a, sizeof(a), path) < 0 || ab_copy(b, sizeof(b), path) < 0)
		return -ENAMETOOLONG;
	if (ab_copy(t->dir, sizeof(t->dir), dirname(a)) < 0 ||
	    ab_copy(t->base, sizeof(t->base), basename(b)) < 0)
		return -ENAMETOOLONG;
	return 0;
}

static int follow_link(const char *path, struct target *t, char *err, size_t errlen)
{
	char real[PATH_MAX], realdir[PATH_MAX], named[PATH_MAX];
	struct stat st, link = {0};

	if (!realpath(path, real))
		return ab_fail(err, errlen, errno, "%s is a symlink that cannot be followed: %s",
			       path, strerror(errno));
	if (split(real, t) < 0 || !realpath(t->dir, realdir))
		return ab_fail(err, errlen, ENAMETOOLONG, "%s: path too long", path);
	if (split(path, t) < 0 || !realpath(t->dir, named))
		return ab_fail(err, errlen, errno, "%s: %s", path, strerror(errno));
	if (strcmp(realdir, named) != 0 &&
	    (stat(real, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()))
		return ab_fail(err, errlen, EPERM,
			       "%s is a symlink to %s, outside its directory, and that is not a "
			       "regular file of yours: autobatch will not rewrite it; give the "
			       "real file",
			       path, real);
	/* Root owns every file: "of yours" proves nothing. A link counts only where whoever
	 * made it owns what it points to (the kernel's protected_symlinks rule). */
	if (geteuid() == 0 && (lstat(path, &link) < 0 || stat(real, &st) < 0 ||
			       link.st_uid != st.st_uid))
		return ab_fail(err, errlen, EPERM,
			       "%s is a symlink made by uid %u to %s, which uid %u owns: as root, "
			       "autobatch rewrites through a symlink only when the link's owner "
			       "owns the file; give the real file",
			       path, (unsigned)link.st_uid, real, (unsigned)st.st_uid);
	return split(real, t) < 0 ? ab_fail(err, errlen, ENAMETOOLONG, "%s: path too long", path)
				  : 0;
}

static int open_target(const char *path, struct target *t, char *err, size_t errlen)
{
	struct stat st;
	int rc;

	if (lstat(path, &st) < 0)
		return ab_fail(err, errlen, errno, "cannot open %s: %s", path, strerror(errno));
	rc = S_ISLNK(st.st_mode) ? follow_link(path, t, err, errlen) : split(path, t);
	if (rc == -ENAMETOOLONG)
		return ab_fail(err, errlen, ENAMETOOLONG, "%s: path too long", path);
	if (rc < 0)
		return rc;
	t->dirfd = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd < 0)
		return ab_fail(err, errlen, errno, "cannot open the directory of %s: %s", path,
			       strerror(errno));
	return 0;
}

/* Two autobatch writers in one directory take turns; a stuck one does not hang us. */
static int lock_dir(const struct target *t, const char *path, char *err, size_t errlen)
{
	struct timespec pause = {0, 20 * 1000 * 1000};

	for (int waited = 0; flock(t->dirfd, LOCK_EX | LOCK_NB) < 0; waited += 20) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return ab_fail(err, errlen, errno, "cannot lock the directory of %s: %s",
				       path, strerror(errno));
		if (waited >= LOCK_WAIT_MS)
			return ab_fail(err, errlen, EBUSY, "another process has been editing files "
							   "beside %s for %d s; try again",
				       path, LOCK_WAIT_MS / 1000);
		nanosleep(&pause, NULL);
	}
	return 0;
}

/* ---- writing ----------------------------------------------------------------------- */

static int write_failed(const char *what, const char *path, const struct target *t, int rc,
			char *err, size_t errlen)
{
	if (rc == -EACCES || rc == -EROFS || rc == -EPERM)
		return ab_fail(err, errlen, -rc,
			       "cannot write %s beside %s: %s: %s was not changed; autobatch needs "
			       "to create files in %s",
			       what, path, strerror(-rc), path, t->dir);
	return ab_fail(err, errlen, -rc, "writing %s beside %s: %s: %s was not changed", what,
		       path, strerror(-rc), path);
}

/* Writes bytes to a new temp file beside the target (tmp names it), with the original's
 * mode and owner, synced. Nothing is left behind on failure. */
static int stage(const struct target *t, const char *buf, size_t len, const struct stat *st,
		 char tmp[NAME_MAX + 1])
{
	int fd = -1, rc;

	for (int attempt = 0; fd < 0 && attempt < 100; attempt++) {
		snprintf(tmp, NAME_MAX + 1, ".%.200s.autobatch.%ld.%d", t->base, (long)getpid(),
			 attempt);
		fd = openat(t->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	rc = ab_write_all(fd, buf, len);
	if (rc == 0 && (st->st_uid != geteuid() || st->st_gid != getegid()) &&
	    fchown(fd, st->st_uid, st->st_gid) < 0)
		rc = -errno;
	if (rc == 0 && fchmod(fd, st->st_mode & 07777) < 0)
		rc = -errno;
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc < 0)
		unlinkat(t->dirfd, tmp, 0);
	return rc;
}

/* Both files are written in full before either is renamed into place: a full disk or a
 * failing write leaves the directory as it was, without a stray backup or temp file. */
static int replace_both(const struct target *t, const char *backup, const char *old,
			size_t oldlen, const char *new, size_t newlen, const struct stat *st,
			const char *path, char *err, size_t errlen)
{
	char tmp_new[NAME_MAX + 1], tmp_old[NAME_MAX + 1];
	int rc;

	if ((rc = stage(t, new, newlen, st, tmp_new)) < 0)
		return write_failed("the new file", path, t, rc, err, errlen);
	if ((rc = stage(t, old, oldlen, st, tmp_old)) < 0) {
		unlinkat(t->dirfd, tmp_new, 0);
		return write_failed("the backup", path, t, rc, err, errlen);
	}
	if (renameat(t->dirfd, tmp_old, t->dirfd, backup) < 0) {
		rc = -errno;
		unlinkat(t->dirfd, tmp_old, 0);
		unlinkat(t->dirfd, tmp_new, 0);
		return write_failed("the backup", path, t, rc, err, errlen);
	}
	if (renameat(t->dirfd, tmp_new, t->dirfd, t->base) < 0) {
		rc = -errno;
		unlinkat(t->dirfd, tmp_new, 0);
		return write_failed("the new file", path, t, rc, err, errlen);
	}
	return 0;
}

static bool in_group(gid_t gid)
{
	gid_t groups[256];
	int n = getgroups(256, groups);

	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

static int check_writable(const struct target *t, const char *path, const struct stat *st,
			  char *err, size_t errlen)
{
	struct stat dir;

	/* Root passes access(2) on a 0444 file; the mode bits still say "do not edit". */
	if ((st->st_mode & 0222) == 0 || faccessat(t->dirfd, t->base, W_OK, AT_EACCESS) < 0)
		return ab_fail(err, errlen, EACCES, "%s is read-only: nothing was changed; make it "
						    "writable (chmod u+w) or give a copy",
			       path);
	/* the new file and the backup are created beside it: the same rule for its directory */
	if (fstat(t->dirfd, &dir) < 0 || (dir.st_mode & 0222) == 0 ||
	    faccessat(t->dirfd, ".", W_OK, AT_EACCESS) < 0)
		return ab_fail(err, errlen, EACCES, "the directory %s of %s is read-only: nothing "
						    "was changed; autobatch writes the new file and "
						    "a backup beside the config (or give a copy "
						    "elsewhere)",
			       t->dir, path);
	/* The new file keeps the config's owner, which only that owner or root can give it. */
	if (st->st_uid != geteuid() && geteuid() != 0)
		return ab_fail(err, errlen, EPERM, "%s belongs to uid %u, not to you (uid %u): "
						   "autobatch rewrites a file with its owner kept, "
						   "which only that user can do; nothing was changed; "
						   "give a copy of your own",
			       path, (unsigned)st->st_uid, (unsigned)geteuid());
	if (st->st_gid != getegid() && geteuid() != 0 && !in_group(st->st_gid))
		return ab_fail(err, errlen, EPERM, "%s belongs to group %u, which you are not in: "
						   "autobatch rewrites a file with its group kept; "
						   "nothing was changed; give a copy of your own",
			       path, (unsigned)st->st_gid);
	return 0;
}

/* The rewrite is a new file renamed into place: what belonged to the old inode stays with
 * it. Said in note, so the user hears it. */
static void lost_on_rename(const char *path, const struct stat *st, bool xattrs, char *note,
			   size_t notelen)
{
	size_t len = notelen ? strlen(note) : 0;

	if (st->st_nlink > 1)
		ab_append(note, notelen, &len, "%s%s had %lu hard links: the other names keep the "
					       "old contents",
			  len ? "; " : "", path, (unsigned long)st->st_nlink);
	if (xattrs)
		ab_append(note, notelen, &len, "%s%s had extended attributes (an ACL?): the new "
					       "file does not have them",
			  len ? "; " : "", path);
}

int ab_config_expect_dir(const char *real, struct ab_expect *out)
{
	char copy[PATH_MAX];
	struct stat st;

	if (ab_copy(copy, sizeof(copy), real) < 0)
		return -ENAMETOOLONG;
	if (stat(dirname(copy), &st) < 0)
		return -errno;
	out->dir_dev = st.st_dev;
	out->dir_ino = st.st_ino;
	return 0;
}

void ab_config_expect(const struct ab_config *cfg, const char *const *keys, size_t nkeys,
		      struct ab_expect *out)
{
	struct ab_hash h;

	*out = (struct ab_expect){.keys = keys, .nkeys = nkeys};
	ab_hash_init(&h);
	ab_hash_config(&h, cfg, keys, nkeys);
	out->fingerprint = h.h;
	ab_hash_init(&h);
	ab_hash_config_values(&h, cfg, keys, nkeys);
	out->values = h.h;
}

static int rewrite(const struct target *t, const char *path, enum ab_format format,
		   const struct ab_edit *edits, size_t n, int document,
		   const struct ab_expect *expect, char *note, size_t notelen, char *err,
		   size_t errlen)
{
	struct ab_config *cfg = NULL;
	struct ab_expect now = {0};
	char *old = NULL, *new = NULL, backup[NAME_MAX + 1];
	size_t oldlen = 0, newlen = 0;
	struct stat st;
	int fd, rc;
	bool xattrs;

	fd = openat(t->dirfd, t->base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return ab_fail(err, errlen, errno, "cannot read %s: %s", path, strerror(errno));
	xattrs = flistxattr(fd, NULL, 0) > 0;
	rc = fstat(fd, &st) < 0 ? ab_fail(err, errlen, errno, "%s: %s", path, strerror(errno))
				: read_fd(fd, path, &old, &oldlen, err, errlen);
	close(fd);
	if (rc == 0)
		rc = ab_config_parse(path, old, oldlen, format, &cfg, err, errlen);
	if (rc == 0 && expect)
		ab_config_expect(cfg, expect->keys, expect->nkeys, &now);
	if (rc == 0 && expect && now.fingerprint != expect->fingerprint)
		rc = ab_fail(err, errlen, ESTALE, "%s changed while autobatch was probing: nothing "
						  "was written and your edit is kept; run again to probe "
						  "the new file",
			     path);
	if (rc == 0)
		rc = ab_config_apply(cfg, edits, n, document, &new, &newlen, note, notelen, err,
				     errlen);
	if (rc < 0 || (newlen == oldlen && memcmp(new, old, oldlen) == 0))
		goto done; /* same bytes: no write, no backup */
	/* an identical srun's decision is ours (same bytes, above); another value written
	 * meanwhile is another step's, whose tasks may be reading it now */
	if (expect && now.values != expect->values) {
		rc = ab_fail(err, errlen, ENOTUNIQ, "%s's batch was rewritten by another srun while "
						    "autobatch was probing (a step sizing the same "
						    "file for another command or fraction?): nothing "
						    "was written; give each such step its own config "
						    "file",
			     path);
		goto done;
	}
	if ((rc = check_writable(t, path, &st, err, errlen)) < 0)
		goto done;
	if (snprintf(backup, sizeof(backup), "%s%s", t->base, BACKUP_SUFFIX) >=
	    (int)sizeof(backup)) {
		rc = ab_fail(err, errlen, ENAMETOOLONG, "%s: name too long for a backup", path);
		goto done;
	}
	if ((rc = replace_both(t, backup, old, oldlen, new, newlen, &st, path, err, errlen)) < 0)
		goto done;
	fsync(t->dirfd);
	lost_on_rename(path, &st, xattrs, note, notelen);
	rc = 1;
done:
	ab_config_free(cfg);
	free(old);
	free(new);
	return rc;
}

int ab_config_file_writable(const char *path, char *err, size_t errlen)
{
	struct target t = {.dirfd = -1};
	struct stat st;
	int rc;

	if ((rc = open_target(path, &t, err, errlen)) < 0)
		return rc;
	if (fstatat(t.dirfd, t.base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = ab_fail(err, errlen, errno, "cannot open %s: %s", path, strerror(errno));
	else
		rc = check_writable(&t, path, &st, err, errlen);
	close(t.dirfd);
	return rc;
}

int ab_config_set_file(const char *path, enum ab_format format, const struct ab_edit *edits,
		       size_t n, int document, char *note, size_t notelen, char *err,
		       size_t errlen)
{
	int rc = ab_config_set_file_expect(path, format, edits, n, document, NULL, note, notelen,
					   err, errlen);

	return rc > 0 ? 0 : rc;
}

/* The directory open is the one the decision read the file in, where that is known. */
static int same_dir(const struct target *t, const struct ab_expect *expect, const char *path,
		    char *err, size_t errlen)
{
	struct stat st;

	if (!expect || !expect->dir_ino)
		return 0;
	if (fstat(t->dirfd, &st) < 0)
		return ab_fail(err, errlen, errno, "%s: %s", t->dir, strerror(errno));
	if (st.st_dev != expect->dir_dev || st.st_ino != expect->dir_ino)
		return ab_fail(err, errlen, ESTALE, "the directory %s of %s is not the one "
						    "autobatch read it in (moved or replaced while it "
						    "probed): nothing was written; run again",
			       t->dir, path);
	return 0;
}

int ab_config_set_file_expect(const char *path, enum ab_format format,
			      const struct ab_edit *edits, size_t n, int document,
			      const struct ab_expect *expect, char *note, size_t notelen,
			      char *err, size_t errlen)
{
	struct target t = {.dirfd = -1};
	int rc;

	if (notelen)
		note[0] = '\0';
	if ((rc = open_target(path, &t, err, errlen)) < 0)
		return rc;
	if ((rc = same_dir(&t, expect, path, err, errlen)) == 0 &&
	    (rc = lock_dir(&t, path, err, errlen)) == 0) {
		rc = rewrite(&t, path, format, edits, n, document, expect, note, notelen, err,
			     errlen);
		flock(t.dirfd, LOCK_UN);
	}
	close(t.dirfd);
	return rc;
}
