/* fingerprint.c - see fingerprint.h. FNV-1a is enough: it only has to tell one user's
 * configurations apart, and a cache entry is checked before it is trusted.
 */
#include "fingerprint.h"

#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void ab_hash_init(struct ab_hash *h)
{
	h->h = 0xcbf29ce484222325ULL;
}

void ab_hash_add(struct ab_hash *h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++) {
		h->h ^= p[i];
		h->h *= 0x100000001b3ULL;
	}
}

void ab_hash_str(struct ab_hash *h, const char *s)
{
	uint64_t len = s ? strlen(s) : UINT64_MAX;

	ab_hash_add(h, &len, sizeof(len));
	if (s)
		ab_hash_add(h, s, strlen(s));
}

int ab_hash_config(struct ab_hash *h, const struct ab_config *cfg, const char *const keys[],
		   size_t nkeys)
{
	size_t pos = 0;

	/* the values' spans, in file order, are skipped */
	for (;;) {
		const struct ab_node *next = NULL, *n;

		for (size_t i = 0; i < nkeys; i++)
			if (keys[i] && ab_config_find(cfg, keys[i], -1, &n, NULL, 0) == 0 &&
			    n->start >= pos && (!next || n->start < next->start))
				next = n;
		if (!next)
			break;
		ab_hash_add(h, cfg->buf + pos, next->start - pos);
		ab_hash_add(h, "", 1); /* where a value was */
		pos = next->end;
	}
	ab_hash_add(h, cfg->buf + pos, cfg->len - pos);
	return 0;
}

void ab_hash_config_values(struct ab_hash *h, const struct ab_config *cfg,
			   const char *const keys[], size_t nkeys)
{
	const struct ab_node *n;

	for (size_t i = 0; i < nkeys; i++) {
		if (keys[i] && ab_config_find(cfg, keys[i], -1, &n, NULL, 0) == 0)
			ab_hash_add(h, cfg->buf + n->start, n->end - n->start);
		ab_hash_add(h, "", 1); /* absent and empty differ from the next key's value */
	}
}

static bool script_name(const char *path)
{
	const char *dot = strrchr(path, '.');

	return dot && (!strcmp(dot, ".py") || !strcmp(dot, ".sh") || !strcmp(dot, ".bash"));
}

/* Up to len bytes of fd from off into h */
static void hash_bytes(struct ab_hash *h, int fd, off_t off, size_t len)
{
	char buf[65536];
	ssize_t n;

	for (; len > 0; len -= (size_t)n, off += n) {
		n = pread(fd, buf, sizeof(buf) < len ? sizeof(buf) : len, off);
		if (n <= 0)
			break;
		ab_hash_add(h, buf, (size_t)n);
	}
}

/* One word's file, if it is a program's: its word and its bytes, or past AB_HASH_FILE_MAX its
 * size, modification time and first and last AB_HASH_FILE_MAX / 2 (an interpreter, an image:
 * the same on every node that installed the same one, where a device and inode number are
 * not); true if added */
static bool hash_file(struct ab_hash *h, const char *word, const char *dir, const struct stat *skip)
{
	char path[PATH_MAX];
	struct stat st;
	int fd;

	if (!*word || snprintf(path, sizeof(path), "%s%s%s", word[0] != '/' && dir ? dir : "",
			       word[0] != '/' && dir ? "/" : "", word) >= (int)sizeof(path))
		return false;
	/* only a regular file is opened (a device's open can act: a tape rewinds); O_NONBLOCK:
	 * one replaced by a FIFO meanwhile opens without a writer, and is then no file */
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (skip && st.st_dev == skip->st_dev && st.st_ino == skip->st_ino) ||
	    (fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)) < 0)
		return false;
	ab_hash_str(h, word);
	if (st.st_size <= AB_HASH_FILE_MAX) {
		hash_bytes(h, fd, 0, AB_HASH_FILE_MAX);
	} else {
		ab_hash_add(h, &st.st_size, sizeof(st.st_size));
		ab_hash_add(h, &st.st_mtim.tv_sec, sizeof(st.st_mtim.tv_sec));
		hash_bytes(h, fd, 0, AB_HASH_FILE_MAX / 2);
		hash_bytes(h, fd, st.st_size - AB_HASH_FILE_MAX / 2, AB_HASH_FILE_MAX / 2);
	}
	close(fd);
	return true;
}

void ab_hash_command_files(struct ab_hash *h, int argc, char *const argv[], const char *dir,
			   const char *skip)
{
	struct stat skip_st;
	const struct stat *sk = skip && stat(skip, &skip_st) == 0 ? &skip_st : NULL;
	int files = 0;

	/* the program srun runs, and the scripts it is given: no other word's path is looked
	 * at (a dataset on a mount that hangs, a log the run rewrites) */
	for (int i = 0; i < argc && files < AB_HASH_FILES; i++) {
		const char *eq = argv[i][0] == '-' ? strchr(argv[i], '=') : NULL;
		const char *word = eq ? eq + 1 : argv[i];

		if (i == 0 || script_name(word))
			files += hash_file(h, word, dir, sk);
	}
}
