#!/usr/bin/env bash
#
# bench/wake.sh: how soon a waiting call wakes after the commit it waits for.
#
#   PGHOST, PGPORT, PGUSER   a running server with idemjob installed (a superuser)
#   N                        samples per call (default 200)
#
# Creates database bench_wake (dropped first) and, N times each:
#   await_job  session A waits in await_job(job, '10s'); session B completes
#              the job's attempt;
#   claim      session A waits in claim('w', ARRAY[intent], 1, NULL, '10s');
#              session B submits a job of that intent.
# The latency of a sample is A's clock_timestamp() when its call returned
# minus B's clock_timestamp() in the statement after its commit, on the same
# connection (both from
# the server's clock), so it counts the wake-up and the waiting call's own
# work, not the client round trips.  Prints p50, p95 and max in ms.
set -euo pipefail

N=${N:-200}
DB=bench_wake
PSQL=(psql -X -q -v ON_ERROR_STOP=1 -At)

"${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
"${PSQL[@]}" -d $DB -c "CREATE EXTENSION idemjob"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the waiter is started first; B acts once A's backend shows it is waiting
wait_for_waiter() {
	local i
	for i in $(seq 1 500); do
		[ "$("${PSQL[@]}" -d $DB -c "SELECT count(*) FROM pg_catalog.pg_stat_activity
			WHERE datname = '$DB' AND state = 'active' AND query LIKE '%wake-probe%'
			AND pid <> pg_catalog.pg_backend_pid()")" = 1 ] && return 0
		sleep 0.01
	done
	echo "wake.sh: the waiter never started waiting" >&2
	return 1
}

# sample WAITING_SQL WAKING_SQL: one latency in ms.  The waiter runs
# WAITING_SQL (a statement marked wake-probe returning its clock); once it
# waits, WAKING_SQL runs on another connection, then that connection's
# clock is read.
sample() {
	"${PSQL[@]}" -d $DB -c "$1" >"$work/a" &
	wait_for_waiter
	"${PSQL[@]}" -d $DB -c "$2" -c "SELECT extract(epoch FROM clock_timestamp())" |
		tail -n 1 >"$work/b"
	wait
	echo "$(cat "$work/a") $(cat "$work/b")" | awk '{ printf "%.3f\n", ($1 - $2) * 1000 }'
}

sample_await() {
	local job att
	read -r job att < <("${PSQL[@]}" -F ' ' -d $DB -c "
		WITH j AS (SELECT job_id FROM idemjob.submit('o', 'k$1', 'wake', '{}'))
		SELECT j.job_id, a.id FROM j, idemjob.start_attempt(j.job_id) a")
	sample "SELECT extract(epoch FROM clock_timestamp()) /* wake-probe */
		FROM idemjob.await_job('$job', '10s')" \
		"SELECT outcome FROM idemjob.complete_attempt('$att', '{}')"
}

sample_claim() {
	sample "SELECT extract(epoch FROM clock_timestamp()) /* wake-probe */
		FROM idemjob.claim('w', ARRAY['wake_claim'], 1, NULL, '10s')" \
		"SELECT 1 FROM idemjob.submit('o', 'c$1', 'wake_claim', '{}')"
}

report() {
	sort -n "$work/$1" | awk -v name="$1" '{ v[NR] = $1 } END {
		p50 = v[int(NR * 0.50 + 0.5)]; p95 = v[int(NR * 0.95 + 0.5)];
		printf "| %s | %d | %.1f | %.1f | %.1f |\n", name, NR, p50, p95, v[NR] }'
}

for i in $(seq 1 "$N"); do sample_await "$i" >>"$work/await_job"; done
for i in $(seq 1 "$N"); do sample_claim "$i" >>"$work/claim"; done

echo "| call | samples | p50 ms | p95 ms | max ms |"
echo "|---|---:|---:|---:|---:|"
report await_job
report claim
"${PSQL[@]}" -d postgres -c "DROP DATABASE $DB"
