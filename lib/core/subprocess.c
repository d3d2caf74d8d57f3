/* subprocess.c - see subprocess.h. Uses poll() with a deadline, never SIGALRM: srun blocks
 * it. The child starts with an empty signal mask and default handlers, because srun's
 * blocked signals would otherwise be inherited.
 */
#include "subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "clock.h"

#define POLL_MS 200   /* how often a silent child is checked for having ended */
#define DRAIN_S 2.0   /* output still read after the child ended */
#define SIGINT2_S 0.3 /* srun aborts a step on two SIGINTs within a second */

/* ---- one child, watched ------------------------------------------------------------ */

int ab_proc_start(struct ab_proc *p, unsigned flags, void (*body)(void *arg), void *arg,
		  char *err, size_t errlen)
{
	pid_t parent = getpid();
	sigset_t none;

	memset(p, 0, sizeof(*p));
	p->flags = flags;
	if ((p->pid = fork()) < 0)
		return ab_fail(err, errlen, errno, "cannot fork: %s", strerror(errno));
	if (p->pid > 0) {
		if (flags & AB_PROC_GROUP)
			setpgid(p->pid, p->pid); /* both sides: whichever runs first */
		return 0;
	}
	if (flags & AB_PROC_GROUP)
		setpgid(0, 0);
	if (flags & AB_PROC_PDEATHSIG) {
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (getppid() != parent)
			_exit(126); /* the parent died before prctl (init or a subreaper has us) */
	}
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	body(arg);
	_exit(127);
}

int ab_proc_ended(pid_t pid)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno == EINTR ? 0 : -errno;
	return si.si_pid == pid;
}

static void signal_child(const struct ab_proc *p, int sig)
{
	kill(p->flags & AB_PROC_GROUP ? -p->pid : p->pid, sig);
}

/* What a stop has sent so far: SIGINT, the second SIGINT, SIGKILL. */
struct stopping {
	enum ab_stop why;
	double at;
	bool sigint2, killed;
};

static void stop_begin(const struct ab_proc *p, const struct ab_proc_watch *w,
		       struct stopping *s, enum ab_stop why, double now)
{
	s->why = why;
	s->at = now;
	s->killed = w->grace_s <= 0;
	signal_child(p, s->killed ? SIGKILL : SIGINT);
}

static void stop_escalate(const struct ab_proc *p, const struct ab_proc_watch *w,
			  struct stopping *s, double now)
{
	if (!s->sigint2 && !s->killed && now >= s->at + SIGINT2_S) {
		s->sigint2 = true;
		signal_child(p, SIGINT);
	}
	if (!s->killed && now >= s->at + w->grace_s) {
		s->killed = true;
		signal_child(p, SIGKILL);
	}
}

/* How often sample runs: a period of 0 is POLL_MS, never every pass (with a sample
 * callback, a 0 here made each pass's poll wait 0 ms: srun spun a core while probing). */
static double sample_period(const struct ab_proc_watch *w)
{
	return w->period_s > 0 ? w->period_s : POLL_MS / 1000.0;
}

/* Why to stop the child now, if at all. */
static enum ab_stop should_stop(const struct ab_proc *p, const struct ab_proc_watch *w,
				double elapsed, double *next_sample)
{
	if (w->interrupted && *w->interrupted)
		return AB_STOP_INTERRUPT;
	if (w->deadline_s > 0 && elapsed >= w->deadline_s)
		return AB_STOP_DEADLINE;
	if (w->sample && elapsed >= *next_sample) {
		*next_sample = elapsed + sample_period(w);
		if (w->sample(w->arg, p->pid, elapsed))
			return AB_STOP_WATCH;
	}
	return AB_STOP_NONE;
}

/* Reads what the pipes hold, for at most wait_ms; closes one at its end. */
static void read_pipes(const struct ab_proc_watch *w, struct pollfd fds[2], int wait_ms)
{
	char buf[8192];

	if (fds[0].fd < 0 && fds[1].fd < 0) {
		struct timespec pause = {wait_ms / 1000, (long)(wait_ms % 1000) * 1000000L};

		nanosleep(&pause, NULL);
		return;
	}
	if (poll(fds, 2, wait_ms) < 0)
		return; /* EINTR: the caller's loop comes back */
	for (int i = 0; i < 2; i++) {
		ssize_t n;

		if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if ((n = read(fds[i].fd, buf, sizeof(buf))) <= 0) {
			close(fds[i].fd);
			fds[i].fd = -1;
		} else if (w->on_data) {
			w->on_data(w->arg, i, buf, (size_t)n);
		}
	}
}

/* Milliseconds to the next thing to do: a sample, the deadline, a step of a stop. */
static int wait_ms(const struct ab_proc_watch *w, double elapsed, double next_sample,
		   const struct stopping *s)
{
	double until = sample_period(w);

	if (w->sample && !s->why && next_sample - elapsed < until)
		until = next_sample - elapsed;
	if (w->deadline_s > 0 && !s->why && w->deadline_s - elapsed < until)
		until = w->deadline_s - elapsed;
	if (s->why && !s->killed)
		until = until < 0.05 ? until : 0.05;
	return until > 0 ? (int)(until * 1000) + 1 : 0;
}

enum ab_stop ab_proc_wait(struct ab_proc *p, const struct ab_proc_watch *w)
{
	struct pollfd fds[2] = {{w->fds[0], POLLIN, 0}, {w->fds[1], POLLIN, 0}};
	struct stopping s = {AB_STOP_NONE, 0, false, false};
	double start = ab_now(), next_sample = 0, ended = 0;

	for (;;) {
		double now = ab_now(), elapsed = now - start;
		int r;

		if (!ended && (r = ab_proc_ended(p->pid)) != 0)
			ended = now; /* ended, or cannot be asked (r < 0): reap it below */
		if (ended && ((fds[0].fd < 0 && fds[1].fd < 0) || now >= ended + w->drain_s))
			break;
		if (!ended && !s.why) {
			enum ab_stop why = should_stop(p, w, elapsed, &next_sample);

			if (why)
				stop_begin(p, w, &s, why, now);
		} else if (!ended) {
			stop_escalate(p, w, &s, now);
		}
		read_pipes(w, fds, ended ? POLL_MS : wait_ms(w, elapsed, next_sample, &s));
	}
	for (int i = 0; i < 2; i++)
		if (fds[i].fd >= 0)
			close(fds[i].fd);
	if (p->flags & AB_PROC_GROUP)
		kill(-p->pid, SIGKILL); /* what the leader left behind */
	while (wait4(p->pid, &p->status, 0, &p->ru) < 0 && errno == EINTR)
		;
	return s.why;
}

/* ---- a program, its output collected ----------------------------------------------- */

struct program {
	struct ab_subprocess *p;
	int out[2], err[2];
};

static void program_body(void *arg)
{
	const struct program *g = arg;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (null < 0 || dup2(null, 0) < 0 || dup2(g->out[1], 1) < 0 || dup2(g->err[1], 2) < 0)
		_exit(126);
	execve(g->p->argv[0], g->p->argv, g->p->envp);
	dprintf(2, "cannot run %s: %s\n", g->p->argv[0], strerror(errno));
	_exit(127);
}

struct lines {
	char buf[AB_SUBPROCESS_LINE_MAX + 1];
	size_t len;
};

/* Hands complete lines to on_line; an overlong line is cut, never buffered without end. */
static void feed(struct ab_subprocess *p, struct lines *l, const char *data, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (data[i] != '\n' && l->len < AB_SUBPROCESS_LINE_MAX) {
			l->buf[l->len++] = data[i];
			continue;
		}
		l->buf[l->len] = '\0';
		if (p->on_line)
			p->on_line(p->arg, l->buf);
		l->len = 0;
		if (data[i] != '\n')
			l->buf[l->len++] = data[i];
	}
}

static void collect(struct ab_subprocess *p, const char *data, size_t n)
{
	size_t room = AB_SUBPROCESS_STDOUT_MAX - p->out_len;

	if (n > room) {
		n = room;
		p->out_truncated = true;
	}
	memcpy(p->out + p->out_len, data, n);
	p->out_len += n;
	p->out[p->out_len] = '\0';
}

struct output {
	struct ab_subprocess *p;
	struct lines lines;
};

static void on_output(void *arg, int index, const char *buf, size_t n)
{
	struct output *o = arg;

	if (index == 0)
		collect(o->p, buf, n);
	else
		feed(o->p, &o->lines, buf, n);
}

static bool on_tick(void *arg, pid_t pid, double elapsed_s)
{
	const struct output *o = arg;

	(void)pid, (void)elapsed_s;
	o->p->tick(o->p->tick_arg);
	return false;
}

int ab_subprocess_run(struct ab_subprocess *p, double grace_s, char *err, size_t errlen)
{
	struct program g = {p, {-1, -1}, {-1, -1}};
	struct output o = {.p = p};
	struct ab_proc proc;
	enum ab_stop stop;
	int rc;

	p->out_len = 0;
	p->timed_out = p->out_truncated = p->stopped = false;
	if (!(p->out = malloc(AB_SUBPROCESS_STDOUT_MAX + 1)))
		return ab_fail(err, errlen, ENOMEM, "out of memory");
	p->out[0] = '\0';
	if (pipe2(g.out, O_CLOEXEC) < 0 || pipe2(g.err, O_CLOEXEC) < 0) {
		rc = ab_fail(err, errlen, errno, "cannot create a pipe: %s", strerror(errno));
		goto fail;
	}
	if ((rc = ab_proc_start(&proc, p->die_with_parent ? AB_PROC_PDEATHSIG : 0, program_body,
				&g, err, errlen)) < 0)
		goto fail;
	close(g.out[1]);
	close(g.err[1]);
	stop = ab_proc_wait(&proc, &(struct ab_proc_watch){
					   .deadline_s = p->timeout_s,
					   .interrupted = p->interrupted,
					   .sample = p->tick ? on_tick : NULL,
					   .fds = {g.out[0], g.err[0]},
					   .on_data = on_output,
					   .arg = &o,
					   .grace_s = grace_s,
					   .drain_s = DRAIN_S,
				   });
	p->timed_out = stop == AB_STOP_DEADLINE;
	p->stopped = stop == AB_STOP_INTERRUPT;
	if (o.lines.len)
		feed(p, &o.lines, "\n", 1);
	p->status = proc.status;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (g.out[i] >= 0)
			close(g.out[i]);
		if (g.err[i] >= 0)
			close(g.err[i]);
	}
	return rc;
}

void ab_subprocess_free(struct ab_subprocess *p)
{
	free(p->out);
	p->out = NULL;
}

void ab_close_from(int first)
{
	if (syscall(SYS_close_range, (unsigned)first, ~0u, 0u) < 0)
		for (long fd = first, max = sysconf(_SC_OPEN_MAX); fd < max && fd < 65536; fd++)
			close((int)fd);
}
