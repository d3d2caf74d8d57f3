#!/usr/bin/env bats
# The decision cache: a second identical srun --autobatch decides without a probe step;
# --autobatch-refresh, a changed config (other than its batch values), command, fraction or
# program file probe again; a corrupt entry is ignored and replaced.

load helpers

setup_file() { require_testbed; reset_plugstack; }
setup() { use_toy_config; cp cfg.yaml orig.yaml; }
teardown() { reset_plugstack; } # a test that set its own and failed

# probe_run [srun args...] [-- command]: the toy step at 0.8 unless told otherwise.
toy() {
	run --separate-stderr srun_t -N1 -n1 --gpus=1 --autobatch-config=cfg.yaml "$@"
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
}

probed() { grep -q "autobatch: trial 1:" <<<"$stderr"; }
cached() { grep -q "autobatch: cached decision: batch $(config_batch) " <<<"$stderr"; }

@test "a second identical srun decides from the cache, without a probe step" {
	toy --autobatch=0.8 toy_train --config cfg.yaml
	probed
	b=$(config_batch)
	toy --autobatch=0.8 toy_train --config cfg.yaml
	refute probed
	cached
	[ "$(config_batch)" = "$b" ]
	assert_line_in "toy_train: batch $b from cfg.yaml, AUTOBATCH_BATCH_SIZE=$b" "$output"
	assert_line_in "cfg.yaml already says so" "$stderr"
	job=$(ls autobatch-*.json | sort -t- -k2 -n | tail -n1 | sed 's/autobatch-\([0-9]*\)\..*/\1/')
	# the report of the cached decision says so; the probe's said miss
	grep -q '"cache":"hit"' autobatch-$job.*.json
	[ "$(grep -l '"cache":"miss"' autobatch-*.json | wc -l)" -eq 1 ]
	[ "$(ls "$XDG_CACHE_HOME"/autobatch/[0-9a-f]*.json | wc -l)" -eq 1 ]
	# and the start a sweep's next job would verify
	[ "$(ls "$XDG_CACHE_HOME"/autobatch/warm-*.json | wc -l)" -eq 1 ]
	# slurmd launched the job's own step and no probe step beside it
	grep -q "launch task StepId=$job.0 " "$AUTOBATCH_TESTBED/log/slurmd.log"
	refute grep -q "launch task StepId=$job.1 " "$AUTOBATCH_TESTBED/log/slurmd.log"
}

@test "the batch values the plugin writes do not change the key" {
	toy --autobatch=0.8 toy_train --config cfg.yaml
	b=$(config_batch)
	sed -i 's/^  batch_size: [0-9]*/  batch_size: 17/' cfg.yaml
	toy --autobatch=0.8 toy_train --config cfg.yaml
	refute probed
	[ "$(config_batch)" = "$b" ]
}

@test "--autobatch-refresh probes again" {
	toy --autobatch=0.8 toy_train --config cfg.yaml
	toy --autobatch=0.8 --autobatch-refresh toy_train --config cfg.yaml
	probed
}

@test "a changed config, command or fraction misses" {
	toy --autobatch=0.8 toy_train --config cfg.yaml
	sed -i 's/max_steps: 3/max_steps: 2/' cfg.yaml
	toy --autobatch=0.8 toy_train --config cfg.yaml
	probed
	toy --autobatch=0.8 toy_train --config ./cfg.yaml
	probed
	toy --autobatch=0.7 toy_train --config cfg.yaml
	probed
	toy --autobatch=0.7 toy_train --config cfg.yaml
	refute probed
}

@test "an edited program or script misses; a log it writes, executable or not, does not" {
	printf '#!/bin/sh\n# v1\nexec toy_train "$@"\n' >train.sh
	printf '# helper v1\n' >aux.py
	chmod +x train.sh
	touch run.log
	chmod +x run.log # a file system that marks every file executable
	toy --autobatch=0.8 ./train.sh --config cfg.yaml --log=run.log --aux=aux.py
	probed
	echo "a line the run wrote" >>run.log
	toy --autobatch=0.8 ./train.sh --config cfg.yaml --log=run.log --aux=aux.py
	refute probed
	sed -i 's/# v1/# v2/' train.sh
	toy --autobatch=0.8 ./train.sh --config cfg.yaml --log=run.log --aux=aux.py
	probed
	toy --autobatch=0.8 ./train.sh --config cfg.yaml --log=run.log --aux=aux.py
	refute probed
	sed -i 's/v1/v2/' aux.py
	toy --autobatch=0.8 ./train.sh --config cfg.yaml --log=run.log --aux=aux.py
	probed
}

@test "a corrupt entry is ignored and replaced" {
	toy --autobatch=0.8 toy_train --config cfg.yaml
	entry=$(ls "$XDG_CACHE_HOME"/autobatch/[0-9a-f]*.json)
	printf '{"status":"ok","batch_size":"lots' >"$entry"
	toy -v --autobatch=0.8 toy_train --config cfg.yaml
	probed
	assert_line_in "ignoring the corrupt cache entry" "$stderr"
	grep -q '"status":"ok"' "$entry"
	toy --autobatch=0.8 toy_train --config cfg.yaml
	refute probed
}

@test "cache=off always probes" {
	set_plugstack "cache=off"
	toy --autobatch=0.8 toy_train --config cfg.yaml
	toy --autobatch=0.8 toy_train --config cfg.yaml
	probed
	[ ! -d "$XDG_CACHE_HOME/autobatch" ]
	reset_plugstack
}

# site_cache: a site cache_dir as the admin guide says to make it (root's, mode 1777)
site_cache() {
	[ "$(id -u)" = 0 ] || skip "a site cache_dir must be root's: run as root"
	install -d -m 1777 "$BATS_TEST_TMPDIR/site"
	set_plugstack "cache_dir=$BATS_TEST_TMPDIR/site"
}

@test "a site cache_dir: each user's entries in their own subdirectory, a second srun hits" {
	site_cache
	toy --autobatch=0.8 toy_train --config cfg.yaml
	probed
	toy --autobatch=0.8 toy_train --config cfg.yaml
	refute probed
	cached
	[ "$(stat -c %a "$BATS_TEST_TMPDIR/site/0")" = 700 ]
	[ "$(ls "$BATS_TEST_TMPDIR"/site/0/[0-9a-f]*.json | wc -l)" -eq 1 ]
	[ ! -d "$XDG_CACHE_HOME/autobatch" ]
}

@test "a user's subdirectory someone else made first: said with its owner, the user's own cache stands in" {
	site_cache
	# anyone may make any name in a 1777 directory, and only its maker or root removes it
	install -d -m 0700 -o nobody "$BATS_TEST_TMPDIR/site/0"
	toy --autobatch=0.8 toy_train --config cfg.yaml
	probed
	assert_line_in "autobatch: not using the site cache: someone else's or an open directory is at $BATS_TEST_TMPDIR/site/0 (owner uid $(id -u nobody), mode 0700); the admin must remove it; using your own cache instead" "$stderr"
	toy --autobatch=0.8 toy_train --config cfg.yaml
	refute probed
	cached
	[ "$(ls "$XDG_CACHE_HOME"/autobatch/[0-9a-f]*.json | wc -l)" -eq 1 ]
	[ -z "$(ls -A "$BATS_TEST_TMPDIR/site/0")" ]
}

@test "identical sruns started together probe once and all see one decision" {
	for i in 1 2 3 4 5 6; do
		timeout 180 srun -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.yaml \
			toy_train --config cfg.yaml >"out.$i" 2>"err.$i" &
	done
	wait
	cat out.* >all.out
	b=$(config_batch)
	[ "$(grep -c "^toy_train: batch $b from cfg.yaml, AUTOBATCH_BATCH_SIZE=$b\$" all.out)" -eq 6 ]
	[ "$(cat err.* | grep -c 'autobatch: trial 1:')" -eq 1 ]
	[ "$(cat err.* | grep -c 'autobatch: cached decision')" -eq 5 ]
	grep -q "^  batch_size: $b " cfg.yaml
	# the file was never torn: what is left parses and only the batch line moved
	diff <(grep -v '^  batch_size:' orig.yaml) <(grep -v '^  batch_size:' cfg.yaml)
}
