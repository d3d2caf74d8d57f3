/* run_output.c - what a run says and writes: a line per trial and the estimate the first
 * one allows, notes of slow trials, the JSON report and the SVG plot.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "run.h"

/* A slow first trial tells how long probing will take: start-up is paid per trial. */
#define ESTIMATE_AFTER_SECONDS 10
#define USUAL_TRIALS 3
#define IRREGULAR_TRIALS 5

static void print_estimate(const struct ab_trial *t)
{
	char usual[32], most[32];

	if (t->seconds < ESTIMATE_AFTER_SECONDS || !(t->startup_s > 0))
		return;
	ab_format_duration(USUAL_TRIALS * t->seconds, usual, sizeof(usual));
	ab_format_duration(IRREGULAR_TRIALS * t->seconds, most, sizeof(most));
	fprintf(stderr, "autobatch: trial 1 started in %.0f s%s; each trial costs about %.0f s: "
			"expect about %s of probing (%d trials; %s if the memory curve is "
			"irregular)\n",
		t->startup_s, t->has_step ? "" : " (no step time)", t->seconds, usual,
		USUAL_TRIALS, most);
}

void run_print_trial(void *arg, size_t index, const struct ab_trial *t, bool fits,
		     uint64_t limit, uint64_t margin)
{
	struct progress *p = arg;
	char line[512];

	ab_report_trial_line(index, t, fits, limit, margin, p->total, line, sizeof(line));
	if (p->parallel > 1)
		fprintf(stderr, "autobatch: round %d: %s\n", t->round, line);
	else
		fprintf(stderr, "autobatch: %s\n", line);
	if (index == 0 && p->parallel <= 1)
		print_estimate(t);
	fflush(stderr);
}

void run_print_note(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "autobatch: %s\n", line);
	fflush(stderr);
}

int run_write_json(const char *path, const char *text)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
	int rc = 0;

	if (!f)
		return fprintf(stderr, "autobatch-probe: cannot write %s: %s\n", path,
			       strerror(errno)),
		       -1;
	if (fprintf(f, "%s\n", text) < 0 || fflush(f) != 0)
		rc = -1;
	if (f != stdout && fclose(f) != 0)
		rc = -1;
	if (rc < 0)
		fprintf(stderr, "autobatch-probe: writing %s failed: %s\n", path, strerror(errno));
	return rc;
}

int run_write_plot(const char *path, const struct ab_report *r)
{
	FILE *f = fopen(path, "w");
	int rc;

	if (!f)
		return fprintf(stderr, "autobatch-probe: cannot write %s: %s\n", path,
			       strerror(errno)),
		       -1;
	rc = ab_report_svg(r, f);
	if (fclose(f) != 0 || rc < 0)
		return fprintf(stderr, "autobatch-probe: writing %s failed\n", path), -1;
	return 0;
}

