#!/bin/sh
# probe-cli.t - autobatch-probe's command line: --help, --version and refusals (TAP).
probe=${AUTOBATCH_PROBE:-probe/autobatch-probe}
n=0 failed=0
check() { # check DESCRIPTION COMMAND...
	n=$((n + 1)); desc=$1; shift
	if "$@"; then echo "ok $n - $desc"; else echo "not ok $n - $desc"; failed=1; fi
}
echo "1..5"
check "--version prints the package version" \
	sh -c "'$probe' --version | grep -qx 'autobatch-probe $PACKAGE_VERSION'"
check "-V is --version" sh -c "'$probe' -V | grep -q '^autobatch-probe '"
check "--help exits 0 and shows usage on stdout" \
	sh -c "'$probe' --help | grep -q '^Usage: autobatch-probe'"
check "no arguments: usage on stderr, exit 2" \
	sh -c "'$probe' >/dev/null 2>&1; test \$? -eq 2 && '$probe' 2>&1 >/dev/null | grep -q Usage"
check "an unknown command is named, exit 2" \
	sh -c "'$probe' frobnicate 2>&1 >/dev/null | grep -q \"unknown command 'frobnicate'\"; '$probe' frobnicate 2>/dev/null; test \$? -eq 2"
exit $failed
