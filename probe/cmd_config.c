/* cmd_config.c - `autobatch-probe config get|set|detect`: the config editor on the command
 * line, for users and for the plugin's tests.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "config_edit.h"
#include "error.h"
#include "number.h"
#include "presets.h"

#define MAX_EDITS 32

struct config_args {
	const char *file;
	int document;
	enum ab_format format;
	int nrest;
	char *rest[MAX_EDITS + 1];
};

void config_usage(FILE *out)
{
	fprintf(out,
		"Usage: autobatch-probe config get FILE KEY [--document N] [--format yaml|json]\n"
		"       autobatch-probe config set FILE KEY=VALUE... [--document N] [--format F]\n"
		"       autobatch-probe config detect FILE [--document N]\n");
}

static int usage(void)
{
	config_usage(stderr);
	return 2;
}

static int parse_document(const char *text, int *out)
{
	long v;

	if (ab_parse_whole(text, 0, 1000000, &v) < 0) {
		fprintf(stderr, "autobatch-probe: --document %s: give a document number (from 0)\n",
			text);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static int parse_args(int argc, char **argv, struct config_args *a)
{
	a->document = -1;
	a->format = AB_FORMAT_AUTO;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--document") && i + 1 < argc) {
			if (parse_document(argv[++i], &a->document) < 0)
				return -1;
		} else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
			i++;
			if (strcmp(argv[i], "yaml") && strcmp(argv[i], "json")) {
				fprintf(stderr, "autobatch-probe: --format %s: use yaml or json\n",
					argv[i]);
				return -1;
			}
			a->format = argv[i][0] == 'y' ? AB_FORMAT_YAML : AB_FORMAT_JSON;
		} else if (!a->file) {
			a->file = argv[i];
		} else if (a->nrest < MAX_EDITS) {
			a->rest[a->nrest++] = argv[i];
		} else {
			fprintf(stderr, "autobatch-probe: at most %d keys at once\n", MAX_EDITS);
			return -1;
		}
	}
	return a->file ? 0 : -1;
}

static int get(struct config_args *a)
{
	char err[AB_ERR_MAX], value[4096];
	struct ab_config *cfg;
	int rc;

	if (a->nrest != 1)
		return usage();
	if ((rc = ab_config_load(a->file, a->format, &cfg, err, sizeof(err))) == 0) {
		rc = ab_config_get(cfg, a->rest[0], a->document, value, sizeof(value), err,
				   sizeof(err));
		ab_config_free(cfg);
	}
	if (rc < 0) {
		fprintf(stderr, "autobatch-probe: %s\n", err);
		return 1;
	}
	printf("%s\n", value);
	return 0;
}

static int set(struct config_args *a)
{
	struct ab_edit edits[MAX_EDITS];
	char err[AB_ERR_MAX], note[AB_ERR_MAX * 2];

	if (a->nrest < 1)
		return usage();
	for (int i = 0; i < a->nrest; i++) {
		char *eq = strrchr(a->rest[i], '=');

		if (!eq || eq == a->rest[i]) {
			fprintf(stderr, "autobatch-probe: '%s' is not KEY=VALUE\n", a->rest[i]);
			return 2;
		}
		*eq = '\0';
		edits[i].key = a->rest[i];
		edits[i].value = eq + 1;
	}
	if (ab_config_set_file(a->file, a->format, edits, (size_t)a->nrest, a->document, note,
			       sizeof(note), err, sizeof(err)) < 0) {
		fprintf(stderr, "autobatch-probe: %s\n", err);
		return 1;
	}
	if (note[0])
		fprintf(stderr, "autobatch-probe: %s\n", note);
	return 0;
}

static int detect(struct config_args *a)
{
	const struct ab_preset *p = NULL;
	char err[AB_ERR_MAX];
	struct ab_config *cfg;
	int rc;

	if (a->nrest != 0)
		return usage();
	if ((rc = ab_config_load(a->file, a->format, &cfg, err, sizeof(err))) == 0) {
		rc = ab_preset_detect(cfg, a->document, &p, err, sizeof(err));
		ab_config_free(cfg);
	}
	if (rc < 0) {
		fprintf(stderr, "autobatch-probe: %s\n", err);
		return 1;
	}
	printf("%s\n", p->name);
	return 0;
}

int cmd_config(int argc, char **argv)
{
	struct config_args a = {0};

	if (argc < 2 || parse_args(argc - 2, argv + 2, &a) < 0)
		return usage();
	if (!strcmp(argv[1], "get"))
		return get(&a);
	if (!strcmp(argv[1], "set"))
		return set(&a);
	if (!strcmp(argv[1], "detect"))
		return detect(&a);
	return usage();
}
