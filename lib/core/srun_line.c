/* srun_line.c - srun's command line read as srun's getopt_long reads it (see srun_line.h):
 * srun's option table, the SPANK options srun also reads, and the one scan of the line.
 */
#include "srun_line.h"

#include <string.h>

#include "request.h"

struct srun_option {
	const char *name; /* long, without "--" */
	int has_arg;      /* getopt: 0 none, 1 required (glued or the next word), 2 optional
			   * (glued only) */
	char letter;      /* its short form; 0: none */
};

/* srun's options: those with an srun setter in Slurm's src/common/slurm_opt.c (26.05, a
 * superset of 22.05's and 24.11's: an option a release lacks is one its srun refuses). */
static const struct srun_option srun_options[] = {
	{"accel-bind", 1, 0}, {"account", 1, 'A'}, {"acctg-freq", 1, 0}, {"async", 0, 0},
	{"autocomplete", 1, 0}, {"bb", 1, 0}, {"bbf", 1, 0}, {"bcast", 2, 0},
	{"bcast-exclude", 1, 0}, {"begin", 1, 'b'}, {"chdir", 1, 'D'}, {"cluster", 1, 0},
	{"cluster-constraint", 1, 0}, {"clusters", 1, 'M'}, {"comment", 1, 0}, {"compress", 2, 0},
	{"consolidate-segments", 0, 0}, {"constraint", 1, 'C'}, {"container", 1, 0},
	{"container-id", 1, 0}, {"context", 1, 0}, {"contiguous", 0, 0}, {"core-spec", 1, 'S'},
	{"cores-per-socket", 1, 0}, {"cpu-bind", 1, 0}, {"cpu-freq", 1, 0}, {"cpu_bind", 1, 0},
	{"cpus-per-gpu", 1, 0}, {"cpus-per-task", 1, 'c'}, {"deadline", 1, 0},
	{"debugger-test", 0, 0}, {"delay-boot", 1, 0}, {"dependency", 1, 'd'},
	{"disable-status", 0, 'X'}, {"distribution", 1, 'm'}, {"epilog", 1, 0}, {"error", 1, 'e'},
	{"exact", 0, 0}, {"exclude", 1, 'x'}, {"exclusive", 2, 0}, {"export", 1, 0},
	{"external-launcher", 2, 0}, {"extra", 1, 0}, {"extra-node-info", 1, 'B'},
	{"gpu-bind", 1, 0}, {"gpu-freq", 1, 0}, {"gpus", 1, 'G'}, {"gpus-per-node", 1, 0},
	{"gpus-per-socket", 1, 0}, {"gpus-per-task", 1, 0}, {"gres", 1, 0}, {"gres-flags", 1, 0},
	{"help", 0, 'h'}, {"het-group", 1, 0}, {"hint", 1, 0}, {"hold", 0, 'H'},
	{"ignore-signals", 1, 0}, {"immediate", 2, 'I'}, {"input", 1, 'i'}, {"interactive", 0, 0},
	{"job-name", 1, 'J'}, {"jobid", 1, 0}, {"kill-on-bad-exit", 2, 'K'}, {"label", 0, 'l'},
	{"licenses", 1, 'L'}, {"mail-type", 1, 0}, {"mail-user", 1, 0}, {"mcs-label", 1, 0},
	{"mem", 1, 0}, {"mem-bind", 1, 0}, {"mem-per-cpu", 1, 0}, {"mem-per-gpu", 1, 0},
	{"mem-update", 1, 0}, {"mincpus", 1, 0}, {"mpi", 1, 0}, {"msg-timeout", 1, 0},
	{"multi-prog", 0, 0}, {"network", 1, 0}, {"nice", 2, 0}, {"no-allocate", 0, 'Z'},
	{"no-kill", 2, 'k'}, {"nodefile", 1, 'F'}, {"nodelist", 1, 'w'}, {"nodes", 1, 'N'},
	{"ntasks", 1, 'n'}, {"ntasks-per-core", 1, 0}, {"ntasks-per-gpu", 1, 0},
	{"ntasks-per-node", 1, 0}, {"ntasks-per-socket", 1, 0}, {"ntasks-per-tres", 1, 0},
	{"oom-kill-step", 2, 0}, {"open-mode", 1, 0}, {"output", 1, 'o'}, {"overcommit", 0, 'O'},
	{"overlap", 2, 0}, {"oversubscribe", 0, 's'}, {"pack-group", 1, 0}, {"parsable", 0, 0},
	{"partition", 1, 'p'}, {"prefer", 1, 0}, {"preserve-env", 0, 'E'}, {"priority", 1, 0},
	{"profile", 1, 0}, {"prolog", 1, 0}, {"propagate", 2, 0}, {"pty", 2, 0}, {"qos", 1, 'q'},
	{"quiet", 0, 'Q'}, {"quit-on-interrupt", 0, 0}, {"reboot", 0, 0}, {"relative", 1, 'r'},
	{"reservation", 1, 0}, {"resources", 1, 0}, {"resv-ports", 2, 0}, {"runtime", 1, 0},
	{"segment", 1, 0}, {"send-libs", 2, 0}, {"signal", 1, 0}, {"slurmd-debug", 1, 0},
	{"sockets-per-node", 1, 0}, {"spread-job", 0, 0}, {"spread-segments", 0, 0},
	{"stepmgr", 0, 0}, {"switches", 1, 0}, {"task-epilog", 1, 0}, {"task-prolog", 1, 0},
	{"tasks-per-node", 1, 0}, {"test-only", 0, 0}, {"thread-spec", 1, 0}, {"threads", 1, 'T'},
	{"threads-per-core", 1, 0}, {"time", 1, 't'}, {"time-min", 1, 0}, {"tmp", 1, 0},
	{"treewidth", 1, 0}, {"tres-bind", 1, 0}, {"tres-per-task", 1, 0}, {"unbuffered", 0, 'u'},
	{"usage", 0, 0}, {"use-min-nodes", 0, 0}, {"verbose", 0, 'v'}, {"version", 0, 'V'},
	{"wait", 1, 'W'}, {"wait-for-children", 0, 0}, {"wckey", 1, 0}, {"whole", 0, 0},
	{"x11", 2, 0},
};

/* The SPANK options srun reads beside its own: pyxis' (its args.c, 0.24); this plugin's are
 * ab_options. Another plugin's option is unknown: its value, a word of its own, is skipped
 * as a word that is no option. */
static const struct srun_option pyxis_options[] = {
	{"container-image", 1, 0}, {"container-mounts", 1, 0}, {"container-workdir", 1, 0},
	{"container-name", 1, 0}, {"container-save", 1, 0}, {"container-env", 1, 0},
	{"container-unshare", 1, 0}, {"container-mount-home", 0, 0},
	{"no-container-mount-home", 0, 0}, {"container-remap-root", 0, 0},
	{"no-container-remap-root", 0, 0}, {"container-entrypoint", 0, 0},
	{"no-container-entrypoint", 0, 0}, {"container-entrypoint-log", 0, 0},
	{"container-writable", 0, 0}, {"container-readonly", 0, 0},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Option i of all those srun reads, into *o; false past the last. */
static bool option_at(size_t i, struct srun_option *o)
{
	if (i < COUNT(srun_options)) {
		*o = srun_options[i];
		return true;
	}
	i -= COUNT(srun_options);
	if (i < COUNT(pyxis_options)) {
		*o = pyxis_options[i];
		return true;
	}
	i -= COUNT(pyxis_options);
	if (i >= AB_OPT_COUNT)
		return false;
	*o = (struct srun_option){ab_options[i].name, ab_options[i].has_arg, 0};
	return true;
}

/* --NAME (n characters) as getopt_long finds it: the option of that name, else the first
 * whose name it begins (srun refuses a prefix of several, so which one does not matter). */
static bool long_option(const char *name, size_t n, struct srun_option *o)
{
	struct srun_option c;
	bool prefix = false;

	if (n == 0)
		return false;
	for (size_t i = 0; option_at(i, &c); i++) {
		if (strncmp(c.name, name, n))
			continue;
		if (!c.name[n]) {
			*o = c;
			return true;
		}
		if (!prefix)
			*o = c;
		prefix = true;
	}
	return prefix;
}

static bool short_option(char letter, struct srun_option *o)
{
	for (size_t i = 0; i < COUNT(srun_options); i++)
		if (srun_options[i].letter == letter) {
			*o = srun_options[i];
			return true;
		}
	return false;
}

/* --het-group's value names more than one component: "0,1", "0-2", not "1" or "1-1" */
static bool het_groups(const char *value)
{
	const char *dash;

	if (!value)
		return false;
	if (strchr(value, ','))
		return true;
	if (!(dash = strchr(value, '-')))
		return false;
	return strncmp(value, dash + 1, (size_t)(dash - value)) || dash[1 + (dash - value)];
}

/* What one of srun's options, with its value (NULL: none), says about the step. */
static void apply(const struct srun_option *o, const char *value, struct ab_srun_line *line)
{
	if (o->letter == 'D')
		line->chdir = value;
	else if (o->letter == 't')
		line->time = true;
	else if (!strcmp(o->name, "multi-prog"))
		line->multi_prog = true;
	else if (!strcmp(o->name, "het-group") || !strcmp(o->name, "pack-group"))
		line->het_step = line->het_step || het_groups(value);
}

/* The word at args[i], whole before end; NULL past end or where it is cut short. */
static const char *word_at(const char *args, size_t end, size_t i)
{
	return i < end && memchr(args + i, '\0', end - i) ? args + i : NULL;
}

static size_t next_word(const char *args, size_t end, size_t i)
{
	return i + strnlen(args + i, end - i) + 1;
}

/* The option word w (-xyz or --name[=value]) into *o; *value where glued; *takes_next when
 * its value is the next word. False where srun knows no such option. */
static bool option_word(const char *w, struct ab_srun_line *line, struct srun_option *o,
			const char **value, bool *takes_next)
{
	*value = NULL;
	*takes_next = false;
	if (w[1] == '-') {
		size_t n = strcspn(w + 2, "=");

		if (!long_option(w + 2, n, o))
			return false;
		if (w[2 + n] == '=')
			*value = w + 3 + n;
		else
			*takes_next = o->has_arg == 1;
		return true;
	}
	/* a cluster: flags, then at most one that takes a value (the rest, or the next word) */
	for (const char *c = w + 1; *c; c++) {
		if (!short_option(*c, o))
			return false;
		if (o->has_arg == 0) {
			apply(o, NULL, line);
			continue;
		}
		if (c[1] || o->has_arg == 2)
			*value = c + 1;
		else
			*takes_next = true;
		return true;
	}
	return false; /* the cluster's flags are applied */
}

/* srun's options, from its second word up to end (the command's first word where anchored,
 * else the line's end: then the first word that is neither option nor value ends them).
 * False where the line is cut short before they end. */
static bool read_options(const char *args, size_t end, bool anchored, struct ab_srun_line *line)
{
	size_t i = next_word(args, end, 0);

	while (i < end) {
		const char *w = word_at(args, end, i), *value;
		struct srun_option o;
		bool takes_next;

		if (!w)
			return false;
		i = next_word(args, end, i);
		if (!strcmp(w, "--"))
			return true;
		if (w[0] != '-' || !w[1]) {
			/* before a known command, the value of an option srun's table lacks */
			if (anchored)
				continue;
			return true;
		}
		if (!option_word(w, line, &o, &value, &takes_next))
			continue;
		if (takes_next) {
			if (!(value = word_at(args, end, i)) && !anchored)
				return false;
			if (value)
				i = next_word(args, end, i);
		}
		apply(&o, value, line);
	}
	return anchored;
}

/* srun hands the plugin its command with the program found: train.sh as /home/u/train.sh,
 * python as /usr/bin/python (srun's search_path); the word typed is its tail */
static bool same_program(const char *typed, const char *found)
{
	size_t t, f = strlen(found);

	while (!strncmp(typed, "./", 2))
		typed += 2;
	t = strlen(typed);

	return t < f && found[f - t - 1] == '/' && !strcmp(found + f - t, typed);
}

/* Where the step's command (argc words of argv, the first as typed or as srun found it)
 * starts on the line, as its last words; 0 where the line does not end with it. */
static size_t command_at(const char *args, size_t len, int argc, char *const argv[])
{
	size_t words = 0, i, at;

	if (len == 0 || args[len - 1] != '\0' || argc <= 0)
		return 0;
	for (i = 0; i < len; i = next_word(args, len, i))
		words++;
	if ((size_t)argc >= words)
		return 0;
	for (i = 0; words-- > (size_t)argc;)
		i = next_word(args, len, i);
	at = i;
	for (int k = 0; k < argc; k++, i = next_word(args, len, i))
		if (strcmp(args + i, argv[k]) && (k > 0 || !same_program(args + i, argv[0])))
			return 0;
	return at;
}

/* A bare ':' after srun itself, anywhere on the line: srun splits the step there. */
static bool bare_colon(const char *args, size_t len)
{
	for (size_t i = strnlen(args, len) + 1; i < len; i = next_word(args, len, i))
		if (args[i] == ':' && (i + 1 == len || args[i + 1] == '\0'))
			return true;
	return false;
}

void ab_srun_line_read(const char *args, size_t len, int argc, char *const argv[],
		       struct ab_srun_line *line)
{
	size_t at = command_at(args, len, argc, argv);
	struct ab_srun_line read = {0};

	*line = (struct ab_srun_line){0};
	if (len == 0)
		return;
	if (read_options(args, at ? at : len, at > 0, &read))
		*line = read;
	if (line->chdir && !*line->chdir)
		line->chdir = NULL;
	line->het_step = line->het_step || bare_colon(args, len);
}
