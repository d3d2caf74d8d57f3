#!/bin/sh
# checkpoint-save.t - a trial rehearses the run's checkpoint after its steps (issue 41): the
# step hook saves the model's and the optimizer's state as torch.save does, into nothing,
# and its memory is in the trial's peak. tests/python/gathered_save.py gathers its state
# dict from shards on save (as FSDP's full state dict does): with 200 MiB gathered, its
# steps fit a 410 MiB limit at any batch tried and its saves do not, so a plain run at any
# batch goes over at its first save. The probe says that, naming the save, instead of
# choosing a batch.
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/python-trials.sh"
prog=$here/gathered_save.py
python_trials save 5
# probe NAME CONFIG-JSON: the trainer at 0.8 of 512 MiB (410 MiB)
probe() {
	echo "$2" >"$dir/$1.json"
	"$PROBE" run --device host:capacity=512MiB --fraction 0.8 --hook-dir "$HOOK_DIR" \
		--config "$dir/$1.json" --key batch_size --json "$dir/$1.report" \
		-- "$PY" "$prog" "$dir/$1.json" 2>"$dir/$1.err" >/dev/null
}
plain() { # CONFIG-JSON: the plain run's peak, no autobatch
	echo "$1" >"$dir/plain.json"
	plain_peak "$prog" "$dir/plain.json"
}
limit=$((410 * 1048576))

# a direct trial: the save said after the steps, with the state's size (16 MiB gathered)
echo '{"batch_size": 8, "gather": 16, "steps": 50}' >"$dir/t.json"
AUTOBATCH_TRIAL=1 AUTOBATCH_TRIAL_REPORT=$dir/t.rep AUTOBATCH_BATCH_SIZE=8 PYTHONPATH=$HOOK_DIR \
	"$PY" "$prog" "$dir/t.json" >/dev/null 2>&1
check "a trial ends with the checkpoint saved after its 4 steps: at least the 16 MiB gathered" \
	sh -c "[ \"\$(grep -c step_s '$dir/t.rep')\" = 4 ] &&
	       tail -n 3 '$dir/t.rep' | head -n 1 | grep -q '^{\"saving\": true}' &&
	       n=\$(sed -n 's/^{\"saved_bytes\": \([0-9]*\), .*/\1/p' '$dir/t.rep') &&
	       [ \"\$n\" -ge 16777216 ] && [ \"\$n\" -lt 25165824 ]" || cat "$dir/t.rep" >&2

probe gather '{"batch_size": 8, "gather": 200, "steps": 40, "save_every": 10}'
status=$?
check "a save that no batch makes room for: no choice, the error names the checkpoint" \
	sh -c "[ $status -ne 0 ] &&
	       grep -q 'failed: even batch 1 does not fit: .* when saving a checkpoint after its steps' '$dir/gather.err' &&
	       grep -q 'trial 1: batch 8 does not fit: out of memory saving a checkpoint' '$dir/gather.err' &&
	       [ \"\$($F '$dir/gather.report' 'r[\"trials\"][0][\"save_bound\"]')\" = True ]" ||
	cat "$dir/gather.err" >&2

# the error is true: the run's steps fit and its first save does not
steps=$(plain '{"batch_size": 64, "gather": 200, "steps": 12, "save_every": 100}')
saves=$(plain '{"batch_size": 1, "gather": 200, "steps": 12, "save_every": 10}')
echo "# plain runs: batch 64 without saving $((${steps:-0} / 1048576)) MiB, batch 1 saving $((${saves:-0} / 1048576)) MiB, limit 410 MiB"
check "a plain run's steps fit the limit at batch 64; saving at batch 1 goes over" \
	sh -c "[ -n '$steps' ] && [ -n '$saves' ] && [ '$steps' -le $limit ] && [ '$saves' -gt $limit ]"

# a small save changes nothing: trials say its size and the choice stands
probe small '{"batch_size": 8, "gather": 4, "rows": 2048, "steps": 40, "save_every": 10}'
check "a save that fits: chosen, each fitting trial says the state it saved" \
	sh -c "[ \"\$($F '$dir/small.report' 'r[\"status\"], all(t.get(\"saved_bytes\", 0) >= 4194304 for t in r[\"trials\"] if t[\"fits\"])')\" = \"('ok', True)\" ]" ||
	cat "$dir/small.err" >&2
# two optimizers, as a GAN trains: the counted steps are the first one's (the
# discriminator's), the checkpoint is both models' and both optimizers' (the save once held
# the discriminator's alone: 3 KiB of the generator's 50 MiB with its Adam moments)
cat >"$dir/gan.py" <<'PY'
import torch
torch.manual_seed(0)
G = torch.nn.Sequential(torch.nn.Linear(64, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048))
D = torch.nn.Linear(2048, 1)
og, od = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
for _ in range(20):
    z = torch.randn(8, 64)
    od.zero_grad(); D(G(z).detach()).mean().backward(); od.step()
    og.zero_grad(); (-D(G(z)).mean()).backward(); og.step()
PY
AUTOBATCH_TRIAL=1 AUTOBATCH_TRIAL_REPORT=$dir/gan.rep AUTOBATCH_BATCH_SIZE=8 PYTHONPATH=$HOOK_DIR \
	"$PY" "$dir/gan.py" >/dev/null 2>&1
gen=$(( (64 * 2048 + 2048 + 2048 * 2048 + 2048) * 4 ))
check "two optimizers (a GAN): the save holds both models and both optimizers' state (the generator's $((gen / 1048576)) MiB three times at least)" \
	sh -c "n=\$(sed -n 's/^{\"saved_bytes\": \([0-9]*\), .*/\1/p' '$dir/gan.rep') &&
	       [ \"\$n\" -ge $((3 * gen)) ] && [ \"\$(grep -c step_s '$dir/gan.rep')\" = 4 ]" || cat "$dir/gan.rep" >&2
exit $failed
