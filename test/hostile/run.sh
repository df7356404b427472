#!/usr/bin/env bash
# test/hostile/run.sh: the hostile-input battery (battery.sql).
#
# Runs against the server in PGHOST/PGPORT/PGUSER (a superuser: the battery
# uses dblink to hold locks from a second session); creates and drops its
# own database.  One case per statement, so that a crashed backend shows as
# a lost connection: the driver records the case, waits for the server and
# goes on.  The server log is scanned for crashes afterwards: found at
# HOSTILE_SERVER_LOG, else pg_current_logfile(), else server.log next to the
# data directory (test/lib.sh's layout).
# HOSTILE_STATEMENT_TIMEOUT (1s) must exceed the time to open a dblink
# connection (raise it under valgrind).
# Prints "hostile inputs tried: N, unexpected: M"; exits non-zero if M > 0,
# if any case did not run, or if the server log shows a crash.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${PG_BIN:-}" ]; then
	PG_BIN=$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
fi
db=${HOSTILE_DB:-idemjob_hostile}
PSQL="$PG_BIN/psql -X -q -v ON_ERROR_STOP=1"
work=$(mktemp -d /tmp/idemjob-hostile.XXXXXX)
cleanup() {
	[ -n "${HOSTILE_KEEP_DB:-}" ] || $PSQL -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s)

$PSQL -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" >/dev/null || exit 1
$PSQL -d postgres -c "CREATE DATABASE $db" >/dev/null || exit 1
$PSQL -d "$db" -c "CREATE EXTENSION idemjob" >/dev/null || exit 1
$PSQL -d "$db" -f "$here/battery.sql" >/dev/null || exit 1

# the server log, and where it ends now
log=${HOSTILE_SERVER_LOG:-}
if [ -z "$log" ]; then
	cur=$($PSQL -At -d "$db" -c "SELECT pg_current_logfile()" 2>/dev/null)
	ddir=$($PSQL -At -d "$db" -c "SHOW data_directory")
	if [ -n "$cur" ]; then
		case $cur in /*) log=$cur ;; *) log=$ddir/$cur ;; esac
	elif [ -r "$(dirname "$ddir")/server.log" ]; then
		log=$(dirname "$ddir")/server.log
	fi
fi
log_from=0
[ -n "$log" ] && [ -r "$log" ] && log_from=$(stat -c %s "$log")

wait_server() {
	for _ in $(seq 1 60); do
		$PSQL -d "$db" -c "SELECT 1" >/dev/null 2>&1 && return 0
		sleep 1
	done
	return 1
}

n=$($PSQL -At -d "$db" -c "SELECT count(*) FROM hostile.cases")
crashed=()
# one statement per case (after its committed setup, if any); on a lost
# connection note the case that was running, wait for the server and run
# the cases after it
from=0
while :; do
	$PSQL -At -d "$db" >"$work/cases.sql" <<SQL || exit 1
SELECT concat(setup || E';\n', '\echo running ', id, E'\n',
	CASE WHEN kind = 'statement_timeout' THEN E'SET statement_timeout = ''${HOSTILE_STATEMENT_TIMEOUT:-1s}'';\n' END,
	'SELECT hostile.run_case(', id, E');\n',
	CASE WHEN kind = 'statement_timeout' THEN E'RESET statement_timeout;\n' END)
FROM hostile.cases WHERE id > $from ORDER BY id
SQL
	$PSQL -d "$db" -At -v ON_ERROR_STOP=0 -f "$work/cases.sql" >"$work/out" 2>>"$work/err"
	rc=$?
	if [ $rc -eq 2 ] || grep -qiE "server closed the connection|connection to server was lost" "$work/err"; then
		last=$(grep '^running ' "$work/out" | tail -1 | awk '{print $2}')
		echo "  case $last: the connection was lost (crash?)" >&2
		crashed+=("$last")
		from=$last
		: >"$work/err"
		wait_server || { echo "server did not come back" >&2; exit 1; }
		continue
	fi
	break
done
if [ -s "$work/err" ]; then
	echo "errors outside the cases (a case that did not record its result):" >&2
	grep -E "ERROR|FATAL" "$work/err" | sort | uniq -c | head -20 >&2
fi

report=$($PSQL -At -F$'\t' -d "$db" -c "
	SELECT c.id, c.fn, c.arg, c.label, c.expect, coalesce(r.got, 'not run'),
		CASE WHEN r.id IS NULL THEN 'did not run'
			 WHEN NOT r.unchanged THEN 'tables changed'
			 WHEN NOT r.guard THEN 'guard disabled afterwards'
			 WHEN r.checked IS FALSE THEN 'stored value check failed'
			 ELSE '' END,
		coalesce(r.message, '')
	FROM hostile.cases c LEFT JOIN hostile.results r ON r.id = c.id
	WHERE r.pass IS NOT TRUE ORDER BY c.id") || { echo "report query failed" >&2; exit 1; }
bad=0
[ -n "$report" ] && bad=$(printf '%s\n' "$report" | wc -l)
ran=$($PSQL -At -d "$db" -c "SELECT count(*) FROM hostile.results")
summary=$($PSQL -At -F' ' -d "$db" -c "
	SELECT count(*) FILTER (WHERE got = '00000'), count(*) FILTER (WHERE got <> '00000'),
		count(*) FILTER (WHERE c.kind <> 'plain'), count(*) FILTER (WHERE r.checked)
	FROM hostile.results r JOIN hostile.cases c USING (id)")
read -r answered errored timeouts checked <<<"$summary"
if [ -n "$report" ]; then
	echo "unexpected:"
	printf '%s\n' "$report" | awk -F'\t' '{ printf "  #%s %s(%s) %s: expected %s, got %s %s%s\n", $1, $2, $3, $4, $5, $6, ($7 != "" ? "[" $7 "] " : ""), ($8 != "" ? "-- " $8 : "") }'
fi

crashlines=""
if [ -n "$log" ] && [ -r "$log" ]; then
	crashlines=$(tail -c +"$((log_from + 1))" "$log" | grep -E "terminated by signal|was terminated by|server process .* (exited|was terminated)|TRAP:|PANIC|AddressSanitizer|runtime error:|all server processes terminated" || true)
	logmsg="server log $log: $( [ -z "$crashlines" ] && echo 'no crash' || echo 'CRASH LINES FOUND')"
else
	logmsg="server log not found (set HOSTILE_SERVER_LOG); crashes detected by lost connections only"
fi
[ -n "$crashlines" ] && printf '%s\n' "$crashlines" | head -20 >&2

echo "hostile: $ran of $n cases ran ($answered answered, $errored errors, $timeouts mid-call timeouts, $checked stored values checked), crashes: ${#crashed[@]}; $logmsg; $(( $(date +%s) - start ))s"
echo "hostile inputs tried: $n, unexpected: $bad"
if [ "$bad" != 0 ] || [ "$ran" != "$n" ] || [ -n "$crashlines" ] || [ ${#crashed[@]} != 0 ]; then
	exit 1
fi
