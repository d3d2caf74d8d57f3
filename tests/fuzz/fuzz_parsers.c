/* fuzz_parsers.c - libFuzzer target over every parser of hostile text that is not a config:
 * the trial report lines (written by the user's program), the probe's JSON result (read by
 * the plugin), plugstack arguments, user options, fractions, sizes, sim specs, host lists,
 * and the proxy model's dimensions (--model, whose sizes then go through every formula).
 * Byte 0 picks the parser; the rest is its input. Crashes, leaks and hangs are findings.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decision.h"
#include "hostlist.h"
#include "model.h"
#include "number.h"
#include "settings.h"
#include "sim.h"
#include "size.h"
#include "trial_report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void plugstack(char *text)
{
	char *argv[64], err[512], *save = NULL;
	struct ab_site site;
	int argc = 0;

	for (char *w = strtok_r(text, " ", &save); w && argc < 64; w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	ab_site_init(&site);
	ab_site_parse(&site, argc, argv, err, sizeof(err));
}

static void options(const char *text, unsigned pick)
{
	struct ab_request req;
	struct ab_site site;
	struct ab_effective eff;
	char err[512];

	ab_site_init(&site);
	ab_request_init(&req);
	ab_request_set(&req, (enum ab_option)(pick % AB_OPT_COUNT), text, err, sizeof(err));
	ab_request_from_env(&req, text, err, sizeof(err));
	ab_request_check(&req, err, sizeof(err));
	ab_settings_resolve(&site, &req, &eff, err, sizeof(err));
}

/* a model that passes the checks must size without overflow at any batch the search tries */
static void model(const char *text)
{
	struct ab_model_layout lay;
	struct ab_model m;
	char err[512], desc[256];

	if (ab_model_parse(text, &m, err, sizeof(err)) < 0)
		return;
	for (long b = 1; b <= 1L << 24 && ab_model_sizeable(&m, b); b <<= 6) {
		ab_model_layout(&m, b, &lay);
		/* the sum of the parts, counted in 64 bits, is what double arithmetic says */
		if ((double)lay.acts_bytes < 0.999 * (double)(lay.act_elems[AB_A_ATT]) * 2)
			abort();
		(void)ab_model_analytic_bytes(&m, b);
		(void)ab_model_flops(&m, b);
	}
	ab_model_describe(&m, desc, sizeof(desc));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ab_trial_report rep;
	char *text, err[512], host[256];
	struct ab_result res;
	struct ab_sim sim;
	uint64_t bytes;
	double f;

	if (size < 1 || size > 65536 || !(text = malloc(size)))
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	switch (data[0] % 9) {
	case 0:
		ab_trial_report_parse((const char *)data + 1, size - 1, &rep);
		ab_trial_report_timing(&rep, 8, &f, &f);
		break;
	case 1:
		ab_result_parse((const char *)data + 1, size - 1, &res, err, sizeof(err));
		free(ab_result_with_eval(text, 3, "hit"));
		break;
	case 2:
		plugstack(text);
		break;
	case 3:
		options(text, data[0] / 8);
		break;
	case 4:
		ab_parse_fraction(text, &f, err, sizeof(err));
		ab_parse_size(text, &bytes, err, sizeof(err));
		break;
	case 5:
		if (!strstr(text, "curve=") && ab_sim_parse(text, &sim, err, sizeof(err)) == 0)
			ab_sim_free(&sim);
		break;
	case 7:
		model(text);
		break;
	default:
		ab_hostlist_first(text, host, sizeof(host));
		ab_hostlist_count(text);
	}
	free(text);
	return 0;
}
