/* main.c - autobatch-probe: the program the probe step runs, also a standalone CLI.
 * Dispatches subcommands; each lives in its own file.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: autobatch-probe COMMAND [ARGS]\n"
		"\n"
		"Finds the per-GPU batch size that fits a memory fraction, for the autobatch\n"
		"Slurm plugin (srun --autobatch) or on its own.\n"
		"\n"
		"Commands:\n"
		"  run [OPTIONS] [-- COMMAND]   find the batch size (run --help for options)\n"
		"  config get FILE KEY          print a value of a YAML/JSON config\n"
		"  config set FILE KEY=VALUE... change values, keeping every other byte\n"
		"                               (atomic; the old file stays in FILE.autobatch~)\n"
		"  config detect FILE           name the framework preset the file follows\n"
		"  presets                      list the framework presets and their keys\n"
		"  ranks N [--capacity B] -- COMMAND\n"
		"                               a trial's N ranks on this node (run --ranks N)\n"
		"  task [--capacity B] -- COMMAND\n"
		"                               one task of a trial step (run --step-nodes)\n"
		"  watch --pid P --limit B --batch N\n"
		"                               a real step's task, against its decision's limit\n"
		"\n"
		"Options:\n"
		"  -h, --help       show this help and exit\n"
		"  -V, --version    show the version and exit\n"
		"\n"
		"Keys are dot paths: a.b.c, list[2].x, a[\"key.with.dots\"]; --document N\n"
		"picks one document of a multi-document YAML file.\n");
}

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	void (*usage)(FILE *out);
} commands[] = {
	{"run", cmd_run, run_usage},	     {"config", cmd_config, config_usage},
	{"ranks", cmd_ranks, ranks_usage},   {"task", cmd_task, task_usage},
	{"watch", cmd_watch, watch_usage},   {"presets", cmd_presets, presets_usage},
};

/* -h or --help among a command's own words (before "--": the rest is the trial's) */
static bool help_asked(int argc, char **argv)
{
	for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("autobatch-probe %s\n", PACKAGE_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name))
			continue;
		if (help_asked(argc, argv)) {
			commands[i].usage(stdout);
			return 0;
		}
		return commands[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "autobatch-probe: unknown command '%s'; see 'autobatch-probe --help'\n",
		argv[1]);
	return 2;
}
