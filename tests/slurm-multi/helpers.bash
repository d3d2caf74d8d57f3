# tests/slurm-multi/helpers.bash - what the multi-node tests share (tests/slurm-multi/run's
# testbed: node1 and node2 with "big" GPUs of 256 MiB, node3 with "small" ones of 128 MiB).
load ../slurm/helpers

setup_file() { require_testbed; reset_plugstack; }
setup() {
	use_toy_config
	cp cfg.yaml orig.yaml
	# a trial leaves a mark of its batch where every node sees it (one machine, one /tmp)
	printf '#!/bin/sh\ntouch "%s/trial-ran.$AUTOBATCH_BATCH_SIZE"\nexec toy_train --config "$1"\n' \
		"$BATS_TEST_TMPDIR" >trial.sh
	chmod 0755 trial.sh
	TRIAL="$BATS_TEST_TMPDIR/trial.sh cfg.yaml"
}
# a node a test killed comes back for the next
teardown() {
	local n
	reset_plugstack
	for n in node1 node2 node3; do
		if ! sinfo -h -n "$n" -o %T | grep -q '^idle$'; then
			"$TESTBED" revive-node "$n" >/dev/null
		fi
	done
}

node_log() { awk -v n="$1" '$1 == n { print $6 }' "$AUTOBATCH_TESTBED/etc/nodes"; }

# What each task prints: its node, how many trials had run when it started, its batch.
TASK='echo "task on $SLURMD_NODENAME after $(ls trial-ran.* 2>/dev/null | wc -l) trials: $(toy_train --config cfg.yaml | grep ^toy_train:)"'

# every one of the step's tasks, PER on each of NODES, ran at batch B from the rewritten
# config, and only after every trial had run
tasks_on_nodes() {
	local b=$1 per=$2 trials n
	trials=$(ls trial-ran.* | wc -l)
	[ "$trials" -ge 2 ]
	shift 2
	for n in "$@"; do
		[ "$(grep -c "^task on $n after $trials trials: toy_train: batch $b from cfg.yaml, AUTOBATCH_BATCH_SIZE=$b\$" <<<"$output")" -eq "$per" ] ||
			{ echo "want $per tasks on $n at batch $b after $trials trials in: $output" >&2; return 1; }
	done
}

# none_left PATTERN: no process matching PATTERN runs on any node, and no step of the job is
# left (given 30 s to end: Slurm lists a cancelled step while its nodes clean up)
none_left() {
	local i
	for i in $(seq 60); do
		if ! pgrep_here -f "$1" >/dev/null && [ -z "$(squeue -h -s -o %i)" ]; then break; fi
		sleep 0.5
	done
	refute pgrep_here -fl "$1"
	[ -z "$(squeue -h -s -o '%i %j %N')" ]
}

# nothing of ours runs on any node, no step of the job is left (given 30 s to end), the
# config is as it was
nothing_left() {
	none_left 'autobatch-probe|toy_train|sleep 100'
	cmp -s cfg.yaml orig.yaml
	[ ! -e cfg.yaml.autobatch~ ]
}

