/* trial_model.c - the host model trial (see trial_model.h). */
#include "trial_model.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "subprocess.h"
#include "clock.h"
#include "reference.h"
#include "trial_report.h"

#define EXIT_OOM 3


/* The steps timed after the warm-up. */
static int timed_steps(const struct ab_model_host *h)
{
	return h->steps < 1 ? 3 : h->steps > 64 ? 64 : h->steps;
}

/* In the child: allocate, warm up, time the steps, write the median step time. */
struct model_child {
	const struct ab_model_host *h;
	long batch;
	int fd; /* the pipe the median step time is written to */
};

static void run_child(void *arg)
{
	const struct model_child *c = arg;
	const struct ab_model_host *h = c->h;
	long batch = c->batch;
	int fd = c->fd;
	struct rlimit lim = {h->capacity, h->capacity};
	double times[64], t0, median;
	int steps = timed_steps(h);
	struct ref_gpt g;

	/* mmap'ed memory counts against RLIMIT_DATA (Linux >= 4.7): malloc fails, not the OOM
	 * killer, when the batch needs more than the capacity. Not under AddressSanitizer, whose
	 * allocator maps far more than it uses: there the peak against the limit decides. */
#if !defined(__SANITIZE_ADDRESS__)
	setrlimit(RLIMIT_DATA, &lim);
#else
	(void)lim;
#endif
	if (batch > (1L << 30) || !ab_model_sizeable(&h->model, batch) ||
	    ref_gpt_init(&g, &h->model, (int)batch, 1, NULL, 0) < 0)
		_exit(EXIT_OOM);
	ref_gpt_forward(&g);
	ref_gpt_backward(&g);
	ref_gpt_update(&g, 1e-4f);
	for (int s = 0; s < steps; s++) {
		t0 = ab_now();
		ref_gpt_forward(&g);
		ref_gpt_backward(&g);
		ref_gpt_update(&g, 1e-4f);
		times[s] = ab_now() - t0;
	}
	median = ab_median(times, (size_t)steps);
	_exit(write(fd, &median, sizeof(median)) == sizeof(median) ? 0 : 1);
}

/* Waits for the child within the deadline; SIGKILL on timeout or interrupt. */
static int wait_child(const struct ab_model_host *h, long batch, struct ab_proc *proc, char *err,
		      size_t errlen)
{
	enum ab_stop why = ab_proc_wait(proc, &(struct ab_proc_watch){
						      .deadline_s = h->trial_seconds,
						      .interrupted = h->interrupted,
						      .period_s = 0.02, /* steps of small models */
						      .fds = {-1, -1},
					      });

	/* Ctrl-C reaches the child too (our process group), which may end before we look */
	if (why == AB_STOP_INTERRUPT || (h->interrupted && *h->interrupted))
		return ab_fail(err, errlen, EINTR, "interrupted during a model trial");
	if (why == AB_STOP_DEADLINE)
		return ab_fail(err, errlen, ETIMEDOUT,
			       "batch %ld: the CPU reference steps (its warm-up and --steps) did not "
			       "finish in %.0f s (--trial-seconds): on the host, model mode trains the "
			       "proxy on the CPU, slower the larger the batch; bound it with --max, "
			       "use a GPU (--device cuda:N), or raise --trial-seconds",
			       batch, h->trial_seconds);
	return 0;
}

int ab_model_host_trial(void *ctx, long batch, struct ab_trial *out, char *err, size_t errlen)
{
	const struct ab_model_host *h = ctx;
	struct ab_proc proc;
	double start = ab_now(), step = 0;
	int fds[2], status, rc;

	memset(out, 0, sizeof(*out));
	out->batch = batch;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return ab_fail(err, errlen, errno, "pipe: %s", strerror(errno));
	if ((rc = ab_proc_start(&proc, 0, run_child, &(struct model_child){h, batch, fds[1]}, err,
				errlen)) < 0) {
		close(fds[0]);
		close(fds[1]);
		return rc;
	}
	close(fds[1]);
	rc = wait_child(h, batch, &proc, err, errlen);
	status = proc.status;
	if (rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
	    read(fds[0], &step, sizeof(step)) != sizeof(step))
		rc = ab_fail(err, errlen, EPROTO, "the model trial reported no step time");
	close(fds[0]);
	if (rc < 0)
		return rc;
	out->seconds = ab_now() - start;
	if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_OOM) {
		out->oom = true;
		return 0;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return ab_fail(err, errlen, ECHILD, "the model trial (batch %ld) %s %d", batch,
			       WIFSIGNALED(status) ? "was killed by signal" : "exited with status",
			       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	out->has_peak = true;
	out->peak_bytes = (uint64_t)proc.ru.ru_maxrss * 1024;
	out->has_step = isfinite(step) && step > 0;
	out->steps = 1 + timed_steps(h);
	out->step_s = step;
	out->samples_per_s = out->has_step ? (double)batch / step : 0;
	return 0;
}
