#!/bin/sh
# probe-run.t - `autobatch-probe run` end to end: sim, exec mode on sim:total and host with
# real programs, the JSON report, the plot, the eval phase, refusals and exit codes (TAP).
probe=${AUTOBATCH_PROBE:-probe/autobatch-probe}
prog=${TRIALPROG:-tests/helpers/trialprog}
dir=$(mktemp -d /tmp/autobatch-probe-run.XXXXXX)
trap 'rm -rf "$dir"' EXIT
. "$(dirname "$0")/tap.sh"
# json FILE KEY: a top-level number or string of the report (the report is one line)
json() { sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\).*/\1/p" "$1" | head -n1; }

echo "1..27"

"$probe" run --device sim:total=80GiB,base=12GiB,per_sample=300MiB --fraction 0.8 \
	--json "$dir/sim.json" 2>"$dir/sim.err"
check "sim: batch 176 (64 GiB - 12 GiB over 300 MiB), status ok, exit 0" \
	sh -c "test \$(json='' ; sed -n 's/.*\"batch_size\":\([0-9]*\).*/\1/p' '$dir/sim.json') = 176 &&
	       grep -q '\"status\":\"ok\"' '$dir/sim.json'"
check "progress: one line per trial and a decision line" \
	sh -c "grep -q '^autobatch: trial 1: batch 1 fits, peak 12.3 GiB of 64.0 GiB limit (80% of 80.0 GiB)' '$dir/sim.err' &&
	       grep -q '^autobatch: chose batch 176 in [0-9]* trials' '$dir/sim.err'"
check "every trial is in the report" \
	sh -c "test \$(grep -o '\"batch\":' '$dir/sim.json' | wc -l) -eq \$(grep -c '^autobatch: trial' '$dir/sim.err')"

"$probe" run --device sim:total=80GiB,base=70GiB,per_sample=1GiB --json "$dir/none.json" 2>/dev/null
check "nothing fits: status failed, one sentence, exit 1" \
	sh -c "test $? -eq 1 && grep -q '\"status\":\"failed\",\"error\":\"even batch 1 does not fit: its peak 71.0 GiB exceeds the 64.0 GiB limit\",\"nothing_fits\":true' '$dir/none.json'"

"$probe" run --device sim:total=8GiB --fraction 0.8,0.6 --json "$dir/exec.json" -- \
	"$prog" curve 1073741824 104857600 8589934592 2>"$dir/exec.err"
check "exec on sim:total: the trial's reported peak decides (55, and 38 at 0.6)" \
	sh -c "grep -q '\"batch_size\":55' '$dir/exec.json' && grep -q '\"fraction\":0.6[0-9]*,\"limit_bytes\":[0-9]*,\"batch_size\":38' '$dir/exec.json' && grep -q '\"mode\":\"exec\"' '$dir/exec.json'"

"$probe" run --device host:capacity=400MiB --fraction 0.5 --json "$dir/host.json" -- \
	"$prog" alloc 20 8 1000 2>"$dir/host.err"
check "exec on host: resident memory decides, the peak stays under 200 MiB" \
	sh -c "grep -q '\"kind\":\"host\"' '$dir/host.json' && b=\$(sed -n 's/.*\"batch_size\":\([0-9]*\).*/\1/p' '$dir/host.json') && test \"\$b\" -ge 18 && test \"\$b\" -le 22"

# a peak its samples missed: the program reports steps and what it held (20 MiB a sample
# here, never touched), then exec's another program, whose high-water mark starts afresh (a
# wrapper script's `exec sleep`): its own report counts, not the few MiB sampled
"$probe" run --device host:capacity=400MiB --fraction 0.5 --max 64 --json "$dir/said.json" -- sh -c '
	for i in 1 2 3 4; do
		echo "{\"step_s\": 0.01, \"samples\": $AUTOBATCH_BATCH_SIZE, \"peak_bytes\": $((AUTOBATCH_BATCH_SIZE * 20971520))}" >>"$AUTOBATCH_TRIAL_REPORT"
	done
	exec sleep 0.2' 2>"$dir/said.err"
check "exec on host: the peak a program reported counts where sampling saw less (it exec'd after its steps): 10 of 64" \
	sh -c "grep -q '\"batch_size\":10,' '$dir/said.json' && grep -q '^autobatch: trial [0-9]*: batch 11 does not fit, peak 220 MiB over' '$dir/said.err'"

printf 'train:\n  micro_batch_size: 4   # mine\n' >"$dir/axo.yaml"
cp "$dir/axo.yaml" "$dir/axo.orig"
"$probe" run --device sim:total=1GiB --config "$dir/axo.yaml" --key train.micro_batch_size \
	--phase eval --json "$dir/cfg.json" -- sh -c '
	grep -q "micro_batch_size: $AUTOBATCH_BATCH_SIZE   # mine" "$1" || exit 9
	test "$AUTOBATCH_TRIAL_PHASE" = eval || exit 8
	printf "{\"step_s\": 0.2}\n{\"step_s\": 0.1}\n" >>"$AUTOBATCH_TRIAL_REPORT"
	echo "{\"peak_bytes\": $((AUTOBATCH_BATCH_SIZE * 10000000))}" >>"$AUTOBATCH_TRIAL_REPORT"' sh "$dir/axo.yaml" 2>"$dir/cfg.err"
check "exec with a config: the copy carries the batch, the phase is eval, the original is untouched" \
	sh -c "grep -q '\"status\":\"ok\"' '$dir/cfg.json' && grep -q '\"phase\":\"eval\"' '$dir/cfg.json' && cmp -s '$dir/axo.yaml' '$dir/axo.orig'"
check "the gain over the config's own batch is reported" \
	grep -q 'x the starting batch 4' "$dir/cfg.err"

# A MaxText batch ramp-up (issue 41): the program, as MaxText does, starts at the ramp's start
# while the switch is on; trials turn it off, so each measures its own batch, and the choice
# is a step of the ramp (2 + 3k), which MaxText refuses otherwise
printf 'per_device_batch_size: 4\nenable_rampup_batch_size: true\nper_device_batch_size_start: 2\nper_device_batch_size_increment: 3\n' >"$dir/mt.yaml"
ramp_prog='b=$(sed -n "s/^per_device_batch_size: //p" "$1")
	grep -q "^enable_rampup_batch_size: true" "$1" && b=$(sed -n "s/^per_device_batch_size_start: //p" "$1")
	printf "{\"step_s\": 0.2}\n{\"step_s\": 0.1}\n" >>"$AUTOBATCH_TRIAL_REPORT"
	echo "{\"peak_bytes\": $((1073741824 + b * 104857600))}" >>"$AUTOBATCH_TRIAL_REPORT"'
"$probe" run --device sim:total=8GiB --fraction 0.8 --config "$dir/mt.yaml" --json "$dir/mt.json" \
	-- sh -c "$ramp_prog" sh "$dir/mt.yaml" 2>"$dir/mt.err"
check "a MaxText ramp-up: trials ran their own batch (the switch off in their copies), the choice 53 is on the ramp 2 + 3k (55 is not), and the report and decision say so" \
	sh -c "grep -q '\"batch_size\":53,' '$dir/mt.json' &&
	       grep -q '\"ramp_up\":{\"of\":\"device\",\"start\":2,\"step\":3,\"trials_off\":\"enable_rampup_batch_size\"}' '$dir/mt.json' &&
	       grep -q 'a step of the batch ramp-up from 2 by 3 (trials ran it with enable_rampup_batch_size false)' '$dir/mt.err' &&
	       ! grep '^autobatch: trial' '$dir/mt.err' | grep -vE 'batch (5|8|11|14|17|20|23|26|29|32|35|38|41|44|47|50|53|56|59|62|65) ' &&
	       grep -q '^enable_rampup_batch_size: true' '$dir/mt.yaml'" || cat "$dir/mt.err" >&2
# the same program with the ramp off: the choice is 55, and nothing says ramp
sed -i 's/^enable_rampup_batch_size: true/enable_rampup_batch_size: false/' "$dir/mt.yaml"
"$probe" run --device sim:total=8GiB --fraction 0.8 --config "$dir/mt.yaml" --json "$dir/mt2.json" \
	-- sh -c "$ramp_prog" sh "$dir/mt.yaml" 2>"$dir/mt2.err"
check "the switch off: no ramp, the choice 55" \
	sh -c "grep -q '\"batch_size\":55,' '$dir/mt2.json' && ! grep -q ramp '$dir/mt2.json' '$dir/mt2.err'"
# the switch as YAML 1.1 (PyYAML, MaxText's pydantic bool) spells it on: a ramp all the same;
# a value that is neither, twice, or a start that is no whole number: refused, naming the key
ramp_said() { # SWITCH-LINE [BATCH [OPTION...]]: decided BATCH (53) on the ramp
	printf 'per_device_batch_size: 4\n%s\nper_device_batch_size_start: 2\nper_device_batch_size_increment: 3\n' "$1" >"$dir/sw.yaml"
	b=${2:-53}
	shift $(($# > 1 ? 2 : 1))
	"$probe" run --device sim:total=8GiB --fraction 0.8 --config "$dir/sw.yaml" --json "$dir/sw.json" "$@" \
		-- sh -c "$ramp_prog" sh "$dir/sw.yaml" 2>"$dir/sw.err" && grep -q "\"batch_size\":$b," "$dir/sw.json"
}
ramp_refused() { # YAML MESSAGE
	printf "$1" >"$dir/rf.yaml"
	! "$probe" run --device sim:total=8GiB --fraction 0.8 --config "$dir/rf.yaml" -- true 2>"$dir/rf.err" &&
		grep -qF "autobatch: failed: $dir/rf.yaml$2" "$dir/rf.err" || { cat "$dir/rf.err" >&2; return 1; }
}
ramps_read() {
	for on in yes ON True y 1; do ramp_said "enable_rampup_batch_size: $on" || { echo "# $on" >&2; return 1; }; done
	# with --multiple-of 4: the ramp's steps that are multiples of 4 (8, 20, 32, 44: 56 is over)
	ramp_said "enable_rampup_batch_size: true" 44 --multiple-of 4 || return 1
	! grep '^autobatch: trial' "$dir/sw.err" | grep -vE 'batch (8|20|32|44|56) ' || return 1
	ramp_refused 'per_device_batch_size: 4\nenable_rampup_batch_size: maybe\n' \
		": enable_rampup_batch_size is 'maybe', not true or false: fix it in the config" &&
		ramp_refused 'per_device_batch_size: 4\nenable_rampup_batch_size: true\nenable_rampup_batch_size: false\n' \
			": key 'enable_rampup_batch_size' occurs twice (lines 2 and 3)" &&
		ramp_refused 'per_device_batch_size: 4\nenable_rampup_batch_size: on\nper_device_batch_size_start: 0.5\nper_device_batch_size_increment: 3\n' \
			": a batch ramp-up is on, but per_device_batch_size_start is '0.5', not a whole number from 1" &&
		ramp_refused 'per_device_batch_size: 4\nenable_rampup_batch_size: on\nper_device_batch_size_increment: 3\n' \
			": a batch ramp-up is on, but it has no per_device_batch_size_start: add it, or turn the ramp-up off"
}
check "the ramp's switch as YAML spells it on (yes, ON, True, y, 1) is on, with --multiple-of 4 too (44); one that is neither, a switch twice, a start of 0.5 or none: refused, naming the key" \
	ramps_read
# a NeMo global ramp [256, 128, ...] to 1024 over 4 devices: the batch divides gcd / 4 = 32
printf 'model:\n  micro_batch_size: 4\n  global_batch_size: 1024\n  rampup_batch_size: [256, 128, 100000]\n' >"$dir/nemo.yaml"
"$probe" run --device sim:total=8GiB --fraction 0.8 --config "$dir/nemo.yaml" \
	--global-batch 1024 --devices 4 --json "$dir/nemo.json" -- "$prog" curve 1073741824 104857600 8589934592 2>"$dir/nemo.err"
check "a NeMo global ramp-up 256 by 128 to 1024 over 4 devices: the choice 32 divides every stage's share (55 would fit)" \
	sh -c "grep -q '\"batch_size\":32,' '$dir/nemo.json' && grep -q '\"grad_accum\":8,' '$dir/nemo.json' &&
	       grep -q 'every stage of the global batch ramp-up from 256 by 128 splits into batches of 32 over 4 devices' '$dir/nemo.err'" || cat "$dir/nemo.err" >&2
# ramps Megatron refuses at start are refused before any trial, naming the list; null is none
nemo_ramp() { # LIST: the probe's last line
	printf 'model:\n  micro_batch_size: 4\n  global_batch_size: 1024\n  rampup_batch_size: %s\n' "$1" >"$dir/nr.yaml"
	"$probe" run --device sim:total=8GiB --fraction 0.8 --config "$dir/nr.yaml" --global-batch 1024 \
		--devices 4 -- "$prog" curve 1073741824 104857600 8589934592 2>&1 | tail -n1
}
nemo_ramps() {
	[ "$(nemo_ramp '[256, 100, 1000]')" = "autobatch: failed: $dir/nr.yaml: the batch ramp-up from 256 by 100 (model.rampup_batch_size) never reaches the global batch 1024, and Megatron refuses it: make 1024 less its start a multiple of 100" ] &&
		[ "$(nemo_ramp '[2048, 128, 1000]')" = "autobatch: failed: $dir/nr.yaml: the batch ramp-up (model.rampup_batch_size) starts at 2048, above the global batch 1024, and Megatron refuses it: start it below 1024, by a multiple of its increment 128" ] &&
		for bad in '[256, 128]' '[]' '[256, 128, 1000, 5]' '{start: 256}'; do
			[ "$(nemo_ramp "$bad")" = "autobatch: failed: $dir/nr.yaml: model.rampup_batch_size is not a list of three whole numbers [start, increment, samples], as Megatron needs" ] || return 1
		done &&
		[ "$(nemo_ramp '"256 128 1000"')" = "autobatch: failed: $dir/nr.yaml: model.rampup_batch_size is '256 128 1000', not a list [start, increment, samples] or null" ] &&
		nemo_ramp null | grep -q '^autobatch: chose batch 32 (gradient accumulation 8, global 1024) in [0-9]* trials, [0-9]* s; 8.0x the starting batch 4; confidence'
}
check "NeMo ramps Megatron refuses (not reaching the global batch, starting above it, not three whole numbers, a string) are refused naming the list; null is no ramp" \
	nemo_ramps

# PyTorch's allocator freed its cache and retried once (from batch 40 on, well under the limit):
# such a trial is an out-of-memory one (issue 41), and the line says why
"$probe" run --device sim:total=8GiB --fraction 0.8 --json "$dir/retry.json" -- sh -c '
	b=$AUTOBATCH_BATCH_SIZE r=
	[ "$b" -ge 40 ] && r=", \"alloc_retries\": 1"
	printf "{\"step_s\": 0.2}\n{\"step_s\": 0.1$r}\n" >>"$AUTOBATCH_TRIAL_REPORT"
	echo "{\"peak_bytes\": $((1073741824 + b * 10485760))}" >>"$AUTOBATCH_TRIAL_REPORT"' 2>"$dir/retry.err"
check "allocator retries are an out-of-memory trial: the choice 39 is below them, the line and report say so" \
	sh -c "grep -q '\"batch_size\":39,' '$dir/retry.json' && grep -q '\"alloc_retries\":1' '$dir/retry.json' &&
	       grep -q 'does not fit: PyTorch.s allocator ran out and freed its cache to retry 1 time[^s]' '$dir/retry.err'" || cat "$dir/retry.err" >&2

"$probe" run --device host --trial-seconds 5 --json "$dir/crash.json" -- "$prog" crash 2>"$dir/crash.err"
check "a crash stops the search with its output, exit 1" \
	sh -c "test $? -eq 1 && grep -q 'exited with status 3, which is not an out-of-memory error' '$dir/crash.err' && grep -q 'ValueError: mismatched shapes' '$dir/crash.err'"

"$probe" run --device host --startup-seconds 60 --json "$dir/int.json" -- "$prog" hang 2>/dev/null &
pid=$!
sleep 1
kill -INT $pid
wait $pid
check "interrupted (SIGINT) mid-trial: exit 130 and the report's status says so (the plugin's cancel)" \
	sh -c "test $? -eq 130 && grep -q '\"status\":\"interrupted\",\"error\":\"interrupted during trial 1' '$dir/int.json'"

"$probe" run --device sim:total=80GiB,base=12GiB,per_sample=300MiB --plot "$dir/p.svg" 2>/dev/null
check "--plot writes an SVG with the limit and the chosen batch" \
	sh -c "grep -q '^<svg xmlns=\"http://www.w3.org/2000/svg\"' '$dir/p.svg' && grep -q 'chosen 176' '$dir/p.svg' && grep -q 'limit 64.0 GiB' '$dir/p.svg' && tail -n1 '$dir/p.svg' | grep -qx '</svg>'"

check "cuda:0 without a GPU (or without CUDA in the build) says so and names the way out" \
	sh -c "'$probe' run --device cuda:0 -- true 2>&1 | grep -Eq 'cuda:0 is not available: this build has no CUDA.*use --device host or sim:SPEC|cuda:0: no CUDA GPU is visible.*use --device host or sim:SPEC'"
check "bad arguments are usage errors (exit 2) naming the option" \
	sh -c "'$probe' run --fraction 1.5 2>&1 | grep -q \"fraction '1.5' is more than the whole GPU memory\" &&
	       { '$probe' run --min 0 2>/dev/null; test \$? -eq 2; } &&
	       '$probe' run --device sim:total=1GiB 2>&1 | grep -q 'nothing to measure: give the command' &&
	       '$probe' run --fraction 0.1,0.2,0.3,0.4,0.5,0.6,0.7,1.5 2>&1 | grep -q \"fraction '1.5' is more than\" &&
	       '$probe' run --fraction 0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9 2>&1 | grep -q 'at most 8 fractions'"
"$probe" run --fraction 2 -- true 2>"$dir/badopt.err"
check "a bad option's message is not buried: two lines, the second pointing at --help" \
	sh -c "[ $? -eq 2 ] && [ \$(wc -l <'$dir/badopt.err') -eq 2 ] && tail -n1 '$dir/badopt.err' | grep -q \"^usage: autobatch-probe run .*'autobatch-probe run --help' lists the options\""
# a second fraction where nothing fits says so, not "batch 0"
"$probe" run --device sim:total=80GiB,base=30GiB,per_sample=1GiB --fraction 0.8,0.3 \
	--json "$dir/two.json" 2>"$dir/two.err"
check "a fraction where nothing fits is said so on the decision line, not as batch 0" \
	sh -c "grep -q '^autobatch: chose batch 33 .*; fraction 0.3: nothing fits\$' '$dir/two.err'" ||
	cat "$dir/two.err" >&2
# a MaxText ramp whose smallest batch --min set: the refusal does not blame the ramp
printf 'per_device_batch_size: 4\nenable_rampup_batch_size: true\nper_device_batch_size_start: 2\nper_device_batch_size_increment: 1\n' >"$dir/mtmin.yaml"
"$probe" run --device sim:total=8GiB --config "$dir/mtmin.yaml" --min 69 -- sh -c "$ramp_prog" sh \
	"$dir/mtmin.yaml" 2>"$dir/mtmin.err"
"$probe" run --device sim:total=8GiB --config "$dir/mtmin.yaml" -- sh -c "$ramp_prog" sh \
	"$dir/mtmin.yaml" 2>/dev/null
check "nothing fits from --min 69: the ramp is not named as why (it allows 3)" \
	sh -c "grep -q '^autobatch: failed: even batch 69 does not fit' '$dir/mtmin.err'" ||
	cat "$dir/mtmin.err" >&2
# --time-limit: a trial of 1.6 s (four steps of 0.4 s) leaves no room for a second in 2 s;
# the first batch fit and stands. A first batch that did not fit leaves nothing: an error.
slow='for i in 1 2 3 4; do sleep 0.4; echo "{\"step_s\": 0.4, \"peak_bytes\": $((AUTOBATCH_BATCH_SIZE * 1048576))}" >>"$AUTOBATCH_TRIAL_REPORT"; done'
"$probe" run --device sim:total=1GiB --start 4 --time-limit 2 --json "$dir/timed.json" -- \
	sh -c "$slow" 2>"$dir/timed.err"
check "--time-limit: no round past it; the best fit seen stands (time limit reached)" \
	sh -c "test $? -eq 0 && grep -q '\"status\":\"ok\"' '$dir/timed.json' && grep -q '\"batch_size\":4,' '$dir/timed.json' &&
	       grep -q '\"confidence_tier\":\"time limit reached\"' '$dir/timed.json' &&
	       grep -q '^autobatch: the probe.s time limit leaves [0-9]* s, and a round of trials has taken up to [0-9]* s: the best fit seen, batch 4, stands' '$dir/timed.err'"
"$probe" run --device sim:total=1GiB --start 1000 --time-limit 1 --json "$dir/late.json" -- \
	sh -c "$slow" 2>"$dir/late.err"
# (the trial ends at the limit, or is stopped there before its second step on a loaded host)
check "--time-limit before any fit: status failed, exit 1, what to do" \
	sh -c "test $? -eq 1 && grep -q 'no batch was seen to fit before the probe.s time ran out (.*after [01] trials): give the probe more time' '$dir/late.json'"

# a round started in time whose trial runs past the limit (batches over 4 hang) is stopped
# there: the best fit seen stands
"$probe" run --device sim:total=1GiB --start 4 --time-limit 3 --json "$dir/stopped.json" -- \
	sh -c '[ "$AUTOBATCH_BATCH_SIZE" -le 4 ] || exec sleep 60
	for i in 1 2 3 4; do echo "{\"step_s\": 0.01, \"peak_bytes\": $((AUTOBATCH_BATCH_SIZE * 1048576))}" >>"$AUTOBATCH_TRIAL_REPORT"; done' \
	2>"$dir/stopped.err"
check "--time-limit stops a trial still running then; the best fit seen stands" \
	sh -c "test $? -eq 0 && grep -q '\"batch_size\":4,' '$dir/stopped.json' && grep -q '\"confidence_tier\":\"time limit reached\"' '$dir/stopped.json' &&
	       grep -q '^autobatch: trial 2 (batch [0-9]*) was stopped at the probe.s time limit, after [0-9]* s, before its steps were seen: the best fit seen, batch 4, stands' '$dir/stopped.err'"

# --since: the limit counts from the step's start (a container's import before the probe):
# 6 s from 4 s ago stops the hanging trial 2 s in, not 6
"$probe" run --device sim:total=1GiB --start 4 --time-limit 6 --since $(($(date +%s) - 4)) \
	--json "$dir/since.json" -- \
	sh -c '[ "$AUTOBATCH_BATCH_SIZE" -le 4 ] || exec sleep 60
	for i in 1 2 3 4; do echo "{\"step_s\": 0.01, \"peak_bytes\": $((AUTOBATCH_BATCH_SIZE * 1048576))}" >>"$AUTOBATCH_TRIAL_REPORT"; done' \
	2>"$dir/since.err"
check "--since takes the time before the probe's start off --time-limit" \
	sh -c "test $? -eq 0 && grep -q '\"batch_size\":4,' '$dir/since.json' &&
	       e=\$(sed -n 's/.*\"elapsed_s\":\([0-9]*\).*/\1/p' '$dir/since.json') && test \"\$e\" -lt 5"
exit $failed
