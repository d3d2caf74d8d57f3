#!/usr/bin/env bats
# The options are registered in every client that takes them.

load helpers

setup_file() { require_testbed; reset_plugstack; }

@test "srun --help lists every autobatch option" {
	run srun --help
	[ "$status" -eq 0 ]
	for opt in autobatch=\[FRACTION\|off\] autobatch-config=FILE autobatch-preset=NAME \
		autobatch-key=KEY autobatch-global-batch=G autobatch-objective=memory\|throughput \
		autobatch-mode=exec\|model autobatch-eval autobatch-trial-command=CMD autobatch-refresh; do
		assert_line_in "--$opt" "$output"
	done
	assert_line_in "attach it with" "$output"
}

@test "sbatch and salloc --help list --autobatch too, so #SBATCH lines work" {
	run sbatch --help
	[ "$status" -eq 0 ]
	assert_line_in "--autobatch=[FRACTION|off]" "$output"
	run salloc --help
	[ "$status" -eq 0 ]
	assert_line_in "--autobatch=[FRACTION|off]" "$output"
}

@test "only plugin_* and slurm_spank_* symbols leave the plugin" {
	run bash -c "nm -D --defined-only '$PLUGIN' | awk '{print \$3}'"
	[ "$status" -eq 0 ]
	[ -n "$output" ]
	bad=$(grep -vE '^(plugin_|slurm_spank_)' <<<"$output" || true)
	[ -z "$bad" ] || { echo "exported: $bad" >&2; false; }
	assert_line_in slurm_spank_init "$output"
	assert_line_in plugin_name "$output"
}
