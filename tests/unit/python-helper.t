#!/bin/sh
# python-helper.t - contrib/python/autobatch: the decision read back, and a real PyTorch
# training loop on the CPU probed end to end by autobatch-probe on the host (TAP). Lightning
# and Hugging Face callbacks are checked where those packages are installed.
. "$(dirname "$0")/tap.sh"
probe=${AUTOBATCH_PROBE:-probe/autobatch-probe}
py=$(cd "$(dirname "$0")/../../contrib/python" && pwd)
loop=$(cd "$(dirname "$0")/../python" && pwd)/train_torch.py
dir=$(mktemp -d /tmp/autobatch-python.XXXXXX)
trap 'rm -rf "$dir"' EXIT
# Debian's interpreter, where Debian's python3-torch is (a pyenv python3 may come first in PATH)
PY=${PYTHON:-$(test -x /usr/bin/python3 && echo /usr/bin/python3 || command -v python3)}
echo "1..5"
if [ -z "$PY" ]; then
	for i in 1 2 3 4 5; do echo "ok $i # skip python3 is not installed"; done
	exit 0
fi
check "batch_size: the decision, else the default" sh -c "
	test \"\$(PYTHONPATH='$py' '$PY' -c 'import autobatch; print(autobatch.batch_size(7))')\" = 7 &&
	test \"\$(AUTOBATCH_BATCH_SIZE=96 PYTHONPATH='$py' '$PY' -c 'import autobatch; print(autobatch.batch_size(7))')\" = 96 &&
	test \"\$(AUTOBATCH_BATCH_SIZE=-3 PYTHONPATH='$py' '$PY' -c 'import autobatch; print(autobatch.batch_size(7))')\" = 7"
check "a trial reports its steps and peak, then ends" sh -c "
	AUTOBATCH_TRIAL=1 AUTOBATCH_TRIAL_STEPS=2 AUTOBATCH_TRIAL_REPORT='$dir/r.jsonl' PYTHONPATH='$py' '$PY' -c '
import autobatch
with autobatch.trial() as t:
    while not t.step(samples=8):
        pass
print(\"not reached\")' | grep -q 'not reached' && exit 1
	test \$(grep -c step_s '$dir/r.jsonl') -eq 3 && grep -q peak_bytes '$dir/r.jsonl'"
if "$PY" -c 'import torch' 2>/dev/null; then
	# a batch over 4 that fits is what is checked: bounded at 32 (it searched to about 300)
	"$probe" run --device host:capacity=1GiB --fraction 0.8 --json "$dir/torch.json" --trial-seconds 60 \
		--max 32 -- "$PY" "$loop" "$py" 2>"$dir/torch.err"
	check "a real PyTorch loop probed on the host gets a batch that fits its capacity" sh -c "
		grep -q '\"status\":\"ok\"' '$dir/torch.json' &&
		b=\$(sed -n 's/.*\"batch_size\":\([0-9]*\).*/\1/p' '$dir/torch.json') && test \"\$b\" -gt 4 &&
		grep -q \"\\\"batch\\\":\$b,\\\"fits\\\":true\" '$dir/torch.json' &&
		grep -q '\"samples_per_s\":[0-9]' '$dir/torch.json'" || cat "$dir/torch.err" >&2
else
	echo "ok 3 # skip PyTorch is not installed (Debian: python3-torch)"; n=3
fi
for fw in LightningCallback:lightning HFCallback:transformers; do
	name=${fw%%:*} module=${fw#*:}
	if "$PY" -c "import $module" 2>/dev/null; then
		check "$name is a callback of $module" sh -c "PYTHONPATH='$py' '$PY' -c 'import autobatch; autobatch.$name'"
	else
		n=$((n + 1)); echo "ok $n # skip $module is not installed"
	fi
done
exit $failed
