#!/usr/bin/env bash
#
# bench/w7.sh: W7 of issue 9, claim + complete against the bare-SQL floor.
#
#   bench/w7.sh            N = 100000 pending jobs (BENCH_W7_JOBS), pgbench -T 10
#   bench/w7.sh --smoke    N = 5000, -T 2; writes bench/results/smoke/W7.md
#
# Starts its own throw-away cluster (port BENCH_W7_PORT, default 5768;
# synchronous_commit off, shared_buffers 1GB) with the idemjob already
# installed on the machine (it does not build), and for each client count
# (BENCH_W7_CLIENTS, default "1 4 8") and each workload:
#   floor        workloads/floor/claim_one.sql: claim UPDATE..SKIP LOCKED +
#                attempt INSERT (one statement), then the CAS complete
#   idemjob      workloads/idemjob/claim_one.sql: claim('w', NULL, 1), then
#                complete_attempt
#   idemjob/nn   the same with ALTER DATABASE ... SET idemjob.notify = off
#   batch/1rt    workloads/idemjob/claim_batch.sql: claim 100 and complete
#                each in ONE statement (one round trip, one transaction)
#   batch/101rt  workloads/idemjob/claim_batch_rt.sql: claim 100, then 100
#                complete_attempt calls, each its own round trip/transaction
# each on a fresh copy of a template database refilled with N pending jobs
# (VACUUM ANALYZE, CHECKPOINT), pgbench -M prepared -T T.  Measures jobs/s
# (jobs succeeded / pgbench's run time), WAL bytes per job (LSN difference),
# server CPU per job (utime+stime of the postmaster and all its children,
# reaped ones included, from /proc: every server process, autovacuum and
# the WAL writer too), and checks that no job was processed twice.
#
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SMOKE=0
[ "${1:-}" = --smoke ] && SMOKE=1
PG_CONFIG=${PG_CONFIG:-$(command -v pg_config || echo /usr/lib/postgresql/15/bin/pg_config)}
PG_BINDIR=${PG_BINDIR:-$("$PG_CONFIG" --bindir)}
PORT=${BENCH_W7_PORT:-5768}
WORK=${BENCH_W7_WORK:-/tmp/idemjob-w7-$PORT}
CLIENTS=${BENCH_W7_CLIENTS:-1 4 8}
WORKLOADS=${BENCH_W7_WORKLOADS:-floor idemjob idemjob_nonotify batch_1rt batch_101rt}
if [ "$SMOKE" = 1 ]; then
	N=${BENCH_W7_JOBS:-5000}; T=${BENCH_W7_T:-2}; OUT=${BENCH_W7_OUT:-$HERE/results/smoke}
else
	N=${BENCH_W7_JOBS:-100000}; T=${BENCH_W7_T:-10}; OUT=${BENCH_W7_OUT:-$HERE/results}
fi
mkdir -p "$OUT"
HZ=$(getconf CLK_TCK)

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
PGDATA_W="$WORK/data"
PSQL=("$PG_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$WORK" -p "$PORT" -U postgres)
q() { local db=$1; shift; PGOPTIONS="-c client_min_messages=warning" "${PSQL[@]}" -d "$db" "$@"; }
log() { echo "w7: $*" >&2; }
UP=0
cleanup() {
	local rc=$?
	[ "$UP" = 1 ] && as_pg "$PG_BINDIR/pg_ctl" -D "$PGDATA_W" -m fast -w stop >/dev/null 2>&1
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ -e "$PGDATA_W/postmaster.pid" ] && as_pg "$PG_BINDIR/pg_ctl" -D "$PGDATA_W" -m immediate stop >/dev/null 2>&1 || true
rm -rf "$WORK"; mkdir -p "$WORK"
[ "$(id -u)" = 0 ] && chown postgres: "$WORK"
as_pg "$PG_BINDIR/initdb" -D "$PGDATA_W" -A trust -U postgres -E UTF8 --locale=C --no-sync >"$WORK/initdb.log" 2>&1
cat >>"$PGDATA_W/postgresql.conf" <<EOF
listen_addresses = ''
port = $PORT
unix_socket_directories = '$WORK'
max_connections = 40
shared_buffers = 1GB
synchronous_commit = off
max_wal_size = 20GB
min_wal_size = 1GB
checkpoint_timeout = 30min
logging_collector = off
log_min_messages = warning
EOF
as_pg "$PG_BINDIR/pg_ctl" -D "$PGDATA_W" -l "$WORK/server.log" -w start >/dev/null
UP=1
PM=$(head -1 "$PGDATA_W/postmaster.pid")

q postgres -c "CREATE DATABASE w7_tmpl"
q w7_tmpl -c "CREATE EXTENSION idemjob" -f "$HERE/floor.sql"
EXTV=$(q w7_tmpl -c "SELECT extversion FROM pg_extension WHERE extname = 'idemjob'")
PROVIDER=$(q w7_tmpl -c "LOAD 'idemjob'" -c "SHOW idemjob.default_provider")

# server CPU ticks: postmaster (with its reaped children) + live children
cpu_ticks() {
	local pids p t=0 v
	pids="$PM $(ps -o pid= --ppid "$PM")"
	for p in $pids; do
		v=$(awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " ");
			print f[12] + f[13] + (ppid_is_pm ? 0 : f[14] + f[15]) }' ppid_is_pm=$([ "$p" = "$PM" ] && echo 0 || echo 1) \
			"/proc/$p/stat" 2>/dev/null || echo 0)
		t=$((t + v))
	done
	echo "$t"
}

fill() {	# $1 db, $2 impl
	if [ "$2" = floor ]; then
		q "$1" -c "INSERT INTO floor.jobs (owner_id, idempotency_key, intent, params, provider)
			SELECT 'o', 'k' || g, 'w7', '{}', '$PROVIDER' FROM generate_series(1, $N) g"
		q "$1" -c "VACUUM ANALYZE floor.jobs, floor.attempts"
	else
		q "$1" -c "SELECT count(*) FROM generate_series(1, $N) g,
			LATERAL idemjob.submit('o', 'k' || g, 'w7', '{}') s" >/dev/null
		q "$1" -c "VACUUM ANALYZE idemjob.jobs, idemjob.attempts"
	fi
}

RES="$WORK/results.tsv"
: >"$RES"
measure() {	# $1 workload, $2 clients
	local w=$1 c=$2 impl=idemjob script per=1 db=w7_run
	case $w in
		floor) impl=floor; script=floor/claim_one.sql ;;
		idemjob|idemjob_nonotify) script=idemjob/claim_one.sql ;;
		batch_1rt) script=idemjob/claim_batch.sql ;;
		batch_101rt) script=idemjob/claim_batch_rt.sql ;;
	esac
	q postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db TEMPLATE w7_tmpl"
	[ "$w" = idemjob_nonotify ] && q postgres -c "ALTER DATABASE $db SET idemjob.notify = off"
	fill $db $impl
	q $db -c "CHECKPOINT"
	local lsn0 lsn1 cpu0 cpu1 out
	lsn0=$(q $db -c "SELECT pg_current_wal_lsn()")
	cpu0=$(cpu_ticks)
	out=$("$PG_BINDIR/pgbench" -n -M prepared -h "$WORK" -p "$PORT" -U postgres -c "$c" -j "$(( c < 2 ? c : 2 ))" \
		-T "$T" -f "$HERE/workloads/$script" $db 2>"$WORK/pgbench.err") || { cat "$WORK/pgbench.err" >&2; return 1; }
	sleep 0.5
	cpu1=$(cpu_ticks)
	lsn1=$(q $db -c "SELECT pg_current_wal_lsn()")
	local ntx tps
	ntx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' <<<"$out")
	grep -q "number of failed transactions: 0\b\|^number of failed" <<<"$out" || true
	local s=$impl
	# jobs done, jobs left pending, jobs still running, doubles
	local chk
	chk=$(q $db -F' ' -c "SELECT
		(SELECT count(*) FROM $s.jobs WHERE state = 'succeeded'),
		(SELECT count(*) FROM $s.jobs WHERE state = 'pending'),
		(SELECT count(*) FROM $s.jobs WHERE state = 'running'),
		(SELECT count(*) FROM $s.jobs WHERE attempt_count > 1)
		+ (SELECT count(*) FROM (SELECT job_id FROM $s.attempts GROUP BY job_id HAVING count(*) > 1) x)
		+ (SELECT count(*) FROM $s.attempts a JOIN $s.jobs j ON j.id = a.job_id
		    WHERE a.state = 'succeeded' AND j.completed_by IS DISTINCT FROM a.id)
		+ (SELECT count(*) FROM $s.race_log)")
	local done left running dup
	read -r done left running dup <<<"$chk"
	local jps wal cpu
	jps=$(awk -v d="$done" -v t="$tps" -v n="$ntx" 'BEGIN { printf "%.0f", (n > 0 ? d * t / n : 0) }')
	wal=$(q $db -c "SELECT round(pg_wal_lsn_diff('$lsn1', '$lsn0') / greatest($done, 1))")
	cpu=$(awk -v a="$cpu0" -v b="$cpu1" -v d="$done" -v hz="$HZ" 'BEGIN { printf "%.0f", (b - a) / hz * 1e6 / (d > 0 ? d : 1) }')
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$c" "$jps" "$wal" "$cpu" "$done" "$left" "$running" "$dup" >>"$RES"
	log "$w c=$c: $jps jobs/s, $wal WAL B/job, $cpu us CPU/job, done $done, left $left, running $running, doubles $dup"
	q postgres -c "DROP DATABASE $db"
}

log "N=$N T=${T}s clients: $CLIENTS; idemjob $EXTV; $(nproc) CPUs"
for c in $CLIENTS; do
	for w in $WORKLOADS; do
		measure "$w" "$c"
	done
done

# the report
{
	echo "# W7: claim + complete, idemjob $EXTV against the floor"
	echo
	echo "$(date -u +%F), $("$PG_BINDIR/postgres" --version), $(nproc) CPUs; N = $N pending jobs refilled before each"
	echo "run, pgbench -M prepared -T $T, synchronous_commit off, shared_buffers 1GB, one run per point."
	echo "jobs/s = jobs succeeded / pgbench run time; WAL and server CPU (every server process,"
	echo "from /proc, ${HZ} Hz ticks) per job succeeded; x floor = ratio to the floor at the same clients."
	echo "\"doubles\" counts jobs with attempt_count > 1, jobs with more than one attempt, succeeded"
	echo "attempts that are not the job's completed_by, and race_log rows: all must be 0."
	echo
	echo "| workload | clients | jobs/s | x floor | WAL B/job | x floor | CPU µs/job | x floor | done | left pending | left running | doubles |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	awk -F'\t' '
		{ row[NR] = $0; if ($1 == "floor") { fj[$2] = $3; fw[$2] = $4; fc[$2] = $5 } }
		function r(a, b) { return (b > 0 ? sprintf("%.2f", a / b) : "-") }
		END { for (i = 1; i <= NR; i++) { split(row[i], f, "\t");
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				f[1], f[2], f[3], r(f[3], fj[f[2]]), f[4], r(f[4], fw[f[2]]), f[5], r(f[5], fc[f[2]]),
				f[6], f[7], f[8], f[9] } }' "$RES"
	echo
	echo "Workloads: floor = bench/workloads/floor/claim_one.sql; idemjob = idemjob/claim_one.sql"
	echo "(claim('w', NULL, 1), complete_attempt: 2 round trips per job); idemjob_nonotify = the same with"
	echo "idemjob.notify = off for the database; batch_1rt = idemjob/claim_batch.sql (claim 100 and"
	echo "complete each in ONE statement: one round trip and one transaction per 100 jobs, which a worker"
	echo "calling a provider in between cannot do); batch_101rt = idemjob/claim_batch_rt.sql (claim 100,"
	echo "then 100 complete_attempt calls, 101 round trips and transactions per 100 jobs)."
	echo "A \"left pending\" of 0 means the queue ran dry before the end: that rate is a lower bound."
} >"$OUT/W7.md"
cat "$OUT/W7.md"
