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
