/* fuzz_files.c - files a user controls read back: the run report the watch merges its real
 * peak into (AUTOBATCH_REPORT, ab_report_add_run) and the job comment made of it, the cache's
 * over mark (ab_cache_read_over), and the command's files hashed (ab_hash_command_files).
 * Byte 0 picks; byte 1 a parameter; the rest is the file. */
#include <fcntl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cache.h"
#include "json_field.h"
#include "error.h"
#include "fingerprint.h"
#include "job_comment.h"
#include "report_run.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...) do { fprintf(stderr, "property violated: " __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

static char dir[64];

static void put(const char *name, const void *buf, size_t len)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len)
		abort();
	close(fd);
}

static void report(const uint8_t *buf, size_t len, unsigned pick)
{
	char path[128], err[512], *text = NULL, out[AB_COMMENT_MAX];
	struct ab_run_figure f = {.limit_bytes = 1 << 20, .peak_bytes = (uint64_t)pick << 14,
				  .task = pick % 5, .batch = 8, .node = "n1", .measured = "gpu",
				  .first = pick & 1, .first_over = pick & 2};
	FILE *fp;
	long n;

	put("report.json", buf, len);
	snprintf(path, sizeof(path), "%s/report.json", dir);
	if (ab_report_add_run(path, &f, err, sizeof(err)) < 0)
		return;
	if (!(fp = fopen(path, "r")))
		abort();
	text = calloc(1, 1 << 20);
	n = (long)fread(text, 1, (1 << 20) - 1, fp);
	fclose(fp);
	(void)n;
	ab_job_comment(text, "user | autobatch: step 1 batch 2", pick, out, sizeof(out));
	free(text);
}

static void over(const uint8_t *buf, size_t len)
{
	struct ab_cache c = {.fd = -1};
	struct ab_cache_over o;
	char err[512];

	if (ab_cache_open_dir(dir, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "cache: %s\n", err);
		abort();
	}
	put("entry.over", buf, len);
	if (ab_cache_read_over(&c, "entry", &o) == 0) {
		if (o.batch < 1 || o.task < 0 || o.limit_bytes < 1 || o.peak_bytes <= o.limit_bytes)
			FAIL("over mark");
		if (!ab_plain_name(o.node))
			FAIL("over mark's node not plain: %s", o.node);
	}
	ab_cache_close(&c);
}

static void hash(const uint8_t *buf, size_t len, unsigned pick)
{
	char *argv[4] = {"train.py", "--config=x.yaml", "helper.sh", "--script=train.py"};
	struct ab_hash h1, h2;

	put("train.py", buf, len);
	put("helper.sh", buf, len / 2);
	ab_hash_init(&h1);
	ab_hash_command_files(&h1, 1 + pick % 4, argv, dir, NULL);
	ab_hash_init(&h2);
	ab_hash_command_files(&h2, 1 + pick % 4, argv, dir, NULL);
	if (h1.h != h2.h)
		FAIL("hash unstable");
}

/* the files of the last input and their directory, at the fuzzer's exit */
static void clean(void)
{
	static const char *const names[] = {"report.json", "entry.over", "train.py", "helper.sh"};
	char path[128];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/fuzz-files-XXXXXX");
		if (!mkdtemp(dir))
			abort();
		chmod(dir, 0700);
		atexit(clean);
	}
	if (size < 2 || size > 200000)
		return 0;
	switch (data[0] % 3) {
	case 0: report(data + 2, size - 2, data[1]); break;
	case 1: over(data + 2, size - 2); break;
	default: hash(data + 2, size - 2, data[1]);
	}
	return 0;
}
