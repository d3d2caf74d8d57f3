/* config_edit.h - format-preserving edits of YAML and JSON training configs: load a file into a
 * tree that remembers every value's bytes, look keys up by dot path, splice new values in.
 *
 * Functions return 0 or a negative errno value and describe failures, naming the file, the
 * key and the line, in err (see error.h).
 */
#ifndef AUTOBATCH_CONFIG_EDIT_H
#define AUTOBATCH_CONFIG_EDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <stdint.h>

#define AB_CONFIG_MAX_BYTES (8u << 20) /* larger files are refused: no config is that big */
#define AB_CONFIG_MAX_DEPTH 256
#define AB_VALUE_MAX 64
/* a path a trial's copy names (its report, as the program's own metrics file) */
#define AB_PATH_VALUE_MAX 512

enum ab_format { AB_FORMAT_AUTO, AB_FORMAT_YAML, AB_FORMAT_JSON };

enum ab_node_kind { AB_NODE_SCALAR, AB_NODE_MAPPING, AB_NODE_SEQUENCE, AB_NODE_ALIAS };

enum ab_style { AB_STYLE_PLAIN, AB_STYLE_SINGLE, AB_STYLE_DOUBLE, AB_STYLE_BLOCK };

struct ab_node {
	enum ab_node_kind kind;
	enum ab_style style;
	size_t start, end;       /* bytes of the value itself: quotes in, anchor and tag out */
	size_t line, end_line;   /* 1-based */
	char *value;             /* scalar: decoded text; alias: the anchor's name */
	size_t value_len;
	char *anchor;            /* &name on this node, or NULL */
	char *tag;               /* its explicit tag as libyaml resolves it (!!bool: tag:yaml.org,2002:bool), or NULL */
	bool json_literal;       /* JSON number, true, false or null (not a string) */
	size_t n;                /* mapping pairs or sequence items */
	struct ab_node **keys;   /* mapping: key nodes; NULL for a sequence */
	struct ab_node **items;  /* mapping values or sequence items */
	struct ab_node *target;  /* alias: the anchored node it repeats */
};

struct ab_config {
	char *name;              /* as given, for messages */
	char *buf;               /* the file's bytes, NUL-terminated */
	size_t len;
	enum ab_format format;
	size_t ndocs;
	struct ab_node **docs;
};

/* Parses buf (copied). name is used in messages; format AUTO picks by name, then content. */
int ab_config_parse(const char *name, const char *buf, size_t len, enum ab_format format,
		    struct ab_config **out, char *err, size_t errlen);

/* Reads and parses a file the caller may read (no symlink policy: see ab_config_set_file). */
int ab_config_load(const char *path, enum ab_format format, struct ab_config **out, char *err,
		   size_t errlen);

void ab_config_free(struct ab_config *cfg);

/* Finds a scalar by key: document -1 searches all (a key in several is an error). */
int ab_config_find(const struct ab_config *cfg, const char *key, int document,
		   const struct ab_node **out, char *err, size_t errlen);

/* ab_config_find for a key the file may well lack (NULL: none): -ENOENT alone then, with no
 * message (and no walk for the nearest keys); its other refusals (twice in a mapping, in two
 * documents, an alias, a list) say why, as a key the run reads is never taken as absent. */
int ab_config_lookup(const struct ab_config *cfg, const char *key, int document,
		     const struct ab_node **out, char *err, size_t errlen);

/* ab_config_lookup for a value only read, never edited: through aliases and '<<' merges
 * as a YAML reader resolves them, a value on several lines too; its other refusals (twice in
 * a mapping, in two documents, a list) alike. */
int ab_config_read(const struct ab_config *cfg, const char *key, int document,
		   const struct ab_node **out, char *err, size_t errlen);

/* Whether the file has key (NULL: no) as ab_config_find finds it, saying nothing. */
bool ab_config_has(const struct ab_config *cfg, const char *key, int document);

/* The scalar's text as a program reading the file sees it. */
int ab_config_get(const struct ab_config *cfg, const char *key, int document, char *buf,
		  size_t buflen, char *err, size_t errlen);

struct ab_edit {
	const char *key;
	/* a number: 256, 0.5, 1e-4; false; or, for a key that holds a string, an absolute
	 * path of letters, digits and / . _ + - (a trial's report) */
	const char *value;
};

/* Applies the edits to a copy of the bytes: *out (malloc'ed, NUL-terminated), *outlen. Every
 * byte outside the edited values is unchanged. note receives remarks (anchors followed). */
int ab_config_apply(const struct ab_config *cfg, const struct ab_edit *edits, size_t n,
		    int document, char **out, size_t *outlen, char *note, size_t notelen,
		    char *err, size_t errlen);

/* Loads, edits and atomically rewrites path under an advisory lock, keeping the previous
 * bytes in PATH.autobatch~. See config_file.c for the symlink and permission rules. */
int ab_config_set_file(const char *path, enum ab_format format, const struct ab_edit *edits,
		       size_t n, int document, char *note, size_t notelen, char *err,
		       size_t errlen);

/* 0 where ab_config_set_file could rewrite path now (the file, its directory, its owner and
 * group: the rules config_file.c holds), else the error it would give: said before minutes
 * of probing, not after. */
int ab_config_file_writable(const char *path, char *err, size_t errlen);

/* What the file must still be for a rewrite: its fingerprint with the values of keys left
 * out (see fingerprint.h), so another autobatch writing those values is no change. */
struct ab_expect {
	const char *const *keys;
	size_t nkeys;
	uint64_t fingerprint; /* the file without the keys' values (ab_hash_config) */
	uint64_t values;      /* the keys' values (ab_hash_config_values) */
	dev_t dir_dev;        /* the directory the file was read in (ab_config_expect_dir); */
	ino_t dir_ino;        /* 0: not known */
};

/* What a decision is made for: cfg's fingerprint without the keys' values, and the values. */
void ab_config_expect(const struct ab_config *cfg, const char *const *keys, size_t nkeys,
		      struct ab_expect *out);

/* Records in out the directory of real (the config as realpath(3) gives it): a rewrite
 * goes there, not to whatever a path component was swapped to meanwhile (srun run as root
 * on a user's directory). 0 or a negative errno. */
int ab_config_expect_dir(const char *real, struct ab_expect *out);

/* The same, but only when the file still matches expect (what the decision was made for): a
 * file the user changed meanwhile is refused with -ESTALE, their edit kept; one whose batch
 * another srun rewrote meanwhile, with -ENOTUNIQ (it no longer holds the original settings);
 * one in another directory than expect's, with -ESTALE. Returns 1 when it wrote the file
 * (the backup is beside the file it rewrote, a symlink's target), 0 when the file already
 * said so. note also says what a rewrite cannot keep (hard links, ACLs). */
int ab_config_set_file_expect(const char *path, enum ab_format format,
			      const struct ab_edit *edits, size_t n, int document,
			      const struct ab_expect *expect, char *note, size_t notelen,
			      char *err, size_t errlen);

/* Calls fn for every scalar leaf with its canonical dot path (document index first). */
typedef int (*ab_config_visit_fn)(size_t document, const char *path, const struct ab_node *node,
				  void *arg);
int ab_config_visit(const struct ab_config *cfg, ab_config_visit_fn fn, void *arg);

/* True when text is a decimal number (sign, digits, fraction, exponent). */
bool ab_is_number(const char *text, size_t len);

/* A config's null as PyYAML and OmegaConf read one (empty, null, ~; NeMo's files write None). */
bool ab_config_null(const char *text);

/* A word a framework fills in itself (DeepSpeed's "auto" under Hugging Face, ${...}), not a
 * number written another way (10_000, 2.5, 0x10): it starts with no digit, sign or dot. */
bool ab_config_word(const char *text);

/* A config's boolean as a program reading it sees one: YAML 1.1's true and false (true, yes,
 * on in three cases, y and Y, and their opposites; PyYAML reads all but y and n so), JSON's,
 * and 1 and 0 (what a pydantic bool takes too): 1, 0, or -EINVAL for anything else. */
int ab_config_bool(const char *text);

#endif
