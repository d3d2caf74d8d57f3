#!/bin/sh
# probe-cli.t - autobatch-probe's command line: help, version, config and presets (TAP).
probe=${AUTOBATCH_PROBE:-probe/autobatch-probe}
dir=$(mktemp -d /tmp/autobatch-probe-cli.XXXXXX)
trap 'rm -rf "$dir"' EXIT
. "$(dirname "$0")/tap.sh"
printf '# run\ntrain:\n  micro_batch_size: 4   # per GPU\n  gradient_accumulation_steps: 8\n' >"$dir/axo.yaml"
cp "$dir/axo.yaml" "$dir/orig.yaml"

echo "1..18"
check "--version prints the package version" \
	sh -c "'$probe' --version | grep -qx 'autobatch-probe $PACKAGE_VERSION'"
check "-V is --version" sh -c "'$probe' -V | grep -q '^autobatch-probe '"
check "--help exits 0 and shows usage on stdout" \
	sh -c "'$probe' --help | grep -q '^Usage: autobatch-probe'"
# each command's own help: asked for, on stdout and exit 0 (a pager shows it); after "--" a
# trial command's -h is its own
cmd_help() {
	for c in run config ranks task watch presets; do
		"$probe" "$c" --help >"$dir/help.out" 2>"$dir/help.err" || return 1
		grep -qi "^usage: autobatch-probe $c" "$dir/help.out" && test ! -s "$dir/help.err" || return 1
	done
	"$probe" run --device sim:total=1GiB -h >/dev/null 2>&1
}
check "each command's --help (or -h among its options): its usage on stdout, exit 0" cmd_help
check "-h after -- is the trial command's, not the probe's" \
	sh -c "'$probe' run --device sim:total=1GiB --bogus -- prog -h >/dev/null 2>&1; test \$? -eq 2"
check "no arguments: usage on stderr, exit 2" \
	sh -c "'$probe' >/dev/null 2>&1; test \$? -eq 2 && '$probe' 2>&1 >/dev/null | grep -q Usage"
check "an unknown command is named, exit 2" \
	sh -c "'$probe' frobnicate 2>&1 >/dev/null | grep -q \"unknown command 'frobnicate'\"; '$probe' frobnicate 2>/dev/null; test \$? -eq 2"
check "config get prints a value" \
	sh -c "test \"\$('$probe' config get '$dir/axo.yaml' train.micro_batch_size)\" = 4"
check "config set edits two keys, keeps the comment, keeps a backup" \
	sh -c "'$probe' config set '$dir/axo.yaml' train.micro_batch_size=6 train.gradient_accumulation_steps=3 &&
	       grep -qx '  micro_batch_size: 6   # per GPU' '$dir/axo.yaml' &&
	       grep -qx '  gradient_accumulation_steps: 3' '$dir/axo.yaml' &&
	       cmp -s '$dir/orig.yaml' '$dir/axo.yaml.autobatch~'"
check "config get of a missing key names the nearest keys, exit 1" \
	sh -c "'$probe' config get '$dir/axo.yaml' train.micro 2>&1 | grep -q \"key 'train.micro' not found; nearest keys: train.micro_batch_size (line 3)\"
	       '$probe' config get '$dir/axo.yaml' train.micro 2>/dev/null; test \$? -eq 1"
check "config set refuses a non-number and changes nothing" \
	sh -c "! '$probe' config set '$dir/axo.yaml' train.micro_batch_size=big 2>/dev/null &&
	       grep -qx '  micro_batch_size: 6   # per GPU' '$dir/axo.yaml'"
check "config set without KEY=VALUE is a usage error" \
	sh -c "'$probe' config set '$dir/axo.yaml' 2>/dev/null; test \$? -eq 2"
check "config detect names the preset" \
	sh -c "printf 'micro_batch_size: 2\ngradient_accumulation_steps: 4\n' >'$dir/a.yml' &&
	       test \"\$('$probe' config detect '$dir/a.yml')\" = axolotl"
check "config --document picks one document" \
	sh -c "printf 'a: 1\n---\na: 2\n' >'$dir/m.yaml' && test \"\$('$probe' config get '$dir/m.yaml' a --document 1)\" = 2"
check "presets lists every framework with its keys" \
	sh -c "'$probe' presets | grep -q '^deepspeed' && '$probe' presets | grep -q 'micro_batch   train_input.micro_batch_size'"
check "run --node-memory: a malformed table is named, one without --step-nodes refused" \
	sh -c "'$probe' run --device host --node-memory 12:a,,b --step-nodes a --ranks 2 -- true 2>&1 |
	         grep -q \"autobatch-probe: --node-memory: '' is no node name\" &&
	       '$probe' run --device host --node-memory 12:a -- true 2>&1 |
	         grep -q 'autobatch-probe: --node-memory holds a trial step.s ranks to their nodes. memory: give --step-nodes LIST too'"
# the real step's GPU request, handed to srun by the trial step's launcher: only the options
# and values ab_step_gpus_from_tres makes, never another option or a shell word
check "run --step-option: one that is not a GPU request is refused, one without --step-nodes too" \
	sh -c "'$probe' run --device host --step-nodes a --ranks 2 --step-option=--uid=0 -- true 2>&1 |
	         grep -q 'autobatch-probe: --step-option --uid=0: one of --gpus-per-task=, --gres=, --gpus=, --gpu-bind=, --cpus-per-gpu= with a GRES value' &&
	       '$probe' run --device host --step-nodes a --ranks 2 '--step-option=--gres=gpu:1 x' -- true 2>&1 |
	         grep -q 'autobatch-probe: --step-option --gres=gpu:1 x: one of' &&
	       '$probe' run --device host --step-option=--gpus-per-task=1 -- true 2>&1 |
	         grep -q 'autobatch-probe: --step-option shapes a trial step: give --step-nodes LIST too'"
AUTOBATCH_TRIAL_REPORT=$dir/r AUTOBATCH_BATCH_SIZE=4 "$probe" ranks 2 --nodes a --srun-option '--gres=gpu:1;id' -- true \
	>/dev/null 2>"$dir/ranks.err"
check "ranks --srun-option: a value that is no GRES is a usage error, exit 2, nothing run" \
	sh -c "[ $? -eq 2 ] && grep -q '^usage: autobatch-probe ranks N' '$dir/ranks.err'"
exit $failed
