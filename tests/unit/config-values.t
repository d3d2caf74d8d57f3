#!/bin/sh
# config-values.t - a config's values as its framework reads them, end to end through
# `autobatch-probe run` on a simulated device: the run's length, the accumulation and the
# ramp-up in YAML's other spellings (10_000, 0x64, 4.0, an alias, a merge), refused with the
# key named where they are no such number, never ignored; the preset a --key leaves; a tag
# the batch written would change the meaning of (TAP).
probe=${AUTOBATCH_PROBE:-probe/autobatch-probe}
dir=$(mktemp -d /tmp/autobatch-config-values.XXXXXX)
trap 'rm -rf "$dir"' EXIT
. "$(dirname "$0")/tap.sh"

echo "1..19"

# A trial program whose held memory grows at every step: 1 MiB a sample held, and 128 KiB
# a sample more each step (an output kept), its peak a quarter above what it holds.
cat >"$dir/grow" <<'EOF'
#!/bin/sh
b=$AUTOBATCH_BATCH_SIZE s=0
while [ $s -le "${AUTOBATCH_TRIAL_STEPS:-3}" ]; do
	held=$((b * 1048576 + s * b * 131072))
	echo "{\"step_s\": 0.01, \"samples\": $b, \"peak_bytes\": $((held + b * 262144)), \"held_bytes\": $held}" >>"$AUTOBATCH_TRIAL_REPORT"
	s=$((s + 1))
done
EOF
chmod +x "$dir/grow"
# run NAME CONFIG-TEXT [OPTIONS...]: the probe on CONFIG-TEXT; NAME.err its messages
run() {
	name=$1
	printf "$2" >"$dir/$name.yaml"
	shift 2
	cp "$dir/$name.yaml" "$dir/$name.orig"
	"$probe" run --device sim:total=256MiB --config "$dir/$name.yaml" --json "$dir/$name.json" \
		"$@" -- "$dir/grow" 2>"$dir/$name.err"
}
chose() { grep -q "^autobatch: chose batch $2 .*$3" "$dir/$1.err" || { cat "$dir/$1.err" >&2; false; }; }
failed_with() { grep -qF "autobatch: failed: $dir/$2.yaml: $3" "$dir/$2.err" && [ "$1" = 1 ] &&
	cmp -s "$dir/$2.yaml" "$dir/$2.orig" || { cat "$dir/$2.err" >&2; false; }; }

# the reference: 100 steps sized for, batch 15 (16 passes the limit at the 100th step)
run ref 'per_device_train_batch_size: 8\nmax_steps: 100\n'
check "max_steps: 100 sizes the run: batch 15" chose ref 15 "sized for the run's 100 steps (max_steps)"

run under 'per_device_train_batch_size: 8\nmax_steps: 1_00\n'
check "max_steps: 1_00 (YAML 1.1's underscores, MaxText's steps: 150_001) is 100" \
	chose under 15 "sized for the run's 100 steps"
run hex 'per_device_train_batch_size: 8\nmax_steps: 0x64\n'
check "max_steps: 0x64 is 100" chose hex 15 "sized for the run's 100 steps"
run float 'per_device_train_batch_size: 8\nmax_steps: 100.0\n'
check "max_steps: 100.0 is 100" chose float 15 "sized for the run's 100 steps"
run merged 'base: &b {max_steps: 100}\n<<: *b\nper_device_train_batch_size: 8\n'
check "max_steps from a merge (<<: *b) is read through it" chose merged 15 "sized for the run's 100 steps"
run alias 'n: &n 100\nper_device_train_batch_size: 8\nmax_steps: *n\n'
check "max_steps: *n, an alias, is its anchor's 100" chose alias 15 "sized for the run's 100 steps"

run half 'per_device_train_batch_size: 8\nmax_steps: 2.5\n'
check "max_steps: 2.5 is refused, naming the key and --run-steps; the file untouched" \
	failed_with $? half "max_steps is '2.5', not a whole number of steps up to 1000000000: fix it, or give the run's length with --autobatch-run-steps=N or off (--run-steps)"
run big 'per_device_train_batch_size: 8\nmax_steps: 2147483648\n'
check "max_steps past 10^9 is refused as --run-steps is, not ignored" \
	failed_with $? big "max_steps is '2147483648', not a whole number of steps up to"
run twice 'max_steps: 100\nper_device_train_batch_size: 8\nmax_steps: 10\n'
check "max_steps twice is refused (lines 1 and 3)" \
	failed_with $? twice "key 'max_steps' occurs twice (lines 1 and 3)"
run interp 'per_device_train_batch_size: 8\nmax_steps: ${oc.env:STEPS,100}\n'
run listed 'per_device_train_batch_size: 8\nmax_steps: [1, 2]\n'
check "max_steps the program resolves (\${oc.env:...}) is said and left unsized; a list is refused naming --autobatch-run-steps" \
	sh -c "grep -qF \"max_steps is '\\\${oc.env:STEPS,100}', which the program resolves itself: autobatch does not know the run's length; give the run's length with --autobatch-run-steps=N or off (--run-steps)\" '$dir/interp.err' &&
	       grep -q '^autobatch: chose batch 126 ' '$dir/interp.err' &&
	       grep -qF \"max_steps is not a single number of steps: fix it, or give the run's length with --autobatch-run-steps=N\" '$dir/listed.err'" ||
	cat "$dir/interp.err" "$dir/listed.err" >&2
run epochs 'per_device_train_batch_size: 8\nmax_steps: -1\n' --run-steps 100
check "max_steps: -1 (epochs) is no length; --run-steps 100 gives it" \
	chose epochs 15 "sized for the run's 100 steps (as asked)"

# accumulation: the preset's key read as the framework reads it, never dropped
run acc 'per_device_train_batch_size: 8\ngradient_accumulation_steps: 0x4\nmax_steps: 4\n'
run acc_half 'per_device_train_batch_size: 8\ngradient_accumulation_steps: 2.5\nmax_steps: 4\n'
check "gradient_accumulation_steps: 0x4 is 4 (trials at 1 of 4, the run's 16 micro-batches: 65; the report's accumulation 4, global 260); 2.5 is refused" \
	sh -c "grep -q 'accumulation in trials: 1 of 4 (gradient_accumulation_steps)' '$dir/acc.err' &&
	       grep -q '^autobatch: chose batch 65 ' '$dir/acc.err' &&
	       grep -q '\"batch_size\":65,\"grad_accum\":4,\"global_batch\":260,' '$dir/acc.json' &&
	       grep -qF \"gradient_accumulation_steps is '2.5', not a whole number of micro-batches from 1\" '$dir/acc_half.err'" ||
	cat "$dir/acc.err" "$dir/acc_half.err" >&2
# DeepSpeed's own check, as its _batch_assertion makes it at start (world 1 here): a config
# stating train_batch_size beside the micro-batch and the accumulation must agree with
# them; null, DeepSpeed derives it. Each trial's copy is checked so before it trains.
cat >"$dir/dscheck" <<'EOF2'
#!/bin/sh
python3 - "$AUTOBATCH_CONFIG" <<'PY' || exit 3
import json, sys
c = json.load(open(sys.argv[1]))
g, m, a = c.get("train_batch_size"), c["train_micro_batch_size_per_gpu"], c["gradient_accumulation_steps"]
if g is not None and g != m * a:
    sys.exit(f"AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size {g} != {m} * {a} * 1")
PY
exec "$(dirname "$0")/grow"
EOF2
chmod +x "$dir/dscheck"
printf '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4}\n' >"$dir/ds.json"
cp "$dir/ds.json" "$dir/ds.orig"
"$probe" run --device sim:total=256MiB --config "$dir/ds.json" --json "$dir/ds.report" \
	--keep-trials -- "$dir/dscheck" 2>"$dir/ds.err"
kept=$(sed -n "s/.*the trials' files are kept in \(.*\) (remove it when done)\$/\1/p" "$dir/ds.err")
ds_ok() {
	grep -q '^autobatch: global batch in trials: train_batch_size null, derived by the framework' "$dir/ds.err" &&
		grep -q '^autobatch: chose batch [1-9][0-9]* ' "$dir/ds.err" &&
		! grep -q 'AssertionError' "$dir/ds.err" &&
		copy=$(ls "${kept:-/nonexistent}"/trial-1-batch-*/ds.json 2>/dev/null | head -n1) &&
		python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); sys.exit(not (c["train_batch_size"] is None and c["gradient_accumulation_steps"] == 1))' "$copy" &&
		cmp -s "$dir/ds.json" "$dir/ds.orig"
}
check "DeepSpeed's train_batch_size beside its accumulation: null in each trial's copy, which DeepSpeed derives (it refused every trial with 64 there)" \
	ds_ok || cat "$dir/ds.err" >&2
[ -n "$kept" ] && rm -rf "$kept"

# a Lightning config accumulating 4: the run passes the limit 4 times sooner in its steps
run lit 'data:\n  batch_size: 8\ntrainer:\n  accumulate_grad_batches: 4\n'
check "the steps to the limit count the run's steps of 4 micro-batches: about 1, not 4" \
	chose lit 126 "the run passes the limit after about 1 step (does"

# ramp-ups in their frameworks' own spellings: MaxText declares its ramp's fields floats
# (4.0, 2.0); a Megatron ramp that starts at the global batch has that one stage alone
run mt 'per_device_batch_size: 8\nmetrics_file: ""\nenable_rampup_batch_size: true\nper_device_batch_size_start: 4.0\nper_device_batch_size_increment: 2.0\n' --max 60
check "MaxText's ramp from 4.0 by 2.0 is read as 4 by 2: the choice 60 is one of its steps" \
	chose mt 60 "a step of the batch ramp-up from 4 by 2"
run nemo 'model:\n  micro_batch_size: 8\n  global_batch_size: 64\n  rampup_batch_size: [16.0, 16, 1000]\n' \
	--global-batch 64 --devices 2 --run-steps off
run nemo_one 'model:\n  micro_batch_size: 8\n  global_batch_size: 64\n  rampup_batch_size: [64, 16, 1000]\n' \
	--global-batch 64 --devices 2 --run-steps off
check "a NeMo ramp from 16.0 by 16 is read as 16; one that starts at the global batch, on which Megatron divides by zero stages, is refused" \
	sh -c "grep -q '^autobatch: chose batch 8 (gradient accumulation 4, global 64) .*every stage of the global batch ramp-up from 16 by 16' '$dir/nemo.err' &&
	       grep -qF 'the batch ramp-up (model.rampup_batch_size) starts at the global batch 64: it has no stage to ramp, and Megatron divides its samples by their count, 0: start it lower, or set it to null' '$dir/nemo_one.err'" ||
	cat "$dir/nemo.err" "$dir/nemo_one.err" >&2

# a file that two presets match (Hugging Face's key and torchtune's batch_size): --key picks
# the preset whose batch key it is, with its max_steps and accumulation; an unknown --preset
# beside --key is refused
run amb 'per_device_train_batch_size: 8\nbatch_size: 32\nmax_steps: 100\ngradient_accumulation_steps: 4\n' \
	--key per_device_train_batch_size
run nosuch 'train:\n  bs: 8\nmax_steps: 100\n' --preset nosuch --key train.bs
check "--key on a file two presets match keeps Hugging Face's max_steps and accumulation; --preset nosuch is refused" \
	sh -c "grep -q 'accumulation in trials: 1 of 4' '$dir/amb.err' &&
	       grep -q \"^autobatch: chose batch 4 .*sized for the run's 100 steps (max_steps)\" '$dir/amb.err' &&
	       grep -q \"autobatch: failed: unknown preset 'nosuch'\" '$dir/nosuch.err'" ||
	cat "$dir/amb.err" "$dir/nosuch.err" >&2

# the batch written under a tag that reads it as something else: refused, the file kept
printf 'per_device_train_batch_size: !!bool true\n' >"$dir/tag.yaml"
cp "$dir/tag.yaml" "$dir/tag.orig"
printf 'per_device_train_batch_size: !!int 8\n' >"$dir/int.yaml"
"$probe" config set "$dir/tag.yaml" per_device_train_batch_size=16 2>"$dir/tag.err"
rc=$?
"$probe" config set "$dir/int.yaml" per_device_train_batch_size=16 2>>"$dir/tag.err"
check "config set refuses a batch under !!bool (read as a bool, not 16) and keeps !!int" \
	sh -c "[ $rc = 1 ] && grep -qF \"key 'per_device_train_batch_size' has the tag !!bool, which the number autobatch writes there would not be read as: remove the tag\" '$dir/tag.err' &&
	       cmp -s '$dir/tag.yaml' '$dir/tag.orig' && grep -qx 'per_device_train_batch_size: !!int 16' '$dir/int.yaml'" ||
	cat "$dir/tag.err" >&2
# a name printed back in the decision, with a newline in it, could forge a line of ours
"$probe" run --device sim:total=256MiB --key "$(printf 'a\nautobatch: chose batch 999')" \
	-- "$dir/grow" 2>"$dir/ctl.err"
rc=$?
check "--key with a control character is refused (exit 2), not echoed" \
	sh -c "[ $rc = 2 ] && grep -qF \"autobatch-probe: --key 'a?autobatch: chose batch 999': a control character in a name\" '$dir/ctl.err' &&
	       ! grep -q '^autobatch: chose batch 999' '$dir/ctl.err'" || cat "$dir/ctl.err" >&2
exit $failed
