#!/usr/bin/env bats
# Whole-step trials end with their probe, whatever ends it (tests/slurm-multi/03-shapes.bats
# sizes real PyTorch programs with them): the node shape's trials on node1 only; a Ctrl-C
# inside salloc; a trial's launcher killed outright; tasks that go on after their steps. No
# PyTorch needed: these run on every release.

load helpers

setup_file() {
	require_testbed
	reset_plugstack
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	export XDG_CACHE_HOME=$BATS_TEST_TMPDIR/cache
	# ranks are measured on the host device: say so to the plugin (the testbed's own probe
	# arguments leave the device to its wrapper, which the plugin takes for a GPU)
	args=$(testbed_probe_args)
	set_plugstack "probe_args=\"${args:+$args }--device host:capacity=256MiB\""
}

teardown() { reset_plugstack; }

@test "--autobatch-trial-shape=node: each trial is the step's 2 tasks of node1, a world of one node" {
	cp "$SRCDIR/contrib/examples/toy.yaml" cfg.yaml
	run --separate-stderr timeout 300 srun -N2 --ntasks-per-node=2 --autobatch=0.5 \
		--autobatch-trial-shape=node --autobatch-config=cfg.yaml toy_train --config cfg.yaml
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	b=$(config_batch)
	echo "# $(grep 'chose batch' <<<"$stderr")" >&3
	assert_line_in "autobatch: chose batch $b in " "$stderr"
	grep -q "trials of one node's 2 tasks of the step's 2 nodes" <<<"$stderr"
	grep -q "autobatch: trial 1: batch [0-9]* fits, peak .* (rank [01] on node1, the largest of 2)" <<<"$stderr"
	refute grep -q "on node2, the largest" <<<"$stderr"
	[ "$(grep -c "^toy_train: batch $b from cfg.yaml" <<<"$output")" -eq 4 ]
}

@test "Ctrl-C during a whole-step trial inside salloc: the trial step is cancelled on both nodes, nothing of it is left" {
	printf '#!/bin/sh\nexec sleep 100\n' >hang.sh
	chmod +x hang.sh
	# inside an allocation the job outlives the srun: a trial step whose srun died with the
	# cancelled probe step would run on until the job ends
	export -f ctrl_c_when wait_for_step
	run --separate-stderr timeout 150 salloc -N2 -w node1,node2 --ntasks-per-node=2 bash -c '
		ctrl_c_when autobatch-trial. srun -N2 --ntasks-per-node=2 --autobatch=0.5 ./hang.sh
		sleep 3
		echo "sleeps left: $(pgrep -c -f "[s]leep 100")"
		# the plugin cancelled the trial step; Slurm lists it while its nodes clean up, which
		# took over 3 s in the 24.11 root under the load of CI (local run 27): 30 s for it to go
		for i in $(seq 30); do
			[ -z "$(squeue -h -s -j "$SLURM_JOB_ID" -o %i)" ] && break
			sleep 1
		done
		echo "steps left: $(squeue -h -s -j "$SLURM_JOB_ID" -o "%i %j" | tr "\n" " ")"'
	echo "$stderr" | grep autobatch | sed 's/^/# /' >&3
	assert_line_in "autobatch: probing was interrupted (Ctrl-C); the probe step was cancelled" "$stderr"
	grep -q "^steps left: *$" <<<"$output" || { echo "$output" >&2; return 1; }
	grep -q "^sleeps left: 0$" <<<"$output" || { echo "$output" >&2; return 1; }
	none_left 'autobatch-probe|toy_train'
}

@test "a trial step whose launcher is killed outright is cancelled by srun once the probe ends; nothing of it is left" {
	printf '#!/bin/sh\n[ -z "$AUTOBATCH_TRIAL" ] || exec sleep 100\n' >hang.sh
	chmod +x hang.sh
	# the last test's job may still be completing on these nodes: salloc would wait for them
	# (under CI's load in a root, past its 90 s)
	for i in $(seq 60); do
		[ "$(sinfo -h -n node1,node2 -o %T | sort -u)" = idle ] && break
		sleep 0.5
	done
	# SIGKILL leaves no launcher to end its step: the srun that probed cancels what is left
	# of the trial steps its probe started (autobatch-trial.PID). The launcher is killed once
	# its step runs: killed before it had made one (CI run 33, 26.05 root: 1 s in), there
	# was nothing to cancel and nothing to test. Its tasks are stopped (SIGSTOP) first, as
	# tasks stuck in the kernel or a driver would be: running, they end at the end of their
	# input, which the launcher's death brings, and in local CI run 40 (26.05 root) they had
	# ended before srun looked, so it had nothing to cancel either. The trial step's srun and
	# its shepherd (srun's child that cancels the step when srun dies) are killed with the
	# launcher, as a cancelled probe step kills them all: with the shepherd alive, it
	# cancelled the step before the probe ended in 26.05 (local CI run 44), and there was
	# nothing left for srun to cancel. They are stopped before the launcher is killed (its
	# death kills srun, whose shepherd would act), and killed after it (killed first, srun
	# told the launcher, which ended by itself before it could be killed)
	run --separate-stderr timeout 90 salloc -N2 -w node1,node2 --ntasks-per-node=2 bash -c '
		(for i in $(seq 120); do
			if squeue -h -s -j "$SLURM_JOB_ID" -o %j | grep -q "^autobatch-trial\." &&
				[ "$(pgrep -c -f "[s]leep 100")" -eq 4 ]; then
				pkill -STOP -f "^[^ ]*[a]utobatch-probe[^ ]* task " &&
					pkill -STOP -f "^[s]run --overlap .*--job-name=autobatch-trial\." &&
					pkill -9 -f "[a]utobatch-probe.* ranks 4" && {
					pkill -9 -f "^[s]run --overlap .*--job-name=autobatch-trial\."
					break
				}
			fi
			sleep 0.5
		done) &
		timeout 60 srun -N2 --ntasks-per-node=2 --autobatch=0.5 ./hang.sh
		wait
		for i in $(seq 40); do
			[ -z "$(squeue -h -s -j "$SLURM_JOB_ID" -o %i)" ] && break
			sleep 0.5
		done
		echo "waited: $i"
		echo "steps left: $(squeue -h -s -j "$SLURM_JOB_ID" -o "%i %j" | tr "\n" " ")"
		echo "sleeps left: $(pgrep -c -f "[s]leep 100")"'
	echo "$stderr" | grep autobatch | sed 's/^/# /' >&3
	grep -q "autobatch: cancelled the trial step [0-9]*\.[0-9]* that the probe left" <<<"$stderr" ||
		{ echo "status $status: $stderr" >&2; return 1; }
	grep -q "^steps left: *$" <<<"$output" || { echo "$output" >&2; return 1; }
	grep -q "^sleeps left: 0$" <<<"$output" || { echo "$output" >&2; return 1; }
	none_left 'autobatch-probe|toy_train'
}

@test "a trial whose tasks go on after their steps: each ends before the next starts, the decision stands, nothing is left" {
	cp "$SRCDIR/contrib/examples/toy.yaml" cfg.yaml
	# steps reported, then it stays, its sleep named after its batch: the probe ends each
	# trial once it has its steps, and a trial whose tasks ran on would hold its GPUs (here:
	# their memory and cores) while the next trial is measured. Each task of a trial notes
	# the other trials' sleeps it finds when it starts.
	cat >stays.sh <<-'EOF'
	#!/bin/sh
	[ -z "$AUTOBATCH_TRIAL" ] || echo "$AUTOBATCH_BATCH_SIZE: $(pgrep -af "[s]leep 100\\." | grep -vc " 100\\.$AUTOBATCH_BATCH_SIZE\$")" >>"$STARTS"
	toy_train --config "$1"
	[ -z "$AUTOBATCH_TRIAL" ] || exec sleep "100.$AUTOBATCH_BATCH_SIZE"
	EOF
	chmod +x stays.sh
	mkdir tmp
	run --separate-stderr timeout 120 salloc -N2 -w node1,node2 --ntasks-per-node=2 bash -c '
		STARTS=$PWD/starts TMPDIR=$PWD/tmp timeout 90 srun -N2 --ntasks-per-node=2 --autobatch=0.5 \
			--autobatch-config=cfg.yaml ./stays.sh cfg.yaml | grep -c "^toy_train: batch"
		for i in $(seq 40); do
			[ -z "$(squeue -h -s -j "$SLURM_JOB_ID" -o %i)" ] && break
			sleep 0.5
		done
		echo "steps left: $(squeue -h -s -j "$SLURM_JOB_ID" -o "%i %j" | tr "\n" " ")"
		echo "sleeps left: $(pgrep -c -f "[s]leep 100")"'
	assert_line_in "autobatch: chose batch $(config_batch) in " "$stderr"
	grep "autobatch: trial" <<<"$stderr" | sed 's/^/# /' >&3
	grep -q "autobatch: trial [0-9]*: batch [0-9]* fits" <<<"$stderr"
	# the probe stopped each trial step itself: none was left for the srun to cancel
	refute grep -q "cancelled the trial step" <<<"$stderr"
	[ "$(wc -l <starts)" -ge 8 ] || { cat starts >&2; return 1; }
	# a trial's tasks start with no other trial's sleep running (its own may: a fast task)
	refute grep -v "^[0-9]*: 0$" starts
	# each task removed its report directory, where a cancellation (SIGKILL) leaves it
	[ -z "$(ls -A tmp)" ] || { ls -A tmp >&2; return 1; }
	grep -qx 4 <<<"$output" || { echo "$output" >&2; return 1; }
	grep -q "^steps left: *$" <<<"$output" || { echo "$output" >&2; return 1; }
	grep -q "^sleeps left: 0$" <<<"$output" || { echo "$output" >&2; return 1; }
	none_left 'autobatch-probe|toy_train'
}

# GPU-OPTION...: a step of 2 nodes x 2 tasks with that GPU request, each of whose tasks, in
# each trial step and in the real step, notes its rank, node and GPUs (CUDA_VISIBLE_DEVICES
# and SLURM_STEP_GPUS, which Slurm sets from the step's GRES): the same in both. The trial
# steps get the real step's request (its record in slurmctld): without it they got the job's
# default, all of a node's GPUs in every task.
gpus_seen() {
	cp "$SRCDIR/contrib/examples/toy.yaml" cfg.yaml
	cat >gpus.sh <<-'EOF2'
	#!/bin/sh
	f=real
	[ -z "$AUTOBATCH_TRIAL" ] || f=trial
	echo "$SLURM_PROCID $SLURMD_NODENAME ${CUDA_VISIBLE_DEVICES-unset} ${SLURM_STEP_GPUS-unset}" >>"$SEEN.$f"
	exec toy_train --config "$1"
	EOF2
	chmod +x gpus.sh
	SEEN=$PWD/seen run --separate-stderr timeout 300 srun -N2 -w node1,node2 --ntasks-per-node=2 "$@" \
		--autobatch=0.5 --autobatch-config=cfg.yaml ./gpus.sh cfg.yaml
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	grep -q "autobatch: chose batch .*trials of the whole step, 2 nodes x 2 tasks" <<<"$stderr"
	echo "# $*: real $(sort -u seen.real | tr '\n' ';') trials $(sort -u seen.trial | tr '\n' ';')" >&3
	[ "$(sort -u seen.real | wc -l)" -eq 4 ]
	diff <(sort -u seen.real) <(sort -u seen.trial)
}

@test "each task of a whole-step trial sees the GPUs its task of the real step sees (--gpus-per-task=1)" {
	gpus_seen --gpus-per-task=1
}

@test "each task of a whole-step trial sees the GPUs its task of the real step sees (--gres=gpu:big:1)" {
	gpus_seen --gres=gpu:big:1
}

@test "each task of a whole-step trial sees the GPUs its task of the real step sees (--gpus=2)" {
	gpus_seen --gpus=2
}
