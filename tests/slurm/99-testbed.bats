#!/usr/bin/env bats
# The testbed script itself: up restarts with new arguments; down leaves nothing behind.
# Runs last: it restarts the testbed and leaves it up with the default arguments, and
# $AUTOBATCH_TESTBED_UP_ARGS (--installed in a release's root, where the tree was not built:
# the installed package's plugin and probe).

load helpers

# testbed up with the caller's own arguments and ARGS
testbed_up() {
	# shellcheck disable=SC2086
	"$TESTBED" up ${AUTOBATCH_TESTBED_UP_ARGS:-} "$@"
}

setup_file() { require_testbed; }

# no_cores: no daemon of the testbed dumped core (a crash in our tests is a finding)
no_cores() {
	local c cores=""
	for c in "$AUTOBATCH_TESTBED"/run/core* "$AUTOBATCH_TESTBED"/cores/*; do
		if [ -e "$c" ]; then cores="$cores $c"; fi
	done
	[ -z "$cores" ] || { echo "daemons dumped core:$cores" >&2; return 1; }
}

@test "no daemon crashed during the suite: no memory image, no segfault in the logs" {
	no_cores
	refute grep -E "Segmentation fault|SIGSEGV|fatal:" "$AUTOBATCH_TESTBED"/log/slurmd.log \
		"$AUTOBATCH_TESTBED"/log/slurmctld.log
}

@test "testbed up twice restarts cleanly with the new plugstack arguments" {
	run testbed_up --plugstack-args "max_fraction=0.6"
	[ "$status" -eq 0 ]
	assert_line_in "export SLURM_CONF=$SLURM_CONF" "$output"
	ctld1=$(cat "$AUTOBATCH_TESTBED/run/slurmctld.pid")
	run --separate-stderr srun_t --autobatch=0.9 printenv AUTOBATCH_FRACTION
	[ "$(tail -n1 <<<"$output")" = "0.6" ]
	run testbed_up --plugstack-args "max_fraction=0.7"
	[ "$status" -eq 0 ]
	ctld2=$(cat "$AUTOBATCH_TESTBED/run/slurmctld.pid")
	[ "$ctld1" != "$ctld2" ]
	refute kill -0 "$ctld1" 2>/dev/null
	run --separate-stderr srun_t --autobatch=0.9 printenv AUTOBATCH_FRACTION
	[ "$(tail -n1 <<<"$output")" = "0.7" ]
}

@test "testbed env prints the same export lines as up" {
	run "$TESTBED" env
	[ "$status" -eq 0 ]
	assert_line_in "export SLURM_CONF=$SLURM_CONF" "$output"
	assert_line_in "export PATH=" "$output"
}

@test "testbed down stops every daemon and step it started" {
	srun_t sleep 300 &
	# a step to stop: under load a fixed delay could come before it runs, and down had
	# nothing of it to stop
	wait_for_step 'sleep$'
	pids="$(cat "$AUTOBATCH_TESTBED"/run/*.pid "$AUTOBATCH_TESTBED/munge/munged.pid")"
	run "$TESTBED" down
	[ "$status" -eq 0 ]
	for pid in $pids; do refute kill -0 "$pid" 2>/dev/null; done
	no_cores # shutting down unloads the plugin: no crash there either
	if pgrep_here -f "slurmstepd" >/dev/null; then
		ps -o pid,ppid,stat,etime,args -p "$(pgrep_here -d, -f slurmstepd)" >&2
		return 1
	fi
	refute pgrep_here -f "munged.*$AUTOBATCH_TESTBED" >/dev/null
	wait || true # the srun that testbed down ended: its status is not the test's
	run testbed_up
	[ "$status" -eq 0 ]
	run srun_t true
	[ "$status" -eq 0 ]
}
