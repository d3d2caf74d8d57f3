#!/bin/sh
# man-pages.t - autobatch(8) and autobatch-probe(1) render with groff -ww without a warning,
# and autobatch(8) names every option and plugstack argument the code knows, as does the
# admin guide's table (doc/admin-guide.md) (TAP).
. "$(dirname "$0")/tap.sh"
core=$(dirname "$0")/../../lib/core
warnings=$(mktemp)
trap 'rm -f "$warnings" "$warnings.page"' EXIT
text() { LC_ALL=C groff -man -Tascii -P-cbu "$1" 2>/dev/null; }
echo "1..8"
for page in doc/autobatch.8 doc/autobatch-probe.1; do
	check "$page renders without warnings" \
		sh -c "test -n \"\$(LC_ALL=C.UTF-8 groff -ww -man -Tutf8 '$page' 2>'$warnings')\" && test ! -s '$warnings'"
	# Installed paths are substituted into the pages: make distcheck's prefix is long
	# (/home/.../autobatch-0.1.0/_inst), and a path that cannot be filled is a warning.
	long=$(printf '/%s' deep deeper deepest distcheck autobatch-0.1.0 _build _inst long-prefix)
	sed "s|^\(\.BR* \)/|\1$long/|" "$page" >"$warnings.page"
	check "$page renders without warnings under a long install prefix" \
		sh -c "test -n \"\$(LC_ALL=C.UTF-8 groff -ww -man -Tutf8 '$warnings.page' 2>'$warnings')\" && test ! -s '$warnings'"
done
options=$(sed -n 's/.*\[AB_OPT_[A-Z_]*\] = {"\([a-z-]*\)".*/\1/p' "$core/request.c")
args=$(sed -n 's/^[[:space:]]*{"\([a-z_]*\)", ARG_.*/\1/p' "$core/site.c")
page=$(text doc/autobatch.8)
missing() { for w in $1; do printf '%s\n' "$page" | grep -q -- "$2$w" || echo "# missing $2$w"; done; }
check "autobatch(8) documents every user option ($(echo $options | wc -w))" \
	test -n "$options" -a -z "$(missing "$options" --)"
check "autobatch(8) documents every plugstack argument ($(echo $args | wc -w))" \
	test -n "$args" -a -z "$(missing "$args" "")"
check "both pages carry this version ($PACKAGE_VERSION), not a template placeholder" \
	sh -c "grep -q '\"autobatch $PACKAGE_VERSION\"' doc/autobatch.8 && grep -q '\"autobatch $PACKAGE_VERSION\"' doc/autobatch-probe.1 && ! grep -q '@[A-Z]*@' doc/autobatch.8 doc/autobatch-probe.1"
# the admin guide's table: a row that starts with each argument the code knows
guide=$(dirname "$0")/../../doc/admin-guide.md
cells=$(sed -n 's/^| \(.*\) | .* | .*/\1/p' "$guide" | sed 's/ | .*//') # each row's first cell
unlisted() { for w in $args; do printf '%s\n' "$cells" | grep -q "\`$w[=\`]" || echo "# not in doc/admin-guide.md: $w"; done; }
check "the admin guide's table documents every plugstack argument ($(echo $args | wc -w))" \
	test -n "$args" -a -z "$(unlisted)"
missing "$options" --
missing "$args" ""
unlisted
exit $failed
