/* main.c - autobatch-probe: the program the probe step runs, also a standalone CLI.
 * Dispatches subcommands; each lives in its own file.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: autobatch-probe [--help] [--version]\n"
		"\n"
		"Finds the per-GPU batch size that fits a memory fraction, for the autobatch\n"
		"Slurm plugin (srun --autobatch) or on its own.\n"
		"\n"
		"Options:\n"
		"  -h, --help       show this help and exit\n"
		"  -V, --version    show the version and exit\n"
		"\n"
		"Report bugs to <%s>.\n",
		PACKAGE_BUGREPORT);
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
	fprintf(stderr, "autobatch-probe: unknown command '%s'; see 'autobatch-probe --help'\n",
		argv[1]);
	return 2;
}
