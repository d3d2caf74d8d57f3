# tap.sh - the little TAP library the shell tests share: check DESCRIPTION COMMAND...
# prints "ok N - DESCRIPTION" or "not ok N - ..." and remembers a failure for the exit code.
# Its status is the command's, so "check ... || cat LOG" shows a failure's diagnostics; a
# command joined after it with && is not part of the check: put it in the command.
n=0 failed=0
check() {
	n=$((n + 1)); desc=$1; shift
	if "$@"; then echo "ok $n - $desc"; return 0; fi
	echo "not ok $n - $desc"
	failed=1
	return 1
}

# python_or_skip PY CODE WHAT FIRST LAST: checks FIRST..LAST are minutes of Python that need
# PY to run CODE (an import); when it cannot (no WHAT), or in distcheck's second pass of the
# same tests (tests/run-all sets AUTOBATCH_QUICK_CHECK there), each is skipped saying why and
# the test ends.
python_or_skip() {
	why=
	"$1" -c "$2" 2>/dev/null || why="no $3 for $1"
	[ "${AUTOBATCH_QUICK_CHECK:-}" = 1 ] && why="ran in this tree's own make check (AUTOBATCH_QUICK_CHECK=1)"
	[ -z "$why" ] && return 0
	for i in $(seq "$4" "$5"); do echo "ok $i # SKIP $why"; done
	exit $failed
}
