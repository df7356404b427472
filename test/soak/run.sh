#!/usr/bin/env bash
# test/soak/run.sh [--short]: soak idemjob with pgbench and check the history.
#
# Runs against the server in PGHOST/PGPORT/PGUSER (any running cluster with
# idemjob and amcheck installed; it creates and drops its own database).
# Phases, each a pgbench run of SOAK_CLIENTS clients (default 8):
#   dup0, dup50, dup90, dup99   submits over a key pool, that % duplicates
#   hot                         every submit on one key
#   work                        workers: claim (200 ms timeout), then
#                               complete, fail (retryable or not),
#                               mark_unknown + late result, or let expire;
#                               new submits (some with max_attempts 2-3);
#                               retry_backoff 10ms, retry_backoff_max 100ms
#   work_purge                  the same, with purge('0 seconds', 50) by one
#                               client and replays of purged keys (IJ007);
#                               then one drain claims everything due
#   mixed_rc, mixed_ser         every idemjob call on a small rolling key
#                               space, READ COMMITTED then SERIALIZABLE
#                               (REPEATABLE READ on Citus, below)
# Every call goes through a wrapper in schema "soak" (setup.sql) that logs
# the call and its answer in soak.history in the same transaction; pgbench's
# per-transaction log (-l) is the client-side record, and each phase's
# committed transactions must equal its history rows.  check.sql then checks
# the invariants; the run prints calls, per-outcome counts and violations and
# exits non-zero on any violation.
#
# Environment:
#   SOAK_CLIENTS (8), SOAK_DUP_SECONDS / SOAK_MIX_SECONDS (per phase;
#   --short: 6 / 18, full: 60 / 240), SOAK_WORK_SECONDS (per worker phase;
#   --short: 12, full: 120), SOAK_DB (idemjob_soak),
#   SOAK_PGBENCH_MODE (prepared; use extended behind a transaction pooler),
#   SOAK_KEEP_DB=1 keeps the database, PG_CONFIG or PG_BIN for the binaries,
#   SOAK_MIN_COMMITS (50): fewer committed transactions in a phase fails it,
#   SOAK_EXISTING_DB=1: SOAK_DB exists with idemjob and amcheck installed
#   (set up by the caller, e.g. distributed: test/citus/run.sh); it is kept.
#
# On a Citus coordinator with idemjob distributed, the phases run the same
# way (each call reaches its owner's node, soak.history stays on the
# coordinator, in the call's distributed transaction); check.sql and
# selftest.sql then read a snapshot of idemjob's tables copied into local
# tables (schema soak_snap: Citus joins a local table with a distributed
# one only in simple forms), and amcheck runs on each worker's shards.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
short=0
for a in "$@"; do
	case $a in
		--short) short=1 ;;
		*) echo "usage: $0 [--short]" >&2; exit 2 ;;
	esac
done

if [ -z "${PG_BIN:-}" ]; then
	PG_BIN=$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
fi
PSQL="$PG_BIN/psql -X -q -v ON_ERROR_STOP=1"
PGBENCH=$PG_BIN/pgbench

clients=${SOAK_CLIENTS:-8}
if [ $short = 1 ]; then
	dup_s=${SOAK_DUP_SECONDS:-6}
	mix_s=${SOAK_MIX_SECONDS:-18}
	work_s=${SOAK_WORK_SECONDS:-12}
else
	dup_s=${SOAK_DUP_SECONDS:-60}
	mix_s=${SOAK_MIX_SECONDS:-240}
	work_s=${SOAK_WORK_SECONDS:-120}
fi
db=${SOAK_DB:-idemjob_soak}
mode=${SOAK_PGBENCH_MODE:-prepared}
jobs=$(( clients < 2 ? 1 : 2 ))

work=$(mktemp -d /tmp/idemjob-soak.XXXXXX)
chmod 755 "$work"
existing=${SOAK_EXISTING_DB:-}
cleanup() {
	if [ "${SOAK_KEEP_DB:-}" = "" ] && [ -z "$existing" ]; then
		$PSQL -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

start=$(date +%s)
echo "soak: $clients clients, dup phases ${dup_s}s, mixed phases ${mix_s}s, pgbench -M $mode, server ${PGHOST:-?}:${PGPORT:-?}"

if [ -z "$existing" ]; then
	$PSQL -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
	$PSQL -d postgres -c "CREATE DATABASE $db" >/dev/null
	$PSQL -d "$db" -c "CREATE EXTENSION idemjob" -c "CREATE EXTENSION amcheck" >/dev/null
fi
# distributed: idemjob's tables are Citus tables
citus=$($PSQL -d "$db" -At -c "SELECT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus')")
if [ "$citus" = t ]; then
	citus=$($PSQL -d "$db" -At -c "SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition
		WHERE logicalrelid = 'idemjob.jobs'::pg_catalog.regclass AND partmethod = 'h')")
fi
[ "$citus" = t ] && echo "soak: idemjob is distributed by Citus here: the checks read a snapshot (soak_snap)"
$PSQL -d "$db" -f "$here/setup.sql" >/dev/null

fail=0
declare -A committed failed retried

# run_phase NAME SCRIPT ISO SECONDS -D... : one pgbench run
run_phase() {
	local name=$1 script=$2 iso=$3 secs=$4
	shift 4
	sed "s/@ISO@/$iso/" "$here/scripts/$script.sql" >"$work/$name.sql"
	local out=$work/$name.out rc=0
	(cd "$work" && $PGBENCH -n -c "$clients" -j "$jobs" -T "$secs" -M "$mode" \
		--max-tries=100 --failures-detailed -l --log-prefix="log-$name" \
		-D phase="$name" "$@" -f "$name.sql" "$db") >"$out" 2>&1 || rc=$?
	# the client-side log: one line per transaction; a failed one has
	# "serialization", "deadlock" or "failed" in place of its latency
	local c f r
	c=$(cat "$work"/log-"$name".* 2>/dev/null | awk '$3 ~ /^[0-9]+$/' | wc -l)
	f=$(cat "$work"/log-"$name".* 2>/dev/null | awk '$3 !~ /^[0-9]+$/' | wc -l)
	r=$(cat "$work"/log-"$name".* 2>/dev/null | awk 'NF >= 7 && $3 ~ /^[0-9]+$/ && $7 > 0' | wc -l)
	committed[$name]=$c
	failed[$name]=$f
	retried[$name]=$r
	printf '  %-10s %-13s %4ss  committed %7d  retried %6d  failed after retries %5d\n' \
		"$name" "$iso" "$secs" "$c" "$r" "$f"
	if [ $rc -ne 0 ] || grep -q "aborted" "$out"; then
		echo "  pgbench failed in phase $name (exit $rc):" >&2
		grep -E "error|abort|FATAL|ERROR" "$out" | head -20 >&2 || true
		fail=1
	fi
}

echo "phases:"
run_phase dup0 dup "READ COMMITTED" "$dup_s" -D dup=0 -D pool=64
run_phase dup50 dup "READ COMMITTED" "$dup_s" -D dup=50 -D pool=64
run_phase dup90 dup "READ COMMITTED" "$dup_s" -D dup=90 -D pool=64
run_phase dup99 dup "READ COMMITTED" "$dup_s" -D dup=99 -D pool=64
run_phase hot dup "READ COMMITTED" "$dup_s" -D dup=100 -D pool=1
# the worker phases, with a short retry backoff (soak.conf holds the same
# values for check.sql); reset before the mixed phases, which start
# attempts by hand
$PSQL -d "$db" -At -c "SELECT format('ALTER DATABASE %I SET idemjob.retry_backoff = %L;
	ALTER DATABASE %I SET idemjob.retry_backoff_max = %L;
	ALTER DATABASE %I SET idemjob.max_attempts = %s;',
	current_database(), (extract(epoch FROM retry_backoff) * 1000)::int || 'ms',
	current_database(), (extract(epoch FROM retry_backoff_max) * 1000)::int || 'ms',
	current_database(), max_attempts) FROM soak.conf" >"$work/conf.sql"
$PSQL -d "$db" -f "$work/conf.sql" >/dev/null
run_phase work work "READ COMMITTED" "$work_s" -D keys=5000 -D purge=false
run_phase work_purge work "READ COMMITTED" "$work_s" -D keys=5000 -D purge=true
# every retry's backoff has passed; then one drain claims all that is due
sleep 0.3
drained=$($PSQL -d "$db" -At -c "SELECT soak.drain('drain')")
echo "  drain: claimed $drained due jobs after the worker phases"
$PSQL -d "$db" -c "ALTER DATABASE $db RESET idemjob.retry_backoff" \
	-c "ALTER DATABASE $db RESET idemjob.retry_backoff_max" \
	-c "ALTER DATABASE $db RESET idemjob.max_attempts" >/dev/null
run_phase mixed_rc mixed "READ COMMITTED" "$mix_s" -D slots=16
# Citus runs a SERIALIZABLE block as one such transaction per node, and
# reports a serialization failure at a node's commit as an error of its
# own (not 40001): no client may retry it, so on Citus this phase is
# REPEATABLE READ, where those failures come at the statement, as 40001
ser_iso=SERIALIZABLE
if [ "$citus" = t ]; then
	ser_iso="REPEATABLE READ"
fi
run_phase mixed_ser mixed "$ser_iso" "$mix_s" -D slots=16

# the history must hold exactly the transactions pgbench saw commit
echo "client log vs history:"
for p in dup0 dup50 dup90 dup99 hot work work_purge mixed_rc mixed_ser; do
	h=$($PSQL -At -d "$db" -c "SELECT count(*) FROM soak.history WHERE phase = '$p'")
	mark=ok
	if [ "$h" != "${committed[$p]}" ]; then
		mark="MISMATCH"
		fail=1
	fi
	printf '  %-10s client committed %7d  history %7d  %s\n' "$p" "${committed[$p]}" "$h" "$mark"
done

# every phase must have done real work
for p in dup0 dup50 dup90 dup99 hot work work_purge mixed_rc mixed_ser; do
	if [ "${committed[$p]}" -lt "${SOAK_MIN_COMMITS:-50}" ]; then
		echo "phase $p committed only ${committed[$p]} transactions" >&2
		fail=1
	fi
done

# and the purge phase must have purged (the purge checks need spent keys)
sk=$($PSQL -At -d "$db" -c "SELECT count(*) FROM idemjob.spent_keys")
if [ "$sk" -lt 1 ]; then
	echo "phase work_purge purged no job" >&2
	fail=1
fi

# the checker's input: the tables themselves, or on Citus a snapshot of them
# in local tables, and the scripts read it in their place
checker() {
	if [ "$citus" = t ]; then
		sed -E 's/idemjob\.(jobs|attempts|race_log|spent_keys|queue_stats)\b/soak_snap.\1/g' "$1"
	else
		cat "$1"
	fi
}
if [ "$citus" = t ]; then
	$PSQL -d "$db" -c "SET client_min_messages = warning" -c "DROP SCHEMA IF EXISTS soak_snap CASCADE" \
		-c "CREATE SCHEMA soak_snap" \
		-c "CREATE TABLE soak_snap.jobs AS SELECT * FROM idemjob.jobs" \
		-c "CREATE TABLE soak_snap.attempts AS SELECT * FROM idemjob.attempts" \
		-c "CREATE TABLE soak_snap.race_log AS SELECT * FROM idemjob.race_log" \
		-c "CREATE TABLE soak_snap.spent_keys AS SELECT * FROM idemjob.spent_keys" \
		-c "CREATE TABLE soak_snap.queue_stats AS SELECT * FROM idemjob.queue_stats" \
		-c "CREATE INDEX ON soak_snap.jobs (id)" -c "CREATE INDEX ON soak_snap.attempts (id)" \
		-c "CREATE INDEX ON soak_snap.attempts (job_id)" -c "CREATE INDEX ON soak_snap.race_log (attempt_id)" \
		-c "ANALYZE soak_snap.jobs, soak_snap.attempts, soak_snap.race_log, soak_snap.spent_keys" >/dev/null
fi
# (selftest.sql reads check.sql beside it: \ir)
checker "$here/check.sql" >"$work/check.sql"
checker "$here/selftest.sql" >"$work/selftest.sql"
$PSQL -d "$db" -v snapshot="$citus" -f "$work/check.sql" >"$work/check.out"
awk '
	/^FIGURES$/ { sec = "f"; print "figures:"; next }
	/^PHASES$/ { sec = "p"; print "phases (calls, submits, created, duplicate %):"; next }
	/^OUTCOMES$/ { sec = "o"; print "per-outcome counts:"; next }
	/^CHECKS$/ { sec = "c"; print "checks (violations):"; next }
	/^TOTAL$/ { sec = "t"; next }
	sec == "f" { split($0, a, "|"); printf "  %-10s %s\n", a[1], a[2] }
	sec == "p" { split($0, a, "|"); printf "  %-10s calls %7d  submits %7d  created %7d  dup %5s%%\n", a[1], a[2], a[3], a[4], a[5] }
	sec == "o" { split($0, a, "|"); printf "  %-18s %-10s %8d\n", a[1], a[2], a[3] }
	sec == "c" { split($0, a, "|"); printf "  %5d  %s%s\n", a[2], a[1], (a[3] != "" ? "  [" a[3] "]" : "") }
	sec == "t" { split($0, a, "|"); print "violations: " a[2] }
' "$work/check.out"

# the checker must be able to fail: on deliberately broken data, each of
# these checks has to report violations
$PSQL -d "$db" -v snapshot="$citus" -f "$work/selftest.sql" >"$work/selftest.out"
st_bad=0
st_n=0
for c in "one job per (owner, key)|0" \
	"every submit of a key got that key's job id|1" \
	"every job created by exactly one committed submit (created = true)|1" \
	"never two in-doubt attempts per job (final state)|1" \
	"job state agrees with its attempts|1" \
	"at most one succeeded attempt per job|1" \
	"stored result byte-identical to what the winner sent|1" \
	"no committed result ever overwritten (every read saw the final result)|1" \
	"every superseded or rejected attempt has exactly one race_log row|1" \
	"race_log sha256 and size match what the loser sent|1" \
	"unexpected errors (none allowed)|1" \
	"never two attempts of a job in doubt at once (history of worker jobs)|1" \
	"no due worker job left unclaimed after the drain|1" \
	"retry backoff honoured (next claim >= failure + backoff x 2^(n-1), capped)|1" \
	"max_attempts honoured|1" \
	"no (owner, key) both a job and a spent key|1" \
	"one job id per key ever (answers, jobs, spent keys)|1" \
	"every purged job has its spent key|1" \
	"every lost answer has exactly one race_log row (purged jobs too)|1"; do
	name=${c%|*}
	want=${c##*|}
	[ "$want" = 1 ] || continue
	st_n=$((st_n + 1))
	got=$(awk -F'|' -v n="$name" '$1 == n { print $2 }' "$work/selftest.out")
	if [ -z "$got" ] || [ "$got" = 0 ]; then
		echo "  checker self-test: \"$name\" did not detect the tampering" >&2
		st_bad=$((st_bad + 1))
	fi
done
echo "checker self-test: $((st_n - st_bad)) of $st_n deliberate breakages detected"
[ $st_bad = 0 ] || fail=1

viol=$(awk -F'|' '$1 == "violations" { print $2 }' "$work/check.out")
calls=$(awk -F'|' '$1 == "calls" { print $2 }' "$work/check.out")
echo "soak: calls $calls, violations $viol, $(( $(date +%s) - start ))s"
if [ "$viol" != "0" ] || [ $fail != 0 ]; then
	echo "soak: FAILED" >&2
	exit 1
fi
echo "soak: PASSED"
