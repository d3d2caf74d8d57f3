#!/usr/bin/env bats
# Concurrency and load on the testbed: 32 sruns started together against one config and one
# cache, then 60 sequential cache hits (AUTOBATCH_LOAD_HITS), enough to see a leak between
# the first and last 20 runs and a file or descriptor left per hit. Prints its figures as TAP
# comments.

load helpers

setup_file() { require_testbed; }
setup() { use_toy_config; set_plugstack ""; }
teardown() { reset_plugstack; }

@test "32 concurrent sruns: all succeed, one decision, the config never torn, the cache sound" {
	local n=32 i
	# a watcher reads the config as fast as it can while the sruns run: every state it sees
	# must parse and hold a whole number
	(
		states=0 bad=0
		while [ ! -e stop ]; do
			v=$(autobatch-probe config get cfg.yaml data.batch_size 2>/dev/null) || v=bad
			case "$v" in '' | *[!0-9]*) bad=$((bad + 1)) ;; esac
			states=$((states + 1))
		done
		echo "$states $bad" >watch
	) &
	local watcher=$! t0=$(date +%s.%N)
	for i in $(seq $n); do
		timeout 300 srun -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml \
			toy_train --config cfg.yaml >"out.$i" 2>"err.$i" &
	done
	local failed=0
	for job in $(jobs -p); do
		[ "$job" = "$watcher" ] && continue
		wait "$job" || failed=$((failed + 1))
	done
	local t1=$(date +%s.%N)
	touch stop
	wait "$watcher"
	read -r states bad <watch
	local b=$(config_batch)
	echo "# 32 concurrent sruns: $failed failed, $(awk "BEGIN {printf \"%.1f\", $t1 - $t0}") s in all; the watcher read the config $states times, $bad unparsable" >&3
	echo "# probe steps run: $(grep -l 'autobatch: trial 1' err.* | wc -l); decisions from the cache: $(grep -l 'cached decision' err.* | wc -l)" >&3
	[ "$failed" -eq 0 ]
	[ "$bad" -eq 0 ]
	[ "$b" -gt 8 ]
	# every task of every srun ran with the one batch size
	[ "$(grep -ho 'toy_train: batch [0-9]* from cfg.yaml' out.* | sort -u)" = "toy_train: batch $b from cfg.yaml" ]
	[ "$(grep -l "toy_train: batch $b" out.* | wc -l)" -eq "$n" ]
	# the cache holds one entry, and it is whole JSON
	local entries=$(find "$XDG_CACHE_HOME/autobatch" -name '[0-9a-f]*.json' | wc -l)
	[ "$entries" -eq 1 ]
	find "$XDG_CACHE_HOME/autobatch" -name '*.json' -exec python3 -m json.tool {} \; >/dev/null
	no_probe_step_left
}

# fds open in a process, and its resident memory in KiB
fds() { ls /proc/"$1"/fd 2>/dev/null | wc -l; }
rss() { awk '/^VmRSS/ {print $2}' /proc/"$1"/status; }

@test "sequential cache hits: no growth in srun's memory or files, nor in the daemons'" {
	local i peak first last slurmd slurmctld hits=${AUTOBATCH_LOAD_HITS:-60}
	srun_t -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml toy_train --config cfg.yaml \
		>/dev/null 2>&1
	slurmd=$(cat "$AUTOBATCH_TESTBED/run/slurmd.pid")
	slurmctld=$(cat "$AUTOBATCH_TESTBED/run/slurmctld.pid")
	local d_fds0=$(fds "$slurmd") c_fds0=$(fds "$slurmctld") c_rss0=$(rss "$slurmctld")
	local cache_files0=$(find "$XDG_CACHE_HOME" | wc -l) t0=$(date +%s.%N)
	: >peaks
	for i in $(seq "$hits"); do
		# srun's own peak memory and open files, read just before it exits, via strace-free
		# sampling would miss the end; /usr/bin/time's maximum resident size does not
		/usr/bin/time -f '%M' -o rss.$i timeout 60 srun -N1 -n1 --autobatch=0.8 \
			--autobatch-config=cfg.yaml toy_train --config cfg.yaml >out 2>err
		grep -q 'autobatch: cached decision' err
		cat rss.$i >>peaks
	done
	local t1=$(date +%s.%N)
	first=$(head -n 20 peaks | sort -n | sed -n 10p)
	last=$(tail -n 20 peaks | sort -n | sed -n 10p)
	local d_fds1=$(fds "$slurmd") c_fds1=$(fds "$slurmctld") c_rss1=$(rss "$slurmctld")
	local cache_files1=$(find "$XDG_CACHE_HOME" | wc -l)
	echo "# $hits cache hits in $(awk "BEGIN {printf \"%.1f\", $t1 - $t0}") s; srun peak RSS median of runs 1-20: $first KiB, of the last 20: $last KiB" >&3
	echo "# slurmd fds $d_fds0 -> $d_fds1; slurmctld fds $c_fds0 -> $c_fds1, RSS $c_rss0 -> $c_rss1 KiB; files in the cache $cache_files0 -> $cache_files1" >&3
	[ "$last" -le $((first + 1024)) ]
	[ "$cache_files1" -eq "$cache_files0" ]
	[ "$d_fds1" -le $((d_fds0 + 2)) ]
	[ "$c_fds1" -le $((c_fds0 + 2)) ]
}
