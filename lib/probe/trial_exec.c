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
#include <linux/kcmp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "protocol.h"
#include "clock.h"
#include "subprocess.h"
#include "trial_report.h"

#define POLL_MS 20
#define LOG_SCAN_BYTES (64 * 1024)
#define TAIL_LINES 8
#define NOTE_FIRST_SECONDS 15 /* a trial slower than this says which phase it is in */
#define NOTE_EVERY_SECONDS 30

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

static void remove_tree(const char *path)
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

/* Work directories of probes that were killed (nothing could remove them then): ours by
 * owner, host and name, their probe's pid gone. A reused pid only delays the removal. */
static void remove_stale(const char *tmp, const char *host)
{
	int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char prefix[160];
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	long pid;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	snprintf(prefix, sizeof(prefix), "autobatch-probe.%s.", host);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix)) &&
		    sscanf(e->d_name + strlen(prefix), "%ld.", &pid) == 1 && pid > 0 &&
		    kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			remove_at(dirfd(d), e->d_name);
	closedir(d);
}

int ab_exec_init(struct ab_exec *x, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	struct ab_config *cfg;
	const struct ab_node *n;
	char host[128];

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
	if (!(x->startup_seconds > 0))
		x->startup_seconds = AB_STARTUP_SECONDS_DEFAULT;
	tmp = tmp && *tmp == '/' ? tmp : "/tmp";
	host_name(host, sizeof(host));
	remove_stale(tmp, host);
	if (snprintf(workdir, sizeof(workdir), "%s/autobatch-probe.%s.%ld.XXXXXX", tmp, host,
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

/* Our step hook first on PYTHONPATH: its sitecustomize runs in every Python process of the
 * trial and imports the one it shadows. Programs that are not Python never look. */
static int python_path(const char *hook_dir)
{
	const char *old = getenv("PYTHONPATH");
	char *value;
	int rc;

	if (old && *old)
		rc = asprintf(&value, "%s:%s", hook_dir, old);
	else
		rc = asprintf(&value, "%s", hook_dir);
	if (rc < 0)
		return -1;
	rc = setenv("PYTHONPATH", value, 1);
	free(value);
	return rc;
}

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
	setenv(AB_ENV_TRIAL, "1", 1);
	setenv(AB_ENV_BATCH_SIZE, value, 1);
	snprintf(value, sizeof(value), "%d", x->steps);
	setenv(AB_ENV_TRIAL_STEPS, value, 1);
	setenv(AB_ENV_TRIAL_REPORT, f->report, 1);
	setenv(AB_ENV_TRIAL_PHASE, x->phase, 1);
	if (f->config[0])
		setenv(AB_ENV_CONFIG, f->config, 1);
	if (x->hook_dir && python_path(x->hook_dir) < 0)
		_exit(126);
	execvp(argv[0], argv);
	dprintf(2, "autobatch-probe: cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* /proc/PID/NAME into buf, NUL-terminated; its length, or -1 (the process is gone). */
static ssize_t read_proc(long pid, const char *name, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/%s", pid, name);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* A process's parent, process group and resident pages, from /proc/PID/stat. */
static int read_stat(long pid, long *ppid, long *pgrp, long *rss)
{
	char buf[1024], *p;

	if (read_proc(pid, "stat", buf, sizeof(buf)) < 0)
		return -1;
	/* after "pid (comm)", which may hold anything: state ppid pgrp ... rss is field 24 */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %ld %ld %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
			  "%*d %*d %*u %*u %ld",
		   ppid, pgrp, rss) != 3)
		return -1;
	return 0;
}

/* The sum, in bytes, of the "FIELD...: N kB" lines of a /proc file whose name starts with
 * field; 0 when the process is gone. */
static uint64_t proc_kib(long pid, const char *name, const char *field)
{
	char buf[4096], key[32], *p;
	unsigned long long kib, total = 0;

	if (read_proc(pid, name, buf, sizeof(buf)) < 0)
		return 0;
	snprintf(key, sizeof(key), "\n%s", field);
	for (p = buf; (p = strstr(p, key)); p++)
		if (strchr(p, ':') && sscanf(strchr(p, ':') + 1, " %llu kB", &kib) == 1)
			total += kib;
	return (uint64_t)total * 1024;
}

/* The memory only this process holds and wrote: a forked worker shares the pages of its
 * parent's libraries and heap, which its resident size would count a second time. Clean
 * private pages are files' (libraries) mapped by no other process at the moment: a helper
 * that outlives the trainer (Python's forkserver) would otherwise count all of torch's
 * libraries again the instant the trainer exits (measured: 163 MiB, then 269 MiB). */
static uint64_t read_private(long pid)
{
	return proc_kib(pid, "smaps_rollup", "Private_Dirty:");
}

/* True when pid runs in its parent's memory: a vfork()ed child before its exec (Python's
 * subprocess and multiprocessing start helpers so), whose "private" pages are its parent's,
 * counted already (measured: a resource tracker read 6 MiB, then 235 MiB, in one run of
 * eight). kcmp(2) answers exactly; without it, no process is taken for such a child. */
static bool same_memory(pid_t pid, pid_t parent)
{
	return parent > 0 && syscall(SYS_kcmp, pid, parent, KCMP_VM, 0, 0) == 0;
}

/* A process's own peak resident memory, kept by the kernel: no sample misses it. */
static uint64_t read_hwm(long pid)
{
	return proc_kib(pid, "status", "VmHWM:");
}

/* A member's own memory. One forked from another member without exec (a worker of Python's
 * forkserver), or one that has such children (the forkserver), shares its dirty pages with
 * them: each is counted by its proportional share (Pss_Dirty), so the family's pages count
 * once whether its members live or not. Any other member (a worker forked by the leader,
 * whose shared pages are in the leader's resident size; a helper the leader started) counts
 * what only it wrote (Private_Dirty). A kernel without Pss_Dirty gives Private_Dirty. */
static uint64_t member_bytes(long pid, bool family)
{
	uint64_t pss = family ? proc_kib(pid, "smaps_rollup", "Pss_Dirty:") : 0;

	return pss ? pss : read_private(pid);
}

struct member {
	pid_t pid, ppid;
};

static bool in_members(const struct member *m, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].pid == pid)
			return true;
	return false;
}

static bool has_member_child(const struct member *m, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].ppid == pid)
			return true;
	return false;
}

/* Keeps member pid's largest; false when the table is full (the caller then counts it in
 * the sample's sum). */
static bool keep_member_max(struct ab_group_peak *g, pid_t pid, uint64_t own, bool family)
{
	size_t i = 0;

	while (i < g->n && g->pid[i] != pid)
		i++;
	if (i == g->n && g->n < AB_GROUP_TRACKED)
		g->pid[g->n++] = pid;
	if (i == g->n)
		return false;
	g->max[i] = own > g->max[i] ? own : g->max[i];
	g->family[i] = g->family[i] || family;
	return true;
}

/* One sample of the group led by g->leader (the trial may start DataLoader workers): the
 * leader's resident memory plus the other members' own (member_bytes); returns that sum and
 * keeps the leader's largest, each member's largest, and the largest one-sample sum of the
 * forked families (whose shares move between members as they come and go) and of members
 * beyond the table. With no group (leader 0), kills and reaps every child of ours instead:
 * after a trial, those are its descendants that escaped the group (we are their subreaper). */
static uint64_t scan_processes(struct ab_group_peak *g)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	struct member m[4 * AB_GROUP_TRACKED];
	uint64_t total = 0, members = 0, shared = 0, page = (uint64_t)sysconf(_SC_PAGESIZE);
	long ppid, pgrp, rss;
	size_t n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		pid_t pid = (pid_t)atol(e->d_name);

		if (e->d_name[0] < '0' || e->d_name[0] > '9' || read_stat(pid, &ppid, &pgrp, &rss) < 0)
			continue;
		if (g->leader > 0 && pid == g->leader) {
			uint64_t own = (uint64_t)rss * page, hwm = read_hwm(pid);

			total += own;
			g->leader_max = hwm > g->leader_max ? hwm : g->leader_max;
			g->leader_max = own > g->leader_max ? own : g->leader_max;
		} else if (g->leader > 0 && pgrp == (long)g->leader && rss > 0 &&
			   n < sizeof(m) / sizeof(m[0]) && !same_memory(pid, (pid_t)ppid)) {
			m[n++] = (struct member){pid, (pid_t)ppid};
		}
		if (g->leader == 0 && ppid == (long)getpid()) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
	}
	closedir(d);
	for (size_t i = 0; i < n; i++) {
		bool family = has_member_child(m, n, m[i].pid) ||
			      (m[i].ppid != g->leader && in_members(m, n, m[i].ppid));
		uint64_t own = member_bytes(m[i].pid, family);

		members += own;
		if (!keep_member_max(g, m[i].pid, own, family) || family)
			shared += own;
	}
	g->shared_max = shared > g->shared_max ? shared : g->shared_max;
	return total + members;
}

uint64_t ab_group_sample(struct ab_group_peak *g)
{
	return g->leader > 0 ? scan_processes(g) : 0;
}

/* The leader's peak (its kernel-kept high-water mark: no sample misses it), each other
 * member's largest (steady from run to run: a worker's prefetched batches come and go between
 * samples, their largest does not), and the families' largest one-sample sum (a member's
 * share grows as its family's others exit: each one's largest would count the shared pages
 * again). The leader's ru_maxrss, exact but covering its waited-for children too, counts
 * only where no other member was seen (a shell's child would otherwise be counted twice). */
uint64_t ab_group_peak_bytes(const struct ab_group_peak *g, uint64_t leader_maxrss)
{
	bool alone = g->n == 0 && g->shared_max == 0;
	uint64_t total = alone && leader_maxrss > g->leader_max ? leader_maxrss : g->leader_max;

	for (size_t i = 0; i < g->n; i++)
		if (!g->family[i])
			total += g->max[i];
	return total + g->shared_max;
}

/* A process holding less than this (and 2% of the peak) is a wrapper, not a helper. */
#define HELPER_MIN_BYTES (16ULL << 20)

bool ab_group_helpers(const struct ab_group_peak *g, uint64_t peak)
{
	uint64_t least = peak / 50 > HELPER_MIN_BYTES ? peak / 50 : HELPER_MIN_BYTES;
	int holders = g->leader_max >= least;

	for (size_t i = 0; i < g->n; i++)
		holders += g->max[i] >= least;
	return holders >= 2;
}

/* Why a trial ended: by itself, or stopped by the probe for one of these reasons. */
enum ending {
	ENDED_ITSELF,
	ENDED_DONE,      /* its warm-up and measured steps were seen: it had what it needed */
	ENDED_STARTUP,   /* no step within the start-up allowance */
	ENDED_STEPS,     /* the measured steps did not come within --trial-seconds */
	ENDED_MEMORY,    /* over the device's memory */
	ENDED_INTERRUPT, /* the probe was interrupted */
};

struct outcome {
	int status;
	enum ending ending;
	struct ab_group_peak group; /* host: sampled */
	uint64_t rss_peak, gpu_peak;
	double seconds;
	double first_step_s; /* when the first step line was seen; 0: not while it ran */
};

/* The trial's report, read while it runs: whole lines only, each once. */
struct report_watch {
	int fd;
	off_t parsed;  /* bytes fed so far */
	bool skipping; /* inside a line longer than a line may be */
	struct ab_trial_report rep;
};

static void watch_report(struct report_watch *w, bool final)
{
	char buf[2 * AB_REPORT_MAX_LINE];
	ssize_t n;

	while (w->fd >= 0 && w->parsed < (off_t)AB_REPORT_MAX_BYTES &&
	       (n = pread(w->fd, buf, sizeof(buf), w->parsed)) > 0) {
		const char *nl = memrchr(buf, '\n', (size_t)n);
		size_t take = nl ? (size_t)(nl - buf) + 1 : (size_t)n;

		if (!nl && !final && n < (ssize_t)sizeof(buf))
			return; /* a line still being written */
		if (w->skipping) { /* the rest of an overlong line is not a line of its own */
			const char *first = memchr(buf, '\n', take);

			size_t skip = first ? (size_t)(first - buf) + 1 : take;
			w->parsed += (off_t)skip;
			w->skipping = !first;
			continue;
		}
		if (!nl) { /* no line ends in a full buffer: too long, counted and skipped */
			w->rep.bad_lines++;
			w->skipping = !final;
		} else {
			ab_trial_report_feed(buf, take, &w->rep);
		}
		w->parsed += (off_t)take;
	}
}

static void note(const struct ab_exec *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void note(const struct ab_exec *x, const char *fmt, ...)
{
	char line[256];
	va_list ap;

	if (!x->note)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	x->note(x->note_arg, line);
}

/* The memory the trial holds now, against the device; true when over it. */
static bool sample_memory(const struct ab_exec *x, pid_t pid, struct outcome *o)
{
	uint64_t used;

	if (x->peak_source == AB_PEAK_FROM_RSS)
		return ab_group_sample(&o->group) > x->capacity;
	if (x->peak_source == AB_PEAK_FROM_GPU && x->gpu_usage) {
		used = x->gpu_usage(x->gpu_arg, pid);
		o->gpu_peak = used > o->gpu_peak ? used : o->gpu_peak;
		return used > x->capacity;
	}
	return false;
}

/* Which deadline, if any, ends the trial now. The start-up allowance runs until the first
 * step (the warm-up, which holds compilation too); --trial-seconds from there. */
static enum ending deadline(const struct ab_exec *x, double now, double start, double first,
			    double done)
{
	if (x->interrupted && *x->interrupted)
		return ENDED_INTERRUPT;
	if (done > 0)
		return now - done > AB_DONE_GRACE_SECONDS ? ENDED_DONE : ENDED_ITSELF;
	if (first > 0)
		return now - first > x->trial_seconds ? ENDED_STEPS : ENDED_ITSELF;
	return now - start > x->startup_seconds ? ENDED_STARTUP : ENDED_ITSELF;
}

static void progress_note(const struct ab_exec *x, long batch, double now, double start,
			  size_t steps)
{
	if (steps == 0)
		note(x, "trial %d (batch %ld): starting for %.0f s, no training step yet "
			"(start-up allowance %.0f s)",
		     x->count, batch, now - start, x->startup_seconds);
	else
		note(x, "trial %d (batch %ld): %zu of %d steps after %.0f s", x->count, batch,
		     steps, x->steps + 1, now - start);
}

static void wait_trial(const struct ab_exec *x, long batch, pid_t pid, struct report_watch *w,
		       struct outcome *o)
{
	struct timespec pause = {0, POLL_MS * 1000 * 1000};
	double start = ab_now(), first = 0, done = 0, next_note = start + NOTE_FIRST_SECONDS;
	struct rusage ru;
	bool killed = false;

	memset(&ru, 0, sizeof(ru));
	for (;;) {
		int ended = ab_child_ended(pid);
		double now = ab_now();

		if (ended < 0)
			break;
		if (ended) {
			/* the leader is a zombie, so its pid (the group's id) is not reused yet:
			 * the group is ended before the leader is reaped, never after */
			kill(-pid, SIGKILL);
			while (wait4(pid, &o->status, 0, &ru) < 0 && errno == EINTR)
				;
			break;
		}
		if (killed) {
			nanosleep(&pause, NULL);
			continue;
		}
		bool over = sample_memory(x, pid, o);

		watch_report(w, false);
		if (w->rep.steps > 0 && first == 0)
			first = now;
		if (w->rep.steps >= (size_t)x->steps + 1 && done == 0)
			done = now;
		o->ending = over ? ENDED_MEMORY : deadline(x, now, start, first, done);
		if (o->ending != ENDED_ITSELF) {
			kill(-pid, SIGKILL);
			killed = true;
			continue;
		}
		if (now >= next_note) {
			progress_note(x, batch, now, start, w->rep.steps);
			next_note = now + NOTE_EVERY_SECONDS;
		}
		nanosleep(&pause, NULL);
	}
	scan_processes(&(struct ab_group_peak){.leader = 0}); /* and those that left the group */
	watch_report(w, true);
	o->seconds = ab_now() - start;
	o->first_step_s = first > 0 ? first - start : 0;
	o->rss_peak = ab_group_peak_bytes(&o->group, (uint64_t)ru.ru_maxrss * 1024);
}

/* ---- judging ----------------------------------------------------------------------- */

static size_t read_tail(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
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

/* A trial that ended without a warm-up and a measured step: neither a fit nor an OOM. */
static int no_evidence(const struct ab_exec *x, long batch, const struct outcome *o,
		       size_t steps, char *err, size_t errlen)
{
	if (o->ending == ENDED_STARTUP)
		return ab_fail(err, errlen, ETIMEDOUT,
			       "trial %d (batch %ld) was still starting after %.0f s: no training "
			       "step was seen; raise --startup-seconds",
			       x->count, batch, x->startup_seconds);
	if (o->ending == ENDED_STEPS)
		return ab_fail(err, errlen, ETIMEDOUT,
			       "trial %d (batch %ld) did not finish its steps: after its warm-up "
			       "step (%.0f s from the start), no measured step came within "
			       "--trial-seconds %.0f; it was stopped. Raise --trial-seconds or check "
			       "the command",
			       x->count, batch, o->first_step_s, x->trial_seconds);
	if (steps == 1)
		return ab_fail(err, errlen, EPROTO,
			       "trial %d (batch %ld) exited after its warm-up step, before a measured "
			       "step: a trial must run the warm-up and the $AUTOBATCH_TRIAL_STEPS "
			       "steps after it",
			       x->count, batch);
	char why[PATH_MAX + 128];

	if (x->hook_dir)
		snprintf(why, sizeof(why), "a Python program is seen through its PyTorch optimizer "
					   "steps and this one made none; any other program");
	else if (x->hook_missing)
		snprintf(why, sizeof(why), "the Python step hook is not at %s (--hook-dir names "
					   "where it is), so the program",
			 x->hook_missing);
	else
		snprintf(why, sizeof(why), "with --instrument off, the program");
	return ab_fail(err, errlen, EPROTO,
		       "trial %d (batch %ld) exited after %.0f s without a training step being "
		       "seen, so it cannot count as fitting: %s must report each step by "
		       "appending {\"step_s\": SECONDS} to $AUTOBATCH_TRIAL_REPORT",
		       x->count, batch, o->seconds, why);
}

/* The start-up: to the end of the warm-up step, as seen, else as the steps account for. */
static double startup_seconds(const struct outcome *o, const struct ab_trial_report *rep)
{
	double steps = 0;

	if (o->first_step_s > 0)
		return o->first_step_s;
	for (size_t i = 1; i < rep->steps; i++)
		steps += rep->step_s[i];
	return o->seconds > steps ? o->seconds - steps : 0;
}

static int judge(const struct ab_exec *x, long batch, const struct outcome *o,
		 const struct ab_trial_report *rep, const char *log, size_t len,
		 struct ab_trial *out, char *err, size_t errlen)
{
	bool stopped = o->ending != ENDED_ITSELF;
	bool exited_ok = !stopped && WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0;

	if (o->ending == ENDED_INTERRUPT)
		return ab_fail(err, errlen, EINTR, "interrupted during trial %d (batch %ld); the "
						   "trial was stopped",
			       x->count, batch);
	out->steps = rep->steps > INT_MAX ? INT_MAX : (int)rep->steps;
	out->startup_s = rep->steps ? startup_seconds(o, rep) : 0;
	/* an OOM is an OOM whenever it happens, start-up included */
	out->oom = rep->oom || o->ending == ENDED_MEMORY ||
		   (!stopped && !exited_ok && ab_text_says_oom(log, len)) ||
		   (!stopped && x->peak_source == AB_PEAK_FROM_RSS && WIFSIGNALED(o->status) &&
		    WTERMSIG(o->status) == SIGKILL);
	if (out->oom)
		return 0;
	if (!stopped && !exited_ok)
		return crashed(x, batch, o, log, len, err, errlen);
	if (rep->steps < AB_TRIAL_MIN_STEPS)
		return no_evidence(x, batch, o, rep->steps, err, errlen);
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
	out->helpers = x->peak_source == AB_PEAK_FROM_RSS &&
		       ab_group_helpers(&o->group, out->peak_bytes);
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
	struct report_watch *w = NULL;
	struct outcome o = {0};
	char **argv = NULL, **owned = NULL, *log = NULL;
	size_t len, nargs = 0;
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
	    !(w = calloc(1, sizeof(*w))) || !(log = malloc(LOG_SCAN_BYTES))) {
		rc = ab_fail(err, errlen, ENOMEM, "out of memory");
		goto done;
	}
	if ((w->fd = open(f.report, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0) {
		rc = ab_fail(err, errlen, errno, "cannot open %s: %s", f.report, strerror(errno));
		goto done;
	}
	if ((pid = fork()) < 0) {
		rc = ab_fail(err, errlen, errno, "cannot start a trial: %s", strerror(errno));
		goto done;
	}
	if (pid == 0)
		child(x, batch, &f, argv);
	setpgid(pid, pid);
	o.group.leader = pid;
	wait_trial(x, batch, pid, w, &o);
	out->seconds = o.seconds;
	len = read_tail(f.log, log, LOG_SCAN_BYTES);
	if (WIFEXITED(o.status) && WEXITSTATUS(o.status) == 127 && o.ending == ENDED_ITSELF)
		rc = crashed(x, batch, &o, log, len, err, errlen);
	else
		rc = judge(x, batch, &o, &w->rep, log, len, out, err, errlen);
done:
	if (w && w->fd >= 0)
		close(w->fd);
	if (!x->keep)
		remove_tree(f.dir);
	for (size_t i = 0; owned && i < nargs; i++)
		free(owned[i]);
	free(owned);
	free(argv);
	free(w);
	free(log);
	return rc;
}
