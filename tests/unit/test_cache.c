/* test_cache.c - the decision cache against what other users can plant: an unsafe or
 * missing site directory, someone else's subdirectory, symlinks, FIFOs and hard links in
 * place of entries and locks; and the round trip of an entry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "unit.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "fingerprint.h"

static char err[1024], base[64], site[128], mine[160], entry[AB_CACHE_NAME_MAX];

static int setup(void **state)
{
	struct ab_hash h;

	(void)state;
	snprintf(base, sizeof(base), "/tmp/autobatch-test-cache.XXXXXX");
	if (!mkdtemp(base))
		return -1;
	snprintf(site, sizeof(site), "%s/site", base);
	snprintf(mine, sizeof(mine), "%s/%u", site, (unsigned)getuid());
	ab_hash_init(&h);
	ab_hash_str(&h, "a decision");
	ab_cache_entry_name(&h, true, entry, sizeof(entry));
	assert_int_equal(strncmp(entry, "warm-", 5), 0);
	ab_cache_entry_name(&h, false, entry, sizeof(entry));
	assert_int_equal(strlen(entry), 21);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) == 0 ? 0 : -1;
}

static void make_site(mode_t mode)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", site);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(mkdir(site, 0700), 0);
	assert_int_equal(chmod(site, mode), 0);
}

/* A user who is neither root nor us: only root can hand a file to one. */
static bool give_away(const char *path)
{
	return geteuid() == 0 && lchown(path, 65534, 65534) == 0;
}

static void round_trip(void **state)
{
	struct ab_cache c;
	char *json = NULL;

	(void)state;
	make_site(01777);
	assert_int_equal(ab_cache_open_site(site, &c, err, sizeof(err)), 0);
	assert_int_equal(ab_cache_load(&c, entry, &json), -ENOENT);
	assert_int_equal(ab_cache_store(&c, entry, "{\"status\":\"ok\"}", err, sizeof(err)), 0);
	assert_int_equal(ab_cache_load(&c, entry, &json), 0);
	assert_string_equal(json, "{\"status\":\"ok\"}");
	free(json);
	int lock = ab_cache_lock(&c, entry, 0, NULL, NULL, NULL);

	assert_true(lock >= 0);
	ab_cache_unlock(lock);
	ab_cache_close(&c);
	/* the subdirectory was made closed to others */
	struct stat st;

	assert_int_equal(stat(mine, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
}

static void unsafe_site(void **state)
{
	struct ab_cache c;
	char link[160];

	(void)state;
	/* missing: not created by a user's srun (it would be theirs) */
	make_site(01777);
	rmdir(site);
	assert_int_equal(ab_cache_open_site(site, &c, err, sizeof(err)), -ENOENT);
	assert_contains(err, "the admin must create it, owned by root with mode 1777");
	assert_int_equal(c.fd, -1);
	struct stat st;

	assert_int_not_equal(stat(site, &st), 0);
	/* world-writable without the sticky bit: anyone could swap anyone's subdirectory */
	make_site(0777);
	assert_int_equal(ab_cache_open_site(site, &c, err, sizeof(err)), -EPERM);
	assert_contains(err, "is unsafe (owner uid");
	assert_contains(err, "mode 0777");
	/* a symlink to a directory: refused, not followed */
	make_site(01777);
	snprintf(link, sizeof(link), "%s/link", base);
	assert_int_equal(symlink(site, link), 0);
	assert_int_equal(ab_cache_open_site(link, &c, err, sizeof(err)), -ENOTDIR);
	assert_contains(err, "cannot be opened");
	unlink(link);
	/* owned by another user (the first user's srun made it): refused, whatever its mode */
	if (!give_away(site)) {
		print_message("# skipped the other-owner cases: they need root\n");
		return;
	}
	assert_int_equal(ab_cache_open_site(site, &c, err, sizeof(err)), -EPERM);
	assert_contains(err, "owner uid 65534");
	/* root's, sticky and open, but someone else made our subdirectory first */
	make_site(01777);
	assert_int_equal(mkdir(mine, 0700), 0);
	assert_true(give_away(mine));
	assert_int_equal(ab_cache_open_site(site, &c, err, sizeof(err)), -EEXIST);
	assert_contains(err, "someone else's or an open directory");
	assert_contains(err, "(owner uid 65534, mode 0700); the admin must remove it");
}

static void open_subdirectory(void **state)
{
	struct ab_cache c;

	(void)state;
	make_site(01777);
	assert_int_equal(mkdir(mine, 0700), 0);
	assert_int_equal(chmod(mine, 0777), 0); /* others could plant entries */
	assert_int_equal(ab_cache_open_site(site, &c, err, sizeof(err)), -EEXIST);
	assert_contains(err, "mode 0777); make it yours alone: chmod 700 it");
	rmdir(mine);
	assert_int_equal(symlink("/tmp", mine), 0); /* our name, pointing elsewhere */
	assert_int_equal(ab_cache_open_site(site, &c, err, sizeof(err)), -EEXIST);
	assert_contains(err, "cannot be opened as your directory");
	assert_int_equal(c.fd, -1);
	unlink(mine);
	close(open(mine, O_WRONLY | O_CREAT, 0600)); /* a file at our name */
	assert_int_equal(ab_cache_open_site(site, &c, err, sizeof(err)), -EEXIST);
	assert_contains(err, "(Not a directory): someone else's, or not a directory");
}

/* What an owner of the directory could plant: none is read, none blocks. */
static void planted_entries(void **state)
{
	struct ab_cache c;
	char path[256], lock[272], other[256], *json = NULL;

	(void)state;
	make_site(01777);
	assert_int_equal(ab_cache_open_site(site, &c, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/%s", mine, entry);
	snprintf(lock, sizeof(lock), "%s.lock", path);
	snprintf(other, sizeof(other), "%s/poison.json", base);
	FILE *f = fopen(other, "w");

	assert_non_null(f);
	fputs("{\"status\":\"ok\",\"batch_size\":999999}", f);
	fclose(f);
	/* a symlink: not followed */
	assert_int_equal(symlink(other, path), 0);
	assert_true(ab_cache_load(&c, entry, &json) < 0);
	unlink(path);
	/* a hard link to someone's file: not ours alone */
	assert_int_equal(link(other, path), 0);
	assert_int_equal(ab_cache_load(&c, entry, &json), -EPROTO);
	unlink(path);
	/* a FIFO: neither the entry nor the lock blocks */
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(10);
	assert_int_equal(ab_cache_load(&c, entry, &json), -EPROTO);
	assert_int_equal(mkfifo(lock, 0600), 0);
	assert_int_equal(ab_cache_lock(&c, entry, 0, NULL, NULL, NULL), -EPERM);
	alarm(0);
	unlink(lock);
	/* a store leaves what is not an entry of ours alone, and says so */
	assert_int_equal(ab_cache_store(&c, entry, "{}", err, sizeof(err)), -EEXIST);
	assert_contains(err, "is not a regular file of yours");
	unlink(path);
	assert_int_equal(ab_cache_store(&c, entry, "{}", err, sizeof(err)), 0);
	assert_int_equal(ab_cache_load(&c, entry, &json), 0);
	free(json);
	ab_cache_close(&c);
}

/* A real run over its limit (autobatch-probe watch's NAME.over): written, read back, and
 * cleared; a mark that says no run over its limit, or is not JSON, is not one. */
/* The program a command names is in the key: its script's bytes (an edit, another project's
 * copy), never a log it writes, the config (fingerprinted apart) or a FIFO it names */
static uint64_t command_key(int argc, char *const argv[], const char *dir, const char *skip)
{
	struct ab_hash h;

	ab_hash_init(&h);
	ab_hash_command_files(&h, argc, argv, dir, skip);
	return h.h;
}

static void write_text(const char *dir, const char *name, const char *text, mode_t mode)
{
	char path[PATH_MAX + NAME_MAX + 2];

	unit_put(dir, name, text);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(chmod(path, mode), 0);
}

static void program_files(void **state)
{
	char a[128], b[128], cfg[160], fifo[160], big[160];
	char *argv[] = {(char *)"run.sh", (char *)"train.py", (char *)"--log=run.log",
			(char *)"--config", (char *)"cfg.yaml", (char *)"pipe", (char *)"--aux=aux.py"};
	int argc = sizeof(argv) / sizeof(argv[0]);
	struct timespec same[2] = {{1000000000, 0}, {1000000000, 0}};
	static char blob[200 << 10];
	uint64_t k;

	(void)state;
	snprintf(a, sizeof(a), "%s/projA", base);
	snprintf(b, sizeof(b), "%s/projB", base);
	assert_int_equal(mkdir(a, 0700), 0);
	assert_int_equal(mkdir(b, 0700), 0);
	memset(blob, 'x', sizeof(blob) - 1);
	for (int i = 0; i < 2; i++) {
		const char *d = i ? b : a;

		write_text(d, "train.py", "x = 256\n", 0644);
		write_text(d, "aux.py", "y = 1\n", 0644);
		write_text(d, "run.log", "step 1\n", 0755); /* executable, yet no program */
		write_text(d, "cfg.yaml", "batch_size: 8\n", 0644);
		write_text(d, "run.sh", blob, 0755); /* past AB_HASH_FILE_MAX: head, tail, size */
		snprintf(big, sizeof(big), "%s/run.sh", d);
		assert_int_equal(utimensat(AT_FDCWD, big, same, 0), 0);
	}
	snprintf(cfg, sizeof(cfg), "%s/cfg.yaml", a);
	snprintf(fifo, sizeof(fifo), "%s/pipe", a);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	k = command_key(argc, argv, a, cfg);
	/* the same files elsewhere (other inodes, the same bytes and times): the same key, as
	 * on another node */
	snprintf(cfg, sizeof(cfg), "%s/cfg.yaml", b);
	assert_true(command_key(argc, argv, b, cfg) == k);
	/* what the run writes and the config's values do not change it */
	write_text(b, "run.log", "step 1\nstep 2\n", 0755);
	write_text(b, "cfg.yaml", "batch_size: 512\n", 0644);
	assert_true(command_key(argc, argv, b, cfg) == k);
	/* an edited script does, named as a word or as an option's value */
	write_text(b, "train.py", "x = 512\n", 0644);
	assert_true(command_key(argc, argv, b, cfg) != k);
	write_text(b, "train.py", "x = 256\n", 0644);
	write_text(b, "aux.py", "y = 2\n", 0644);
	assert_true(command_key(argc, argv, b, cfg) != k);
	write_text(b, "aux.py", "y = 1\n", 0644);
	assert_true(command_key(argc, argv, b, cfg) == k);
	/* and so does the program's tail past the head, or its time */
	blob[sizeof(blob) - 2] = 'y';
	write_text(b, "run.sh", blob, 0755);
	snprintf(big, sizeof(big), "%s/run.sh", b);
	assert_int_equal(utimensat(AT_FDCWD, big, same, 0), 0);
	assert_true(command_key(argc, argv, b, cfg) != k);
	blob[sizeof(blob) - 2] = 'x';
	write_text(b, "run.sh", blob, 0755);
	assert_true(command_key(argc, argv, b, cfg) != k); /* now's time */
	assert_int_equal(utimensat(AT_FDCWD, big, same, 0), 0);
	assert_true(command_key(argc, argv, b, cfg) == k);
}

static void over_marks(void **state)
{
	struct ab_cache c;
	struct ab_cache_over o = {83, 2, 1000u << 20, 819u << 20, "node1"}, back;

	(void)state;
	make_site(01777);
	assert_int_equal(ab_cache_open_site(site, &c, err, sizeof(err)), 0);
	assert_int_equal(ab_cache_read_over(&c, entry, &back), -ENOENT);
	assert_int_equal(ab_cache_mark_over(&c, entry, &o, err, sizeof(err)), 0);
	assert_int_equal(ab_cache_read_over(&c, entry, &back), 0);
	assert_int_equal(back.batch, 83);
	assert_int_equal(back.task, 2);
	assert_int_equal(back.peak_bytes, 1000u << 20);
	assert_int_equal(back.limit_bytes, 819u << 20);
	assert_string_equal(back.node, "node1");
	/* another task of the step, less far over: the mark keeps the larger peak, and a larger
	 * one replaces it; a mark of another batch is replaced whatever its peak */
	struct ab_cache_over less = {83, 5, 900u << 20, 819u << 20, "node2"}, more = less;

	assert_int_equal(ab_cache_mark_over(&c, entry, &less, err, sizeof(err)), 0);
	assert_int_equal(ab_cache_read_over(&c, entry, &back), 0);
	assert_int_equal(back.task, 2);
	assert_int_equal(back.peak_bytes, 1000u << 20);
	more.peak_bytes = 1100u << 20;
	assert_int_equal(ab_cache_mark_over(&c, entry, &more, err, sizeof(err)), 0);
	assert_int_equal(ab_cache_read_over(&c, entry, &back), 0);
	assert_int_equal(back.task, 5);
	assert_string_equal(back.node, "node2");
	less.batch = 60;
	assert_int_equal(ab_cache_mark_over(&c, entry, &less, err, sizeof(err)), 0);
	assert_int_equal(ab_cache_read_over(&c, entry, &back), 0);
	assert_int_equal(back.batch, 60);
	ab_cache_clear_over(&c, entry);
	o.peak_bytes = o.limit_bytes;
	assert_int_equal(ab_cache_mark_over(&c, entry, &o, err, sizeof(err)), 0);
	assert_int_equal(ab_cache_read_over(&c, entry, &back), -EPROTO);
	char over[AB_CACHE_NAME_MAX + 8];

	snprintf(over, sizeof(over), "%s.over", entry);
	assert_int_equal(ab_cache_store(&c, over, "not json", err, sizeof(err)), 0);
	assert_int_equal(ab_cache_read_over(&c, entry, &back), -EPROTO);
	/* the node is printed in srun's line: one of odd characters is none */
	assert_int_equal(ab_cache_store(&c, over, "{\"batch\": 8, \"task\": 1, \"peak_bytes\": 9, "
				       "\"limit_bytes\": 8, \"node\": \"n\\u001b[2J\"}", err, sizeof(err)), 0);
	assert_int_equal(ab_cache_read_over(&c, entry, &back), 0);
	assert_string_equal(back.node, "");
	ab_cache_clear_over(&c, entry);
	assert_int_equal(ab_cache_read_over(&c, entry, &back), -ENOENT);
	/* the next probe's cap: a run of 290 that held 250 MiB more after some steps (1064 MiB of
	 * 819, its line 2.5 MiB a sample): the scaled cap, 223, went over again (930 MiB); the
	 * excess on the line gives 192. Memory that grows with the batch: the scaled one, the
	 * smaller; at least 1, below the batch */
	struct ab_cache_over grew = {290, 0, 1064u << 20, 819u << 20, ""};

	assert_int_equal(ab_cache_over_cap(&grew, 0), 223);
	assert_int_equal(ab_cache_over_cap(&grew, 5u << 19), 192);
	grew.peak_bytes = 1000u << 20; /* 1000 MiB at 100 on a line of 10 MiB a sample */
	grew.batch = 100;
	assert_int_equal(ab_cache_over_cap(&grew, 10u << 20), 81);
	/* an excess no batch's samples hold on the line: 1 */
	assert_int_equal(ab_cache_over_cap(&grew, 1u << 20), 1);
	grew.peak_bytes = (uint64_t)100000 << 20;
	assert_int_equal(ab_cache_over_cap(&grew, 10u << 20), 1);
	grew.peak_bytes = 820u << 20;
	assert_int_equal(ab_cache_over_cap(&grew, 0), 99); /* just over: one less */
	ab_cache_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(unsafe_site),
		cmocka_unit_test(open_subdirectory),
		cmocka_unit_test(planted_entries),
		cmocka_unit_test(over_marks),
		cmocka_unit_test(program_files),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
