#!/bin/sh
# probe-watch.t - `autobatch-probe watch`, the closed loop's half on the node, without Slurm
# (TAP): it follows a process that is not its child (a task of the real step) while it runs,
# with the process's children; over the limit its decision promised, it says so in one line
# and writes NAME.over beside the cache entry on its descriptor, at the first sample over it,
# while the task runs; within it, nothing; its
# usage. Through srun: tests/slurm/13-pytorch.bats (the closed loop).
probe=${AUTOBATCH_PROBE:-probe/autobatch-probe}
dir=$(mktemp -d /tmp/autobatch-probe-watch.XXXXXX)
trap 'rm -rf "$dir"' EXIT
. "$(dirname "$0")/tap.sh"
echo "1..4"
entry=0123456789abcdef.json
mkdir -m 0700 "$dir/cache"

# watch LIMIT: a task of 4 s whose child holds 64 MiB, watched from outside its tree (a new
# child is found within 4 samples, 2 s)
watch() {
	sh -c 'python3 -c "import time; x = bytearray(64 << 20); time.sleep(4)" & wait' &
	task=$!
	SLURMD_NODENAME=node7 "$probe" watch --pid "$task" --limit "$1" --batch 32 --task 3 \
		--entry $entry --cache-fd 3 3<"$dir/cache" 2>"$dir/watch.err"
	echo $? >"$dir/watch.rc"
	if kill -0 "$task" 2>/dev/null; then echo yes; else echo no; fi >"$dir/alive"
	wait "$task"
}

watch $((32 << 20))
check "over the limit: one line naming the task, its node, its peak and the batch, said while the task runs" \
	sh -c "[ \"\$(cat '$dir/watch.rc')\" = 0 ] && [ \$(wc -l <'$dir/watch.err') -eq 1 ] &&
	       [ \"\$(cat '$dir/alive')\" = yes ] &&
	       grep -q '^autobatch: task 3 on node7 reached [0-9.]* MiB, over the 32.0 MiB limit its decision (batch 32) promised: .*the cached decision is marked' '$dir/watch.err'" ||
	cat "$dir/watch.err" >&2
check "and NAME.over in the cache, with the run's figures" \
	sh -c "python3 -c 'import json, sys; o = json.load(open(sys.argv[1])); sys.exit(not (o[\"batch\"] == 32 and o[\"limit_bytes\"] == 32 << 20 and 32 << 20 < o[\"peak_bytes\"] < 100 << 20 and o[\"task\"] == 3 and o[\"node\"] == \"node7\"))' '$dir/cache/$entry.over'"
rm -f "$dir/cache/$entry.over"
watch $((256 << 20))
check "within the limit: nothing said, nothing marked" \
	sh -c "[ ! -s '$dir/watch.err' ] && [ ! -e '$dir/cache/$entry.over' ]"
"$probe" watch --pid 1x --limit 5 --batch 1 2>"$dir/usage.err"
check "a bad argument is refused with the usage, exit 2" \
	sh -c "[ $? -eq 2 ] && grep -q '^usage: autobatch-probe watch --pid PID' '$dir/usage.err'"
exit $failed
