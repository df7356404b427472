#!/usr/bin/env bash
#
# bench/w7_backlog.sh: W7 (claim + complete) at a small and at a large
# backlog, in the same run (issue 21: claim stays O(log n) at any backlog).
#
#   bench/w7_backlog.sh           backlogs 1000 and 100000, pgbench -T 10,
#                                 3 runs, clients "1 4"; about 6 minutes
#   bench/w7_backlog.sh --smoke   -T 3, 1 run, 1 client
#
# Starts its own throw-away cluster (port BENCH_BACKLOG_PORT, default 5721;
# synchronous_commit off, shared_buffers 1GB, autovacuum at its defaults, as
# a DBA's cluster has it) with the idemjob installed on the machine.
#
# steady   each backlog (BENCH_BACKLOG_SIZES) on a fresh copy of a template
#          holding that many due jobs (VACUUM ANALYZE, CHECKPOINT); the
#          workload claims one job, completes it and submits a new one
#          (workloads/idemjob/claim_steady.sql), so the queue keeps its
#          length; batch: claim 100, complete them in one statement, submit
#          100 (claim_steady_batch.sql).  jobs/s = jobs succeeded / run time.
#          The backlogs take turns within each run; each ratio is the median
#          over runs of large / small in the same run.
# burst    the issue's case: the clients connect and claim at the small
#          backlog (their plans cached then), and halfway through the run
#          the rest of the large backlog arrives at once, due, with no
#          ANALYZE (one INSERT, as a restore or a bulk load would); jobs/s
#          per second from pgbench -P 1, median before the burst and after
#          it (the 3 seconds after the INSERT left out).
#
# Writes bench/results/W7-backlog.md (--smoke: bench/results/smoke/).
#
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SMOKE=0
[ "${1:-}" = --smoke ] && SMOKE=1
PG_CONFIG=${PG_CONFIG:-$(command -v pg_config || echo /usr/lib/postgresql/15/bin/pg_config)}
PG_BINDIR=${PG_BINDIR:-$("$PG_CONFIG" --bindir)}
PORT=${BENCH_BACKLOG_PORT:-5721}
WORK=${BENCH_BACKLOG_WORK:-/tmp/idemjob-backlog-$PORT}
SIZES=${BENCH_BACKLOG_SIZES:-1000 100000}
if [ "$SMOKE" = 1 ]; then
	T=${BENCH_BACKLOG_T:-3}; RUNS=${BENCH_BACKLOG_RUNS:-1}; CLIENTS=${BENCH_BACKLOG_CLIENTS:-1}
	OUT=${BENCH_BACKLOG_OUT:-$HERE/results/smoke}
else
	T=${BENCH_BACKLOG_T:-10}; RUNS=${BENCH_BACKLOG_RUNS:-3}; CLIENTS=${BENCH_BACKLOG_CLIENTS:-1 4}
	OUT=${BENCH_BACKLOG_OUT:-$HERE/results}
fi
SMALL=$(tr ' ' '\n' <<<"$SIZES" | sort -n | head -1)
LARGE=$(tr ' ' '\n' <<<"$SIZES" | sort -n | tail -1)
mkdir -p "$OUT"

source "$HERE/cluster.sh"
PSQL=("$PG_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$WORK" -p "$PORT" -U postgres)
q() { local db=$1; shift; PGOPTIONS="-c client_min_messages=warning" "${PSQL[@]}" -d "$db" "$@"; }
log() { echo "w7_backlog: $*" >&2; }
bench_cluster_start <<EOF
max_connections = 20
shared_buffers = 1GB
synchronous_commit = off
max_wal_size = 20GB
checkpoint_timeout = 30min
logging_collector = off
log_min_messages = warning
EOF
PM=$(head -1 "$PGDATA_W/postmaster.pid")
HZ=$(getconf CLK_TCK)
# server_cpu_ticks, wait_backends_gone
source "$HERE/cpu.sh"

# due jobs as a bulk load writes them: one INSERT, an hour old
fill_sql() {	# $1 count, $2 key prefix
	echo "INSERT INTO idemjob.jobs (owner_id, idempotency_key, intent, params, provider, run_at)
		SELECT 'o', '$2' || g, 'w7', '{}', current_setting('idemjob.default_provider'),
			now() - interval '1 hour' FROM generate_series(1, $1) g"
}
q postgres -c "CREATE DATABASE bl_tmpl"
q bl_tmpl -c "CREATE EXTENSION idemjob"
EXTV=$(q bl_tmpl -c "SELECT extversion FROM pg_extension WHERE extname = 'idemjob'")
for n in $SIZES; do
	q postgres -c "CREATE DATABASE bl_$n TEMPLATE bl_tmpl"
	q "bl_$n" -c "LOAD 'idemjob'" -c "$(fill_sql "$n" k)"
	q "bl_$n" -c "VACUUM ANALYZE"
done
q postgres -c "CHECKPOINT"

run_pgbench() {	# $1 db, $2 clients, $3 script, $4 seconds; extra args after
	local db=$1 c=$2 script=$3 t=$4
	shift 4
	"$PG_BINDIR/pgbench" -n -M prepared -h "$WORK" -p "$PORT" -U postgres -c "$c" -j "$(( c < 2 ? c : 2 ))" \
		-T "$t" "$@" -f "$script" "$db"
}
succeeded() { q "$1" -c "SELECT count(*) FROM idemjob.jobs WHERE state = 'succeeded'"; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

declare -A RATE	# [workload,clients,size] = "r1 r2 ..."; RATIO[workload,clients] = "q1 q2 ..."
declare -A RATIO PENDING CPU CPURATIO
for run in $(seq 1 "$RUNS"); do
	for c in $CLIENTS; do
		for w in steady steady_batch; do
			script="$HERE/workloads/idemjob/claim_$w.sql"
			declare -A this=() thiscpu=()
			for n in $SIZES; do
				db="r_${n}"
				q postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db TEMPLATE bl_$n"
				cpu0=$(server_cpu_ticks "$PM")
				run_pgbench "$db" "$c" "$script" "$T" >"$WORK/pgbench.out" 2>"$WORK/pgbench.err" \
					|| { cat "$WORK/pgbench.err" >&2; exit 1; }
				wait_backends_gone q "$db"
				cpu1=$(server_cpu_ticks "$PM")
				done_n=$(succeeded "$db")
				r=$(awk -v d="$done_n" -v t="$T" 'BEGIN {printf "%.0f", d / t}')
				u=$(awk -v a="$cpu0" -v b="$cpu1" -v d="$done_n" -v hz="$HZ" 'BEGIN {printf "%.0f", (b - a) / hz * 1e6 / (d > 0 ? d : 1)}')
				this[$n]=$r
				thiscpu[$n]=$u
				RATE[$w,$c,$n]+="$r "
				CPU[$w,$c,$n]+="$u "
				PENDING[$w,$c,$n]=$(q "$db" -c "SELECT count(*) FROM idemjob.jobs WHERE state = 'pending'")
				log "run $run, $w, $c clients, backlog $n: $r jobs/s, $u µs server CPU/job"
			done
			RATIO[$w,$c]+="$(awk -v a="${this[$LARGE]}" -v b="${this[$SMALL]}" 'BEGIN {printf "%.3f", a / b}') "
			CPURATIO[$w,$c]+="$(awk -v a="${thiscpu[$LARGE]}" -v b="${thiscpu[$SMALL]}" 'BEGIN {printf "%.3f", a / b}') "
		done
	done
done

# burst: connect and claim at the small backlog, then the large one arrives
declare -A BEFORE AFTER
for c in $CLIENTS; do
	db=r_burst
	q postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db TEMPLATE bl_$SMALL"
	run_pgbench "$db" "$c" "$HERE/workloads/idemjob/claim_steady.sql" $(( 2 * T )) -P 1 \
		>"$WORK/burst.out" 2>"$WORK/burst.err" &
	pid=$!
	sleep "$T"
	q "$db" -c "LOAD 'idemjob'" -c "$(fill_sql $(( LARGE - SMALL )) b)"
	wait "$pid" || { cat "$WORK/burst.err" >&2; exit 1; }
	# progress: 5.0 s, 1234.5 tps, lat ...
	BEFORE[$c]=$(awk -v t="$T" '/^progress:/ {s=$2+0; if (s > 2 && s <= t) print $4}' "$WORK/burst.err" | median)
	AFTER[$c]=$(awk -v t="$T" '/^progress:/ {s=$2+0; if (s > t + 3) print $4}' "$WORK/burst.err" | median)
	PENDING[burst,$c]=$(q "$db" -c "SELECT count(*) FROM idemjob.jobs WHERE state = 'pending'")
	log "burst, $c clients: $SMALL -> $LARGE backlog: ${BEFORE[$c]} -> ${AFTER[$c]} jobs/s"
done

VER=$(q postgres -c "SELECT version()" | awk '{print $1, $2}')
REPORT="$OUT/W7-backlog.md"
{
	echo "# W7 at a small and a large backlog (bench/w7_backlog.sh)"
	echo
	echo "$(date -u +%F), idemjob $EXTV, $VER, $(nproc) CPUs; pgbench -M prepared -T $T, $RUNS runs,"
	echo "synchronous_commit off, shared_buffers 1GB, autovacuum at its defaults."
	echo "steady: the backlog kept at its size (each job claimed and completed is replaced by a"
	echo "new one); jobs/s = jobs succeeded / run time, median over runs; large/small = median over"
	echo "runs of the ratio within the run (1.00: no slower at the large backlog); server CPU per job"
	echo "(every server process, autovacuum included, from /proc, $HZ Hz ticks), same medians."
	echo
	echo "| workload | clients | jobs/s at $SMALL | jobs/s at $LARGE | large/small | CPU µs/job at $SMALL | at $LARGE | large/small | pending at the end ($SMALL / $LARGE) |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	[ "$RUNS" -gt 0 ] && for c in $CLIENTS; do
		for w in steady steady_batch; do
			a=$(tr ' ' '\n' <<<"${RATE[$w,$c,$SMALL]}" | grep . | median)
			b=$(tr ' ' '\n' <<<"${RATE[$w,$c,$LARGE]}" | grep . | median)
			r=$(tr ' ' '\n' <<<"${RATIO[$w,$c]}" | grep . | median)
			ca=$(tr ' ' '\n' <<<"${CPU[$w,$c,$SMALL]}" | grep . | median)
			cb=$(tr ' ' '\n' <<<"${CPU[$w,$c,$LARGE]}" | grep . | median)
			cr=$(tr ' ' '\n' <<<"${CPURATIO[$w,$c]}" | grep . | median)
			echo "| $w | $c | $a | $b | $r | $ca | $cb | $cr | ${PENDING[$w,$c,$SMALL]} / ${PENDING[$w,$c,$LARGE]} |"
		done
	done
	echo
	echo "burst: the clients connect and claim at a backlog of $SMALL (plans cached then); after"
	echo "$T s, $(( LARGE - SMALL )) due jobs arrive in one INSERT (no ANALYZE); jobs/s per second"
	echo "(pgbench -P 1), median over seconds 3..$T before and $(( T + 4 ))..$(( 2 * T )) after."
	echo
	echo "| clients | jobs/s before | jobs/s after | after/before | pending at the end |"
	echo "|---:|---:|---:|---:|---:|"
	for c in $CLIENTS; do
		echo "| $c | ${BEFORE[$c]} | ${AFTER[$c]} | $(awk -v a="${AFTER[$c]}" -v b="${BEFORE[$c]}" 'BEGIN {printf "%.2f", a / b}') | ${PENDING[burst,$c]} |"
	done
} >"$REPORT"
log "wrote $REPORT"
cat "$REPORT"
