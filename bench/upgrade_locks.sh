#!/usr/bin/env bash
# bench/upgrade_locks.sh: what ALTER EXTENSION idemjob UPDATE locks, and for
# how long, on a database of N jobs (default 1,000,000).
#
#   PGHOST=... PGPORT=... PG_CONFIG=... bash bench/upgrade_locks.sh [1.1] [1.0]
#
# Needs what test/upgrade/run.sh needs: a running cluster WITHOUT idemjob in
# shared_preload_libraries (each new session must load the library
# installed at that moment), PGUSER a superuser, and write access to
# PG_CONFIG's installation (use a private copy of it: the released versions
# are installed there while this runs; this tree is installed again on
# exit).  For each starting version given (default: 1.1 and 1.0) it
#   1. builds and installs that release (as test/upgrade does), creates a
#      database and CREATE EXTENSION idemjob VERSION '<it>';
#   2. fills N jobs quickly (bulk INSERT as superuser with
#      session_replication_role = replica, so no guard or foreign-key
#      trigger fires): 90% succeeded with one succeeded attempt, 10%
#      pending; N/10 spent keys where the version has them; VACUUM ANALYZE,
#      CHECKPOINT;
#   3. installs this tree, then runs ALTER EXTENSION idemjob UPDATE while
#      - a sampler polls pg_locks every 10 ms and records, per relation of
#        the schema, when a lock of each mode held by the updating session
#        was first and last seen (locks are held until the update commits:
#        the hold time is from the first sample to the commit);
#      - a reader runs SELECT ... FROM idemjob.jobs (one row by id) in its
#        own transactions with lock_timeout = 1s, every 50 ms, and counts
#        the reads that waited more than 100 ms and those cancelled;
#   4. prints one table per update: relation, lock mode, held for (ms), and
#      the update's total time, the reader's worst wait and its
#      cancellations.
# Environment: N (jobs), KEEP=1 keeps the databases, REPORT=FILE keeps the
# report.  The figures in docs/operations.md#upgrading: PostgreSQL 15 with
# fsync, full_page_writes and synchronous_commit off (this script sets
# none of them).  Timings are of the
# machine it runs on: compare the rows of one run, not runs of two days.

set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
: "${PG_CONFIG:=/usr/lib/postgresql/15/bin/pg_config}"
PG_BIN=$("$PG_CONFIG" --bindir)
N=${N:-1000000}
froms=("$@")
[ ${#froms[@]} -gt 0 ] || froms=(1.1 1.0)
declare -A release=([1.0]=${IJ_RELEASE_1_0:-620b54c} [1.1]=${IJ_RELEASE_1_1:-1613263})

passed=0
failed=0
old_installed=0
label=upgrade-locks
tmp=$(mktemp -d /tmp/idemjob-upgrade-locks.XXXXXX)
source "$repo/test/upgrade/lib.sh"

[ "$(q -d postgres -c "SELECT current_setting('shared_preload_libraries') ~ 'idemjob'")" = f ] ||
	die "idemjob is in shared_preload_libraries of the cluster at ${PGHOST:-}:${PGPORT:-}: use one without it"
target=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$repo/idemjob.control")

fill() {	# fill DB VERSION
	local spent=""
	[ "$2" != 1.0 ] && spent="INSERT INTO idemjob.spent_keys (owner_id, idempotency_key, request_sha256, job_id, final_state,
			completed_at, purged_at)
		SELECT 'o' || (i % 1000), 'spent-' || i, pg_catalog.sha256(i::text::bytea), md5('s' || i)::uuid,
			'succeeded', now() - interval '3 days', now() - interval '1 day'
		FROM generate_series(1, $N / 10) i;"
	q -d "$1" <<SQL
SET session_replication_role = replica;
SET maintenance_work_mem = '256MB';
INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, params, provider, state, version,
		attempt_count, completed_by, result, created_at, updated_at, completed_at)
	SELECT md5('j' || i)::uuid, 'o' || (i % 1000), 'k-' || i, 'pay', jsonb_build_object('amount', i), 'p1',
		CASE WHEN i % 10 = 0 THEN 'pending' ELSE 'succeeded' END::idemjob.job_state,
		CASE WHEN i % 10 = 0 THEN 0 ELSE 1 END, CASE WHEN i % 10 = 0 THEN 0 ELSE 1 END,
		CASE WHEN i % 10 = 0 THEN NULL ELSE md5('a' || i)::uuid END,
		CASE WHEN i % 10 = 0 THEN NULL ELSE jsonb_build_object('charge', 'ch_' || i) END,
		now() - interval '2 days', now() - interval '2 days',
		CASE WHEN i % 10 = 0 THEN NULL ELSE now() - interval '2 days' END
	FROM generate_series(1, $N) i;
INSERT INTO idemjob.attempts (id, job_id, owner_id, attempt_no, provider, state, read_version,
		started_at, finished_at, result_sha256)
	SELECT md5('a' || i)::uuid, md5('j' || i)::uuid, 'o' || (i % 1000), 1, 'p1', 'succeeded', 0,
		now() - interval '2 days', now() - interval '2 days', pg_catalog.sha256(i::text::bytea)
	FROM generate_series(1, $N) i WHERE i % 10 <> 0;
$spent
SQL
	q -d "$1" -c "VACUUM ANALYZE" -c "CHECKPOINT"
}

# the sampler: every 10 ms, the locks the updating session (application_name
# ij_updater) holds on relations of schema idemjob, until the extension is
# at the target version (or 10 minutes)
sampler_sql() {
	cat <<SQL
CREATE TEMP TABLE s (t timestamptz, rel text, mode text);
DO \$\$
DECLARE
	seen boolean := false;
	t0 timestamptz := clock_timestamp();
BEGIN
	LOOP
		PERFORM pg_stat_clear_snapshot();	-- pg_stat_activity is read once per transaction otherwise
		INSERT INTO s
		SELECT clock_timestamp(), c.relname, l.mode
		FROM pg_locks l
		JOIN pg_stat_activity a ON a.pid = l.pid AND a.application_name = 'ij_updater'
		JOIN pg_class c ON c.oid = l.relation
		WHERE l.locktype = 'relation' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND c.relnamespace = 'idemjob'::regnamespace;	-- (relations the update creates are no one else's to wait for)
		seen := seen OR FOUND;
		EXIT WHEN (seen AND NOT FOUND)
			OR (SELECT extversion FROM pg_extension WHERE extname = 'idemjob') = '$target'
			OR clock_timestamp() - t0 > interval '10 min';
		PERFORM pg_sleep(0.01);
	END LOOP;
END
\$\$;
SELECT rel, mode, round(extract(epoch FROM (max(t) - min(t))) * 1000)::int AS held_ms_at_least,
	to_char(min(t), 'HH24:MI:SS.MS') AS first_seen
FROM s GROUP BY rel, mode
ORDER BY mode = 'AccessExclusiveLock' DESC, 3 DESC, 1, 2;
SQL
}

# the reader: one row of jobs by id, each in its own transaction, until killed
reader() {
	{
		echo "SET lock_timeout = '1s';"
		echo "SET application_name = 'ij_reader';"
		while :; do
			echo "SELECT round(extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000)::int AS waited_ms FROM idemjob.jobs WHERE id = md5('j1')::uuid;"
			echo "SELECT pg_sleep(0.05);"
		done
	} | "$PG_BIN/psql" -X -q -A -t -d "$1" >"$tmp/reader.out" 2>"$tmp/reader.err"
}

report=$tmp/report.txt
: >"$report"
for from in "${froms[@]}"; do
	[ -n "${release[$from]:-}" ] || die "no release $from known"
	db=ij_locks_${from//./_}
	rm -rf "$tmp/v$from"
	install_release "${release[$from]}" "$from"
	q -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1
	q -d postgres -c "CREATE DATABASE $db TEMPLATE template0" &&
		q -d $db -c "CREATE EXTENSION idemjob VERSION '$from'" || die "could not create $db at $from"
	echo "# filling $N jobs at $from"
	start=$(date +%s.%N)
	fill $db "$from" || die "could not fill $db"
	echo "# filled in $(echo "$(date +%s.%N) - $start" | bc) s: $(q -d $db -c "SELECT pg_size_pretty(pg_total_relation_size('idemjob.jobs')) || ' jobs, ' || pg_size_pretty(pg_total_relation_size('idemjob.attempts')) || ' attempts'")"
	install_tree || { cat "$tmp/make-current.log" >&2; die "this tree does not build or install"; }
	old_installed=0

	sampler_sql | q -d $db >"$tmp/sampler-$from.out" 2>&1 &
	spid=$!
	reader $db &
	rpid=$!
	sleep 1
	start=$(date +%s.%N)
	if ! out=$(PGAPPNAME=ij_updater q -d $db -c "ALTER EXTENSION idemjob UPDATE" 2>&1); then
		not_ok "ALTER EXTENSION idemjob UPDATE from $from" "$out"
	fi
	total=$(echo "($(date +%s.%N) - $start) * 1000 / 1" | bc)
	sleep 1.5
	pkill -P "$rpid" 2>/dev/null
	kill "$rpid" 2>/dev/null
	wait "$spid" "$rpid" 2>/dev/null
	worst=$(sort -n "$tmp/reader.out" | tail -1)
	slow=$(awk '$1 > 100' "$tmp/reader.out" | wc -l)
	cancelled=$(grep -c 'lock timeout' "$tmp/reader.err")
	{
		echo "## $from -> $target, $N jobs: ALTER EXTENSION idemjob UPDATE took $total ms"
		echo "reader (lock_timeout 1s, every 50 ms): $(wc -l <"$tmp/reader.out") reads, $slow waited > 100 ms, worst wait ${worst:-?} ms, $cancelled cancelled"
		echo "locks of the updating session on schema idemjob, sampled every 10 ms (held at least; until the commit):"
		grep -v '^$' "$tmp/sampler-$from.out" | sed 's/^/  /'
		echo
	} | tee -a "$report"
	[ -n "${KEEP:-}" ] || q -d postgres -c "DROP DATABASE $db" >/dev/null
done
cp "$report" "${REPORT:-/dev/null}" 2>/dev/null
echo "$label: report in $report"
