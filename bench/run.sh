#!/usr/bin/env bash
#
# bench/run.sh [--smoke] [--no-install] [--no-graphile] [--no-callgrind] [--keep]
#
# Measures idemjob against the floor (bare SQL doing the same database work,
# bench/floor.sql and bench/workloads/floor/) and against Graphile Worker's
# add_job, in ONE throw-away cluster, and writes bench/results/REPORT.md
# (--smoke: bench/results/smoke/REPORT.md) with PNG plots.  See
# bench/README.md for the workloads and what each figure means.
#
# Environment (all optional):
#   PG_CONFIG      pg_config of the PostgreSQL 15 to use (default: pg_config
#                  on PATH, else /usr/lib/postgresql/15/bin/pg_config); the
#                  extension is built and installed with it unless --no-install
#   PG_BINDIR      where initdb, pg_ctl, postgres, psql, pgbench live
#                  (default: $PG_CONFIG --bindir)
#   IDEMJOB_SRC    extension source tree to build (default: this repository)
#   BENCH_PORT     port of the throw-away cluster (default 5765)
#   BENCH_WORK     its directory: data, socket, logs (default /tmp/idemjob-bench-$PORT)
#   BENCH_OUT      where the report goes (default bench/results[/smoke])
#   BENCH_NPM_DIR  where graphile-worker is installed (default ~/.cache/idemjob-bench/npm)
#   BENCH_PGCONF   lines added to the cluster's configuration (for example
#                  "idemjob.partitions = 8": idemjob in the partitioned layout)
#   Sizes: BENCH_T (seconds per point), BENCH_RUNS, BENCH_CLIENTS, BENCH_SYNCS,
#   BENCH_NKEYS (W2 keys), BENCH_W4_JOBS (jobs per W4 point), BENCH_W5_SIZES,
#   BENCH_GROW_N, BENCH_COST_N, BENCH_CG_N1, BENCH_CG_N2 (see defaults below).
#
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")

MODE=full
INSTALL=1
GRAPHILE=1
CALLGRIND=1
KEEP=0
for arg in "$@"; do
	case "$arg" in
		--smoke) MODE=smoke ;;
		--no-install) INSTALL=0 ;;
		--no-graphile) GRAPHILE=0 ;;
		--no-callgrind) CALLGRIND=0 ;;
		--keep) KEEP=1 ;;
		-h|--help) sed -n '2,30p' "$0"; exit 0 ;;
		*) echo "run.sh: unknown argument $arg" >&2; exit 2 ;;
	esac
done

if [ "$MODE" = smoke ]; then
	: "${BENCH_T:=1}" "${BENCH_RUNS:=1}" "${BENCH_CLIENTS:=2}" "${BENCH_SYNCS:=off on}"
	: "${BENCH_NKEYS:=2000}" "${BENCH_W4_JOBS:=400}" "${BENCH_W5_SIZES:=0 30000}"
	: "${BENCH_GROW_N:=20000}" "${BENCH_COST_N:=2000}" "${BENCH_CG_N1:=10}" "${BENCH_CG_N2:=30}"
	: "${BENCH_W5_RUNS:=1}" "${BENCH_OUT:=$HERE/results/smoke}" "${BENCH_CG_OPS:=submit_new}" "${BENCH_CG_IMPLS:=floor idemjob}"
else
	: "${BENCH_T:=4}" "${BENCH_RUNS:=3}" "${BENCH_CLIENTS:=1 2 4 8}" "${BENCH_SYNCS:=off on}"
	: "${BENCH_NKEYS:=100000}" "${BENCH_W4_JOBS:=8000}" "${BENCH_W5_SIZES:=0 1000000 5000000}"
	: "${BENCH_GROW_N:=1000000}" "${BENCH_COST_N:=20000}" "${BENCH_CG_N1:=100}" "${BENCH_CG_N2:=500}"
	: "${BENCH_W5_RUNS:=3}" "${BENCH_OUT:=$HERE/results}" "${BENCH_CG_OPS:=all}" "${BENCH_CG_IMPLS:=floor idemjob graphile}"
fi
: "${BENCH_PORT:=5765}"
: "${BENCH_WORK:=/tmp/idemjob-bench-$BENCH_PORT}"
: "${BENCH_NPM_DIR:=${XDG_CACHE_HOME:-$HOME/.cache}/idemjob-bench/npm}"
: "${IDEMJOB_SRC:=$ROOT}"
: "${BENCH_SKIP:=}"	# phases to leave out: matrix cost growth w5 callgrind
W5_CLIENTS=4
phase() { [[ " $BENCH_SKIP " != *" $1 "* ]]; }

if [ -z "${PG_CONFIG:-}" ]; then
	if command -v pg_config >/dev/null 2>&1; then PG_CONFIG=pg_config
	else PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config; fi
fi

T0=$(date +%s)
log() { printf '[%s +%4ss] %s\n' "$(date +%H:%M:%S)" "$(( $(date +%s) - T0 ))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

NOTES=()	# lines for the report's "how this run went" section
note() { NOTES+=("$*"); log "note: $*"; }

#
# 1. What the run needs: packages, the extension, Graphile Worker
#
need_pkgs=()
command -v gnuplot >/dev/null 2>&1 || need_pkgs+=(gnuplot-nox)
command -v python3 >/dev/null 2>&1 || need_pkgs+=(python3-minimal)
[ "$CALLGRIND" = 1 ] && ! command -v valgrind >/dev/null 2>&1 && need_pkgs+=(valgrind)
[ "$GRAPHILE" = 1 ] && ! command -v npm >/dev/null 2>&1 && need_pkgs+=(npm)
[ -x "$(command -v "$PG_CONFIG" 2>/dev/null || echo "$PG_CONFIG")" ] || need_pkgs+=(postgresql-15 postgresql-server-dev-15)
if [ ${#need_pkgs[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		log "installing ${need_pkgs[*]}"
		apt-get update -qq >/dev/null || true
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null \
			|| log "apt-get install ${need_pkgs[*]} failed; going on with what is there"
	else
		log "missing ${need_pkgs[*]} and cannot apt-get them (not root or no apt-get)"
	fi
fi
command -v python3 >/dev/null 2>&1 || die "python3 is needed for the report"
HAVE_GNUPLOT=1; command -v gnuplot >/dev/null 2>&1 || { HAVE_GNUPLOT=0; note "gnuplot missing: no PNG plots"; }
if [ "$CALLGRIND" = 1 ] && ! command -v valgrind >/dev/null 2>&1; then
	CALLGRIND=0; note "valgrind missing: no instruction counts"
fi

PG_BINDIR=${PG_BINDIR:-$("$PG_CONFIG" --bindir)}
[ -x "$PG_BINDIR/pgbench" ] || die "no pgbench in $PG_BINDIR (set PG_BINDIR or PG_CONFIG)"
PGVER=$("$PG_BINDIR/postgres" --version)

if [ "$INSTALL" = 1 ]; then
	log "building and installing idemjob from $IDEMJOB_SRC with $PG_CONFIG"
	make -C "$IDEMJOB_SRC" PG_CONFIG="$PG_CONFIG" -j2 >"$BENCH_WORK.build.log" 2>&1 \
		&& make -C "$IDEMJOB_SRC" PG_CONFIG="$PG_CONFIG" install >>"$BENCH_WORK.build.log" 2>&1 \
		|| die "build failed, see $BENCH_WORK.build.log"
fi
EXT_COMMIT=$(git -C "$IDEMJOB_SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
EXT_DIRTY=$(git -C "$IDEMJOB_SRC" status --porcelain -- src sql 2>/dev/null | wc -l)

GW_BIN=""
if [ "$GRAPHILE" = 1 ]; then
	if [ -x "$BENCH_NPM_DIR/node_modules/.bin/graphile-worker" ]; then
		GW_BIN="$BENCH_NPM_DIR/node_modules/.bin/graphile-worker"
	elif command -v npm >/dev/null 2>&1; then
		log "installing graphile-worker from npm into $BENCH_NPM_DIR"
		mkdir -p "$BENCH_NPM_DIR"
		if (cd "$BENCH_NPM_DIR" && timeout 300 npm install --no-audit --no-fund --loglevel=error graphile-worker >/dev/null 2>&1); then
			GW_BIN="$BENCH_NPM_DIR/node_modules/.bin/graphile-worker"
		fi
	fi
	if [ -z "$GW_BIN" ]; then
		GRAPHILE=0
		note "Graphile Worker SKIPPED: npm or the npm registry is not reachable"
	fi
fi
GW_VERSION=""
[ -n "$GW_BIN" ] && GW_VERSION=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$BENCH_NPM_DIR/node_modules/graphile-worker/package.json" | head -1)

#
# 2. The throw-away cluster
#
as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
SOCK="$BENCH_WORK"
# server_cpu_ticks, wait_backends_gone
source "$HERE/cpu.sh"
HZ=$(getconf CLK_TCK)
PGDATA_B="$BENCH_WORK/data"
PSQL=("$PG_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$SOCK" -p "$BENCH_PORT" -U postgres)
q() { local db=$1; shift; PGOPTIONS="-c client_min_messages=warning" "${PSQL[@]}" -d "$db" "$@"; }
SERVER_UP=0
VG_UP=0

stop_server() {
	if [ "$SERVER_UP" = 1 ] || [ "$VG_UP" = 1 ]; then
		as_pg "$PG_BINDIR/pg_ctl" -D "$PGDATA_B" -m fast -w -t 120 stop >/dev/null 2>&1 || true
		SERVER_UP=0; VG_UP=0
	fi
}
cleanup() {
	local rc=$?
	stop_server
	if [ "$KEEP" = 0 ] && [ -d "$BENCH_WORK" ]; then rm -rf "$BENCH_WORK"; fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -e "$PGDATA_B/postmaster.pid" ]; then
	as_pg "$PG_BINDIR/pg_ctl" -D "$PGDATA_B" -m immediate stop >/dev/null 2>&1 || true
fi
rm -rf "$BENCH_WORK"
mkdir -p "$BENCH_WORK" "$BENCH_WORK/logs" "$BENCH_WORK/cg"
[ "$(id -u)" = 0 ] && chown postgres: "$BENCH_WORK" "$BENCH_WORK/cg"
RAW="$BENCH_OUT/raw"
mkdir -p "$RAW"
rm -f "$RAW"/*.csv "$RAW"/*.txt "$RAW"/*.log

log "initdb in $PGDATA_B ($PGVER)"
as_pg "$PG_BINDIR/initdb" -D "$PGDATA_B" -A trust -U postgres -E UTF8 --locale=C >"$BENCH_WORK/initdb.log" 2>&1 \
	|| die "initdb failed: $(tail -5 "$BENCH_WORK/initdb.log")"
cat >>"$PGDATA_B/postgresql.conf" <<EOF
# bench/run.sh
listen_addresses = ''
port = $BENCH_PORT
unix_socket_directories = '$SOCK'
max_connections = 40
shared_buffers = 1GB
max_wal_size = 20GB
min_wal_size = 1GB
checkpoint_timeout = 30min
wal_compression = off
logging_collector = off
log_min_messages = warning
autovacuum = on
${BENCH_PGCONF:-}
EOF
start_server() {
	as_pg "$PG_BINDIR/pg_ctl" -D "$PGDATA_B" -l "$BENCH_WORK/server.log" -w -t 120 start >/dev/null \
		|| die "server did not start: $(tail -5 "$BENCH_WORK/server.log")"
	SERVER_UP=1
	PM=$(head -1 "$PGDATA_B/postmaster.pid")
}
start_server

#
# 3. Templates: one database per implementation, copied for every phase
#
WL="$HERE/workloads"
log "templates: floor, idemjob$( [ "$GRAPHILE" = 1 ] && echo ", graphile")"
q postgres -c "CREATE DATABASE tpl_floor" -c "CREATE DATABASE tpl_idemjob"
q tpl_floor -f "$HERE/floor.sql"
q tpl_idemjob -c "CREATE EXTENSION idemjob"
IMPLS_SUBMIT="floor idemjob"
if [ "$GRAPHILE" = 1 ]; then
	q postgres -c "CREATE DATABASE tpl_graphile"
	if "$GW_BIN" -c "postgres://postgres@/tpl_graphile?host=$SOCK&port=$BENCH_PORT" --schema-only >"$BENCH_WORK/graphile.log" 2>&1; then
		IMPLS_SUBMIT="floor idemjob graphile"
	else
		GRAPHILE=0
		note "Graphile Worker SKIPPED: its migrations failed: $(tail -3 "$BENCH_WORK/graphile.log" | tr '\n' ' ')"
	fi
fi
IMPLS_LIFE="floor idemjob"

# does the floor still copy the extension's schema?
schema_sig() {
	q "$1" -c "
		SELECT string_agg(x, E'\n' ORDER BY x) FROM (
		  SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
		         || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END AS x
		    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		   WHERE c.relnamespace = '$2'::regnamespace AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
		  UNION ALL
		  SELECT 'index ' || indexname || ': ' || replace(replace(indexdef, '$2.', ''), ' $2.', ' ')
		    FROM pg_indexes WHERE schemaname = '$2'
		  UNION ALL
		  SELECT 'constraint ' || conname || ': ' || replace(pg_get_constraintdef(oid), '$2.', '')
		    FROM pg_constraint WHERE connamespace = '$2'::regnamespace) s" | sed "s/$2\\.//g"
}
schema_sig tpl_floor floor >"$RAW/schema_floor.txt"
# the rights model's and retention's tables have no floor counterpart
schema_sig tpl_idemjob idemjob | grep -v -E '^(column|constraint|index) (capabilities|spent_keys)[._]' >"$RAW/schema_idemjob.txt"
if diff -u "$RAW/schema_floor.txt" "$RAW/schema_idemjob.txt" >"$RAW/schema_diff.txt"; then
	SCHEMA_SAME=yes
else
	SCHEMA_SAME=no
	note "the floor schema differs from the extension's (see raw/schema_diff.txt): update bench/floor.sql"
fi

newdb() {	# newdb name impl
	q postgres -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1 TEMPLATE tpl_$2"
}

schema_of() { case $1 in floor) echo floor ;; idemjob) echo idemjob ;; graphile) echo graphile_worker ;; esac; }

# W2: keys 1..n, the request the replay scripts send
preload_keys() {	# db impl n
	case $2 in
		floor)
			q "$1" -c "INSERT INTO floor.jobs (owner_id, idempotency_key, intent, params, provider)
				SELECT (g % 1000)::text, g::text, 'pay', jsonb_build_object('amount', g, 'currency', 'EUR'), 'default'
				  FROM generate_series(1, $3) g" ;;
		idemjob)
			# (with the owner's hash: the partitioned layout needs it given)
			q "$1" -c "INSERT INTO idemjob.jobs (owner_id, idempotency_key, intent, params, provider, owner_hash)
				SELECT (g % 1000)::text, g::text, 'pay', jsonb_build_object('amount', g, 'currency', 'EUR'), 'default',
				       (g % 1000)::text
				  FROM generate_series(1, $3) g" ;;
		graphile)
			q "$1" -c "SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(
				SELECT ROW('pay', json_build_object('amount', g, 'currency', 'EUR'), NULL, NULL, NULL,
				           (g % 1000)::text || '/' || g, NULL, NULL)::graphile_worker.job_spec
				  FROM generate_series(1, $3) g))" >/dev/null ;;
	esac
	vacuum_impl "$1" "$2"
}

vacuum_impl() {	# db impl: VACUUM ANALYZE of the implementation's tables
	local t
	t=$(q "$1" -c "SELECT string_agg(oid::regclass::text, ', ') FROM pg_class WHERE relkind = 'r' AND relnamespace = '$(schema_of "$2")'::regnamespace")
	q "$1" -c "VACUUM ANALYZE $t"
}

# jobs first..last with ids from n = 100000000000 + 10*j: 'pending' ones, or
# 'race' ones (attempt 1 cancelled, attempt 2 started, both at version 0).
# Attempts cannot be inserted by raw DML into idemjob (its guard, I8), so
# the race preload runs with session_replication_role = replica, which
# skips the guard triggers; the rows are what the functions would write.
preload_jobs() {	# db impl first last intent kind
	local s; s=$(schema_of "$2")
	local state=pending count=0
	[ "$6" = race ] && { state=running; count=2; }
	# idemjob's rows carry their owner's hash (1.2; a text is assigned as its hash)
	local hcol= hval=
	[ "$s" = idemjob ] && { hcol=", owner_hash"; hval=", (g % 1000)::text"; }
	local sql="
		SET session_replication_role = $( [ "$6" = race ] && echo replica || echo origin );
		INSERT INTO $s.jobs (id, owner_id, idempotency_key, intent, params, provider, state, attempt_count$hcol)
		SELECT ('00000000-0000-7000-8000-' || (100000000000 + 10 * g))::uuid, (g % 1000)::text, 'pre-' || g,
		       '$5', jsonb_build_object('amount', g, 'currency', 'EUR'), 'default', '$state', $count$hval
		  FROM generate_series($3, $4) g;"
	if [ "$6" = race ]; then
		sql+="
		INSERT INTO $s.attempts (id, job_id, owner_id, attempt_no, provider, state, read_version,
		                         deadline, finished_at, error$hcol)
		SELECT ('00000000-0000-7000-8000-' || (100000000000 + 10 * g + a))::uuid,
		       ('00000000-0000-7000-8000-' || (100000000000 + 10 * g))::uuid, (g % 1000)::text, a, 'default',
		       CASE a WHEN 1 THEN 'cancelled' ELSE 'started' END::$s.attempt_state, 0,
		       now() + interval '1 hour', CASE a WHEN 1 THEN now() END,
		       CASE a WHEN 1 THEN '{\"code\": \"cancelled\", \"reason\": \"bench\"}'::jsonb END$hval
		  FROM generate_series($3, $4) g, generate_series(1, 2) a;"
	fi
	q "$1" -c "$sql"
	vacuum_impl "$1" "$2"
}

define_contract() {	# db
	q "$1" -v schema="$(cat "$HERE/contract.json")" >/dev/null <<<"SELECT idemjob.define_contract('pay_checked', :'schema'::jsonb)"
}

lsn() { q postgres -c "SELECT pg_current_wal_lsn()"; }
wal_since() { q postgres -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$1')::bigint"; }

RESULT_SMALL='{"ok": true, "ref": "prov-42", "amount": 1234}'
RESULT_2K=$(tr -d '\n' <"$HERE/result2k.json")

RUNS_CSV="$RAW/runs.csv"
echo "phase,sync,workload,impl,variant,clients,run,tps,lat_ms,txns,wal_bytes,rc,cpu_us" >"$RUNS_CSV"

# pgbench_point phase sync workload impl variant clients run db script [pgbench args...]
pgbench_point() {
	local phase=$1 sync=$2 wl=$3 impl=$4 variant=$5 c=$6 run=$7 db=$8 script=$9
	shift 9
	local j=$c; [ "$j" -gt 2 ] && j=2
	local l0 out rc=0 tps lat txns wal c0 c1
	local dur=(-T "$BENCH_T")
	local a; for a in "$@"; do [ "$a" = -t ] && dur=(); done
	l0=$(lsn)
	c0=$(server_cpu_ticks "$PM")
	out=$(PGOPTIONS="-c synchronous_commit=$sync" "$PG_BINDIR/pgbench" -n -M prepared \
		-h "$SOCK" -p "$BENCH_PORT" -U postgres -c "$c" -j "$j" "${dur[@]}" \
		-f "$script" "$@" "$db" 2>&1) || rc=$?
	# the server's CPU for the run: every server process, the clients'
	# backends once exited (so in the postmaster's cutime), autovacuum too
	wait_backends_gone q "$db"
	c1=$(server_cpu_ticks "$PM")
	wal=$(wal_since "$l0")
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out" | tail -1)
	lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out" | tail -1)
	txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out" | tail -1)
	if [ "$rc" != 0 ] || grep -q 'aborted\|ERROR' <<<"$out"; then
		[ "$rc" = 0 ] && rc=1
		printf '%s\n' "--- $phase $sync $wl $impl $variant c=$c run=$run" "$out" >>"$RAW/pgbench_errors.log"
	fi
	echo "$phase,$sync,$wl,$impl,$variant,$c,$run,${tps:-0},${lat:-0},${txns:-0},$wal,$rc,$(( (c1 - c0) * 1000000 / HZ ))" >>"$RUNS_CSV"
	LAST_TXNS=${txns:-0}
}

#
# 4. The matrix: W1-W4 and W6, every sync setting, client count and run;
#    within a run the implementations take turns, so noise hits them alike
#
W4_PER_SYNC=$(( BENCH_W4_JOBS * BENCH_RUNS * $(wc -w <<<"$BENCH_CLIENTS") ))
for sync in $BENCH_SYNCS; do
	phase matrix || break
	log "synchronous_commit=$sync: fresh databases"
	for impl in $IMPLS_SUBMIT; do
		newdb "w1_$impl" "$impl"
		newdb "w2_$impl" "$impl"; preload_keys "w2_$impl" "$impl" "$BENCH_NKEYS"
	done
	for impl in $IMPLS_LIFE; do
		newdb "w3_$impl" "$impl"
		newdb "w4_$impl" "$impl"; preload_jobs "w4_$impl" "$impl" 0 $(( W4_PER_SYNC - 1 )) pay race
	done
	newdb w6_idemjob idemjob; define_contract w6_idemjob
	q postgres -c "CHECKPOINT"

	w4_base=0
	for run in $(seq 1 "$BENCH_RUNS"); do
		for c in $BENCH_CLIENTS; do
			log "sync=$sync run $run/$BENCH_RUNS clients=$c"
			for impl in $IMPLS_SUBMIT; do
				pgbench_point matrix "$sync" W1 "$impl" - "$c" "$run" "w1_$impl" "$WL/$impl/submit_new.sql"
			done
			for impl in $IMPLS_SUBMIT; do
				pgbench_point matrix "$sync" W2 "$impl" - "$c" "$run" "w2_$impl" "$WL/$impl/submit_replay.sql" -D nkeys="$BENCH_NKEYS"
			done
			for impl in $IMPLS_LIFE; do
				pgbench_point matrix "$sync" W3 "$impl" - "$c" "$run" "w3_$impl" "$WL/$impl/lifecycle.sql" \
					-D intent=pay -D result="$RESULT_SMALL"
			done
			for impl in $IMPLS_LIFE; do
				pgbench_point matrix "$sync" W4 "$impl" - "$c" "$run" "w4_$impl" "$WL/$impl/race.sql" \
					-t $(( 2 * BENCH_W4_JOBS / c )) -D i=0 -D nclients="$c" -D base="$w4_base" -D result="$RESULT_SMALL"
			done
			w4_base=$(( w4_base + BENCH_W4_JOBS ))
			for variant in nocontract contract; do
				intent=pay; [ $variant = contract ] && intent=pay_checked
				pgbench_point matrix "$sync" W6 idemjob "$variant" "$c" "$run" w6_idemjob "$WL/idemjob/lifecycle.sql" \
					-D intent=$intent -D result="$RESULT_2K"
			done
		done
	done
	# W4 and W6 sanity: every job won exactly once, no result rejected
	for impl in $IMPLS_LIFE; do
		s=$(schema_of "$impl")
		q "w4_$impl" -c "SELECT 'w4_$impl', '$sync', state::text, count(*) FROM $s.attempts GROUP BY state
		                 UNION ALL SELECT 'w4_$impl', '$sync', 'race_log', count(*) FROM $s.race_log" >>"$RAW/sanity.txt"
	done
	q w6_idemjob -c "SELECT 'w6_idemjob', '$sync', state, count(*) FROM idemjob.attempts GROUP BY state" >>"$RAW/sanity.txt"
done

#
# 5. Cost per job from empty tables: WAL bytes and table+index bytes, for a
#    submit (W1) and for a whole job (W3), synchronous_commit = off, 4 clients
#
COST_CSV="$RAW/cost.csv"
echo "workload,impl,jobs,wal_bytes,rel_bytes,wal_record_bytes,wal_fpi_bytes,live_bytes" >"$COST_CSV"
rel_bytes() {	# db impl
	q "$1" -c "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
	           WHERE c.relkind = 'r' AND c.relnamespace = '$(schema_of "$2")'::regnamespace"
}
cost_point() {	# workload impl script [args]
	local wl=$1 impl=$2 script=$3; shift 3
	local db="cost_${wl,,}_$impl" b0 l0 l1 b1 wal rec fpi live t
	newdb "$db" "$impl"
	# no autovacuum on these tables during the run: whether it happens to
	# prune one implementation's pages and not the other's is timing, not cost
	for t in $(q "$db" -c "SELECT oid::regclass FROM pg_class WHERE relkind = 'r' AND relnamespace = '$(schema_of "$impl")'::regnamespace"); do
		q "$db" -c "ALTER TABLE $t SET (autovacuum_enabled = false)"
	done
	q postgres -c "CHECKPOINT"
	b0=$(rel_bytes "$db" "$impl"); l0=$(lsn)
	PGOPTIONS="-c synchronous_commit=off" "$PG_BINDIR/pgbench" -n -M prepared -h "$SOCK" -p "$BENCH_PORT" -U postgres \
		-c 4 -j 2 -t $(( BENCH_COST_N / 4 )) -f "$script" "$@" "$db" >"$BENCH_WORK/logs/cost_$db.log" 2>&1 \
		|| note "cost run $wl $impl failed (see raw/pgbench_errors.log)"
	l1=$(lsn); wal=$(q postgres -c "SELECT pg_wal_lsn_diff('$l1', '$l0')::bigint")
	b1=$(rel_bytes "$db" "$impl")
	# WAL split into records and full-page images (pg_waldump --stats)
	read -r rec fpi < <("$PG_BINDIR/pg_waldump" -p "$PGDATA_B/pg_wal" -s "$l0" -e "$l1" --stats 2>/dev/null \
		| awk '$1 == "Total" { gsub(/\[[^]]*\]/, ""); print $3, $4 }')
	# the live footprint: after VACUUM FULL, dead row versions gone
	for t in $(q "$db" -c "SELECT oid::regclass FROM pg_class WHERE relkind = 'r' AND relnamespace = '$(schema_of "$impl")'::regnamespace"); do
		q "$db" -c "VACUUM FULL $t"
	done
	live=$(rel_bytes "$db" "$impl")
	echo "$wl,$impl,$BENCH_COST_N,$wal,$(( b1 - b0 )),${rec:-0},${fpi:-0},$(( live - b0 ))" >>"$COST_CSV"
	q postgres -c "DROP DATABASE $db"
}
if phase cost; then
	log "cost per job ($BENCH_COST_N jobs each)"
	for impl in $IMPLS_SUBMIT; do cost_point W1 "$impl" "$WL/$impl/submit_new.sql"; done
	for impl in $IMPLS_LIFE; do cost_point W3 "$impl" "$WL/$impl/lifecycle.sql" -D intent=pay -D result="$RESULT_SMALL"; done
fi

#
# 6. Growth: one session, one prepared connection, from empty to GROW_N jobs
#
GROW_CSV="$RAW/growth.csv"
echo "impl,t,txns,lat_sum_us,jobs,seq_scans,idx_scans" >"$GROW_CSV"
for impl in $IMPLS_LIFE; do
	phase growth || break
	log "growth: $impl, empty -> $BENCH_GROW_N jobs in one session"
	db="grow_$impl"; newdb "$db" "$impl"
	s=$(schema_of "$impl")
	scans0=$(q "$db" -c "SELECT coalesce(seq_scan, 0) || ' ' || coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relid = '$s.jobs'::regclass")
	rm -rf "$BENCH_WORK/logs/grow_$impl"; mkdir -p "$BENCH_WORK/logs/grow_$impl"
	(cd "$BENCH_WORK/logs/grow_$impl" && PGOPTIONS="-c synchronous_commit=off" "$PG_BINDIR/pgbench" -n -M prepared \
		-h "$SOCK" -p "$BENCH_PORT" -U postgres -c 1 -j 1 -t "$BENCH_GROW_N" -l --aggregate-interval=2 \
		--log-prefix=grow -f "$WL/$impl/submit_new.sql" "$db" >../grow_$impl.out 2>&1) \
		|| note "growth run $impl failed"
	sleep 1
	scans1=$(q "$db" -c "SELECT seq_scan || ' ' || idx_scan FROM pg_stat_user_tables WHERE relid = '$s.jobs'::regclass")
	read -r sq0 ix0 <<<"$scans0"; read -r sq1 ix1 <<<"$scans1"
	if [ -s "$(ls "$BENCH_WORK/logs/grow_$impl"/grow* 2>/dev/null | head -1)" ]; then
		cat "$BENCH_WORK/logs/grow_$impl"/grow* | awk -v impl="$impl" -v sq=$((sq1 - sq0)) -v ix=$((ix1 - ix0)) '
			NR == 1 { t0 = $1 } { jobs += $2; printf "%s,%d,%d,%d,%d,%d,%d\n", impl, $1 - t0, $2, $3, jobs, sq, ix }' >>"$GROW_CSV"
	else
		# a run shorter than one interval logs no interval: one row from the total
		tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$BENCH_WORK/logs/grow_$impl.out" | tail -1)
		echo "$impl,0,$(awk -v t="${tps:-0}" 'BEGIN { printf "%d", 2 * t }'),0,$BENCH_GROW_N,$((sq1 - sq0)),$((ix1 - ix0))" >>"$GROW_CSV"
	fi
	q postgres -c "DROP DATABASE $db"
done

#
# 7. W5: W1 at W5_CLIENTS clients, synchronous_commit = off, as the tables
#    grow; preloaded with INSERT ... SELECT generate_series (into idemjob with
#    its guard triggers on: fresh pending jobs are allowed raw)
#
W5_CSV="$RAW/w5.csv"
echo "impl,size,run,tps,lat_ms,txns,wal_bytes,rel_bytes,load_s" >"$W5_CSV"
phase w5 && for impl in $IMPLS_LIFE; do newdb "w5_$impl" "$impl"; done
loaded=0
for size in $BENCH_W5_SIZES; do
	phase w5 || break
	for impl in $IMPLS_LIFE; do
		s=$(schema_of "$impl")
		t_load=$(date +%s)
		if [ "$size" -gt "$loaded" ]; then
			log "W5: loading $impl to $size jobs"
			from=$(( loaded + 1 ))
			while [ "$from" -le "$size" ]; do
				to=$(( from + 999999 )); [ "$to" -gt "$size" ] && to=$size
				q "w5_$impl" -c "INSERT INTO $s.jobs (owner_id, idempotency_key, intent, params, provider)
					SELECT (g % 1000)::text, 'bulk-' || g, 'pay', jsonb_build_object('amount', g, 'currency', 'EUR'), 'default'
					  FROM generate_series($from, $to) g"
				from=$(( to + 1 ))
			done
			vacuum_impl "w5_$impl" "$impl"
		fi
		t_load=$(( $(date +%s) - t_load ))
		q postgres -c "CHECKPOINT"
		rb=$(rel_bytes "w5_$impl" "$impl")
		for run in $(seq 1 "$BENCH_W5_RUNS"); do
			pgbench_point w5 off W5 "$impl" "$size" "$W5_CLIENTS" "$run" "w5_$impl" "$WL/$impl/submit_new.sql"
			tail -1 "$RUNS_CSV" | awk -F, -v impl="$impl" -v size="$size" -v run="$run" -v rb="$rb" -v tl="$t_load" \
				'{ print impl "," size "," run "," $8 "," $9 "," $10 "," $11 "," rb "," tl }' >>"$W5_CSV"
		done
	done
	loaded=$size
done

#
# 8. Instructions per call: the same cluster restarted under callgrind; each
#    operation runs N1 and then N2 times in a fresh single backend, and
#    (Ir(N2) - Ir(N1)) / (N2 - N1) is the cost of one call, start-up excluded
#
CG_CSV="$RAW/callgrind.csv"
echo "op,impl,calls,ir_total_n1,ir_total_n2,ir_per_call" >"$CG_CSV"
phase callgrind || CALLGRIND=0
if [ "$CALLGRIND" = 1 ]; then
	log "callgrind: preparing databases"
	CGJ=$(( BENCH_CG_N1 + BENCH_CG_N2 ))
	for impl in $IMPLS_SUBMIT; do
		newdb "cg_$impl" "$impl"
		preload_keys "cg_$impl" "$impl" "$BENCH_NKEYS"
	done
	for impl in $IMPLS_LIFE; do
		preload_jobs "cg_$impl" "$impl" 1000000 $(( 1000000 + CGJ )) pay pending
		preload_jobs "cg_$impl" "$impl" 2000000 $(( 2000000 + CGJ )) pay race
		preload_jobs "cg_$impl" "$impl" 3000000 $(( 3000000 + CGJ )) pay race
		preload_jobs "cg_$impl" "$impl" 4000000 $(( 4000000 + CGJ )) pay_checked race
		preload_jobs "cg_$impl" "$impl" 5000000 $(( 5000000 + CGJ )) pay race
		# W7: claim one + complete, last, on the pending jobs left
		preload_jobs "cg_$impl" "$impl" 6000000 $(( 6000000 + CGJ )) w7 pending
	done
	define_contract cg_idemjob
	q postgres -c "CHECKPOINT"
	stop_server
	log "callgrind: server under valgrind"
	as_pg valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$BENCH_WORK/cg/cg.%p" \
		"$PG_BINDIR/postgres" -D "$PGDATA_B" -c autovacuum=off -c shared_buffers=128MB \
		-c max_wal_size=20GB >"$BENCH_WORK/valgrind.log" 2>&1 &
	VG_UP=1
	for i in $(seq 1 120); do
		"$PG_BINDIR/pg_isready" -q -h "$SOCK" -p "$BENCH_PORT" && break
		sleep 1
	done
	"$PG_BINDIR/pg_isready" -q -h "$SOCK" -p "$BENCH_PORT" || die "server under valgrind did not start"
	sleep 3

	# cg_op op impl script base [pgbench args]: one line of CG_CSV.  The
	# sequential scripts take job :base + i, so the N2 run starts past the
	# N1 run's jobs (base "-": the script picks keys at random).
	cg_op() {
		local op=$1 impl=$2 script=$3 base=$4; shift 4
		if [ "$BENCH_CG_OPS" != all ] && ! grep -qw -- "$op" <<<"$BENCH_CG_OPS"; then return 0; fi
		grep -qw -- "$impl" <<<"$BENCH_CG_IMPLS" || return 0
		local n irs=() b
		for n in "$BENCH_CG_N1" "$BENCH_CG_N2"; do
			local before after f
			before=$(ls "$BENCH_WORK/cg")
			b=(); [ "$base" != - ] && b=(-D i=0 -D base=$(( base + ( n == BENCH_CG_N1 ? 0 : BENCH_CG_N1 ) )))
			"$PG_BINDIR/pgbench" -n -M prepared -h "$SOCK" -p "$BENCH_PORT" -U postgres -c 1 -j 1 -t "$n" \
				--random-seed=$(( n + 7 )) -f "$script" "${b[@]}" "$@" "cg_$impl" >"$BENCH_WORK/logs/cg_${op}_${impl}_$n.log" 2>&1 \
				|| { note "callgrind $op $impl: pgbench failed: $(grep -m1 -i 'error' "$BENCH_WORK/logs/cg_${op}_${impl}_$n.log")"; return 0; }
			# pgbench's first connection only checks the server; the second
			# is the client's
			f=""
			local prev="" stable=0
			for _ in $(seq 1 180); do
				after=$(ls "$BENCH_WORK/cg")
				local new=() x
				for x in $(comm -13 <(echo "$before") <(echo "$after")); do
					# a backend's profile (not the startup process's or a worker's)
					grep -q '^totals:\|^summary:' "$BENCH_WORK/cg/$x" 2>/dev/null \
						&& grep -q 'PostgresMain' "$BENCH_WORK/cg/$x" && new+=("$x")
				done
				# both backends written, and nothing new for two seconds
				if [ ${#new[@]} -ge 2 ] && [ "$after" = "$prev" ]; then
					stable=$(( stable + 1 ))
					if [ "$stable" -ge 2 ]; then
						# the client's backend ends last (the first is the check)
						f=$(cd "$BENCH_WORK/cg" && ls -t "${new[@]}" | head -1)
						for x in "${new[@]}"; do [ "$x" != "$f" ] && rm -f "$BENCH_WORK/cg/$x"; done
						break
					fi
				else
					stable=0
				fi
				prev=$after
				sleep 1
			done
			[ -z "$f" ] && { note "callgrind $op $impl: no profile"; return 0; }
			mv "$BENCH_WORK/cg/$f" "$BENCH_WORK/cg/${op}_${impl}_$n.cg"
			irs+=("$(sed -n 's/^\(totals\|summary\): *\([0-9]*\).*/\2/p' "$BENCH_WORK/cg/${op}_${impl}_$n.cg" | head -1)")
		done
		echo "$op,$impl,$(( BENCH_CG_N2 - BENCH_CG_N1 )),${irs[0]},${irs[1]},$(( (irs[1] - irs[0]) / (BENCH_CG_N2 - BENCH_CG_N1) ))" >>"$CG_CSV"
	}
	log "callgrind: operations"
	R=(-D result="$RESULT_SMALL")
	R2=(-D result="$RESULT_2K")
	for impl in $IMPLS_SUBMIT; do
		cg_op submit_new "$impl" "$WL/$impl/submit_new.sql" -
		cg_op submit_replay "$impl" "$WL/$impl/submit_replay.sql" - -D nkeys="$BENCH_NKEYS"
	done
	for impl in $IMPLS_LIFE; do
		cg_op start "$impl" "$WL/$impl/start_seq.sql" 1000000
		cg_op complete_won "$impl" "$WL/$impl/complete_seq.sql" 2000000 -D att=2 "${R[@]}"
		# attempt 2 of these jobs wins first, then attempt 1 comes back late
		cg_op complete_won_again "$impl" "$WL/$impl/complete_seq.sql" 3000000 -D att=2 "${R[@]}"
		cg_op complete_lost "$impl" "$WL/$impl/complete_seq.sql" 3000000 -D att=1 "${R[@]}"
		cg_op complete_2k_nocontract "$impl" "$WL/$impl/complete_seq.sql" 5000000 -D att=2 "${R2[@]}"
	done
	cg_op complete_2k_contract idemjob "$WL/idemjob/complete_seq.sql" 4000000 -D att=2 "${R2[@]}"
	# W3 whole, idemjob's: submit, start_attempt, complete_attempt of a new
	# job (its ids as the functions make them; start and complete above use
	# preloaded ids, made as before 1.2)
	cg_op lifecycle idemjob "$WL/idemjob/lifecycle.sql" - -D intent=pay "${R[@]}"
	# W7 last: the start operation above took the other pending jobs
	for impl in $IMPLS_LIFE; do
		cg_op claim_complete "$impl" "$WL/$impl/claim_one.sql" -
	done
	as_pg "$PG_BINDIR/pg_ctl" -D "$PGDATA_B" -m fast -w -t 300 stop >/dev/null 2>&1 || true
	VG_UP=0
	wait || true
	# per-function profiles of the extension's hot paths, for bench/results/profile/
	mkdir -p "$BENCH_OUT/profile"
	for f in "$BENCH_WORK"/cg/*_"$BENCH_CG_N2".cg; do
		command -v callgrind_annotate >/dev/null 2>&1 || break
		b=$(basename "$f" .cg)
		callgrind_annotate --inclusive=yes --auto=no --threshold=100 "${f%_"$BENCH_CG_N2".cg}_$BENCH_CG_N1.cg" 2>/dev/null \
			>"$BENCH_WORK/cg/${b%_"$BENCH_CG_N2"}_n1.txt" || true
		callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$f" 2>/dev/null >"$BENCH_WORK/cg/${b}_n2.txt" || true
		python3 "$HERE/cg_diff.py" "$BENCH_WORK/cg/${b%_"$BENCH_CG_N2"}_n1.txt" "$BENCH_WORK/cg/${b}_n2.txt" \
			$(( BENCH_CG_N2 - BENCH_CG_N1 )) >"$BENCH_OUT/profile/${b%_"$BENCH_CG_N2"}.percall.txt" 2>/dev/null || true
	done
	[ "$KEEP" = 1 ] && log "callgrind files kept in $BENCH_WORK/cg"
else
	note "instructions per call not measured (callgrind disabled or missing)"
fi
perf_out=$(perf stat -e instructions true 2>&1 || echo failed)
if command -v perf >/dev/null 2>&1 && ! grep -q 'not supported\|failed\|not counted' <<<"$perf_out"; then
	PERF_NOTE="perf stat -e instructions works on this machine"
else
	PERF_NOTE="perf stat -e instructions is not supported on this machine (virtualised PMU); instruction counts are from callgrind"
fi

#
# 9. The report
#
stop_server
{
	echo "mode=$MODE"
	echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
	echo "postgres=$PGVER"
	echo "idemjob_commit=$EXT_COMMIT"
	echo "idemjob_dirty_files=$EXT_DIRTY"
	echo "graphile=$( [ "$GRAPHILE" = 1 ] && echo "graphile-worker $GW_VERSION" || echo skipped)"
	echo "machine=$(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB, $(uname -r)"
	echo "sizes=${BENCH_T}s per point, $BENCH_RUNS runs, clients $BENCH_CLIENTS, synchronous_commit $BENCH_SYNCS; W2 $BENCH_NKEYS keys; W4 $BENCH_W4_JOBS jobs per point; W5 sizes $BENCH_W5_SIZES (${BENCH_W5_RUNS} runs); growth to $BENCH_GROW_N jobs; cost over $BENCH_COST_N jobs; callgrind $BENCH_CG_N1/$BENCH_CG_N2 calls"
	echo "w5_clients=$W5_CLIENTS"
	echo "grow_n=$BENCH_GROW_N"
	echo "cost_n=$BENCH_COST_N"
	echo "cg_n=$BENCH_CG_N1 and $BENCH_CG_N2"
	echo "schema_same=$SCHEMA_SAME"
	echo "perf=$PERF_NOTE"
	echo "elapsed_s=$(( $(date +%s) - T0 ))"
	for n in "${NOTES[@]}"; do echo "note=$n"; done
} >"$RAW/meta.txt"
log "report"
python3 "$HERE/report.py" "$BENCH_OUT" "$HERE" "$HAVE_GNUPLOT"
log "done in $(( $(date +%s) - T0 ))s: $BENCH_OUT/REPORT.md"
