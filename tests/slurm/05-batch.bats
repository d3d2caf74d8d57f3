#!/usr/bin/env bats
# The option given to sbatch or salloc reaches the job's sruns.

load helpers

setup_file() { require_testbed; reset_plugstack; }

batch() {
	local out=$BATS_TEST_TMPDIR/job.out
	run timeout 120 sbatch --wait -o "$out" -e "$BATS_TEST_TMPDIR/job.err" "$@"
	echo "$output" >&2
	cat "$out"
}

@test "sbatch --autobatch=0.7 reaches the job's srun" {
	printf '#!/bin/bash\nsrun -n2 printenv AUTOBATCH_FRACTION\n' >"$BATS_TEST_TMPDIR/job.sh"
	out=$(batch -n2 --autobatch=0.7 "$BATS_TEST_TMPDIR/job.sh")
	[ "$out" = $'0.7\n0.7' ]
}

@test "#SBATCH --autobatch=0.6 in the script works too" {
	printf '#!/bin/bash\n#SBATCH --autobatch=0.6\nsrun printenv AUTOBATCH_FRACTION\n' >"$BATS_TEST_TMPDIR/job.sh"
	out=$(batch "$BATS_TEST_TMPDIR/job.sh")
	[ "$out" = "0.6" ]
}

@test "a bare sbatch --autobatch means the site default in the job" {
	printf '#!/bin/bash\nsrun printenv AUTOBATCH_FRACTION\n' >"$BATS_TEST_TMPDIR/job.sh"
	out=$(batch --autobatch "$BATS_TEST_TMPDIR/job.sh")
	[ "$out" = "0.8" ]
}

@test "srun inside the job can still override the sbatch fraction" {
	printf '#!/bin/bash\nsrun --autobatch=0.5 printenv AUTOBATCH_FRACTION\n' >"$BATS_TEST_TMPDIR/job.sh"
	out=$(batch --autobatch=0.7 "$BATS_TEST_TMPDIR/job.sh")
	[ "$out" = "0.5" ]
}

@test "srun --autobatch=off in the job: that step is not probed nor sized, the others are" {
	printf '#!/bin/bash\nsrun --autobatch=off sh -c '"'"'echo "off [${AUTOBATCH_FRACTION:-none}]"'"'"'\nsrun printenv AUTOBATCH_FRACTION\n' >"$BATS_TEST_TMPDIR/job.sh"
	out=$(batch --autobatch=0.7 --autobatch-config=none.yaml "$BATS_TEST_TMPDIR/job.sh")
	[ "$out" = $'off [none]\n0.7' ] || { cat "$BATS_TEST_TMPDIR/job.err" >&2; return 1; }
	# the off step said nothing of autobatch (no probe, no word on the job's config); the
	# other one did
	[ "$(grep -c "autobatch" "$BATS_TEST_TMPDIR/job.err")" -eq 1 ]
	grep -q "cannot read --autobatch-config=none.yaml" "$BATS_TEST_TMPDIR/job.err"
}

@test "sbatch --autobatch=2 is refused at submission" {
	run timeout 30 sbatch --autobatch=2 --wrap true
	[ "$status" -ne 0 ]
	assert_line_in "autobatch: --autobatch: fraction '2' is more than the whole GPU memory" "$output"
	assert_line_in "Invalid --autobatch argument" "$output"
}

@test "salloc --autobatch=0.55 reaches srun inside the allocation" {
	run --separate-stderr timeout 120 salloc -N1 --autobatch=0.55 srun printenv AUTOBATCH_FRACTION
	[ "$status" -eq 0 ]
	[ "$output" = "0.55" ]
}

@test "a requeued job's rerun writes its own report (.r1): the first run's, real_run and all, is kept" {
	use_toy_config
	printf '#!/bin/sh\nsrun -N1 -n1 --gpus=1 --autobatch=0.8 --autobatch-config=cfg.yaml toy_train --config cfg.yaml\necho "restarts ${SLURM_RESTART_COUNT:-0}"\nsleep 60\n' >job.sh
	local job i
	job=$(sbatch --parsable --requeue -N1 -n1 --gpus=1 -o job.out -e job.err --open-mode=append job.sh)
	for i in $(seq 480); do grep -q "restarts 0" job.out 2>/dev/null && break; sleep 0.5; done
	grep -q '"real_run":{' "autobatch-$job.0.json"
	cp "autobatch-$job.0.json" first.json
	# slurmctld refuses a requeue while the job is in a transition (a step still completing),
	# which a loaded machine makes last: asked again until it is taken
	local requeued=""
	for i in $(seq 120); do
		scontrol requeue "$job" 2>requeue.err && requeued=1 && break
		sleep 0.5
	done
	[ -n "$requeued" ] || { cat requeue.err >&2; return 1; }
	# a requeued job waits 2 minutes (BeginTime) unless told to start; told once it is PENDING,
	# which on a loaded machine can take longer than its steps' ending (official CI, 24.11:
	# told too early, the rerun waited out the 2 minutes and this test failed)
	# each state the job passes through, and slurmctld's lines of it, said when no rerun came
	# (local CI run 57, 24.11: no rerun, and the job gone about 25 s into this wait, after
	# MinJobAge; nothing else was said)
	# told to start 3 s on, once: slurmd revoked the first run's credential when it ended, and
	# a credential of the same second counts as revoked (official CI of c54ce02, 22.05: told
	# "now", allocated 0.14 s after the requeue, "Killing non-startable batch JobId=28: Job
	# credential revoked", the job FAILED and was gone; the delay Slurm's BeginTime keeps)
	local state seen="" told=""
	for i in $(seq 360); do
		grep -q "restarts 1" job.out && break
		state=$(scontrol show job "$job" 2>&1 | grep -o 'JobState=[A-Z_]* Reason=[^ ]*\|Invalid job id')
		[ "$state" = "${seen##*; }" ] || seen+="; $state"
		[ "$state" != "Invalid job id" ] || break
		if [ -z "$told" ] && [[ $state == JobState=PENDING\ Reason=BeginTime ]]; then
			scontrol update jobid="$job" StartTime=now+3 && told=1
		fi
		sleep 0.5
	done
	scancel "$job"
	grep -q "restarts 1" job.out || {
		echo "no rerun; the job's states after the requeue: ${seen#; }" >&2
		grep "JobId=$job[^0-9]" "$AUTOBATCH_TESTBED/log/slurmctld.log" | tail -n 20 >&2
		cat job.out job.err >&2
		return 1
	}
	[ -f "autobatch-$job.0.r1.json" ]
	cmp first.json "autobatch-$job.0.json"
}
