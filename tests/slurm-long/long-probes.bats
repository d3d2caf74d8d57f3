#!/usr/bin/env bats
# Probes of real length: minutes, longer than a step credential lives (cred_expire, 120 s by
# default, which the testbed keeps), in every way srun is used. The scenarios start together
# in setup_file and run at once (they mostly wait on their trials' start-up); each test then
# waits for its own and checks what the user got. Run by tests/slurm-long/run on a testbed
# of their own, beside the rest of the suite.

load ../slurm/helpers

# A trial command with a start-up of a minute, as loading a checkpoint or compiling takes:
# three trials make a probe of more than three minutes.
SLOW_TRIAL='sleep 62; exec toy_train --config "$AUTOBATCH_CONFIG"'
WAIT_S=600

# start NAME CMD...: runs CMD in the background in a directory of its own (a fresh toy config
# and decision cache); its stdout, stderr and status land in files there.
start() {
	local name=$1 d=$BATS_FILE_TMPDIR/$1
	shift
	mkdir -p "$d"
	cp "$SRCDIR/contrib/examples/toy.yaml" "$d/cfg.yaml"
	cp "$d/cfg.yaml" "$d/orig.yaml"
	(
		set +e # bats runs setup_file under errexit: a failing scenario must still say so
		cd "$d" || exit 1
		export XDG_CACHE_HOME=$d/cache
		date +%s >t0
		# its own session: nothing it signals reaches the shell that records its status
		setsid -w "$@" >out 2>err </dev/null
		echo $? >status
		date +%s >t1
	) 3>&- &
}

setup_file() {
	require_testbed
	reset_plugstack
	# srun makes its own allocation, two tasks
	start alloc srun -N1 -n2 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="$SLOW_TRIAL" toy_train --config cfg.yaml
	# inside salloc, with --export=NONE (the decision still reaches the task)
	start salloc salloc -N1 -n1 srun --export=NONE --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="$SLOW_TRIAL" "$AUTOBATCH_TESTBED/bin/toy_train" --config cfg.yaml
	# an srun in an sbatch script that asked for --autobatch
	printf '#!/bin/bash\n#SBATCH --autobatch=0.8\nsrun --autobatch-config=cfg.yaml --autobatch-trial-command=%q toy_train --config cfg.yaml\n' \
		"$SLOW_TRIAL" >"$BATS_FILE_TMPDIR/job.sh"
	start sbatch sbatch --wait -N1 -n1 -o job.out "$BATS_FILE_TMPDIR/job.sh"
	# srun --jobid into a job that is already running
	start jobid bash -c 'salloc --no-shell -N1 -n1 -J holder-$$ 2>/dev/null
		j=$(squeue -h -n holder-$$ -o %i)
		srun --jobid="$j" --autobatch=0.8 --autobatch-config=cfg.yaml \
			--autobatch-trial-command="$1" toy_train --config cfg.yaml
		rc=$?; scancel "$j"; exit $rc' _ "$SLOW_TRIAL"
	# a probe that fails after three minutes: trials 1 and 2 fit, trial 3 exits 3
	start fails srun -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="sleep 62; n=\$(cat $BATS_FILE_TMPDIR/fails/count 2>/dev/null); \
n=\$((\${n:-0} + 1)); echo \$n >$BATS_FILE_TMPDIR/fails/count; [ \$n -lt 3 ] || \
{ echo 'RuntimeError: the third trial breaks' >&2; exit 3; }; exec toy_train --config \"\$AUTOBATCH_CONFIG\"" \
		toy_train --config cfg.yaml
	# Ctrl-C at minute two, in the second trial
	start ctrlc timeout -s INT 120 srun -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="$SLOW_TRIAL" toy_train --config cfg.yaml
	# an optimizer step of 90 s: 16 micro-batches of 5.6 s (the trials run 1 of 16)
	start slowstep bash -c 'sed -i -e "s/^  activation_kib: .*/&\n  step_ms: 5600/" \
			-e "s/accumulate_grad_batches: 1/accumulate_grad_batches: 16/" \
			-e "s/max_steps: 3/max_steps: 1/" cfg.yaml && cp cfg.yaml orig.yaml &&
		exec srun -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml toy_train --config cfg.yaml'
}

# finish NAME: waits for the scenario; then its files are $d/out, $d/err, $status, $took
finish() {
	d=$BATS_FILE_TMPDIR/$1
	local i
	for i in $(seq "$WAIT_S"); do
		[ -s "$d/status" ] && break
		sleep 1
	done
	[ -s "$d/status" ] || { echo "$1 did not end within $WAIT_S s; stderr:" >&2; cat "$d/err" >&2; return 1; }
	status=$(cat "$d/status")
	took=$(($(cat "$d/t1") - $(cat "$d/t0")))
	cd "$d"
	echo "# $1: srun exit $status after $took s" >&3
}

# probe_seconds: the probing time the decision line gives ("... in 3 trials, 190 s; ...")
probe_seconds() { sed -n 's/.*autobatch: chose batch [0-9]* .* trials, \([0-9]*\) s.*/\1/p' "$1" | head -n1; }

# the decision was made after more than cred_expire, every task ran at it, the config says it
decided_and_ran() {
	local log=$1 tasks=$2 b s
	b=$(config_batch)
	s=$(probe_seconds err)
	echo "# probed for ${s:-?} s, chose batch ${b:-?}" >&3
	[ "$b" -gt 8 ]
	[ "$s" -ge 180 ]
	assert_line_in "autobatch: chose batch $b in" "$(cat err)"
	[ "$(grep -c "^toy_train: batch $b from cfg.yaml, AUTOBATCH_BATCH_SIZE=$b$" "$log")" -eq "$tasks" ]
	refute grep -q "credential" err
}

@test "own allocation: a probe of over three minutes, then both tasks run at the chosen batch" {
	finish alloc
	[ "$status" -eq 0 ]
	decided_and_ran out 2
}

@test "inside salloc, with --export=NONE: the task runs at the chosen batch after a long probe" {
	finish salloc
	[ "$status" -eq 0 ]
	decided_and_ran out 1
}

@test "an srun in an sbatch script (#SBATCH --autobatch): the task runs at the chosen batch" {
	finish sbatch
	[ "$status" -eq 0 ]
	mv job.out err # srun's stderr and the task's output, both in the job's file
	decided_and_ran err 1
}

@test "srun --jobid into a running job: the task runs at the chosen batch after a long probe" {
	finish jobid
	[ "$status" -eq 0 ]
	decided_and_ran out 1
}

@test "a probe that fails after three minutes launches with the original settings (on_failure=continue)" {
	finish fails
	[ "$status" -eq 0 ]
	[ "$took" -ge 180 ]
	assert_line_in "RuntimeError: the third trial breaks" "$(cat err)"
	assert_line_in "autobatch: launching with the original settings (on_failure=continue)" "$(cat err)"
	assert_line_in "toy_train: batch 8 from cfg.yaml, AUTOBATCH_BATCH_SIZE=(unset)" "$(cat out)"
	cmp -s cfg.yaml orig.yaml
	[ ! -e cfg.yaml.autobatch~ ]
	refute grep -q "credential" err
}

@test "Ctrl-C at minute two cancels cleanly: no task runs, nothing changed, no step left" {
	finish ctrlc
	[ "$status" -ne 0 ]
	assert_line_in "autobatch: probing was interrupted (Ctrl-C)" "$(cat err)"
	refute grep -q "toy_train:" out
	refute grep -q "launching with the original settings" err
	cmp -s cfg.yaml orig.yaml
	[ ! -e cfg.yaml.autobatch~ ]
	no_probe_step_left
}

@test "an optimizer step of 90 s: trials accumulate 1 micro-batch, a decision with default settings" {
	finish slowstep
	[ "$status" -eq 0 ]
	assert_line_in "autobatch: accumulation in trials: 1 of 16 (trainer.accumulate_grad_batches)" "$(cat err)"
	b=$(config_batch)
	[ "$b" -gt 8 ]
	assert_line_in "autobatch: chose batch $b in" "$(cat err)"
	assert_line_in "toy_train: batch $b from cfg.yaml, AUTOBATCH_BATCH_SIZE=$b" "$(cat out)"
	# the file keeps its accumulation: only the trials ran with 1
	grep -q "accumulate_grad_batches: 16" cfg.yaml
}

@test "nothing of the scenarios is left in the queue" {
	for i in $(seq 30); do
		[ -z "$(squeue -h)" ] && break
		sleep 1
	done
	[ -z "$(squeue -h)" ] || { squeue >&2; return 1; }
}
