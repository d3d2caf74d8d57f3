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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "clock.h"

#define POLL_MS 200 /* how often a silent child is checked for having ended */
#define DRAIN_S 2.0 /* output still read after the child ended */

static void child(const struct ab_subprocess *p, int out[2], int errp[2])
{
	sigset_t none;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	sigemptyset(&none);
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(errp[1], 2) < 0)
		_exit(126);
	execve(p->argv[0], p->argv, p->envp);
	dprintf(2, "cannot run %s: %s\n", p->argv[0], strerror(errno));
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

/* Returns true when the child was reaped here (its status in *status). */
static bool stop(pid_t pid, double grace_s, int *status)
{
	struct timespec pause = {0, 300 * 1000 * 1000};
	double until = ab_now() + grace_s;

	kill(pid, SIGINT);
	nanosleep(&pause, NULL);
	kill(pid, SIGINT);
	while (ab_now() < until) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return true;
		nanosleep(&pause, NULL);
	}
	kill(pid, SIGKILL);
	return false;
}

int ab_child_ended(pid_t pid)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno == EINTR ? 0 : -errno;
	return si.si_pid == pid;
}

/* Returns true when the child was already reaped (after a stop). Reads its output until
 * both pipes close or, once it has ended, for DRAIN_S more: a process it left behind that
 * holds the pipes open must not keep us waiting forever. */
static bool pump(struct ab_subprocess *p, pid_t pid, int outfd, int errfd, double grace_s)
{
	bool reaped = false;

	struct pollfd fds[2] = {{outfd, POLLIN, 0}, {errfd, POLLIN, 0}};
	double deadline = p->timeout_s > 0 ? ab_now() + p->timeout_s : 0, drain = 0;
	struct lines l = {.len = 0};
	char buf[8192];

	while (fds[0].fd >= 0 || fds[1].fd >= 0) {
		double now = ab_now();
		int wait_ms = POLL_MS;

		if (deadline && now >= deadline && !p->timed_out) {
			p->timed_out = true;
			reaped = stop(pid, grace_s, &p->status);
			deadline = 0;
			continue;
		}
		if (!drain && (reaped || ab_child_ended(pid) == 1))
			drain = now + DRAIN_S;
		if (drain && now >= drain)
			break;
		if (deadline && (deadline - now) * 1000 < wait_ms)
			wait_ms = (int)((deadline - now) * 1000) + 1;
		if (poll(fds, 2, wait_ms) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			ssize_t n;

			if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(fds[i].fd, buf, sizeof(buf));
			if (n <= 0) {
				close(fds[i].fd);
				fds[i].fd = -1;
			} else if (i == 0) {
				collect(p, buf, (size_t)n);
			} else {
				feed(p, &l, buf, (size_t)n);
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (fds[i].fd >= 0)
			close(fds[i].fd);
	if (l.len)
		feed(p, &l, "\n", 1);
	return reaped;
}

int ab_subprocess_run(struct ab_subprocess *p, double grace_s, char *err, size_t errlen)
{
	int out[2] = {-1, -1}, errp[2] = {-1, -1};
	pid_t pid;

	p->out_len = 0;
	p->timed_out = p->out_truncated = false;
	if (!(p->out = malloc(AB_SUBPROCESS_STDOUT_MAX + 1)))
		return ab_fail(err, errlen, ENOMEM, "out of memory");
	p->out[0] = '\0';
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		int e = errno;

		close(out[0]), close(out[1]);
		return ab_fail(err, errlen, e, "cannot create a pipe: %s", strerror(e));
	}
	if ((pid = fork()) < 0) {
		int e = errno;

		close(out[0]), close(out[1]), close(errp[0]), close(errp[1]);
		return ab_fail(err, errlen, e, "cannot fork: %s", strerror(e));
	}
	if (pid == 0)
		child(p, out, errp);
	close(out[1]);
	close(errp[1]);
	if (!pump(p, pid, out[0], errp[0], grace_s))
		while (waitpid(pid, &p->status, 0) < 0 && errno == EINTR)
			;
	return 0;
}

void ab_subprocess_free(struct ab_subprocess *p)
{
	free(p->out);
	p->out = NULL;
}
