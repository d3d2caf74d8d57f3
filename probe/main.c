/* main.c - autobatch-probe: the program the probe step runs, also a standalone CLI.
 * Dispatches subcommands; each lives in its own file.
 */
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
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "config"))
		return cmd_config(argc - 1, argv + 1);
	if (!strcmp(argv[1], "ranks"))
		return cmd_ranks(argc - 1, argv + 1);
	if (!strcmp(argv[1], "task"))
		return cmd_task(argc - 1, argv + 1);
	if (!strcmp(argv[1], "watch"))
		return cmd_watch(argc - 1, argv + 1);
	if (!strcmp(argv[1], "presets"))
		return cmd_presets(argc - 1, argv + 1);
	fprintf(stderr, "autobatch-probe: unknown command '%s'; see 'autobatch-probe --help'\n",
		argv[1]);
	return 2;
}
