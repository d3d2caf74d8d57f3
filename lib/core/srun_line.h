/* srun_line.h - srun's own command line, read as srun's getopt_long reads it: the options
 * before the step's command that the plugin acts on (-D, -t, --multi-prog, heterogeneous).
 */
#ifndef AUTOBATCH_SRUN_LINE_H
#define AUTOBATCH_SRUN_LINE_H

#include <stdbool.h>
#include <stddef.h>

/* What srun's options say about the step. */
struct ab_srun_line {
	const char *chdir; /* -D/--chdir's directory, the last one given; NULL: none (in args) */
	bool time;         /* -t/--time: the step has a time limit of its own (only then is the
			    * step's record read: an RPC, and libslurm's step records leak a
			    * string each, measured with valgrind on 22.05 to 26.05) */
	bool multi_prog;   /* --multi-prog: each task runs its own line of the command's file */
	bool het_step;     /* a bare ':' (srun's border between a heterogeneous step's parts),
			    * or --het-group of several components */
};

/* Reads srun's command line (NUL-separated, as /proc/self/cmdline gives it; len 0: unread)
 * into *line. srun's options are the words before the step's command (argc words of argv,
 * where they end the line; else up to the first word that is no option nor an option's
 * value, as srun's "+" getopt finds it). Options are read as srun's table gives them: a
 * cluster (-lD DIR), a prefix (--chd=DIR), a value that looks like an option (-J -t5). A
 * line cut short before the command tells nothing but its ':'. */
void ab_srun_line_read(const char *args, size_t len, int argc, char *const argv[],
		       struct ab_srun_line *line);

#endif
