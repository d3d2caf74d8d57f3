#!/usr/bin/env bats
# Bad user input stops srun with one precise autobatch: line, and no task runs.

load helpers

setup_file() { require_testbed; reset_plugstack; }
setup() { MARK=$BATS_TEST_TMPDIR/ran; }

# Runs srun with the given options and a task that leaves a mark; expects a refusal.
refused() {
	local msg=$1
	shift
	run srun_t "$@" touch "$MARK"
	[ "$status" -ne 0 ] || { echo "srun succeeded: $output" >&2; return 1; }
	assert_line_in "autobatch: $msg" "$output"
	[ ! -e "$MARK" ] || { echo "the task ran" >&2; return 1; }
	[ "$(grep -c 'autobatch:' <<<"$output")" -eq 1 ] || { echo "more than one line: $output" >&2; return 1; }
}

@test "--autobatch=1.5 is refused" {
	refused "--autobatch: fraction '1.5' is more than the whole GPU memory: give a number greater than 0 and at most 1, such as 0.8 or 80%" --autobatch=1.5
}

@test "--autobatch=abc, -1, nan, 0 and an empty value are refused" {
	refused "invalid fraction 'abc'" --autobatch=abc
	refused "invalid fraction '-1'" --autobatch=-1
	refused "invalid fraction 'nan'" --autobatch=nan
	refused "fraction '0' must be greater than 0" --autobatch=0
	refused "--autobatch= has nothing after '='" --autobatch=
}

@test "AUTOBATCH=1.5 in the environment is refused like the option" {
	AUTOBATCH=1.5 refused "AUTOBATCH: fraction '1.5' is more than the whole GPU memory"
	AUTOBATCH= refused "AUTOBATCH is set but empty"
}

@test "the other options check their values" {
	refused "--autobatch-objective=fast is invalid: use memory or throughput" --autobatch --autobatch-objective=fast
	refused "--autobatch-mode=proxy is invalid: use exec or model" --autobatch --autobatch-mode=proxy
	refused "--autobatch-global-batch=0 is invalid" --autobatch --autobatch-global-batch=0
	refused "--autobatch-global-batch=1e3 is invalid" --autobatch --autobatch-global-batch=1e3
	refused "--autobatch-preset may use only letters" --autobatch --autobatch-preset=../x
}

@test "hostile bytes in a value are not echoed raw" {
	run srun_t --autobatch=$'\e[2J0.8' true
	[ "$status" -ne 0 ]
	assert_line_in "invalid fraction '?[2J0.8'" "$output"
	# Slurm's own "Invalid --autobatch argument" line repeats the value; ours must not.
	! grep 'autobatch: ' <<<"$output" | grep -q $'\e'
}

@test "a valid fraction in percent reaches the tasks" {
	run --separate-stderr srun_t --autobatch=75% printenv AUTOBATCH_FRACTION
	[ "$status" -eq 0 ]
	[ "$output" = "0.75" ]
}

@test "a bare --autobatch uses the site default" {
	run --separate-stderr srun_t --autobatch printenv AUTOBATCH_FRACTION
	[ "$status" -eq 0 ]
	[ "$output" = "0.8" ]
}

@test "the command line wins over AUTOBATCH" {
	AUTOBATCH=0.6 run --separate-stderr srun_t --autobatch=0.7 printenv AUTOBATCH_FRACTION
	[ "$status" -eq 0 ]
	[ "$output" = "0.7" ]
	AUTOBATCH=0.6 run --separate-stderr srun_t printenv AUTOBATCH_FRACTION
	[ "$output" = "0.6" ]
}

@test "srun -v prints the effective settings" {
	run srun_t -v --autobatch=0.7 --autobatch-objective=throughput true
	[ "$status" -eq 0 ]
	assert_line_in "autobatch: fraction=0.7 (from --autobatch=0.7; site bounds 0..1, over_max=clamp)" "$output"
	assert_line_in "autobatch: objective=throughput mode=exec" "$output"
	assert_line_in "autobatch: on_failure=continue" "$output"
	run srun_t --autobatch=0.7 true
	! grep -q "fraction=0.7" <<<"$output"
}

@test "an autobatch option without --autobatch says it has no effect" {
	run --separate-stderr srun_t --autobatch-config=exp.yaml printenv AUTOBATCH_FRACTION
	assert_line_in "autobatch: --autobatch-config has no effect without --autobatch" "$stderr"
	! grep -qx "0.8" <<<"$output"
}
