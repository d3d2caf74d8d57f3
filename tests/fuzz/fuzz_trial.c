/* fuzz_trial.c - trial report lines (user program / step hook), fed whole vs in two chunks vs
 * through the file watch; OOM text recognition; merge evidence round trip. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trial_report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...) do { fprintf(stderr, "property violated: " __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

static int same_evidence(const struct ab_trial_report *a, const struct ab_trial_report *b)
{
	if (a->steps != b->steps || memcmp(a->step_s, b->step_s, a->steps * sizeof(double)) ||
	    memcmp(a->samples, b->samples, a->steps * sizeof(double)))
		return 0;
	return a->oom == b->oom && a->floor_bytes == b->floor_bytes && a->has_peak == b->has_peak &&
	       a->peak_bytes == b->peak_bytes && a->nranks == b->nranks &&
	       !memcmp(a->rank_peak, b->rank_peak, sizeof(a->rank_peak)) &&
	       a->bound_rank == b->bound_rank && !strcmp(a->bound_node, b->bound_node) &&
	       a->bound_peak_bytes == b->bound_peak_bytes &&
	       a->bound_capacity_bytes == b->bound_capacity_bytes &&
	       !memcmp(&a->lengths, &b->lengths, sizeof(a->lengths)) &&
	       a->alloc_retries == b->alloc_retries && a->eval_said == b->eval_said &&
	       a->eval_batches == b->eval_batches && a->saved_bytes == b->saved_bytes &&
	       a->save_peak_bytes == b->save_peak_bytes && a->step_peak_bytes == b->step_peak_bytes &&
	       a->saving == b->saving && a->held_steps == b->held_steps &&
	       a->held_first == b->held_first && a->held_last == b->held_last &&
	       a->held_rise == b->held_rise && a->held_rise_max == b->held_rise_max &&
	       a->held_said == b->held_said && a->held_flat == b->held_flat &&
	       a->held_rough == b->held_rough;
}

static void check_one(const struct ab_trial_report *r)
{
	double s, rate;
	uint64_t g = ab_trial_report_growth(r);

	if (r->steps > AB_REPORT_MAX_STEPS || r->nranks > AB_REPORT_MAX_RANKS)
		FAIL("counts %zu %zu", r->steps, r->nranks);
	for (size_t i = 0; i < r->steps; i++)
		if (!(r->step_s[i] >= 0) || !isfinite(r->step_s[i]) || !(r->samples[i] >= 0))
			FAIL("step %zu: %g %g", i, r->step_s[i], r->samples[i]);
	if (r->peak_bytes > (1ULL << 60) || r->floor_bytes > (1ULL << 60))
		FAIL("peak");
	if (r->held_rise > r->held_rise_max && r->held_steps > 1)
		FAIL("held rise %llu > max %llu", (unsigned long long)r->held_rise, (unsigned long long)r->held_rise_max);
	if (g > r->held_last && g > r->held_said)
		FAIL("growth %llu above held_last %llu", (unsigned long long)g, (unsigned long long)r->held_last);
	if (g && g < AB_GROWTH_EXACT_MIN_BYTES)
		FAIL("growth %llu below any floor", (unsigned long long)g);
	if (r->lengths.said && r->lengths.read > r->lengths.samples)
		FAIL("lengths");
	if (r->bound_rank < 0 || r->bound_rank >= AB_REPORT_MAX_RANKS)
		FAIL("bound rank %d", r->bound_rank);
	if (ab_trial_report_timing(r, 8, &s, &rate)) {
		if (!(s > 0) || !isfinite(s) || !(rate > 0) || !isfinite(rate))
			FAIL("timing %g %g", s, rate);
		if (r->steps < 2)
			FAIL("timing without a measured step");
	}
}

static struct ab_trial_report whole, chunks, watched, a, b, back;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf;
	size_t len, cut, nl;

	if (size < 2 || size > 40000)
		return 0;
	buf = (const char *)data + 2;
	len = size - 2;
	/* OOM text: no crash, floor bounded */
	(void)ab_text_says_oom(buf, len);
	if (ab_text_oom_floor(buf, len) >= (1ULL << 61))
		FAIL("oom floor");

	ab_trial_report_parse(buf, len, &whole);
	check_one(&whole);

	/* chunked at a line boundary: the same evidence */
	cut = len ? ((size_t)data[1] * 257 + data[0]) % (len + 1) : 0;
	nl = cut;
	while (nl < len && buf[nl] != '\n')
		nl++;
	if (nl < len)
		nl++;
	memset(&chunks, 0, sizeof(chunks));
	ab_trial_report_feed(buf, nl, &chunks);
	ab_trial_report_feed(buf + nl, len - nl, &chunks);
	if (!same_evidence(&whole, &chunks) || whole.bad_lines != chunks.bad_lines)
		FAIL("feed in two chunks at %zu differs from whole", nl);

	/* the watch over a file written in two appends, the second cut anywhere */
	{
		int fd = memfd_create("rep", MFD_CLOEXEC);
		struct ab_report_watch w;

		if (fd >= 0) {
			memset(&w, 0, sizeof(w));
			w.fd = fd;
			if (write(fd, buf, cut) == (ssize_t)cut) {
				ab_report_watch_read(&w, false);
				if (write(fd, buf + cut, len - cut) == (ssize_t)(len - cut)) {
					ab_report_watch_read(&w, false);
					ab_report_watch_read(&w, true);
					/* lines over AB_REPORT_MAX_LINE are bad either way */
					if (!same_evidence(&whole, &w.rep))
						FAIL("watch (append cut at %zu) differs from whole parse: steps %zu/%zu peak %llu/%llu bad %zu/%zu",
						     cut, whole.steps, w.rep.steps,
						     (unsigned long long)whole.peak_bytes,
						     (unsigned long long)w.rep.peak_bytes, whole.bad_lines,
						     w.rep.bad_lines);
				}
			}
			close(fd);
		}
	}

	/* two ranks' reports merged, and what the merge says read back */
	{
		const struct ab_trial_report *reps[2] = {&a, &b};
		struct ab_merge_said said = {0};
		char out[2048];
		size_t n;
		long seen = -1;
		uint64_t growth = 0;

		ab_trial_report_parse(buf, nl, &a);
		ab_trial_report_parse(buf + nl, len - nl, &b);
		n = ab_trial_merge_evidence(reps, 2, &said, out, sizeof(out));
		if (n != strlen(out))
			FAIL("merge length");
		ab_trial_report_parse(out, n, &back);
		if (back.bad_lines)
			FAIL("merge wrote a bad line: %s", out);
		for (int i = 0; i < 2; i++) {
			uint64_t g = ab_trial_report_growth(reps[i]);

			growth = g > growth ? g : growth;
		}
		if (a.eval_said && b.eval_said)
			seen = a.eval_batches < b.eval_batches ? a.eval_batches : b.eval_batches;
		if (back.held_said != growth)
			FAIL("merge growth %llu read back as %llu", (unsigned long long)growth,
			     (unsigned long long)back.held_said);
		if (seen >= 0 && (!back.eval_said || back.eval_batches != seen))
			FAIL("merge eval %ld read back as %ld", seen, back.eval_batches);
		if ((a.lengths.said || b.lengths.said) != back.lengths.said)
			FAIL("merge lengths");
		if (back.lengths.said) {
			const struct ab_lengths *l = a.lengths.said ? &a.lengths : &b.lengths;

			if (l->run_longest != back.lengths.run_longest || l->read != back.lengths.read ||
			    l->samples != back.lengths.samples || l->varies != back.lengths.varies ||
			    l->longest_first != back.lengths.longest_first ||
			    l->padded_to != back.lengths.padded_to)
				FAIL("merge lengths differ: %s", out);
		}
	}
	return 0;
}
