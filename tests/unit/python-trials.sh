# python-trials.sh - what the shell tests that probe real PyTorch programs of tests/python
# share, sourced after tap.sh: the probe, the peak runner, the step hook, the Python, the
# report's field reader, a scratch directory of the test's own and a plain run's peak.
PROBE=${AUTOBATCH_PROBE:-probe/autobatch-probe}
PEAKRUN=${PEAKRUN:-tests/helpers/peakrun}
HOOK_DIR=${HOOK_DIR:-$(cd "$(dirname "$0")/../../contrib/python" && pwd)}
here=$(cd "$(dirname "$0")/../python" && pwd)
export PROBE PEAKRUN
PY=${PYTHON:-$(test -x /usr/bin/python3 && echo /usr/bin/python3 || command -v python3)}
# field REPORT EXPRESSION: a Python expression over the report r ($F inside sh -c)
F="python3 $(cd "$(dirname "$0")" && pwd)/report-field.py"
field() { $F "$@"; }

# python_trials NAME COUNT: the plan of COUNT checks, each skipped without PyTorch (or in
# distcheck's second pass); $dir, removed at exit; glibc's resident memory that follows the
# live tensors, as a GPU allocator's does, for the probe and the plain runs alike, in huge
# pages at fixed addresses (the script runs again under setarch -R first)
python_trials() {
	. "$here/gpu-like-memory.sh"
	fixed_layout /bin/sh "$0"
	dir=$(mktemp -d "/tmp/autobatch-$1.XXXXXX")
	trap 'rm -rf "$dir"' EXIT
	echo "1..$2"
	python_or_skip "$PY" 'import torch' "PyTorch (Debian: python3-torch)" 1 "$2"
}

# plain_peak PROGRAM ARG...: a plain run's peak in bytes (no autobatch), nothing if it failed
plain_peak() {
	"$PEAKRUN" "$PY" "$@" 2>&1 >/dev/null | sed -n 's/^peak_bytes \([0-9]*\) status 0$/\1/p'
}
