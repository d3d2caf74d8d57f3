#!/bin/sh
# start-ahead.t - trials started while the one before them runs (--start-ahead, the default):
# the next trial's Python starts and imports at once, and its step hook holds it, before it
# opens its config copy or calls its model, until the probe names its batch. Real PyTorch
# programs that know nothing of autobatch (tests/python/plain_torch.py, behind small
# wrappers that read their config at different moments), on the host with Debian's PyTorch.
# The seconds saved are figures for bench/start-ahead, not assertions.
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/python-trials.sh"
prog=$here/plain_torch.py
python_trials start-ahead 10
mkdir "$dir/tmp"
export TMPDIR=$dir/tmp # where the trials' directories are, to be watched

# A program that reads its config (after PRELUDE), and fails unless the batch the probe gave
# it ($AUTOBATCH_BATCH_SIZE) is its config's: a trial started ahead that read a config, or a
# batch, before its release could not pass. Then the plain loop runs on that config.
agreeing() { # NAME PRELUDE
	cat >"$dir/$1.py" <<PY
import json, os, runpy, sys
$2
config = json.load(open(sys.argv[1]))
if os.environ.get("AUTOBATCH_BATCH_SIZE") != str(config["batch_size"]):
    sys.exit("config batch %s, environment %s" % (config["batch_size"], os.environ.get("AUTOBATCH_BATCH_SIZE")))
sys.argv = ["$prog", sys.argv[1]]
runpy.run_path("$prog", run_name="__main__")
PY
}
agreeing agree "" # its config before PyTorch's import
agreeing model_first "import torch; torch.nn.Linear(4, 4)(torch.zeros(1, 4))" # a warm-up call first
# One that gives up at once when its config is not there: it cannot wait for its batch.
cat >"$dir/needs_config.py" <<PY
import os, runpy, sys
if not os.path.exists(sys.argv[1]):
    sys.exit("no config at %s" % sys.argv[1])
sys.argv = ["$prog", sys.argv[1]]
runpy.run_path("$prog", run_name="__main__")
PY

probe() { # NAME PROGRAM [PROBE-OPTIONS...]
	name=$1 program=$2
	shift 2
	echo '{"batch_size": 8}' >"$dir/$name.json"
	"$PROBE" run --device host:capacity=512MiB --fraction 0.8 --hook-dir "$HOOK_DIR" \
		--config "$dir/$name.json" --key batch_size --json "$dir/$name.report" "$@" \
		-- "$PY" "$program" "$dir/$name.json" 2>"$dir/$name.err" >/dev/null
}
count() { grep -o "$1" "$2" | wc -l; }
trials() { grep -o '"batch":[0-9]*' "$1" | cut -d: -f2 | tr '\n' ' '; }
nothing_left() { ! pgrep -f "$dir/" >/dev/null && [ -z "$(ls -A "$dir/tmp")" ]; }

probe agree "$dir/agree.py"
ahead_ok() {
	k=$(count '"batch":' "$dir/agree.report") # not n: tap.sh's
	grep -q '"status":"ok"' "$dir/agree.report" && [ "$k" -ge 3 ] &&
		[ "$(count '"started_ahead":true' "$dir/agree.report")" -eq $((k - 1)) ]
}
check "every trial after the first was started ahead, ran at its own batch (config and environment agree) and a decision came" \
	ahead_ok || cat "$dir/agree.err" >&2
verify() {
	out=$("$here/verify-choice" "$dir/agree.report" "$dir/agree.json" batch_size "$PY" "$prog" "$dir/agree.json")
	rc=$?
	echo "# $out"
	return $rc
}
check "its choice fits in a plain run and 10% more does not" verify
check "the probe's last trial started ahead is ended with the probe: no process, no trial directory left" \
	nothing_left

probe off "$dir/agree.py" --start-ahead off
# the same program, the same peaks: the same choice, within what a MiB of noise at the limit
# moves it (a peak of 406 or 407 MiB against 409 decides whether 89 is tried)
choice() { sed -n 's/.*"batch_size":\([0-9]*\).*/\1/p' "$1" | head -n1; }
same_choice() {
	a=$(choice "$dir/agree.report") b=$(choice "$dir/off.report")
	[ -n "$a" ] && [ -n "$b" ] && [ $((a > b ? a - b : b - a)) -le $((a / 20)) ]
}
off_ok() { grep -q '"status":"ok"' "$dir/off.report" && ! grep -q started_ahead "$dir/off.report" && same_choice; }
check "--start-ahead off: no trial started ahead, and the same choice" off_ok ||
	{ echo "# on: $(trials "$dir/agree.report"); off: $(trials "$dir/off.report")"; cat "$dir/off.err" >&2; }

# the checks below read how trials started, not the choice: bounded searches (8, then 16)
probe model_first "$dir/model_first.py" --max 16
check "a program that calls its model before it reads its config waits at that call, then runs at its batch" \
	sh -c "grep -q '\"status\":\"ok\"' '$dir/model_first.report' && grep -q '\"started_ahead\":true' '$dir/model_first.report'" ||
	cat "$dir/model_first.err" >&2

probe needs "$dir/needs_config.py" --max 16
needs_ok() {
	grep -q '"status":"ok"' "$dir/needs.report" && ! grep -q started_ahead "$dir/needs.report" &&
		grep -q "trial 2 was started ahead of its turn and ended before it (no config at .*needs.json); trials start one at a time from now" "$dir/needs.err" &&
		[ "$(count 'ended before it' "$dir/needs.err")" -eq 1 ] && nothing_left
}
check "a program that ends without its config cannot wait: said once, then trials one at a time to a decision" \
	needs_ok || cat "$dir/needs.err" >&2
# Only Python is held: a #! script that runs Python through env is; a shell script that logs
# its start and then runs Python is not started ahead (its log line would come while the
# trial before it runs), nor is anything else that is not Python
{ echo '#!/usr/bin/env python3'; cat "$dir/agree.py"; } >"$dir/agree_script"
chmod +x "$dir/agree_script"
echo '{"batch_size": 8}' >"$dir/script.json"
PATH=$(dirname "$PY"):$PATH "$PROBE" run --device host:capacity=512MiB --fraction 0.8 --hook-dir "$HOOK_DIR" \
	--max 16 --config "$dir/script.json" --key batch_size --json "$dir/script.report" \
	-- "$dir/agree_script" "$dir/script.json" 2>"$dir/script.err" >/dev/null
check "a #! script that runs Python through env is started ahead" \
	sh -c "grep -q '\"status\":\"ok\"' '$dir/script.report' && grep -q '\"started_ahead\":true' '$dir/script.report'" ||
	cat "$dir/script.err" >&2
echo '{"batch_size": 8}' >"$dir/shell.json"
"$PROBE" run --device host:capacity=512MiB --fraction 0.8 --hook-dir "$HOOK_DIR" \
	--max 16 --config "$dir/shell.json" --key batch_size --json "$dir/shell.report" \
	-- sh -c 'echo start >>"$0"; exec "$1" "$2" "$3"' "$dir/shell.log" "$PY" "$dir/agree.py" \
	"$dir/shell.json" 2>"$dir/shell.err" >/dev/null
shell_ok() {
	k=$(count '"batch":' "$dir/shell.report")
	grep -q '"status":"ok"' "$dir/shell.report" && ! grep -q started_ahead "$dir/shell.report" &&
		[ "$(grep -c start "$dir/shell.log")" -eq "$k" ]
}
check "a shell script that runs Python is not started ahead: one start per trial, each in its turn" \
	shell_ok || cat "$dir/shell.err" >&2

# a launcher: torchrun's agent opens its rendezvous port before any config is read; the one
# started ahead waits at its import instead, so it neither takes the running trial's port
# (it would end, and start-ahead with it) nor joins its rendezvous. (tests/python/
# torchrun-fixes: Debian 12's PyTorch 1.13 torchrun starts no worker under Python 3.11.)
echo '{"batch_size": 8}' >"$dir/launcher.json"
mkdir "$dir/launcher-tmp" # torchrun leaves its own torchelastic_* directories there
PYTHONPATH=$here/torchrun-fixes TMPDIR=$dir/launcher-tmp "$PROBE" run --device host:capacity=1GiB \
	--fraction 0.8 --hook-dir "$HOOK_DIR" --max 16 --config "$dir/launcher.json" --key batch_size \
	--json "$dir/launcher.report" -- "$PY" -m torch.distributed.run --nnodes=1 --nproc_per_node=1 \
	--master_port=29533 "$prog" "$dir/launcher.json" 2>"$dir/launcher.err" >/dev/null
launcher_ok() {
	k=$(count '"batch":[0-9]*,"fits"' "$dir/launcher.report")
	grep -q '"status":"ok"' "$dir/launcher.report" && [ "$k" -ge 2 ] &&
		[ "$(count '"started_ahead":true' "$dir/launcher.report")" -eq $((k - 1)) ] &&
		! grep -q 'ended before it' "$dir/launcher.err" && ! pgrep -f "$dir/" >/dev/null &&
		[ -z "$(find "$dir/launcher-tmp" -maxdepth 1 -name 'autobatch-*')" ]
}
check "torchrun: each next trial's launcher waits at its import, before its port; every trial after the first started ahead" \
	launcher_ok || cat "$dir/launcher.err" >&2

# an interrupt while a trial runs and the next one waits: both end, nothing is left
echo '{"batch_size": 8, "startup_s": 30}' >"$dir/int.json"
"$PROBE" run --device host:capacity=512MiB --hook-dir "$HOOK_DIR" --config "$dir/int.json" \
	--key batch_size -- "$PY" "$prog" "$dir/int.json" 2>"$dir/int.err" >/dev/null &
pid=$!
for i in $(seq 300); do [ -n "$(find "$dir/tmp" -name 'trial-2-ahead' 2>/dev/null)" ] && break; sleep 0.1; done
waiting=$(find "$dir/tmp" -name 'trial-2-ahead')
kill -INT "$pid"
wait "$pid"
status=$?
interrupted_ok() {
	[ -n "$waiting" ] && [ "$status" -ne 0 ] && grep -q 'interrupted during trial 1' "$dir/int.err" &&
		nothing_left
}
check "an interrupt while trial 1 runs and trial 2 waits ends both: no process, no trial directory left" \
	interrupted_ok || { echo "# waiting: '$waiting' status $status"; cat "$dir/int.err" >&2; }
exit $failed
