#!/usr/bin/env bats
# Admin bounds from plugstack.conf: max_fraction, min_fraction, force_fraction, over_max.

load helpers

setup_file() { require_testbed; }
teardown() { reset_plugstack; }

@test "max_fraction=0.9 clamps --autobatch=0.95 by default, and says so" {
	set_plugstack "max_fraction=0.9"
	run --separate-stderr srun_t -n2 --autobatch=0.95 printenv AUTOBATCH_FRACTION
	[ "$status" -eq 0 ]
	assert_line_in "autobatch: --autobatch=0.95 is above the site maximum 0.9: using 0.9" "$stderr"
	[ "$(grep -cx 0.9 <<<"$output")" -eq 2 ]
}

@test "max_fraction=0.9 over_max=deny refuses --autobatch=0.95 and runs nothing" {
	set_plugstack "max_fraction=0.9 over_max=deny"
	run srun_t --autobatch=0.95 touch "$BATS_TEST_TMPDIR/ran"
	[ "$status" -ne 0 ]
	assert_line_in "autobatch: --autobatch=0.95 is above the site maximum 0.9 (max_fraction in plugstack.conf): ask for at most 0.9" "$output"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	run --separate-stderr srun_t --autobatch=0.9 printenv AUTOBATCH_FRACTION
	[ "$status" -eq 0 ]
	[ "$output" = "0.9" ]
}

@test "the deny also holds for AUTOBATCH= and for an sbatch option" {
	set_plugstack "max_fraction=0.9 over_max=deny"
	AUTOBATCH=0.95 run srun_t true
	[ "$status" -ne 0 ]
	assert_line_in "autobatch: AUTOBATCH=0.95 is above the site maximum 0.9" "$output"
	run timeout 30 sbatch --autobatch=0.95 --wrap true
	[ "$status" -ne 0 ]
	assert_line_in "autobatch: --autobatch=0.95 is above the site maximum 0.9" "$output"
}

@test "min_fraction raises a low request" {
	set_plugstack "min_fraction=0.5"
	run --separate-stderr srun_t --autobatch=0.2 printenv AUTOBATCH_FRACTION
	[ "$status" -eq 0 ]
	assert_line_in "autobatch: --autobatch=0.2 is below the site minimum 0.5: using 0.5" "$stderr"
	[ "$output" = "0.5" ]
}

@test "force_fraction overrides what the user asks for" {
	set_plugstack "force_fraction=0.7"
	run --separate-stderr srun_t --autobatch=0.95 printenv AUTOBATCH_FRACTION
	[ "$status" -eq 0 ]
	assert_line_in "autobatch: the site forces fraction 0.7: --autobatch=0.95 is ignored" "$stderr"
	[ "$output" = "0.7" ]
}

@test "default_fraction sets what a bare --autobatch means" {
	set_plugstack "default_fraction=0.65"
	run --separate-stderr srun_t --autobatch printenv AUTOBATCH_FRACTION
	[ "$status" -eq 0 ]
	[ "$output" = "0.65" ]
}

@test "a misconfigured optional plugin leaves plain srun alone but refuses --autobatch" {
	set_plugstack "max_fraction=1.5 colour=blue"
	run srun_t echo hello
	[ "$status" -eq 0 ]
	assert_line_in "hello" "$output"
	assert_line_in "autobatch: plugstack argument max_fraction: fraction '1.5'" "$output"
	run srun_t --autobatch=0.8 touch "$BATS_TEST_TMPDIR/ran"
	[ "$status" -ne 0 ]
	assert_line_in "autobatch: --autobatch cannot be used: the plugin is misconfigured" "$output"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}

@test "unknown plugstack keys are named, with the valid ones" {
	set_plugstack "colour=blue"
	run srun_t true
	assert_line_in "autobatch: unknown plugstack argument 'colour=blue': expected key=value with a key among default_fraction, min_fraction, max_fraction" "$output"
}

@test "a misconfigured required plugin stops every srun" {
	set_plugstack "over_max=maybe" required
	run srun_t touch "$BATS_TEST_TMPDIR/ran"
	[ "$status" -ne 0 ]
	assert_line_in "autobatch: plugstack argument over_max=maybe is invalid: use over_max=clamp or over_max=deny (fix plugstack.conf)" "$output"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}

@test "quoted probe_args survive Slurm's splitting on blanks" {
	set_plugstack 'probe_args="--device host:capacity=2GiB --trial-seconds 5" enforce=on'
	run srun_t -v --autobatch true
	[ "$status" -eq 0 ]
	assert_line_in "probe_args=--device host:capacity=2GiB --trial-seconds 5" "$output"
	assert_line_in "enforce=on" "$output"
}

@test "an option given twice: each value is checked, the last wins" {
	set_plugstack "max_fraction=0.9 over_max=deny"
	run srun_t --autobatch=0.5 --autobatch=0.95 true
	[ "$status" -ne 0 ]
	assert_line_in "autobatch: --autobatch=0.95 is above the site maximum 0.9" "$output"
	run srun_t --autobatch=0.95 --autobatch=0.6 true
	[ "$status" -ne 0 ]
	assert_line_in "autobatch: --autobatch=0.95 is above the site maximum 0.9" "$output"
	run --separate-stderr srun_t --autobatch=0.5 --autobatch=0.6 printenv AUTOBATCH_FRACTION
	[ "$status" -eq 0 ]
	[ "$output" = "0.6" ]
}

@test "a crafted SLURM_SPANK_ option variable passes the same checks as the option" {
	set_plugstack "max_fraction=0.9 over_max=deny enforce=on"
	# what sbatch hands a job's srun: the option in the environment
	SLURM_SPANK__SLURM_SPANK_OPTION_autobatch_autobatch=0.99 run srun_t true
	[ "$status" -ne 0 ]
	assert_line_in "is above the site maximum 0.9" "$output"
	# a crafted one cannot raise the cap a task is given either
	SLURM_SPANK__SLURM_SPANK_OPTION_autobatch_autobatch=0.5 \
		SLURM_SPANK_AUTOBATCH_FRACTION=1 run --separate-stderr srun_t --autobatch=0.5 \
		printenv AUTOBATCH_MEM_FRACTION
	[ "$output" = "0.5" ]
}
