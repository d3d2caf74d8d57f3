/* trial_files.c - the files of exec-mode trials (see trial_files.h). Everything under
 * $TMPDIR, which other users share: opened relative to a directory, never following links.
 */
#include "trial_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

/* ---- the probe's work directory ---------------------------------------------------- */

/* Empties the directory fd (opened O_NOFOLLOW; closed here), depth first, never following a
 * link; entry types come from fstatat, so file systems without d_type are emptied too. */
static void empty_dir(int fd)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;
	struct stat st;

	if (!d) {
		close(fd);
		return;
	}
	while ((e = readdir(d))) {
		int sub;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode)) {
			sub = openat(dirfd(d), e->d_name,
				     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				empty_dir(sub);
			unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
		} else {
			unlinkat(dirfd(d), e->d_name, 0);
		}
	}
	closedir(d);
}

/* Removes parent/name when it is a directory of ours, judged on the opened directory, so a
 * name swapped for a link meanwhile (a shared $TMPDIR) leads nowhere. */
static void remove_at(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return;
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
		close(fd);
		return;
	}
	empty_dir(fd);
	unlinkat(parent, name, AT_REMOVEDIR);
}

void ab_trial_tree_remove(const char *path)
{
	char a[PATH_MAX], b[PATH_MAX];
	int parent;

	if (ab_copy(a, sizeof(a), path) < 0 || ab_copy(b, sizeof(b), path) < 0)
		return;
	if ((parent = open(dirname(a), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return;
	remove_at(parent, basename(b));
	close(parent);
}

/* This host's name as work directories carry it: a $TMPDIR shared between nodes holds other
 * hosts' probes, whose pids mean nothing here. */
static void host_name(char *buf, size_t len)
{
	if (gethostname(buf, len) < 0 || !buf[0])
		snprintf(buf, len, "localhost");
	buf[len - 1] = '\0';
	for (char *p = buf; *p; p++)
		if (*p == '/' || *p == '.')
			*p = '_';
}

/* The mark of a work directory kept on purpose, which no probe removes. */
#define KEPT_MARK "kept"

static bool kept(int dir)
{
	struct stat st;

	return fstatat(dir, KEPT_MARK, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

int ab_workdir_keep(const char *dir)
{
	char path[PATH_MAX];
	int fd;

	if (snprintf(path, sizeof(path), "%s/" KEPT_MARK, dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* Work directories of probes that were killed (nothing could remove them then): ours by
 * owner, host and name, and unlocked: a live probe holds its directory's lock for as long as
 * it runs. Not a pid: a probe in another PID namespace sharing this $TMPDIR (a container, a
 * job's private namespace) has pids that mean nothing here. */
static void remove_stale(const char *tmp, const char *what, const char *host)
{
	int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char prefix[160];
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	struct stat st;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	snprintf(prefix, sizeof(prefix), "%s.%s.", what, host);
	while ((e = readdir(d))) {
		int sub;

		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue;
		/* held while it is emptied: a probe that made it just now finds it gone, not half
		 * empty, and makes another (make_locked); one kept on purpose stays */
		if (fstat(sub, &st) == 0 && st.st_uid == geteuid() && !kept(sub) &&
		    flock(sub, LOCK_EX | LOCK_NB) == 0)
			remove_at(dirfd(d), e->d_name);
		close(sub);
	}
	closedir(d);
}

/* mkdtemp, then the lock; a directory another probe took for stale between the two (it locks
 * what it removes) is gone by then: 0 with the lock, or -EAGAIN to make another. */
static int make_locked(char *dir, int *lock)
{
	struct stat st;

	if (!mkdtemp(dir))
		return -errno;
	if ((*lock = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return errno == ENOENT ? -EAGAIN : -errno;
	if (flock(*lock, LOCK_EX | LOCK_NB) == 0 && fstat(*lock, &st) == 0 && st.st_nlink > 0)
		return 0;
	close(*lock);
	*lock = -1;
	return -EAGAIN;
}

int ab_workdir_create(const char *parent, char *dir, size_t len, int *lock, char *err,
		      size_t errlen)
{
	return ab_workdir_create_as(parent, "autobatch-probe", dir, len, lock, err, errlen);
}

int ab_workdir_create_as(const char *parent, const char *what, char *dir, size_t len, int *lock,
			 char *err, size_t errlen)
{
	const char *tmp = parent ? parent : getenv("TMPDIR");
	char host[128];
	int rc = -EAGAIN;

	*lock = -1;
	tmp = tmp && *tmp == '/' ? tmp : "/tmp";
	host_name(host, sizeof(host));
	remove_stale(tmp, what, host);
	for (int i = 0; i < 5 && rc == -EAGAIN; i++) {
		if (snprintf(dir, len, "%s/%s.%s.%ld.XXXXXX", tmp, what, host, (long)getpid()) >=
		    (int)len)
			rc = -ENAMETOOLONG;
		else
			rc = make_locked(dir, lock);
	}
	if (rc < 0)
		return ab_fail(err, errlen, -rc, "cannot create a directory for trials under %s: %s",
			       tmp, strerror(-rc));
	return 0;
}

/* ---- one trial's files ------------------------------------------------------------- */

static int write_file(const char *path, const char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600), rc = 0;

	if (fd < 0)
		return -errno;
	while (len > 0 && rc == 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n > 0)
			buf += n, len -= (size_t)n;
	}
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* A trial's copy saves at this many times its last step: never, within a trial. */
#define SAVE_PAST 1000

/* The config copy with the trial's batch written by the same editor the plugin uses. */
int ab_trial_config_write(const struct ab_trial_place *t, long batch,
			  const struct ab_trial_files *f, char *err, size_t errlen)
{
	char value[32], note[256], *out = NULL;
	struct ab_config *cfg = NULL;
	/* peak memory does not depend on how many micro-batches are accumulated, a step's time
	 * does: a trial's optimizer step is one micro-batch; and a batch ramp-up would run the
	 * ramp's start, not the trial's batch */
	struct ab_edit e[10] = {{t->key, value}};
	char at[16], save[24], pin[32];
	size_t len, n = 1;
	int rc;

	snprintf(value, sizeof(value), "%ld", batch);
	if ((rc = ab_config_load(t->config, AB_FORMAT_AUTO, &cfg, err, errlen)) < 0)
		return rc;
	if (t->accum_key)
		e[n++] = (struct ab_edit){t->accum_key, "1"};
	if (t->global_key)
		e[n++] = (struct ab_edit){t->global_key, "null"};
	/* the run's other batch, as it will run beside this one */
	snprintf(pin, sizeof(pin), "%ld", t->pin_batch);
	if (t->pin_key)
		e[n++] = (struct ab_edit){t->pin_key, pin};
	if (t->ramp_key)
		e[n++] = (struct ab_edit){t->ramp_key, "false"};
	snprintf(at, sizeof(at), "%d", t->eval_at);
	if (t->eval_key) /* the run's evaluation comes right after the trial's last step */
		e[n++] = (struct ab_edit){t->eval_key, at};
	if (t->save_key) { /* set only beside eval_key (probe/run_config.c) */
		snprintf(save, sizeof(save), "%ld", (long)t->eval_at * SAVE_PAST);
		e[n++] = (struct ab_edit){t->save_key, save};
	}
	/* the program's own step lines into the trial's report (MaxText's metrics_file), and
	 * no checkpoint written into the user's output directory */
	if (t->metrics_key)
		e[n++] = (struct ab_edit){t->metrics_key, f->report};
	if (t->checkpoint_key)
		e[n++] = (struct ab_edit){t->checkpoint_key, "false"};
	rc = ab_config_apply(cfg, e, n, t->document, &out, &len, note,
			     sizeof(note), err, errlen);
	if (rc == 0 && (rc = write_file(f->config, out, len)) < 0)
		ab_fail(err, errlen, -rc, "cannot write the trial's config copy %s: %s", f->config,
			strerror(-rc));
	free(out);
	ab_config_free(cfg);
	return rc;
}

int ab_trial_files_create(const struct ab_trial_place *t, int count, long batch,
			  struct ab_trial_files *f, char *err, size_t errlen)
{

	char name[PATH_MAX];
	int rc;

	memset(f, 0, sizeof(*f));
	snprintf(name, sizeof(name), "%s", t->config ? t->config : "");
	if ((batch > 0 ? ab_format(f->dir, sizeof(f->dir), "%s/trial-%d-batch-%ld", t->workdir,
				   count, batch)
		       : ab_format(f->dir, sizeof(f->dir), "%s/trial-%d-ahead", t->workdir,
				   count)) < 0 ||
	    ab_format(f->report, sizeof(f->report), "%s/report.jsonl", f->dir) < 0 ||
	    ab_format(f->log, sizeof(f->log), "%s/output.log", f->dir) < 0 ||
	    ab_format(f->go, sizeof(f->go), "%s/go", f->dir) < 0 ||
	    (t->config && ab_format(f->config, sizeof(f->config), "%s/%s", f->dir,
				    basename(name)) < 0))
		return ab_fail(err, errlen, ENAMETOOLONG, "the trial directory %s: path too long",
			       t->workdir);
	if (mkdir(f->dir, 0700) < 0)
		return ab_fail(err, errlen, errno, "cannot create %s: %s", f->dir, strerror(errno));
	if ((rc = write_file(f->report, "", 0)) < 0)
		return ab_fail(err, errlen, -rc, "cannot create %s: %s", f->report, strerror(-rc));
	return t->config && batch > 0 ? ab_trial_config_write(t, batch, f, err, errlen) : 0;
}

int ab_trial_release(const struct ab_trial_place *t, long batch, const struct ab_trial_files *f,
		     char *err, size_t errlen)
{
	char tmp[PATH_MAX + 8], value[32];
	int rc;

	if (t->config && (rc = ab_trial_config_write(t, batch, f, err, errlen)) < 0)
		return rc;
	/* whole or absent: the trial reads it as soon as it is there */
	snprintf(value, sizeof(value), "%ld\n", batch);
	snprintf(tmp, sizeof(tmp), "%s.new", f->go);
	if ((rc = write_file(tmp, value, strlen(value))) < 0 || rename(tmp, f->go) < 0)
		return ab_fail(err, errlen, rc < 0 ? -rc : errno, "cannot write %s: %s", f->go,
			       strerror(rc < 0 ? -rc : errno));
	return 0;
}

static bool same_file(const char *path, const struct stat *cfg)
{
	struct stat st;

	return stat(path, &st) == 0 && st.st_dev == cfg->st_dev && st.st_ino == cfg->st_ino;
}

/* The command's words that name the config (by any path, or as --opt=PATH) name the copy. */
static char *replace_word(char *word, const struct stat *cfg, const char *copy, char **owned)
{
	const char *eq = strchr(word, '=');

	if (same_file(word, cfg))
		return (char *)copy;
	if (eq && word[0] == '-' && same_file(eq + 1, cfg) &&
	    asprintf(owned, "%.*s%s", (int)(eq - word + 1), word, copy) > 0)
		return *owned;
	return word;
}

/* WORD sets KEY: KEY=..., +KEY=..., ++KEY=..., --KEY=... or --KEY (its value next). */
static bool sets_key(const char *word, const char *key, size_t klen)
{
	if (!strncmp(word, "--", 2) && !strncmp(word + 2, key, klen))
		return strchr("= \t\n", word[2 + klen]) != NULL; /* '\0' too */
	word += strspn(word, "+") <= 2 ? strspn(word, "+") : 0;
	return !strncmp(word, key, klen) && word[klen] == '=';
}

/* Each word, and each blank-separated token of a word (a shell's command string, as
 * --autobatch-trial-command gives it: sh -c "python train.py cfg.yaml key=4"). */
static const char *token_setting(const char *word, const char *key, size_t klen, size_t *len)
{
	for (const char *t = word; *t; t += *len) {
		t += strspn(t, " \t\n");
		*len = strcspn(t, " \t\n");
		if (*len && sets_key(t, key, klen))
			return t;
	}
	return NULL;
}

int ab_trial_argv_check(char *const *cmd, const char *key, const char *config, char *err,
			size_t errlen)
{
	size_t klen = key ? strlen(key) : 0, len = 0;
	const char *t;

	for (size_t i = 0; klen && cmd[i]; i++)
		if ((t = token_setting(cmd[i], key, klen, &len)))
			return ab_fail(err, errlen, EINVAL,
				       "the command sets %s itself (%.*s): a key=value or --%s "
				       "on the command line wins over %s, so the trials and the "
				       "run would all use that value, not the batch autobatch "
				       "writes; remove it from the command and keep the batch in "
				       "the file",
				       key, (int)(len < 80 ? len : 80), t, key, config);
	return 0;
}

char **ab_trial_argv(char *const *cmd, const char *config, const struct ab_trial_files *f,
		     char **owned)
{
	struct stat cfg;
	size_t n = 0;
	char **argv;

	while (cmd[n])
		n++;
	if (!(argv = calloc(n + 1, sizeof(*argv))))
		return NULL;
	bool have = config && stat(config, &cfg) == 0;

	for (size_t i = 0; i < n; i++) {
		owned[i] = NULL;
		argv[i] = have ? replace_word(cmd[i], &cfg, f->config, &owned[i]) : cmd[i];
	}
	return argv;
}

