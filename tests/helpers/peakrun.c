/* peakrun.c - a plain run of a command, measured as the probe measures a host trial: the
 * peak memory of its whole process group (DataLoader workers included), sampled every
 * 20 ms as the probe samples a trial (ab_group_sample), with the leader's own ru_maxrss. Prints "peak_bytes N status S" on stderr and
 * exits with the command's status. Used by tests and bench/ to check a choice against the
 * program run without autobatch.
 *
 *   peakrun COMMAND [ARGS...]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "group_memory.h"

int main(int argc, char **argv)
{
	struct timespec pause = {0, 20 * 1000 * 1000};
	struct rusage ru = {0};
	struct ab_group_peak group = {0};
	uint64_t peak;
	int status = 0;
	pid_t pid;

	if (argc < 2)
		return fprintf(stderr, "usage: peakrun COMMAND [ARGS...]\n"), 64;
	if ((pid = fork()) == 0) {
		setpgid(0, 0);
		execvp(argv[1], argv + 1);
		perror(argv[1]);
		_exit(127);
	}
	setpgid(pid, pid);
	group.leader = pid;
	while (wait4(pid, &status, WNOHANG, &ru) == 0) {
		ab_group_sample(&group);
		nanosleep(&pause, NULL);
	}
	kill(-pid, SIGKILL); /* workers left behind */
	peak = ab_group_peak_bytes(&group, (uint64_t)ru.ru_maxrss * 1024);
	fprintf(stderr, "peak_bytes %llu status %d\n", (unsigned long long)peak,
		WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
