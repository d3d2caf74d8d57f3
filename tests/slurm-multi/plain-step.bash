# tests/slurm-multi/plain-step.bash - a plain run of an unmodified program as a Slurm step of
# the testbed, each task measured as a host trial measures it (autobatch-probe task): what
# 03-shapes.bats and bench/shapes check a choice against. Needs AUTOBATCH_TESTBED.

# step_peaks N SRUN-ARGS... -- COMMAND...: each task's peak as "RANK PEAK" lines (a launcher's
# task: its largest worker's, where the step hook tells them apart), or nothing when one of
# the N failed
step_peaks() {
	local n=$1 args=()
	shift
	while [ "$1" != -- ]; do args+=("$1"); shift; done
	shift
	timeout 300 srun "${args[@]}" --label "$AUTOBATCH_TESTBED/bin/autobatch-probe" task -- "$@" \
		2>/dev/null | awk -v n="$n" '/@autobatch-task peak/ { sub(":", "", $1); if ($4 > p[$1]) p[$1] = $4 }
		/@autobatch-task end status 0$/ { ok++ } END { if (ok == n) for (r in p) print r, p[r] }'
}

# step_peak N SRUN-ARGS... -- COMMAND...: the largest of those peaks, or nothing
step_peak() {
	step_peaks "$@" | awk '$2 > m { m = $2 } END { if (NR) print m }'
}
