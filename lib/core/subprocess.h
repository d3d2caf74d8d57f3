/* subprocess.h - runs a program from an argv array (never a shell string) with a given
 * environment: its stderr streamed line by line as it comes, its stdout collected up to a
 * bound, a deadline, and a polite-then-firm stop. What the plugin runs its probe step with.
 */
#ifndef AUTOBATCH_SUBPROCESS_H
#define AUTOBATCH_SUBPROCESS_H

#include <signal.h>
#include <sys/types.h>
#include <stdbool.h>
#include <stddef.h>

#define AB_SUBPROCESS_STDOUT_MAX (1u << 20)
#define AB_SUBPROCESS_LINE_MAX 4096

struct ab_subprocess {
	char *const *argv;       /* argv[0] is an absolute path */
	char *const *envp;       /* the whole environment of the child */
	double timeout_s;        /* 0: none */
	/* Called with each complete stderr line (without the newline), as it arrives. */
	void (*on_line)(void *arg, const char *line);
	void *arg;
	/* results */
	char *out;               /* stdout, NUL-terminated (malloc'ed) */
	size_t out_len;
	bool out_truncated;
	int status;              /* from waitpid */
	bool timed_out;
};

/* Runs to completion. 0 when the program ran (see status/timed_out), or a negative errno
 * with a message when it could not be started. On the deadline the child gets SIGINT twice
 * (srun's own "abort" gesture, which cancels a job step), then SIGKILL after grace_s. */
int ab_subprocess_run(struct ab_subprocess *p, double grace_s, char *err, size_t errlen);

void ab_subprocess_free(struct ab_subprocess *p);

/* 1 once child pid has ended, 0 while it runs (or on EINTR), a negative errno when it cannot
 * be asked. The child is not reaped: its pid, and so its process group's id, stays ours until
 * the caller reaps it. */
int ab_child_ended(pid_t pid);

#endif
