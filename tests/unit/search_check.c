/* search_check.c - the search's promises under any evidence (see search_check.h).
 *
 * The first bytes are the parameters and a memory curve; each trial then reads one byte for
 * its outcome (and more for its details). When the bytes run out, trials follow the curve
 * quietly, so every input ends as a search on a curve the evidence before bent.
 */
#include "search_check.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"

#define GiB 1073741824.0

struct script {
	const uint8_t *data;
	size_t size, at;
	double total, base, per_sample, bend; /* peak = base + per_sample b + bend b^2 */
	double jump_at, jump;                 /* a workspace jump: + jump from jump_at on */
	size_t calls;                         /* trials run, repeats included */
	size_t stopped;                       /* of them, stopped at the time limit: dropped */
	double deadline;                      /* a timed search's: 0, none */
	bool in_round, late;                  /* a round began past its deadline */
};

/* A timed search's clock: each trial moves it on by 1 to 7 s, by its batch. */
static double now_s;

static double script_clock(void) { return now_s; }

/* A round (or a lone trial) starts: never past the deadline. */
static void round_starts(struct script *s)
{
	if (s->deadline > 0 && now_s > s->deadline)
		s->late = true;
}

static unsigned byte(struct script *s)
{
	return s->at < s->size ? s->data[s->at++] : 0;
}

/* a value in [0, 1) from two bytes */
static double unit(struct script *s)
{
	unsigned hi = byte(s);

	return (double)(hi << 8 | byte(s)) / 65536.0;
}

static double curve(const struct script *s, long b)
{
	double x = (double)b;

	return s->base + s->per_sample * x + s->bend * x * x + (x >= s->jump_at ? s->jump : 0);
}

/* One trial: the outcome its byte picks. */
static int trial(void *ctx, long b, struct ab_trial *t, char *err, size_t errlen)
{
	struct script *s = ctx;
	unsigned op = byte(s);
	double peak = curve(s, b);

	s->calls++;
	memset(t, 0, sizeof(*t));
	t->steps = 4;
	t->samples_per_s = (double)b / (1 + 0.001 * (double)b);
	if (op < 150) { /* the curve, with up to 1.2% noise either way */
		peak *= 1 + ((double)(op % 25) - 12) / 1000;
	} else if (op < 175) { /* an OOM; its floor anywhere from none to past the device */
		t->oom = true;
		t->floor_bytes = op & 1 ? (uint64_t)(unit(s) * 1.5 * s->total) : 0;
		t->has_peak = op % 3 == 0; /* some devices saw a peak before it */
		t->peak_bytes = t->has_peak ? (uint64_t)(unit(s) * 2 * s->total) : 0;
		return 0;
	} else if (op < 190) { /* too few steps to count */
		t->steps = (int)(op % 2);
	} else if (op < 210) { /* a peak off the curve: any size, 0 to twice the device */
		peak = unit(s) * 2 * s->total;
	} else if (op < 225) { /* helpers share the peak; runs differ by their spread */
		t->helpers = true;
		t->forked = op & 1;
		peak *= 1 + unit(s) * 0.1;
	} else if (op < 240) { /* throughput anywhere, noise on the curve */
		t->samples_per_s = unit(s) * 1000;
		peak *= 1 + ((double)(op % 7) - 3) / 1000;
	} else if (op < 250) { /* the device filled: a peak over the whole device */
		peak = s->total * (1 + unit(s));
	} else {
		return snprintf(err, errlen, "the trial crashed (op %u)", op), -EIO;
	}
	t->has_peak = true;
	/* a curve run far past the device stops at four devices: no process reports more */
	t->peak_bytes = peak > 0 ? (uint64_t)fmin(peak, 4 * s->total) : 0;
	return 0;
}

/* AUTOBATCH_SEARCH_TRACE=1: each trial's outcome on stderr, to replay a finding */
static void trace(long b, const struct ab_trial *t, int rc)
{
	if (getenv("AUTOBATCH_SEARCH_TRACE"))
		fprintf(stderr, "# trial %ld: rc %d oom %d floor %.4g GiB peak %d %.4g GiB steps %d "
				"helpers %d %.4g/s\n",
			b, rc, t->oom, (double)t->floor_bytes / GiB, t->has_peak,
			(double)t->peak_bytes / GiB, t->steps, t->helpers, t->samples_per_s);
}

static int traced(void *ctx, long b, struct ab_trial *t, char *err, size_t errlen)
{
	struct script *s = ctx;
	int rc;

	if (!s->in_round)
		round_starts(s);
	rc = trial(ctx, b, t, err, errlen);
	now_s += 1 + b % 7;
	/* still running well past the limit: stopped there, no result (trial_exec.c) */
	if (rc == 0 && s->deadline > 0 && now_s > s->deadline + 3) {
		memset(t, 0, sizeof(*t));
		t->stopped = true;
		snprintf(err, errlen, "trial (batch %ld) was stopped at the time limit", b);
		rc = -ETIME;
		s->stopped++;
	}
	trace(b, t, rc);
	return rc;
}

static int round_fn(void *ctx, const long *batches, size_t n, struct ab_trial *out, char *err,
		    size_t errlen)
{
	struct script *s = ctx;
	int rc = 0;

	/* as ab_exec_round: every trial runs; one the time stopped leaves the others' results,
	 * another failure fails the round */
	round_starts(s);
	s->in_round = true;
	for (size_t i = 0; i < n && (rc == 0 || rc == -ETIME); i++) {
		int one = traced(ctx, batches[i], &out[i], err, errlen);

		out[i].stopped = one < 0;
		if (one < 0 && (rc == 0 || one != -ETIME))
			rc = one;
	}
	s->in_round = false;
	return rc;
}

static void setup(struct script *s, struct ab_search_params *p)
{
	unsigned mode;

	memset(p, 0, sizeof(*p));
	s->total = (1 + byte(s) % 192) * GiB;
	p->total_bytes = (uint64_t)s->total;
	p->fraction = (1 + byte(s) % 100) / 100.0;
	if ((mode = byte(s)) % 4 == 0) /* at times more than the whole limit */
		p->reserve_bytes = (uint64_t)(unit(s) * s->total);
	s->base = unit(s) * s->total;
	s->per_sample = s->total / pow(2, 3 + byte(s) % 22); /* 1/8 to 1/16M of the device */
	s->bend = byte(s) % 3 == 0 ? s->per_sample * unit(s) * 0.05 : 0;
	s->jump_at = byte(s) % 4 == 0 ? 1 + byte(s) * 4 : INFINITY;
	s->jump = unit(s) * 0.3 * s->total;
	switch (byte(s) % 5) {
	case 1:
		p->multiple_of = 1 + byte(s) % 16;
		break;
	case 2:
		p->min = byte(s);
		p->max = p->min + byte(s) * 16;
		break;
	case 3:
		p->devices = 1 + byte(s) % 8;
		p->global_batch = p->devices * (1 + (long)(unit(s) * 4096));
		break;
	case 4:
		p->max = 1 + byte(s) * 4;
		p->multiple_of = 1 + byte(s) % 4;
		break;
	}
	p->start = byte(s) % 2 ? byte(s) * 8 : 0;
	p->max_trials = (int)(byte(s) % 10);
	p->trial_cap = (int)(byte(s) % 16);
	if ((mode >> 2) % 4 == 0) {
		p->warm_batch = 1 + byte(s) * 16;
		p->warm_per_sample = byte(s) % 2 ? s->per_sample * (0.5 + unit(s)) : 0;
	}
	p->parallel = (int)((mode >> 4) % 4);
	if (p->parallel > 1)
		p->round = round_fn, p->round_ctx = s;
	p->objective = (mode >> 6) % 2 ? AB_OBJECTIVE_THROUGHPUT : AB_OBJECTIVE_MEMORY;
	now_s = 0;
	if (mode >> 7) { /* a probe's time limit: 0 to 64 s, a few trials' */
		s->deadline = p->deadline = byte(s) / 4.0;
		p->clock = script_clock;
	}
}

static bool allowed(const struct ab_search_params *p, long b)
{
	long m = p->multiple_of > 0 ? p->multiple_of : 1;

	if (b < 1 || b % m || (p->min > 0 && b < p->min) || (p->max > 0 && b > p->max) ||
	    b > AB_BATCH_MAX)
		return false;
	return !p->global_batch || (p->global_batch / p->devices) % b == 0;
}

static int violated(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -1;
}

/* The rounds a search may take: the budget or the cap past it, a warm start's two, a
 * choice's repeat and the steps down of helpers' noise, the throughput objective's four. */
static size_t max_rounds(const struct ab_search_params *p)
{
	int cap = p->trial_cap > 0 ? p->trial_cap : 12;

	return (size_t)cap + 2 + 4 + 4;
}

static int check_decision(const struct ab_search_params *p,
			  const struct ab_trials *t, const struct ab_decision *d, char *why,
			  size_t whylen)
{
	const struct ab_trial *c;

	if (d->batch <= 0 || d->chosen >= t->n)
		return violated(why, whylen, "a decision of batch %ld without a trial", d->batch);
	c = &t->v[d->chosen];
	if (c->batch != d->batch)
		return violated(why, whylen, "chose %ld, its trial ran %ld", d->batch, c->batch);
	/* written out, not ab_trial_fits(): the rule under test is not its own oracle */
	if (c->oom || !c->has_peak || c->steps < 2 ||
	    c->peak_bytes > d->limit_bytes - d->margin_bytes ||
	    (p->total_bytes && c->peak_bytes > p->total_bytes))
		return violated(why, whylen,
				"chose %ld, measured not to fit (oom %d, peak %d %llu, steps %d; "
				"limit %llu less %llu)",
				d->batch, c->oom, c->has_peak, (unsigned long long)c->peak_bytes,
				c->steps, (unsigned long long)d->limit_bytes,
				(unsigned long long)d->margin_bytes);
	if (!allowed(p, d->batch))
		return violated(why, whylen, "chose %ld, not an allowed size", d->batch);
	if (p->global_batch && d->grad_accum * d->batch * p->devices != p->global_batch)
		return violated(why, whylen, "chose %ld x %ld accumulation, not the global batch",
				d->batch, d->grad_accum);
	return 0;
}

int search_check(const uint8_t *data, size_t size, char *why, size_t whylen)
{
	struct script s = {.data = data, .size = size};
	struct ab_search_params p;
	struct ab_trials t = {0};
	struct ab_decision d;
	char err[512] = "";
	int rc, bad = 0;

	setup(&s, &p);
	if (getenv("AUTOBATCH_SEARCH_TRACE"))
		fprintf(stderr, "# total %.4g GiB fraction %.2f reserve %.4g GiB, curve %.4g GiB + %.4g "
				"MiB b + %.4g b^2 (+%.4g GiB from %.0f), min %ld max %ld multiple %ld, "
				"global %ld / %ld, start %ld, budget %d cap %d, warm %ld, parallel %d, "
				"objective %d\n",
			s.total / GiB, p.fraction, (double)p.reserve_bytes / GiB, s.base / GiB,
			s.per_sample / 1048576, s.bend, s.jump / GiB, s.jump_at, p.min, p.max,
			p.multiple_of, p.global_batch, p.devices, p.start, p.max_trials, p.trial_cap,
			p.warm_batch, p.parallel, (int)p.objective);
	rc = ab_search(&p, &t, traced, &s, &d, err, sizeof(err));
	if (rc == 0)
		bad = check_decision(&p, &t, &d, why, whylen);
	else if (rc != -ENOSPC && rc != -EINVAL && rc != -EIO && !(rc == -ETIME && p.deadline > 0))
		bad = violated(why, whylen, "failed with %d: %s", rc, err);
	else if (!err[0])
		bad = violated(why, whylen, "failed with %d and no message", rc);
	if (!bad && s.late)
		bad = violated(why, whylen, "a round started past the time limit of %.2f s",
			       p.deadline);
	for (size_t i = 0; !bad && i < t.n; i++)
		if (!allowed(&p, t.v[i].batch))
			bad = violated(why, whylen, "ran batch %ld, not an allowed size", t.v[i].batch);
	for (size_t i = 0; !bad && i < t.n; i++)
		for (size_t j = i + 1; j < t.n; j++)
			if (t.v[i].batch == t.v[j].batch)
				bad = violated(why, whylen, "batch %ld measured twice as two trials",
					       t.v[i].batch);
	if (!bad && rc == 0 && d.confidence == 65 && !p.deadline)
		bad = violated(why, whylen, "time limit reached without a time limit");
	/* the time ran out "before any fit": none of the trials kept fits (where none had
	 * helpers, so no margin is kept under the limit) */
	bool margin = false;

	for (size_t i = 0; i < t.n; i++)
		margin = margin || t.v[i].helpers || t.v[i].ranks > 1;
	for (size_t i = 0; !bad && !margin && rc == -ETIME && i < t.n; i++) {
		const struct ab_trial *x = &t.v[i];
		double limit = floor(p.fraction * (double)p.total_bytes) - (double)p.reserve_bytes;

		if (x->has_peak && !x->oom && x->steps >= AB_TRIAL_MIN_STEPS &&
		    (double)x->peak_bytes <= limit && allowed(&p, x->batch))
			bad = violated(why, whylen, "-ETIME (%s) with batch %ld fitting", err,
				       x->batch);
	}
	for (size_t i = 0; !bad && i < t.n; i++)
		if (t.v[i].stopped)
			bad = violated(why, whylen, "batch %ld kept, stopped with no result",
				       t.v[i].batch);
	/* the trials of a round that failed to run are not kept: up to a round more */
	if (!bad && s.calls - s.stopped != t.n + t.repeats &&
	    !(rc == -EIO && s.calls <= t.n + t.repeats + (size_t)(p.parallel > 1 ? p.parallel : 1)))
		bad = violated(why, whylen, "%zu trials run (%zu stopped), %zu kept and %zu repeats",
			       s.calls, s.stopped, t.n, t.repeats);
	if (!bad && d.rounds_used > max_rounds(&p))
		bad = violated(why, whylen, "%zu rounds, over the bound of %zu (budget %d, cap %d)",
			       d.rounds_used, max_rounds(&p), p.max_trials, p.trial_cap);
	ab_trials_free(&t);
	return bad;
}
