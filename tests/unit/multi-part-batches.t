#!/bin/sh
# multi-part-batches.t - trainers whose samples have several sizes, padded per batch
# (tests/python/multi_part_train.py), probed through the step hook with no code change: a
# seq2seq pair's source and target (the longest of each in different samples) and audio
# clips of 80 mel bins by their frames. Each trial's batch holds every varying size's longest
# samples at once, so the choice holds over the whole epoch; ranked by a sample's one largest
# size, the trials saw long sources with one-line targets and chose what the epoch cannot hold.
# Fixed sizes (the 80 bins) are no length; a train split's sampler (SubsetRandomSampler)
# bounds the run's longest; an endless sampler, or batch sampler, still gets the worst batch
# first and the program runs as it would.
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/python-trials.sh"
prog=$here/multi_part_train.py
python_trials multi-part 8
# probe NAME CONFIG-JSON: at 0.8 of 600 MiB (limit 480 MiB), one measured step after the
# warm-up (every trial's steps get the worst batch)
probe() {
	echo "$2" >"$dir/$1.json"
	"$PROBE" run --device host:capacity=600MiB --fraction 0.8 --hook-dir "${HOOK:-$HOOK_DIR}" \
		--steps 1 --max 128 $EXTRA --config "$dir/$1.json" --key batch_size --json "$dir/$1.report" \
		-- "$PY" "$prog" "$dir/$1.json" 2>"$dir/$1.err" >/dev/null
}
# epoch NAME BATCH: the plain run's peak over its whole epoch (or its steps), no autobatch
epoch() {
	sed "s/\"batch_size\": [0-9]*/\"batch_size\": $2/" "$dir/$1.json" >"$dir/$1.plain.json"
	plain_peak "$prog" "$dir/$1.plain.json"
}
# fits NAME: the choice's plain run within the report's limit (said, with its figures)
fits() {
	batch=$(field "$dir/$1.report" 'r["batch_size"]' 2>/dev/null)
	limit=$(field "$dir/$1.report" 'r["limit_bytes"]' 2>/dev/null)
	peak=$(epoch "$1" "${batch:-1}")
	echo "# $1: chose ${batch:-none}; its plain run peaks at $((${peak:-0} / 1048576)) MiB of $((${limit:-0} / 1048576)) MiB"
	[ -n "$peak" ] && [ -n "$limit" ] && [ "$peak" -le "$limit" ]
}

probe s2s '{"batch_size": 4, "kind": "seq2seq"}'
check "seq2seq: each trial's batch held the longest source (480) and the longest target (300) at once, and the decision says the run's longest" \
	sh -c "[ \"\$($F '$dir/s2s.report' 'r[\"lengths\"][\"measured\"], r[\"lengths\"][\"run_longest\"], r[\"lengths\"][\"read\"], r[\"lengths\"][\"longest_first\"]')\" = '(480, 480, 200, True)' ] &&
	       grep -q 'measured at the run.s longest batch (length 480' '$dir/s2s.err'" ||
	cat "$dir/s2s.err" >&2
check "its plain run over the whole epoch stays within the limit" fits s2s
s2s=$batch

# ranked by one size per sample (its largest), as the hook did: here the source's ranking
# alone (480 against 300), and the worst batch was long sources with one-line targets
rm -rf "$dir/onesize" && cp -r "$HOOK_DIR" "$dir/onesize" && "$PY" - "$dir/onesize/autobatch/_hook.py" <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
old = "itertools.zip_longest(*self.ranked)"
assert old in s
open(p, "w").write(s.replace(old, "itertools.zip_longest(*self.ranked[:1])"))
PY
# bounded at 48, over the right ranking's choice (33): it searched to 90 in 9 trials
HOOK=$dir/onesize EXTRA="--max 48" probe onesize '{"batch_size": 4, "kind": "seq2seq"}'
onesize_over() {
	b=$(field "$dir/onesize.report" 'r["batch_size"]' 2>/dev/null)
	[ -n "$b" ] && [ "$b" -gt "${s2s:-999}" ] && ! fits onesize
}
check "ranked by a sample's largest size, the trials choose a larger batch whose epoch goes over (the test can fail)" \
	onesize_over

probe audio '{"batch_size": 4, "kind": "audio"}'
audio_ok() {
	[ "$(field "$dir/audio.report" 'r["lengths"]["measured"], r["lengths"]["run_longest"], r["lengths"]["varies"]')" = '(449, 449, True)' ] &&
		fits audio
}
check "audio (80 mel bins by 50-449 frames): the length is the frames', not the fixed bins', and the epoch fits" \
	audio_ok || cat "$dir/audio.err" >&2

# the lengths and the status are checked below, not the choice: bounded searches
EXTRA="--max 16" probe split '{"batch_size": 4, "kind": "audio", "sampler": "subset"}'
longest=$("$PY" -c 'import random, sys; sys.path.insert(0, sys.argv[1]); import multi_part_train as m
s = m.draw("audio", 200, random.Random(1)); half = max(x[0] for x in s) // 2
t = [x[0] for x in s if x[0] <= half]; print(max(t), len(t))' "$(dirname "$prog")")
check "a train split (SubsetRandomSampler): the run's longest is the split's (${longest% *} frames of its ${longest#* } samples)" \
	test "$($F "$dir/split.report" 'r["lengths"]["run_longest"], r["lengths"]["samples"]')" = "(${longest% *}, ${longest#* })"

EXTRA="--max 16" probe endless '{"batch_size": 4, "kind": "seq2seq", "sampler": "endless", "steps": 20}'
EXTRA="--max 16" probe endless_b '{"batch_size": 4, "kind": "seq2seq", "sampler": "endless_batches", "steps": 20}'
check "an endless sampler and an endless batch sampler (no len): the program runs in its trials, measured at the run's longest" \
	sh -c "for n in endless endless_b; do [ \"\$($F \"$dir/\$n.report\" 'r[\"status\"], r[\"lengths\"][\"measured\"], r[\"lengths\"][\"run_longest\"]')\" = \"('ok', 480, 480)\" ] || exit 1; done" ||
	cat "$dir/endless.err" "$dir/endless_b.err" >&2
# a stream's batches padded to the config's maximum (AUTOBATCH_TRIAL_PAD_TO): a collator's
# namedtuple too, which the padding once left as it was (its type takes fields, not a list)
check "a streamed namedtuple batch is padded to the config's maximum as a tuple is" \
	env PYTHONPATH="$HOOK_DIR" "$PY" -c 'import collections, torch
from autobatch import _hook
Batch = collections.namedtuple("Batch", "input_ids labels")
b = _hook.pad_batch(Batch(torch.ones(2, 5, dtype=torch.long), torch.ones(2, 5, dtype=torch.long)), 8)
assert type(b) is Batch and b.input_ids.shape == (2, 8) and b.labels[0, 7] == -100, b
t = _hook.pad_batch((torch.ones(2, 5), torch.ones(2)), 8)
assert isinstance(t, tuple) and t[0].shape == (2, 8) and t[1].shape == (2,), t'
# a sample's parts, whatever comes first: a (label, tokens) pair's tokens vary, a list of
# token ids is one part, an audio clip's first size is fixed and its second varies
check "a sample's sizes: (label, tokens), a list of tokens, a (clip, label) pair" \
	env PYTHONPATH="$HOOK_DIR" "$PY" -c 'import torch
from autobatch import _hook
assert _hook.sample_sizes((3, [1, 2, 3, 4])) == {(1, 0): 4}
assert _hook.sample_sizes([5, 6, 7]) == {(None, 0): 3}
assert _hook.sample_sizes((torch.ones(80, 12), 3)) == {(0, 0): 80, (0, 1): 12}
assert _hook.batch_length((torch.ones(4, 80, 300), torch.ones(4)), [(0, 1)]) == 300'
exit $failed
