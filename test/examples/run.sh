#!/usr/bin/env bash
# test/examples/run.sh: runs examples/python, examples/node and examples/go
# end to end against the server in PGHOST/PGPORT/PGUSER (a superuser), each
# once directly and once through pgbouncer in transaction pooling, and
# checks the outcomes: each run gets a fresh database (test/examples/
# setup.sql: roles with the client/worker/admin capabilities, a contract, a
# certified fallback, the route primary -> fallback and a doubt policy); the
# example prints JSON lines, which this script checks together with the
# database:
#   a restarted worker abandons what it left in flight -> the job is won on
#   the fallback; double click -> one job; key reuse -> 409 with the job id
#   from the error fields; a failure -> the next claim is on the certified
#   fallback; no answer -> unknown -> IJ002 -> 409 with Retry-After, the
#   server fences the doubt and the fallback wins; the late answer -> lost
#   with a race-log row; a claimed batch of 20 begun and reported in one
#   statement each, each job won once; a batch whose statements fail (IJ003
#   at begin: not sent; IJ005 at the report) goes one by one.
# Installs what it needs when missing.  Prints "examples: N passed, M failed"
# and exits non-zero on any failure.  EXAMPLES="python node go" picks some;
# PGBOUNCER_PORT (5691) the pooler's port.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/test/examples
PG_BIN=${PG_BIN:-$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
PSQL="env PGOPTIONS=--client-min-messages=warning $PG_BIN/psql -X -q -v ON_ERROR_STOP=1"
server_host=${PGHOST:?PGHOST must name the server}
server_port=${PGPORT:-5432}
user=${PGUSER:-postgres}
bport=${PGBOUNCER_PORT:-5691}
examples=${EXAMPLES:-python node go}
export GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=${GOCACHE:-/tmp/idemjob-examples-gocache}

# ---- what the examples need
need=()
/usr/bin/python3 -c 'import psycopg' 2>/dev/null || need+=(python3-psycopg)
/usr/bin/python3 -c 'import psycopg_pool, setuptools, ensurepip' 2>/dev/null || need+=(python3-psycopg-pool python3-setuptools python3-venv)
command -v go >/dev/null || need+=(golang-go)
[ -d /usr/share/gocode/src/github.com/jackc/pgx/v4 ] || need+=(golang-github-jackc-pgx-v4-dev)
command -v jq >/dev/null || need+=(jq)
command -v pgbouncer >/dev/null || need+=(pgbouncer)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
	echo "examples: installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null ||
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null; } ||
		{ echo "examples: could not install ${need[*]}" >&2; exit 1; }
fi
# examples/node links the package of the checkout (clients/node), whose own
# dependencies (pg) are installed in clients/node
if [[ " $examples " == *" node "* ]] &&
	{ [ ! -e "$root/examples/node/node_modules/idemjob" ] || [ ! -d "$root/clients/node/node_modules/pg" ]; }; then
	(cd "$root/clients/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) &&
		(cd "$root/examples/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
		{ echo "examples: npm ci failed" >&2; exit 1; }
fi

work=$(mktemp -d /tmp/idemjob-examples.XXXXXX)
chmod 755 "$work"
source "$root/test/pooler.sh"
cleanup() { ij_pooler_cleanup "$work" idemjob_ex_; }
trap cleanup EXIT
export PGHOST=$server_host PGPORT=$server_port PGUSER=$user

# ---- pgbouncer, transaction pooling, consecutive transactions on other backends
ij_pooler_start "$work" "$bport" "$server_host" "$server_port" "$user" ij_ex_client ij_ex_worker ij_ex_admin || exit 1

# the python example runs on the idemjob package (clients/python), installed
# from the checkout into a venv over Debian's packages, as a user would
if [[ " $examples " == *" python "* ]]; then
	/usr/bin/python3 -m venv --system-site-packages "$work/venv" &&
		"$work/venv/bin/pip" install -q --no-build-isolation --no-index "$root/clients/python" >"$work/pip.log" 2>&1 ||
		{ cat "$work/pip.log" >&2; echo "examples: clients/python does not install" >&2; exit 1; }
fi

# four server connections in each pool (database, role) the run will use:
# with server_round_robin, consecutive transactions of one client then go
# to different backends, so session state (prepared statements) breaks
prewarm() {
	local d=$1 u
	shift
	for u in "$@"; do
		for _ in 1 2 3 4; do
			PGHOST=$work PGPORT=$bport "$PG_BIN/psql" -X -q -d "$d" -U "$u" -c "SELECT pg_sleep(0.3)" >/dev/null &
		done
	done
	wait
}
passed=0
failed=0
# the pooler really is in transaction mode: psycopg's default (prepared
# statements after 5 runs) must fail through it, as docs/clients.md says
if [[ " $examples " == *" python "* ]]; then
	prewarm postgres "$user"
	if /usr/bin/python3 - "host=$work port=$bport dbname=postgres user=$user" <<'PY' >"$work/prepared.out" 2>&1; then
import sys, psycopg
c = psycopg.connect(sys.argv[1], autocommit=True)
for i in range(40):
    c.execute("SELECT %s::int", (i,)).fetchone()
PY
		echo "  FAIL pgbouncer: prepared statements worked through it; the pooler runs are meaningless"
		failed=$((failed + 1))
	else
		echo "  ok   pgbouncer refuses psycopg's default prepared statements ($(grep -o 'prepared statement "[^"]*" does not exist' "$work/prepared.out" | head -1))"
	fi
fi
fail() { echo "  FAIL $run: $*"; bad=1; }
# jq over the check line named $1
line() { jq -c "select(.check == \"$1\")" "$out" | head -1; }
q() { $PSQL -d "$db" -Atc "$1"; }

check_run() {
	local dbl reuse bad_uuid slow fo doubt late latejob job late_att restart
	# abandon_attempts at start: the job the last run left sent is fenced
	# and retried; the server routes it to the fallback
	restart=$(line restart)
	jq -e '.abandoned == 1 and .status == 200 and .state == "succeeded" and .result.by == "fallback"' \
		<<<"$restart" >/dev/null || fail "restart: $restart"
	[ "$(q "SELECT string_agg(provider || ':' || state || ':' || coalesce(error ->> 'reason', '-'), ',' ORDER BY attempt_no)
		FROM idemjob.attempts WHERE job_id = '$(jq -r .job_id <<<"$restart")'")" = \
		"primary:cancelled:abandoned by its worker,fallback:succeeded:-" ] || fail "restart: attempts"

	dbl=$(line double_click)
	job=$(jq -r '.job_ids[0]' <<<"$dbl")
	[ -n "$job" ] && [ "$job" != null ] || { fail "no double_click line"; return; }
	[ "$(jq -r '.job_ids[1]' <<<"$dbl")" = "$job" ] || fail "double click gave two job ids"
	jq -e '.statuses | all(. == 200 or . == 202)' <<<"$dbl" >/dev/null || fail "double click statuses: $dbl"
	[ "$(q "SELECT count(*) FROM idemjob.jobs WHERE idempotency_key = 'dbl'")" = 1 ] || fail "double click made more than one job"
	jq -e '.status == 200 and .state == "succeeded" and (.version | type) == "number" and .version == 1 and (.result | type) == "object"' \
		<<<"$(line double_click_done)" >/dev/null || fail "double click result: $(line double_click_done)"

	reuse=$(line key_reuse)
	jq -e --arg j "$job" '.status == 409 and .body.sqlstate == "IJ001" and .body.job_id == $j' <<<"$reuse" >/dev/null ||
		fail "key reuse: $reuse"
	jq -e '.status == 400 and .body.sqlstate == "22P02"' <<<"$(line bad_uuid)" >/dev/null || fail "bad uuid: $(line bad_uuid)"

	slow=$(jq -r .job_id <<<"$(line slow)")
	[ "$(q "SELECT j.state || ' ' || a.provider || ' ' || j.attempt_count || ' ' || (a.deadline > a.started_at + interval '1.1 s')
		FROM idemjob.jobs j JOIN idemjob.attempts a ON a.id = j.completed_by WHERE j.id = '$slow'")" = "succeeded primary 1 true" ] ||
		fail "slow provider: not won on primary with heartbeats"

	fo=$(line failover)
	jq -e '.status == 200 and .state == "succeeded" and .result.by == "fallback"' <<<"$fo" >/dev/null || fail "failover answer: $fo"
	[ "$(q "SELECT string_agg(provider || ':' || state, ',' ORDER BY attempt_no) FROM idemjob.attempts
		WHERE job_id = '$(jq -r .job_id <<<"$fo")'")" = "primary:failed,fallback:succeeded" ] || fail "failover attempts"

	doubt=$(line in_doubt)
	jq -e '.status == 409 and .body.sqlstate == "IJ002" and .body.job_id == .job_id and (.headers["Retry-After"] | tostring | test("^[1-9][0-9]*$"))' \
		<<<"$doubt" >/dev/null || fail "in doubt: $doubt"
	late=$(line late)
	late_att=$(jq -r .attempt_id <<<"$late")
	jq -e --argjson d "$doubt" '.outcome == "lost" and .attempt_id == $d.body.attempt_id and .job_id == $d.job_id' <<<"$late" >/dev/null ||
		fail "late answer: $late"
	[ "$(q "SELECT a.state || ' ' || r.reason || ' ' || (r.winner_attempt_id = j.completed_by) || ' ' || w.provider
		FROM idemjob.race_log r JOIN idemjob.attempts a ON a.id = r.attempt_id JOIN idemjob.jobs j ON j.id = r.job_id
		JOIN idemjob.attempts w ON w.id = j.completed_by WHERE r.attempt_id = '$late_att'")" = "superseded slot_taken true fallback" ] ||
		fail "late answer: no race-log row for $late_att"
	latejob=$(line late_job)
	jq -e '.status == 200 and .state == "succeeded" and .result.by == "fallback"' <<<"$latejob" >/dev/null || fail "late job: $latejob"
	# the doubt ended by the server (fence_unknown_after), not by an operator
	[ "$(q "SELECT string_agg(a.provider || ':' || a.state || ':' || coalesce(a.error ->> 'reason', '-'), ',' ORDER BY a.attempt_no)
		FROM idemjob.attempts a WHERE a.job_id = '$(jq -r .job_id <<<"$latejob")'")" = \
		"primary:superseded:unknown for longer than its intent's fence_unknown_after,fallback:succeeded:-" ] ||
		fail "late job: not fenced by the doubt policy then won on the fallback"

	# a claimed batch reported in one statement, and one that falls back
	local batch
	batch=$(line batch)
	jq -e '.claimed == 20 and (.outcomes | length == 20 and all(. == "won"))' <<<"$batch" >/dev/null ||
		fail "batch: $batch"
	[ "$(q "SELECT count(*) FROM idemjob.jobs j JOIN idemjob.attempts a ON a.job_id = j.id
		WHERE j.idempotency_key LIKE 'batch-%' AND j.state = 'succeeded' AND j.attempt_count = 1
		AND a.id = j.completed_by AND a.state = 'succeeded' AND a.provider = 'primary'")" = 20 ] ||
		fail "batch: not 20 jobs each won by its one attempt"
	# the first claimed job cancelled before the begin (not sent), the first
	# one sent failed before the report
	batch=$(line batch_fallback)
	jq -e '.claimed == 5 and .sent == 4 and .outcomes == ["IJ005", "won", "won", "won"] and (.meanwhile | length) == 2' \
		<<<"$batch" >/dev/null || fail "batch with a job cancelled and an attempt failed meanwhile: $batch"
	[ "$(q "SELECT string_agg(j.state || ':' || a.state || ':' || (a.lease_until IS NULL), ',' ORDER BY m.n)
		FROM unnest('$(jq -r '.meanwhile | join(",") | "{" + . + "}"' <<<"$batch")'::uuid[]) WITH ORDINALITY m(id, n)
		JOIN idemjob.attempts a ON a.id = m.id JOIN idemjob.jobs j ON j.id = a.job_id")" = "cancelled:started:false,failed:failed:true" ] ||
		fail "batch with a job cancelled and an attempt failed meanwhile: attempts"
	[ "$(q "SELECT string_agg(j.state::text, ',' ORDER BY j.state) FROM idemjob.jobs j
		WHERE j.idempotency_key LIKE 'batch2-%'")" = "succeeded,succeeded,succeeded,failed,cancelled" ] ||
		fail "batch with a job cancelled and an attempt failed meanwhile: job states"
}

for ex in $examples; do
	case $ex in
	python) cmd=("$work/venv/bin/python" "$root/examples/python/scenario.py") ;;
	node) cmd=(node "$root/examples/node/scenario.js") ;;
	go) # GOPATH mode: the client package (clients/go) at its import path, over Debian's Go sources
		ip=$(sed -n 's/^module //p' "$root/clients/go/go.mod")
		mkdir -p "$work/gopath/src/$(dirname "$ip")" && ln -sfn "$root/clients/go" "$work/gopath/src/$ip"
		cmd=(env GOPATH="$work/gopath:/usr/share/gocode" go run "$root/examples/go/app.go" "$root/examples/go/scenario.go") ;;
	*) echo "examples: unknown example $ex" >&2; exit 2 ;;
	esac
	for via in direct pgbouncer; do
		run=$ex/$via
		db=idemjob_ex_${ex}_$via
		out=$work/$ex-$via.out
		bad=0
		$PSQL -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null &&
			$PSQL -d "$db" -f "$here/setup.sql" >/dev/null &&
			$PSQL -d postgres -c "ALTER DATABASE $db SET idemjob.default_provider = 'primary'" >/dev/null ||
			{ echo "examples: setup of $db failed" >&2; exit 1; }
		if [ $via = direct ]; then
			h=$server_host p=$server_port
		else
			h=$work p=$bport
			prewarm "$db" ij_ex_client ij_ex_worker ij_ex_admin
		fi
		t0=$(date +%s.%N)
		(cd "$root/examples/$ex" &&
			IJ_CLIENT_DSN="host=$h port=$p dbname=$db user=ij_ex_client" \
			IJ_WORKER_DSN="host=$h port=$p dbname=$db user=ij_ex_worker" \
			IJ_ADMIN_DSN="host=$h port=$p dbname=$db user=ij_ex_admin" \
			timeout 120 "${cmd[@]}") >"$out" 2>"$out.err"
		rc=$?
		secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
		if [ $rc -ne 0 ]; then
			fail "exit $rc"
			sed 's/^/    /' "$out.err" | tail -20
		else
			check_run
		fi
		if [ $bad = 0 ]; then
			passed=$((passed + 1))
			printf '  ok   %-18s %5.1f s, %d checks\n' "$run" "$secs" "$(grep -c '"check"' "$out")"
		else
			failed=$((failed + 1))
			sed 's/^/    | /' "$out" | cut -c1-300
		fi
	done
done
echo "examples: $passed passed, $failed failed"
[ $failed = 0 ]
