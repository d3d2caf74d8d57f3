/* test_config.c - the config editor: dot paths, every YAML/JSON feature it must keep byte
 * for byte, every refusal with its message, and the safe file rewrite (lib/core/config_*.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "unit.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config_edit.h"
#include "config_check.h"
#include "config_keys.h"
#include "config_path.h"
#include "presets.h"

#define NOBODY 65534

static char err[1024], note[1024];

static struct ab_config *parse(const char *name, const char *text)
{
	struct ab_config *cfg = NULL;

	if (ab_config_parse(name, text, strlen(text), AB_FORMAT_AUTO, &cfg, err, sizeof(err)) < 0)
		fail_msg("%s: %s", name, err);
	return cfg;
}

/* Edits one key and checks the result byte for byte, and that nothing else changed. */
static void expect_edit_doc(const char *name, const char *text, const char *key,
			    const char *value, int document, const char *want)
{
	struct ab_config *cfg = parse(name, text);
	struct ab_edit e = {key, value};
	char *out = NULL, why[1024];
	size_t len;

	if (ab_config_apply(cfg, &e, 1, document, &out, &len, note, sizeof(note), err,
			    sizeof(err)) < 0)
		fail_msg("%s %s=%s: %s", name, key, value, err);
	if (strlen(want) != len || memcmp(out, want, len) != 0)
		fail_msg("%s %s=%s gave:\n%s\nwanted:\n%s", name, key, value, out, want);
	if (check_only_targets_changed(cfg, out, len, &e, 1, document, why, sizeof(why)) < 0)
		fail_msg("%s: %s", name, why);
	free(out);
	ab_config_free(cfg);
}

static void expect_edit(const char *name, const char *text, const char *key, const char *value,
			const char *want)
{
	expect_edit_doc(name, text, key, value, -1, want);
}

/* A lookup (and so an edit) of key must be refused with a message containing want. */
static void expect_refusal_doc(const char *name, const char *text, const char *key,
			       int document, const char *want)
{
	struct ab_config *cfg = parse(name, text);
	struct ab_edit e = {key, "64"};
	char *out = NULL;
	size_t len;

	err[0] = '\0';
	if (ab_config_apply(cfg, &e, 1, document, &out, &len, note, sizeof(note), err,
			    sizeof(err)) == 0)
		fail_msg("%s: %s was edited:\n%s", name, key, out);
	assert_null(out);
	assert_contains(err, want);
	ab_config_free(cfg);
}

static void expect_refusal(const char *name, const char *text, const char *key,
			   const char *want)
{
	expect_refusal_doc(name, text, key, -1, want);
}

static void expect_parse_error(const char *name, const char *text, size_t len,
			       const char *want)
{
	struct ab_config *cfg = NULL;

	err[0] = '\0';
	if (ab_config_parse(name, text, len, AB_FORMAT_AUTO, &cfg, err, sizeof(err)) == 0)
		fail_msg("%s parsed", name);
	assert_null(cfg);
	assert_contains(err, want);
}

/* ---- paths ------------------------------------------------------------------------- */

static void paths(void **state)
{
	struct ab_path p;
	char text[256];

	(void)state;
	assert_int_equal(ab_path_parse("a.b[2].c", &p, err, sizeof(err)), 0);
	assert_int_equal(p.n, 4);
	assert_string_equal(p.seg[0].key, "a");
	assert_true(p.seg[2].is_index);
	assert_int_equal(p.seg[2].index, 2);
	ab_path_format(&p, p.n, text, sizeof(text));
	assert_string_equal(text, "a.b[2].c");
	ab_path_free(&p);

	assert_int_equal(ab_path_parse("callbacks[1].flags[\"csx.performance.mbs\"]", &p, err,
				       sizeof(err)),
			 0);
	assert_int_equal(p.n, 4);
	assert_string_equal(p.seg[3].key, "csx.performance.mbs");
	ab_path_free(&p);
	assert_int_equal(ab_path_parse("['a.b'].c", &p, err, sizeof(err)), 0);
	assert_string_equal(p.seg[0].key, "a.b");
	ab_path_free(&p);

	static const char *const bad[] = {"", ".a", "a.", "a..b", "a[", "a[x]", "a[-1]",
					  "a[\"x]", "a.[0]", "a[1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (ab_path_parse(bad[i], &p, err, sizeof(err)) == 0)
			fail_msg("key '%s' accepted", bad[i]);
		assert_contains(err, *bad[i] ? "invalid key" : "empty key");
	}
}

/* ---- what an edit keeps ------------------------------------------------------------ */

static void yaml_features(void **state)
{
	(void)state;
	expect_edit("c.yaml", "a:\n  b: 8   # micro batch\n  c: 1\n", "a.b", "16",
		    "a:\n  b: 16   # micro batch\n  c: 1\n");
	expect_edit("c.yaml", "bs: \"100\"\n", "bs", "256", "bs: \"256\"\n");
	expect_edit("c.yaml", "bs: '100'\n", "bs", "256", "bs: '256'\n");
	/* false (a trial's ramp-up off) unquoted: a quoted "false" is a true string */
	expect_edit("c.yaml", "ramp: \"1\"\n", "ramp", "false", "ramp: false\n");
	expect_edit("c.yaml", "bs: \"auto\"\n", "bs", "256", "bs: 256\n");
	expect_edit("c.yaml", "bs: ${oc.env:BATCH_SIZE,256}\n", "bs", "64", "bs: 64\n");
	expect_edit("c.yaml", "bs: '${oc.env:BATCH_SIZE,256}'\n", "bs", "64", "bs: 64\n");
	expect_edit("c.yaml", "bs: null\nx: 1\n", "bs", "8", "bs: 8\nx: 1\n");
	expect_edit("c.yaml", "bs:\nx: 1\n", "bs", "8", "bs: 8\nx: 1\n");
	/* an empty value after a list's "-" or its own anchor: "-8", "&a8" would be others */
	expect_edit("c.yaml", "l:\n  -\n  - 2\n", "l[0]", "8", "l:\n  - 8\n  - 2\n");
	expect_edit("c.yaml", "bs: &a\nw: *a\n", "bs", "8", "bs: &a 8\nw: *a\n");
	/* where no value can go in place, the refusal is the edit's, not the file's */
	expect_refusal("c.yaml", "x: {bs}\n", "x.bs",
		       "key 'x.bs' cannot be edited where it stands (the edited file would not "
		       "read it back: ");
	expect_edit("c.yaml", "bs: !!int 4\n", "bs", "8", "bs: !!int 8\n");
	/* a comment after the anchor, the value on the next line: one value all the same */
	expect_edit("c.yaml", "bs: &a # c\n  32\nw: *a\n", "bs", "16", "bs: &a # c\n  16\nw: *a\n");
	expect_edit("c.yaml", "bs: &b 4 # c\nx: *b\n", "bs", "8", "bs: &b 8 # c\nx: *b\n");
	assert_contains(note, "carries the anchor &b; 1 alias follows the new value");
	/* inside an anchored mapping that an alias or a merge repeats: said too; unrepeated, not */
	expect_edit("c.yaml", "base: &b\n  bs: 8\nrun:\n  <<: *b\n  lr: 2\n", "base.bs", "16",
		    "base: &b\n  bs: 16\nrun:\n  <<: *b\n  lr: 2\n");
	assert_contains(note, "key 'base.bs' is inside the anchor &b (line 1); 1 alias of it "
			      "follows the new value");
	expect_edit("c.yaml", "base: &b\n  bs: 8\n", "base.bs", "16", "base: &b\n  bs: 16\n");
	assert_string_equal(note, "");
	expect_edit("c.yaml", "l: [1, {bs: 2}, 3]\n", "l[1].bs", "9", "l: [1, {bs: 9}, 3]\n");
	expect_edit("c.yaml", "m: {a: 1, b: 2}\n", "m.b", "20", "m: {a: 1, b: 20}\n");
	expect_edit("c.yaml", "- a: 1\n- a: 2\n", "[1].a", "5", "- a: 1\n- a: 5\n");
	expect_edit("c.yaml", "a:\r\n  b: 8\r\n", "a.b", "16", "a:\r\n  b: 16\r\n");
	expect_edit("c.yaml", "\xef\xbb\xbf" "a: 8\n", "a", "16", "\xef\xbb\xbf" "a: 16\n");
	expect_edit("c.yaml", "n: \"\xc3\xa9\xc3\xa9\"\nk\xc3\xbc: 8\n", "k\xc3\xbc", "16",
		    "n: \"\xc3\xa9\xc3\xa9\"\nk\xc3\xbc: 16\n");
	expect_edit("c.yaml", "\"a.b\": 1\n", "[\"a.b\"]", "2", "\"a.b\": 2\n");
	expect_edit("c.yaml", "a: 1", "a", "2", "a: 2"); /* no trailing newline stays so */
	expect_edit("c.yaml", "a: 1.5e-4\n", "a", "0.001", "a: 0.001\n");
	expect_edit("c.yaml", "a:\t1\n", "a", "2", "a:\t2\n");
	expect_edit_doc("c.yaml", "a: 1\n---\na: 2\n", "a", "7", 1, "a: 1\n---\na: 7\n");
	expect_edit("c.yaml", "x: 1\n---\na: 2\n", "a", "7", "x: 1\n---\na: 7\n");
}

static void json_features(void **state)
{
	(void)state;
	expect_edit("c.json", "{\"a\": {\"b\": 8}}", "a.b", "16", "{\"a\": {\"b\": 16}}");
	expect_edit("c.json", "{\n\t\"a\": 8,\n\t\"b\": \"x\"\n}\n", "a", "16",
		    "{\n\t\"a\": 16,\n\t\"b\": \"x\"\n}\n");
	expect_edit("c.json", "{\"a\": \"100\"}", "a", "256", "{\"a\": \"256\"}");
	expect_edit("c.json", "{\"a\": \"auto\"}", "a", "256", "{\"a\": 256}");
	expect_edit("c.json", "{\"a\": null}", "a", "4", "{\"a\": 4}");
	expect_edit("c.json", "{\"l\": [1, 2, {\"x\": [3]}]}", "l[2].x[0]", "4",
		    "{\"l\": [1, 2, {\"x\": [4]}]}");
	expect_edit("c.json", "{\"k\\u00e9\": 1}", "k\xc3\xa9", "2", "{\"k\\u00e9\": 2}");
	expect_edit("c.json", "\xef\xbb\xbf{\"a\": 1}\r\n", "a", "2", "\xef\xbb\xbf{\"a\": 2}\r\n");
	expect_edit("c.json", "{\"a.b\": {\"c\": 1}}", "[\"a.b\"].c", "2",
		    "{\"a.b\": {\"c\": 2}}");
	expect_edit("config", "{\"a\": 1}", "a", "2", "{\"a\": 2}"); /* JSON by content */
}

static void get_values(void **state)
{
	struct ab_config *cfg = parse("c.yaml", "a: 'x y'\nb: \"1\\t2\"\nc: 3 # n\n");
	char value[64];

	(void)state;
	assert_int_equal(ab_config_get(cfg, "a", -1, value, sizeof(value), err, sizeof(err)), 0);
	assert_string_equal(value, "x y");
	assert_int_equal(ab_config_get(cfg, "b", -1, value, sizeof(value), err, sizeof(err)), 0);
	assert_string_equal(value, "1\t2");
	assert_int_equal(ab_config_get(cfg, "c", -1, value, sizeof(value), err, sizeof(err)), 0);
	assert_string_equal(value, "3");
	assert_int_equal(ab_config_get(cfg, "c", -1, value, 1, err, sizeof(err)), -ENAMETOOLONG);
	ab_config_free(cfg);
}

/* ---- refusals ---------------------------------------------------------------------- */

static void refusals(void **state)
{
	(void)state;
	expect_refusal("c.yaml", "train:\n  micro_batch_size: 4\n  lr: 1\n", "train.micro_batch",
		       "c.yaml: key 'train.micro_batch' not found; nearest keys: "
		       "train.micro_batch_size (line 2)");
	/* a suggestion is a path as it can be typed back: a key with a quote in it too */
	expect_refusal("c.yaml", "\"it's.bs\": 1\n", "its.bs", "nearest keys: [\"it's.bs\"] (line 1)");
	expect_edit("c.yaml", "\"it's.bs\": 1\n", "[\"it's.bs\"]", "2", "\"it's.bs\": 2\n");
	expect_refusal("c.yaml", "a:\n  b: 1\n", "a", "c.yaml: line 2: key 'a' is a mapping");
	expect_refusal("c.yaml", "a: [1, 2]\n", "a", "key 'a' is a list, not a single value: "
						     "name an item ([0])");
	expect_refusal("c.yaml", "a: [1, 2]\n", "a[5]", "the list has 2 items");
	expect_refusal("c.yaml", "a: [1, 2]\n", "a.b", "'b' is looked up in a list");
	expect_refusal("c.yaml", "a: {b: 1}\n", "a[0]", "indexes [0] into a mapping");
	expect_refusal("c.yaml", "base: &bs 8\nrun:\n  bs: *bs\n", "run.bs",
		       "c.yaml: line 3: key 'run.bs' is the alias *bs, which repeats the anchor "
		       "&bs at line 1");
	expect_refusal("c.yaml", "d: &d\n  bs: 8\nrun: *d\n", "run.bs",
		       "key 'run.bs' goes through the alias *d");
	expect_refusal("c.yaml", "base: &base\n  bs: 8\nrun:\n  <<: *base\n  lr: 1\n", "run.bs",
		       "c.yaml: line 4: key 'run.bs' comes only from the merge '<<: *base': edit "
		       "'bs' under the anchor &base (line 1)");
	expect_refusal("c.yaml", "run:\n  <<: {bs: 8}\n", "run.bs", "comes only from a '<<' merge");
	expect_refusal("c.yaml", "a: |\n  8\n", "a", "line 1: key 'a' is a block scalar");
	expect_refusal("c.yaml", "a: >-\n  8\n", "a", "is a block scalar");
	expect_refusal("c.yaml", "a: 8\n  9\n", "a", "lines 1-2: key 'a' spans several lines");
	expect_refusal("c.yaml", "a: 1\nb: 2\na: 3\n", "a",
		       "c.yaml: key 'a' occurs twice (lines 1 and 3)");
	expect_refusal("c.json", "{\"a\": 1,\n \"a\": 2}", "a", "occurs twice (lines 1 and 2)");
	expect_refusal("c.yaml", "a: 1\n---\na: 2\n", "a",
		       "key 'a' is in documents 0 (line 1) and 1 (line 3): pick one with "
		       "--document N");
	expect_refusal_doc("c.yaml", "a: 1\n", "a", 3, "has 1 document: --document 3 is out of "
						       "range");
	expect_refusal("c.yaml", "a: 1\n", "a..b", "invalid key 'a..b' at character 3");
}

static void bad_values(void **state)
{
	struct ab_config *cfg = parse("c.yaml", "a: 1\nb: 2\n");
	static const char *const bad[] = {"", "abc", "1 # x", "1\nc: 3", "0x10", "--1", "1e",
					  "\"1\"", "1.2.3", "true"};
	struct ab_edit same[2] = {{"a", "3"}, {"a", "4"}};
	char *out = NULL;
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ab_edit e = {"a", bad[i]};

		if (ab_config_apply(cfg, &e, 1, -1, &out, &len, note, sizeof(note), err,
				    sizeof(err)) == 0)
			fail_msg("value '%s' accepted", bad[i]);
		assert_contains(err, "is not a number");
	}
	assert_int_equal(ab_config_apply(cfg, same, 2, -1, &out, &len, note, sizeof(note), err,
					 sizeof(err)),
			 -EINVAL);
	assert_contains(err, "keys 'a' and 'a' name the same value");
	ab_config_free(cfg);
}

/* A trial's report path into a key that holds a string (MaxText's metrics_file), quoted as
 * the file quotes it or as JSON must; refused in place of a number, or with a character
 * that would need quoting or escaping. */
static void path_values(void **state)
{
	static const char path[] = "/tmp/autobatch-probe.n1.42.Xa_9/trial-1-batch-8/report.jsonl";
	struct ab_config *cfg = parse("c.yaml", "a: 1\nm: x\n");
	static const char *const bad[] = {"tmp/r", "/tmp/a b", "/tmp/\"x", "/tmp/a#b", "/tmp/a:b",
					  "/tmp/a\nm: 2", "/"};
	char *out = NULL;
	size_t len;

	(void)state;
	expect_edit("c.yaml", "metrics_file: \"\" # local file\nsteps: 5\n", "metrics_file", path,
		    "metrics_file: \"/tmp/autobatch-probe.n1.42.Xa_9/trial-1-batch-8/report.jsonl\" # local file\nsteps: 5\n");
	expect_edit("c.yaml", "metrics_file: ''\n", "metrics_file", path,
		    "metrics_file: '/tmp/autobatch-probe.n1.42.Xa_9/trial-1-batch-8/report.jsonl'\n");
	expect_edit("c.yaml", "metrics_file:\nsteps: 5\n", "metrics_file", path,
		    "metrics_file: /tmp/autobatch-probe.n1.42.Xa_9/trial-1-batch-8/report.jsonl\nsteps: 5\n");
	expect_edit("c.json", "{\"metrics_file\": \"\", \"steps\": 5}", "metrics_file", path,
		    "{\"metrics_file\": \"/tmp/autobatch-probe.n1.42.Xa_9/trial-1-batch-8/report.jsonl\", \"steps\": 5}");
	expect_edit("c.json", "{\"metrics_file\": null}", "metrics_file", "/tmp/r.jsonl",
		    "{\"metrics_file\": \"/tmp/r.jsonl\"}");
	/* never in place of a number */
	struct ab_edit e = {"a", "/tmp/r.jsonl"};
	assert_int_equal(ab_config_apply(cfg, &e, 1, -1, &out, &len, note, sizeof(note), err,
					 sizeof(err)), -EINVAL);
	assert_contains(err, "key 'a' does not hold a string, so it cannot name /tmp/r.jsonl");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		e = (struct ab_edit){"m", bad[i]};
		if (ab_config_apply(cfg, &e, 1, -1, &out, &len, note, sizeof(note), err,
				    sizeof(err)) == 0)
			fail_msg("value '%s' accepted", bad[i]);
	}
	ab_config_free(cfg);
}

static void invalid_files(void **state)
{
	char *big;

	(void)state;
	expect_parse_error("c.yaml", "a: [1, 2\nb: 3\n", 14,
			   "c.yaml is not valid YAML: line 2, column 2: did not find expected ','");
	expect_parse_error("c.yaml", "a: *nowhere\n", 12, "the alias *nowhere has no anchor");
	/* the column is the offending byte's, as Python's json says it */
	expect_parse_error("c.json", "{\"a\": 1,}", 9,
			   "c.json is not valid JSON: line 1, column 9: unexpected character");
	expect_parse_error("c.json", "{\"a\": 1 \"b\": 2}", 15, "line 1, column 9: object value");
	expect_parse_error("c.json", "{\"a\": 01}", 9, "line 1, column 8: number expected");
	/* NaN and Infinity, which json-c (and Python) accept, beside the key */
	expect_edit("c.json", "{\"x\": NaN, \"y\": -Infinity, \"bs\": 1}", "bs", "8",
		    "{\"x\": NaN, \"y\": -Infinity, \"bs\": 8}");
	expect_parse_error("c.json", "{\"a\": 1}\n{\"b\": 2}", 17,
			   "c.json is not valid JSON: line 2, column 1: text after the end of the "
			   "JSON value");
	expect_parse_error("c.json", "{\n  \"a\": 1,\n  \"b\": ", 18,
			   "line 3, column 7: unexpected end of file");
	expect_parse_error("c.yaml", "a: \xff\n", 5, "c.yaml is not UTF-8 (byte offset 3, line 1)");
	expect_parse_error("c.yaml", "a: \xc0\xaf\n", 6, "is not UTF-8");      /* overlong */
	expect_parse_error("c.yaml", "a: \xed\xa0\x80\n", 7, "is not UTF-8"); /* surrogate */
	expect_parse_error("c.yaml", "a: 1\n\0\n", 7, "looks like a binary file (a NUL byte on "
						      "line 2)");
	big = malloc(AB_CONFIG_MAX_BYTES + 2);
	assert_non_null(big);
	memset(big, '#', AB_CONFIG_MAX_BYTES + 1);
	expect_parse_error("c.yaml", big, AB_CONFIG_MAX_BYTES + 1, "more than the 8388608 a "
								   "config may have");
	free(big);
	/* Nesting deeper than any config is refused, not a stack overflow. */
	big = malloc(20001);
	memset(big, '[', 20000);
	expect_parse_error("c.yaml", big, 20000, "c.yaml");
	expect_parse_error("c.json", big, 20000, "not valid JSON");
	free(big);
}

/* ---- presets ----------------------------------------------------------------------- */

/* A NeMo/Megatron config's tensor, pipeline and context parallel sizes: the step's tasks over
 * their product are the data-parallel replicas a global batch is divided among (issue 41). */
static void data_parallel_width(void **state)
{
	struct ab_config *cfg;
	struct ab_keys k;

	(void)state;
	cfg = parse("nemo.yaml", "model:\n  micro_batch_size: 4\n  global_batch_size: 256\n"
				 "  tensor_model_parallel_size: 2\n  pipeline_model_parallel_size: 2\n"
				 "  context_parallel_size: 1\n");
	assert_int_equal(ab_keys_find(cfg, NULL, NULL, &k, err, sizeof(err)), 0);
	assert_string_equal(k.preset->name, "nemo");
	assert_int_equal(k.model_parallel, 4);
	assert_string_equal(k.parallel_text, "tensor 2 x pipeline 2");
	assert_int_equal(ab_keys_data_parallel(&k, 16, NULL, "nemo.yaml", err, sizeof(err)), 4);
	assert_int_equal(ab_keys_data_parallel(&k, 6, NULL, "nemo.yaml", err, sizeof(err)), 0);
	assert_string_equal(err, "the step's 6 tasks are not a whole number of model-parallel "
				 "groups of 4 (tensor 2 x pipeline 2 in nemo.yaml): give srun a "
				 "multiple of 4 tasks");
	/* a launcher's workers: the fix is its count, not srun's */
	assert_int_equal(ab_keys_data_parallel(&k, 6, "torchrun", "nemo.yaml", err, sizeof(err)), 0);
	assert_string_equal(err, "the 6 workers torchrun starts are not a whole number of "
				 "model-parallel groups of 4 (tensor 2 x pipeline 2 in nemo.yaml): "
				 "have it start a multiple of 4");
	ab_config_free(cfg);
	/* a size that is no whole number from 1, or that the lookup refuses (twice, an alias, a
	 * list, in two documents), is an error naming the key, never taken as 1 or cut to 2 */
	static const struct {
		const char *text, *says;
	} bad[] = {
		{"  tensor_model_parallel_size: 0\n", "model.tensor_model_parallel_size is '0', not a "
						      "whole number from 1 to 65536: fix it in the config"},
		{"  tensor_model_parallel_size: 2.5\n", "is '2.5', not a whole number from 1"},
		{"  pipeline_model_parallel_size: -2\n", "is '-2', not a whole number from 1"},
		{"  tensor_model_parallel_size: 2\n  tensor_model_parallel_size: 4\n", "occurs twice"},
		{"  tensor_model_parallel_size: [2]\n", "is a list, not a single value"},
		{"  tensor_model_parallel_size: &tp 2\n  pipeline_model_parallel_size: *tp\n",
		 "is the alias *tp"},
		{"  global_batch_size: 100.7\n", "model.global_batch_size is '100.7', not a whole "
						  "number from 1 to 2147483647"},
		{"  global_batch_size: -1\n", "model.global_batch_size is '-1'"},
	};
	char text[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "model:\n  micro_batch_size: 4\n%s", bad[i].text);
		cfg = parse("nemo.yaml", text);
		assert_true(ab_keys_find(cfg, NULL, NULL, &k, err, sizeof(err)) < 0);
		assert_contains(err, bad[i].says);
		ab_config_free(cfg);
	}
	/* the sizes and the global batch in YAML's other spellings, as PyYAML reads them */
	cfg = parse("nemo.yaml", "model:\n  micro_batch_size: 4\n  global_batch_size: 1_024\n"
				 "  tensor_model_parallel_size: 0x2\n");
	assert_int_equal(ab_keys_find(cfg, NULL, NULL, &k, err, sizeof(err)), 0);
	assert_int_equal(k.file_global, 1024);
	assert_int_equal(k.model_parallel, 2);
	ab_config_free(cfg);
	/* a word a framework fills in itself is no global batch, and the key is still written */
	cfg = parse("nemo.yaml", "model:\n  micro_batch_size: 4\n  global_batch_size: "
				 "${multiply:${model.micro_batch_size},${trainer.devices},"
				 "${trainer.num_nodes}}\n");
	assert_int_equal(ab_keys_find(cfg, NULL, NULL, &k, err, sizeof(err)), 0);
	assert_string_equal(k.global, "model.global_batch_size");
	assert_int_equal(k.file_global, 0);
	ab_config_free(cfg);
	/* a global batch asked for a Hugging Face config without gradient_accumulation_steps:
	 * the accumulation derived could not be written, and the Trainer reads only the file */
	cfg = parse("hf.json", "{\"per_device_train_batch_size\": 8, \"max_steps\": 100}");
	assert_int_equal(ab_keys_find(cfg, NULL, NULL, &k, err, sizeof(err)), 0);
	assert_int_equal(ab_keys_check_global(&k, cfg, 0, "hf.json", err, sizeof(err)), 0);
	assert_int_equal(ab_keys_check_global(&k, cfg, 512, "hf.json", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--autobatch-global-batch=512: hf.json has no "
				 "gradient_accumulation_steps, and the huggingface preset's framework "
				 "reads the gradient accumulation only from its config: add "
				 "gradient_accumulation_steps, set to 1, to hf.json, where autobatch "
				 "writes the accumulation it derives");
	ab_config_free(cfg);
	cfg = parse("hf.json", "{\"per_device_train_batch_size\": 8, "
			       "\"gradient_accumulation_steps\": 2}");
	assert_int_equal(ab_keys_find(cfg, NULL, NULL, &k, err, sizeof(err)), 0);
	assert_int_equal(ab_keys_check_global(&k, cfg, 512, "hf.json", err, sizeof(err)), 0);
	ab_config_free(cfg);
	/* a file two presets match equally (Hugging Face's batch key and torchtune's): with the
	 * user's key, the one whose batch key it is, never the other's by the table's order */
	cfg = parse("amb.yaml", "per_device_train_batch_size: 8\nbatch_size: 32\n"
				"gradient_accumulation_steps: 4\n");
	assert_int_equal(ab_keys_find(cfg, NULL, "per_device_train_batch_size", &k, err,
				      sizeof(err)), 0);
	assert_string_equal(k.preset->name, "huggingface");
	assert_int_equal(ab_keys_find(cfg, NULL, "batch_size", &k, err, sizeof(err)), 0);
	assert_string_equal(k.preset->name, "torchtune");
	assert_int_equal(ab_keys_find(cfg, NULL, "mine", &k, err, sizeof(err)), -ENOENT);
	assert_true(ab_keys_find(cfg, NULL, NULL, &k, err, sizeof(err)) == -EEXIST);
	ab_config_free(cfg);
	/* a nested key: where it goes; axolotl's batch_size: what to replace */
	cfg = parse("l.yaml", "data:\n  batch_size: 8\ntrainer:\n  max_epochs: 1\n");
	assert_int_equal(ab_keys_find(cfg, "lightning", NULL, &k, err, sizeof(err)), 0);
	assert_int_equal(ab_keys_check_global(&k, cfg, 64, "l.yaml", err, sizeof(err)), -EINVAL);
	assert_contains(err, "l.yaml has no trainer.accumulate_grad_batches, and the lightning "
			     "preset's framework reads the gradient accumulation only from its "
			     "config: add accumulate_grad_batches, set to 1, under trainer in l.yaml");
	ab_config_free(cfg);
	cfg = parse("ax.yaml", "micro_batch_size: 2\nbatch_size: 16\nsequence_len: 512\n");
	assert_int_equal(ab_keys_find(cfg, "axolotl", NULL, &k, err, sizeof(err)), 0);
	assert_int_equal(ab_keys_check_global(&k, cfg, 64, "ax.yaml", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--autobatch-global-batch=64: ax.yaml sets batch_size, from which "
				 "axolotl derives its accumulation: replace it with "
				 "gradient_accumulation_steps, set to 1, where autobatch writes the "
				 "accumulation it derives");
	ab_config_free(cfg);
	/* a key of the program's own: it reads $AUTOBATCH_GRAD_ACCUM itself */
	cfg = parse("own.yaml", "batch: 8\n");
	assert_int_equal(ab_keys_find(cfg, NULL, "batch", &k, err, sizeof(err)), 0);
	assert_int_equal(ab_keys_check_global(&k, cfg, 512, "own.yaml", err, sizeof(err)), 0);
	ab_config_free(cfg);
	/* DeepSpeed's autotp_size 0 is its default, AutoTP off: no tensor width */
	cfg = parse("ds.json", "{\"train_micro_batch_size_per_gpu\": 4, \"train_batch_size\": 64,"
			       " \"tensor_parallel\": {\"autotp_size\": 0}}");
	assert_int_equal(ab_keys_find(cfg, NULL, NULL, &k, err, sizeof(err)), 0);
	assert_int_equal(k.model_parallel, 1);
	assert_int_equal(k.file_global, 64);
	ab_config_free(cfg);
	cfg = parse("ds.json", "{\"train_micro_batch_size_per_gpu\": 4, \"train_batch_size\": 64,"
			       " \"train_batch_size\": 32}");
	assert_true(ab_keys_find(cfg, NULL, NULL, &k, err, sizeof(err)) < 0);
	assert_contains(err, "train_batch_size");
	ab_config_free(cfg);
	/* DeepSpeed: AutoTP's tensor width and Ulysses' sequence width divide the world */
	cfg = parse("ds.json", "{\"train_micro_batch_size_per_gpu\": 4, \"train_batch_size\": 64,"
			       " \"tensor_parallel\": {\"autotp_size\": 2},"
			       " \"sequence_parallel_size\": 4}");
	assert_int_equal(ab_keys_find(cfg, NULL, NULL, &k, err, sizeof(err)), 0);
	assert_string_equal(k.preset->name, "deepspeed");
	assert_int_equal(k.model_parallel, 8);
	assert_string_equal(k.parallel_text, "tensor 2 x context 4");
	assert_int_equal(ab_keys_data_parallel(&k, 16, NULL, "ds.json", err, sizeof(err)), 2);
	ab_config_free(cfg);
	/* no parallel keys: every task is a replica */
	cfg = parse("ds.json", "{\"train_micro_batch_size_per_gpu\": 4, \"train_batch_size\": 64}");
	assert_int_equal(ab_keys_find(cfg, NULL, NULL, &k, err, sizeof(err)), 0);
	assert_int_equal(k.model_parallel, 1);
	assert_int_equal(ab_keys_data_parallel(&k, 6, NULL, "ds.json", err, sizeof(err)), 6);
	ab_config_free(cfg);
	/* MaxText's per_device_batch_size is per device whatever the mesh (pyconfig: the micro
	 * batch is num_devices x per_device_batch_size): ici_ and dcn_ axes divide nothing */
	cfg = parse("mt.yml", "per_device_batch_size: 4\nbase_emb_dim: 512\n"
			      "ici_tensor_parallelism: 4\ndcn_pipeline_parallelism: 2\n");
	assert_int_equal(ab_keys_find(cfg, NULL, NULL, &k, err, sizeof(err)), 0);
	assert_string_equal(k.preset->name, "maxtext");
	assert_int_equal(k.model_parallel, 1);
	assert_int_equal(ab_keys_data_parallel(&k, 8, NULL, "mt.yml", err, sizeof(err)), 8);
	ab_config_free(cfg);
}

static void presets(void **state)
{
	const struct ab_preset *p = NULL;
	struct ab_config *cfg;

	(void)state;
	assert_non_null(ab_preset_find("deepspeed"));
	assert_null(ab_preset_find("nope"));
	cfg = parse("c.json", "{\"train_batch_size\": 64, \"gradient_accumulation_steps\": 2}");
	assert_int_equal(ab_preset_detect(cfg, -1, &p, err, sizeof(err)), 0);
	assert_string_equal(p->name, "deepspeed");
	ab_config_free(cfg);
	cfg = parse("c.yaml", "gradient_accumulation_steps: 2\n");
	assert_int_equal(ab_preset_detect(cfg, -1, &p, err, sizeof(err)), -EEXIST);
	assert_contains(err, "c.yaml matches several presets: deepspeed "
			     "(train_micro_batch_size_per_gpu), huggingface");
	assert_contains(err, "pick one with --preset NAME");
	ab_config_free(cfg);
	cfg = parse("c.yaml", "lr: 1\n");
	assert_int_equal(ab_preset_detect(cfg, -1, &p, err, sizeof(err)), -ENOENT);
	assert_contains(err, "has none of the batch keys autobatch knows");
	ab_config_free(cfg);
	/* a batch key it has but that cannot be read: its own refusal, not "none" */
	cfg = parse("c.yaml", "per_device_train_batch_size: 1\nper_device_train_batch_size: 2\n");
	assert_int_equal(ab_preset_detect(cfg, -1, &p, err, sizeof(err)), -EEXIST);
	assert_contains(err, "key 'per_device_train_batch_size' occurs twice (lines 1 and 2)");
	ab_config_free(cfg);
	cfg = parse("c.yaml", "batch_size: |\n  8\n");
	assert_int_not_equal(ab_preset_detect(cfg, -1, &p, err, sizeof(err)), 0);
	assert_contains(err, "key 'batch_size' is a block scalar");
	ab_config_free(cfg);
	for (size_t i = 0; i < ab_npresets; i++) {
		assert_non_null(ab_presets[i].keys[AB_ROLE_MICRO_BATCH]);
		struct ab_path path;
		assert_int_equal(ab_path_parse(ab_presets[i].keys[AB_ROLE_MICRO_BATCH], &path, err,
					       sizeof(err)),
				 0);
		ab_path_free(&path);
	}
}

/* ---- files ------------------------------------------------------------------------- */

static char dir[256];

static int make_dir(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/autobatch-test-config.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
	char cmd[2 * sizeof(dir) + 64];

	(void)state;
	snprintf(cmd, sizeof(cmd), "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static char *read_file(const char *path)
{
	static char buf[8192];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

/* Only these names may be in the directory: no temp file is ever left behind. */
static void assert_entries(const char *d, const char *const names[], size_t n)
{
	DIR *dd = opendir(d);
	struct dirent *e;
	size_t seen = 0;

	assert_non_null(dd);
	while ((e = readdir(dd))) {
		bool known = false;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		for (size_t i = 0; i < n; i++)
			known |= strcmp(e->d_name, names[i]) == 0;
		if (!known)
			fail_msg("unexpected file %s in %s", e->d_name, d);
		seen++;
	}
	closedir(dd);
	assert_int_equal(seen, n);
}

static int set1(const char *path, const char *key, const char *value)
{
	struct ab_edit e = {key, value};

	err[0] = '\0';
	return ab_config_set_file(path, AB_FORMAT_AUTO, &e, 1, -1, note, sizeof(note), err,
				  sizeof(err));
}

static void file_rewrite(void **state)
{
	char path[512], backup[512];
	struct stat st;

	(void)state;
	snprintf(path, sizeof(path), "%s/exp.yaml", dir);
	snprintf(backup, sizeof(backup), "%s/exp.yaml.autobatch~", dir);
	write_file(path, "bs: 8 # keep\nlr: 1\n", 0640);
	assert_int_equal(set1(path, "bs", "32"), 0);
	assert_string_equal(read_file(path), "bs: 32 # keep\nlr: 1\n");
	assert_string_equal(read_file(backup), "bs: 8 # keep\nlr: 1\n");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(stat(backup, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_entries(dir, (const char *const[]){"exp.yaml", "exp.yaml.autobatch~"}, 2);

	/* The same value again: not one byte written, the backup still the first original. */
	assert_int_equal(set1(path, "bs", "32"), 0);
	assert_string_equal(read_file(backup), "bs: 8 # keep\nlr: 1\n");

	/* A file changed since the decision was made is not overwritten; nor is a batch another
	 * srun wrote meanwhile (an array's step sizing the same file for another command, whose
	 * tasks may read it now), unless it is the value this one writes. */
	{
		const char *keys[] = {"bs"};
		struct ab_config *seen = parse("exp.yaml", "bs: 32 # keep\nlr: 1\n");
		struct ab_edit e = {"bs", "40"};
		struct ab_expect expect;

		ab_config_expect(seen, keys, 1, &expect);
		ab_config_free(seen);
		write_file(path, "bs: 32 # keep\nlr: 2\n", 0640);
		assert_int_equal(ab_config_set_file_expect(path, AB_FORMAT_AUTO, &e, 1, -1, &expect,
							   note, sizeof(note), err, sizeof(err)),
				 -ESTALE);
		assert_contains(err, "exp.yaml changed while autobatch was probing");
		assert_string_equal(read_file(path), "bs: 32 # keep\nlr: 2\n");
		write_file(path, "bs: 36 # keep\nlr: 1\n", 0640);
		assert_int_equal(ab_config_set_file_expect(path, AB_FORMAT_AUTO, &e, 1, -1, &expect,
							   note, sizeof(note), err, sizeof(err)),
				 -ENOTUNIQ);
		assert_contains(err, "exp.yaml's batch was rewritten by another srun while autobatch "
				     "was probing");
		assert_string_equal(read_file(path), "bs: 36 # keep\nlr: 1\n");
		write_file(path, "bs: 32 # keep\nlr: 1\n", 0640);
		assert_int_equal(ab_config_set_file_expect(path, AB_FORMAT_AUTO, &e, 1, -1, &expect,
							   note, sizeof(note), err, sizeof(err)),
				 1); /* written */
		assert_string_equal(read_file(path), "bs: 40 # keep\nlr: 1\n");
		assert_int_equal(ab_config_set_file_expect(path, AB_FORMAT_AUTO, &e, 1, -1, &expect,
							   note, sizeof(note), err, sizeof(err)),
				 0); /* already so: nothing written */
		assert_int_equal(set1(path, "bs", "32"), 0);
	}

	/* The directory the decision read the file in is the one written: one moved away and
	 * replaced by another holding the same file (a path component swapped while srun, as
	 * root, probed) is refused; the original directory, where it is now, is written. */
	{
		const char *keys[] = {"bs"};
		char sub[512], moved[512], inner[512], moved_inner[512];
		struct ab_edit e = {"bs", "40"};
		struct ab_config *seen;
		struct ab_expect expect;

		snprintf(sub, sizeof(sub), "%s/run", dir);
		snprintf(moved, sizeof(moved), "%s/run.old", dir);
		snprintf(inner, sizeof(inner), "%s/run/exp.yaml", dir);
		snprintf(moved_inner, sizeof(moved_inner), "%s/run.old/exp.yaml", dir);
		assert_int_equal(mkdir(sub, 0700), 0);
		write_file(inner, "bs: 32\n", 0640);
		seen = parse("exp.yaml", "bs: 32\n");
		ab_config_expect(seen, keys, 1, &expect);
		ab_config_free(seen);
		assert_int_equal(ab_config_expect_dir(inner, &expect), 0);
		assert_int_equal(rename(sub, moved), 0);
		assert_int_equal(mkdir(sub, 0700), 0);
		write_file(inner, "bs: 32\n", 0640);
		assert_int_equal(ab_config_set_file_expect(inner, AB_FORMAT_AUTO, &e, 1, -1, &expect,
							   note, sizeof(note), err, sizeof(err)),
				 -ESTALE);
		assert_contains(err, "is not the one autobatch read it in");
		assert_string_equal(read_file(inner), "bs: 32\n");
		assert_int_equal(ab_config_set_file_expect(moved_inner, AB_FORMAT_AUTO, &e, 1, -1,
							   &expect, note, sizeof(note), err,
							   sizeof(err)),
				 1);
		assert_string_equal(read_file(moved_inner), "bs: 40\n");
		unlink(inner);
		rmdir(sub);
		unlink(moved_inner);
		snprintf(moved_inner, sizeof(moved_inner), "%s/run.old/exp.yaml.autobatch~", dir);
		unlink(moved_inner);
		assert_int_equal(rmdir(moved), 0);
	}

	/* A refusal changes nothing. */
	assert_int_equal(set1(path, "nope", "1"), -ENOENT);
	assert_string_equal(read_file(path), "bs: 32 # keep\nlr: 1\n");
	assert_int_equal(set1(path, "bs", "x"), -EINVAL);

	/* The owner stays too (only root can hand a file to someone else). */
	if (geteuid() == 0) {
		assert_int_equal(chown(path, NOBODY, NOBODY), 0);
		assert_int_equal(set1(path, "bs", "48"), 0);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_uid, NOBODY);
		assert_int_equal(st.st_gid, NOBODY);
		assert_int_equal(stat(backup, &st), 0);
		assert_int_equal(st.st_uid, NOBODY);
	}

	write_file(path, "bs: [1\n", 0644);
	assert_int_equal(set1(path, "bs", "2"), -EINVAL);
	assert_contains(err, "is not valid YAML");
	assert_string_equal(read_file(path), "bs: [1\n");
	unlink(path);
	unlink(backup);
	assert_int_equal(set1(path, "bs", "2"), -ENOENT);
	assert_contains(err, "cannot open");
}

/* Runs set1(path, "bs", "16") in a child, as nobody when we are root: 0 when it returned
 * want, with want_err in its message, and left path saying "bs: 8". */
static int refused_as_nobody(const char *path, int want, const char *want_err)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		if (geteuid() == 0 && (setgid(NOBODY) < 0 || setuid(NOBODY) < 0))
			_exit(3);
		if (set1(path, "bs", "16") != want || !strstr(err, want_err))
			_exit(1);
		_exit(strcmp(read_file(path), "bs: 8\n") == 0 ? 0 : 2);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void file_read_only(void **state)
{
	char path[512], sub[512];

	(void)state;
	snprintf(path, sizeof(path), "%s/ro.yaml", dir);
	write_file(path, "bs: 8\n", 0444);
	assert_int_equal(set1(path, "bs", "16"), -EACCES);
	assert_contains(err, "ro.yaml is read-only: nothing was changed");
	assert_string_equal(read_file(path), "bs: 8\n");
	/* the same, asked before a probe (the plugin's check), and none once it is writable */
	assert_int_equal(ab_config_file_writable(path, err, sizeof(err)), -EACCES);
	assert_contains(err, "ro.yaml is read-only: nothing was changed");
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(ab_config_file_writable(path, err, sizeof(err)), 0);
	unlink(path);

	/* A read-only directory: refused by its mode bits even for root (as a read-only file
	 * is), and by access(2) for everybody else. */
	snprintf(sub, sizeof(sub), "%s/rodir", dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	snprintf(path, sizeof(path), "%s/rodir/c.yaml", dir);
	write_file(path, "bs: 8\n", 0666);
	assert_int_equal(chmod(sub, 0555), 0);
	assert_int_equal(set1(path, "bs", "16"), -EACCES);
	assert_contains(err, "rodir of ");
	assert_contains(err, "c.yaml is read-only: nothing was changed");
	assert_string_equal(read_file(path), "bs: 8\n");
	assert_int_equal(ab_config_file_writable(path, err, sizeof(err)), -EACCES);
	assert_contains(err, "rodir of ");
	/* nobody owns the directory above: only the mode bits of rodir stand in the way */
	assert_int_equal(geteuid() != 0 || chown(dir, NOBODY, NOBODY) == 0, true);
	assert_int_equal(refused_as_nobody(path, -EACCES, "is read-only: nothing was changed"), 0);
	assert_int_equal(chown(dir, 0, 0) == 0 || geteuid() != 0, true);
	assert_entries(sub, (const char *const[]){"c.yaml"}, 1);
	chmod(sub, 0755);
}

/* What a rewrite cannot do, said precisely: keep another user's ownership (a teammate's
 * group-writable config), or carry hard links and ACLs over to the new file. */
static void file_not_kept(void **state)
{
	char path[512], other[512];

	(void)state;
	snprintf(path, sizeof(path), "%s/team.yaml", dir);
	write_file(path, "bs: 8\n", 0666);
	if (geteuid() == 0) {
		assert_int_equal(chmod(dir, 0777), 0);
		assert_int_equal(refused_as_nobody(path, -EPERM, "team.yaml belongs to uid 0, not "
								 "to you"),
				 0);
		chmod(dir, 0755);
	}
	/* a second name for the file keeps the old bytes, and the note says so */
	snprintf(other, sizeof(other), "%s/team-link.yaml", dir);
	assert_int_equal(link(path, other), 0);
	assert_int_equal(ab_config_set_file(path, AB_FORMAT_AUTO, &(struct ab_edit){"bs", "24"}, 1,
					    -1, note, sizeof(note), err, sizeof(err)),
			 0);
	assert_string_equal(read_file(path), "bs: 24\n");
	assert_string_equal(read_file(other), "bs: 8\n");
	assert_contains(note, "team.yaml had 2 hard links: the other names keep the old contents");
}

/* The disk fills (here: a file size limit, the same EFBIG/ENOSPC path) while the new file is
 * written: the original stays, and neither a backup nor a temp file is left beside it. */
static void file_write_fails(void **state)
{
	char path[512], *big = malloc(40000);
	pid_t pid;
	int status;

	(void)state;
	memset(big, '#', 39999);
	memcpy(big, "bs: 8\n", 6);
	big[39998] = '\n';
	big[39999] = '\0';
	snprintf(path, sizeof(path), "%s/full.yaml", dir);
	write_file(path, big, 0644);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit lim = {16384, 16384};

		signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails instead of killing */
		setrlimit(RLIMIT_FSIZE, &lim);
		if (set1(path, "bs", "16") != -EFBIG || !strstr(err, "writing the new file beside") ||
		    !strstr(err, "full.yaml was not changed"))
			_exit(1);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 39999);
	assert_memory_equal(read_file(path), "bs: 8\n###", 9);
	assert_entries(dir, (const char *const[]){"full.yaml"}, 1);
	unlink(path);
	free(big);
}

static void file_symlinks(void **state)
{
	char real[512], link[512], other[512], far[512];
	struct stat st;

	(void)state;
	snprintf(real, sizeof(real), "%s/real.yaml", dir);
	snprintf(link, sizeof(link), "%s/link.yaml", dir);
	write_file(real, "bs: 8\n", 0644);
	assert_int_equal(symlink("real.yaml", link), 0);
	assert_int_equal(set1(link, "bs", "16"), 0);
	assert_string_equal(read_file(real), "bs: 16\n");
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode)); /* the link stays a link */

	/* Out of the directory: only to a regular file of our own. */
	snprintf(other, sizeof(other), "%s/other", dir);
	assert_int_equal(mkdir(other, 0755), 0);
	snprintf(far, sizeof(far), "%s/other/far.yaml", dir);
	write_file(far, "bs: 8\n", 0666);
	unlink(link);
	assert_int_equal(symlink(far, link), 0);
	assert_int_equal(set1(link, "bs", "24"), 0);
	assert_string_equal(read_file(far), "bs: 24\n");
	if (geteuid() == 0) {
		assert_int_equal(chown(far, NOBODY, NOBODY), 0);
		assert_int_equal(set1(link, "bs", "32"), -EPERM);
		assert_contains(err, "outside its directory, and that is not a regular file of "
				     "yours");
		assert_string_equal(read_file(far), "bs: 24\n");
	}
	unlink(link);
	assert_int_equal(symlink("/dev/null", link), 0);
	assert_true(set1(link, "bs", "32") < 0);

	/* As root, "a file of yours" holds for every file: a link another user planted (here
	 * to root's file beside it) is not followed; one root made is. */
	if (geteuid() == 0) {
		unlink(link);
		write_file(real, "bs: 8\n", 0644);
		assert_int_equal(symlink("real.yaml", link), 0);
		assert_int_equal(lchown(link, NOBODY, NOBODY), 0);
		assert_int_equal(set1(link, "bs", "64"), -EPERM);
		assert_contains(err, "as root, autobatch rewrites through a symlink only when the "
				     "link's owner owns the file");
		assert_string_equal(read_file(real), "bs: 8\n");
		assert_int_equal(lchown(link, 0, 0), 0);
		assert_int_equal(set1(link, "bs", "64"), 0);
		assert_string_equal(read_file(real), "bs: 64\n");
	}
	/* a FIFO in the config's place is refused at once, not waited on */
	unlink(link);
	assert_int_equal(mkfifo(link, 0600), 0);
	alarm(10);
	assert_true(set1(link, "bs", "32") < 0);
	assert_true(ab_config_load(link, AB_FORMAT_AUTO, &(struct ab_config *){NULL}, err,
				   sizeof(err)) < 0);
	alarm(0);
}

/* Writers in several processes take turns: no update is lost, no file is torn. */
static void file_concurrent(void **state)
{
	char path[512], key[8], value[8];
	const int writers = 4, rounds = 20;
	pid_t pids[4];
	struct ab_config *cfg;

	(void)state;
	snprintf(path, sizeof(path), "%s/shared.yaml", dir);
	write_file(path, "w0: 0\nw1: 0\nw2: 0\nw3: 0\n", 0644);
	for (int w = 0; w < writers; w++) {
		if ((pids[w] = fork()) == 0) {
			snprintf(key, sizeof(key), "w%d", w);
			for (int r = 1; r <= rounds; r++) {
				snprintf(value, sizeof(value), "%d", r);
				if (set1(path, key, value) < 0)
					_exit(1);
			}
			_exit(0);
		}
	}
	for (int w = 0; w < writers; w++) {
		int status;

		assert_int_equal(waitpid(pids[w], &status, 0), pids[w]);
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	assert_int_equal(ab_config_load(path, AB_FORMAT_AUTO, &cfg, err, sizeof(err)), 0);
	for (int w = 0; w < writers; w++) {
		char got[16];

		snprintf(key, sizeof(key), "w%d", w);
		assert_int_equal(ab_config_get(cfg, key, -1, got, sizeof(got), err, sizeof(err)), 0);
		assert_string_equal(got, "20");
	}
	ab_config_free(cfg);
}

static void file_not_regular(void **state)
{
	struct ab_config *cfg = NULL;

	(void)state;
	assert_true(ab_config_load(dir, AB_FORMAT_AUTO, &cfg, err, sizeof(err)) < 0);
	assert_contains(err, "is not a regular file");
	assert_true(ab_config_load("/nonexistent/x.yaml", AB_FORMAT_AUTO, &cfg, err,
				   sizeof(err)) < 0);
	assert_contains(err, "cannot read /nonexistent/x.yaml: No such file or directory");
}

/* A value only read (a run's length) is what a YAML reader makes of it: through an alias
 * and '<<' merges (a merge of a merge, the mapping's own key first), on several lines; a key
 * twice or a list is still refused, and an edit still refuses what it would not change. */
static void reads(void **state)
{
	static const char text[] =
		"n: &n 100\nbase: &b {max_steps: 7, warm: 3}\nmid: &m {<<: *b, lr: 1}\n"
		"a: *n\nm:\n  <<: *m\nown:\n  <<: *b\n  max_steps: 9\nlong: one\n  two\n"
		"twice: 1\ntwice: 2\nlist: [1]\n";
	struct ab_config *cfg;
	const struct ab_node *n;

	(void)state;
	assert_int_equal(ab_config_parse("r.yaml", text, strlen(text), AB_FORMAT_YAML, &cfg, err,
					 sizeof(err)),
			 0);
	assert_int_equal(ab_config_read(cfg, "a", -1, &n, err, sizeof(err)), 0);
	assert_string_equal(n->value, "100");
	assert_int_equal(ab_config_read(cfg, "m.max_steps", -1, &n, err, sizeof(err)), 0);
	assert_string_equal(n->value, "7");
	assert_int_equal(ab_config_read(cfg, "own.max_steps", -1, &n, err, sizeof(err)), 0);
	assert_string_equal(n->value, "9");
	assert_int_equal(ab_config_read(cfg, "long", -1, &n, err, sizeof(err)), 0);
	assert_string_equal(n->value, "one two");
	assert_int_equal(ab_config_read(cfg, "m.nothing", -1, &n, err, sizeof(err)), -ENOENT);
	assert_int_equal(ab_config_read(cfg, "twice", -1, &n, err, sizeof(err)), -EEXIST);
	assert_int_equal(ab_config_read(cfg, "list", -1, &n, err, sizeof(err)), -EISDIR);
	assert_int_equal(ab_config_lookup(cfg, "a", -1, &n, err, sizeof(err)), -EPERM);
	assert_int_equal(ab_config_lookup(cfg, "m.max_steps", -1, &n, err, sizeof(err)), -EPERM);
	assert_int_equal(ab_config_read(cfg, NULL, -1, &n, err, sizeof(err)), -ENOENT);
	ab_config_free(cfg);
}

/* Merges that fan out (each level merges the one below twice: 2^30 paths) or that merge
 * their own mapping must not make a lookup exponential (a fuzzer found the self-merge). */
static void merge_bombs(void **state)
{
	char text[4096];
	size_t len = 0;
	struct ab_config *cfg;
	const struct ab_node *n;

	(void)state;
	alarm(5); /* the fixed lookup takes milliseconds; the unbounded one took minutes */
	len += (size_t)snprintf(text + len, sizeof(text) - len, "l0: &l0 {k: 1}\n");
	for (int i = 1; i <= 30; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len,
					"l%d: &l%d {<<: [*l%d, *l%d]}\n", i, i, i - 1, i - 1);
	len += (size_t)snprintf(text + len, sizeof(text) - len, "top:\n  <<: *l30\n");
	assert_int_equal(ab_config_parse("bomb.yaml", text, len, AB_FORMAT_YAML, &cfg, err,
					 sizeof(err)),
			 0);
	/* a key it lacks: the search stops at its bound and says so, never "absent" unsure */
	assert_int_equal(ab_config_find(cfg, "top.missing", -1, &n, err, sizeof(err)), -E2BIG);
	assert_contains(err, "bomb.yaml: line 33: key 'top.missing': its mapping's '<<' merges "
			     "hold more than the 1048576 keys autobatch compares: write the key out "
			     "in it");
	assert_int_equal(ab_config_find(cfg, "top.k", -1, &n, err, sizeof(err)), -EPERM);
	/* a read goes through them, as bounded */
	assert_int_equal(ab_config_read(cfg, "top.missing", -1, &n, err, sizeof(err)), -E2BIG);
	assert_int_equal(ab_config_read(cfg, "top.k", -1, &n, err, sizeof(err)), 0);
	assert_string_equal(n->value, "1");
	ab_config_free(cfg);
	/* wide, not deep: 4,000 merges of a 4,000-key mapping (16 M keys to compare, minutes
	 * inside srun when only the mappings were counted) */
	{
		size_t cap = 4000 * 12 + 4000 * 5 + 64, w = 0;
		char *wide = malloc(cap);

		assert_non_null(wide);
		w += (size_t)snprintf(wide + w, cap - w, "b: &b {");
		for (int i = 0; i < 4000; i++)
			w += (size_t)snprintf(wide + w, cap - w, "%sk%d: 1", i ? ", " : "", i);
		w += (size_t)snprintf(wide + w, cap - w, "}\nt:\n  <<: [");
		for (int i = 0; i < 4000; i++)
			w += (size_t)snprintf(wide + w, cap - w, "%s*b", i ? ", " : "");
		w += (size_t)snprintf(wide + w, cap - w, "]\n");
		assert_int_equal(ab_config_parse("wide.yaml", wide, w, AB_FORMAT_YAML, &cfg, err,
						 sizeof(err)),
				 0);
		assert_int_equal(ab_config_read(cfg, "t.missing", -1, &n, err, sizeof(err)), -E2BIG);
		assert_int_equal(ab_config_read(cfg, "t.k3999", -1, &n, err, sizeof(err)), 0);
		ab_config_free(cfg);
		free(wide);
	}
	snprintf(text, sizeof(text), "a: &a\n  x: 1\n  <<: *a\n");
	if (ab_config_parse("self.yaml", text, strlen(text), AB_FORMAT_YAML, &cfg, err,
			    sizeof(err)) == 0) {
		assert_true(ab_config_find(cfg, "a.y", -1, &n, err, sizeof(err)) < 0);
		assert_true(ab_config_read(cfg, "a.y", -1, &n, err, sizeof(err)) < 0);
		ab_config_free(cfg);
	}
	alarm(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(paths),
		cmocka_unit_test(yaml_features),
		cmocka_unit_test(json_features),
		cmocka_unit_test(get_values),
		cmocka_unit_test(refusals),
		cmocka_unit_test(merge_bombs), cmocka_unit_test(reads),
		cmocka_unit_test(bad_values),
		cmocka_unit_test(path_values),
		cmocka_unit_test(invalid_files),
		cmocka_unit_test(presets),
		cmocka_unit_test(data_parallel_width),
		cmocka_unit_test_setup_teardown(file_rewrite, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(file_read_only, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(file_write_fails, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(file_symlinks, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(file_not_kept, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(file_concurrent, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(file_not_regular, make_dir, remove_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
