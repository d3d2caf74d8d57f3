/* test_subprocess.c - the one process runner (lib/core/subprocess.c) with real processes: a
 * stop's SIGINT, its second SIGINT and its SIGKILL, the interrupt flag, the sampling
 * callback, a process group ended whole, output collected and lines cut, a program's tick at
 * its period (not a busy loop), and a child that leaves a process holding its pipes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "unit.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "argv.h"
#include "clock.h"
#include "subprocess.h"

static char err[512];
static char *env[] = {(char *)"PATH=/usr/bin:/bin", NULL};

static void run_shell(void *arg)
{
	execle("/bin/sh", "sh", "-c", (const char *)arg, (char *)NULL, env);
	_exit(127);
}

/* A child that counts the SIGINTs it gets and stays: the deadline's stop sends two (srun
 * aborts a step on two within a second), then SIGKILL after the grace. */
static void deadline_sigint_twice_then_kill(void **state)
{
	char path[] = "/tmp/ab-test-sigint-XXXXXX", cmd[256], seen[16] = "";
	int fd = mkstemp(path);
	struct ab_proc p;
	double t0;
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "n=0; trap 'n=$((n+1)); echo $n >%s' INT; "
				   "while :; do sleep 0.05; done", path);
	assert_int_equal(ab_proc_start(&p, 0, run_shell, cmd, err, sizeof(err)), 0);
	t0 = ab_now();
	assert_int_equal(ab_proc_wait(&p, &(struct ab_proc_watch){.deadline_s = 0.5,
								   .fds = {-1, -1},
								   .grace_s = 1.5}),
			 AB_STOP_DEADLINE);
	assert_true(ab_now() - t0 >= 1.9 && ab_now() - t0 < 5);
	assert_true(WIFSIGNALED(p.status) && WTERMSIG(p.status) == SIGKILL);
	assert_non_null(f = fopen(path, "r"));
	assert_non_null(fgets(seen, sizeof(seen), f));
	fclose(f);
	unlink(path);
	assert_string_equal(seen, "2\n");
}

/* The interrupt flag (the probe's SIGINT handler) stops the child at once with no grace. */
static void interrupt_flag(void **state)
{
	volatile sig_atomic_t flag = 1;
	struct ab_proc p;
	double t0 = ab_now();

	(void)state;
	assert_int_equal(ab_proc_start(&p, 0, run_shell, "exec sleep 30", err, sizeof(err)), 0);
	assert_int_equal(ab_proc_wait(&p, &(struct ab_proc_watch){.interrupted = &flag,
								   .fds = {-1, -1}}),
			 AB_STOP_INTERRUPT);
	assert_true(ab_now() - t0 < 2);
	assert_true(WIFSIGNALED(p.status) && WTERMSIG(p.status) == SIGKILL);
}

struct samples {
	int n;
	pid_t pid;
};

static bool sample_three(void *arg, pid_t pid, double elapsed)
{
	struct samples *s = arg;

	(void)elapsed;
	s->pid = pid;
	return ++s->n == 3;
}

/* The sampling callback runs every period with the child's pid; true stops it. */
static void sampling_stops(void **state)
{
	struct samples s = {0, 0};
	struct ab_proc p;
	double t0 = ab_now();

	(void)state;
	assert_int_equal(ab_proc_start(&p, 0, run_shell, "exec sleep 30", err, sizeof(err)), 0);
	assert_int_equal(ab_proc_wait(&p, &(struct ab_proc_watch){.period_s = 0.1,
								   .sample = sample_three,
								   .fds = {-1, -1},
								   .arg = &s}),
			 AB_STOP_WATCH);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.pid, p.pid);
	assert_true(ab_now() - t0 >= 0.2 && ab_now() - t0 < 3);
}

/* With AB_PROC_GROUP what the child started ends with it, even when the child itself ended
 * by itself first; a child that ends by itself is AB_STOP_NONE with its exit status. */
static void group_ended_whole(void **state)
{
	char path[] = "/tmp/ab-test-group-XXXXXX", cmd[256], pid[32] = "";
	int fd = mkstemp(path);
	struct ab_proc p;
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "sleep 30 & echo $! >%s; exit 3", path);
	assert_int_equal(ab_proc_start(&p, AB_PROC_GROUP | AB_PROC_PDEATHSIG, run_shell, cmd, err,
				       sizeof(err)),
			 0);
	assert_int_equal(ab_proc_wait(&p, &(struct ab_proc_watch){.deadline_s = 10,
								   .fds = {-1, -1}}),
			 AB_STOP_NONE);
	assert_true(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 3);
	assert_non_null(f = fopen(path, "r"));
	assert_non_null(fgets(pid, sizeof(pid), f));
	fclose(f);
	unlink(path);
	for (int i = 0; i < 50 && kill((pid_t)atol(pid), 0) == 0; i++)
		usleep(20000); /* killed; reaped by init, or by the test runner */
	/* gone, or a zombie that is no longer ours to reap: either way not sleeping */
	char stat[64], state_c = 0, line[256];
	snprintf(stat, sizeof(stat), "/proc/%ld/stat", atol(pid));
	if ((f = fopen(stat, "r"))) {
		if (fgets(line, sizeof(line), f) && strrchr(line, ')'))
			state_c = strrchr(line, ')')[2];
		fclose(f);
		assert_int_equal(state_c, 'Z');
	}
}

/* ab_subprocess_run: stdout collected, stderr handed over line by line (an overlong line cut
 * into pieces of AB_SUBPROCESS_LINE_MAX), the exit status. */
static int nlines;
static size_t longest;
static char first_line[64];

static void on_line(void *arg, const char *line)
{
	(void)arg;
	if (nlines++ == 0)
		snprintf(first_line, sizeof(first_line), "%s", line);
	longest = strlen(line) > longest ? strlen(line) : longest;
}

static void program_output(void **state)
{
	char *argv[] = {(char *)"/bin/sh", (char *)"-c",
			(char *)"echo out; echo first >&2; head -c 10000 /dev/zero | tr '\\0' x >&2; "
				"echo >&2; exit 4",
			NULL};
	struct ab_subprocess p = {.argv = argv, .envp = env, .on_line = on_line};

	(void)state;
	nlines = 0;
	longest = 0;
	assert_int_equal(ab_subprocess_run(&p, 1, err, sizeof(err)), 0);
	assert_string_equal(p.out, "out\n");
	assert_false(p.timed_out);
	assert_true(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 4);
	assert_string_equal(first_line, "first");
	assert_int_equal(longest, AB_SUBPROCESS_LINE_MAX);
	assert_int_equal(nlines, 1 + 3); /* 10000 bytes: 4096 + 4096 + 1808 */
	ab_subprocess_free(&p);
}

/* A program's tick runs every 0.2 s while it runs, not on every pass of the wait: srun
 * calls it while probing for minutes (the hold's hellos), and a tick on every pass made
 * srun spin a core. */
static int nticks;

static void count_tick(void *arg)
{
	(void)arg;
	nticks++;
}

static void program_ticks(void **state)
{
	char *argv[] = {(char *)"/bin/sh", (char *)"-c", (char *)"sleep 1", NULL};
	struct ab_subprocess p = {.argv = argv, .envp = env, .tick = count_tick};
	struct rusage before, after;
	double cpu;

	(void)state;
	nticks = 0;
	getrusage(RUSAGE_SELF, &before);
	assert_int_equal(ab_subprocess_run(&p, 10, err, sizeof(err)), 0);
	getrusage(RUSAGE_SELF, &after);
	cpu = (double)(after.ru_utime.tv_sec - before.ru_utime.tv_sec) +
	      (double)(after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
	      (double)(after.ru_utime.tv_usec - before.ru_utime.tv_usec) / 1e6 +
	      (double)(after.ru_stime.tv_usec - before.ru_stime.tv_usec) / 1e6;
	assert_true(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0);
	assert_in_range(nticks, 3, 8); /* 1 s at 0.2 s, give or take a start and an end */
	assert_true(cpu < 0.2);
	ab_subprocess_free(&p);
}

/* A program that cannot start: exit 127 and the reason on its stderr. */
static void program_missing(void **state)
{
	char *argv[] = {(char *)"/nonexistent/autobatch-probe", NULL};
	struct ab_subprocess p = {.argv = argv, .envp = env, .on_line = on_line};

	(void)state;
	nlines = 0;
	assert_int_equal(ab_subprocess_run(&p, 1, err, sizeof(err)), 0);
	assert_true(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 127);
	assert_true(strstr(first_line, "cannot run /nonexistent/autobatch-probe") != NULL);
	ab_subprocess_free(&p);
}

/* A child that leaves a process holding its pipes open must not keep the plugin (srun)
 * waiting for the pipes to close, before or after its deadline. */
static void left_behind(void **state)
{
	char *left[] = {(char *)"/bin/sh", (char *)"-c", (char *)"(sleep 30 &); echo hi", NULL};
	char *hung[] = {(char *)"/bin/sh", (char *)"-c", (char *)"sleep 40 & exec sleep 60", NULL};
	struct ab_subprocess p = {.argv = left, .envp = env};
	double t0 = ab_now();

	(void)state;
	assert_int_equal(ab_subprocess_run(&p, 1, err, sizeof(err)), 0);
	assert_true(ab_now() - t0 < 10);
	assert_string_equal(p.out, "hi\n");
	assert_true(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0);
	ab_subprocess_free(&p);
	p = (struct ab_subprocess){.argv = hung, .envp = env, .timeout_s = 1};
	t0 = ab_now();
	assert_int_equal(ab_subprocess_run(&p, 1, err, sizeof(err)), 0);
	assert_true(p.timed_out);
	assert_true(ab_now() - t0 < 10);
	ab_subprocess_free(&p);
	if (system("pkill -f '^sleep (30|40)$'") < 0)
		fail_msg("cannot run pkill");
}

/* The argument vector srun's probe step and the probe's trial steps are built in: borrowed
 * and owned words, an admin's list split on blanks, NULL-terminated; past AB_ARGV_MAX a clear
 * refusal, not a truncated command. */
static void argv_built(void **state)
{
	struct ab_argv a = {0};
	char words[] = "--device  host\t--steps 2";

	(void)state;
	assert_int_equal(ab_argv_done(&a, "nothing", err, sizeof(err)), -ENOMEM);
	ab_argv_add(&a, "srun");
	ab_argv_addf(&a, "--ntasks=%d", 4);
	ab_argv_add_words(&a, words);
	assert_int_equal(ab_argv_done(&a, "it", err, sizeof(err)), 0);
	assert_int_equal(a.n, 6);
	assert_string_equal(a.v[1], "--ntasks=4");
	assert_string_equal(a.v[3], "host");
	assert_string_equal(a.v[4], "--steps");
	assert_null(a.v[6]);
	ab_argv_free(&a);
	for (int i = 0; i < AB_ARGV_MAX + 10; i++)
		ab_argv_addf(&a, "%d", i);
	assert_int_equal(ab_argv_done(&a, "the probe's command line", err, sizeof(err)), -E2BIG);
	assert_string_equal(err, "the probe's command line is longer than 4096 arguments");
	assert_int_equal(a.n, AB_ARGV_MAX);
	assert_null(a.v[a.n]);
	ab_argv_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(deadline_sigint_twice_then_kill),
		cmocka_unit_test(interrupt_flag),
		cmocka_unit_test(sampling_stops),
		cmocka_unit_test(group_ended_whole),
		cmocka_unit_test(program_output),
		cmocka_unit_test(program_ticks),
		cmocka_unit_test(program_missing),
		cmocka_unit_test(left_behind),
		cmocka_unit_test(argv_built),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
