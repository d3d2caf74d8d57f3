#!/usr/bin/env bats
# Containers (issue 42): a real pyxis and enroot, built from their unmodified sources
# (contrib/testbed/pyxis), in the testbed's plugstack before autobatch, and a squashfs image of
# Debian 12 with python3 and PyTorch (`testbed image`). Needs `testbed up --pyxis`; on any
# other testbed each test says it is skipped. Until trials run in the user's container, a step
# in one gets one precise line and runs with its own settings.

load helpers

setup_file() {
	require_testbed
	reset_plugstack
}

setup() {
	grep -q spank_pyxis "$AUTOBATCH_TESTBED/etc/plugstack.conf" ||
		skip "no pyxis in this testbed (contrib/testbed/testbed up --pyxis)"
	IMG=$("$TESTBED" image)
	use_python_program plain_torch.py '{"batch_size": 4, "steps": 4}'
	# what the user mounts: the job's directory, as on a cluster's shared file system
	MOUNT="--container-mounts=$BATS_TEST_TMPDIR:$BATS_TEST_TMPDIR --container-workdir=$BATS_TEST_TMPDIR"
}

teardown() { reset_plugstack; }

# no container of the job is left in enroot's list
no_container_left() {
	run enroot list
	[ "$status" -eq 0 ]
	[ -z "$output" ] || { echo "left: $output" >&2; return 1; }
}

@test "pyxis and enroot on the testbed: srun --container-image runs a real PyTorch program in the image, on two tasks" {
	run --separate-stderr timeout 300 srun -n2 --container-image="$IMG" $MOUNT \
		python3 -c 'import torch; print("torch", torch.__version__, "in Debian", open("/etc/debian_version").read().strip())'
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	[ "$(grep -c '^torch .* in Debian 12' <<<"$output")" -eq 2 ]
	no_container_left
}

@test "--autobatch in a container: one line says trials cannot run in it yet, the config is unchanged, both tasks run with it" {
	run --separate-stderr timeout 300 srun -n2 --container-image="$IMG" $MOUNT --autobatch=0.8 \
		--autobatch-config=cfg.json --autobatch-key=batch_size python3 plain_torch.py cfg.json
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	PLAIN=$output
	assert_line_in "autobatch: the step runs in a container (pyxis: $IMG), and autobatch cannot run its trials in one yet: give the batch yourself, or size it with the same program outside a container; launching with the original settings (on_failure=continue)" "$stderr"
	# before: the probe step started in the image, and the user read "check probe= in plugstack.conf"
	run grep -c 'check probe=' <<<"$stderr"
	[ "$output" = 0 ]
	[ "$(grep -c '^trained 4 updates at batch 4$' <<<"$PLAIN")" -eq 2 ]
	cmp cfg.json orig.json
	no_container_left
}
