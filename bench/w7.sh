#!/usr/bin/env bash
#
# bench/w7.sh: W7 of issue 9, claim + complete against the bare-SQL floor.
#
#   bench/w7.sh            N = 100000 pending jobs (BENCH_W7_JOBS), pgbench -T 5
#                          (the batches drain 100,000 jobs in under 10 s), 9 runs
#                          (about 22 minutes; single runs move a lot on 2 CPUs)
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
#   floor_lease  workloads/floor/claim_lease.sql: the floor's claim with a
#                lease, the confirmation (one UPDATE), then the CAS complete
#   lease        workloads/idemjob/claim_lease.sql: claim(..., lease => true),
#                begin_attempt, complete_attempt (the two-phase claim, 1.2)
#   lease_rides  workloads/idemjob/claim_lease_rides.sql: claim with a lease,
#                then complete_attempt, which confirms it
#   batch/1rt    workloads/idemjob/claim_batch.sql: claim 100 and complete
#                each in ONE statement (one round trip, one transaction)
#   batch/tx     workloads/idemjob/claim_batch_tx.sql: claim 100 (one
#                transaction), then 100 complete_attempt calls pipelined in
#                one transaction
#   batch_tx_lease  workloads/idemjob/claim_batch_tx_lease.sql: batch/tx with
#                a lease, every attempt confirmed in one statement first
#   batch/101rt  workloads/idemjob/claim_batch_rt.sql: claim 100, then 100
#                complete_attempt calls, each its own round trip/transaction
#   graphile     Graphile Worker's own get_job then complete_job SQL, and
#   pgboss       pg-boss's own fetch then complete SQL: pgbench scripts that
#                bench/peers.js writes at run time from the npm packages in
#                BENCH_NPM_DIR (~/.cache/idemjob-bench/npm; installed there
#                with npm when missing: graphile-worker@0.17, pg-boss@10);
#                each on its own database (the peer's schema only).  Left
#                out, with a line in the report, without node/npm/packages.
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
WORKLOADS=${BENCH_W7_WORKLOADS:-floor idemjob floor_lease lease lease_rides batch_101rt graphile batch_tx batch_tx_lease batch_1rt pgboss}
NPM_DIR=${BENCH_NPM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/idemjob-bench/npm}
# pgbench protocol for the peers: the one their node driver uses (Graphile
# Worker: named prepared statements; pg-boss: unnamed statements, parsed on
# every call); "prepared" for all gives the floor's protocol to everyone
PEER_MODE=${BENCH_W7_PEER_MODE:-own}
if [ "$SMOKE" = 1 ]; then
	N=${BENCH_W7_JOBS:-5000}; T=${BENCH_W7_T:-2}; OUT=${BENCH_W7_OUT:-$HERE/results/smoke}; RUNS=${BENCH_W7_RUNS:-1}
else
	N=${BENCH_W7_JOBS:-100000}; T=${BENCH_W7_T:-5}; OUT=${BENCH_W7_OUT:-$HERE/results}; RUNS=${BENCH_W7_RUNS:-9}
fi
mkdir -p "$OUT"
HZ=$(getconf CLK_TCK)
NOTES=()

source "$HERE/cluster.sh"
PSQL=("$PG_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$WORK" -p "$PORT" -U postgres)
q() { local db=$1; shift; PGOPTIONS="-c client_min_messages=warning" "${PSQL[@]}" -d "$db" "$@"; }
log() { echo "w7: $*" >&2; }
note() { NOTES+=("$*"); log "note: $*"; }
has_w() { [[ " $WORKLOADS " == *" $1 "* ]]; }
drop_w() { WORKLOADS=$(tr ' ' '\n' <<<"$WORKLOADS" | grep -vx "$1" | tr '\n' ' '); }
bench_cluster_start <<EOF
max_connections = 40
shared_buffers = 1GB
synchronous_commit = off
max_wal_size = 20GB
min_wal_size = 1GB
checkpoint_timeout = 30min
# a queue table: vacuum often, for every implementation alike, so that a
# claim does not walk the index past claimed jobs for long (with the
# defaults a run's rate depended on whether autovacuum happened to run)
autovacuum_naptime = 1s
autovacuum_vacuum_scale_factor = 0.01
autovacuum_vacuum_cost_limit = 10000
logging_collector = off
log_min_messages = warning
EOF
PM=$(head -1 "$PGDATA_W/postmaster.pid")

q postgres -c "CREATE DATABASE w7_tmpl"
q w7_tmpl -c "CREATE EXTENSION idemjob" -f "$HERE/floor.sql"
EXTV=$(q w7_tmpl -c "SELECT extversion FROM pg_extension WHERE extname = 'idemjob'")
PROVIDER=$(q w7_tmpl -c "LOAD 'idemjob'" -c "SHOW idemjob.default_provider")

# the peers: packages, then one template each with the peer's own schema
GEN="$WORK/peers"
mkdir -p "$GEN"
declare -A PEER_PKG=([graphile]=graphile-worker [pgboss]=pg-boss) PEER_SPEC=([graphile]=graphile-worker@0.17 [pgboss]=pg-boss@10)
declare -A PEER_VER PEER_M PEER_PRESENT
for p in graphile pgboss; do
	has_w $p || continue
	pkg=${PEER_PKG[$p]}
	if ! command -v node >/dev/null 2>&1; then
		note "$p SKIPPED: no node"; drop_w $p; continue
	fi
	if [ ! -f "$NPM_DIR/node_modules/$pkg/package.json" ] && command -v npm >/dev/null 2>&1; then
		log "installing ${PEER_SPEC[$p]} from npm into $NPM_DIR"
		mkdir -p "$NPM_DIR"
		(cd "$NPM_DIR" && timeout 300 npm install --no-audit --no-fund --loglevel=error "${PEER_SPEC[$p]}" >/dev/null 2>&1) || true
	fi
	if [ ! -f "$NPM_DIR/node_modules/$pkg/package.json" ]; then
		note "$p SKIPPED: npm package $pkg not in $NPM_DIR and npm or its registry not available"; drop_w $p
	fi
done
if has_w graphile; then
	q postgres -c "CREATE DATABASE w7_tmpl_graphile"
	if ! "$NPM_DIR/node_modules/.bin/graphile-worker" -c "postgres://postgres@/w7_tmpl_graphile?host=$WORK&port=$PORT" \
			--schema-only >"$WORK/graphile.log" 2>&1; then
		note "graphile SKIPPED: its migrations failed: $(tail -3 "$WORK/graphile.log" | tr '\n' ' ')"; drop_w graphile
	elif ! node "$HERE/peers.js" graphile "$NPM_DIR" "$GEN" 1 w7 >/dev/null 2>>"$WORK/graphile.log"; then
		# made again in fill() for the task id the database gives
		note "graphile SKIPPED: its SQL could not be made: $(tail -3 "$WORK/graphile.log" | tr '\n' ' ')"; drop_w graphile
	fi
fi
if has_w pgboss; then
	q postgres -c "CREATE DATABASE w7_tmpl_pgboss"
	if ! read -r PEER_VER[pgboss] PEER_M[pgboss] PEER_PRESENT[pgboss] < <(node "$HERE/peers.js" pgboss "$NPM_DIR" "$GEN" "$N" 2>"$WORK/pgboss.log") \
			|| ! q w7_tmpl_pgboss -f "$GEN/pgboss_schema.sql" -f "$GEN/pgboss_queue.sql" >>"$WORK/pgboss.log" 2>&1; then
		note "pgboss SKIPPED: its SQL could not be made or run: $(tail -3 "$WORK/pgboss.log" | tr '\n' ' ')"; drop_w pgboss
	fi
fi

# server_cpu_ticks, wait_backends_gone
source "$HERE/cpu.sh"

fill() {	# $1 db, $2 impl
	if [ "$2" = graphile ]; then
		# its add_jobs(), one task identifier, no job_key, no queue name; then
		# the pgbench script for the task id the database gave 'w7'
		q "$1" -c "SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(
			SELECT ROW('w7', '{}'::json, NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec
			  FROM generate_series(1, $N)))" >/dev/null
		q "$1" -c "VACUUM ANALYZE graphile_worker._private_jobs"
		local tid
		tid=$(q "$1" -c "SELECT id FROM graphile_worker._private_tasks WHERE identifier = 'w7'")
		read -r PEER_VER[graphile] PEER_M[graphile] PEER_PRESENT[graphile] \
			< <(node "$HERE/peers.js" graphile "$NPM_DIR" "$GEN" "$tid" w7)
	elif [ "$2" = pgboss ]; then
		# its insert() of N jobs {name: 'w7', data: {}} (one statement)
		q "$1" -f "$GEN/pgboss_fill.sql"
		q "$1" -c "VACUUM ANALYZE pgboss.job"
	elif [ "$2" = floor ]; then
		q "$1" -c "INSERT INTO floor.jobs (owner_id, idempotency_key, intent, params, provider)
			SELECT 'o', 'k' || g, 'w7', '{}', '$PROVIDER' FROM generate_series(1, $N) g"
		q "$1" -c "VACUUM ANALYZE floor.jobs, floor.attempts"
	else
		q "$1" -c "SELECT count(*) FROM generate_series(1, $N) g,
			LATERAL idemjob.submit('o', 'k' || g, 'w7', '{}') s" >/dev/null
		q "$1" -c "VACUUM ANALYZE idemjob.jobs, idemjob.attempts"
	fi
}

# UPDATEs of the peer's job rows so far (0 for the others)
peer_updates() {	# $1 db, $2 impl
	case $2 in
		graphile) q "$1" -c "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relid = 'graphile_worker._private_jobs'::regclass" ;;
		pgboss) q "$1" -c "SELECT coalesce(sum(n_tup_upd), 0) FROM pg_stat_user_tables WHERE schemaname = 'pgboss'" ;;
		*) echo 0 ;;
	esac
}

RES="$WORK/results.tsv"
: >"$RES"
measure() {	# $1 workload, $2 clients, $3 run
	local w=$1 c=$2 impl=idemjob script per=1 db=w7_run tmpl=w7_tmpl mode=prepared
	local -a vars=()
	case $w in
		floor) impl=floor; script=floor/claim_one.sql ;;
		floor_lease) impl=floor; script=floor/claim_lease.sql ;;
		idemjob|idemjob_nonotify) script=idemjob/claim_one.sql ;;
		lease) script=idemjob/claim_lease.sql ;;
		lease_rides) script=idemjob/claim_lease_rides.sql ;;
		batch_tx_lease) script=idemjob/claim_batch_tx_lease.sql ;;
		batch_1rt) script=idemjob/claim_batch.sql ;;
		batch_101rt) script=idemjob/claim_batch_rt.sql ;;
		batch_tx) script=idemjob/claim_batch_tx.sql ;;
		graphile|pgboss) impl=$w; tmpl=w7_tmpl_$w; script="$GEN/${w}_claim_one.sql" ;;
	esac
	q postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db TEMPLATE $tmpl"
	[ "$w" = idemjob_nonotify ] && q postgres -c "ALTER DATABASE $db SET idemjob.notify = off"
	fill $db $impl
	if [ "$impl" = graphile ] || [ "$impl" = pgboss ]; then
		[ "$PEER_MODE" = own ] && mode=${PEER_M[$impl]}
		local v
		while IFS= read -r v; do vars+=(-D "$v"); done <"$GEN/$impl.vars"
	else
		script="$HERE/workloads/$script"
	fi
	local st0 st1
	st0=$(peer_updates $db $impl)
	q $db -c "CHECKPOINT"
	local lsn0 lsn1 cpu0 cpu1 out
	lsn0=$(q $db -c "SELECT pg_current_wal_lsn()")
	cpu0=$(server_cpu_ticks "$PM")
	out=$("$PG_BINDIR/pgbench" -n -M "$mode" -h "$WORK" -p "$PORT" -U postgres -c "$c" -j "$(( c < 2 ? c : 2 ))" \
		-T "$T" ${vars[@]+"${vars[@]}"} -f "$script" $db 2>"$WORK/pgbench.err") || { cat "$WORK/pgbench.err" >&2; return 1; }
	# the clients' backends gone: their CPU is in the postmaster's cutime,
	# their table statistics are flushed
	wait_backends_gone q $db
	cpu1=$(server_cpu_ticks "$PM")
	lsn1=$(q $db -c "SELECT pg_current_wal_lsn()")
	st1=$(peer_updates $db $impl)
	local ntx tps
	ntx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' <<<"$out")
	grep -q "number of failed transactions: 0\b\|^number of failed" <<<"$out" || true
	local s=$impl
	# jobs done, jobs left pending, jobs still running, doubles
	local chk
	case $impl in
	graphile)
		# done = deleted; a claim is an UPDATE of the job (pg_stat n_tup_upd):
		# claims beyond done + still locked, and jobs claimed twice, are doubles
		chk=$(q $db -F' ' -c "SELECT $N - count(*),
			count(*) FILTER (WHERE locked_by IS NULL),
			count(*) FILTER (WHERE locked_by IS NOT NULL),
			count(*) FILTER (WHERE attempts > 1)
			+ ($st1 - $st0) - ($N - count(*)) - count(*) FILTER (WHERE locked_by IS NOT NULL)
			FROM graphile_worker._private_jobs") ;;
	pgboss)
		# completed jobs stay in pgboss.job (archive() runs from its maintenance,
		# which no pg-boss process runs here; counted anyway); each job is two
		# UPDATEs (fetch, complete): more than 2 x done + active, or a
		# retry_count > 0 (fetched again after a start), are doubles
		chk=$(q $db -F' ' -c "SELECT d + a, l, r, x + ($st1 - $st0) - 2 * (d + a) - r FROM (SELECT
			count(*) FILTER (WHERE state = 'completed') AS d,
			count(*) FILTER (WHERE state < 'active') AS l,
			count(*) FILTER (WHERE state = 'active') AS r,
			count(*) FILTER (WHERE retry_count > 0) AS x,
			(SELECT count(*) FROM pgboss.archive WHERE state = 'completed') AS a
			FROM pgboss.job) s") ;;
	*)
	chk=$(q $db -F' ' -c "SELECT
		(SELECT count(*) FROM $s.jobs WHERE state = 'succeeded'),
		(SELECT count(*) FROM $s.jobs WHERE state = 'pending'),
		(SELECT count(*) FROM $s.jobs WHERE state = 'running'),
		(SELECT count(*) FROM $s.jobs WHERE attempt_count > 1)
		+ (SELECT count(*) FROM (SELECT job_id FROM $s.attempts GROUP BY job_id HAVING count(*) > 1) x)
		+ (SELECT count(*) FROM $s.attempts a JOIN $s.jobs j ON j.id = a.job_id
		    WHERE a.state = 'succeeded' AND j.completed_by IS DISTINCT FROM a.id)
		+ (SELECT count(*) FROM $s.race_log)") ;;
	esac
	local done left running dup
	read -r done left running dup <<<"$chk"
	local jps wal cpu
	jps=$(awk -v d="$done" -v t="$tps" -v n="$ntx" 'BEGIN { printf "%.0f", (n > 0 ? d * t / n : 0) }')
	wal=$(q $db -c "SELECT round(pg_wal_lsn_diff('$lsn1', '$lsn0') / greatest($done, 1))")
	cpu=$(awk -v a="$cpu0" -v b="$cpu1" -v d="$done" -v hz="$HZ" 'BEGIN { printf "%.0f", (b - a) / hz * 1e6 / (d > 0 ? d : 1) }')
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$c" "$jps" "$wal" "$cpu" "$done" "$left" "$running" "$dup" "$3" >>"$RES"
	log "$w c=$c: $jps jobs/s, $wal WAL B/job, $cpu us CPU/job, done $done, left $left, running $running, doubles $dup"
	q postgres -c "DROP DATABASE $db"
}

log "N=$N T=${T}s clients: $CLIENTS; idemjob $EXTV; $(nproc) CPUs"
for c in $CLIENTS; do
	for r in $(seq 1 "$RUNS"); do
	# the order turns by one each run: a workload's place (after the floor,
	# after pg-boss's heavy run, ...) moves the figures more than 10 %
	read -ra wl <<<"$WORKLOADS"
	k=$(( (r - 1) % ${#wl[@]} ))
	for w in "${wl[@]:k}" "${wl[@]:0:k}"; do
		# pg-boss is two orders slower (its fetch sorts the queue): one run
		[ "$w" = pgboss ] && [ "$r" -gt 1 ] && continue
		measure "$w" "$c" "$r"
	done
	done
done

# the report
{
	echo "# W7: claim + complete, idemjob $EXTV against the floor"
	echo
	echo "$(date -u +%F), $("$PG_BINDIR/postgres" --version), $(nproc) CPUs; N = $N pending jobs refilled before each"
	echo "run, pgbench -M prepared -T $T, synchronous_commit off, shared_buffers 1GB, autovacuum every second"
	echo "(naptime 1s, scale factor 0.01, for every implementation alike); $RUNS runs per point (pg-boss: 1),"
	echo "the implementations taking turns within each run; each figure is the median over runs, each ratio"
	echo "the median over runs of the ratio to the floor of the same run."
	echo "jobs/s = jobs succeeded / pgbench run time; WAL and server CPU (every server process,"
	echo "from /proc, ${HZ} Hz ticks) per job succeeded; x floor = ratio to the floor at the same clients."
	echo "\"doubles\" counts jobs with attempt_count > 1, jobs with more than one attempt, succeeded"
	echo "attempts that are not the job's completed_by, and race_log rows: all must be 0."
	echo
	echo "| workload | clients | runs | jobs/s | x floor | WAL B/job | x floor | CPU µs/job | x floor | done | left pending | left running (max) | doubles (max) |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	# the median over runs of each figure; a ratio is the median over runs
	# of the ratio to the floor of the same run (slow drifts cancel)
	python3 - "$RES" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
floor = {(r[1], r[9]): r for r in rows if r[0] == "floor"}
order = []
for r in rows:
    if (r[0], r[1]) not in order:
        order.append((r[0], r[1]))
med = lambda xs: statistics.median(xs) if xs else 0
for w, c in order:
    mine = [r for r in rows if r[0] == w and r[1] == c]
    def m(i):
        return med([float(r[i]) for r in mine])
    def ratio(i):
        xs = [float(r[i]) / float(floor[(c, r[9])][i]) for r in mine
              if (c, r[9]) in floor and float(floor[(c, r[9])][i]) > 0]
        return "%.2f" % med(xs) if xs else "-"
    print("| %s | %s | %d | %.0f | %s | %.0f | %s | %.0f | %s | %.0f | %.0f | %d | %d |" % (
        w, c, len(mine), m(2), ratio(2), m(3), ratio(3), m(4), ratio(4),
        m(5), m(6), max(int(r[7]) for r in mine), max(int(r[8]) for r in mine)))
PY
	echo
	echo "floor_lease = bench/workloads/floor/claim_lease.sql (the floor's claim with a lease, the confirmation"
	echo "as one UPDATE in its own transaction, then the CAS: 3 round trips, as lease)."
	echo "Workloads: floor = bench/workloads/floor/claim_one.sql; idemjob = idemjob/claim_one.sql"
	echo "(claim('w', NULL, 1), complete_attempt: 2 round trips per job); idemjob_nonotify = the same with"
	echo "idemjob.notify = off for the database. lease = idemjob/claim_lease.sql (the two-phase claim:"
	echo "claim(..., lease => true), begin_attempt, complete_attempt: 3 round trips per job); lease_rides ="
	echo "idemjob/claim_lease_rides.sql (claim with a lease, then complete_attempt, which confirms it: 2)."
	echo "Batches of claim(max_jobs => 100), every job with its"
	echo "own attempt and its own complete_attempt (its own compare-and-swap):"
	echo "batch_101rt = idemjob/claim_batch_rt.sql (then 100 complete_attempt calls, each its own round"
	echo "trip and transaction: a worker that reports each result as it comes);"
	echo "batch_tx = idemjob/claim_batch_tx.sql (then the 100 complete_attempt calls pipelined in one"
	echo "transaction: a worker that reports the batch's results together, as from a provider's batch API);"
	echo "batch_tx_lease = idemjob/claim_batch_tx_lease.sql (batch_tx with a lease: the 100 attempts confirmed"
	echo "by one statement of begin_attempt calls before the completes: 3 transactions per 100 jobs);"
	echo "batch_1rt = idemjob/claim_batch.sql (claim and the 100 complete_attempt calls in ONE statement,"
	echo "one round trip and one transaction per 100 jobs: the ceiling, no provider call in between)."
	if has_w graphile || has_w pgboss; then
		echo
		echo "Peers, each on its own database holding only its schema, N jobs for one task/queue 'w7',"
		echo "pgbench scripts written at run time by bench/peers.js from the installed npm packages'"
		echo "own query builders (the SQL text unchanged, parameters bound as their driver binds them):"
		has_w graphile && echo "graphile = Graphile Worker ${PEER_VER[graphile]:-?}: get_job (batchGetJobs, batch size 1, its worker's defaults), then complete_job (batchCompleteJobs), pgbench -M $([ "$PEER_MODE" = own ] && echo "${PEER_M[graphile]:-?}" || echo prepared); jobs added with graphile_worker.add_jobs (no job_key, no queue); completed jobs are deleted, done = N - rows left, doubles = claims (UPDATEs of its job table, pg_stat) beyond done + still locked, plus rows with attempts > 1."
		has_w pgboss && echo "pgboss = pg-boss ${PEER_VER[pgboss]:-?}: work()'s fetch (fetchNextJob, batchSize 1), then complete() (completeJobs), pgbench -M $([ "$PEER_MODE" = own ] && echo "${PEER_M[pgboss]:-?}" || echo prepared); schema from its construction plans, queue 'w7' by createQueue (policy standard), jobs by insert(); done = state completed (in pgboss.job, or pgboss.archive), doubles = UPDATEs beyond 2 per done job + active, plus retry_count > 0."
	fi
	echo "A \"left pending\" of 0 means the queue ran dry before the end: that rate is a lower bound."
	for n in ${NOTES[@]+"${NOTES[@]}"}; do echo; echo "Note: $n"; done
} >"$OUT/W7.md"
cat "$OUT/W7.md"
