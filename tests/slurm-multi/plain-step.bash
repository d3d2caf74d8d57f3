# tests/slurm-multi/plain-step.bash - a plain run of an unmodified program as a Slurm step of
# the testbed, each task measured as a host trial measures it (autobatch-probe task): what
# 03-shapes.bats and bench/shapes check a choice against. Needs AUTOBATCH_TESTBED.

# step_peak N SRUN-ARGS... -- COMMAND...: the largest peak of the step's N tasks (of a
# launcher's workers, where the step hook tells them apart), or nothing when one of the N
# failed
step_peak() {
	local n=$1 args=()
	shift
	while [ "$1" != -- ]; do args+=("$1"); shift; done
	shift
	timeout 300 srun "${args[@]}" --label "$AUTOBATCH_TESTBED/bin/autobatch-probe" task -- "$@" \
		2>/dev/null | awk -v n="$n" '/@autobatch-task peak/ { if ($4 > m) m = $4 }
		/@autobatch-task end status 0$/ { ok++ } END { if (ok == n) print m }'
}
