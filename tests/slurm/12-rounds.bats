#!/usr/bin/env bats
# Probing cost: with the job's 4 GPUs on the node the probe runs its trials 4 at once, one
# per GPU, and decides what one-at-a-time trials decide.

load helpers

setup_file() { require_testbed; reset_plugstack; }
setup() {
	use_toy_config
	# 30 MiB a sample: batch 6 fits the 205 MiB limit, 7 does not, so both searches end on
	# "the next size fails" and must agree exactly
	sed -i 's/activation_kib: 1024/activation_kib: 30720/' cfg.yaml
}

# Each trial logs its start and end (epoch seconds), its batch and its GPU.
TRIAL='echo "start $(date +%s.%N) $AUTOBATCH_BATCH_SIZE gpu=$CUDA_VISIBLE_DEVICES" >>trials.log; sleep 1; toy_train --config cfg.yaml >/dev/null; echo "end $(date +%s.%N) $AUTOBATCH_BATCH_SIZE" >>trials.log'

probe4() {
	run --separate-stderr srun_t -N1 -n1 --gres=gpu:4 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="$TRIAL" toy_train --config cfg.yaml
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
}

@test "--gres=gpu:4: trials run 4 at once, one per GPU, and decide as one at a time does" {
	probe4
	b=$(config_batch)
	[ "$b" -eq 6 ]
	assert_line_in "autobatch: up to 4 trials at once, one per GPU (0,1,2,3)" "$stderr"
	assert_line_in "autobatch: round 1: trial 1: batch 8 does not fit" "$stderr"
	grep -q '"parallel":4,' autobatch-*.json
	rounds=$(sed -n 's/.*"rounds":\([0-9]*\),.*/\1/p' autobatch-*.json)
	[ "$rounds" -ge 1 ]
	[ "$rounds" -le 3 ]
	assert_line_in "autobatch: chose batch 6 in " "$stderr"
	assert_line_in "rounds of up to 4 at once)" "$stderr"
	# round 1's trials overlapped in time: each started before any of them ended
	first_end=$(awk '$1 == "end" { print $2; exit }' trials.log)
	started_before=$(awk -v e="$first_end" '$1 == "start" && $2 < e' trials.log | wc -l)
	[ "$started_before" -ge 2 ] || { cat trials.log >&2; return 1; }
	# on 4 different GPUs
	gpus=$(awk -v e="$first_end" '$1 == "start" && $2 < e { print $4 }' trials.log | sort -u | wc -l)
	[ "$gpus" -eq "$started_before" ] || { cat trials.log >&2; return 1; }
	no_probe_step_left

	# the same job, trials one at a time (parallel=off): the same decision, none overlapping
	cp cfg.yaml.autobatch~ cfg.yaml
	rm -f trials.log autobatch-*.json
	set_plugstack 'parallel=off'
	export XDG_CACHE_HOME=$BATS_TEST_TMPDIR/cache-sequential
	probe4
	reset_plugstack
	[ "$(config_batch)" -eq "$b" ]
	grep -q '"parallel":1,' autobatch-*.json
	refute grep -q "trials at once" <<<"$stderr"
	awk '$1 == "start" { if (open) bad = 1; open = 1 } $1 == "end" { open = 0 } END { exit bad }' trials.log
}

@test "parallel=off and one GPU: the probe step runs trials one at a time" {
	run --separate-stderr srun_t -N1 -n1 --gres=gpu:1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="$TRIAL" toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	[ "$(config_batch)" -eq 6 ]
	refute grep -q "trials at once" <<<"$stderr"
	assert_line_in "autobatch: trial 1: batch 8 does not fit" "$stderr"
}

# sweep_job ARGS...: one job of a sweep on one GPU; its decision line in $line.
sweep_job() {
	run --separate-stderr srun_t -N1 -n1 --gres=gpu:1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		"$@" toy_train --config cfg.yaml
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	line=$(grep '^srun: autobatch: chose batch\|autobatch: chose batch' <<<"$stderr" | tail -n1)
	echo "$line" >&2
}

@test "a learning-rate sweep: the first job probes, the next 4 warm-start in 1 or 2 trials; a wider model searches afresh" {
	sed -i 's/^  width: 128 .*/&\n  lr: 0.1               # learning rate/' cfg.yaml
	sweep_job
	[ "$(config_batch)" -eq 6 ]
	refute grep -q "warm start" <<<"$line"
	first=$(sed -n 's/.* in \([0-9]*\) trials.*/\1/p' <<<"$line")
	[ "$first" -ge 3 ]
	for lr in 0.05 0.02 0.01 0.005; do
		sed -i "s/^  lr: [0-9.]*/  lr: $lr/" cfg.yaml
		sweep_job
		[ "$(config_batch)" -eq 6 ]
		[[ "$line" =~ \ in\ [12]\ trials,\ [0-9]+\ s\;\ warm\ start\ from\ warm-[0-9a-f]{16}\.json\; ]]
		# never taken on trust: the cached batch ran again
		assert_line_in "autobatch: trial 1: batch 6 fits" "$stderr"
	done
	grep -q "^  lr: 0.005 " cfg.yaml
	# the hidden size moves memory: no warm start, a full search
	sed -i 's/^  width: 128/  width: 256/' cfg.yaml
	sweep_job
	refute grep -q "warm start" <<<"$line"
	[ "$(sed -n 's/.* in \([0-9]*\) trials.*/\1/p' <<<"$line")" -ge 3 ]
}

@test "--autobatch-neutral: a key the user calls neutral warm-starts; a batch that no longer fits searches afresh" {
	sweep_job --autobatch-neutral=model.activation_kib
	[ "$(config_batch)" -eq 6 ]
	# not neutral in truth: 40 MiB a sample, so the cached 6 (242 MiB) no longer fits; 5 does
	sed -i 's/activation_kib: 30720/activation_kib: 40960/' cfg.yaml
	sweep_job --autobatch-neutral=model.activation_kib
	assert_line_in "autobatch: trial 1: batch 6 does not fit" "$stderr"
	[[ "$line" == *"; warm start from "*".json (its batch no longer fit: searched afresh); "* ]]
	[ "$(config_batch)" -eq 5 ]
	# without the option the key is not neutral: a full search, no warm start
	sed -i 's/activation_kib: 40960/activation_kib: 35840/' cfg.yaml
	sweep_job
	refute grep -q "warm start" <<<"$line"
}
