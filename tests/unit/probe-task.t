#!/bin/sh
# probe-task.t - `autobatch-probe task`, one task of a trial that is a Slurm step, without
# Slurm (TAP): what it says on its standard output for the ranks' launcher (its node, its
# command's report lines, its peak, how it ended); a launcher's workers (tests/python/
# launch_workers.py starting a real PyTorch loop, tests/python/plain_torch.py, at two batches)
# each reporting on their own, the task's steps those every worker took and its peak the
# largest worker's, not their sum; torchrun's, from their start, before they report; a worker
# over the capacity ending the task at once, exit 3, nothing left; a process that left the
# command's group (setsid, as PyTorch 2's torchrun starts its workers) measured, killed and
# never left behind; the end of its standard input (--stop-on-eof, the launcher's stop)
# ending it and its files, a failed task waiting for that stop; its usage. Real runs of Slurm trial steps: tests/slurm-multi/03-shapes.bats.
probe=${AUTOBATCH_PROBE:-probe/autobatch-probe}
peakrun=${PEAKRUN:-tests/helpers/peakrun}
src=$(cd "$(dirname "$0")/../.." && pwd)
hook=${HOOK_DIR:-$src/contrib/python}
py=/usr/bin/python3
. "$(dirname "$0")/../python/gpu-like-memory.sh" # resident memory follows live tensors
fixed_layout /bin/sh "$0" # in huge pages at fixed addresses
dir=$(mktemp -d /tmp/autobatch-probe-task.XXXXXX)
trap 'pkill -9 -f "$dir/" 2>/dev/null; rm -rf "$dir"' EXIT
. "$(dirname "$0")/tap.sh"
echo "1..13"

"$probe" task --capacity 12x -- true >/dev/null 2>"$dir/usage.err"
check "a bad capacity is refused with the usage, exit 2" \
	sh -c "[ $? -eq 2 ] && grep -q '^usage: autobatch-probe task \[--capacity BYTES\] \[--gpu\] \[--node-memory TABLE\] \[--stop-on-eof\] -- COMMAND' '$dir/usage.err'"

# --gpu where NVML is not (this machine has no NVIDIA driver; tests/gpu runs it where one is):
# the task says which node lacks what, runs nothing, and fails, which ends the trial step
if [ -e /dev/nvidiactl ]; then
	n=$((n + 1))
	echo "ok $n # SKIP an NVIDIA driver is here"
else
	SLURMD_NODENAME=node7 "$probe" task --gpu -- touch "$dir/ran" >"$dir/gpu.out" 2>"$dir/gpu.err"
	rc=$?
	check "--gpu without NVML: one line naming the node and the library, exit 1, the command not run" \
		sh -c "[ $rc -eq 1 ] && [ ! -e '$dir/ran' ] &&
		       grep -qx 'autobatch-probe task: --gpu on node7: NVML (libnvidia-ml.so.1) is not installed' '$dir/gpu.err'"
fi

# --node-memory: the task on node7 is held to node7's memory (64 MiB) where --capacity
# (1 GiB) is another node's; a node the table does not name keeps --capacity; a bad table
hold='b = bytearray(100 << 20); import time; time.sleep(1)'
SLURMD_NODENAME=node7 "$probe" task --capacity 1073741824 --node-memory "1073741824:node1;67108864:node7,node8" \
	-- "$py" -c "$hold" >"$dir/own.out" 2>/dev/null
own=$?
SLURMD_NODENAME=node9 "$probe" task --capacity 1073741824 --node-memory "67108864:node7" \
	-- "$py" -c "$hold" >"$dir/other.out" 2>/dev/null
other=$?
"$probe" task --node-memory "64:no/de" -- true 2>"$dir/table.err"
bad=$?
check "--node-memory holds a task to its own node's memory ($own, over), others to --capacity ($other), a bad table refused" \
	sh -c "[ $own -eq 3 ] && grep -q '^@autobatch-task over' '$dir/own.out' && [ $other -eq 0 ] &&
	       [ $bad -eq 2 ] && grep -q \"autobatch-probe task: --node-memory: 'no/de' is no node name\" '$dir/table.err'"

# a command that speaks the protocol itself, as toy_train does
cat >"$dir/speaks.sh" <<'EOS'
#!/bin/sh
for i in 1 2 3; do echo "{\"step_s\": 0.01, \"samples\": 4}" >>"$AUTOBATCH_TRIAL_REPORT"; done
echo "to standard output"
EOS
chmod +x "$dir/speaks.sh"
SLURMD_NODENAME=node7 "$probe" task -- "$dir/speaks.sh" >"$dir/speaks.out" 2>"$dir/speaks.err"
check "its node, its command's report lines, its peak and its end, on standard output alone" \
	sh -c "[ \"\$(sed -n 1p '$dir/speaks.out')\" = '@autobatch-task node node7' ] &&
	       [ \$(grep -c '^@autobatch-task report {\"step_s\": 0.01, \"samples\": 4}\$' '$dir/speaks.out') -eq 3 ] &&
	       grep -q '^@autobatch-task peak [0-9][0-9]*\$' '$dir/speaks.out' &&
	       [ \"\$(tail -n1 '$dir/speaks.out')\" = '@autobatch-task end status 0' ] &&
	       grep -qx 'to standard output' '$dir/speaks.err' && ! grep -qv '^@autobatch-task ' '$dir/speaks.out'" ||
	cat "$dir/speaks.out"

# the launcher's stop: the end of the task's standard input (srun --input=all relays it)
mkdir "$dir/tmp"
start=$(date +%s)
(sleep 2) | TMPDIR=$dir/tmp "$probe" task --stop-on-eof -- sh -c "echo \$\$ >'$dir/stays.pid'; exec sleep 300" \
	>"$dir/eof.out" 2>"$dir/eof.err"
rc=$? took=$(($(date +%s) - start))
check "--stop-on-eof: the end of its standard input ends it ($took s), exit 0, its command killed, its files removed" \
	sh -c "[ $rc -eq 0 ] && [ $took -lt 10 ] && ! kill -0 \$(cat '$dir/stays.pid') 2>/dev/null &&
	       [ -z \"\$(ls -A '$dir/tmp')\" ]" || cat "$dir/eof.out" "$dir/eof.err"

# a failed task waits for that stop before it exits: its status would have srun kill the rest
start=$(date +%s)
(sleep 3) | TMPDIR=$dir/tmp "$probe" task --stop-on-eof -- sh -c 'exit 5' >"$dir/fail.out" 2>&1
rc=$? took=$(($(date +%s) - start))
TMPDIR=$dir/tmp "$probe" task -- sh -c 'exit 5' >/dev/null 2>&1
rc_plain=$?
check "a failed command: its task says so, waits for the stop ($took s), then exits 0; unstopped, its status ($rc_plain)" \
	sh -c "[ $rc -eq 0 ] && [ $took -ge 3 ] && [ $took -lt 10 ] && [ $rc_plain -eq 5 ] &&
	       grep -qx '@autobatch-task end status 5' '$dir/fail.out' && [ -z \"\$(ls -A '$dir/tmp')\" ]" ||
	cat "$dir/fail.out"

# a task killed outright (a cancelled trial step's SIGKILL) leaves its directory; the next
# task on the node removes it, not a live task's (locked while it runs), nor one of another
# user's (as root: a directory of nobody's under its name)
TMPDIR=$dir/tmp "$probe" task -- sleep 30 >/dev/null 2>&1 &
live=$!
TMPDIR=$dir/tmp "$probe" task -- sleep 30 >/dev/null 2>&1 &
killed=$!
sleep 1
kill -KILL "$killed"
wait "$killed" 2>/dev/null
left=$(ls "$dir/tmp" | grep -c "^autobatch-task\.[^.]*\.$killed\.")
others=0
if [ "$(id -u)" = 0 ]; then
	mkdir "$dir/tmp/autobatch-task.$(hostname | tr ./ __).1.theirs" &&
		chown nobody "$dir/tmp/autobatch-task.$(hostname | tr ./ __).1.theirs" && others=1
fi
TMPDIR=$dir/tmp "$probe" task -- true >/dev/null 2>&1
after=$(ls "$dir/tmp" | tr '\n' ' ')
kill "$live"
wait "$live" 2>/dev/null
check "a task killed outright left its directory ($left); the next task removed it and kept the live task's$( [ $others = 1 ] && echo " and another user's") ($after)" \
	sh -c "[ $left -eq 1 ] && [ \$(ls '$dir/tmp' | grep -c '\\.$killed\\.') -eq 0 ] &&
	       echo '$after' | grep -q 'autobatch-task\\.[^.]*\\.$live\\.' &&
	       { [ $others = 0 ] || echo '$after' | grep -q '\\.1\\.theirs'; }"
rm -rf "$dir/tmp/"*

# a process that leaves the command's group for a session of its own, as PyTorch 2's
# torchrun starts each worker: measured with the group (its 200 MiB over a 100 MiB capacity
# end the task within seconds, not when it would end in 60 s) and killed with it
away='import os, sys, time; open(sys.argv[1], "w").write(str(os.getpid())); b = b"x" * (200 << 20); time.sleep(60)'
start=$(date +%s)
"$probe" task --capacity 104857600 -- "$py" -c 'import subprocess, sys; subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], start_new_session=True).wait()' \
	"$away" "$dir/away.pid" >"$dir/away.out" 2>"$dir/away.err"
rc=$? took=$(($(date +%s) - start))
check "a process that left the command's group (setsid) is measured with it: over in $took s, exit $rc, killed" \
	sh -c "[ $rc -eq 3 ] && [ $took -lt 20 ] && grep -q '^@autobatch-task over' '$dir/away.out' &&
	       [ -s '$dir/away.pid' ] && ! kill -0 \$(cat '$dir/away.pid') 2>/dev/null" ||
	cat "$dir/away.out" "$dir/away.err"

# the command ends and leaves such a process running (its parent gone, once the process has
# written its pid): the task ends it
"$probe" task -- "$py" -c 'import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], start_new_session=True)
while not (os.path.exists(sys.argv[2]) and os.path.getsize(sys.argv[2])): time.sleep(0.01)' \
	'import os, sys, time; open(sys.argv[1], "w").write(str(os.getpid())); time.sleep(300)' "$dir/left.pid" \
	>"$dir/left.out" 2>&1
rc=$?
sleep 0.2
check "a process of the command's left in a session of its own when the command ended: ended with the task (exit $rc)" \
	sh -c "[ $rc -eq 0 ] && [ -s '$dir/left.pid' ] && ! kill -0 \$(cat '$dir/left.pid') 2>/dev/null" ||
	cat "$dir/left.out"

python_or_skip "$py" 'import torch' PyTorch 10 13

# two workers of a launcher, at batches 8 and 64: their own memory differs by about 100 MiB
echo '{"batch_size": 8, "steps": 6}' >"$dir/w0.json"
echo '{"batch_size": 64, "steps": 6}' >"$dir/w1.json"
trial_env() {
	env PYTHONPATH="$hook" AUTOBATCH_TRIAL=1 AUTOBATCH_TRIAL_STEPS=3 AUTOBATCH_BATCH_SIZE=8 "$@"
}
trial_env "$probe" task -- "$py" "$src/tests/python/launch_workers.py" "$src/tests/python/plain_torch.py" \
	"$dir/w0.json" "$dir/w1.json" >"$dir/two.out" 2>"$dir/two.err"
peak=$(sed -n 's/^@autobatch-task peak //p' "$dir/two.out" | tail -n1)
big=$(trial_env "$peakrun" "$py" "$src/tests/python/plain_torch.py" "$dir/w1.json" 2>&1 >/dev/null |
	sed -n 's/^peak_bytes \([0-9]*\) status 0$/\1/p')
small=$(trial_env "$peakrun" "$py" "$src/tests/python/plain_torch.py" "$dir/w0.json" 2>&1 >/dev/null |
	sed -n 's/^peak_bytes \([0-9]*\) status 0$/\1/p')
check "a launcher's two workers: 4 steps every worker took (each with the longest batch any had, the lengths said once), its peak the larger worker's ($peak; alone: $big and $small), not their sum" \
	sh -c "[ \$(grep -c '^@autobatch-task report {\"step_s\": [0-9.]*, \"samples\": [0-9]*, \"length\": 256}\$' '$dir/two.out') -eq 4 ] &&
	       [ \$(grep -c '^@autobatch-task report {\"lengths\": {\"run_longest\": 256,' '$dir/two.out') -eq 1 ] &&
	       [ -n '$big' ] && [ -n '$small' ] && [ '$peak' -ge \$(($big * 9 / 10)) ] &&
	       [ '$peak' -le \$(($big * 11 / 10)) ] && [ '$peak' -lt \$(($big + $small * 9 / 10)) ] &&
	       [ \"\$(tail -n1 '$dir/two.out')\" = '@autobatch-task end status 0' ]" ||
	cat "$dir/two.out" "$dir/two.err"

# torchrun itself (a launcher by name; tests/python/torchrun-fixes for Debian's builds), two
# workers at batch 64: the task holds each to a capacity 30% over one worker's alone from
# their start, and every peak it says is one worker's; before their reports came it said
# their group's sum (launcher and both workers: 930 MiB where one held 591 in a DDP step)
echo '{"batch_size": 64, "steps": 6}' >"$dir/w2.json"
PYTHONPATH="$hook:$src/tests/python/torchrun-fixes" AUTOBATCH_TRIAL=1 AUTOBATCH_TRIAL_STEPS=3 USE_LIBUV=0 \
	"$probe" task --capacity $((big * 13 / 10)) -- "$py" -m torch.distributed.run --standalone \
	--nproc_per_node=2 "$src/tests/python/plain_torch.py" "$dir/w2.json" >"$dir/run.out" 2>"$dir/run.err"
rc=$?
most=$(sed -n 's/^@autobatch-task peak //p' "$dir/run.out" | sort -n | tail -n1)
last=$(sed -n 's/^@autobatch-task peak //p' "$dir/run.out" | tail -n1)
check "torchrun's two workers: held each to 1.3 times one's memory, none over (exit $rc); its peaks one worker's (largest $most, last $last; one alone: $big)" \
	sh -c "[ $rc -eq 0 ] && ! grep -q '^@autobatch-task over' '$dir/run.out' && [ -n '$big' ] &&
	       [ -n '$most' ] && [ '$most' -le \$(($big * 11 / 10)) ] && [ '$last' -ge \$(($big * 9 / 10)) ] &&
	       [ \$(grep -c '^@autobatch-task report {\"step_s\": [0-9.]*, \"samples\": [0-9]*, \"length\": 256}\$' '$dir/run.out') -eq 4 ]" ||
	{ grep -v report "$dir/run.out" | tail -n 5; tail -n 20 "$dir/run.err"; }

# the larger worker goes over a capacity between the two: the task ends at once
echo '{"batch_size": 64, "steps": 1000}' >"$dir/w1.json"
start=$(date +%s)
trial_env "$probe" task --capacity $(( (big + small) / 2 )) -- "$py" "$src/tests/python/launch_workers.py" \
	"$src/tests/python/plain_torch.py" "$dir/w0.json" "$dir/w1.json" >"$dir/over.out" 2>"$dir/over.err"
rc=$? took=$(($(date +%s) - start))
check "a worker over the capacity ends the task at once ($took s), exit 3, saying so" \
	sh -c "[ $rc -eq 3 ] && [ $took -lt 60 ] && grep -q '^@autobatch-task over [0-9]*\$' '$dir/over.out'" ||
	cat "$dir/over.out" "$dir/over.err"
sleep 1
check "no worker is left running" sh -c "! pgrep -f '$dir/w[01].json' >/dev/null"
exit $failed
