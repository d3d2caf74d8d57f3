/* trial_exec.c - exec-mode trials (see trial_exec.h). A crash that is not an OOM is an
 * error that stops the search, never a "does not fit"; the trial's output tail says why.
 */
#include "trial_exec.h"
#include "trial_container.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
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
#include "trial_files.h"
#include "trial_report.h"

#define POLL_MS 20
#define LOG_SCAN_BYTES (64 * 1024)
#define TAIL_LINES 8
#define NOTE_FIRST_SECONDS 15 /* a trial slower than this says which phase it is in */
#define NOTE_EVERY_SECONDS 30

static bool python_command(char *const *argv);

int ab_exec_init(struct ab_exec *x, char *err, size_t errlen)
{
	struct ab_config *cfg;
	const struct ab_node *n;
	int rc;

	if (!x->argv || !x->argv[0])
		return ab_fail(err, errlen, EINVAL, "exec mode needs a command after --");
	if ((rc = ab_trial_container_check(x->argv, err, errlen)) < 0)
		return rc;
	if (x->config) {
		if (!x->key)
			return ab_fail(err, errlen, EINVAL, "a config needs a batch key: --key KEY "
							    "or a preset");
		if (ab_config_load(x->config, AB_FORMAT_AUTO, &cfg, err, errlen) < 0)
			return -EINVAL;
		rc = ab_config_find(cfg, x->key, x->document, &n, err, errlen);
		if (rc == 0 && x->accum_key)
			rc = ab_config_find(cfg, x->accum_key, x->document, &n, err, errlen);
		if (rc == 0 && x->pin_key)
			rc = ab_config_find(cfg, x->pin_key, x->document, &n, err, errlen);
		ab_config_free(cfg);
		if (rc < 0)
			return rc;
		if ((rc = ab_trial_argv_check(x->argv, x->key, x->config, err, errlen)) < 0 ||
		    (rc = ab_trial_argv_check(x->argv, x->accum_key, x->config, err, errlen)) < 0 ||
		    (rc = ab_trial_argv_check(x->argv, x->pin_key, x->config, err, errlen)) < 0)
			return rc;
	}
	if (x->start_ahead && !python_command(x->argv))
		x->start_ahead = false;
	if (!(x->startup_seconds > 0))
		x->startup_seconds = AB_STARTUP_SECONDS_DEFAULT;
	if (!(x->max_trial_seconds > 0))
		x->max_trial_seconds = AB_MAX_TRIAL_SECONDS_DEFAULT;
	if ((rc = ab_workdir_create(x->workdir_parent, x->workdir, sizeof(x->workdir),
				    &x->workdir_lock, err, errlen)) < 0)
		return rc;
	/* kept from the start: a probe killed (probe_timeout, scancel) is the one to look at */
	if (x->keep && (rc = ab_workdir_keep(x->workdir)) < 0)
		return ab_fail(err, errlen, -rc, "--keep-trials: cannot mark %s kept: %s",
			       x->workdir, strerror(-rc));
	/* A trial's children that leave its process group (setsid) are re-parented to us,
	 * not to init, so none outlives its trial. */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	return 0;
}

static void note(const struct ab_exec *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

void ab_exec_cleanup(struct ab_exec *x)
{
	ab_exec_stop_ahead(x);
	if (x->workdir[0] && !x->keep)
		ab_trial_tree_remove(x->workdir);
	else if (x->workdir[0])
		note(x, "the trials' files are kept in %s (remove it when done)", x->workdir);
	if (x->workdir[0] && x->workdir_lock >= 0)
		close(x->workdir_lock);
	x->workdir[0] = '\0';
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

/* A trial's process and files: started for its batch, or ahead of its turn (x->ahead). */
struct ab_exec_ahead {
	struct ab_trial_files f;
	char **argv, **owned;
	size_t nargs;
	struct ab_proc proc;
	bool started;
};

struct launch {
	const struct ab_exec *x;
	long batch;
	const struct ab_trial_files *f;
	char **argv;
};

/* The allocators' pools in a trial (protocol.h): TensorFlow grows (unless the user chose);
 * XLA takes no pool at start, whatever the user's run does, under the real run's cap. Each
 * twinned for a container named in the command. */
static int allocator_env(const struct ab_exec *x)
{
	const char *tf = getenv(AB_ENV_TF_GROWTH);
	char value[32];

	if (ab_trial_container_setenv(AB_ENV_TF_GROWTH, tf && *tf ? tf : "true") < 0 ||
	    ab_trial_container_setenv(AB_ENV_XLA_PREALLOCATE, "false") < 0)
		return -1;
	if (x->pool_fraction <= 0)
		return 0;
	snprintf(value, sizeof(value), "%g", x->pool_fraction);
	return ab_env_xla_fraction(value);
}

/* In the child (its own process group, killed with the probe): output to the trial's log,
 * the trial protocol's variables, then the command. */
static void child(void *arg)
{
	const struct launch *l = arg;
	const struct ab_exec *x = l->x;
	const struct ab_trial_files *f = l->f;
	long batch = l->batch;
	char **argv = l->argv, value[32];
	int logfd = open(f->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (logfd < 0 || null < 0 || dup2(null, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
		_exit(126);
	snprintf(value, sizeof(value), "%ld", batch);
	setenv(AB_ENV_TRIAL, "1", 1);
	if (batch > 0) {
		setenv(AB_ENV_BATCH_SIZE, value, 1);
		unsetenv(AB_ENV_TRIAL_HOLD);
	} else { /* started ahead: the hook sets the batch once it is released */
		unsetenv(AB_ENV_BATCH_SIZE);
		setenv(AB_ENV_TRIAL_HOLD, f->go, 1);
	}
	snprintf(value, sizeof(value), "%d", x->steps);
	setenv(AB_ENV_TRIAL_STEPS, value, 1);
	setenv(AB_ENV_TRIAL_REPORT, f->report, 1);
	setenv(AB_ENV_TRIAL_PHASE, x->phase, 1);
	if (x->eval_key)
		setenv(AB_ENV_TRIAL_EVAL, "1", 1);
	if (x->pad_to > 0) {
		snprintf(value, sizeof(value), "%ld", x->pad_to);
		setenv(AB_ENV_TRIAL_PAD_TO, value, 1);
	}
	if (f->config[0])
		setenv(AB_ENV_CONFIG, f->config, 1);
	if (x->metrics_key)
		setenv(AB_ENV_TRIAL_OWN_STEPS, "1", 1);
	else
		unsetenv(AB_ENV_TRIAL_OWN_STEPS);
	if (allocator_env(x) < 0 || (x->hook_dir && python_path(x->hook_dir) < 0) ||
	    ab_trial_container_env(x->hook_dir, x->workdir) < 0)
		_exit(126);
	execvp(argv[0], argv);
	dprintf(2, "autobatch-probe: cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* Why a trial ended: by itself, or stopped by the probe for one of these reasons. */
enum ending {
	ENDED_ITSELF,
	ENDED_DONE,      /* its warm-up and measured steps were seen: it had what it needed */
	ENDED_STARTUP,   /* no step within the start-up allowance */
	ENDED_STEPS,     /* the measured steps did not come within --trial-seconds */
	ENDED_EVAL,      /* its steps came, the evaluation the hook awaited after them did not */
	ENDED_MEMORY,    /* over the device's memory */
	ENDED_INTERRUPT, /* the probe was interrupted */
	ENDED_TIME,      /* the probe's time limit came before its steps */
};

struct outcome {
	int status;
	enum ending ending;
	struct ab_group_peak group; /* host: sampled */
	uint64_t rss_peak, gpu_peak;
	double seconds;
	double first_step_s; /* when the first step line was seen; 0: not while it ran */
	double window_s;     /* what a measured step was allowed */
	double eval_window_s; /* what the evaluation after the steps was allowed */
};

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

/* The longest step the trial has reported (0: none said how long it took). */
static double longest_step(const struct ab_trial_report *rep)
{
	double m = 0;

	for (size_t i = 0; i < rep->steps && i < AB_REPORT_MAX_STEPS; i++)
		m = rep->step_s[i] > m ? rep->step_s[i] : m;
	return m;
}

/* What a step of BATCH should take at the pace of the largest batch an earlier trial ran. */
static double predicted_step(const struct ab_exec *x, long batch)
{
	return x->pace_batch > 0 ? x->pace_step_s * (double)batch / (double)x->pace_batch : 0;
}

/* What a measured step of BATCH may take after the warm-up: --trial-seconds, or twice the
 * slowest step seen, or twice what the earlier trials' pace predicts at this batch, when that
 * is longer (a large model, a long accumulation, a batch several times the last one's; a
 * step on a loaded machine that took twice the warm-up's), up to --max-trial-seconds. */
static double step_window(const struct ab_exec *x, long batch, double longest)
{
	double w = 2 * fmax(longest, predicted_step(x, batch));

	return fmax(fmin(w, x->max_trial_seconds), x->trial_seconds);
}

/* What the evaluation inside training after the trial's last step may take: a step's window,
 * times the eval batch over the train batch where an eval phase's trial evaluates a batch
 * larger than the one it trains at (2 eval batches of 4000 after steps of 500), up to
 * --max-trial-seconds. */
static double eval_window(const struct ab_exec *x, long batch, double longest)
{
	double w = step_window(x, batch, longest), k = 1;

	if (!strcmp(x->phase, "eval") && x->pin_batch > 0 && batch > x->pin_batch)
		k = (double)batch / (double)x->pin_batch;
	return fmax(fmin(w * k, x->max_trial_seconds), w);
}

/* Its steps were seen and the step hook awaits the evaluation after them, not yet said: what
 * the trial measured holds training alone, not the train+eval peak the config will reach. */
static bool eval_unseen(const struct ab_trial_report *rep)
{
	return rep->eval_awaited && !rep->eval_said;
}

/* What the trial's watch keeps between samples. */
struct watching {
	const struct ab_exec *x;
	long batch;
	struct ab_report_watch *w;
	struct outcome *o;
	double first, done, next_note; /* seconds since the start; 0: not yet */
	double stepped; /* its steps were seen, its evaluation inside training awaited; 0: not */
	bool told_window;
};

/* Which deadline, if any, ends the trial now (the probe's interrupt is the runner's). The
 * start-up allowance runs until the first step (the warm-up, which holds compilation too);
 * the step window from there. The warm-up and one measured step are the evidence a fit needs:
 * once it is seen, a step that would end past --trial-seconds is not waited for, except where
 * the config evaluates inside training: that evaluation comes after the last step. An
 * evaluation the step hook awaits is evidence too: a trial stopped before it was said is no
 * fit (a loaded host, an eval probe near its time limit: one stopped so counted as a fit of
 * an eval batch never run, and its plain run went 7% over). */
static enum ending deadline(const struct watching *t, double elapsed)
{
	const struct ab_exec *x = t->x;
	double since, longest;

	/* the probe's time is up: a trial with its evidence counts, one without ends */
	if (x->deadline > 0 && ab_now() >= x->deadline)
		return t->w->rep.steps >= AB_TRIAL_MIN_STEPS && !eval_unseen(&t->w->rep)
			       ? ENDED_DONE
			       : ENDED_TIME;
	if (t->done > 0)
		return elapsed - t->done > AB_DONE_GRACE_SECONDS ? ENDED_DONE : ENDED_ITSELF;
	if (t->first == 0)
		return elapsed > x->startup_seconds ? ENDED_STARTUP : ENDED_ITSELF;
	since = elapsed - t->first;
	longest = longest_step(&t->w->rep);
	if (t->stepped > 0) { /* the evaluation after the steps, where one is awaited */
		if (elapsed - t->stepped <= eval_window(x, t->batch, longest))
			return ENDED_ITSELF;
		return eval_unseen(&t->w->rep) ? ENDED_EVAL : ENDED_DONE;
	}
	if (!x->eval_key && t->w->rep.steps >= AB_TRIAL_MIN_STEPS &&
	    since + longest > x->trial_seconds)
		return ENDED_DONE;
	return since > step_window(x, t->batch, longest) ? ENDED_STEPS : ENDED_ITSELF;
}

static void progress_note(const struct ab_exec *x, long batch, double elapsed, size_t steps)
{
	if (steps == 0)
		note(x, "trial %d (batch %ld): starting for %.0f s, no training step yet "
			"(start-up allowance %.0f s)",
		     x->count, batch, elapsed, x->startup_seconds);
	else
		note(x, "trial %d (batch %ld): %zu of %d steps after %.0f s", x->count, batch,
		     steps, x->steps + 1, elapsed);
}

/* Once the warm-up step is seen: a window longer than --trial-seconds, and why. */
static void tell_window(struct watching *t)
{
	const struct ab_exec *x = t->x;
	double longest = longest_step(&t->w->rep), window = step_window(x, t->batch, longest);

	t->told_window = true;
	if (window <= x->trial_seconds)
		return;
	if (longest >= predicted_step(x, t->batch))
		note(x, "trial %d (batch %ld): its warm-up step took %.0f s; a measured step gets "
			"up to %.0f s (twice that, beyond --trial-seconds %.0f)",
		     x->count, t->batch, longest, window, x->trial_seconds);
	else
		note(x, "trial %d (batch %ld): at the earlier trials' pace a step takes about "
			"%.0f s at this batch; a measured step gets up to %.0f s (twice that, beyond "
			"--trial-seconds %.0f)",
		     x->count, t->batch, predicted_step(x, t->batch), window, x->trial_seconds);
}

/* Every POLL_MS while the trial runs: its memory, its report, its deadlines. */
static bool watch_trial(void *arg, pid_t pid, double elapsed)
{
	struct watching *t = arg;
	bool over = sample_memory(t->x, pid, t->o);

	ab_report_watch_read(t->w, false);
	if (t->w->rep.steps > 0 && t->first == 0)
		t->first = elapsed;
	if (t->w->rep.steps >= (size_t)t->x->steps + 1 && t->done == 0 && t->stepped == 0)
		t->stepped = elapsed;
	if (t->stepped > 0 && t->done == 0 && (!t->x->eval_key || t->w->rep.eval_said))
		t->done = elapsed;
	if (t->first > 0 && !t->told_window)
		tell_window(t);
	t->o->ending = over ? ENDED_MEMORY : deadline(t, elapsed);
	if (t->o->ending != ENDED_ITSELF)
		return true;
	if (elapsed >= t->next_note) {
		progress_note(t->x, t->batch, elapsed, t->w->rep.steps);
		t->next_note = elapsed + NOTE_EVERY_SECONDS;
	}
	return false;
}

static void wait_trial(const struct ab_exec *x, long batch, struct ab_proc *proc,
		       struct ab_report_watch *w, struct outcome *o)
{
	struct watching t = {x, batch, w, o, 0, 0, NOTE_FIRST_SECONDS, 0, false};
	double start = ab_now(), longest;

	if (ab_proc_wait(proc, &(struct ab_proc_watch){
				       .interrupted = x->interrupted,
				       .grace_s = x->stop_grace_s,
				       .period_s = POLL_MS / 1000.0,
				       .sample = watch_trial,
				       .fds = {-1, -1},
				       .arg = &t,
			       }) == AB_STOP_INTERRUPT)
		o->ending = ENDED_INTERRUPT;
	o->status = proc->status;
	/* and those that left the group, not the next trial, started ahead */
	ab_group_reap_escaped(x->ahead ? x->ahead->proc.pid : 0, proc->pid);
	ab_report_watch_read(w, true);
	o->seconds = ab_now() - start;
	o->first_step_s = t.first;
	longest = longest_step(&w->rep);
	o->window_s = step_window(x, batch, longest);
	o->eval_window_s = eval_window(x, batch, longest);
	o->rss_peak = ab_group_peak_bytes(&o->group, (uint64_t)proc->ru.ru_maxrss * 1024);
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

/* What a report said that is no protocol line, where a step was looked for: the lines the
 * program meant as steps may be them ("0.01" for 0.01, a trailing comma) */
static const char *unread_lines(const struct ab_trial_report *rep, char *buf, size_t len)
{
	if (!rep->bad_lines)
		return "";
	snprintf(buf, len, "; %zu line%s it wrote to $AUTOBATCH_TRIAL_REPORT %s none of the "
			   "protocol's (JSON objects; a step is {\"step_s\": SECONDS}, a number), "
			   "the first: %s",
		 rep->bad_lines, rep->bad_lines == 1 ? "" : "s", rep->bad_lines == 1 ? "is" : "are",
		 rep->bad_first);
	return buf;
}

/* A trial that ended without a warm-up and a measured step: neither a fit nor an OOM. */
static int no_evidence(const struct ab_exec *x, long batch, const struct outcome *o,
		       const struct ab_trial_report *rep, char *err, size_t errlen)
{
	size_t steps = rep->steps;
	char unread[256];

	/* a Python program training all along is never seen to step without the hook: say that
	 * first, not only that the allowance was short */
	if (o->ending == ENDED_STARTUP && x->hook_missing)
		return ab_fail(err, errlen, ETIMEDOUT,
			       "trial %d (batch %ld) was still starting after %.0f s: no training "
			       "step was seen, and the Python step hook is not at %s, so a Python "
			       "program's steps cannot be seen: give --hook-dir (or install the hook "
			       "there); raise --startup-seconds only if the program was still loading%s",
			       x->count, batch, x->startup_seconds, x->hook_missing,
			       unread_lines(rep, unread, sizeof(unread)));
	if (o->ending == ENDED_STARTUP)
		return ab_fail(err, errlen, ETIMEDOUT,
			       "trial %d (batch %ld) was still starting after %.0f s: no training "
			       "step was seen%s%s",
			       x->count, batch, x->startup_seconds,
			       unread_lines(rep, unread, sizeof(unread)),
			       rep->bad_lines ? "" : "; raise --startup-seconds");
	char which[64] = "no measured step came";

	if (o->ending == ENDED_STEPS && steps >= AB_TRIAL_MIN_STEPS) /* its evaluation awaits */
		snprintf(which, sizeof(which), "step %zu of %d did not come", steps + 1,
			 x->steps + 1);
	if (o->ending == ENDED_STEPS)
		return ab_fail(err, errlen, ETIMEDOUT,
			       "trial %d (batch %ld) did not finish its steps: after its warm-up "
			       "step (%.0f s from the start), %s within %.0f s "
			       "(--trial-seconds %.0f, or twice the slowest step seen or the step the "
			       "earlier trials' pace predicts, up to --max-trial-seconds %.0f); it was "
			       "stopped. Raise --trial-seconds or check the command",
			       x->count, batch, o->first_step_s, which, o->window_s,
			       x->trial_seconds, x->max_trial_seconds);
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
		       "seen, so it cannot count as fitting%s%s: %s must report each step by "
		       "appending {\"step_s\": SECONDS} to $AUTOBATCH_TRIAL_REPORT",
		       x->count, batch, o->seconds, unread_lines(rep, unread, sizeof(unread)),
		       rep->bad_lines ? "; otherwise" : "", why);
}

/* An eval phase's trial beside evaluation inside training measures its eval batch only
 * through that evaluation: one that ran no eval batch (the program trained on, or ended,
 * without evaluating) is no evidence of it. */
static bool eval_unmeasured(const struct ab_exec *x, const struct ab_trial_report *rep)
{
	return x->eval_key && !strcmp(x->phase, "eval") && rep->eval_batches < 1;
}

static int no_evaluation(const struct ab_exec *x, long batch, const struct outcome *o,
			 const struct ab_trial_report *rep, char *err, size_t errlen)
{
	if (o->ending == ENDED_EVAL)
		return ab_fail(err, errlen, ETIMEDOUT,
			       "trial %d (batch %ld) ran its steps, but the evaluation the config "
			       "holds inside training (%s) did not come within %.0f s after them "
			       "(a step's window, --trial-seconds %.0f or twice the slowest step, up "
			       "to --max-trial-seconds %.0f); its peak without it is no fit. Raise "
			       "--trial-seconds or check the program's evaluation",
			       x->count, batch, x->eval_key, o->eval_window_s, x->trial_seconds,
			       x->max_trial_seconds);
	return ab_fail(err, errlen, EPROTO,
		       "trial %d (batch %ld) ran its steps but %s no evaluation after them, so its "
		       "eval batch (%s) was never measured: the config's %s must make the program "
		       "evaluate after the trial's last step (the probe's copy sets it), or a "
		       "program speaking the protocol appends {\"eval_batches\": N} to "
		       "$AUTOBATCH_TRIAL_REPORT after evaluating",
		       x->count, batch, rep->eval_said ? "the program ran" : "the trial saw",
		       x->key, x->eval_key);
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

/* What an OOM says of the peak that did not fit, at least: the program's own report, its
 * message, the peak it reported before failing, and what the memory watch saw it hold. */
static uint64_t oom_floor(const struct ab_exec *x, const struct outcome *o,
			  const struct ab_trial_report *rep, const char *log, size_t len)
{
	uint64_t f = rep->floor_bytes, t = ab_text_oom_floor(log, len);

	f = ab_trial_report_peak_over(rep, t > f ? t : f);
	if (x->peak_source == AB_PEAK_FROM_RSS && o->rss_peak > f)
		f = o->rss_peak;
	if (x->peak_source == AB_PEAK_FROM_GPU && o->gpu_peak > f)
		f = o->gpu_peak;
	return f;
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
	out->stopped = o->ending == ENDED_TIME;
	if (o->ending == ENDED_TIME)
		return ab_fail(err, errlen, ETIME, "trial %d (batch %ld) was stopped at the probe's "
						   "time limit, after %.0f s, before its steps%s were "
						   "seen",
			       x->count, batch, o->seconds,
			       rep->steps >= AB_TRIAL_MIN_STEPS ? " and the evaluation after them"
								: "");
	out->steps = rep->steps > INT_MAX ? INT_MAX : (int)rep->steps;
	out->ranks = (int)rep->nranks;
	out->bound_rank = rep->bound_rank;
	memcpy(out->bound_node, rep->bound_node, sizeof(out->bound_node));
	out->bound_peak_bytes = rep->bound_peak_bytes;
	out->bound_capacity_bytes = rep->bound_capacity_bytes;
	memcpy(out->rank_peak, rep->rank_peak, sizeof(out->rank_peak));
	out->lengths = rep->lengths;
	out->eval_batches = rep->eval_batches;
	out->saved_bytes = rep->saved_bytes;
	out->growth_bytes = ab_trial_report_growth(rep);
	out->growth_floor = ab_trial_report_growth_floor(rep);
	out->startup_s = rep->steps ? startup_seconds(o, rep) : 0;
	/* an OOM is an OOM whenever it happens, start-up included; allocations PyTorch could
	 * make only after freeing its whole cache are one (Composer halves its batch on them) */
	out->alloc_retries = rep->alloc_retries;
	out->oom = rep->oom || rep->alloc_retries > 0 || o->ending == ENDED_MEMORY ||
		   (!stopped && !exited_ok && ab_text_says_oom(log, len)) ||
		   (!stopped && x->peak_source == AB_PEAK_FROM_RSS && WIFSIGNALED(o->status) &&
		    WTERMSIG(o->status) == SIGKILL);
	/* the run's checkpoint, rehearsed after the steps, ran out or peaked above them */
	out->save_bound = out->oom ? rep->saving
				   : rep->steps && rep->save_peak_bytes > rep->step_peak_bytes;
	if (out->oom) {
		out->floor_bytes = oom_floor(x, o, rep, log, len);
		return 0;
	}
	if (!stopped && !exited_ok)
		return crashed(x, batch, o, log, len, err, errlen);
	/* stopped short of its last step, which the evaluation inside training comes after */
	if (rep->steps < AB_TRIAL_MIN_STEPS || o->ending == ENDED_STEPS)
		return no_evidence(x, batch, o, rep, err, errlen);
	if (o->ending == ENDED_EVAL || eval_unmeasured(x, rep))
		return no_evaluation(x, batch, o, rep, err, errlen);
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
	out->peak_bytes = x->peak_source == AB_PEAK_FROM_REPORT ? rep->peak_bytes
								: ab_trial_report_peak_over(rep, o->rss_peak);
	/* ranks differ from one another and from run to run, as helpers do: measured twice */
	out->forked = x->peak_source == AB_PEAK_FROM_RSS &&
		      ab_group_helpers(&o->group, out->peak_bytes);
	out->helpers = out->forked || rep->nranks >= 1;
	if (x->peak_source == AB_PEAK_FROM_GPU) /* NVML sees the context the report misses */
		out->peak_bytes = ab_trial_report_peak_over(rep, o->gpu_peak);
	out->has_step = ab_trial_report_timing(rep, batch, &out->step_s, &out->samples_per_s);
	return 0;
}

void ab_exec_learn_pace(struct ab_exec *x, const struct ab_trial *t)
{
	if (!t->has_step || !(t->step_s > 0) || t->batch < x->pace_batch)
		return;
	if (t->batch > x->pace_batch || t->step_s > x->pace_step_s)
		x->pace_step_s = t->step_s;
	x->pace_batch = t->batch;
}

/* ---- a trial's process: prepared, started, or started ahead ------------------------- */

/* The last line a trial printed, quoted (ab_printable) to fit out. */
static void last_line(const char *path, char *out, size_t outlen)
{
	char buf[512];
	size_t end = read_tail(path, buf, sizeof(buf)), start;

	while (end > 0 && (buf[end - 1] == '\n' || buf[end - 1] == '\r'))
		end--;
	buf[end] = '\0';
	for (start = end; start > 0 && buf[start - 1] != '\n'; start--)
		;
	ab_printable(buf + start, out, outlen);
}

static struct ab_trial_place place_of(const struct ab_exec *x)
{
	return (struct ab_trial_place){x->workdir, x->config, x->key, x->accum_key, x->document,
				       x->ramp_key, x->eval_key, x->steps + 1, x->save_key,
				       x->metrics_key, x->checkpoint_key, x->pin_key, x->pin_batch,
				       x->global_key};
}

/* Its files and argv (BATCH 0: started ahead, no config copy yet). */
static int prepare(const struct ab_exec *x, int count, long batch, struct ab_exec_ahead *p,
		   char *err, size_t errlen)
{
	struct ab_trial_place place = place_of(x);
	int rc;

	memset(p, 0, sizeof(*p));
	if ((rc = ab_trial_files_create(&place, count, batch, &p->f, err, errlen)) < 0)
		return rc;
	while (x->argv[p->nargs])
		p->nargs++;
	if (!(p->owned = calloc(p->nargs + 1, sizeof(*p->owned))) ||
	    !(p->argv = ab_trial_argv(x->argv, x->config, &p->f, p->owned)))
		return ab_fail(err, errlen, ENOMEM, "out of memory");
	return 0;
}

static int start(const struct ab_exec *x, long batch, struct ab_exec_ahead *p, char *err,
		 size_t errlen)
{
	int rc = ab_proc_start(&p->proc, AB_PROC_GROUP | AB_PROC_PDEATHSIG, child,
			       &(struct launch){x, batch, &p->f, p->argv}, err, errlen);

	p->started = rc == 0;
	return rc;
}

/* Ends it if it runs (its whole group), removes its files unless kept, frees it. */
static void discard(const struct ab_exec *x, struct ab_exec_ahead *p)
{
	if (p->started) {
		kill(-p->proc.pid, SIGKILL);
		waitpid(p->proc.pid, NULL, 0);
	}
	if (p->f.dir[0] && !x->keep)
		ab_trial_tree_remove(p->f.dir);
	for (size_t i = 0; p->owned && i < p->nargs; i++)
		free(p->owned[i]);
	free(p->owned);
	free(p->argv);
	memset(p, 0, sizeof(*p));
}

static bool python_name(const char *path)
{
	return !strncmp(ab_base_name(path), "python", 6);
}

/* The file execvp would run for name: itself when it has a slash, else the first executable
 * of that name on PATH. */
static bool find_program(const char *name, char *out, size_t outlen)
{
	const char *path = getenv("PATH"), *p, *end;

	if (strchr(name, '/'))
		return ab_format(out, outlen, "%s", name) == 0;
	for (p = path && *path ? path : "/usr/bin:/bin"; *p; p = *end ? end + 1 : end) {
		end = strchrnul(p, ':');
		if (ab_format(out, outlen, "%.*s/%s", (int)(end - p), end > p ? p : ".", name) ==
			    0 &&
		    access(out, X_OK) == 0)
			return true;
	}
	return false;
}

/* Whether the command is Python, whose step hook holds a trial started ahead: a python*
 * program, or a script whose #! line runs one (directly or through env). A shell script, a
 * compiled program or a container runtime would run unheld: started ahead, it would do its
 * work (a log line, a program that trains at a default batch) beside the running trial. */
static bool python_command(char *const *argv)
{
	char file[PATH_MAX], line[256], *word, *save = NULL;
	ssize_t n;
	int fd;

	if (python_name(argv[0]))
		return true;
	if (!find_program(argv[0], file, sizeof(file)) ||
	    (fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
		return false;
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n < 2 || line[0] != '#' || line[1] != '!')
		return false;
	line[n] = '\0';
	line[strcspn(line, "\n")] = '\0';
	word = strtok_r(line + 2, " \t", &save);
	if (word && !strcmp(ab_base_name(word), "env"))
		while ((word = strtok_r(NULL, " \t", &save)) && word[0] == '-')
			; /* env's options (-S) */
	return word && python_name(word);
}

/* The next trial, started now so that its interpreter and imports overlap this one; it waits
 * in the hook for its batch. Anything that fails here only means no trial is started ahead. */
static void start_ahead(struct ab_exec *x)
{
	char why[AB_ERR_MAX];

	if (!x->start_ahead || x->ahead)
		return;
	if (!(x->ahead = calloc(1, sizeof(*x->ahead))) ||
	    prepare(x, x->count + 1, 0, x->ahead, why, sizeof(why)) < 0 ||
	    start(x, 0, x->ahead, why, sizeof(why)) < 0)
		ab_exec_stop_ahead(x);
}

void ab_exec_stop_ahead(struct ab_exec *x)
{
	if (x->ahead)
		discard(x, x->ahead);
	free(x->ahead);
	x->ahead = NULL;
}

/* This trial's process: the one started ahead, given BATCH (1), or none (0). One that ended
 * before its turn could not wait for its batch (it read its config, or failed without one):
 * no trial is started ahead again. */
static int take_ahead(struct ab_exec *x, long batch, struct ab_exec_ahead *p, char *err,
		      size_t errlen)
{
	struct ab_trial_place place = place_of(x);
	char said[120];
	int rc;

	if (!x->ahead)
		return 0;
	*p = *x->ahead;
	free(x->ahead);
	x->ahead = NULL;
	if (ab_proc_ended(p->proc.pid) != 0) {
		last_line(p->f.log, said, sizeof(said));
		note(x, "trial %d was started ahead of its turn and ended before it (%s); trials "
			"start one at a time from now",
		     x->count + 1, said[0] ? said : "no output");
		x->start_ahead = false;
		discard(x, p);
		return 0;
	}
	if ((rc = ab_trial_release(&place, batch, &p->f, err, errlen)) < 0)
		return rc;
	return 1;
}

int ab_exec_trial(void *ctx, long batch, struct ab_trial *out, char *err, size_t errlen)
{
	struct ab_exec *x = ctx;
	struct ab_report_watch *w = NULL;
	struct outcome o = {0};
	struct ab_exec_ahead p = {0};
	char *log = NULL;
	size_t len;
	int rc;

	memset(out, 0, sizeof(*out));
	out->batch = batch;
	if ((rc = take_ahead(x, batch, &p, err, errlen)) < 0)
		goto done;
	out->ahead = rc == 1;
	++x->count;
	if (!out->ahead && (rc = prepare(x, x->count, batch, &p, err, errlen)) < 0)
		goto done;
	if (!(w = calloc(1, sizeof(*w))) || !(log = malloc(LOG_SCAN_BYTES))) {
		rc = ab_fail(err, errlen, ENOMEM, "out of memory");
		goto done;
	}
	if ((w->fd = open(p.f.report, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0) {
		rc = ab_fail(err, errlen, errno, "cannot open %s: %s", p.f.report, strerror(errno));
		goto done;
	}
	if (!out->ahead && (rc = start(x, batch, &p, err, errlen)) < 0)
		goto done;
	start_ahead(x);
	o.group.leader = p.proc.pid;
	wait_trial(x, batch, &p.proc, w, &o);
	p.started = false; /* reaped */
	out->seconds = o.seconds;
	len = read_tail(p.f.log, log, LOG_SCAN_BYTES);
	if (WIFEXITED(o.status) && WEXITSTATUS(o.status) == 127 && o.ending == ENDED_ITSELF)
		rc = crashed(x, batch, &o, log, len, err, errlen);
	else
		rc = judge(x, batch, &o, &w->rep, log, len, out, err, errlen);
	out->host_bytes = o.rss_peak;
	if (rc == 0)
		ab_exec_learn_pace(x, out);
done:
	if (w && w->fd >= 0)
		close(w->fd);
	discard(x, &p);
	free(w);
	free(log);
	return rc;
}
