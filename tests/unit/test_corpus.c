/* test_corpus.c - the configs of tests/configs, written in the real styles of the frameworks
 * autobatch serves: each NAME.edits (KEY=VALUE lines, "# preset:" and "# document:" headers)
 * applied to NAME must give exactly NAME.expected, change nothing else, detect the preset,
 * and setting every numeric key to its own value must give back the identical bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "unit.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_edit.h"
#include "config_check.h"
#include "presets.h"

#define MAX_EDITS 16

struct case_file {
	char name[256];
	char preset[64];
	int document;
	size_t n;
	char keys[MAX_EDITS][256];
	char values[MAX_EDITS][64];
	struct ab_edit edits[MAX_EDITS];
};

static const char *dir(void)
{
	static char path[4000];
	const char *src = getenv("srcdir");

	snprintf(path, sizeof(path), "%s/tests/configs", src ? src : ".");
	return path;
}

static char *slurp(const char *name, const char *suffix, size_t *len)
{
	char path[4096 + 512];
	FILE *f;
	char *buf;
	long size;

	snprintf(path, sizeof(path), "%s/%s%s", dir(), name, suffix);
	if (!(f = fopen(path, "rb")))
		fail_msg("cannot open %s", path);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	buf = malloc((size_t)size + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
	buf[size] = '\0';
	fclose(f);
	*len = (size_t)size;
	return buf;
}

static void read_case(const char *name, struct case_file *c)
{
	size_t len;
	char *text = slurp(name, ".edits", &len), *line, *save = NULL;

	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->document = -1;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *eq = strrchr(line, '=');

		if (sscanf(line, "# preset: %63s", c->preset) == 1 ||
		    sscanf(line, "# document: %d", &c->document) == 1)
			continue;
		assert_non_null(eq);
		assert_true(c->n < MAX_EDITS);
		*eq = '\0';
		snprintf(c->keys[c->n], sizeof(c->keys[0]), "%s", line);
		snprintf(c->values[c->n], sizeof(c->values[0]), "%s", eq + 1);
		c->edits[c->n].key = c->keys[c->n];
		c->edits[c->n].value = c->values[c->n];
		c->n++;
	}
	free(text);
}

static void expected_edit(const struct case_file *c, const struct ab_config *cfg)
{
	char *out = NULL, *want, err[512], note[1024], why[1024];
	size_t outlen, wantlen;

	want = slurp(c->name, ".expected", &wantlen);
	if (ab_config_apply(cfg, c->edits, c->n, c->document, &out, &outlen, note, sizeof(note),
			    err, sizeof(err)) < 0)
		fail_msg("%s: %s", c->name, err);
	if (outlen != wantlen || memcmp(out, want, wantlen) != 0)
		fail_msg("%s: the edit differs from %s.expected", c->name, c->name);
	if (check_only_targets_changed(cfg, out, outlen, c->edits, c->n, c->document, why,
				       sizeof(why)) < 0)
		fail_msg("%s: %s", c->name, why);
	free(out);
	free(want);
}

/* Setting numeric keys to the value they have must not change one byte. */
static void identity(const struct case_file *c, const struct ab_config *cfg)
{
	struct ab_edit same[MAX_EDITS];
	char values[MAX_EDITS][64], err[512], note[1024], *out = NULL;
	size_t n = 0, outlen;

	for (size_t i = 0; i < c->n; i++) {
		if (ab_config_get(cfg, c->keys[i], c->document, values[n], sizeof(values[n]), err,
				  sizeof(err)) < 0)
			fail_msg("%s: %s", c->name, err);
		if (!ab_is_number(values[n], strlen(values[n])))
			continue; /* a placeholder such as "auto" must change */
		same[n].key = c->keys[i];
		same[n].value = values[n];
		n++;
	}
	if (ab_config_apply(cfg, same, n, c->document, &out, &outlen, note, sizeof(note), err,
			    sizeof(err)) < 0)
		fail_msg("%s: %s", c->name, err);
	if (outlen != cfg->len || memcmp(out, cfg->buf, outlen) != 0)
		fail_msg("%s: setting keys to their own values changed the file", c->name);
	free(out);
}

static void detection(const struct case_file *c, const struct ab_config *cfg)
{
	const struct ab_preset *p = NULL;
	char err[1024];
	int rc = ab_preset_detect(cfg, c->document, &p, err, sizeof(err));

	if (strcmp(c->preset, "none") == 0) {
		if (rc == 0)
			fail_msg("%s: detected %s, expected none", c->name, p->name);
		return;
	}
	if (rc < 0)
		fail_msg("%s: %s", c->name, err);
	if (strcmp(p->name, c->preset) != 0)
		fail_msg("%s: detected %s, expected %s", c->name, p->name, c->preset);
}

static void corpus(void **state)
{
	DIR *d = opendir(dir());
	struct dirent *e;
	size_t cases = 0;

	(void)state;
	assert_non_null(d);
	while ((e = readdir(d))) {
		struct case_file c;
		struct ab_config *cfg = NULL;
		char err[512], *buf;
		size_t len, nlen = strlen(e->d_name);

		if (nlen < 7 || strcmp(e->d_name + nlen - 6, ".edits") != 0)
			continue;
		e->d_name[nlen - 6] = '\0';
		read_case(e->d_name, &c);
		buf = slurp(c.name, "", &len);
		if (ab_config_parse(c.name, buf, len, AB_FORMAT_AUTO, &cfg, err, sizeof(err)) < 0)
			fail_msg("%s: %s", c.name, err);
		expected_edit(&c, cfg);
		identity(&c, cfg);
		detection(&c, cfg);
		ab_config_free(cfg);
		free(buf);
		cases++;
	}
	closedir(d);
	if (cases < 20)
		fail_msg("only %zu configs in %s; the corpus must have at least 20", cases, dir());
	print_message("%zu configs checked\n", cases);
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(corpus)};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
