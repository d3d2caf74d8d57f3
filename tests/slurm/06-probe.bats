#!/usr/bin/env bats
# srun --autobatch end to end: the probe step runs, its decision reaches the config and
# every task, and each failure leaves one clear line and nothing half-done.

load helpers

setup_file() { require_testbed; reset_plugstack; }
setup() { use_toy_config; }
teardown() { reset_plugstack; chmod -R u+w "$BATS_TEST_TMPDIR" 2>/dev/null || true; }

# Each task prints "toy_train: batch B from cfg.yaml, AUTOBATCH_BATCH_SIZE=B".
tasks_agree() {
	local want=$1 lines=$2 got
	got=$(grep -c "^toy_train: batch $want from cfg.yaml, AUTOBATCH_BATCH_SIZE=$want\$" <<<"$output")
	[ "$got" -eq "$lines" ] || { echo "want $lines tasks with batch $want in: $output" >&2; return 1; }
}

# Only the batch line differs from the backup; the chosen batch was measured to fit.
config_rewritten() {
	local b=$1
	[ -f cfg.yaml.autobatch~ ]
	diff <(grep -v '^  batch_size:' cfg.yaml.autobatch~) <(grep -v '^  batch_size:' cfg.yaml)
	grep -qx "  batch_size: $b         # per GPU; autobatch rewrites this value" cfg.yaml
	grep -q "\"batch\":$b,\"fits\":true" autobatch-*.json
}

@test "own allocation: tasks see the batch written into the config, measured to fit" {
	# one-process trials (the gpu shape), which run in parallel rounds
	run --separate-stderr srun_t -N1 -n2 --gpus=4 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-shape=gpu toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	b=$(config_batch)
	[ "$b" -gt 100 ]
	tasks_agree "$b" 2
	config_rewritten "$b"
	assert_line_in "trials of one process of the step's 2 tasks" "$stderr"
	# the job's 4 GPUs on the node: trials 4 at once
	assert_line_in "autobatch: up to 4 trials at once, one per GPU (0,1,2,3)" "$stderr"
	assert_line_in "autobatch: round 1: trial 1: batch 8 fits" "$stderr"
	assert_line_in "autobatch: chose batch $b in " "$stderr"
	assert_line_in "wrote cfg.yaml (backup cfg.yaml.autobatch~)" "$stderr"
	no_probe_step_left
}

@test "a site's simulated device: a step of two tasks decides on one-process trials and says why" {
	# sim:total gives the capacity; toy_train reports what it holds, as a step hook would
	set_plugstack 'probe_args="--device=sim:total=256MiB"'
	run --separate-stderr srun_t -N1 -n2 --autobatch=0.8 --autobatch-config=cfg.yaml \
		toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	b=$(config_batch)
	[ "$b" -gt 100 ]
	tasks_agree "$b" 2
	config_rewritten "$b"
	assert_line_in "trials of one process of the step's 2 tasks (the site's simulated device measures one process)" "$stderr"
	run ! grep -q 'not on a simulated device' <<<"$stderr"
}

@test "inside salloc: four tasks, one decision, each trial the whole step" {
	run --separate-stderr timeout 120 salloc -N1 -n4 --gpus=4 srun --autobatch=0.8 \
		--autobatch-config=cfg.yaml toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	b=$(config_batch)
	tasks_agree "$b" 4
	config_rewritten "$b"
	assert_line_in "trials of the whole step, 1 node x 4 tasks" "$stderr"
	grep -q "autobatch: trial 1: batch 8 fits, peak .* (rank [0-3] on node1, the largest of 4)" <<<"$stderr"
}

@test "inside sbatch: the options given to sbatch (a fraction, a trial shape) probe for the job's srun" {
	run timeout 120 sbatch --wait -n2 --gpus=2 --autobatch=0.8 --autobatch-trial-shape=gpu -o out.txt -e err.txt \
		--wrap "srun --autobatch-config=cfg.yaml toy_train --config cfg.yaml"
	[ "$status" -eq 0 ]
	output=$(cat out.txt)
	b=$(config_batch)
	[ "$b" -gt 100 ]
	tasks_agree "$b" 2
	config_rewritten "$b"
	grep -q "autobatch: round 1: trial 1:" err.txt
}

@test "a global batch: the micro-batch divides it, the accumulation is written too" {
	run --separate-stderr srun_t -N1 -n2 --gpus=2 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-global-batch=1024 bash -c \
		'toy_train --config cfg.yaml; echo "ENV $AUTOBATCH_BATCH_SIZE $AUTOBATCH_GRAD_ACCUM $AUTOBATCH_GLOBAL_BATCH"'
	[ "$status" -eq 0 ]
	b=$(config_batch)
	acc=$(sed -n 's/^  accumulate_grad_batches: \([0-9]*\).*/\1/p' cfg.yaml)
	[ $((b * acc * 2)) -eq 1024 ]
	[ $((512 % b)) -eq 0 ]
	[ "$b" -eq 128 ] # the largest divisor of 512 that fits 205 MiB
	[ "$(grep -c "^ENV $b $acc 1024\$" <<<"$output")" -eq 2 ]
	assert_line_in "autobatch: chose batch $b (gradient accumulation $acc, global 1024)" "$stderr"
}

@test "without a global batch asked, the tasks get the config's own accumulation, and the global batch it makes" {
	sed -i 's/accumulate_grad_batches: 1/accumulate_grad_batches: 4/' cfg.yaml
	run --separate-stderr srun_t -N1 -n2 --gpus=2 --autobatch=0.8 --autobatch-config=cfg.yaml \
		bash -c 'toy_train --config cfg.yaml >/dev/null; echo "ENV $AUTOBATCH_BATCH_SIZE $AUTOBATCH_GRAD_ACCUM $AUTOBATCH_GLOBAL_BATCH"'
	[ "$status" -eq 0 ]
	b=$(config_batch)
	grep -q '^  accumulate_grad_batches: 4' cfg.yaml # the user's, kept
	[ "$(grep -c "^ENV $b 4 $((b * 4 * 2))\$" <<<"$output")" -eq 2 ]
	assert_line_in "accumulation in trials: 1 of 4 (trainer.accumulate_grad_batches)" "$stderr"
}

@test "srun -D DIR: the config named relative to DIR is the one decided for and rewritten, and the trials run there" {
	mkdir sub
	mv cfg.yaml sub/cfg.yaml
	run --separate-stderr srun_t -N1 -n1 --gpus=1 -D sub --autobatch=0.8 \
		--autobatch-config=cfg.yaml toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	b=$(config_batch sub/cfg.yaml)
	[ "$b" -gt 8 ]
	assert_line_in "autobatch: chose batch $b in" "$stderr"
	assert_line_in "toy_train: batch $b from cfg.yaml" "$output"
	[ -e sub/cfg.yaml.autobatch~ ]
	[ ! -e cfg.yaml ]
}

@test "srun's options as srun reads them: -lDDIR (a cluster) and --chd=DIR (a prefix) are -D; -J -Dx is a job's name" {
	mkdir a b
	cp cfg.yaml a/cfg.yaml
	cp cfg.yaml b/cfg.yaml
	run --separate-stderr srun_t -N1 -n1 --gpus=1 -lDa --autobatch=0.8 \
		--autobatch-config=cfg.yaml toy_train --config cfg.yaml
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	x=$(config_batch a/cfg.yaml)
	[ "$x" -gt 8 ]
	assert_line_in "0: toy_train: batch $x from cfg.yaml" "$output"
	[ "$(config_batch)" -eq 8 ] # the one in srun's own directory is not the step's
	# the same config in another directory: the cached decision, written where the step runs
	run --separate-stderr srun_t -N1 -n1 --gpus=1 --chd=b --autobatch=0.8 \
		--autobatch-config=cfg.yaml toy_train --config cfg.yaml
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	[ "$(config_batch b/cfg.yaml)" -eq "$x" ]
	assert_line_in "toy_train: batch $x from cfg.yaml" "$output"
	[ "$(config_batch)" -eq 8 ]
	# the job's name "-Db": srun runs the step here, and so does autobatch
	run --separate-stderr srun_t -N1 -n1 --gpus=1 -J -Db --autobatch=0.8 \
		--autobatch-config=cfg.yaml toy_train --config cfg.yaml
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	[ "$(config_batch)" -eq "$x" ]
	assert_line_in "toy_train: batch $x from cfg.yaml" "$output"
}

@test "SLURM_WORKING_DIR without -D: srun starts the tasks there, and so does autobatch; -D wins" {
	mkdir sub other
	mv cfg.yaml sub/cfg.yaml
	SLURM_WORKING_DIR=sub run --separate-stderr srun_t -N1 -n1 --gpus=1 --autobatch=0.8 \
		--autobatch-config=cfg.yaml toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	b=$(config_batch sub/cfg.yaml)
	[ "$b" -gt 8 ]
	assert_line_in "toy_train: batch $b from cfg.yaml" "$output"
	[ -e sub/cfg.yaml.autobatch~ ]

	# srun's own -D comes before the variable, as srun reads them
	cp sub/cfg.yaml.autobatch~ other/cfg.yaml
	SLURM_WORKING_DIR=nowhere run --separate-stderr srun_t -N1 -n1 --gpus=1 -D other \
		--autobatch=0.8 --autobatch-config=cfg.yaml toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	[ "$(config_batch other/cfg.yaml)" -eq "$b" ]

	# a directory that is not there: named as the variable, no probe
	SLURM_WORKING_DIR=nowhere run --separate-stderr srun_t -N1 -n1 --gpus=1 --autobatch=0.8 \
		--autobatch-config=cfg.yaml true
	assert_line_in "SLURM_WORKING_DIR=nowhere: No such file or directory" "$stderr"
	refute grep -q "chose batch" <<<"$stderr"
}

@test "a NeMo config at tensor parallel 2: the global batch is divided among the data-parallel replicas, not the tasks" {
	cat >nemo.yaml <<-'EOF'
	trainer:
	  precision: 32
	model:
	  micro_batch_size: 8
	  global_batch_size: 1024
	  tensor_model_parallel_size: 2
	  width: 128
	  activation_kib: 1024
	EOF
	run --separate-stderr srun_t -N1 -n4 --gpus=4 --autobatch=0.8 --autobatch-config=nemo.yaml \
		--autobatch-trial-shape=gpu bash -c \
		'toy_train --config nemo.yaml >/dev/null; echo "ENV $AUTOBATCH_BATCH_SIZE $AUTOBATCH_GRAD_ACCUM $AUTOBATCH_GLOBAL_BATCH"'
	[ "$status" -eq 0 ]
	b=$(sed -n 's/^  micro_batch_size: \([0-9]*\).*/\1/p' nemo.yaml)
	# 2 replicas: the micro-batch divides 1024 / 2, accumulation 1024 / (b x 2); the tasks
	# (4) would have made it 1024 / (b x 4), half the global batch NeMo trains with
	[ "$b" -eq 128 ]
	[ "$(grep -c '^ENV 128 4 1024$' <<<"$output")" -eq 4 ]
	assert_line_in "autobatch: chose batch 128 (gradient accumulation 4, global 1024)" "$stderr"
	assert_line_in "2 data-parallel replicas (the step's 4 tasks in groups of tensor 2)" "$stderr"
	grep -q '^  global_batch_size: 1024$' nemo.yaml

	# tasks that are no whole number of tensor-parallel groups: said, nothing rewritten
	cp nemo.yaml.autobatch~ nemo.yaml
	run --separate-stderr srun_t -N1 -n3 --gpus=3 --autobatch=0.8 --autobatch-config=nemo.yaml true
	assert_line_in "the step's 3 tasks are not a whole number of model-parallel groups of 2 (tensor 2 in nemo.yaml): give srun a multiple of 2 tasks" "$stderr"
	grep -q '^  micro_batch_size: 8$' nemo.yaml
}

@test "a MaxText config, one task driving 4 GPUs: the global batch is divided among the GPUs, not the tasks" {
	printf 'per_device_batch_size: 8\ngradient_accumulation_steps: 1\nwidth: 128\nactivation_kib: 1024\n' >mt.yaml
	mt_srun() {
		srun_t -N1 -n1 --gpus-per-task="$1" --autobatch=0.8 --autobatch-config=mt.yaml \
			--autobatch-global-batch=1024 bash -c \
			'toy_train --config mt.yaml >/dev/null; echo "ENV $AUTOBATCH_BATCH_SIZE $AUTOBATCH_GRAD_ACCUM $AUTOBATCH_GLOBAL_BATCH"'
	}
	run --separate-stderr mt_srun 4
	[ "$status" -eq 0 ]
	# 4 replicas: 128 x 2 x 4 = 1024 (the task count, 1, would have made the accumulation 8)
	[ "$(grep -c '^ENV 128 2 1024$' <<<"$output")" -eq 1 ]
	grep -q '^gradient_accumulation_steps: 2$' mt.yaml
	assert_line_in "4 data-parallel replicas (the step's 4 GPUs, driven by 1 task: the batch is per device)" "$stderr"

	# the same srun again: a cache hit, whose accumulation is still the 4 GPUs'
	run --separate-stderr mt_srun 4
	[ "$status" -eq 0 ]
	assert_line_in "cached decision: batch 128 (gradient accumulation 2, global 1024)" "$stderr"
	[ "$output" = "ENV 128 2 1024" ]
	# 2 GPUs: not that entry (its trials and replicas differ); 128 x 4 x 2 = 1024
	run --separate-stderr mt_srun 2
	[ "$status" -eq 0 ]
	assert_line_in "chose batch 128 (gradient accumulation 4, global 1024)" "$stderr"
	[ "$output" = "ENV 128 4 1024" ]
}

@test "a launcher's step, one task starting its workers (torch.distributed.run --nproc_per_node): the global batch is divided among the workers" {
	PY=$(torch_python 'import torch.distributed.run')
	[ -n "$PY" ] || skip "no PyTorch beside this Slurm"
	# torch's own launcher, with the test environment's fix for Debian's build (as in
	# tests/slurm-multi); its N workers print what they were given
	cp -r "$SRCDIR/tests/python/torchrun-fixes" .
	export PYTHONPATH=$PWD/torchrun-fixes
	export USE_LIBUV=0 # Debian's PyTorch 2 has no libuv, which its TCPStore asks for by default
	launched() { # WORKERS PORT: on 4 GPUs, a global batch of 1024 over WORKERS replicas
		cp cfg.yaml.autobatch~ cfg.yaml 2>/dev/null || true
		run --separate-stderr srun_t -N1 -n1 --gpus-per-task=4 --autobatch=0.8 \
			--autobatch-config=cfg.yaml --autobatch-global-batch=1024 \
			--autobatch-trial-command="toy_train --config cfg.yaml" \
			"$PY" -m torch.distributed.run --nnodes=1 --nproc_per_node "$1" \
			--master_addr=127.0.0.1 --master_port="$2" --no_python bash -c \
			'echo "ENV $AUTOBATCH_BATCH_SIZE $AUTOBATCH_GRAD_ACCUM $AUTOBATCH_GLOBAL_BATCH"'
		[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
		b=$(config_batch)
		acc=$(sed -n 's/^  accumulate_grad_batches: \([0-9]*\).*/\1/p' cfg.yaml)
		# WORKERS replicas: b x acc x WORKERS = 1024 (its 1 task, or its 4 GPUs, would not)
		[ $((b * acc * $1)) -eq 1024 ] || { echo "batch $b accumulation $acc" >&2; return 1; }
		[ "$(grep -c "^ENV $b $acc 1024\$" <<<"$output")" -eq "$1" ] || { echo "$output" >&2; return 1; }
		assert_line_in "$1 data-parallel replicas (the $1 workers torch.distributed.run starts)" "$stderr"
	}
	launched 4 29514
	launched 2 29515
}

@test "accelerate launch whose workers only its config file names: the global batch is divided among them" {
	PY=$(torch_python 'import accelerate, torch.distributed.run')
	[ -n "$PY" ] && command -v accelerate >/dev/null ||
		skip "no Accelerate beside this Slurm (the 26.05 root has it)"
	cp -r "$SRCDIR/tests/python/torchrun-fixes" .
	export PYTHONPATH=$PWD/torchrun-fixes USE_LIBUV=0
	# no --num_processes on the command line: accelerate reads 2 from the file, as srun does
	printf 'compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_machines: 1\nnum_processes: 2\nmain_process_ip: 127.0.0.1\nmain_process_port: 29516\nmixed_precision: "no"\ndynamo_config:\n  dynamo_backend: "NO"\n' >acc.yaml
	run --separate-stderr srun_t -N1 -n1 --gpus-per-task=4 --autobatch=0.8 \
		--autobatch-config=cfg.yaml --autobatch-global-batch=1024 \
		--autobatch-trial-command="toy_train --config cfg.yaml" \
		accelerate launch --config_file acc.yaml --no_python bash -c \
		'echo "ENV $AUTOBATCH_BATCH_SIZE $AUTOBATCH_GRAD_ACCUM $AUTOBATCH_GLOBAL_BATCH"'
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	b=$(config_batch)
	acc=$(sed -n 's/^  accumulate_grad_batches: \([0-9]*\).*/\1/p' cfg.yaml)
	# 2 replicas: b x acc x 2 = 1024 (its 1 task, or its 4 GPUs, would not)
	[ $((b * acc * 2)) -eq 1024 ] || { echo "batch $b accumulation $acc" >&2; return 1; }
	[ "$(grep -c "^ENV $b $acc 1024\$" <<<"$output")" -eq 2 ] || { echo "$output" >&2; return 1; }
	assert_line_in "2 data-parallel replicas (the 2 workers accelerate launch starts)" "$stderr"
}

@test "a MaxText batch ramp-up through srun: trials at the candidate, the choice a step of the ramp" {
	printf 'per_device_batch_size: 8\nenable_rampup_batch_size: true\nper_device_batch_size_start: 4\nper_device_batch_size_increment: 12\nwidth: 128\nactivation_kib: 1024\n' >mt.yaml
	run --separate-stderr srun_t -N1 -n1 --gpus=1 --autobatch=0.8 --autobatch-config=mt.yaml \
		toy_train --config mt.yaml
	[ "$status" -eq 0 ]
	b=$(sed -n 's/^per_device_batch_size: \([0-9]*\)$/\1/p' mt.yaml)
	[ $(((b - 4) % 12)) -eq 0 ]
	[ "$b" -gt 100 ] # about 128 of 205 MiB at 1 MiB a sample: 172 is 4 + 14 x 12
	assert_line_in "a step of the batch ramp-up from 4 by 12 (trials ran it with enable_rampup_batch_size false)" "$stderr"
	grep -q '^enable_rampup_batch_size: true$' mt.yaml # the run's own ramp, kept
	grep -q "trial [0-9]*: batch $b fits" <<<"$stderr"
}

@test "admin bounds shape the probe that runs: max_fraction clamps the target" {
	set_plugstack 'max_fraction=0.4'
	run --separate-stderr srun_t -N1 -n1 --gpus=1 --autobatch=0.9 --autobatch-config=cfg.yaml \
		toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	grep -q '"fraction":0.4,' autobatch-*.json
	b=$(config_batch)
	[ "$b" -gt 80 ] # about 102 MiB of 1 MiB samples
	[ "$b" -lt 110 ]
	assert_line_in "(40% of 256 MiB)" "$stderr"
}

@test "enforce=on gives every task the caps; --export=NONE keeps the decision" {
	set_plugstack 'enforce=on'
	run --separate-stderr srun_t -N1 -n2 --gpus=2 --export=NONE --autobatch=0.7 \
		--autobatch-config=cfg.yaml --autobatch-trial-command="$AUTOBATCH_TESTBED/bin/toy_train --config cfg.yaml" \
		/usr/bin/env
	[ "$status" -eq 0 ]
	b=$(config_batch)
	[ "$(grep -c "^AUTOBATCH_BATCH_SIZE=$b\$" <<<"$output")" -eq 2 ]
	[ "$(grep -c '^AUTOBATCH_MEM_FRACTION=0.7$' <<<"$output")" -eq 2 ]
	[ "$(grep -c '^XLA_PYTHON_CLIENT_MEM_FRACTION=0.7$' <<<"$output")" -eq 2 ]
	[ "$(grep -c '^XLA_CLIENT_MEM_FRACTION=0.7$' <<<"$output")" -eq 2 ]
	[ "$(grep -c '^XLA_PYTHON_CLIENT_PREALLOCATE=false$' <<<"$output")" -eq 2 ]
	! grep -q '^PATH=' <<<"$output" # --export=NONE really was in force
}

@test "XLA's pool: trials take none at start, under the fraction asked; so do the tasks, or they keep the user's own" {
	# each trial's XLA variables, then the toy trainer (a JAX program reads these at start)
	cat >trial.sh <<EOF
#!/bin/sh
env | grep '^XLA_' | sort >"$BATS_TEST_TMPDIR/xla.\$\$"
exec "$AUTOBATCH_TESTBED/bin/toy_train" "\$@"
EOF
	chmod +x trial.sh
	run --separate-stderr srun_t -N1 -n2 --gpus=2 --autobatch=0.7 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="$BATS_TEST_TMPDIR/trial.sh --config cfg.yaml" /usr/bin/env
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	[ "$(grep -c '^XLA_PYTHON_CLIENT_MEM_FRACTION=0.7$' <<<"$output")" -eq 2 ]
	[ "$(grep -c '^XLA_CLIENT_MEM_FRACTION=0.7$' <<<"$output")" -eq 2 ]
	[ "$(grep -c '^XLA_PYTHON_CLIENT_PREALLOCATE=false$' <<<"$output")" -eq 2 ]
	[ "$(grep -c '^APPTAINERENV_XLA_CLIENT_MEM_FRACTION=0.7$' <<<"$output")" -eq 2 ]
	trials=$(ls xla.* | wc -l)
	[ "$trials" -ge 2 ]
	[ "$(cat xla.* | grep -c '^XLA_PYTHON_CLIENT_PREALLOCATE=false$')" -eq "$trials" ]
	[ "$(cat xla.* | grep -c '^XLA_PYTHON_CLIENT_MEM_FRACTION=0.7$')" -eq "$trials" ]
	# the same srun again decides from the cache: the tasks get the same pool
	run --separate-stderr srun_t -N1 -n2 --gpus=2 --autobatch=0.7 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="$BATS_TEST_TMPDIR/trial.sh --config cfg.yaml" /usr/bin/env
	assert_line_in "autobatch: cached decision" "$stderr"
	[ "$(grep -c '^XLA_CLIENT_MEM_FRACTION=0.7$' <<<"$output")" -eq 2 ]
	[ "$(grep -c '^XLA_PYTHON_CLIENT_PREALLOCATE=false$' <<<"$output")" -eq 2 ]
	[ "$(grep -c '^SINGULARITYENV_XLA_PYTHON_CLIENT_PREALLOCATE=false$' <<<"$output")" -eq 2 ]
	# the user's cap (one name) is the tasks' and the trials', the other name left unset; the
	# tasks still take no pool at start, as the trials did (one preallocated at a cap above
	# the limit would read over it in the closed loop's watch)
	rm -f xla.* cfg.yaml.autobatch~
	use_toy_config
	XLA_PYTHON_CLIENT_MEM_FRACTION=0.5 run --separate-stderr srun_t -N1 -n2 --gpus=2 --autobatch=0.7 \
		--autobatch-config=cfg.yaml --autobatch-trial-command="$BATS_TEST_TMPDIR/trial.sh --config cfg.yaml" \
		--autobatch-refresh /usr/bin/env
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	[ "$(grep -c '^XLA_PYTHON_CLIENT_MEM_FRACTION=0.5$' <<<"$output")" -eq 2 ]
	refute grep -q '^XLA_CLIENT_MEM_FRACTION=' <<<"$output"
	[ "$(grep -c '^XLA_PYTHON_CLIENT_PREALLOCATE=false$' <<<"$output")" -eq 2 ]
	[ "$(cat xla.* | grep -c '^XLA_PYTHON_CLIENT_MEM_FRACTION=0.5$')" -eq "$(ls xla.* | wc -l)" ]
	refute grep -q '^XLA_CLIENT_MEM_FRACTION=' xla.*
	# a preallocation of the user's own is theirs, with their cap
	XLA_PYTHON_CLIENT_MEM_FRACTION=0.5 XLA_PYTHON_CLIENT_PREALLOCATE=true run --separate-stderr \
		srun_t -N1 -n2 --gpus=2 --autobatch=0.7 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="$BATS_TEST_TMPDIR/trial.sh --config cfg.yaml" /usr/bin/env
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	[ "$(grep -c '^XLA_PYTHON_CLIENT_PREALLOCATE=true$' <<<"$output")" -eq 2 ]
	[ "$(grep -c '^XLA_PYTHON_CLIENT_MEM_FRACTION=0.5$' <<<"$output")" -eq 2 ]
	# a step without --autobatch gets none of it
	run --separate-stderr srun_t -N1 -n1 /usr/bin/env
	refute grep -q 'XLA_' <<<"$output"
}

@test "a user cannot raise the enforced cap through the environment" {
	set_plugstack 'enforce=on max_fraction=0.5'
	SLURM_AUTOBATCH_FRACTION=1 AUTOBATCH_MEM_FRACTION=1 run --separate-stderr srun_t -N1 -n1 \
		--autobatch=0.5 --autobatch-config=cfg.yaml toy_train --config cfg.yaml
	run --separate-stderr srun_t -N1 -n1 --autobatch=0.5 \
		--autobatch-trial-command="toy_train --config cfg.yaml" printenv AUTOBATCH_MEM_FRACTION
	[ "$output" = "0.5" ]
	# nor through a container runtime's copy, which Apptainer prefers to the name itself
	APPTAINERENV_XLA_PYTHON_CLIENT_MEM_FRACTION=1 SINGULARITYENV_AUTOBATCH_MEM_FRACTION=1 \
		run --separate-stderr srun_t -N1 -n1 --autobatch=0.5 \
		--autobatch-trial-command="toy_train --config cfg.yaml" \
		printenv APPTAINERENV_XLA_PYTHON_CLIENT_MEM_FRACTION SINGULARITYENV_AUTOBATCH_MEM_FRACTION
	[ "$output" = $'0.5\n0.5' ]
}

@test "enforce=on leaves a step of --autobatch=off alone: no cap of 0 in a job that asked for autobatch" {
	set_plugstack 'enforce=on device_memory=256MiB'
	run --separate-stderr timeout 120 salloc -N1 --gpus=1 --autobatch=0.7 srun --autobatch=off env
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	grep -q '^PATH=' <<<"$output" # the step ran
	refute grep -q 'MEM_FRACTION\|XLA_\|CUDA_MPS_PINNED' <<<"$output"
	# the job's other steps still get the cap
	run --separate-stderr timeout 120 salloc -N1 --gpus=1 --autobatch=0.7 \
		srun --autobatch-trial-command="toy_train --config cfg.yaml" printenv AUTOBATCH_MEM_FRACTION
	[ "$output" = "0.7" ]
}

@test "enforce=on under MPS pins each visible GPU's memory to the fraction of the site's device_memory" {
	set_plugstack 'enforce=on device_memory=256MiB'
	CUDA_MPS_PIPE_DIRECTORY=/tmp/mps run --separate-stderr srun_t -N1 -n1 --gpus=2 \
		--autobatch=0.7 --autobatch-trial-command="toy_train --config cfg.yaml" \
		--autobatch-config=cfg.yaml printenv CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
	[ "$status" -eq 0 ]
	[ "$output" = "0=179M,1=179M" ] # 0.7 x 256 MiB
	# MPS has a default pipe directory: the cap does not depend on the variable
	run --separate-stderr srun_t -N1 -n1 --gpus=1 --autobatch=0.7 \
		--autobatch-trial-command="toy_train --config cfg.yaml" --autobatch-config=cfg.yaml \
		printenv CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
	[ "$status" -eq 0 ]
	[ "$output" = "0=179M" ]
}

@test "the MPS cap never comes from the job: a user's device size is ignored, and without device_memory there is no cap" {
	set_plugstack 'enforce=on max_fraction=0.5 device_memory=256MiB'
	SLURM_AUTOBATCH_DEVICE_BYTES=99999999999999999999 AUTOBATCH_DEVICE_BYTES=99999999999999999999 \
		CUDA_MPS_PIPE_DIRECTORY=/tmp/mps run --separate-stderr srun_t -N1 -n1 --gpus=1 \
		--autobatch=0.5 --autobatch-trial-command=false printenv CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
	[ "$status" -eq 0 ]
	[ "$output" = "0=128M" ] # 0.5 x the site's 256 MiB, whatever the job said
	set_plugstack 'enforce=on max_fraction=0.5'
	SLURM_AUTOBATCH_DEVICE_BYTES=99999999999999999999 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps \
		run --separate-stderr srun_t -N1 -n1 --gpus=1 --autobatch=0.5 \
		--autobatch-trial-command=false printenv CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
	[ "$status" -ne 0 ] # not set
	[ -z "$output" ]
	grep -q 'enforce=on exports no MPS memory cap: plugstack.conf sets no device_memory=' \
		"$AUTOBATCH_TESTBED/log/slurmd.log"
}

@test "what is planted at the report's name is left alone: a FIFO does not hang srun, a hard link is not written through" {
	mkdir tmp
	echo "precious" >precious
	run --separate-stderr timeout 120 salloc -N1 -n1 --gpus=1 bash -c '
		for s in 0 1 2 3; do mkfifo "autobatch-$SLURM_JOB_ID.$s.json"; done
		TMPDIR=$PWD/tmp srun --autobatch=0.8 --autobatch-config=cfg.yaml \
			--autobatch-trial-command="toy_train --config cfg.yaml" printenv AUTOBATCH_REPORT
		echo "first=$?"
		for s in 0 1 2 3; do [ -p "autobatch-$SLURM_JOB_ID.$s.json" ] || echo "fifo $s is gone"; done
		for s in 0 1 2 3; do rm "autobatch-$SLURM_JOB_ID.$s.json"; ln precious "autobatch-$SLURM_JOB_ID.$s.json"; done
		srun --autobatch=0.8 --autobatch-config=cfg.yaml --autobatch-refresh \
			--autobatch-trial-command="toy_train --config cfg.yaml" printenv AUTOBATCH_REPORT
		echo "second=$?"'
	[ "$status" -eq 0 ]
	assert_line_in "first=0" "$output"
	assert_line_in "second=0" "$output"
	# the first report went to $TMPDIR, past the FIFOs; the second replaced the link's name
	grep -q "^$PWD/tmp/autobatch-[0-9]*\.[0-9]*\.json\$" <<<"$output"
	[ "$(cat precious)" = "precious" ]
	grep -q '"status":"ok"' tmp/autobatch-*.json
	[ "$(grep -c "is gone" <<<"$output")" -eq 0 ]
}

@test "the start-up allowance and the step hook: plugstack defaults, the user's override, passed to the probe" {
	set_plugstack 'startup_seconds=2 max_trial_seconds=7 trial_cap=9 instrument=off'
	run srun_t -v --autobatch=0.8 true
	assert_line_in "autobatch: startup_seconds=2s max_trial_seconds=7s trial_cap=9 instrument=off" "$output"
	run srun_t -v --autobatch=0.8 --autobatch-instrument=on true
	assert_line_in "autobatch: startup_seconds=2s max_trial_seconds=7s trial_cap=9 instrument=on" "$output"
	run srun_t --autobatch=0.8 --autobatch-instrument=maybe true
	[ "$status" -ne 0 ]
	assert_line_in "--autobatch-instrument=maybe is invalid: use off or on" "$output"
	# a trial that shows no step within the site's allowance is an error, never a fit
	run --separate-stderr srun_t --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command="sleep 30" toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	assert_line_in "was still starting after 2 s: no training step was seen; raise --startup-seconds (under srun, the probe's --startup-seconds is the site's startup_seconds= in plugstack.conf: ask your admin)" "$stderr"
	assert_line_in "launching with the original settings (on_failure=continue)" "$stderr"
	[ "$(config_batch)" = 8 ]
	# with the hook off, a program that reports no step is told so
	run --separate-stderr srun_t --autobatch=0.8 --autobatch-trial-command="true" true
	assert_line_in "without a training step being seen, so it cannot count as fitting: with --instrument off" "$stderr"
}
