/* trial_round.c - parallel trials (see trial_round.h). A worker process per trial runs the
 * ordinary exec trial, so a parallel trial is judged exactly as a sequential one; the
 * result comes back through a pipe in one write (smaller than PIPE_BUF).
 */
#include "trial_round.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "nvml.h"
#include "size.h"

#define HOST_SHARE 0.8 /* of MemAvailable that the trials at once may use */

struct message {
	int rc;
	struct ab_trial t;
	char err[AB_ERR_MAX];
};

_Static_assert(sizeof(struct message) <= PIPE_BUF, "one atomic write");

int ab_round_slots(struct ab_exec_round *r, long n, const char *visible, char *err,
		   size_t errlen)
{
	char list[512], *save = NULL;
	size_t count = 0;

	memset(r->slot, 0, sizeof(r->slot));
	snprintf(list, sizeof(list), "%s", visible ? visible : "");
	for (char *w = strtok_r(list, ",", &save); w && count < AB_ROUND_MAX_SLOTS;
	     w = strtok_r(NULL, ",", &save))
		snprintf(r->slot[count++].visible, sizeof(r->slot[0].visible), "%s", w);
	if (n > (long)count)
		return ab_fail(err, errlen, EINVAL, "--parallel %ld needs %ld GPUs and %zu %s "
						    "visible (CUDA_VISIBLE_DEVICES=%s)",
			       n, n, count, count == 1 ? "is" : "are", visible ? visible : "");
	r->nslots = n > 0 ? (size_t)n : count ? count : 1;
	if (!r->available)
		r->available = ab_host_available;
	return 0;
}

uint64_t ab_host_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	unsigned long long kib = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return (uint64_t)kib * 1024;
}

size_t ab_round_width(const struct ab_exec_round *r, size_t n, char *why, size_t whylen)
{
	size_t width = n < r->nslots ? n : r->nslots;
	uint64_t avail = r->available ? r->available() : 0;
	char used[32], free_now[32];
	double fit;

	why[0] = '\0';
	if (!r->host_bytes || !avail || width <= 1)
		return width ? width : 1;
	fit = HOST_SHARE * (double)avail / (double)r->host_bytes;
	if (fit >= (double)width)
		return width;
	snprintf(why, whylen, "a trial used up to %s of host memory and %s is available: %zu "
			      "trials at once, not %zu",
		 ab_format_size(r->host_bytes, used, sizeof(used)),
		 ab_format_size(avail, free_now, sizeof(free_now)), fit >= 1 ? (size_t)fit : 1,
		 width);
	return fit >= 1 ? (size_t)fit : 1;
}

/* In the worker: the slot's GPU alone, its own NVML handle (none is shared across a fork),
 * the trial, the result to the parent. */
static void worker(struct ab_exec_round *r, size_t slot, long batch, int count, int fd,
		   pid_t parent)
{
	struct ab_exec x = *r->x;
	struct ab_nvml *nv = NULL;
	struct message m = {0};
	char why[AB_ERR_MAX];

	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); /* the trial's escaped children are ours */
	/* a probe killed outright stops its workers as an interrupt does: trials ended */
	prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
	if (getppid() != parent)
		_exit(1);
	x.count = count;
	x.start_ahead = false; /* the parent's trial started ahead is the parent's */
	x.ahead = NULL;
	if (r->slot[slot].visible[0])
		setenv("CUDA_VISIBLE_DEVICES", r->slot[slot].visible, 1);
	if (x.gpu_usage && r->slot[slot].pci_bus_id[0]) {
		x.gpu_arg = ab_nvml_open(r->slot[slot].pci_bus_id, &nv, why, sizeof(why)) == 0
				    ? nv : NULL;
		if (!nv)
			x.gpu_usage = NULL;
	}
	m.rc = ab_exec_trial(&x, batch, &m.t, m.err, sizeof(m.err));
	ab_nvml_close(nv);
	_exit(write(fd, &m, sizeof(m)) == (ssize_t)sizeof(m) ? 0 : 1);
}

static bool interrupted(const struct ab_exec_round *r)
{
	return r->x->interrupted && *r->x->interrupted;
}

struct running {
	pid_t pid;
	int fd;
	size_t index; /* in the round's batches */
};

/* Waits for every worker, passing an interrupt on; collects each one's message. */
static int collect(struct ab_exec_round *r, struct running *w, size_t n, struct ab_trial *out,
		   char *err, size_t errlen)
{
	bool told = false;
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		struct message m;
		int status;

		while (waitpid(w[i].pid, &status, 0) < 0 && errno == EINTR)
			if (interrupted(r) && !told) {
				for (size_t j = i; j < n; j++)
					kill(w[j].pid, SIGINT);
				told = true;
			}
		if (read(w[i].fd, &m, sizeof(m)) != (ssize_t)sizeof(m)) {
			m.rc = -EPROTO;
			snprintf(m.err, sizeof(m.err), "the worker of trial batch %ld ended without "
						       "a result (status %d)",
				 out[w[i].index].batch, status);
		}
		close(w[i].fd);
		/* the first failure, unless only the time limit stopped a trial before it: a
		 * round that failed otherwise fails whole; one the time stopped keeps the trials
		 * that finished (ab_trial.stopped marks the rest) */
		if (m.rc < 0 && (rc == 0 || (rc == -ETIME && m.rc != -ETIME))) {
			rc = m.rc;
			ab_copy(err, errlen, m.err);
		}
		if (m.rc == 0) {
			out[w[i].index] = m.t;
			ab_exec_learn_pace(r->x, &m.t);
		} else {
			out[w[i].index].stopped = true;
		}
	}
	return rc;
}

static int start_worker(struct ab_exec_round *r, size_t slot, long batch, int count,
			struct running *w, char *err, size_t errlen)
{
	pid_t parent = getpid();
	int fds[2];

	if (pipe2(fds, O_CLOEXEC) < 0)
		return ab_fail(err, errlen, errno, "pipe: %s", strerror(errno));
	fflush(NULL);
	if ((w->pid = fork()) < 0) {
		close(fds[0]);
		close(fds[1]);
		return ab_fail(err, errlen, errno, "fork: %s", strerror(errno));
	}
	if (w->pid == 0) {
		close(fds[0]);
		worker(r, slot, batch, count, fds[1], parent);
	}
	close(fds[1]);
	w->fd = fds[0];
	return 0;
}

int ab_exec_round(void *ctx, const long *batches, size_t n, struct ab_trial *out, char *err,
		  size_t errlen)
{
	struct ab_exec_round *r = ctx;
	struct running w[AB_ROUND_MAX_SLOTS] = {{0}};
	char why[AB_ERR_MAX];
	size_t width = ab_round_width(r, n, why, sizeof(why));
	int rc = 0;

	if (why[0] && r->x->note)
		r->x->note(r->x->note_arg, why);
	for (size_t done = 0; done < n && rc == 0; done += width) {
		size_t k = n - done < width ? n - done : width, started = 0;

		for (size_t i = 0; i < k; i++, started++) {
			out[done + i].batch = batches[done + i];
			w[i].index = done + i;
			rc = start_worker(r, i, batches[done + i], r->x->count + (int)(done + i) + 1,
					  &w[i], err, errlen);
			if (rc < 0)
				break;
		}
		int crc = collect(r, w, started, out, err, errlen);

		rc = rc < 0 ? rc : crc;
		if (interrupted(r) && rc == 0)
			rc = ab_fail(err, errlen, EINTR, "interrupted");
	}
	r->x->count += (int)n;
	for (size_t i = 0; i < n; i++)
		if (out[i].host_bytes > r->host_bytes)
			r->host_bytes = out[i].host_bytes;
	return rc;
}
