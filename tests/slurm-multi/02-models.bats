#!/usr/bin/env bats
# Steps over GPU models (tests/slurm-multi/run's testbed: node1 and node2 hold "big" GPUs of
# 256 MiB, node3 "small" ones of 128 MiB, each named by its GRES type): a step that spans
# both is sized for the small one and probed on its node; the cache keys on the models, not
# on the nodes' names.

load helpers
load plain-step

# the job's steps that slurmd launched on a node, as "J.S" lines
steps_on() { grep -o "launch task StepId=$1\.[0-9]*" "$(node_log "$2")" | sed 's/.*=//' | sort -u; }

@test "a step over a big and a small GPU model is sized for the small one, probed on its node" {
	run --separate-stderr srun_t -N2 -w node1,node3 --ntasks-per-node=1 --autobatch=0.8 \
		--autobatch-config=cfg.yaml --autobatch-trial-command="$TRIAL" bash -c "$TASK"
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	b=$(config_batch)
	assert_line_in "autobatch: the step's nodes hold 2 GPU models: big 256 MiB (1 node; measured on node1), small 128 MiB (1 node; measured on node3); probing on node3, a node of the smallest (small)" "$stderr"
	assert_line_in "autobatch: chose batch $b in " "$stderr"
	assert_line_in "; sized for the step's smallest GPU model, small (128 MiB, on node3); wrote cfg.yaml" "$stderr"
	tasks_on_nodes "$b" 1 node1 node3
	# the report (as the cache keeps it) names the models and the one it was sized for
	grep -rq '"sized_for":{"type":"small","total_bytes":134217728,"nodes":1,"node":"node3"}' \
		"$XDG_CACHE_HOME/autobatch"
	grep -rq '"gpu_models":\[{"type":"big","total_bytes":268435456,' "$XDG_CACHE_HOME/autobatch"
	# the trials ran on node3 only: node1 saw the step and one short step that measured it
	job=$(grep -o 'StepId=[0-9]*' "$(node_log node3)" | tail -n1 | cut -d= -f2)
	[ "$(steps_on "$job" node1 | wc -l)" -eq 2 ] || { steps_on "$job" node1 >&2; return 1; }
	[ "$(steps_on "$job" node3 | wc -l)" -ge 3 ]
	# the batch a small node alone gets: nothing the big node's memory allowed beyond it
	cp orig.yaml alone.yaml
	run --separate-stderr srun_t -N1 -n2 -w node3 --autobatch=0.8 --autobatch-config=alone.yaml \
		--autobatch-trial-command="toy_train --config alone.yaml" true
	[ "$status" -eq 0 ]
	# within 5% of each other; one sample apart is noise: the same batch peaked 97.9 and
	# 98.1 MiB in two runs against a 98.4 MiB limit (b 95, alone 96 in local CI run 31)
	alone=$(config_batch alone.yaml)
	[ "$alone" -le $((b + 1 + b / 50)) ] || { echo "alone $alone, step $b" >&2; return 1; }
	[ "$alone" -ge $((b * 95 / 100)) ]
	run --separate-stderr srun_t -N1 -n2 -w node1 --autobatch=0.8 --autobatch-config=orig.yaml \
		--autobatch-trial-command="toy_train --config orig.yaml" true
	[ "$(config_batch orig.yaml)" -gt $((b * 3 / 2)) ]
}

@test "a step over two nodes of one model is probed once, on its first node, for that model" {
	run --separate-stderr srun_t -N2 -w node1,node2 --ntasks-per-node=1 --autobatch=0.8 \
		--autobatch-config=cfg.yaml --autobatch-trial-command="$TRIAL" bash -c "$TASK"
	[ "$status" -eq 0 ]
	b=$(config_batch)
	refute grep -q "GPU models" <<<"$stderr"
	refute grep -q "sized for" <<<"$stderr"
	[ "$b" -gt 150 ]
	tasks_on_nodes "$b" 1 node1 node2
}

@test "the cache: another node of the same model decides from it; a node of another model probes" {
	run --separate-stderr srun_t -N1 -w node1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="toy_train --config cfg.yaml" true
	[ "$status" -eq 0 ]
	big=$(config_batch)
	assert_line_in "autobatch: chose batch $big in " "$stderr"
	run --separate-stderr srun_t -N1 -w node2 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="toy_train --config cfg.yaml" true
	[ "$status" -eq 0 ]
	assert_line_in "autobatch: cached decision: batch $big " "$stderr"
	run --separate-stderr srun_t -N1 -w node3 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="toy_train --config cfg.yaml" true
	[ "$status" -eq 0 ]
	refute grep -q "cached decision" <<<"$stderr"
	small=$(config_batch)
	assert_line_in "autobatch: chose batch $small in " "$stderr"
	[ "$small" -lt $((big * 2 / 3)) ]
	# and the mixed step keys apart from both
	run --separate-stderr srun_t -N2 -w node2,node3 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="toy_train --config cfg.yaml" true
	[ "$status" -eq 0 ]
	refute grep -q "cached decision" <<<"$stderr"
	assert_line_in "sized for the step's smallest GPU model, small" "$stderr"
	run --separate-stderr srun_t -N2 -w node1,node3 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="toy_train --config cfg.yaml" true
	assert_line_in "autobatch: cached decision: batch $(config_batch) " "$stderr"
	assert_line_in "sized for the step's smallest GPU model, small (128 MiB, on node3)" "$stderr"
}

# task_peaks B: the plain step of asym.sh at batch B over node1 and node3, each task measured
# as a trial's (autobatch-probe task): "RANK PEAK" lines, or nothing when a task failed
task_peaks() {
	sed "s/^  batch_size: [0-9]*/  batch_size: $1/" orig.yaml >plain.yaml
	step_peaks 2 -N2 -w node1,node3 --ntasks-per-node=1 -- ./asym.sh plain.yaml
}

# over_own B: a task of the plain step at B went over its own GPU's limit (0.8 of 256 MiB on
# node1, rank 0; of 128 MiB on node3, rank 1), or failed
over_own() {
	local peaks
	peaks=$(task_peaks "$1")
	[ -z "$peaks" ] || awk '($1 == 0 && $2 > 0.8 * 268435456) || ($1 == 1 && $2 > 0.8 * 134217728) { o = 1 }
		END { exit !o }' <<<"$peaks"
}

@test "each trial the whole step over a big and a small GPU: each rank held to its own GPU's limit, not all to the small one's" {
	# ranks measured on the host, each node's as large as its simulated GPUs (the wrapper)
	args=$(testbed_probe_args)
	set_plugstack "probe_args=\"${args:+$args }--device host\""
	# rank 0 keeps 2.5 times the activations a sample that rank 1 does (a pipeline's first
	# stage), more than the big GPU's twice the memory makes up for: it binds, on node1
	cat >asym.sh <<'SH'
#!/bin/sh
cfg=${AUTOBATCH_TRIAL:+$AUTOBATCH_CONFIG}
cfg=${cfg:-$1}
if [ "$SLURM_PROCID" = 0 ]; then
	sed 's/activation_kib: [0-9]*/activation_kib: 2560/' "$cfg" >"$cfg.rank0.$$"
	cfg=$cfg.rank0.$$
fi
AUTOBATCH_CONFIG=$cfg exec toy_train --config "$cfg"
SH
	chmod 0755 asym.sh
	run --separate-stderr srun_t -N2 -w node1,node3 --ntasks-per-node=1 --autobatch=0.8 \
		--autobatch-config=cfg.yaml ./asym.sh cfg.yaml
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	b=$(config_batch)
	grep '^autobatch: \(trial\|chose\|the step\)' <<<"$stderr" | sed 's/^/# /' >&3
	assert_line_in "probing on node3, a node of the smallest (small)" "$stderr"
	grep -q "trials of the whole step, 2 nodes x 1 task" <<<"$stderr"
	grep -q "; each rank held to 80% of its own GPU's memory (the step's GPU models differ)" <<<"$stderr"
	# a trial names a rank's own bytes and GPU where they are not the probed one's
	grep -q "autobatch: trial [0-9]*: batch $b fits, peak .* as a share of 128 MiB (rank 0 on node1: .* of its own 256 MiB, the largest share of 2) of 102 MiB limit (80% of 128 MiB)" <<<"$stderr"
	grep -rq '"per_rank_limits":true' "$XDG_CACHE_HOME/autobatch"
	# the plain step at the choice: each rank within its own limit; rank 0 beyond what the
	# small GPU's limit would have allowed it (sizing every rank for the smallest would not
	# have chosen this batch); 1/6 more goes over a rank's own
	peaks=$(task_peaks "$b")
	echo "# plain step at $b: $(tr '\n' ' ' <<<"$peaks")" >&3
	[ "$(wc -l <<<"$peaks")" -eq 2 ]
	run ! over_own "$b"
	awk '$1 == 0 && $2 > 0.8 * 134217728 { f = 1 } END { exit !f }' <<<"$peaks"
	over_own $((b + b / 6 + 1))
	none_left 'autobatch-probe|toy_train'
}
