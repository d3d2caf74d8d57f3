/* report_svg.c - `--plot FILE.svg`: peak memory and samples/s against the batch, with the
 * limit line and the chosen batch marked. Plain SVG, readable by any browser.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "report.h"

#define W 720.0
#define H 420.0
#define LEFT 70.0
#define RIGHT 70.0
#define TOP 40.0
#define BOTTOM 50.0

static double xpos(long b, long bmax) { return LEFT + (W - LEFT - RIGHT) * (double)b / (double)bmax; }
static double ypos(double v, double vmax) { return H - BOTTOM - (H - TOP - BOTTOM) * v / vmax; }

int ab_report_svg(const struct ab_report *r, FILE *f)
{
	const struct ab_decision *d = r->nfractions ? &r->fractions[0].decision : NULL;
	double gib = 1024.0 * 1024 * 1024, mem_max = (double)r->total_bytes / gib, rate_max = 0;
	long bmax = 1;

	for (size_t i = 0; i < r->trials->n; i++) {
		const struct ab_trial *t = &r->trials->v[i];

		bmax = t->batch > bmax ? t->batch : bmax;
		rate_max = fmax(rate_max, t->samples_per_s);
	}
	bmax = (long)ceil((double)bmax * 1.1);
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		   "font-family=\"sans-serif\" font-size=\"12\">\n"
		   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
		   "<text x=\"%.0f\" y=\"24\" font-size=\"15\">autobatch: peak memory and throughput "
		   "by batch size (%s)</text>\n",
		W, H, LEFT, r->device_name);
	fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n"
		   "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n",
		LEFT, H - BOTTOM, W - RIGHT, H - BOTTOM, LEFT, TOP, LEFT, H - BOTTOM);
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">batch size (0 to %ld)</text>\n"
		   "<text x=\"14\" y=\"%.0f\" transform=\"rotate(-90 14 %.0f)\" fill=\"#1f5fbf\">peak "
		   "GiB (0 to %.1f)</text>\n",
		(LEFT + W - RIGHT) / 2, H - 15, bmax, H / 2, H / 2, mem_max);
	if (rate_max > 0)
		fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" transform=\"rotate(90 %.0f %.0f)\" "
			   "fill=\"#c0592b\">samples/s (0 to %.0f)</text>\n",
			W - 20, H / 2, W - 20, H / 2, rate_max);
	if (d && d->limit_bytes) {
		double y = ypos((double)d->limit_bytes / gib, mem_max);

		fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#bf1f1f\" "
			   "stroke-dasharray=\"6 4\"/>\n<text x=\"%.0f\" y=\"%.1f\" fill=\"#bf1f1f\">"
			   "limit %.1f GiB</text>\n",
			LEFT, y, W - RIGHT, y, LEFT + 6, y - 5, (double)d->limit_bytes / gib);
	}
	for (size_t i = 0; i < r->trials->n; i++) {
		const struct ab_trial *t = &r->trials->v[i];
		double x = xpos(t->batch, bmax);

		double seen = (double)ab_trial_seen_peak(t) / gib;

		if (t->has_peak)
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#1f5fbf\"><title>batch "
				   "%ld: %.2f GiB</title></circle>\n",
				x, ypos(fmin(seen, mem_max), mem_max), t->batch, seen);
		if (t->has_peak && t->run_growth_bytes) /* where it stands at the run's last step */
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"none\" "
				   "stroke=\"#1f5fbf\"><title>batch %ld at the run's last step: %.2f "
				   "GiB</title></circle>\n",
				x, ypos(fmin((double)t->peak_bytes / gib, mem_max), mem_max), t->batch,
				(double)t->peak_bytes / gib);
		if (!t->has_peak)
			fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" fill=\"#bf1f1f\" text-anchor=\"middle\">"
				   "OOM</text>\n", x, TOP + 12);
		if (t->samples_per_s > 0 && rate_max > 0)
			fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"6\" height=\"6\" fill=\"#c0592b\">"
				   "<title>batch %ld: %.0f samples/s</title></rect>\n",
				x - 3, ypos(t->samples_per_s, rate_max) - 3, t->batch, t->samples_per_s);
	}
	if (d && d->batch) {
		double x = xpos(d->batch, bmax);

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#2a8f3a\" "
			   "stroke-width=\"2\"/>\n<text x=\"%.1f\" y=\"%.0f\" fill=\"#2a8f3a\">chosen "
			   "%ld</text>\n",
			x, TOP, x, H - BOTTOM, x + 4, TOP + 28, d->batch);
	}
	fprintf(f, "</svg>\n");
	return ferror(f) ? -1 : 0;
}
