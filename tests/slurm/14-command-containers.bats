#!/usr/bin/env bats
# A container named in the command (issue 42): `srun --autobatch apptainer exec IMAGE python3
# train.py cfg.json`, straight or from a script, with --cleanenv. The image is Debian 12 with
# its own Python and PyTorch and no autobatch in it; the trials get the step hook, their
# config copy and their variables through Apptainer's own variables (APPTAINER_BINDPATH,
# APPTAINERENV_*), and the tasks get the decision the same way. Apptainer is packaged in
# Debian unstable only: these tests run in the Slurm 26.05 root (tests/slurm-release, which
# mounts the image at /ab/apptainer-image) and say they are skipped elsewhere. podman's
# refusal runs on every Slurm.

load helpers

setup_file() {
	require_testbed
	reset_plugstack
}

need_apptainer() {
	IMAGE=${AUTOBATCH_APPTAINER_IMAGE:-/ab/apptainer-image}
	command -v apptainer >/dev/null || skip "no apptainer beside this Slurm (Debian unstable packages it)"
	[ -x "$IMAGE/usr/bin/python3" ] || skip "no image at $IMAGE (tests/slurm-release mounts one)"
}

setup() {
	use_python_program plain_torch.py '{"batch_size": 4, "steps": 4}'
	# as in 13-pytorch.bats: PyTorch alone holds about 270 MiB of the host device
	args=$(testbed_probe_args)
	[[ $args == *capacity=256MiB* ]]
	# searching to 16 at most: the checks need a choice past the config's 4, not one near the
	# limit, and each trial is two PyTorch start-ups in the image (109 s and 58 s of local CI
	# run 56 for the two probing tests, searching to 90)
	set_plugstack "probe_args=\"${args//capacity=256MiB/capacity=1GiB} --max 16\" startup_seconds=120"
	# what glibc maps inside the image in huge pages, as gpu-like-memory.sh does outside:
	# Apptainer passes APPTAINERENV_* in under --cleanenv. Two ranks' trials in 4 KiB pages
	# took 179 s and 280 s of a CI run's two tests (local CI run 53, 26.05 root)
	export APPTAINERENV_GLIBC_TUNABLES=glibc.malloc.hugetlb=1
}

teardown() { reset_plugstack; }

# nothing of a container left behind: no Apptainer process, no mount of its session
nothing_left() {
	run pgrep_here -a -f '(^|/)(apptainer|starter|squashfuse)( |$)'
	[ "$status" -eq 1 ] || { echo "left running: $output" >&2; ps -ef >&2; return 1; }
	# an image's session mounts (the runtime's mount namespace ends with its last process)
	run grep -c /apptainer/mnt /proc/self/mountinfo
	[ "$output" = 0 ] || { grep /apptainer/mnt /proc/self/mountinfo >&2; return 1; }
}

@test "srun apptainer exec --cleanenv: trials in the image with the hook, both tasks at the choice" {
	need_apptainer
	# the image's Python is not this root's: the trials ran what the tasks run
	version='import sys, torch; print(sys.version.split()[0], torch.__version__)'
	inside=$(apptainer exec "$IMAGE" python3 -c "$version")
	[ -n "$inside" ]
	[ "$inside" != "$(python3 -c "$version" 2>&1)" ]
	[ ! -e "$IMAGE/usr/share/autobatch" ]
	run --separate-stderr timeout 600 srun -N1 -n2 --autobatch=0.8 --autobatch-config=cfg.json \
		--autobatch-key=batch_size apptainer exec --cleanenv "$IMAGE" python3 plain_torch.py cfg.json
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	b=$(python3 -c 'import json; print(json.load(open("cfg.json"))["batch_size"])')
	echo "# $(apptainer --version), image Python and PyTorch $inside: $(grep 'chose batch' <<<"$stderr")" >&3
	# decided: past the config's 4, at a batch a trial saw fit. Not a size: two ranks share
	# the host device, and a batch whose helpers' runs differ gets their spread as margin
	# (CI run: 90 ran twice, 225 MiB apart, and the choice fell to 16)
	[ "$b" -gt 4 ] || { echo "$stderr" >&2; return 1; }
	grep -q "^autobatch: trial [0-9]*: batch $b fits, peak " <<<"$stderr"
	assert_line_in "autobatch: chose batch $b in " "$stderr"
	# a fit is seen steps: the hook ran in the image, under --cleanenv
	grep -q "autobatch: trial 1: batch [0-9]* fits, peak .* of 819 MiB limit" <<<"$stderr"
	[ "$(grep -c "^trained 4 updates at batch $b\$" <<<"$output")" -eq 2 ]
	cmp -s orig.json cfg.json.autobatch~
	nothing_left
}

@test "a script that runs apptainer exec --cleanenv: decided, and its tasks see the decision" {
	need_apptainer
	# glibc hands freed blocks back at once inside the image too (gpu-like-memory.sh): its
	# heap otherwise kept 0-140 MiB from run to run, and two runs of one batch 69 MiB
	# apart left no batch under the margin they earned (local CI run 28)
	cat >train.sh <<EOF
#!/bin/sh
exec apptainer exec --cleanenv "$IMAGE" sh -c 'echo "task sees AUTOBATCH_BATCH_SIZE=\${AUTOBATCH_BATCH_SIZE:-unset}"; MALLOC_MMAP_THRESHOLD_=65536 exec python3 plain_torch.py "\$1"' sh "\$1"
EOF
	chmod +x train.sh
	run --separate-stderr timeout 600 srun -N1 -n2 --autobatch=0.8 --autobatch-config=cfg.json \
		--autobatch-key=batch_size ./train.sh cfg.json
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	b=$(python3 -c 'import json; print(json.load(open("cfg.json"))["batch_size"])')
	# decided: past the config's 4, at a batch a trial saw fit. Not a size: two ranks share
	# the host device, and a batch whose helpers' runs differ gets their spread as margin
	# (CI run: 90 ran twice, 225 MiB apart, and the choice fell to 16)
	[ "$b" -gt 4 ] || { echo "$stderr" >&2; return 1; }
	grep -q "^autobatch: trial [0-9]*: batch $b fits, peak " <<<"$stderr"
	grep -q "autobatch: trial 1: batch [0-9]* fits, peak .* of 819 MiB limit" <<<"$stderr"
	[ "$(grep -c "^task sees AUTOBATCH_BATCH_SIZE=$b\$" <<<"$output")" -eq 2 ]
	[ "$(grep -c "^trained 4 updates at batch $b\$" <<<"$output")" -eq 2 ]
	nothing_left
}

@test "an image that is not there: Apptainer's own line, the config untouched" {
	need_apptainer
	run --separate-stderr timeout 600 srun -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.json \
		--autobatch-key=batch_size apptainer exec --cleanenv "$BATS_TEST_TMPDIR/no-such-image" \
		python3 plain_torch.py cfg.json
	# the trial's failure, quoted (the step itself fails as the plain command would)
	echo "# $(grep -A3 'the probe failed' <<<"$stderr" | tr '\n' ' ')" >&3
	assert_line_in "the probe failed: trial 1 (batch " "$stderr"
	grep -q "autobatch:   | .*no-such-image" <<<"$stderr"
	cmp -s orig.json cfg.json
	nothing_left
}

@test "podman run: refused with the reason and what works, the job runs as it was" {
	# refused before any trial: podman need not be here
	run --separate-stderr timeout 300 srun -N1 -n1 --autobatch=0.8 --autobatch-config=cfg.json \
		--autobatch-key=batch_size podman run --rm img python3 plain_torch.py cfg.json
	assert_line_in "autobatch: the probe failed: a trial cannot measure \`podman run\`: its program runs under conmon" "$stderr"
	assert_line_in "(--autobatch-trial-command); launching with the original settings" "$stderr"
	cmp -s orig.json cfg.json
}
