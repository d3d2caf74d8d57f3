#!/usr/bin/env bats
# Containers (issue 42): a real pyxis and enroot, built from their unmodified sources
# (contrib/testbed/pyxis), in the testbed's plugstack before autobatch, and a squashfs image of
# Debian 12 with python3 and PyTorch (`testbed image`). Needs `testbed up --pyxis`; on any
# other testbed each test says it is skipped. The probe step runs on the host; each trial is a
# step of the job that pyxis puts in the user's image, one named container imported once for
# all of them and removed after (issue 42).

load ../slurm/helpers

setup_file() {
	require_testbed
	reset_plugstack
}

setup() {
	grep -q spank_pyxis "$AUTOBATCH_TESTBED/etc/plugstack.conf" ||
		skip "no pyxis in this testbed (contrib/testbed/testbed up --pyxis)"
	IMG=$("$TESTBED" image)
	use_python_program plain_torch.py '{"batch_size": 4, "steps": 4}'
	# what glibc maps in the image, through srun's environment: huge pages, at the fixed
	# addresses of the testbed's slurmd (tests/python/gpu-like-memory.sh; with 4 KiB pages
	# each trial's steps faulted in at 13 us a page, and the suite passed its 1200 s after
	# 4 of 7 tests in the official CI of 2026-12-01)
	export GLIBC_TUNABLES=glibc.malloc.hugetlb=1
	# where each process of the program ran: a trial's in the image with the trial's files
	# mounted (/tmp/.autobatch: the probe's own), the real step's in the image (enroot's root)
	cat >where.py <<'EOF'
import os, runpy, sys
root = [l.split() for l in open("/proc/self/mountinfo") if l.split()[4] == "/"][-1]
where = ("inside" if os.path.isdir("/tmp/.autobatch") else "outside") \
    if os.environ.get("AUTOBATCH_TRIAL") else ("container" if root[3] != "/" else "host")
with open("where.log", "a") as f:
    f.write("%s %s\n" % ("trial" if os.environ.get("AUTOBATCH_TRIAL") else "run", where))
if where == "inside":  # what the probe brought in: the names its loader looks for
    with open("inside.txt", "w") as f:
        f.write("\n".join(sorted(os.listdir("/tmp/.autobatch"))) + "\n")
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
EOF
	# searching to 16 at most: the checks are of where trials run and what reaches the tasks,
	# not of a choice near the limit; each trial is a PyTorch start-up per task in the image
	# (the four probing tests took 190-270 s each in local CI run 56, searching to 90)
	set_plugstack "probe_args=\"$(testbed_probe_args | sed 's/capacity=256MiB/capacity=1GiB/') --max 16\" startup_seconds=120"
	# what the user mounts: the job's directory, as on a cluster's shared file system
	MOUNT="--container-mounts=$BATS_TEST_TMPDIR:$BATS_TEST_TMPDIR --container-workdir=$BATS_TEST_TMPDIR"
}

teardown() { reset_plugstack; }

# enroot's list on every node, in its network namespace (each node keeps its own containers:
# contrib/testbed/testbed, pyxis_setup), or on the one node
enroot_list() {
	local ns
	for ns in "$AUTOBATCH_TESTBED"/run/node*.netns; do
		[ -f "$ns" ] || { enroot list; return; }
		nsenter --net=/proc/"$(cat "$ns")"/ns/net enroot list || return
	done
}

remove_all_containers() {
	local ns n
	for ns in "$AUTOBATCH_TESTBED"/run/node*.netns; do
		[ -f "$ns" ] || { for n in $(enroot list); do enroot remove -f "$n" >/dev/null; done; return; }
		for n in $(nsenter --net=/proc/"$(cat "$ns")"/ns/net enroot list); do
			nsenter --net=/proc/"$(cat "$ns")"/ns/net enroot remove -f "$n" >/dev/null
		done
	done
}

# marks: each slurmd log's length now ("FILE LINES" a line each), for trial_container_lines
marks() {
	local f
	for f in "$AUTOBATCH_TESTBED"/log/slurmd*.log; do echo "$f $(wc -l <"$f")"; done
}

# no container of the job is left in enroot's list, on any node
no_container_left() {
	run enroot_list
	[ "$status" -eq 0 ]
	[ -z "$output" ] || { echo "left: $output" >&2; return 1; }
}

@test "pyxis and enroot on the testbed: srun --container-image runs a real PyTorch program in the image, on two tasks" {
	run --separate-stderr timeout 300 srun -N1 -n2 --container-image="$IMG" $MOUNT \
		python3 -c 'import torch; print("torch", torch.__version__, "in Debian", open("/etc/debian_version").read().strip())'
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	[ "$(grep -c '^torch .* in Debian 12' <<<"$output")" -eq 2 ]
	no_container_left
}

# slurmd's pyxis lines for the trials' container, each log's after its mark in $1
trial_container_lines() {
	local f n
	while read -r f n; do
		tail -n +"$((n + 1))" "$f"
	done <<<"$1" | grep 'pyxis: .*pyxis_autobatch-trial-\|reusing existing container filesystem'
}

@test "--autobatch in a container: the trials run in the image, imported once; the choice reaches both tasks; nothing is left" {
	from=$(marks)
	run --separate-stderr timeout 500 srun -N1 -n2 --container-image="$IMG" $MOUNT --autobatch=0.8 \
		--autobatch-config=cfg.json --autobatch-key=batch_size python3 where.py plain_torch.py cfg.json
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	line=$(grep '^autobatch: chose batch' <<<"$stderr")
	batch=$(sed -n 's/^autobatch: chose batch \([0-9]*\) in \([0-9]*\) trials.*/\1/p' <<<"$line")
	trials=$(sed -n 's/^autobatch: chose batch \([0-9]*\) in \([0-9]*\) trials.*/\2/p' <<<"$line")
	assert_line_in "; trials of the whole step, 1 node x 2 tasks; trials ran in its container (pyxis: $IMG); wrote cfg.json" "$line"
	[ "$(grep -c "^trained 4 updates at batch $batch\$" <<<"$output")" -eq 2 ]
	[ "$(sed -n 's/.*"batch_size": \([0-9]*\).*/\1/p' cfg.json)" = "$batch" ]
	report=$(ls autobatch-*.json)
	[ "$(sed -n 's/.*"container":"\([^"]*\)".*/\1/p' "$report")" = "$IMG" ]
	# every trial's two processes ran in the image, the hook inside; the real step's too
	echo "# where: $(sort where.log | uniq -c | tr -s ' \n' ' '); $trials trials" >&3
	[ "$(grep -c '^trial inside$' where.log)" -ge $((2 * trials)) ]
	refute grep -q 'trial outside\|run host' where.log
	[ "$(grep -c '^run container$' where.log)" -eq 2 ]
	# the probe, its loader and its libraries by the names the loader asks for (a library's
	# soname, not the file it links to: an image without them still runs the task)
	# (the probe as the testbed installs it: autobatch-probe.bin behind a wrapper)
	grep -q '^autobatch-probe' inside.txt || { echo "no probe inside: $(cat inside.txt)" >&2; return 1; }
	for f in ld-linux-x86-64.so.2 libjson-c.so.5 libyaml-0.so.2 libc.so.6; do
		grep -qx "$f" inside.txt || { echo "not inside: $f; $(cat inside.txt)" >&2; return 1; }
	done
	# one import for all the trials, then the same container filesystem again
	lines=$(trial_container_lines "$from")
	[ "$(grep -c 'creating container filesystem: pyxis_autobatch-trial-' <<<"$lines")" -eq 1 ] || { echo "$lines" >&2; return 1; }
	[ "$(grep -c 'reusing existing container filesystem' <<<"$lines")" -ge $((trials - 1)) ] || { echo "$lines" >&2; return 1; }
	no_container_left
}

@test "over three nodes: each trial a step over all three, in the image on each, imported once on each; nothing is left on any" {
	[ -f "$AUTOBATCH_TESTBED/run/node3.netns" ] || skip "a testbed of fewer than three nodes"
	from=$(marks)
	run --separate-stderr timeout 500 srun -N3 -n3 --container-image="$IMG" $MOUNT --autobatch=0.8 \
		--autobatch-trial-shape=step --autobatch-config=cfg.json --autobatch-key=batch_size \
		python3 where.py plain_torch.py cfg.json
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	line=$(grep '^autobatch: chose batch' <<<"$stderr")
	assert_line_in "; trials of the whole step, 3 nodes x 1 task; trials ran in its container (pyxis: $IMG)" "$line"
	batch=$(sed -n 's/^autobatch: chose batch \([0-9]*\) .*/\1/p' <<<"$line")
	[ "$(grep -c "^trained 4 updates at batch $batch\$" <<<"$output")" -eq 3 ]
	refute grep -q 'trial outside\|run host' where.log
	lines=$(trial_container_lines "$from")
	[ "$(grep -c 'creating container filesystem: pyxis_autobatch-trial-' <<<"$lines")" -eq 3 ] || { echo "$lines" >&2; return 1; }
	no_container_left
}

# sbatch_decided: job.sh run by sbatch --wait on one node, two tasks: decided from trials in
# the image, both tasks trained at the choice
sbatch_decided() {
	run timeout 500 sbatch --wait -N1 -n2 -o job.out job.sh
	[ "$status" -eq 0 ] || { cat job.out >&2; return 1; }
	grep -q "^autobatch: chose batch .*; trials ran in its container (pyxis: $IMG)" job.out || { cat job.out >&2; return 1; }
	batch=$(sed -n 's/^autobatch: chose batch \([0-9]*\) .*/\1/p' job.out)
	[ "$(grep -c "^trained 4 updates at batch $batch\$" job.out)" -eq 2 ] || { cat job.out >&2; return 1; }
}

@test "--autobatch in a container inside sbatch: decided from trials in the image, nothing left" {
	cat >job.sh <<EOF
#!/bin/sh
srun -N1 -n2 --container-image="$IMG" $MOUNT --autobatch=0.8 --autobatch-config=cfg.json \
	--autobatch-key=batch_size python3 where.py plain_torch.py cfg.json
EOF
	sbatch_decided
	refute grep -q 'trial outside' where.log
	no_container_left
}

# #SBATCH --container-image: pyxis runs the batch script itself in the image, and each srun
# in it gets the job's container options (SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_*). Slurm's
# client is not in the image: the job mounts it, as sites that call srun from inside a
# container do (srun, its libraries and plugins, the plugstack's plugins, slurm.conf and
# munge's socket under the testbed)
slurm_mounts() {
	local pyxis m
	pyxis=$(sed -n 's/^required \([^ ]*spank_pyxis.so\) .*/\1/p' "$AUTOBATCH_TESTBED/etc/plugstack-pyxis")
	for m in "$(command -v srun)" /usr/lib/x86_64-linux-gnu/slurm-wlm \
		/usr/lib/x86_64-linux-gnu/libmunge.so.2 "$AUTOBATCH_TESTBED" "$(dirname "$pyxis")"; do
		printf ',%s:%s' "$m" "$m"
	done
}

@test "#SBATCH --container-image: the batch script in the image calls srun --autobatch; trials in the image, nothing left" {
	cat >job.sh <<EOF
#!/bin/sh
#SBATCH --container-image=$IMG
#SBATCH --container-mounts=$BATS_TEST_TMPDIR:$BATS_TEST_TMPDIR$(slurm_mounts)
#SBATCH --container-workdir=$BATS_TEST_TMPDIR
python3 where.py /dev/null
srun -n2 --autobatch=0.8 --autobatch-config=cfg.json --autobatch-key=batch_size \
	python3 where.py plain_torch.py cfg.json
EOF
	sbatch_decided
	# the batch script ran in the image; each trial's processes and both tasks too
	[ "$(grep -c '^run container$' where.log)" -eq 3 ] || { sort where.log | uniq -c >&2; return 1; }
	grep -q '^trial inside$' where.log
	refute grep -q 'trial outside\|run host' where.log
	no_container_left
}

# a Ctrl-C as a terminal gives it: one SIGINT to every process of srun's process group
# (a session of its own here, SIGINT not ignored as a script's background commands have it)
ctrl_c_group() { kill -INT -- -"$1"; }

@test "Ctrl-C while a trial runs in the container: the probing stops, the config is unchanged, nothing is left" {
	python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' \
		srun -N1 -n2 --container-image="$IMG" $MOUNT --autobatch=0.8 --autobatch-config=cfg.json \
		--autobatch-key=batch_size python3 where.py plain_torch.py cfg.json >out 2>err &
	pid=$!
	for i in $(seq 1200); do grep -q 'trial inside' where.log 2>/dev/null && break; sleep 0.1; done
	grep -q 'trial inside' where.log
	ctrl_c_group "$pid"
	status=0
	wait "$pid" || status=$?
	[ "$status" -ne 0 ]
	assert_line_in "autobatch: probing was interrupted (Ctrl-C)" "$(cat err)"
	refute grep -q "^trained" out
	cmp cfg.json orig.json
	no_container_left
}

@test "a job cancelled while a trial runs leaves the trials' container; the next probe in a container removes it" {
	timeout 300 srun -N1 -n2 --container-image="$IMG" $MOUNT --autobatch=0.8 --autobatch-config=cfg.json \
		--autobatch-key=batch_size python3 where.py plain_torch.py cfg.json >out 2>err &
	pid=$!
	for i in $(seq 1200); do grep -q 'trial inside' where.log 2>/dev/null && break; sleep 0.1; done
	# a probe cleans the nodes it runs on: the next one runs where this one ran (on a testbed
	# of three nodes it could start on another while this job's node still completes)
	node=$(squeue -h -o %N | head -n1)
	[ -n "$node" ]
	scancel "$(squeue -h -o %i | head -n1)"
	wait "$pid" || true
	# pyxis keeps a named container when its job ends so (its own unnamed ones too)
	for i in $(seq 100); do [ -z "$(squeue -h)" ] && break; sleep 0.3; done
	run enroot_list
	grep -q '^pyxis_autobatch-trial-' <<<"$output" || { echo "nothing left to remove: $output" >&2; return 1; }
	# the next probe in a container (one task, whose one trial fails at once: a short one)
	# removes it as it removes its own
	run --separate-stderr timeout 300 srun -N1 -n1 -w "$node" --container-image="$IMG" $MOUNT --autobatch=0.8 \
		--autobatch-config=cfg.json --autobatch-key=batch_size python3 -c 'import sys; sys.exit(3)'
	assert_line_in "launching with the original settings" "$stderr"
	run enroot_list
	refute grep -q 'autobatch-trial' <<<"$output"
	# what pyxis itself left of the cancelled job is pyxis' (its unnamed containers)
	remove_all_containers
}
