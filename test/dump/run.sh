#!/usr/bin/env bash
# test/dump/run.sh: pg_dump and restore of a database that uses idemjob.
#
#   bash test/dump/run.sh
#   bash test/dump/run.sh --source HOST PORT
#
# Needs a running cluster with idemjob installed (PGHOST, PGPORT, PGUSER of
# a superuser, as test/lib.sh exports them).  It fills a database
# (test/dump/fill.sql: jobs and attempts in every state, races of both
# reasons, contracts, certifications with a revoked one, spent keys, a
# capability granted to the role app_client and a binding of it; and
# test/dump/fill_limits.sql: the deepest params, result and contract
# accepted, and a contract 1.0 stored that 1.1 refuses), then restores it,
# as the contract says a DBA does, with no extra flags, into empty
# databases:
#   pg_dump -Fp | psql -v ON_ERROR_STOP=1
#   pg_dump -Fc, then pg_restore -d
#   pg_dump -Fc, then pg_restore -j 4 -d
# and checks for each: no error, every row of every idemjob table identical
# (count and md5 of all columns), the same privileges (app_client's
# capability included), the table data written in foreign-key order, and
# the restored jobs behave: a replay answers created = false with the same
# job, an attempt in doubt still blocks (IJ002), a fenced late result still
# loses, a pending job starts, a spent key is refused, app_client can
# submit.  With --source, the source database is made on the server at
# HOST and PORT (an older PostgreSQL with idemjob installed) and dumped from
# there with this PG_CONFIG's pg_dump, as a DBA moving to a newer major
# version does; the restores are made on PGHOST/PGPORT.  Prints one line per check and a summary; exits non-zero if any
# check failed.

set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
: "${PG_CONFIG:=/usr/lib/postgresql/15/bin/pg_config}"
PG_BIN=$("$PG_CONFIG" --bindir)

src=ij_dump_src
src_conn=()
if [ "${1:-}" = --source ]; then
	src=ij_dump_src_other
	src_conn=(-h "$2" -p "$3")
fi
# The test's own helper tables (schema ij_check, loaded again in each target)
# stay out of a dump made across versions: Debian 12's PostgreSQL 15.20
# stores a pg_attver option on every column of a table it creates, which
# sid's pg_dump 18.6 writes out and its server refuses.  No column of
# idemjob's tables is dumped that way (they are the extension's members).
dump_opts=()
[ ${#src_conn[@]} -gt 0 ] && dump_opts=(-N ij_check)
targets=(ij_dump_plain ij_dump_custom ij_dump_parallel)
role=app_client

passed=0
failed=0
tmp=$(mktemp -d /tmp/idemjob-dump.XXXXXX)
trap 'if [ "$failed" -eq 0 ]; then rm -rf "$tmp"; else echo "dump: dumps and outputs kept in $tmp"; fi' EXIT

label=dump
source "$repo/test/checks.sh"
# checks NAME DB SQL: check, on the source's server
checks() { check "$@" "${src_conn[@]}"; }

# qs: psql on the source's server
qs() { q "${src_conn[@]}" "$@"; }

q -d postgres -c "SELECT 1" >/dev/null || die "no server (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-})"
qs -d postgres -c "SELECT 1" >/dev/null || die "no source server (${src_conn[*]})"
[ "$(q -d postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = current_user")" = t ] ||
	die "PGUSER must be a superuser"
echo "# source: $(qs -d postgres -c "SHOW server_version"); restored on: $(q -d postgres -c "SHOW server_version"), with $("$PG_BIN/pg_dump" --version)"

# --- the source database
qs -d postgres -c "DROP DATABASE IF EXISTS $src" 2>/dev/null || die "cannot drop $src"
for d in "${targets[@]}"; do
	q -d postgres -c "DROP DATABASE IF EXISTS $d" 2>/dev/null || die "cannot drop $d"
done
created_role=0
if [ "$(q -d postgres -c "SELECT count(*) FROM pg_roles WHERE rolname = '$role'")" = 0 ]; then
	q -d postgres -c "CREATE ROLE $role NOLOGIN" || die "cannot create role $role"
	created_role=1
fi
if [ ${#src_conn[@]} -gt 0 ] &&
	[ "$(qs -d postgres -c "SELECT count(*) FROM pg_roles WHERE rolname = '$role'")" = 0 ]; then
	qs -d postgres -c "CREATE ROLE $role NOLOGIN" || die "cannot create role $role on the source"
fi
qs -d postgres -c "CREATE DATABASE $src TEMPLATE template0" &&
	qs -d $src -c "CREATE EXTENSION idemjob" &&
	qs -d $src -f "$repo/test/upgrade/helpers.sql" &&
	qs -d $src -f "$repo/test/dump/fill.sql" &&
	qs -d $src -c "SELECT idemjob.bind_owner('$role', 'setting:app.owner')" >/dev/null &&
	qs -d $src -f "$repo/test/dump/fill_limits.sql" >/dev/null ||
	die "could not fill $src"

checks "source: jobs in every state" $src \
	"SELECT array_agg(DISTINCT state ORDER BY state) = enum_range(NULL::idemjob.job_state) FROM idemjob.jobs"
checks "source: attempts in every state" $src \
	"SELECT array_agg(DISTINCT state ORDER BY state) = enum_range(NULL::idemjob.attempt_state) FROM idemjob.attempts"
checks "source: race_log rows of the three reasons, standing alone (intent, key, a kept payload, a late result after purge)" $src \
	"SELECT array_agg(DISTINCT reason ORDER BY reason) = '{rejected,slot_taken,version_moved}'
	    AND bool_and(intent IS NOT NULL AND idempotency_key IS NOT NULL)
	    AND count(*) FILTER (WHERE dropped_result IS NOT NULL) = 2
	    AND count(*) FILTER (WHERE idempotency_key = 'k-purged-3' AND winner_provider = 'p1') = 1
	 FROM idemjob.race_log"
checks "source: rows in each of the 10 idemjob tables" $src \
	"SELECT count(*) = 10 AND bool_and(n > 0) FROM ij_check.table_md5()"
checks "source: a revoked certification, a capability" $src \
	"SELECT EXISTS (SELECT FROM idemjob.certifications WHERE revoked_at IS NOT NULL)
	    AND EXISTS (SELECT FROM idemjob.capabilities WHERE grantee = '$role'::regrole AND capability = 'client')
	    AND has_function_privilege('$role', 'idemjob.submit(text, text, text, jsonb, text, timestamptz, int4, int4)', 'EXECUTE')"
purged=$(qs -d $src -c "SELECT count(*) FROM idemjob.spent_keys WHERE idempotency_key LIKE 'k-purged-%'")
echo "# spent keys written by purge(): ${purged:-?} (0 while purge() is not written)"

# --- dump
if "$PG_BIN/pg_dump" "${src_conn[@]}" "${dump_opts[@]}" -Fp -f "$tmp/dump.sql" $src 2>"$tmp/pg_dump-p.err" &&
	"$PG_BIN/pg_dump" "${src_conn[@]}" "${dump_opts[@]}" -Fc -f "$tmp/dump.custom" $src 2>"$tmp/pg_dump-c.err" &&
	[ ! -s "$tmp/pg_dump-p.err" ] && [ ! -s "$tmp/pg_dump-c.err" ]; then
	ok "pg_dump -Fp and -Fc, no message"
else
	not_ok "pg_dump -Fp and -Fc, no message" "$(cat "$tmp/pg_dump-p.err" "$tmp/pg_dump-c.err")"
fi

# data order: what references comes after what it references
order_ok() {	# order_ok LISTING PATTERN-BEFORE PATTERN-AFTER
	local a b
	a=$(grep -n -E "$2" "$1" | head -1 | cut -d: -f1)
	b=$(grep -n -E "$3" "$1" | head -1 | cut -d: -f1)
	[ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]
}
"$PG_BIN/pg_restore" -l "$tmp/dump.custom" >"$tmp/toc" 2>&1
for fmt in plain custom; do
	if [ $fmt = plain ]; then
		f=$tmp/dump.sql; pj='^COPY idemjob\.jobs '; pa='^COPY idemjob\.attempts '
		pc='^COPY idemjob\.contracts '; pz='^COPY idemjob\.certifications '
	else
		f=$tmp/toc; pj='TABLE DATA idemjob jobs '; pa='TABLE DATA idemjob attempts '
		pc='TABLE DATA idemjob contracts '; pz='TABLE DATA idemjob certifications '
	fi
	# (the partitioned layout, idemjob.partitions: partition N of jobs
	# before partition N of attempts, which holds their attempts)
	parts_ok=true nparts=0
	for n in $(qs -d $src -c "SELECT substring(relname, '_p([0-9]+)$') FROM pg_class
	                          WHERE relnamespace = 'idemjob'::regnamespace AND relispartition
	                            AND relkind = 'r' AND relname LIKE 'jobs\_p%'"); do
		if [ $fmt = plain ]; then
			order_ok "$f" "^COPY idemjob\.jobs_p$n " "^COPY idemjob\.attempts_p$n " || parts_ok=false
		else
			order_ok "$f" "TABLE DATA idemjob jobs_p$n " "TABLE DATA idemjob attempts_p$n " || parts_ok=false
		fi
		nparts=$((nparts + 1))
	done
	if [ $nparts = 0 ]; then
		order_ok "$f" "$pj" "$pa" || parts_ok=false
	fi
	if $parts_ok && order_ok "$f" "$pc" "$pz"; then
		ok "$fmt dump: jobs' data before attempts', contracts' before certifications'"
	else
		not_ok "$fmt dump: jobs' data before attempts', contracts' before certifications'" \
			"$(grep -n -E 'COPY idemjob|TABLE DATA idemjob' "$f")"
	fi
done

# --- restore, each way, with no extra flags
for t in "${targets[@]}"; do
	q -d postgres -c "CREATE DATABASE $t TEMPLATE template0" || die "cannot create the target database $t"
done
# the one message a restore may give: the WARNING for the contract 1.1
# would refuse (kept, not refused: refusing it lost every contract)
restore_ok() {	# restore_ok LABEL OUTPUT: no error, only that WARNING
	local rest
	rest=$(grep -v -E 'WARNING:  the contract of intent "old-contract" does not compile|^DETAIL:  The row is kept' <<<"$2")
	if [ -z "$rest" ]; then
		ok "$1: no error, no message but the WARNING for the contract 1.1 refuses"
	else
		not_ok "$1: no error, no message but the WARNING for the contract 1.1 refuses" "$2"
	fi
}
out=$("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -d ${targets[0]} -f "$tmp/dump.sql" 2>&1 >/dev/null) ||
	out="$out (exit $?)"
restore_ok "pg_dump -Fp | psql -v ON_ERROR_STOP=1" "$out"
out=$("$PG_BIN/pg_restore" -d ${targets[1]} "$tmp/dump.custom" 2>&1) || out="$out (exit $?)"
restore_ok "pg_restore -d" "$out"
out=$("$PG_BIN/pg_restore" -j 4 -d ${targets[2]} "$tmp/dump.custom" 2>&1) || out="$out (exit $?)"
restore_ok "pg_restore -j 4 -d" "$out"

# --- the same rows and privileges
qs -d $src -c "SELECT tab, n, md5 FROM ij_check.table_md5() ORDER BY tab" >"$tmp/rows-src" 2>&1
# PostgreSQL 17 gives a table's owner MAINTAIN, which 15 does not have
acl_filter=
[ ${#src_conn[@]} -gt 0 ] && acl_filter="WHERE a.privilege_type <> 'MAINTAIN'"
acl_sql="SELECT o.what, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END,
		a.privilege_type, a.is_grantable
	FROM (SELECT pg_describe_object('pg_class'::regclass, c.oid, 0) AS what,
				 coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::\"char\", c.relowner)) AS acl
		  FROM pg_class c WHERE c.relnamespace = 'idemjob'::regnamespace
		  UNION ALL
		  SELECT pg_describe_object('pg_proc'::regclass, p.oid, 0), coalesce(p.proacl, acldefault('f'::\"char\", p.proowner))
		  FROM pg_proc p WHERE p.pronamespace = 'idemjob'::regnamespace
		  UNION ALL
		  SELECT 'schema idemjob', coalesce(n.nspacl, acldefault('n'::\"char\", n.nspowner))
		  FROM pg_namespace n WHERE n.nspname = 'idemjob') o,
		aclexplode(o.acl) a
	$acl_filter
	ORDER BY 1, 2, 3, 4"
qs -d $src -c "$acl_sql" >"$tmp/acl-src" 2>&1

jid() { echo "(SELECT id FROM idemjob.jobs WHERE owner_id = '${2:-o1}' AND idempotency_key = '$1')"; }
aid() { echo "(SELECT id FROM idemjob.attempts WHERE job_id = $(jid "$1") AND attempt_no = ${2:-1})"; }

for t in "${targets[@]}"; do
	q -d $t -f "$repo/test/upgrade/helpers.sql" >/dev/null 2>&1
	check "$t: the extension restored, at the source's version" $t \
		"SELECT extversion = '$(qs -d $src -c "SELECT extversion FROM pg_extension WHERE extname = 'idemjob'")'
		 FROM pg_extension WHERE extname = 'idemjob'"
	q -d $t -c "SELECT tab, n, md5 FROM ij_check.table_md5() ORDER BY tab" >"$tmp/rows-$t" 2>&1
	if d=$(diff "$tmp/rows-src" "$tmp/rows-$t"); then
		ok "$t: every row of the 10 idemjob tables identical ($(awk -F'|' '{ s = s $1 "=" $2 " " } END { print s }' "$tmp/rows-src" | sed 's/idemjob\.//g; s/ $//'))"
	else
		not_ok "$t: every row of the 10 idemjob tables identical" \
			"$(echo "table|rows|md5: < source, > restored"; echo "$d")"
	fi
	q -d $t -c "$acl_sql" >"$tmp/acl-$t" 2>&1
	if [ "$(grep -c "|$role|" "$tmp/acl-src")" -gt 0 ] && d=$(diff "$tmp/acl-src" "$tmp/acl-$t"); then
		ok "$t: the same privileges on every object ($role: $(grep -c "|$role|" "$tmp/acl-src") grants)"
	else
		not_ok "$t: the same privileges on every object" "$d"
	fi
	check "$t: $role may submit, may not start attempts" $t \
		"SELECT has_function_privilege('$role', 'idemjob.submit(text, text, text, jsonb, text, timestamptz, int4, int4)', 'EXECUTE')
		    AND NOT has_function_privilege('$role', 'idemjob.start_attempt(uuid, text, interval, text)', 'EXECUTE')
		    AND NOT has_table_privilege('$role', 'idemjob.jobs', 'SELECT')"

	# behaviour (after the comparisons: these change rows)
	check "$t: a replay answers created = false, the same job, its result" $t \
		"SELECT NOT created AND job_id = $(jid k-succeeded) AND state = 'succeeded'
		    AND result = '{\"ok\": true, \"ref\": \"r-4\"}'
		 FROM idemjob.submit('o1', 'k-succeeded', 'pay', '{\"amount\": 4}', 'p1')"
	check "$t: $role replays a submit with its capability, for its bound owner" $t \
		"SET ROLE $role; SET app.owner = 'o1'; SELECT NOT created FROM idemjob.submit('o1', 'k-pending', 'pay', '{\"amount\": 1}', 'p1')"
	check "$t: $role is still bound to its owner (another owner: 42501)" $t \
		"SET ROLE $role; SET app.owner = 'o2'; SELECT ij_check.sqlstate(\$\$SELECT idemjob.submit('o1', 'k-pending', 'pay', '{\"amount\": 1}', 'p1')\$\$) = '42501'"
	check "$t: a key reused with other params: IJ001" $t \
		"SELECT ij_check.sqlstate(\$\$SELECT idemjob.submit('o1', 'k-succeeded', 'pay', '{\"amount\": 5}', 'p1')\$\$) = 'IJ001'"
	check "$t: an attempt in doubt still blocks: IJ002" $t \
		"SELECT ij_check.sqlstate(\$\$SELECT idemjob.start_attempt($(jid k-indoubt))\$\$) = 'IJ002'"
	check "$t: a started attempt still blocks: IJ002" $t \
		"SELECT ij_check.sqlstate(\$\$SELECT idemjob.start_attempt($(jid k-running))\$\$) = 'IJ002'"
	check "$t: a finished job refuses attempts: IJ003" $t \
		"SELECT ij_check.sqlstate(\$\$SELECT idemjob.start_attempt($(jid k-failed))\$\$) = 'IJ003'"
	check "$t: a fenced late result still loses" $t \
		"SELECT outcome = 'lost' AND winner_attempt_id IS NULL AND job_version = 1
		 FROM idemjob.complete_attempt($(aid k-fenced-open), '{\"ok\": true}')"
	check "$t: ... logged as version_moved, with its provider" $t \
		"SELECT count(*) = 1 AND bool_and(reason = 'version_moved' AND provider = 'p1')
		 FROM idemjob.race_log WHERE attempt_id = $(aid k-fenced-open)"
	check "$t: a pending job can be started" $t \
		"SELECT state = 'started' AND attempt_no = 1 AND read_version = 0
		 FROM idemjob.start_attempt($(jid k-pending))"
	check "$t: a running attempt completes and wins" $t \
		"SELECT outcome = 'won' FROM idemjob.complete_attempt($(aid k-running), '{\"ok\": true}')"
	check "$t: a revoked certification still refuses failover: IJ004" $t \
		"SELECT ij_check.sqlstate(\$\$SELECT idemjob.start_attempt($(jid k-pending o2), 'p3')\$\$) = 'IJ004'"
	check "$t: a spent key never starts a second job" $t \
		"SELECT ij_check.sqlstate(\$\$SELECT idemjob.submit('o1', 'k-spent-raw', 'pay', '{\"amount\": 13}', 'p1')\$\$) IN ('IJ001', 'IJ007')
		    AND NOT EXISTS (SELECT FROM idemjob.jobs WHERE idempotency_key = 'k-spent-raw')"
	check "$t: a routed job starts on its next provider (p2), not its own" $t \
		"SELECT provider = 'p2' AND attempt_no = 2 FROM idemjob.start_attempt($(jid k-routed))"
	check "$t: a leased attempt restored past its lease is never confirmed: IJ008" $t \
		"SELECT ij_check.sqlstate(\$\$SELECT idemjob.begin_attempt($(aid k-released 2))\$\$) = 'IJ008'
		    AND ij_check.sqlstate(\$\$SELECT idemjob.begin_attempt($(aid k-released 1))\$\$) = 'IJ008'"
	check "$t: ... and the sweeper's code releases it" $t "SELECT idemjob.expire_attempts() >= 1"
	check "$t: ... released, the job free again" $t \
		"SELECT a.state = 'released' AND j.state = 'pending'
		 FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id WHERE a.id = $(aid k-released 2)"
	if [ "${purged:-0}" -gt 0 ]; then
		check "$t: a purged key with the same request: IJ007" $t \
			"SELECT ij_check.sqlstate(\$\$SELECT idemjob.submit('o1', 'k-purged-1', 'ship', '{\"to\": \"Oslo\"}', 'p1')\$\$) = 'IJ007'"
	fi
done

echo
echo "dump: $passed checks passed, $failed failed"
if [ "$failed" -eq 0 ]; then
	qs -d postgres -c "DROP DATABASE IF EXISTS $src"
	for d in "${targets[@]}"; do q -d postgres -c "DROP DATABASE IF EXISTS $d"; done
	[ $created_role = 1 ] && q -d postgres -c "DROP ROLE IF EXISTS $role"
	exit 0
fi
echo "dump: databases $src ${targets[*]} kept for a look"
exit 1
