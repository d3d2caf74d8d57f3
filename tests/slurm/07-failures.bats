#!/usr/bin/env bats
# Every way probing can fail, under both policies: one precise autobatch: line, the
# config untouched, no probe step left running; continue launches unchanged, abort does not
# launch (abort needs "required": Slurm ignores an optional plugin's refusal).

load helpers

setup_file() { require_testbed; }
setup() { use_toy_config; cp cfg.yaml orig.yaml; }
teardown() { reset_plugstack; chmod -R u+w "$BATS_TEST_TMPDIR" 2>/dev/null || true; }


# expect_failure POLICY MESSAGE [srun args...]: runs the toy step and checks the outcome.
expect_failure() {
	local policy=$1 msg=$2
	shift 2
	run --separate-stderr srun_t -N1 -n1 "$@" --autobatch=0.8 --autobatch-config=cfg.yaml \
		toy_train --config cfg.yaml
	assert_line_in "autobatch: $msg" "$stderr"
	cmp -s cfg.yaml orig.yaml || { echo "config changed" >&2; return 1; }
	[ ! -e cfg.yaml.autobatch~ ]
	no_probe_step_left
	if [ "$policy" = continue ]; then
		[ "$status" -eq 0 ]
		assert_line_in "launching with the original settings (on_failure=continue)" "$stderr"
		assert_line_in "toy_train: batch 8 from cfg.yaml" "$output"
	else
		[ "$status" -ne 0 ]
		assert_line_in "the step is not launched (on_failure=abort)" "$stderr"
		run ! grep -q "toy_train:" <<<"$output"
	fi
}

@test "probe binary missing: continue" {
	set_plugstack "probe=/nonexistent/autobatch-probe"
	expect_failure continue "the probe /nonexistent/autobatch-probe could not be run on the node" --gpus=1
}

@test "probe binary missing: abort" {
	set_plugstack "probe=/nonexistent/autobatch-probe on_failure=abort" required
	expect_failure abort "the probe /nonexistent/autobatch-probe could not be run on the node" --gpus=1
}

@test "a probe that prints no JSON: continue and abort" {
	set_plugstack "probe=/bin/true"
	expect_failure continue "the probe printed no JSON report" --gpus=1
	set_plugstack "probe=/bin/true on_failure=abort" required
	expect_failure abort "the probe printed no JSON report" --gpus=1
}

@test "probe_timeout cancels the whole probe step: continue and abort" {
	set_plugstack "probe_timeout=3"
	expect_failure continue "the probe step did not finish within probe_timeout=3s and was cancelled" \
		--gpus=1 --autobatch-trial-command="sleep 100"
	set_plugstack "probe_timeout=3 on_failure=abort" required
	expect_failure abort "the probe step did not finish within probe_timeout=3s" \
		--gpus=1 --autobatch-trial-command="sleep 100"
}

@test "a job whose time limit leaves too little to probe runs with its settings: continue and abort" {
	set_plugstack ""
	# a job of one minute: at most 60 s left, half of it 30
	expect_failure continue "the job's time limit leaves " --gpus=1 -t 1
	assert_line_in " s, too little to probe (probing takes at most half of what is left, and needs 60 s): give the job more time (--time), or run this step without --autobatch; launching with the original settings" "$stderr"
	set_plugstack "on_failure=abort" required
	# (expect_failure's last `run` leaves no $stderr to read after it here)
	expect_failure abort "the job's time limit leaves " --gpus=1 -t 1
}

@test "a step's own time limit (srun -t inside a job) bounds the probe too" {
	set_plugstack ""
	# -lt 1: -t in a cluster of srun's short options, as srun reads it
	printf '#!/bin/sh\nsrun -N1 -n1 --gpus=1 -t 1 --autobatch=0.8 --autobatch-config=cfg.yaml toy_train --config cfg.yaml\nsrun -N1 -n1 --gpus=1 -lt 1 --autobatch=0.8 --autobatch-config=cfg.yaml toy_train --config cfg.yaml\n' >job.sh
	timeout 120 sbatch --wait -N1 -n1 --gpus=1 -o job.out -e job.err job.sh
	[ "$(grep -cE "autobatch: the step's time limit leaves [0-9]+ s, too little to probe \(probing takes at most half of what is left, and needs 60 s\): give the step more time \(--time\), or run this step without --autobatch; launching with the original settings" job.err)" -eq 2 ] ||
		{ cat job.err; false; }
	[ "$(grep -c "toy_train: batch 8 from cfg.yaml" job.out)" -eq 2 ]
	cmp -s cfg.yaml orig.yaml
}

# Each trial takes about 30 s (four steps of 7 s): in a job of 3 minutes probing gets half of
# what is left (90 s), the probe 10% less (--time-limit), and in that no third trial fits,
# so the best fit of the first two stands. Two identical sruns at once: one probes, the other
# waits for it and takes its decision as it is (an array's elements, each probing in turn,
# would be far worse); the next one after them probes again, from that batch.
@test "the job's time limit bounds the probe to half of what is left; the best fit seen stands" {
	set_plugstack ""
	echo "  step_ms: 7000" >>cfg.yaml
	local i b
	for i in 1 2; do
		timeout 170 srun -N1 -n1 -t 3 --gpus=1 --autobatch=0.8 --autobatch-config=cfg.yaml \
			toy_train --config cfg.yaml >"out.$i" 2>"err.$i" &
	done
	wait
	cat err.1 err.2 >err.all
	[ "$(grep -cE "^autobatch: the job's time limit leaves 1[5-8][0-9] s: probing takes at most half of it, [7-9][0-9] s \(probe_timeout=900s\)" err.all)" -eq 1 ] ||
		{ cat err.all; false; }
	[ "$(grep -cE "^autobatch: the probe's time limit leaves [0-9]+ s, and a round of trials has taken up to [2-4][0-9] s: the best fit seen, batch [0-9]+, stands" err.all)" -eq 1 ] ||
		{ cat err.all; false; }
	b=$(sed -n 's/^autobatch: chose batch \([0-9]*\) in [12] trials, .*; the best fit seen when the probe.s time ran out: a larger batch may fit (the next such srun probes again, from it); wrote cfg.yaml.*/\1/p' err.all)
	[ -n "$b" ] || { cat err.all; false; }
	[ "$(grep -c "^autobatch: cached decision: batch $b" err.all)" -eq 1 ]
	refute grep -q "probing again, from it" err.all
	[ "$(cat out.1 out.2 | grep -c "^toy_train: batch $b from cfg.yaml")" -eq 2 ]
	no_probe_step_left
	# the same srun again: no cache hit of a search the time cut short, but a probe from it
	# (stopped here by a Ctrl-C once it runs)
	cp cfg.yaml.autobatch~ cfg.yaml
	run --separate-stderr ctrl_c_when autobatch-probe srun -N1 -n1 --gpus=1 --autobatch=0.8 \
		--autobatch-config=cfg.yaml toy_train --config cfg.yaml
	assert_line_in "autobatch: the cached decision (batch $b) was the best fit seen when its probe's time ran out: probing again, from it" "$stderr"
	refute grep -q "cached decision: " <<<"$stderr"
	no_probe_step_left
	# in a job whose probing time cannot verify it and try one more (srun -t 2: under a
	# minute), it is taken as it is: no probe step, no time lost (each such job once spent
	# its time verifying it again, and got no further)
	cp cfg.yaml.autobatch~ cfg.yaml
	run --separate-stderr srun_t -N1 -n1 -t 2 --gpus=1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		toy_train --config cfg.yaml
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	assert_line_in "cannot verify batch $b and try a larger one (its trials took up to " "$stderr"
	assert_line_in "the cached decision is taken as it is" "$stderr"
	assert_line_in "autobatch: cached decision: batch $b" "$stderr"
	assert_line_in "; the best fit seen when the probe's time ran out: a larger batch may fit" "$stderr"
	refute grep -q "autobatch: trial 1" <<<"$stderr"
	assert_line_in "toy_train: batch $b from cfg.yaml" "$output"
}

@test "a step without GPUs: the probe step cannot get one" {
	set_plugstack 'probe_args=""'
	expect_failure continue "the probe failed: the probe step has no GPU: the job holds none on this node"
	set_plugstack 'on_failure=abort probe_args=""' required
	expect_failure abort "the probe failed: the probe step has no GPU: the job holds none on this node"
	# with parallel=off the one-GPU probe step asks Slurm for a GPU, which refuses
	set_plugstack 'parallel=off probe_args=""'
	expect_failure continue "the probe step could not get a GPU"
}

@test "nothing fits: the probe's own sentence" {
	set_plugstack 'probe_args="--device host:capacity=2MiB"'
	expect_failure continue "the probe failed: even batch 1 does not fit" --gpus=1
}

@test "a failing trial's last output is quoted a line at a time, never joined by '?'" {
	set_plugstack ""
	expect_failure continue "the probe failed: trial 1 (batch 8) exited with status 3" --gpus=1 \
		--autobatch-trial-command="echo first words; echo 'ValueError: shapes' >&2; exit 3"
	assert_line_in "autobatch:   | ValueError: shapes" "$stderr"
	refute grep -q 'output:?' <<<"$stderr"
	[ "$(grep -c 'ValueError: shapes' <<<"$stderr")" -eq 1 ] # said once, by the plugin
}

@test "a batch key set on the command line is refused before any trial: continue" {
	set_plugstack ""
	expect_failure continue "the probe failed: the command sets data.batch_size itself (data.batch_size=4): a key=value or --data.batch_size on the command line wins over" \
		--gpus=1 --autobatch-trial-command="toy_train --config cfg.yaml data.batch_size=4"
	assert_line_in "remove it from the command and keep the batch in the file" "$stderr"
	run ! grep -q "trial 1" <<<"$stderr"
}

@test "a config the plugin cannot edit: read-only file, continue and abort" {
	set_plugstack ""
	chmod 0444 cfg.yaml
	expect_failure continue "cfg.yaml is read-only: nothing was changed; make it writable (chmod u+w) or give a copy; launching with the original settings" --gpus=1
	# said before any trial: minutes of probing are not spent on a decision it cannot write
	refute grep -q "autobatch: trial 1:" <<<"$stderr"
	set_plugstack "on_failure=abort" required
	expect_failure abort "cfg.yaml is read-only: nothing was changed" --gpus=1
	chmod 0644 cfg.yaml
	chmod 0555 .
	expect_failure abort "the directory . of cfg.yaml is read-only: nothing was changed; autobatch writes the new file and a backup beside the config" --gpus=1
	refute grep -q "autobatch: trial 1:" <<<"$stderr"
	chmod 0755 .
}

@test "a decision the tasks cannot be given (a control character in the directory) leaves the config unwritten" {
	mkdir "ctl$(printf '\t')dir"
	mv cfg.yaml orig.yaml "ctl$(printf '\t')dir/"
	cd "ctl$(printf '\t')dir"
	set_plugstack ""
	expect_failure continue "the decision could not be exported to the tasks (a path with a control character?): nothing was changed" --gpus=1
	ls autobatch-*.json 2>/dev/null && { echo "the report of a decision not applied is left" >&2; return 1; }
	set_plugstack "on_failure=abort" required
	expect_failure abort "the decision could not be exported to the tasks" --gpus=1
}

@test "a missing config is named before anything runs" {
	set_plugstack ""
	run --separate-stderr srun_t -N1 --gpus=1 --autobatch --autobatch-config=nope.yaml true
	assert_line_in "autobatch: cannot read --autobatch-config=nope.yaml: No such file or directory" "$stderr"
	no_probe_step_left
}

# refused_up_front MESSAGE SRUN-ARGS...: srun says MESSAGE before any trial, and nothing changed
refused_up_front() {
	local msg=$1
	shift
	set_plugstack ""
	run --separate-stderr srun_t "$@"
	assert_line_in "autobatch: $msg" "$stderr"
	refute grep -q "autobatch: trial 1:" <<<"$stderr"
	cmp -s cfg.yaml orig.yaml
	no_probe_step_left
}

@test "--autobatch 0.8 with a space: the fraction taken as the command is said before any trial" {
	refused_up_front "the step's command is '0.8': write --autobatch=0.8 with '='" \
		-N1 -n1 --gpus=1 --autobatch 0.8 --config cfg.yaml
}

@test "srun --multi-prog is refused before any probe step, naming its file" {
	printf '0 toy_train --config cfg.yaml\n1 toy_train --config cfg.yaml\n' >mp.conf
	refused_up_front "srun --multi-prog is not probed: each task runs its own line of mp.conf" \
		-N1 -n2 --gpus=2 --multi-prog --autobatch=0.8 --autobatch-config=cfg.yaml mp.conf
}

@test "a global batch the replicas cannot share evenly is named before any probe step" {
	refused_up_front "--autobatch-global-batch=1000 does not split evenly over the step's 3 data-parallel replicas: give a multiple of 3, as 999 or 1002" \
		-N1 -n3 --gpus=3 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-global-batch=1000 toy_train --config cfg.yaml
}

@test "a global batch for a Hugging Face config with no accumulation key is named before anything runs" {
	set_plugstack ""
	echo '{"per_device_train_batch_size": 8, "max_steps": 10}' >hf.json
	cp hf.json hf.orig
	run --separate-stderr srun_t -N1 --gpus=1 --autobatch --autobatch-config=hf.json \
		--autobatch-global-batch=64 true
	assert_line_in "autobatch: --autobatch-global-batch=64: hf.json has no gradient_accumulation_steps, and the huggingface preset's framework reads the gradient accumulation only from its config: add gradient_accumulation_steps, set to 1, to hf.json, where autobatch writes the accumulation it derives" "$stderr"
	cmp hf.json hf.orig
	no_probe_step_left
}

@test "a run length that is no whole number is named, read through the preset named or detected beside the user's own key" {
	set_plugstack ""
	# the toy's own key stays for toy_train; autobatch sizes train.bs under Lightning's keys,
	# the preset named, then detected (the plugin tells the probe which)
	sed -i 's/max_steps: 3/max_steps: 2.5/' cfg.yaml
	printf 'train:\n  bs: 8\n' >>cfg.yaml
	cp cfg.yaml orig.yaml
	for preset in --autobatch-preset=lightning ""; do
		run --separate-stderr srun_t -N1 -n1 --gpus=1 --autobatch=0.8 \
			--autobatch-config=cfg.yaml $preset --autobatch-key=train.bs \
			toy_train --config cfg.yaml
		[ "$status" -eq 0 ]
		assert_line_in "autobatch: the probe failed: $PWD/cfg.yaml: trainer.max_steps is '2.5', not a whole number of steps up to 1000000000: fix it, or give the run's length with --autobatch-run-steps=N or off (--run-steps); launching with the original settings (on_failure=continue)" "$stderr"
		assert_line_in "toy_train: batch 8 from cfg.yaml" "$output"
		cmp cfg.yaml orig.yaml
		no_probe_step_left
	done
}

# scancel_when STEP CMD...: runs CMD in the background and cancels its job once a step named
# STEP runs, as an admin's scancel or the job's time limit does
scancel_when() {
	local step=$1 pid
	shift
	timeout 300 "$@" &
	pid=$!
	wait_for_step "$step"
	sleep 1
	scancel "$(squeue -h -s -o '%i %j' | awk -v s="$step" 'index($2, s) == 1 { split($1, a, "."); print a[1]; exit }')"
	wait "$pid"
}

# stopped_while_probing HOW MESSAGE: a probe whose trial never ends, stopped by HOW
# (ctrl_c_when, scancel_when): MESSAGE said, nothing launched nor changed, no step left
stopped_while_probing() {
	local how=$1 msg=$2
	set_plugstack ""
	run --separate-stderr "$how" autobatch-probe srun -N1 -n1 --gpus=1 --autobatch=0.8 \
		--autobatch-config=cfg.yaml --autobatch-trial-command="sleep 100" toy_train --config cfg.yaml
	assert_line_in "autobatch: $msg" "$stderr"
	# never a launch after it, whatever srun does with the probe step's exit status
	refute grep -q "toy_train:" <<<"$output"
	refute grep -q "launching with the original settings" <<<"$stderr"
	[ "$status" -ne 0 ]
	cmp -s cfg.yaml orig.yaml
	[ ! -e cfg.yaml.autobatch~ ]
	no_probe_step_left
}

@test "Ctrl-C while probing cancels the probe step and changes nothing" {
	stopped_while_probing ctrl_c_when "probing was interrupted (Ctrl-C); the probe step was cancelled"
}

@test "a job cancelled while probing says so, not a Ctrl-C, and changes nothing" {
	stopped_while_probing scancel_when "Slurm cancelled the probe step while probing ("
	refute grep -q "Ctrl-C" <<<"$stderr"
}

# cancelled_in_batch WHAT: a batch job whose srun probes (its trial hangs), its job (WHAT "")
# or its step (".0") cancelled once the probe step runs; returns when the job has ended
cancelled_in_batch() {
	local job
	set_plugstack ""
	printf '#!/bin/sh\nsrun -N1 -n1 --gpus=1 --autobatch=0.8 --autobatch-config=cfg.yaml --autobatch-trial-command="sleep 100" toy_train --config cfg.yaml\necho "srun rc=$?"\n' >job.sh
	job=$(sbatch --parsable -N1 -n1 --gpus=1 -o job.out -e job.err job.sh)
	wait_for_step autobatch-probe
	sleep 1
	scancel "$job$1"
	for _ in $(seq 200); do squeue -h -j "$job" 2>/dev/null | grep -q . || break; sleep 0.3; done
}

@test "a batch job cancelled while probing says so, not a Ctrl-C, and changes nothing" {
	# the batch step's SIGTERM ends srun and its probe step alike; the cancel line goes to
	# the job's own output, so srun tells it by the signal
	cancelled_in_batch ""
	assert_line_in "autobatch: the job was ended while probing (SIGTERM: its time limit, an scancel or a requeue; the job's output says which)" "$(cat job.err)"
	refute grep -q "interrupted (Ctrl-C)" job.err
	refute grep -q "toy_train:" job.out
	cmp -s cfg.yaml orig.yaml
	[ ! -e cfg.yaml.autobatch~ ]
	no_probe_step_left
}

@test "a step cancelled while probing (scancel JOB.STEP): srun says so and exits non-zero" {
	# Slurm cancels the step, whose tasks wait in the hold: srun times out waiting for
	# them and ends; with no task's status it once exited 0, as if the command had run
	cancelled_in_batch .0
	assert_line_in "autobatch: srun ended while probing (its step was cancelled, or srun was signalled): the step's tasks did not run its command" "$(cat job.err)"
	assert_line_in "srun rc=1" "$(cat job.out)"
	refute grep -q "toy_train:" job.out
	cmp -s cfg.yaml orig.yaml
	no_probe_step_left
}

# A Ctrl-C while no step of the probe runs reaches no srun of ours but the user's, which only
# prints its step's status on a first Ctrl-C: here, an srun waiting for an identical srun's
# decision (the cache entry's lock). The plugin hears it itself (a child of srun in its
# process group) and stops that srun; the other probes on and launches.

@test "Ctrl-C while waiting for an identical srun's decision stops that srun alone" {
	set_plugstack ""
	# each trial of the first srun takes 8 s: its probe outlasts the second srun's start
	printf '#!/bin/sh\nsleep 8\nexec toy_train --config "$1"\n' >slow.sh
	chmod 0755 slow.sh
	local args=(-N1 -n1 --gpus=1 --autobatch=0.8 --autobatch-config=cfg.yaml
		--autobatch-trial-command="$PWD/slow.sh cfg.yaml" toy_train --config cfg.yaml)
	local a b n watchdog
	timeout 180 srun "${args[@]}" >out.a 2>err.a &
	a=$!
	wait_for_step autobatch-probe
	# the second srun leads a process group, as a shell's foreground job does: one SIGINT to
	# the group is one Ctrl-C (timeout would send srun a second one)
	setsid srun "${args[@]}" >out.b 2>err.b &
	b=$!
	(sleep 180 && kill -KILL -- "-$b") >/dev/null 2>&1 &
	watchdog=$!
	# it waits for the first one's decision: the cache entry's lock is open in it
	for n in $(seq 300); do
		ls -l "/proc/$b/fd" 2>/dev/null | grep -q '\.lock$' && break
		sleep 0.1
	done
	ls -l "/proc/$b/fd" | grep -q '\.lock$' || { echo "the second srun never waited for the lock" >&2; return 1; }
	[ "$(squeue -h -s -o %j | grep -c '^autobatch-probe')" -eq 1 ]
	kill -INT -- "-$b"
	wait "$b" && { echo "the interrupted srun exited 0: $(cat err.b out.b)" >&2; return 1; }
	kill "$watchdog"
	wait "$a" || { echo "the other srun failed: $(cat err.a)" >&2; return 1; }
	# it had no probe step of its own (it once said "the probe step was cancelled")
	assert_line_in "autobatch: interrupted (Ctrl-C) while waiting for an identical srun's decision (its probe goes on); nothing was changed" "$(cat err.b)"
	refute grep -q "autobatch: trial 1" err.b
	refute grep -q "toy_train:" out.b
	n=$(config_batch)
	assert_line_in "toy_train: batch $n from cfg.yaml, AUTOBATCH_BATCH_SIZE=$n" "$(cat out.a)"
	no_probe_step_left
}

@test "a report that says interrupted is a cancel whatever the exit status (Slurm 26.05 loses 130)" {
	# what srun 26.05 hands back when the probe step outlives its wait after a Ctrl-C: the
	# probe's report, and not the probe's exit status 130
	printf '#!/bin/sh\necho %s\nexit 1\n' "'{\"autobatch_version\":\"0.1.0\",\"status\":\"interrupted\",\"error\":\"interrupted during trial 1 (batch 8); the trial was stopped\"}'" \
		>"$BATS_TEST_TMPDIR/probe"
	chmod 0755 "$BATS_TEST_TMPDIR/probe"
	set_plugstack "probe=$BATS_TEST_TMPDIR/probe"
	run --separate-stderr srun_t -N1 -n1 --gpus=1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		toy_train --config cfg.yaml
	assert_line_in "autobatch: probing was interrupted (Ctrl-C); the probe step was cancelled" "$stderr"
	refute grep -q "launching with the original settings" <<<"$stderr"
	refute grep -q "toy_train:" <<<"$output"
	[ "$status" -ne 0 ]
	cmp -s cfg.yaml orig.yaml
	no_probe_step_left
}

@test "the probe step's own srun leaves autobatch alone (no recursion), a stray guard does not" {
	set_plugstack ""
	AUTOBATCH_PROBE_GUARD=1 run --separate-stderr srun_t -N1 -n1 --gpus=1 --autobatch=0.8 \
		--autobatch-config=cfg.yaml toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	[ "$(grep -c 'autobatch: trial 1:' <<<"$stderr")" -eq 1 ]
	[ "$(config_batch)" -gt 100 ]
}

@test "abort inside an allocation leaves no step behind: the next srun runs" {
	set_plugstack "probe=/nonexistent/autobatch-probe on_failure=abort" required
	run --separate-stderr timeout 120 salloc -N1 -n1 --gpus=1 bash -c \
		'srun --autobatch=0.8 --autobatch-config=cfg.yaml toy_train --config cfg.yaml
		 echo "first=$?"; timeout 20 srun true && echo second-ok'
	assert_line_in "the step is not launched (on_failure=abort)" "$stderr"
	assert_line_in "first=1" "$output"
	assert_line_in "second-ok" "$output"
	refute grep -q "toy_train:" <<<"$output"
	cmp -s cfg.yaml orig.yaml
}

@test "on_failure=abort stops the command even for an optional plugin" {
	set_plugstack "probe=/nonexistent/autobatch-probe on_failure=abort"
	run --separate-stderr srun_t -N1 -n2 --gpus=1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		toy_train --config cfg.yaml
	[ "$status" -ne 0 ]
	refute grep -q "toy_train:" <<<"$output"
	assert_line_in "autobatch: task not started: probing failed and on_failure=abort" "$stderr"
	cmp -s cfg.yaml orig.yaml
}

@test "an autobatch option without --autobatch under on_failure=abort: not run even by an optional plugin" {
	set_plugstack "on_failure=abort"
	run --separate-stderr srun_t -N1 -n2 --autobatch-config=cfg.yaml toy_train --config cfg.yaml
	[ "$status" -ne 0 ]
	refute grep -q "toy_train:" <<<"$output"
	assert_line_in "autobatch: --autobatch-config has no effect without --autobatch" "$stderr"
	assert_line_in "autobatch: the step is not launched (on_failure=abort)" "$stderr"
	[ "$(grep -c "autobatch: task not started: probing failed or the request was refused, and on_failure=abort" <<<"$stderr")" -eq 2 ]
	# under continue it runs, as it is
	set_plugstack ""
	run --separate-stderr srun_t -N1 -n1 --autobatch-config=cfg.yaml toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	assert_line_in "toy_train: batch 8 from cfg.yaml" "$output"
	# and the next srun of the allocation-less kind runs as ever
	set_plugstack "on_failure=abort"
	run --separate-stderr srun_t -N1 -n1 toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	assert_line_in "toy_train: batch 8 from cfg.yaml" "$output"
}

@test "a stray abort mark in the environment stops nothing" {
	SLURM_AUTOBATCH_ABORT=1.0 AUTOBATCH_ABORT=x run --separate-stderr srun_t -N1 -n1 true
	[ "$status" -eq 0 ]
	! grep -q "task not started" <<<"$stderr"
}

# edited_while_probing SED: a probe whose trials edit the original cfg.yaml with SED first,
# as someone else does while the probe runs
edited_while_probing() {
	run --separate-stderr srun_t -N1 -n1 --gpus=1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="sed -i '$1' $PWD/cfg.yaml; toy_train --config cfg.yaml" \
		toy_train --config cfg.yaml
}

@test "a batch another srun wrote while probing is not overwritten (an array's other command)" {
	# the trial plays another element of the array: it writes its own decision, 77, into
	# the shared file during the probe; this srun's decision would overwrite it
	edited_while_probing 's/^  batch_size: 8/  batch_size: 77/'
	# the original settings are gone, and 77 was not decided for this step: not launched,
	# whatever on_failure says (it once said "launching with the original settings" and
	# its tasks read 77)
	[ "$status" -ne 0 ]
	assert_line_in "autobatch: cfg.yaml's batch was rewritten by another srun while autobatch was probing (a step sizing the same file for another command or fraction?): nothing was written; give each such step its own config file" "$stderr"
	assert_line_in "own config file; the step is not launched: its tasks would read the other srun's batch, not the original settings" "$stderr"
	assert_line_in "autobatch: task not started: the config holds another srun's batch" "$stderr"
	refute grep -q "toy_train: batch" <<<"$output"
	[ "$(config_batch)" = 77 ]
	[ ! -e cfg.yaml.autobatch~ ]
}

@test "a config the user changes while probing is not overwritten" {
	# the trial itself plays the user: it edits the original file during the probe
	edited_while_probing 's/max_steps: 3/max_steps: 5/'
	[ "$status" -eq 0 ]
	assert_line_in "autobatch: cfg.yaml changed while autobatch was probing: nothing was written and your edit is kept" "$stderr"
	grep -q 'max_steps: 5' cfg.yaml
	[ "$(config_batch)" = 8 ]
	[ ! -e cfg.yaml.autobatch~ ]
	assert_line_in "toy_train: batch 8 from cfg.yaml" "$output"
}
