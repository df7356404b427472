#!/usr/bin/env bash
#
# bench/citus.sh: W1, W3 and W7 on one server against the same workloads through
# a Citus cluster of a coordinator and two workers (docs/scaling.md#citus),
# all on this machine: what a call costs when Citus sends it to its node,
# not a speed-up (every node shares the same cores).
#
#   bench/citus.sh            pgbench -T 30 per point, 3 runs (about 13 min)
#   bench/citus.sh --smoke    -T 3, 1 run
#   BENCH_CITUS_SECS, BENCH_CITUS_RUNS: other -T and number of runs
#
# Starts its own throw-away clusters with the idemjob and Citus already
# installed on the machine (test/citus/lib.sh installs Citus from its
# cache): one server (port BENCH_CITUS_PORT, default 5775, idemjob
# preloaded) with the bare-SQL floor beside idemjob, and a coordinator with
# two workers (ports +1..+3, citus and idemjob preloaded, idemjob
# distributed into 8 shards).  Each point runs pgbench -M prepared at 4
# clients (BENCH_CITUS_CLIENTS), synchronous_commit off on every node, the
# three targets taking turns within each run; the median of the runs.
# Writes bench/results/citus.md (--smoke: bench/results/smoke/citus.md).
#
# BENCH_CITUS_BIN: the PostgreSQL bin directory (default: Debian's 15).

set -euo pipefail
cd "$(dirname "$0")/.."
. test/citus/lib.sh

secs=${BENCH_CITUS_SECS:-30} runs=${BENCH_CITUS_RUNS:-3} out=bench/results/citus.md
if [ "${1:-}" = --smoke ]; then secs=3 runs=1 out=bench/results/smoke/citus.md; fi
bin=${BENCH_CITUS_BIN:-$PG_BIN}
port=${BENCH_CITUS_PORT:-5775}
clients=${BENCH_CITUS_CLIENTS:-4}
export IJ_CITUS_BIN=$bin

ij_citus_install "$bin/pg_config"

# the one server
one=$(mktemp -d /tmp/idemjob-bench-citus.XXXXXX)
chown postgres: "$one"
ij_as_postgres "$bin/initdb" -D "$one/d" -U postgres -A trust --no-sync -E UTF8 --locale=C >/dev/null
cat >>"$one/d/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$one'
shared_preload_libraries = 'idemjob'
synchronous_commit = off
max_connections = 100
CONF
ij_as_postgres "$bin/pg_ctl" -D "$one/d" -l "$one/log" -w start >/dev/null
stop_all() {
	ij_as_postgres "$bin/pg_ctl" -D "$one/d" -m fast -w stop >/dev/null 2>&1 || true
	rm -rf "$one"
	ij_citus_stop
}
onepsql() { "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$one" -p "$port" -U postgres -d postgres "$@"; }
onepsql -c "CREATE EXTENSION idemjob" -f bench/floor.sql >/dev/null

# the Citus cluster
IJ_CITUS_PRELOAD=idemjob IJ_CITUS_DB=postgres IJ_CITUS_CONF="synchronous_commit = off" \
	ij_citus_start $((port + 1)) 2
trap stop_all EXIT
ij_citus_psql $((port + 1)) -c "CREATE EXTENSION idemjob" -c "SELECT idemjob.distribute(shard_count => 8)" >/dev/null

# pgbench SCRIPT HOST PORT: transactions per second over $secs seconds
tps() {
	"$bin/pgbench" -n -M prepared -c "$clients" -j "$clients" -T "$secs" \
		-D intent=pay -D result='{"ok": true, "ref": "prov-42", "amount": 1234}' -f "$1" -h "$2" -p "$3" -U postgres postgres 2>&1 |
		sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}
median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

declare -A res
for w in submit_new lifecycle; do
	for ((r = 1; r <= runs; r++)); do
		res[$w/floor]+="$(tps bench/workloads/floor/$w.sql "$one" "$port") "
		res[$w/one]+="$(tps bench/workloads/idemjob/$w.sql "$one" "$port") "
		res[$w/citus]+="$(tps bench/workloads/idemjob/$w.sql "$IJ_CITUS_DIR" $((port + 1))) "
		ij_log "$w run $r (tx/s): floor ${res[$w/floor]}/ one ${res[$w/one]}/ citus ${res[$w/citus]}"
	done
done

# W7: claim one job and complete it, from a queue of $w7_jobs due jobs.
# One server: $clients clients; Citus: a worker process claims from the node
# it connects to (docs/scaling.md#citus), so half the clients on each worker
# node, at once, and their rates added.
w7_jobs=${BENCH_CITUS_W7_JOBS:-20000}
w7_fill() {	# HOST PORT RUN: the queue
	"$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$1" -p "$2" -U postgres -d postgres -c \
		"SELECT count(*) FROM generate_series(1, $w7_jobs) g,
		 LATERAL idemjob.submit('o' || g % 1000, 'w7-$3-' || g, 'w7', '{}') s" >/dev/null
}
w7_tps() {	# HOST PORT CLIENTS
	"$bin/pgbench" -n -M prepared -c "$3" -j "$3" -T "$w7_secs" \
		-f bench/workloads/idemjob/claim_one.sql -h "$1" -p "$2" -U postgres postgres 2>&1 |
		sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}
w7_secs=$(( secs < 5 ? secs : 5 ))
for ((r = 1; r <= runs; r++)); do
	w7_fill "$one" "$port" "$r"
	res[w7/one]+="$(w7_tps "$one" "$port" "$clients") "
	w7_fill "$IJ_CITUS_DIR" $((port + 1)) "$r"
	a=$(mktemp) b=$(mktemp)
	w7_tps "$IJ_CITUS_DIR" $((port + 2)) $((clients / 2)) >"$a" &
	w7_tps "$IJ_CITUS_DIR" $((port + 3)) $((clients - clients / 2)) >"$b"
	wait
	res[w7/citus]+="$(awk '{s += $1} END {print s}' "$a" "$b") "
	rm -f "$a" "$b"
	ij_log "w7 run $r (tx/s): one ${res[w7/one]}/ citus ${res[w7/citus]}"
done

mkdir -p "$(dirname "$out")"
{
	echo "# idemjob on one server and on Citus (coordinator + 2 workers, one machine)"
	echo
	echo "$(date -u +%F), $(nproc) CPUs, PostgreSQL $("$bin/pg_config" --version | awk '{print $2}'), Citus $IJ_CITUS_VERSION;"
	echo "pgbench -M prepared, $clients clients, -T $secs, median of $runs runs, synchronous_commit off."
	echo "Every node on the same cores: the Citus column is the cost of a call"
	echo "sent to its node (a coordinator and a worker process per call), not a speed-up."
	echo
	echo "| workload | floor (one server) | idemjob, one server | idemjob, Citus | Citus / one server |"
	echo "|---|---|---|---|---|"
	for w in submit_new lifecycle; do
		f=$(tr ' ' '\n' <<<"${res[$w/floor]}" | sed '/^$/d' | median)
		o=$(tr ' ' '\n' <<<"${res[$w/one]}" | sed '/^$/d' | median)
		c=$(tr ' ' '\n' <<<"${res[$w/citus]}" | sed '/^$/d' | median)
		name=$([ $w = submit_new ] && echo "W1 submit, new key" || echo "W3 submit + start + complete")
		printf '| %s | %.0f tx/s | %.0f tx/s | %.0f tx/s | %.2f |\n' "$name" "$f" "$o" "$c" "$(awk -v c="$c" -v o="$o" 'BEGIN {print c / o}')"
	done
	o=$(tr ' ' '\n' <<<"${res[w7/one]}" | sed '/^$/d' | median)
	c=$(tr ' ' '\n' <<<"${res[w7/citus]}" | sed '/^$/d' | median)
	printf '| W7 claim one + complete (-T %s, %s due jobs; Citus: half the clients on each worker node) | | %.0f tx/s | %.0f tx/s | %.2f |\n' \
		"$w7_secs" "$w7_jobs" "$o" "$c" "$(awk -v c="$c" -v o="$o" 'BEGIN {print c / o}')"
} >"$out"
cat "$out"
