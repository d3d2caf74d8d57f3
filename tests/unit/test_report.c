/* test_report.c - the probe's JSON report (lib/probe/report.c) read back by the plugin's
 * reader (lib/core/decision.c): the two sides of the protocol agree on every field the
 * plugin uses, each status, the global batch rule; and the lines people read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "unit.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "decision.h"
#include "job_comment.h"
#include "protocol.h"
#include "report.h"
#include "report_run.h"

#define GiB (1024ULL * 1024 * 1024)

static char err[512];

/* A decision of batch 24 x accumulation 4 on 8 devices, from two trials. */
static struct ab_trial trial_v[2] = {
	{.batch = 16, .has_peak = true, .peak_bytes = 40 * GiB, .has_step = true, .step_s = 0.5,
	 .steps = 4, .runs = 1, .seconds = 7.5},
	{.batch = 24, .has_peak = true, .peak_bytes = 60 * GiB, .has_step = true, .step_s = 0.7,
	 .steps = 4, .runs = 1, .seconds = 5},
};
static struct ab_trials trials = {.v = trial_v, .n = 2, .cap = 2};
static struct ab_report_fraction fraction = {
	.fraction = 0.8,
	.decision = {.batch = 24, .grad_accum = 4, .limit_bytes = 64 * GiB, .confidence = 91,
		     .trials_used = 2, .chosen = 1},
	.ok = true,
};

static struct ab_report report(void)
{
	return (struct ab_report){.ok = true, .mode = "exec", .objective = "memory",
				  .phase = "train", .device_kind = "sim", .device_name = "sim",
				  .total_bytes = 80 * GiB, .fractions = &fraction, .nfractions = 1,
				  .devices = 8, .trials = &trials, .elapsed_s = 12.5};
}

static void round_trip(void **state)
{
	struct ab_report r = report();
	struct ab_result res;
	char *json = ab_report_json(&r);

	(void)state;
	assert_non_null(json);
	assert_int_equal(ab_result_parse(json, strlen(json), &res, err, sizeof(err)), 0);
	assert_true(res.ok);
	assert_false(res.interrupted);
	assert_int_equal(res.batch, 24);
	assert_int_equal(res.grad_accum, 4);
	assert_int_equal(res.global_batch, 24 * 4 * 8); /* no global batch asked: the product */
	assert_true(res.fraction == 0.8);
	assert_int_equal(res.confidence, 91);
	assert_int_equal(res.trials, 2);
	assert_true(res.longest_trial_s == 7.5); /* a cut-short decision's next job weighs it */
	assert_int_equal(res.total_bytes, 80 * GiB);
	assert_string_equal(res.device, "sim");
	assert_contains(json, "\"" AB_FIELD_CACHE "\":\"miss\"");
	assert_int_equal(res.parallel, 1);
	assert_int_equal(res.rounds, 0);
	free(json);
	/* trials 2 at once, in one round: the plugin's reader sees both, the line says so */
	trials.rounds = 1;
	r.parallel = 2;
	json = ab_report_json(&r);
	assert_int_equal(ab_result_parse(json, strlen(json), &res, err, sizeof(err)), 0);
	assert_int_equal(res.parallel, 2);
	assert_int_equal(res.rounds, 1);
	ab_report_decision_line(&r, err, sizeof(err));
	assert_contains(err, "chose batch 24 in 2 trials, 12 s (1 rounds of up to 2 at once)");
	free(json);
	trials.rounds = 0;
	r.parallel = 0;
	r.global_batch = 1024; /* asked: kept as asked */
	json = ab_report_json(&r);
	assert_int_equal(ab_result_parse(json, strlen(json), &res, err, sizeof(err)), 0);
	assert_int_equal(res.global_batch, 1024);
	assert_int_equal(res.eval_batch, 0);
	assert_int_equal(res.eval_trials, 0);
	/* the eval probe's decision and cost added: the step's report and the cache entry say
	 * both, a reader sees them, the train probe's trials stay its own */
	struct ab_result eval = {.batch = 56, .trials = 3, .elapsed_s = 21.5};

	json = ab_result_with_eval_probe(json, &eval);
	assert_int_equal(ab_result_parse(json, strlen(json), &res, err, sizeof(err)), 0);
	assert_int_equal(res.eval_batch, 56);
	assert_int_equal(res.eval_trials, 3);
	assert_true(res.eval_elapsed_s == 21.5);
	assert_int_equal(res.trials, 2);
	assert_contains(json, "\"" AB_FIELD_EVAL_PROBE "\":{\"trials\":3,\"elapsed_s\":21.5}");
	free(json);
	/* the eval probe's own report, parsed, gives its chosen pair's peak (batch 24's, not
	 * the larger one of a batch not chosen): the eval_probe object then says what the pair
	 * that runs was measured at */
	trial_v[0].peak_bytes = 63 * GiB;
	json = ab_report_json(&r);
	trial_v[0].peak_bytes = 40 * GiB;
	assert_int_equal(ab_result_parse(json, strlen(json), &eval, err, sizeof(err)), 0);
	assert_int_equal(eval.chosen_peak, 60 * GiB);
	json = ab_result_with_eval_probe(json, &eval);
	assert_int_equal(ab_result_parse(json, strlen(json), &res, err, sizeof(err)), 0);
	assert_contains(json, "\"" AB_FIELD_EVAL_PROBE "\":{\"trials\":2,\"elapsed_s\":12.5,"
			      "\"peak_bytes\":64424509440}");
	/* kept through the cache's copy */
	char *entry = ab_result_with_eval(json, 56, NULL);

	assert_non_null(entry);
	assert_int_equal(ab_result_parse(entry, strlen(entry), &res, err, sizeof(err)), 0);
	assert_int_equal(res.eval_trials, 2); /* the eval report's own two trials */
	assert_contains(entry, "\"peak_bytes\":64424509440}");
	free(entry);
	free(json);
}

/* Growth between the chosen trial's steps: in its trial, the report's "held_growth" with
 * the steps to the limit, the decision line of the probe and of the plugin alike. */
static void held_growth(void **state)
{
	struct ab_report r = report();
	struct ab_result res;
	char line[1024], plugin[1024];
	size_t len = 0;
	char *json;

	(void)state;
	trial_v[1].growth_bytes = GiB / 2; /* 60 GiB after 4 steps, 64 the limit: 8 more */
	json = ab_report_json(&r);
	assert_contains(json, "\"held_growth_bytes\":536870912");
	assert_contains(json, "\"" AB_FIELD_HELD_GROWTH "\":{\"bytes_per_step\":536870912,"
			      "\"steps_to_limit\":12}");
	assert_int_equal(ab_result_parse(json, strlen(json), &res, err, sizeof(err)), 0);
	assert_int_equal(res.growth.per_step, GiB / 2);
	assert_int_equal(res.growth.steps_to_limit, 12);
	ab_report_decision_line(&r, line, sizeof(line));
	ab_growth_text(&res.growth, plugin, sizeof(plugin), &len);
	assert_string_equal(plugin, "; what its trial held between steps grew by 512 MiB at each: "
				    "at that rate the run passes the limit after about 12 steps "
				    "(does it keep each step's loss or outputs?)");
	assert_contains(line, plugin);
	free(json);
	/* sized for the run's 6 steps (max_steps): the search judged it at the last, 60 GiB
	 * seen after 4 steps and 2 x 512 MiB more; the trial's "peak_bytes" is what its steps
	 * showed */
	trial_v[1].run_growth_bytes = GiB;
	trial_v[1].run_growth_step = GiB / 2;
	trial_v[1].peak_bytes = 61 * GiB;
	r.run_steps = 6, r.run_steps_key = "max_steps";
	json = ab_report_json(&r);
	assert_contains(json, "\"peak_bytes\":64424509440,\"run_peak_bytes\":65498251264,");
	assert_contains(json, "\"" AB_FIELD_HELD_GROWTH "\":{\"bytes_per_step\":536870912,"
			      "\"steps_to_limit\":12,\"run_steps\":6,\"run_steps_key\":\"max_steps\","
			      "\"run_peak_bytes\":65498251264}");
	assert_int_equal(ab_result_parse(json, strlen(json), &res, err, sizeof(err)), 0);
	assert_int_equal(res.growth.run_steps, 6);
	assert_int_equal(res.growth.run_peak, 61 * GiB);
	assert_string_equal(res.growth.run_key, "max_steps");
	ab_report_decision_line(&r, line, sizeof(line));
	len = 0;
	ab_growth_text(&res.growth, plugin, sizeof(plugin), &len);
	assert_string_equal(plugin, "; sized for the run's 6 steps (max_steps): what its trial held "
				    "between steps grew by 512 MiB at each, so its peak is counted "
				    "as 61.0 GiB at the last");
	assert_contains(line, plugin);
	ab_report_trial_line(1, &trial_v[1], true, 64 * GiB, 0, 80 * GiB, line, sizeof(line));
	assert_string_equal(line, "trial 2: batch 24 fits, peak 61.0 GiB at the run's last step (its "
				  "steps 60.0 GiB, growing 512 MiB a step) of 64.0 GiB limit (80% "
				  "of 80.0 GiB)");
	free(json);
	trial_v[1].run_growth_bytes = trial_v[1].run_growth_step = 0;
	trial_v[1].peak_bytes = 60 * GiB;
	r.run_steps = 0, r.run_steps_key = NULL;
	trial_v[1].growth_bytes = 0;
	json = ab_report_json(&r);
	assert_true(strstr(json, AB_FIELD_HELD_GROWTH) == NULL);
	assert_int_equal(ab_result_parse(json, strlen(json), &res, err, sizeof(err)), 0);
	assert_int_equal(res.growth.per_step, 0);
	free(json);
}

static void failed_and_interrupted(void **state)
{
	struct ab_report r = report();
	struct ab_result res;
	char *json;

	(void)state;
	r.ok = false;
	fraction.ok = false;
	snprintf(r.error, sizeof(r.error), "nothing fits: batch 1 peaks at 70 GiB");
	json = ab_report_json(&r);
	assert_contains(json, "\"status\":\"failed\"");
	assert_int_equal(ab_result_parse(json, strlen(json), &res, err, sizeof(err)), 0);
	assert_false(res.ok);
	assert_false(res.interrupted);
	assert_string_equal(res.error, "nothing fits: batch 1 peaks at 70 GiB");
	/* only a search that found nothing fits says so: the plugin reads it, not the text */
	assert_false(res.nothing_fits);
	assert_null(strstr(json, "nothing_fits"));
	free(json);
	/* a search that failed has no rows of fractions, and its trials are judged all the
	 * same: 40 GiB within the 64 GiB limit fits, as its trial line said */
	r.nfractions = 0;
	json = ab_report_json(&r);
	assert_contains(json, "{\"batch\":16,\"fits\":true,");
	assert_null(strstr(json, "by_fraction"));
	r.nfractions = 1;
	free(json);
	r.nothing_fits = true;
	json = ab_report_json(&r);
	assert_contains(json, "\"nothing_fits\":true");
	assert_int_equal(ab_result_parse(json, strlen(json), &res, err, sizeof(err)), 0);
	assert_true(res.nothing_fits);
	r.nothing_fits = false;
	free(json);
	/* a trial's quoted lines keep their newlines (said a line at a time), and nothing else
	 * that is not printable reaches a terminal */
	snprintf(r.error, sizeof(r.error), "trial 1 failed. Its last output:\n  | \x1b[31mred\r");
	json = ab_report_json(&r);
	assert_int_equal(ab_result_parse(json, strlen(json), &res, err, sizeof(err)), 0);
	assert_string_equal(res.error, "trial 1 failed. Its last output:\n  | ?[31mred?");
	free(json);
	r.interrupted = true;
	json = ab_report_json(&r);
	assert_contains(json, "\"status\":\"interrupted\"");
	assert_int_equal(ab_result_parse(json, strlen(json), &res, err, sizeof(err)), 0);
	assert_false(res.ok);
	assert_true(res.interrupted);
	free(json);
	fraction.ok = true;
	/* what is not a report */
	assert_int_equal(ab_result_parse("{\"status\":\"maybe\"}", 18, &res, err, sizeof(err)),
			 -EPROTO);
	assert_int_equal(ab_result_parse("[1]", 3, &res, err, sizeof(err)), -EPROTO);
}

static void global_batch_rule(void **state)
{
	(void)state;
	assert_int_equal(ab_global_batch(0, 24, 4, 8), 768);
	assert_int_equal(ab_global_batch(0, 24, 0, 0), 24); /* no accumulation, one device */
	assert_int_equal(ab_global_batch(512, 24, 4, 8), 512);
	assert_int_equal(ab_global_batch(0, 0, 4, 8), 0);
	assert_int_equal(ab_global_batch(0, 1L << 40, 1L << 20, 1L << 10), 0); /* overflow */
}

static void lines(void **state)
{
	struct ab_report r = report();
	char buf[512];

	(void)state;
	assert_string_equal(ab_format_duration(45, buf, sizeof(buf)), "45 s");
	ab_report_trial_line(1, &trial_v[1], true, 64 * GiB, 0, 80 * GiB, buf, sizeof(buf));
	assert_contains(buf, "trial 2: batch 24 fits, peak 60.0 GiB of 64.0 GiB limit "
			     "(80% of 80.0 GiB)"); /* index 1: the second trial */
	{ /* a trial step's rank held to its own, larger GPU: its share of this one's, and its own */
		struct ab_trial t = trial_v[1];

		t.ranks = 2, t.bound_rank = 0, t.peak_bytes = 30 * GiB;
		snprintf(t.bound_node, sizeof(t.bound_node), "node1");
		t.bound_peak_bytes = 60 * GiB, t.bound_capacity_bytes = 160 * GiB;
		ab_report_trial_line(1, &t, true, 64 * GiB, 0, 80 * GiB, buf, sizeof(buf));
		assert_contains(buf, "fits, peak 30.0 GiB as a share of 80.0 GiB (rank 0 on node1: "
				     "60.0 GiB of its own 160 GiB, the largest share of 2) of 64.0 "
				     "GiB limit");
	}
	ab_report_decision_line(&r, buf, sizeof(buf));
	assert_contains(buf, "chose batch 24 in 2 trials, 12 s; confidence: unknown"); /* 91 */
	r.global_batch = 768;
	ab_report_decision_line(&r, buf, sizeof(buf));
	assert_contains(buf, "chose batch 24 (gradient accumulation 4, global 768)");
}

/* The user's comment is kept byte for byte: their own "autobatch:", their '|', a long one;
 * ours replaced only where we appended it; a node name from the (user's) report that is no
 * plain name is left out; a comment too long for both is not written at all. */
static void job_comment_theirs(void)
{
	const char *rep = "{\"batch_size\": 8, \"limit_bytes\": 1048576, \"real_run\": {\"peak_bytes\": "
			  "2097152, \"tasks\": 2, \"over\": 1, \"task\": 1, \"node\": "
			  "\"n1\\n| autobatch: step 9 batch 9999\"}}";
	const char *ours = "autobatch: step 3 batch 8, limit 1.0 MiB; run peak 2.0 MiB (task 1), 2 "
			   "tasks, 1 over";
	char out[AB_COMMENT_MAX], old[AB_COMMENT_MAX + 64], want[AB_COMMENT_MAX + 128];

	assert_int_equal(ab_job_comment(rep, "compare with autobatch: off, run 7", 3, out,
					sizeof(out)), 0);
	snprintf(want, sizeof(want), "compare with autobatch: off, run 7 | %s", ours);
	assert_string_equal(out, want);
	assert_int_equal(ab_job_comment(rep, "a|b|", 3, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "a|b| | %s", ours);
	assert_string_equal(out, want);
	snprintf(old, sizeof(old), "a|b| | %s", "autobatch: step 1 batch 4, limit 1.0 MiB");
	assert_int_equal(ab_job_comment(rep, old, 3, out, sizeof(out)), 0);
	assert_string_equal(out, want); /* the earlier step's part replaced */
	assert_int_equal(ab_job_comment(rep, "autobatch: step 1 batch 4, limit 1.0 MiB", 3, out,
					sizeof(out)), 0);
	assert_string_equal(out, ours);
	/* the user's own "autobatch: step" (no step number) is theirs, kept on a second step */
	assert_int_equal(ab_job_comment(rep, "autobatch: step", 3, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "autobatch: step | %s", ours);
	assert_string_equal(out, want);
	snprintf(old, sizeof(old), "%s", out);
	assert_int_equal(ab_job_comment(rep, old, 3, out, sizeof(out)), 0);
	assert_string_equal(out, want);
	assert_int_equal(ab_job_comment(rep, "x | autobatch: step one", 3, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "x | autobatch: step one | %s", ours);
	assert_string_equal(out, want);
	memset(old, 'c', 600);
	old[600] = '\0';
	assert_int_equal(ab_job_comment(rep, old, 3, out, sizeof(out)), 0);
	assert_int_equal(strlen(out), 600 + 3 + strlen(ours));
	memset(old, 'c', AB_COMMENT_MAX - 10);
	old[AB_COMMENT_MAX - 10] = '\0';
	assert_int_equal(ab_job_comment(rep, old, 3, out, sizeof(out)), -ENOSPC);
	assert_string_equal(out, "");
}

/* The report at path, as the watches left it; path removed. */
static char *read_back(const char *path)
{
	FILE *fp = fopen(path, "r");
	char *text = calloc(1, 1 << 16);

	assert_non_null(fp);
	assert_non_null(text);
	assert_true(fread(text, 1, (1 << 16) - 1, fp) > 0);
	fclose(fp);
	unlink(path);
	return text;
}

/* The job's Comment (comment=on) from the report the probe wrote and the tasks' watches
 * added to (report_run.c): the user's own comment kept, an earlier autobatch part replaced,
 * "not reported" before any task reported. */
static void job_comment(void **state)
{
	struct ab_report r = report();
	char *json = ab_report_json(&r), path[] = "/tmp/autobatch-test-report.XXXXXX", out[512];
	struct ab_run_figure f = {64 * GiB, 63 * GiB, 3, 24, "node7", "gpu", true, false};
	FILE *fp;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0 && json);
	assert_int_equal(write(fd, json, strlen(json)), (ssize_t)strlen(json));
	close(fd);
	assert_int_equal(ab_job_comment(json, NULL, 2, out, sizeof(out)), 0);
	assert_string_equal(out, "autobatch: step 2 batch 24, limit 64.0 GiB of 80.0 GiB; run: not reported");
	assert_int_equal(ab_report_add_run(path, &f, err, sizeof(err)), 0);
	f.task = 5, f.peak_bytes = 65 * GiB, f.first_over = true;
	assert_int_equal(ab_report_add_run(path, &f, err, sizeof(err)), 0);
	free(json);
	json = read_back(path);
	assert_int_equal(ab_job_comment(json, "my run | autobatch: step 1 batch 9, limit 1 GiB", 2,
					out, sizeof(out)), 0);
	assert_string_equal(out, "my run | autobatch: step 2 batch 24, limit 64.0 GiB of 80.0 GiB; "
				 "run peak 65.0 GiB (task 5 on node7), 2 tasks, 1 over");
	assert_int_equal(ab_job_comment("{\"status\": \"failed\"}", "mine", 0, out, sizeof(out)),
			 -EINVAL);
	free(json);
	/* counts past any task count in the user's file start again (no overflow: UBSan) */
	assert_true((fp = fopen(path, "w")) != NULL);
	fputs("{\"real_run\": {\"tasks\": 9223372036854775807, \"over\": 1e300}}", fp);
	fclose(fp);
	assert_int_equal(ab_report_add_run(path, &f, err, sizeof(err)), 0);
	json = read_back(path);
	assert_contains(json, "\"tasks\":1,\"over\":1");
	free(json);
	job_comment_theirs();
}

/* Another user who can read the report holds a read lock on it for ever: a task's watch
 * gives up on the figure within seconds (it once waited until its alarm killed it, before
 * any over-limit verdict), and writes it once the lock is gone. */
static void report_locked_by_another(void **state)
{
	char path[] = "/tmp/autobatch-test-locked.XXXXXX", ready, planted[128];
	struct ab_run_figure f = {64 * GiB, 63 * GiB, 3, 24, "node7", "gpu", true, false};
	int fd = mkstemp(path), p[2], status;
	double start;
	char *json;
	pid_t pid;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "{}", 2), 2);
	close(fd);
	assert_int_equal(pipe(p), 0);
	if ((pid = fork()) == 0) {
		struct flock lk = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
		int rd = open(path, O_RDONLY);

		if (rd < 0 || fcntl(rd, F_SETLK, &lk) < 0 || write(p[1], "l", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	assert_true(pid > 0);
	assert_int_equal(read(p[0], &ready, 1), 1);
	start = ab_now();
	assert_int_equal(ab_report_add_run(path, &f, err, sizeof(err)), -EAGAIN);
	assert_true(ab_now() - start >= 2.5 && ab_now() - start < 8);
	assert_contains(err, "stayed locked by another process for 3 s");
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	/* the temp file's name cannot be planted: this process's own guessable one (another
	 * user's, in a sticky directory, is as immovable as a directory is to unlink) */
	snprintf(planted, sizeof(planted), "/tmp/.%s.%ld.tmp", strrchr(path, '/') + 1,
		 (long)getpid());
	assert_int_equal(mkdir(planted, 0700), 0);
	assert_int_equal(ab_report_add_run(path, &f, err, sizeof(err)), 0);
	rmdir(planted);
	json = read_back(path);
	assert_contains(json, "\"peak_bytes\":");
	free(json);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(held_growth),
		cmocka_unit_test(failed_and_interrupted),
		cmocka_unit_test(global_batch_rule),
		cmocka_unit_test(lines),
		cmocka_unit_test(job_comment),
		cmocka_unit_test(report_locked_by_another),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
