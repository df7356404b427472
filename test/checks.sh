# test/checks.sh: the check helpers of the scripted tests (test/dump,
# test/upgrade).  The caller sets PG_BIN, passed=0, failed=0, and label,
# the prefix of its messages.  Each check prints one "ok" or "FAIL" line.

q() { "$PG_BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
ok() { passed=$((passed + 1)); echo "ok   - $1"; }
not_ok() {
	failed=$((failed + 1))
	echo "FAIL - $1"
	if [ -n "${2:-}" ]; then printf '%s\n' "$2" | head -40 | sed 's/^/       /'; fi
}
# check NAME DB SQL [PSQL OPTIONS...]: passes when SQL answers exactly "t"
check() {
	local out
	out=$(q "${@:4}" -d "$2" -c "$3" 2>&1)
	if [ "$out" = t ]; then ok "$1"; else not_ok "$1" "$out"; fi
}
die() {
	failed=$((failed + 1))
	echo "$label: $*" >&2
	echo "$label: $passed checks passed, $failed failed"
	exit 1
}
