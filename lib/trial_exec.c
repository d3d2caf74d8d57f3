/* trial_exec.c - exec-mode trials (see trial_exec.h). A crash that is not an OOM is an
 * error that stops the search, never a "does not fit"; the trial's output tail says why.
 */
#include "trial_exec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "clock.h"
#include "trial_report.h"

#define POLL_MS 20
#define LOG_SCAN_BYTES (64 * 1024)
#define TAIL_LINES 8

static char workdir[PATH_MAX];


bool ab_text_says_oom(const char *text, size_t len)
{
	static const char *const needles[] = {
		"CUDA out of memory", "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation",
		"RESOURCE_EXHAUSTED", "OutOfMemoryError", "OOM when allocating",
		"DefaultCPUAllocator: can't allocate memory", "std::bad_alloc", "MemoryError",
		"out of memory",
	};

	for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); i++)
		if (memmem(text, len, needles[i], strlen(needles[i])))
			return true;
	return false;
}

static void remove_tree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char child[PATH_MAX];

	if (!d) {
		unlink(path);
		return;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    snprintf(child, sizeof(child), "%s/%s", path, e->d_name) < (int)sizeof(child)) {
			if (e->d_type == DT_DIR)
				remove_tree(child);
			else
				unlink(child);
		}
	closedir(d);
	rmdir(path);
}

/* Work directories of probes that were killed (nothing could remove them then): ours by
 * owner and name, their probe's pid gone. A reused pid only delays the removal. */
static void remove_stale(const char *tmp)
{
	DIR *d = opendir(tmp);
	struct dirent *e;
	char path[PATH_MAX];
	struct stat st;
	long pid;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (sscanf(e->d_name, "autobatch-probe.%ld.", &pid) == 1 && pid > 0 &&
		    kill((pid_t)pid, 0) < 0 && errno == ESRCH &&
		    snprintf(path, sizeof(path), "%s/%s", tmp, e->d_name) < (int)sizeof(path) &&
		    lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid())
			remove_tree(path);
	closedir(d);
}

int ab_exec_init(struct ab_exec *x, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	struct ab_config *cfg;
	const struct ab_node *n;

	if (!x->argv || !x->argv[0])
		return ab_fail(err, errlen, EINVAL, "exec mode needs a command after --");
	if (x->config) {
		if (!x->key)
			return ab_fail(err, errlen, EINVAL, "a config needs a batch key: --key KEY "
							    "or a preset");
		if (ab_config_load(x->config, AB_FORMAT_AUTO, &cfg, err, errlen) < 0)
			return -EINVAL;
		int rc = ab_config_find(cfg, x->key, x->document, &n, err, errlen);

		ab_config_free(cfg);
		if (rc < 0)
			return rc;
	}
	tmp = tmp && *tmp == '/' ? tmp : "/tmp";
	remove_stale(tmp);
	if (snprintf(workdir, sizeof(workdir), "%s/autobatch-probe.%ld.XXXXXX", tmp,
		     (long)getpid()) >= (int)sizeof(workdir) ||
	    !mkdtemp(workdir))
		return ab_fail(err, errlen, errno ? errno : ENAMETOOLONG,
			       "cannot create a directory for trials under %s: %s", tmp,
			       strerror(errno));
	x->workdir = workdir;
	/* A trial's children that leave its process group (setsid) are re-parented to us,
	 * not to init, so none outlives its trial. */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	return 0;
}

void ab_exec_cleanup(struct ab_exec *x)
{
	if (x->workdir && !x->keep)
		remove_tree(x->workdir);
	x->workdir = NULL;
}

/* ---- one trial's files ------------------------------------------------------------- */

struct files {
	char dir[PATH_MAX];
	char report[PATH_MAX];
	char log[PATH_MAX];
	char config[PATH_MAX]; /* the private copy, or "" */
};

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

/* The config copy with the trial's batch written by the same editor the plugin uses. */
static int copy_config(const struct ab_exec *x, long batch, struct files *f, char *err,
		       size_t errlen)
{
	char name[PATH_MAX], value[32], note[256], *out = NULL;
	struct ab_config *cfg = NULL;
	struct ab_edit e = {x->key, value};
	size_t len;
	int rc;

	snprintf(value, sizeof(value), "%ld", batch);
	snprintf(name, sizeof(name), "%s", x->config);
	if (ab_format(f->config, sizeof(f->config), "%s/%s", f->dir, basename(name)) < 0)
		return ab_fail(err, errlen, ENAMETOOLONG, "%s: path too long", x->config);
	if ((rc = ab_config_load(x->config, AB_FORMAT_AUTO, &cfg, err, errlen)) < 0)
		return rc;
	rc = ab_config_apply(cfg, &e, 1, x->document, &out, &len, note, sizeof(note), err, errlen);
	if (rc == 0 && (rc = write_file(f->config, out, len)) < 0)
		ab_fail(err, errlen, -rc, "cannot write the trial's config copy %s: %s", f->config,
			strerror(-rc));
	free(out);
	ab_config_free(cfg);
	return rc;
}

static int prepare(struct ab_exec *x, long batch, struct files *f, char *err, size_t errlen)
{
	int rc;

	memset(f, 0, sizeof(*f));
	if (ab_format(f->dir, sizeof(f->dir), "%s/trial-%d-batch-%ld", x->workdir, ++x->count,
		      batch) < 0 ||
	    ab_format(f->report, sizeof(f->report), "%s/report.jsonl", f->dir) < 0 ||
	    ab_format(f->log, sizeof(f->log), "%s/output.log", f->dir) < 0)
		return ab_fail(err, errlen, ENAMETOOLONG, "the trial directory %s: path too long",
			       x->workdir);
	if (mkdir(f->dir, 0700) < 0)
		return ab_fail(err, errlen, errno, "cannot create %s: %s", f->dir, strerror(errno));
	if ((rc = write_file(f->report, "", 0)) < 0)
		return ab_fail(err, errlen, -rc, "cannot create %s: %s", f->report, strerror(-rc));
	return x->config ? copy_config(x, batch, f, err, errlen) : 0;
}

/* ---- running ----------------------------------------------------------------------- */

static void child(const struct ab_exec *x, long batch, const struct files *f, char **argv)
{
	char value[32];
	sigset_t none;
	int logfd = open(f->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	setpgid(0, 0);
	/* the probe killed (SIGKILL, a cancelled step): the trial goes with it */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() == 1)
		_exit(126);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	if (logfd < 0 || null < 0 || dup2(null, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
		_exit(126);
	snprintf(value, sizeof(value), "%ld", batch);
	setenv("AUTOBATCH_TRIAL", "1", 1);
	setenv("AUTOBATCH_BATCH_SIZE", value, 1);
	snprintf(value, sizeof(value), "%d", x->steps);
	setenv("AUTOBATCH_TRIAL_STEPS", value, 1);
	setenv("AUTOBATCH_TRIAL_REPORT", f->report, 1);
	setenv("AUTOBATCH_TRIAL_PHASE", x->phase, 1);
	if (f->config[0])
		setenv("AUTOBATCH_CONFIG", f->config, 1);
	execvp(argv[0], argv);
	dprintf(2, "autobatch-probe: cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* A process's parent, process group and resident pages, from /proc/PID/stat. */
static int read_stat(const char *pid, long *ppid, long *pgrp, long *rss)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%.20s/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* after "pid (comm)", which may hold anything: state ppid pgrp ... rss is field 24 */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %ld %ld %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
			  "%*d %*d %*u %*u %ld",
		   ppid, pgrp, rss) != 3)
		return -1;
	return 0;
}

/* Resident memory of every process in the group (the trial may fork workers) when pgid is
 * positive; with pgid 0, kills and reaps every child of ours instead: after a trial, those
 * are its descendants that escaped the group (we are their subreaper). */
static uint64_t scan_processes(pid_t pgid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	uint64_t total = 0, page = (uint64_t)sysconf(_SC_PAGESIZE);
	long ppid, pgrp, rss;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9' ||
		    read_stat(e->d_name, &ppid, &pgrp, &rss) < 0)
			continue;
		if (pgid > 0 && pgrp == pgid && rss > 0)
			total += (uint64_t)rss * page;
		if (pgid == 0 && ppid == (long)getpid()) {
			kill((pid_t)atol(e->d_name), SIGKILL);
			waitpid((pid_t)atol(e->d_name), NULL, 0);
		}
	}
	closedir(d);
	return total;
}

struct outcome {
	int status;
	bool timed_out, over_capacity, interrupted;
	uint64_t rss_peak, gpu_peak;
	double seconds;
};

static void wait_trial(const struct ab_exec *x, pid_t pid, struct outcome *o)
{
	struct timespec pause = {0, POLL_MS * 1000 * 1000};
	double start = ab_now();
	struct rusage ru;
	bool killed = false;

	memset(&ru, 0, sizeof(ru));
	for (;;) {
		pid_t r = wait4(pid, &o->status, killed ? 0 : WNOHANG, &ru);

		if (r == pid || (r < 0 && errno != EINTR))
			break;
		if (killed)
			continue;
		if (x->peak_source == AB_PEAK_FROM_RSS) {
			uint64_t rss = scan_processes(pid);

			o->rss_peak = rss > o->rss_peak ? rss : o->rss_peak;
			o->over_capacity = rss > x->capacity;
		}
		if (x->peak_source == AB_PEAK_FROM_GPU && x->gpu_usage) {
			uint64_t used = x->gpu_usage(x->gpu_arg, pid);

			o->gpu_peak = used > o->gpu_peak ? used : o->gpu_peak;
			o->over_capacity = used > x->capacity;
		}
		o->interrupted = x->interrupted && *x->interrupted;
		o->timed_out = ab_now() - start > x->trial_seconds;
		if (o->over_capacity || o->interrupted || o->timed_out) {
			kill(-pid, SIGKILL);
			killed = true;
			continue;
		}
		nanosleep(&pause, NULL);
	}
	kill(-pid, SIGKILL); /* no child of the trial outlives it */
	scan_processes(0);
	o->seconds = ab_now() - start;
	if ((uint64_t)ru.ru_maxrss * 1024 > o->rss_peak)
		o->rss_peak = (uint64_t)ru.ru_maxrss * 1024;
}

/* ---- judging ----------------------------------------------------------------------- */

static size_t read_tail(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	off_t end;
	ssize_t n;

	if (fd < 0)
		return 0;
	end = lseek(fd, 0, SEEK_END);
	lseek(fd, end > (off_t)size - 1 ? end - (off_t)size + 1 : 0, SEEK_SET);
	n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n > 0 ? (size_t)n : 0;
}

/* The last lines of the trial's output, made printable, one per "\n  | ". */
static void tail_lines(const char *log, size_t len, char *out, size_t outlen)
{
	size_t start = len, lines = 0, w = 0;

	while (start > 0 && lines <= TAIL_LINES)
		if (log[--start] == '\n' && start + 1 < len)
			lines++;
	for (size_t i = start; i < len && w + 8 < outlen; i++) {
		unsigned char c = (unsigned char)log[i];

		if (c == '\n') {
			if (i + 1 < len)
				w += (size_t)snprintf(out + w, outlen - w, "\n  | ");
		} else {
			out[w++] = c >= 0x20 && c != 0x7f ? (char)c : '?';
		}
	}
	out[w] = '\0';
}

static int crashed(const struct ab_exec *x, long batch, const struct outcome *o,
		   const char *log, size_t len, char *err, size_t errlen)
{
	char how[64], tail[1536];

	if (WIFSIGNALED(o->status))
		snprintf(how, sizeof(how), "was killed by signal %d", WTERMSIG(o->status));
	else
		snprintf(how, sizeof(how), "exited with status %d", WEXITSTATUS(o->status));
	tail_lines(log, len, tail, sizeof(tail));
	return ab_fail(err, errlen, ECHILD,
		       "trial %d (batch %ld) %s, which is not an out-of-memory error; the search "
		       "stops. Its last output:\n  | %s",
		       x->count, batch, how, *tail ? tail : "(nothing)");
}

static int judge(const struct ab_exec *x, long batch, const struct outcome *o,
		 const struct ab_trial_report *rep, const char *log, size_t len,
		 struct ab_trial *out, char *err, size_t errlen)
{
	bool exited_ok = WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0;
	bool aware = rep->steps > 0 || rep->has_peak;

	if (o->interrupted)
		return ab_fail(err, errlen, EINTR, "interrupted during trial %d (batch %ld); the "
						   "trial was stopped",
			       x->count, batch);
	out->oom = rep->oom || o->over_capacity ||
		   (!o->timed_out && !exited_ok && ab_text_says_oom(log, len)) ||
		   (!o->timed_out && x->peak_source == AB_PEAK_FROM_RSS && WIFSIGNALED(o->status) &&
		    WTERMSIG(o->status) == SIGKILL);
	if (out->oom)
		return 0;
	if (o->timed_out && aware && rep->steps < (size_t)x->steps + 1 && !rep->has_peak)
		return ab_fail(err, errlen, ETIMEDOUT,
			       "trial %d (batch %ld) did not finish in %.0f s and was killed, after "
			       "reporting %zu of %d steps: raise --trial-seconds or check the command",
			       x->count, batch, x->trial_seconds, rep->steps, x->steps + 1);
	if (!o->timed_out && !exited_ok)
		return crashed(x, batch, o, log, len, err, errlen);
	if (x->peak_source == AB_PEAK_FROM_GPU && !x->gpu_usage && !rep->has_peak)
		return ab_fail(err, errlen, EPROTO,
			       "trial %d (batch %ld) reported no peak memory and NVML is not "
			       "available to measure it: have the command append {\"peak_bytes\": N} "
			       "(torch.cuda.max_memory_reserved(); the Python helper does) to "
			       "$AUTOBATCH_TRIAL_REPORT",
			       x->count, batch);
	if (x->peak_source == AB_PEAK_FROM_REPORT && !rep->has_peak)
		return ab_fail(err, errlen, EPROTO,
			       "trial %d (batch %ld) reported no peak memory: with --device "
			       "sim:total=SIZE the command must append {\"peak_bytes\": N} to "
			       "$AUTOBATCH_TRIAL_REPORT",
			       x->count, batch);
	out->has_peak = true;
	out->peak_bytes = x->peak_source == AB_PEAK_FROM_REPORT ? rep->peak_bytes : o->rss_peak;
	if (x->peak_source == AB_PEAK_FROM_GPU) /* NVML sees the context the report misses */
		out->peak_bytes = rep->has_peak && rep->peak_bytes > o->gpu_peak ? rep->peak_bytes
										 : o->gpu_peak;
	out->has_step = ab_trial_report_timing(rep, batch, &out->step_s, &out->samples_per_s);
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

static char **trial_argv(const struct ab_exec *x, const struct files *f, char **owned)
{
	struct stat cfg;
	size_t n = 0;
	char **argv;

	while (x->argv[n])
		n++;
	if (!(argv = calloc(n + 1, sizeof(*argv))))
		return NULL;
	bool have = x->config && stat(x->config, &cfg) == 0;

	for (size_t i = 0; i < n; i++) {
		owned[i] = NULL;
		argv[i] = have ? replace_word(x->argv[i], &cfg, f->config, &owned[i]) : x->argv[i];
	}
	return argv;
}

int ab_exec_trial(void *ctx, long batch, struct ab_trial *out, char *err, size_t errlen)
{
	struct ab_exec *x = ctx;
	struct ab_trial_report *rep = NULL;
	struct outcome o = {0};
	char **argv = NULL, **owned = NULL, *log = NULL, *text = NULL;
	size_t len, textlen, nargs = 0;
	struct files f;
	pid_t pid;
	int rc;

	memset(out, 0, sizeof(*out));
	out->batch = batch;
	if ((rc = prepare(x, batch, &f, err, errlen)) < 0)
		return rc;
	while (x->argv[nargs])
		nargs++;
	if (!(owned = calloc(nargs + 1, sizeof(*owned))) || !(argv = trial_argv(x, &f, owned)) ||
	    !(rep = malloc(sizeof(*rep))) ||
	    !(log = malloc(LOG_SCAN_BYTES)) || !(text = malloc(AB_REPORT_MAX_BYTES + 1))) {
		rc = ab_fail(err, errlen, ENOMEM, "out of memory");
		goto done;
	}
	if ((pid = fork()) < 0) {
		rc = ab_fail(err, errlen, errno, "cannot start a trial: %s", strerror(errno));
		goto done;
	}
	if (pid == 0)
		child(x, batch, &f, argv);
	setpgid(pid, pid);
	wait_trial(x, pid, &o);
	out->seconds = o.seconds;
	textlen = read_tail(f.report, text, AB_REPORT_MAX_BYTES + 1);
	ab_trial_report_parse(text, textlen, rep);
	len = read_tail(f.log, log, LOG_SCAN_BYTES);
	if (WIFEXITED(o.status) && WEXITSTATUS(o.status) == 127 && !o.timed_out)
		rc = crashed(x, batch, &o, log, len, err, errlen);
	else
		rc = judge(x, batch, &o, rep, log, len, out, err, errlen);
done:
	if (!x->keep)
		remove_tree(f.dir);
	for (size_t i = 0; owned && i < nargs; i++)
		free(owned[i]);
	free(owned);
	free(argv);
	free(rep);
	free(log);
	free(text);
	return rc;
}
