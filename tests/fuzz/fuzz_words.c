/* fuzz_words.c - parsers of words a user controls that fuzz_parsers.c does not reach: srun's
 * argument block (--multi-prog, -D, het steps), the hold ticket, --node-memory, TRES/GRES,
 * --device specs, the job comment, launcher arguments, whole numbers. Byte 0 picks. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "argv.h"
#include "decision.h"
#include "device.h"
#include "error.h"
#include "gpu_models.h"
#include "hold.h"
#include "hold_wire.h"
#include "hostlist.h"
#include "job_comment.h"
#include "number.h"
#include "presets.h"
#include "protocol.h"
#include "request.h"
#include "site.h"
#include "srun_line.h"
#include "step_gpus.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...) do { fprintf(stderr, "property violated: " __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

/* text split at sep into at most max words (in place) */
static int split(char *text, size_t len, char sep, char **w, int max)
{
	int n = 0;
	size_t i = 0;

	while (i <= len && n < max) {
		w[n++] = text + i;
		while (i < len && text[i] != sep)
			i++;
		text[i++] = '\0';
	}
	return n;
}

/* The same line with the program given more words: srun's options only say what they say */
static void program_words_ignored(const char *raw, size_t len, int argc, char **argv, int n,
				  const struct ab_srun_line *was)
{
	static const char more[] = "-D\0/elsewhere\0-t\0--multi-prog\0--het-group=0,1";
	char *line = malloc(len + sizeof(more)), *words[605];
	struct ab_srun_line now;
	int k = 0;

	if (argc <= 0 || argc >= n || len == 0 || raw[len - 1] != '\0')
		goto out;
	memcpy(line, raw, len);
	memcpy(line + len, more, sizeof(more));
	for (size_t i = 0; i < len + sizeof(more); i += strnlen(line + i, len + sizeof(more) - i) + 1)
		words[k++] = line + i;
	(void)argv;
	ab_srun_line_read(line, len + sizeof(more), argc + 5, words + k - argc - 5, &now);
	if (now.time != was->time || now.multi_prog != was->multi_prog ||
	    now.het_step != was->het_step || !now.chdir != !was->chdir ||
	    (now.chdir && strcmp(now.chdir, was->chdir)))
		FAIL("the program's own words read as srun's options");
out:
	free(line);
}

static void srun_args(const char *raw, size_t len, unsigned pick)
{
	char *copy = malloc(len + 1), *words[600], buf[4096];
	struct ab_srun_line line;
	int n = 0, argc;

	memcpy(copy, raw, len);
	copy[len] = '\0';
	for (size_t i = 0; i < len && n < 600; i += strnlen(copy + i, len - i) + 1)
		words[n++] = copy + i;
	argc = n ? (int)(pick % 4) % (n + 1) : 0;
	/* argv: the last argc words (what srun's command is) */
	ab_srun_line_read(raw, len, argc, words + n - argc, &line);
	if (line.chdir && (line.chdir < raw || line.chdir >= raw + len ||
			   !memchr(line.chdir, '\0', (size_t)(raw + len - line.chdir))))
		FAIL("chdir outside the block");
	if (line.chdir && argc > 0)
		ab_step_path(line.chdir, words[n - 1], buf, sizeof(buf));
	if (n < 600)
		program_words_ignored(raw, len, argc, words + n - argc, n, &line);
	/* argv not taken from the block */
	ab_srun_line_read(raw, len, argc, words, &line);
	free(copy);
}

static void ticket(const char *text)
{
	struct ab_hold_ticket t;
	char err[AB_ERR_MAX];

	if (ab_hold_ticket_parse(text, &t, err, sizeof(err)) == 0) {
		if (!t.port || t.port > 65535 || !t.wait_s)
			FAIL("ticket port %u wait %u", t.port, t.wait_s);
		if (!ab_hold_token_shaped(t.client_token, strlen(t.client_token)) ||
		    !ab_hold_token_shaped(t.server_token, strlen(t.server_token)))
			FAIL("ticket tokens");
	}
	(void)ab_hold_node_ok(text, strlen(text));
	(void)ab_hold_ends_with(text, strlen(text), "\n");
}

/* "NODE GRES" lines: models; their node-memory text must read back */
static void models(char *text, size_t len)
{
	static struct ab_gpu_models m;
	static struct ab_node_memory t;
	char *lines[40], key[1024], memory[AB_GPU_MODELS_MAX * (AB_GPU_NODES_MAX + 24)], err[256];
	int n = split(text, len, '\n', lines, 40);

	memset(&m, 0, sizeof(m));
	for (int i = 0; i < n; i++) {
		char *sp = strchr(lines[i], ' ');

		if (!sp)
			continue;
		*sp = '\0';
		if (!ab_hostname_ok(lines[i], strlen(lines[i])) || strlen(lines[i]) >= 64)
			continue;
		ab_gpu_models_add(&m, lines[i], sp + 1);
	}
	ab_gpu_models_key(&m, key, sizeof(key));
	for (size_t i = 0; i < m.n; i++)
		m.v[i].total_bytes = ((uint64_t)(i % 3) + 1) << 30;
	if (ab_gpu_models_node_memory(&m, memory, sizeof(memory)) == 0) {
		if (ab_node_memory_parse(memory, &t, err, sizeof(err)) < 0) {
			size_t nodes = 0;

			for (size_t i = 0; i < m.n; i++)
				nodes += m.v[i].nodes;
			if (nodes <= AB_NODE_MEMORY_MAX)
				FAIL("node memory '%s' not read back: %s", memory, err);
		} else {
			for (size_t i = 0; i < m.n; i++) {
				uint64_t got = ab_node_memory_of(&t, m.v[i].node);

				if (!got || got > m.v[i].total_bytes)
					FAIL("node %s: %llu read back for %llu", m.v[i].node,
					     (unsigned long long)got, (unsigned long long)m.v[i].total_bytes);
			}
		}
	}
	if (ab_node_memory_parse(text, &t, err, sizeof(err)) == 0)
		for (size_t i = 0; i < t.n; i++)
			if (!t.v[i].bytes || ab_node_memory_of(&t, t.v[i].node) != t.v[i].bytes)
				FAIL("node memory table");
}

static void tres(char *text, size_t len)
{
	char *f[5] = {NULL, NULL, NULL, NULL, NULL}, err[512];
	struct ab_step_gpus g;
	int n = split(text, len, '\n', f, 5);

	for (int i = 0; i < n; i++)
		if (!strcmp(f[i], "-"))
			f[i] = NULL;
	if (ab_step_gpus_from_tres(f[0], f[1], f[2], f[3], f[4], &g, err, sizeof(err)) == 0) {
		if (g.n < 0 || g.n > AB_STEP_OPTIONS_MAX)
			FAIL("step gpus n %d", g.n);
		for (int i = 0; i < g.n; i++)
			if (!ab_step_option_ok(g.opt[i]))
				FAIL("option '%s' not ok", g.opt[i]);
		(void)ab_step_gpus_count(&g, 4, 2);
	}
}

static void noop_type(const char *type, void *arg)
{
	if (strlen(type) >= AB_GPU_TYPE_MAX)
		FAIL("type too long");
	++*(int *)arg;
}

static void comment(char *text, size_t len, unsigned step)
{
	char *w[2] = {"", ""}, out[AB_COMMENT_MAX], again[AB_COMMENT_MAX];
	int n = split(text, len, '\n', w, 2);

	(void)n;
	if (ab_job_comment(w[0], w[1], step, out, sizeof(out)) == 0) {
		if (ab_job_comment(w[0], out, step, again, sizeof(again)) != 0 || strcmp(out, again))
			FAIL("comment not idempotent:\n  old  '%s'\n  once '%s'\n  twice '%s'", w[1],
			     out, again);
	}
}

static void launcher(char *text, size_t len)
{
	char *w[64];
	int n = split(text, len, ' ', w, 64);
	bool world;
	long k = ab_launcher_workers(n, w, &world);

	if (k < -1 || k > (1 << 20))
		FAIL("workers %ld", k);
	(void)ab_launcher_option(n, w, "--config_file", "--config-file");
	(void)ab_launcher_name(n, w);
}

static void numbers(const char *text)
{
	long v;
	double d;
	char name[128], err[256];
	uint64_t total;

	if (ab_parse_whole(text, 3, 1000, &v) == 0 && (v < 3 || v > 1000))
		FAIL("whole");
	if (ab_parse_config_whole(text, AB_WHOLE_DECIMAL, -5, 1L << 40, &v) == 0 &&
	    (v < -5 || v > 1L << 40))
		FAIL("config whole %ld", v);
	if (ab_parse_config_whole(text, 0, 1, 100, &v) == 0 && (v < 1 || v > 100))
		FAIL("config whole %ld", v);
	if (ab_parse_decimal(text, 15, 0.5, 2, &d) == 0 && !(d >= 0.5 && d <= 2))
		FAIL("decimal");
	if (ab_parse_run_steps(text, &v) == 0 && v < 0 && strcmp(text, "off"))
		FAIL("run steps %ld", v);
	(void)ab_device_parse(text, strlen(text), name, sizeof(name), &total, err, sizeof(err));
	(void)ab_probe_option_note(text);
	(void)ab_env_reshapes_srun(text);
	(void)ab_probe_args_gpu(text);
	(void)ab_probe_args_sim(text);
}

static void device(const char *text)
{
	struct ab_device dev;
	char err[512];

	if (strstr(text, "curve="))
		return;
	memset(&dev, 0, sizeof(dev));
	if (ab_device_open(text, &dev, err, sizeof(err)) == 0) {
		if (!dev.total_bytes)
			FAIL("device of 0 bytes");
		ab_device_close(&dev);
	}
}

static void words(char *text)
{
	struct ab_argv a = {0};
	char err[256];

	ab_argv_add_words(&a, text);
	ab_argv_done(&a, "x", err, sizeof(err));
	for (size_t i = 0; i < a.n; i++)
		if (!a.v[i] || !*a.v[i])
			FAIL("empty word %zu", i);
	ab_argv_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;
	size_t len;
	int count = 0;

	if (size < 2 || size > 8192 || !(text = malloc(size)))
		return 0;
	len = size - 2;
	memcpy(text, data + 2, len);
	text[len] = '\0';
	switch (data[0] % 10) {
	case 0: srun_args((const char *)data + 2, len, data[1]); break;
	case 1: ticket(text); break;
	case 2: models(text, strlen(text)); break;
	case 3: tres(text, strlen(text)); break;
	case 4: ab_gres_gpu_types(text, noop_type, &count); break;
	case 5: comment(text, strlen(text), data[1]); break;
	case 6: launcher(text, strlen(text)); break;
	case 7: numbers(text); break;
	case 8: device(text); break;
	default: words(text);
	}
	free(text);
	return 0;
}
