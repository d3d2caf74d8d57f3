/* fuzz_config.c - libFuzzer target over the config editor: parse, get and set on hostile
 * bytes. Input: byte 0 picks YAML or JSON, byte 1 picks a value and a key; the rest is the
 * file. A successful set must keep check_only_targets_changed(); anything else aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_check.h"
#include "config_edit.h"
#include "presets.h"

#define MAX_LEAVES 64

struct leaves {
	char path[MAX_LEAVES][256];
	size_t n;
};

static int collect(size_t doc, const char *path, const struct ab_node *node, void *arg)
{
	struct leaves *l = arg;

	(void)doc, (void)node;
	if (l->n < MAX_LEAVES && strlen(path) < sizeof(l->path[0]))
		snprintf(l->path[l->n++], sizeof(l->path[0]), "%s", path);
	return 0;
}

static void try_set(const struct ab_config *cfg, const char *key, const char *value,
		    int document)
{
	struct ab_edit e = {key, value};
	char err[512], note[512], why[1024], *out = NULL;
	size_t len;

	if (ab_config_apply(cfg, &e, 1, document, &out, &len, note, sizeof(note), err,
			    sizeof(err)) < 0)
		return;
	if (check_only_targets_changed(cfg, out, len, &e, 1, document, why, sizeof(why)) < 0) {
		fprintf(stderr, "property violated for %s=%s: %s\n", key, value, why);
		abort();
	}
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const values[] = {"1", "256", "0.5", "-3", "1e-4", "12345678"};
	const struct ab_preset *preset;
	struct ab_config *cfg = NULL;
	struct leaves l = {.n = 0};
	char err[512], value[64];

	if (size < 2)
		return 0;
	if (ab_config_parse(data[0] & 1 ? "f.json" : "f.yaml", (const char *)data + 2, size - 2,
			    data[0] & 1 ? AB_FORMAT_JSON : AB_FORMAT_YAML, &cfg, err,
			    sizeof(err)) < 0)
		return 0;
	ab_config_visit(cfg, collect, &l);
	for (size_t i = 0; i < l.n; i++)
		ab_config_get(cfg, l.path[i], -1, value, sizeof(value), err, sizeof(err));
	if (l.n > 0) {
		const char *key = l.path[data[1] % l.n];

		try_set(cfg, key, values[data[1] % 6], -1);
		try_set(cfg, key, values[(data[1] >> 3) % 6], 0);
	}
	ab_preset_detect(cfg, -1, &preset, err, sizeof(err));
	ab_config_free(cfg);
	return 0;
}
