#!/usr/bin/env bats
# Faults while probing, on the real testbed: the probe killed, slurmd restarted, the node
# drained, a read-only config directory, a full disk, a trial that forks and exits, a probe
# that floods its output. Each ends with a precise message (or a correct decision), the
# original config intact, no process, step or temp file left, and on_failure respected.

load helpers

setup_file() { require_testbed; }
setup() { use_toy_config; cp cfg.yaml orig.yaml; export TMPDIR=$BATS_TEST_TMPDIR/tmp; mkdir -p "$TMPDIR"; }
teardown() {
	reset_plugstack
	chmod -R u+w "$BATS_TEST_TMPDIR" 2>/dev/null || true
	scontrol update nodename=node1 state=resume >/dev/null 2>&1 || true
	pkill_here -f "autobatch-fault-marker" 2>/dev/null || true
}

# nothing of the probe left: no process with the marker, no trial directory, no temp file
# beside the config, no probe step
nothing_left() {
	local i
	for i in $(seq 20); do
		pgrep_here -f autobatch-fault-marker >/dev/null || break
		sleep 0.5
	done
	if pgrep_here -af autobatch-fault-marker; then echo "a probe process survived" >&2; return 1; fi
	[ -z "$(ls -A "$TMPDIR")" ] || { echo "left in TMPDIR: $(ls -A "$TMPDIR")" >&2; return 1; }
	[ -z "$(ls -a | grep '\.autobatch\.')" ] || { echo "temp files: $(ls -a)" >&2; return 1; }
	no_probe_step_left
}

unchanged() {
	cmp -s cfg.yaml orig.yaml || { echo "config changed" >&2; return 1; }
	[ ! -e cfg.yaml.autobatch~ ]
}

@test "the probe killed by SIGKILL mid-trial: continue launches unchanged, nothing is left" {
	set_plugstack ""
	# the trial kills its parent, the probe, then would run on as an orphan
	run --separate-stderr srun_t -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command='kill -KILL $PPID; exec sleep 300 autobatch-fault-marker' \
		toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	assert_line_in "autobatch: the probe printed no JSON report (probe step exit status 137" "$stderr"
	assert_line_in "launching with the original settings (on_failure=continue)" "$stderr"
	assert_line_in "toy_train: batch 8 from cfg.yaml" "$output"
	unchanged
	# the killed probe could not remove its trial directory; the next probe does
	ls "$TMPDIR" | grep -q '^autobatch-probe\.'
	run --separate-stderr srun_t -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	rm -f cfg.yaml.autobatch~ autobatch-*.json
	nothing_left
}

@test "the probe killed by SIGKILL mid-trial: abort does not launch" {
	set_plugstack "on_failure=abort" required
	run --separate-stderr srun_t -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command='kill -KILL $PPID; exec sleep 300 autobatch-fault-marker' \
		toy_train --config cfg.yaml
	[ "$status" -ne 0 ]
	assert_line_in "the step is not launched (on_failure=abort)" "$stderr"
	refute grep -q "toy_train:" <<<"$output"
	unchanged
	rm -rf "${TMPDIR:?}"/autobatch-probe.*
	nothing_left
}

@test "slurmd restarted while probing: the probe step runs on and the decision applies" {
	set_plugstack ""
	# restarted once the probe step runs, while its trial sleeps: before it, a restart would
	# meet srun's launch of the probe step, not the probing
	( wait_for_step autobatch-probe; "$TESTBED" restart-slurmd >/dev/null 2>&1 ) &
	run --separate-stderr srun_t -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command='sleep 1; exec toy_train --config "$AUTOBATCH_CONFIG"' \
		toy_train --config cfg.yaml
	wait
	[ "$status" -eq 0 ]
	b=$(config_batch)
	[ "$b" -gt 8 ]
	assert_line_in "autobatch: chose batch $b" "$stderr"
	assert_line_in "toy_train: batch $b from cfg.yaml" "$output"
	nothing_left
}

@test "the node drained while probing: running steps finish, the decision applies" {
	set_plugstack ""
	# drained once the probe step runs: a drain before srun's allocation (the previous job's
	# steps still completing on a loaded machine) would only keep the job pending
	( wait_for_step autobatch-probe; scontrol update nodename=node1 state=drain reason=autobatch-test ) &
	run --separate-stderr srun_t -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command='sleep 2; exec toy_train --config "$AUTOBATCH_CONFIG"' \
		toy_train --config cfg.yaml
	wait
	scontrol update nodename=node1 state=resume
	[ "$status" -eq 0 ]
	b=$(config_batch)
	[ "$b" -gt 8 ]
	assert_line_in "toy_train: batch $b from cfg.yaml" "$output"
	nothing_left
}

@test "a read-only config directory: one message, nothing written, both policies" {
	set_plugstack ""
	chmod 0555 .
	run --separate-stderr srun_t -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		toy_train --config cfg.yaml
	chmod 0755 .
	[ "$status" -eq 0 ]
	assert_line_in "of cfg.yaml is read-only: nothing was changed" "$stderr"
	assert_line_in "launching with the original settings (on_failure=continue)" "$stderr"
	assert_line_in "toy_train: batch 8 from cfg.yaml" "$output"
	unchanged
	set_plugstack "on_failure=abort" required
	chmod 0555 .
	run --separate-stderr srun_t -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-refresh toy_train --config cfg.yaml
	chmod 0755 .
	[ "$status" -ne 0 ]
	assert_line_in "the step is not launched (on_failure=abort)" "$stderr"
	unchanged
	nothing_left
}

@test "the disk full while writing the config: the original intact, no backup, no temp file" {
	set_plugstack ""
	# a config larger than the file size limit srun runs under: writing the new file fails
	# with EFBIG, the path a full disk (ENOSPC) takes too
	head -c 30000 /dev/zero | tr '\0' '#' >>cfg.yaml
	echo >>cfg.yaml
	cp cfg.yaml orig.yaml
	run --separate-stderr bash -c 'trap "" XFSZ; ulimit -f 20; exec timeout 120 srun -N1 -n1 \
		--autobatch=0.8 --autobatch-config=cfg.yaml toy_train --config cfg.yaml'
	[ "$status" -eq 0 ]
	assert_line_in "autobatch: writing the new file beside cfg.yaml: File too large: cfg.yaml was not changed" "$stderr"
	assert_line_in "launching with the original settings (on_failure=continue)" "$stderr"
	unchanged
	nothing_left
}

@test "a trial that forks children and exits: no orphan survives the trial" {
	set_plugstack ""
	run --separate-stderr srun_t -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		--autobatch-trial-command='(sleep 300 autobatch-fault-marker &); (setsid sleep 301 autobatch-fault-marker &); exec toy_train --config "$AUTOBATCH_CONFIG"' \
		toy_train --config cfg.yaml
	[ "$status" -eq 0 ]
	b=$(config_batch)
	assert_line_in "toy_train: batch $b from cfg.yaml" "$output"
	refute pgrep_here -af autobatch-fault-marker
	nothing_left
}

# the peak resident memory (KiB) of the largest process "$@" ran (srun: time waits for
# timeout, which waits for srun, so srun's maximum is in the children's usage)
peak_rss() {
	/usr/bin/time -f '%M' -o "$BATS_TEST_TMPDIR/rss" "$@" >"$BATS_TEST_TMPDIR/out" \
		2>"$BATS_TEST_TMPDIR/err"
	tail -n 1 "$BATS_TEST_TMPDIR/rss"
}

@test "a probe that floods stdout and stderr: srun's memory stays bounded, one message" {
	cat >flood <<'EOF'
#!/bin/sh
head -c 200000000 /dev/zero | tr '\0' x
head -c 50000000 /dev/zero | tr '\0' y >&2
yes 'flood line from the probe' | head -n 100000 >&2
EOF
	chmod +x flood
	set_plugstack "probe=$PWD/flood"
	base=$(peak_rss timeout 60 srun -N1 -n1 true)
	rss=$(peak_rss timeout 120 srun -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml \
		toy_train --config cfg.yaml)
	echo "# srun's peak RSS while the probe wrote 250 MB: $rss KiB (a plain srun: $base KiB)" >&3
	[ "$rss" -lt $((base + 16 * 1024)) ]
	grep -q "autobatch: the probe printed no JSON report" "$BATS_TEST_TMPDIR/err"
	grep -q "toy_train: batch 8 from cfg.yaml" "$BATS_TEST_TMPDIR/out"
	unchanged
	nothing_left
}
