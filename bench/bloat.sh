#!/usr/bin/env bash
#
# bench/bloat.sh: HOT updates, dead rows and index growth over a burst
# (issue 21), for the 1.1 index set and the current one, in the same run.
#
#   bench/bloat.sh            N = 200000 jobs (BENCH_BLOAT_JOBS)
#   bench/bloat.sh --smoke    N = 5000
#
# Starts its own throw-away cluster (port BENCH_BLOAT_PORT, default 5722;
# synchronous_commit off, autovacuum at its defaults, as a DBA's cluster
# has it) with the idemjob installed on the machine.  For each schema
# (BENCH_BLOAT_SCHEMAS, default "1.1 current"; "1.1" puts back 1.1's
# jobs_active and fillfactor 90 on the installed extension's tables):
#   burst    N submits (pgbench, 2 clients), then N jobs worked by 4 workers
#            doing the worker loop of docs/operations.md: claim with a
#            lease, begin_attempt (the confirmation), one heartbeat for
#            every 4th job, complete_attempt
#   after    pg_stat_user_tables (updates, HOT updates, live and dead rows)
#            and the size of every table and index (pg_relation_size), and
#            pgstatindex's leaf density for the partial indexes
#   vacuum   the same after a plain VACUUM of jobs and attempts
# Writes bench/results/BLOAT.md (--smoke: bench/results/smoke/BLOAT.md).
#
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SMOKE=0
[ "${1:-}" = --smoke ] && SMOKE=1
PG_CONFIG=${PG_CONFIG:-$(command -v pg_config || echo /usr/lib/postgresql/15/bin/pg_config)}
PG_BINDIR=${PG_BINDIR:-$("$PG_CONFIG" --bindir)}
PORT=${BENCH_BLOAT_PORT:-5722}
WORK=${BENCH_BLOAT_WORK:-/tmp/idemjob-bloat-$PORT}
SCHEMAS=${BENCH_BLOAT_SCHEMAS:-1.1 current}
if [ "$SMOKE" = 1 ]; then
	N=${BENCH_BLOAT_JOBS:-5000}; OUT=${BENCH_BLOAT_OUT:-$HERE/results/smoke}
else
	N=${BENCH_BLOAT_JOBS:-200000}; OUT=${BENCH_BLOAT_OUT:-$HERE/results}
fi
mkdir -p "$OUT"

source "$HERE/cluster.sh"
PSQL=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$PORT" -U postgres)
q() { local db=$1; shift; PGOPTIONS="-c client_min_messages=warning" "${PSQL[@]}" -At -d "$db" "$@"; }
log() { echo "bloat: $*" >&2; }
bench_cluster_start <<EOF
max_connections = 20
shared_buffers = 512MB
synchronous_commit = off
max_wal_size = 20GB
checkpoint_timeout = 30min
logging_collector = off
log_min_messages = warning
EOF

cat >"$WORK/submit.sql" <<'EOF'
SELECT 1 AS ok FROM idemjob.submit('o', pg_catalog.gen_random_uuid()::text, 'bl', '{"n": 1}') \aset
EOF
cat >"$WORK/work.sql" <<'EOF'
\set got 0
SELECT 1 AS got, attempt_id FROM idemjob.claim('w', NULL, 1, lease => true) \aset
\if :got = 1
SELECT 1 AS ok FROM idemjob.begin_attempt(:attempt_id) \aset
\set beat random(1, 4)
\if :beat = 1
SELECT 1 AS ok FROM idemjob.heartbeat(:attempt_id, '5 minutes') \aset
\endif
SELECT outcome FROM idemjob.complete_attempt(:attempt_id, '{"ok": true}') \aset
\endif
EOF

STATS_SQL="
SELECT pg_stat_force_next_flush();
SELECT pg_stat_clear_snapshot();
SELECT 'T', relname, n_tup_upd, n_tup_hot_upd, n_live_tup, n_dead_tup, pg_relation_size(relid),
	   autovacuum_count, autoanalyze_count
  FROM pg_stat_user_tables WHERE schemaname = 'idemjob' AND relname IN ('jobs', 'attempts') ORDER BY relname;
SELECT 'I', i.indexrelid::regclass::text, pg_relation_size(i.indexrelid),
	   CASE WHEN x.indpred IS NOT NULL THEN (SELECT round(avg_leaf_density::numeric, 0)::text || ' %'
			FROM pgstatindex(i.indexrelid)) ELSE '' END
  FROM pg_stat_user_indexes i JOIN pg_index x ON x.indexrelid = i.indexrelid
 WHERE i.schemaname = 'idemjob' AND i.relname IN ('jobs', 'attempts') ORDER BY i.relname DESC, 2;
"
# pg_stat_force_next_flush is PostgreSQL 15+: leave it out before
[ "$("$PG_BINDIR/postgres" --version | awk '{print int($3)}')" -ge 15 ] || STATS_SQL=${STATS_SQL/SELECT pg_stat_force_next_flush();/}

declare -A SNAP
for s in $SCHEMAS; do
	db="b_${s//./_}"
	q postgres -c "CREATE DATABASE $db"
	q "$db" -c "CREATE EXTENSION idemjob" -c "CREATE EXTENSION pgstattuple"
	if [ "$s" = 1.1 ]; then
		# 1.1's index set and fillfactor, on the installed version's tables
		q "$db" -c "DROP INDEX IF EXISTS idemjob.jobs_in_flight" \
			-c "CREATE INDEX IF NOT EXISTS jobs_active ON idemjob.jobs (intent, state, run_at)
				WHERE state = ANY ('{pending,running,in_doubt}'::idemjob.job_state[])" \
			-c "ALTER TABLE idemjob.jobs RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_insert_scale_factor, autovacuum_analyze_scale_factor)" \
			-c "ALTER TABLE idemjob.attempts RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_insert_scale_factor, autovacuum_analyze_scale_factor)" \
			-c "ALTER TABLE idemjob.jobs SET (fillfactor = 90)" -c "ALTER TABLE idemjob.attempts SET (fillfactor = 90)"
	fi
	RELOPTS=$(q "$db" -c "SELECT string_agg(relname || ': ' || coalesce(array_to_string(reloptions, ', '), 'defaults'), '; ' ORDER BY relname)
		FROM pg_class WHERE relnamespace = 'idemjob'::regnamespace AND relname IN ('jobs', 'attempts')")
	SNAP[$s,opts]=$RELOPTS
	t0=$(date +%s)
	"$PG_BINDIR/pgbench" -n -M prepared -h "$WORK" -p "$PORT" -U postgres -c 2 -j 2 -t $(( N / 2 )) \
		-f "$WORK/submit.sql" "$db" >"$WORK/submit.out" 2>&1 || { cat "$WORK/submit.out" >&2; exit 1; }
	"$PG_BINDIR/pgbench" -n -M prepared -h "$WORK" -p "$PORT" -U postgres -c 4 -j 2 -t $(( N / 4 )) \
		-f "$WORK/work.sql" "$db" >"$WORK/work.out" 2>&1 || { cat "$WORK/work.out" >&2; exit 1; }
	SNAP[$s,secs]=$(( $(date +%s) - t0 ))
	SNAP[$s,done]=$(q "$db" -c "SELECT count(*) FILTER (WHERE state = 'succeeded') || ' succeeded, ' || count(*) FILTER (WHERE state <> 'succeeded') || ' not' FROM idemjob.jobs")
	SNAP[$s,after]=$(q "$db" -F '|' -c "$STATS_SQL")
	q "$db" -c "VACUUM idemjob.jobs" -c "VACUUM idemjob.attempts"
	SNAP[$s,vacuum]=$(q "$db" -F '|' -c "$STATS_SQL")
	log "schema $s: ${SNAP[$s,secs]} s, ${SNAP[$s,done]}"
done

VER=$("$PG_BINDIR/postgres" --version | awk '{print $3}')
REPORT="$OUT/BLOAT.md"
{
	echo "# Bloat over a burst (bench/bloat.sh)"
	echo
	echo "$(date -u +%F), PostgreSQL $VER, $(nproc) CPUs, autovacuum at its defaults; $N submits (2 clients),"
	echo "then $N jobs worked by 4 workers: claim with a lease, begin_attempt, a heartbeat for every"
	echo "4th job, complete_attempt. \"1.1\" = 1.1's indexes (jobs_active) and fillfactor on the"
	echo "installed tables; \"current\" = as installed."
	for s in $SCHEMAS; do
		echo
		echo "## $s"
		echo
		echo "reloptions: ${SNAP[$s,opts]}; burst ${SNAP[$s,secs]} s; jobs: ${SNAP[$s,done]}"
		echo
		echo "| table | updates | HOT | HOT % | live | dead after the burst | autovacuums, autoanalyzes during it | size after | size after VACUUM |"
		echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
		paste -d '|' <(grep '^T' <<<"${SNAP[$s,after]}") <(grep '^T' <<<"${SNAP[$s,vacuum]}") |
			awk -F'|' '{printf "| %s | %d | %d | %.1f | %d | %d | %d, %d | %.1f MB | %.1f MB |\n", $2, $3, $4, ($3 ? 100*$4/$3 : 0), $5, $6, $8, $9, $7/1048576, $16/1048576}'
		echo
		echo "| index | size after the burst | leaf density (partial indexes) | size after VACUUM | leaf density |"
		echo "|---|---:|---:|---:|---:|"
		paste -d '|' <(grep '^I' <<<"${SNAP[$s,after]}") <(grep '^I' <<<"${SNAP[$s,vacuum]}") |
			awk -F'|' '{printf "| %s | %.2f MB | %s | %.2f MB | %s |\n", $2, $3/1048576, $4, $7/1048576, $8}'
	done
} >"$REPORT"
log "wrote $REPORT"
cat "$REPORT"
