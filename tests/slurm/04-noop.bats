#!/usr/bin/env bats
# An srun without --autobatch behaves exactly as without the plugin.

load helpers

setup_file() {
	require_testbed
	reset_plugstack
	# The same cluster seen through a slurm.conf whose plugstack is empty.
	NOPLUG=$BATS_FILE_TMPDIR/noplugin
	mkdir -p "$NOPLUG"
	# gres.conf, and cgroup.conf from 23.02 on (contrib/testbed): beside slurm.conf
	cp "$(dirname "$SLURM_CONF")"/*.conf "$NOPLUG/"
	sed "s|^PlugStackConfig=.*|PlugStackConfig=$NOPLUG/plugstack.conf|" "$SLURM_CONF" >"$NOPLUG/slurm.conf"
	: >"$NOPLUG/plugstack.conf"
	export NOPLUG
}

# A task's view, minus what differs from one step to the next anyway (SLURM_JOB_SLUID: a
# new id per job from Slurm 26.05 on; srun's word that the job waited for the node, which the
# job before it may still hold: CI run 13, 24.11), with srun's exit lines one per task: srun
# says "tasks 0-1: Exited" for tasks whose ends reach it together and a line each otherwise
# (local CI run 42, 24.11: one line without the plugin, two with it, as the tasks' timing had it).
task_view() {
	SLURM_CONF=$1 timeout 60 srun -n2 --gres=gpu:2 bash -c 'env; echo "args: $*"; exit 3' _ a "b c" 2>&1 |
		grep -vE '^SLURM_(JOB_ID|JOBID|JOB_SLUID|STEP_ID|STEPID|TASK_PID|LAUNCH_NODE_IPADDR|SRUN_COMM_PORT|STEP_LAUNCHER_PORT|JOB_START_TIME|JOB_END_TIME|CONF)=|^_=|^srun: job [0-9]+ (queued and waiting for resources|has been allocated resources)$' |
		one_line_per_task | sort
}
# "srun: error: NODE: tasks 0-1,3: WHAT" as "srun: error: NODE: task 0: WHAT" and so on
one_line_per_task() {
	awk '/^srun: error: [^ ]+: tasks? [0-9,-]+: / {
		what = $0; for (i = 1; i <= 5; i++) sub(/^[^ ]+ /, "", what)
		n = split(substr($5, 1, length($5) - 1), parts, ",")
		for (i = 1; i <= n; i++) {
			if (split(parts[i], r, "-") == 1) r[2] = r[1]
			for (t = r[1]; t <= r[2]; t++) print "srun: error: " $3 " task " t ": " what
		}
		next
	}
	{ print }'
}

@test "task environment, arguments, output and exit status are identical with and without the plugin" {
	with=$(task_view "$SLURM_CONF")
	without=$(task_view "$NOPLUG/slurm.conf")
	diff <(echo "$without") <(echo "$with")
	assert_line_in "args: a b c" "$with"
	assert_line_in "Exited with exit code 3" "$with"
	! grep -qE '^(SLURM_)?AUTOBATCH_(FRACTION|BATCH_SIZE|GRAD_ACCUM|GLOBAL_BATCH|REPORT|CONFIG)=' <<<"$with"
}

@test "a plain srun prints nothing of ours, even with -v" {
	run srun_t -v true
	[ "$status" -eq 0 ]
	! grep -q "autobatch" <<<"$output"
}

@test "AUTOBATCH_* variables a user set themselves pass through untouched" {
	AUTOBATCH_FRACTION=0.33 run srun_t printenv AUTOBATCH_FRACTION
	[ "$output" = "0.33" ]
}
