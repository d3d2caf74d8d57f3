# helpers.bash - shared by the Slurm integration tests: they run real srun/sbatch/salloc
# against the testbed that tests/run-all (or the user) brought up with contrib/testbed.

: "${AUTOBATCH_TESTBED:=/tmp/autobatch-testbed}"
export AUTOBATCH_TESTBED
export SLURM_CONF=$AUTOBATCH_TESTBED/etc/slurm.conf
export PATH=$AUTOBATCH_TESTBED/bin:$PATH
# up --pyxis: enroot, as the nodes run it (tests/slurm-containers)
[ ! -d "$AUTOBATCH_TESTBED/enroot/bin" ] || PATH=$PATH:$AUTOBATCH_TESTBED/enroot/bin
PLUGSTACK=$AUTOBATCH_TESTBED/etc/plugstack.conf
PLUGIN=$AUTOBATCH_TESTBED/plugin/autobatch.so
SRCDIR=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
TESTBED=$SRCDIR/contrib/testbed/testbed

require_testbed() {
	[ -f "$SLURM_CONF" ] || { echo "no testbed at $AUTOBATCH_TESTBED: run contrib/testbed/testbed up" >&2; return 1; }
	timeout 20 sinfo -h >/dev/null 2>&1 || { echo "testbed at $AUTOBATCH_TESTBED is not answering" >&2; return 1; }
}

export XDG_CACHE_HOME=${BATS_FILE_TMPDIR:-/tmp}/cache

# What an admin does: rewrite plugstack.conf. srun and slurmstepd read it at every start.
# The testbed fills in what the arguments leave out: its probe (the one just built), where
# and how it probes (contrib/testbed/testbed plugstack).
set_plugstack() {
	"$TESTBED" plugstack "$1" "${2:-optional}"
}

reset_plugstack() {
	set_plugstack ""
}

bats_require_minimum_version 1.5.0

# srun with a bounded wait, so a hang fails the test instead of CI.
srun_t() { timeout 120 srun "$@"; }

# wait_for_step NAME: until squeue lists a step whose name begins with NAME (autobatch-probe,
# autobatch-trial.), 120 s at most. What a test does to a running probe waits for it: a fixed
# delay could come before the allocation or the step on a loaded machine.
wait_for_step() {
	local i
	for i in $(seq 1200); do
		squeue -h -s -o %j | grep -q "^$1" && return 0
		sleep 0.1
	done
	return 1
}

# ctrl_c_when STEP CMD...: CMD (an srun) gets a Ctrl-C's SIGINT a second after its step STEP
# runs (wait_for_step). timeout relays the signal as it does a Ctrl-C's, to srun and its
# process group; it also gives srun a SIGINT that is not ignored, as a background command of
# a script's is.
ctrl_c_when() {
	local step=$1 pid
	shift
	timeout -s INT 300 "$@" &
	pid=$!
	wait_for_step "$step"
	sleep 1
	kill -INT "$pid"
	wait "$pid"
}

# refute CMD...: fails when CMD succeeds. A bare "! CMD" asserts nothing in bats unless it
# is a test's last line (errexit ignores negated commands); tests/check-bats-asserts
# rejects it.
refute() {
	if "$@"; then
		echo "expected to fail: $*" >&2
		return 1
	fi
}

assert_line_in() {
	local needle=$1 haystack=$2
	if ! grep -qF -- "$needle" <<<"$haystack"; then
		echo "expected: $needle" >&2
		echo "in: $haystack" >&2
		return 1
	fi
}

# A fresh copy of the example config in the test's own directory, which becomes the cwd.
# Each test has its own decision cache, so no test sees another's decisions.
use_toy_config() {
	cp "$SRCDIR/contrib/examples/toy.yaml" "$BATS_TEST_TMPDIR/cfg.yaml"
	cd "$BATS_TEST_TMPDIR"
	export XDG_CACHE_HOME=$BATS_TEST_TMPDIR/cache
}

# use_python_program PROGRAM CONFIG-JSON: a real Python program of tests/python and its JSON
# config (cfg.json; orig.json, its copy) in the test's own directory, which becomes the cwd,
# with a decision cache of its own.
use_python_program() {
	cd "$BATS_TEST_TMPDIR"
	export XDG_CACHE_HOME=$BATS_TEST_TMPDIR/cache
	cp "$SRCDIR/tests/python/$1" .
	echo "$2" >cfg.json
	cp cfg.json orig.json
}

# The testbed's own probe arguments (the build's step hook among them, unless it runs the
# installed package, whose hook is where the probe looks).
testbed_probe_args() {
	sed -n 's/^probe_args="\(.*\)"$/\1/p' "$AUTOBATCH_TESTBED/etc/plugstack-defaults"
}

# The batch the config file says now.
config_batch() { sed -n 's/^  batch_size: \([0-9]*\).*/\1/p' "${1:-cfg.yaml}"; }

# pgrep and pkill for this PID namespace only: CI runs other Slurm releases' suites beside
# this one (tests/slurm-release), each in a namespace of its own whose processes the host sees.
# torch_python CODE: the python3 beside this Slurm that runs CODE (a PyTorch import; Debian's
# /usr/bin first), or nothing
torch_python() {
	local p
	for p in /usr/bin/python3 "$(command -v python3)"; do
		if "$p" -c "$1" 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
}

pgrep_here() { pgrep --ns $$ --nslist pid "$@"; }
pkill_here() { pkill --ns $$ --nslist pid "$@"; }

# No step of ours left behind in the queue.
no_probe_step_left() {
	local i
	for i in $(seq 20); do
		squeue -h -s -o '%j' | grep -q autobatch-probe || return 0
		sleep 0.5
	done
	echo "a probe step is still running: $(squeue -s)" >&2
	return 1
}
