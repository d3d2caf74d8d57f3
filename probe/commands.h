/* commands.h - the subcommands of autobatch-probe, one file each; each returns the
 * process exit status (0 ok, 1 refused or failed, 2 usage), and prints its usage to out.
 */
#ifndef AUTOBATCH_PROBE_COMMANDS_H
#define AUTOBATCH_PROBE_COMMANDS_H

#include <stdio.h>

void config_usage(FILE *out);
void presets_usage(FILE *out);
void ranks_usage(FILE *out);
void task_usage(FILE *out);
void watch_usage(FILE *out);
void run_usage(FILE *out);

int cmd_config(int argc, char **argv);
int cmd_presets(int argc, char **argv);
int cmd_ranks(int argc, char **argv);
/* How long `ranks` may take to stop its trial at a SIGINT: its step's stop (stop_step: 5 s
 * for the tasks, 15 for srun's cancellation) and a margin; then it is killed. */
#define AB_RANKS_STOP_S 30.0
int cmd_task(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_run(int argc, char **argv);

#endif
