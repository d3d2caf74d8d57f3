# tap.sh - the little TAP library the shell tests share: check DESCRIPTION COMMAND...
# prints "ok N - DESCRIPTION" or "not ok N - ..." and remembers a failure for the exit code.
n=0 failed=0
check() {
	n=$((n + 1)); desc=$1; shift
	if "$@"; then echo "ok $n - $desc"; else echo "not ok $n - $desc"; failed=1; fi
}
