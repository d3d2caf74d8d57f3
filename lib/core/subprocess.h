/* subprocess.h - the one way autobatch runs a process: ab_proc_start forks a child with a
 * clean signal state, ab_proc_wait watches it (a deadline, an interrupt flag, a sampling
 * callback, pipes read as they fill) and stops it politely or at once; the child, or its
 * whole process group, is ended before it is reaped. ab_subprocess_run, on top of them, runs
 * a program from an argv array (never a shell string): what the plugin runs its probe step
 * with. The probe's trials (trial_exec.c, trial_model.c) use ab_proc_* directly.
 */
#ifndef AUTOBATCH_SUBPROCESS_H
#define AUTOBATCH_SUBPROCESS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

/* In a child before it execs or waits: every descriptor from first on closed (close_range,
 * else one by one), so that no copy of the parent's sockets or pipes outlives their use. */
void ab_close_from(int first);

/* ---- one child, watched ---- */

#define AB_PROC_GROUP 1u     /* the child leads its own process group; stops end the group */
#define AB_PROC_PDEATHSIG 2u /* the child is killed when we die (SIGKILL, a cancelled step) */

struct ab_proc {
	pid_t pid;
	unsigned flags;
	int status;       /* from wait4, once reaped */
	struct rusage ru; /* the child's own resources (ru_maxrss) */
};

/* Forks a child with default signal handlers and an empty signal mask (srun blocks signals
 * a child must not inherit), AB_PROC_* applied, and runs body(arg) in it: body execs or
 * _exits, never returns. 0, or a negative errno with a message. */
int ab_proc_start(struct ab_proc *p, unsigned flags, void (*body)(void *arg), void *arg,
		  char *err, size_t errlen);

/* 1 once child pid has ended, 0 while it runs (or on EINTR), a negative errno when it cannot
 * be asked. The child is not reaped: its pid, and so its process group's id, stays ours until
 * the caller reaps it. */
int ab_proc_ended(pid_t pid);

/* Why ab_proc_wait stopped the child; AB_STOP_NONE when it ended by itself. */
enum ab_stop { AB_STOP_NONE, AB_STOP_DEADLINE, AB_STOP_INTERRUPT, AB_STOP_WATCH };

struct ab_proc_watch {
	double deadline_s;                          /* from the start of the wait; 0: none */
	const volatile sig_atomic_t *interrupted;   /* stop once it is nonzero; may be NULL */
	double period_s; /* how often sample runs and the end is looked for; 0: 0.2 s */
	/* Called every period while the child runs (resident memory, NVML, its report);
	 * returns true to stop it (AB_STOP_WATCH). May be NULL. */
	bool (*sample)(void *arg, pid_t pid, double elapsed_s);
	/* Up to two pipes read while it runs, each chunk handed to on_data; -1: none. */
	int fds[2];
	void (*on_data)(void *arg, int index, const char *buf, size_t n);
	void *arg;
	/* A stop: with grace_s > 0, SIGINT twice (srun's own "abort" gesture, which cancels a
	 * job step), SIGKILL after grace_s; with 0, SIGKILL at once. */
	double grace_s;
	/* Once the child ended, its pipes are read until they close, for at most drain_s: a
	 * process it left behind that holds them open must not keep us waiting forever. */
	double drain_s;
};

/* Waits for the child's end as w says, then ends its group (AB_PROC_GROUP: the leader is
 * not reaped yet, so its id is not reused) and reaps it. Closes w's pipes. */
enum ab_stop ab_proc_wait(struct ab_proc *p, const struct ab_proc_watch *w);

/* ---- a program, its output collected ---- */

#define AB_SUBPROCESS_STDOUT_MAX (1u << 20)
#define AB_SUBPROCESS_LINE_MAX 4096

struct ab_subprocess {
	char *const *argv;       /* argv[0] is an absolute path */
	char *const *envp;       /* the whole environment of the child */
	double timeout_s;        /* 0: none */
	const volatile sig_atomic_t *interrupted; /* stop it once nonzero; may be NULL */
	bool die_with_parent;    /* AB_PROC_PDEATHSIG: it is killed when we die */
	void (*tick)(void *arg); /* called every 0.2 s while it runs; may be NULL */
	void *tick_arg;
	/* Called with each complete stderr line (without the newline), as it arrives. */
	void (*on_line)(void *arg, const char *line);
	void *arg;
	/* results */
	char *out;               /* stdout, NUL-terminated (malloc'ed) */
	size_t out_len;
	bool out_truncated;
	int status;              /* from waitpid */
	bool timed_out;
	bool stopped;            /* by *interrupted */
};

/* Runs to completion. 0 when the program ran (see status/timed_out/stopped), or a negative
 * errno with a message when it could not be started. On the deadline or an interrupt the
 * child gets SIGINT twice, then SIGKILL after grace_s. */
int ab_subprocess_run(struct ab_subprocess *p, double grace_s, char *err, size_t errlen);

void ab_subprocess_free(struct ab_subprocess *p);

#endif
