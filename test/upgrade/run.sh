#!/usr/bin/env bash
# test/upgrade/run.sh: ALTER EXTENSION idemjob UPDATE from the released 1.0.
#
#   bash test/upgrade/run.sh
#
# Needs a running cluster (PGHOST, PGPORT, PGUSER of a superuser, as
# test/lib.sh exports them) and write access to the installation of
# PG_CONFIG (default /usr/lib/postgresql/15/bin/pg_config), because it
#   1. builds the released 1.0 from git history (commit 620b54c, the last
#      change to src/ before the 1.1 work) and installs it: shared library,
#      sql/idemjob--1.0.sql and its control file (default_version 1.0);
#   2. creates databases with CREATE EXTENSION idemjob VERSION '1.0', fills
#      one through the 1.0 functions (test/upgrade/fill.sql: jobs, attempts
#      and races in every state, contracts, certifications, a revoked one)
#      and gives a role the grants the 1.0 README told DBAs to give;
#   3. installs this tree again (make install), checks that every 1.0
#      function refuses (55000, naming ALTER EXTENSION idemjob UPDATE) and
#      writes nothing until the update, then on new connections runs
#      ALTER EXTENSION idemjob UPDATE and checks: the control file's version, every 1.0 row
#      unchanged on the 1.0 columns, the new columns filled as the upgrade
#      script says, the role's table privileges taken back, and the upgraded
#      jobs behave (replay, in doubt, fenced late result);
#   4. runs the whole pg_regress suite on a database upgraded from 1.0, and
#      the isolation specs with their setup's CREATE EXTENSION replaced by
#      1.0 + ALTER EXTENSION UPDATE;
#   5. compares the catalog of the upgraded database with a fresh CREATE
#      EXTENSION idemjob (pg_dump --schema-only, also in --binary-upgrade
#      mode where every member object is written out, and \dx+ idemjob).
# This tree is installed again on exit, whatever happens.  It prints one
# line per check and a summary; exits non-zero if any check failed.

set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
: "${PG_CONFIG:=/usr/lib/postgresql/15/bin/pg_config}"
PG_BIN=$("$PG_CONFIG" --bindir)
pkglibdir=$("$PG_CONFIG" --pkglibdir)
sharedir=$("$PG_CONFIG" --sharedir)
pgxs_src=$(dirname "$(dirname "$("$PG_CONFIG" --pgxs)")")
release=${IJ_RELEASE_1_0:-620b54c}

db=ij_upgrade				# filled under 1.0, then updated
db_regress=ij_upgrade_regress	# 1.0, updated, then the whole suite
db_fresh=ij_upgrade_fresh	# CREATE EXTENSION idemjob (current)
app=ij_upgrade_app			# holds the 1.0 README's grants

passed=0
failed=0
old_installed=0
tmp=$(mktemp -d /tmp/idemjob-upgrade.XXXXXX)

source "$here/lib.sh"

# --- preflight
preflight "$release"

# --- 1. the released 1.0, built and installed
install_release "$release" 1.0
if cmp -s "$tmp/v1.0/idemjob.so" "$pkglibdir/idemjob.so" &&
	cmp -s "$tmp/v1.0/sql/idemjob--1.0.sql" "$sharedir/extension/idemjob--1.0.sql" &&
	cmp -s "$tmp/v1.0/idemjob.control" "$sharedir/extension/idemjob.control"; then
	ok "1.0 installed: its shared library, install script and control file"
else
	not_ok "1.0 installed: its shared library, install script and control file"
fi
if cmp -s "$tmp/v1.0/sql/idemjob--1.0.sql" "$repo/sql/idemjob--1.0.sql"; then
	ok "sql/idemjob--1.0.sql is the released script, unedited"
else
	not_ok "sql/idemjob--1.0.sql is the released script, unedited" \
		"$(diff "$tmp/v1.0/sql/idemjob--1.0.sql" "$repo/sql/idemjob--1.0.sql")"
fi

# --- 2. databases under 1.0
for d in $db $db_regress $db_fresh; do
	q -d postgres -c "DROP DATABASE IF EXISTS $d" 2>/dev/null || die "cannot drop $d"
done
q -d postgres -c "DROP ROLE IF EXISTS $app" -c "CREATE ROLE $app NOLOGIN" || die "cannot create role $app"
# a role whose name must be quoted, with the same grants: the released 1.0
# -> 1.1 script quoted it twice and failed; the update now goes 1.0 -> 1.2
# in one step (sql/idemjob--1.0--1.2.sql, built by the Makefile)
hy=ij-upgrade-app
q -d postgres -c "DROP ROLE IF EXISTS \"$hy\"" -c "CREATE ROLE \"$hy\" NOLOGIN" || die "cannot create role $hy"
grants_1_0="GRANT USAGE ON SCHEMA idemjob TO $app; GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA idemjob TO $app;"


q -d postgres -c "CREATE DATABASE $db TEMPLATE template0" &&
	q -d $db -c "CREATE EXTENSION idemjob VERSION '1.0'" &&
	q -d $db -f "$repo/test/upgrade/fill.sql" &&
	q -d $db -c "$grants_1_0" &&
	q -d $db -c "GRANT USAGE ON SCHEMA idemjob TO \"$hy\"; GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA idemjob TO \"$hy\"" &&
	q -d $db -f "$repo/test/upgrade/helpers.sql" &&
	q -d $db -c "SELECT ij_check.remember_columns()" -c "SELECT ij_check.snapshot('before')" >/dev/null ||
	die "could not fill a 1.0 database"
q -d postgres -c "CREATE DATABASE $db_regress TEMPLATE template0" &&
	regress_settings $db_regress &&
	q -d $db_regress -c "CREATE EXTENSION idemjob VERSION '1.0'" &&
	q -d $db_regress -c "$grants_1_0" || die "could not create $db_regress"

check "1.0: the extension is at version 1.0" $db \
	"SELECT extversion = '1.0' FROM pg_extension WHERE extname = 'idemjob'"
check "1.0: jobs in every state" $db \
	"SELECT array_agg(DISTINCT state ORDER BY state) = enum_range(NULL::idemjob.job_state) FROM idemjob.jobs"
check "1.0: attempts in every state" $db \
	"SELECT array_agg(DISTINCT state ORDER BY state) = enum_range(NULL::idemjob.attempt_state) FROM idemjob.attempts"
check "1.0: race_log rows of both reasons" $db \
	"SELECT array_agg(DISTINCT reason ORDER BY reason) = '{slot_taken,version_moved}' FROM idemjob.race_log"
check "1.0: contracts, certifications, one revoked" $db \
	"SELECT (SELECT count(*) FROM idemjob.contracts) = 2
	    AND (SELECT count(*) FROM idemjob.certifications) = 4
	    AND (SELECT count(*) FROM idemjob.certifications WHERE revoked_at IS NOT NULL) = 1"
check "1.0: the README's grants are in place" $db \
	"SELECT bool_and(has_table_privilege('$app', t, 'SELECT') AND has_table_privilege('$app', t, 'INSERT')
	    AND has_table_privilege('$app', t, 'UPDATE')) FROM ij_check.tables() t"

# --- 3. this tree, then ALTER EXTENSION UPDATE on new connections
echo "# installing this tree ($repo)"
install_tree || { cat "$tmp/make-current.log" >&2; die "this tree does not build or install"; }
old_installed=0
if cmp -s "$repo/idemjob.so" "$pkglibdir/idemjob.so"; then
	ok "this tree's shared library installed"
else
	not_ok "this tree's shared library installed"
fi

default_version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$repo/idemjob.control")

# Between the new package and the update: every 1.0 function the new
# library serves refuses, before it reads an argument (1.0's submit passes
# five, the library reads nine: 1.1's library answered "argument
# max_attempts must be at least 1"), with 55000 naming the update, and
# writes nothing
j1="(SELECT id FROM idemjob.jobs WHERE owner_id = 'o1' AND idempotency_key = 'k-pending')"
a1="(SELECT a.id FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id WHERE j.owner_id = 'o1' AND j.idempotency_key = 'k-indoubt' ORDER BY a.attempt_no DESC LIMIT 1)"
rows_before=$(q -d $db -c "SELECT (SELECT count(*) FROM idemjob.jobs) || '/' || (SELECT count(*) FROM idemjob.attempts)")
calls_1_0=(
	"SELECT * FROM idemjob.submit('o1', 'k-between', 'pay', '{}')"
	"SELECT * FROM idemjob.submit('o1', 'k-between', 'pay', '{}', 'p1')"
	"SELECT * FROM idemjob.cancel_job($j1, 'between')"
	"SELECT * FROM idemjob.start_attempt($j1)"
	"SELECT * FROM idemjob.start_attempt($j1, 'p1', '1 minute', 'w')"
	"SELECT * FROM idemjob.complete_attempt($a1, '{}')"
	"SELECT * FROM idemjob.fail_attempt($a1)"
	"SELECT * FROM idemjob.mark_unknown($a1)"
	"SELECT * FROM idemjob.cancel_attempt($a1, 'between', true)"
	"SELECT idemjob.expire_attempts()"
	"SELECT idemjob.define_contract('pay', '{}')"
	"SELECT * FROM idemjob.certify_provider('pay', 'p9')"
	"SELECT * FROM idemjob.revoke_provider('pay', 'p9', 'between')"
)
refused=0
for c in "${calls_1_0[@]}"; do
	out=$(q -d $db -c "$c" 2>&1)
	state=$(q -d $db -c "SELECT ij_check.sqlstate(\$\$$c\$\$)" 2>&1)
	if [ "$state" = 55000 ] &&
		grep -q "extension idemjob is installed at version 1.0, but its library is version $default_version" <<<"$out" &&
		grep -q "Run ALTER EXTENSION idemjob UPDATE in this database" <<<"$out"; then
		refused=$((refused + 1))
	else
		not_ok "the $default_version library refuses the 1.0 objects: $c" "$state: $out"
	fi
done
[ "$refused" = ${#calls_1_0[@]} ] &&
	ok "the $default_version library refuses every 1.0 function ($refused calls) with 55000 naming ALTER EXTENSION idemjob UPDATE, before reading an argument"
check "... and nothing was written" $db \
	"SELECT (SELECT count(*) FROM idemjob.jobs) || '/' || (SELECT count(*) FROM idemjob.attempts) = '$rows_before'"

if update_out=$(q -d $db -c "ALTER EXTENSION idemjob UPDATE" 2>&1); then
	ok "ALTER EXTENSION idemjob UPDATE on a filled 1.0 database"
else
	not_ok "ALTER EXTENSION idemjob UPDATE on a filled 1.0 database" "$update_out"
fi
if grep -q "role $app" <<<"$update_out"; then
	ok "the update names the role whose privileges it took back"
else
	not_ok "the update names the role whose privileges it took back" "$update_out"
fi
check "the extension is at version $default_version (the control file's)" $db \
	"SELECT extversion = '$default_version' FROM pg_extension WHERE extname = 'idemjob'"

q -d $db -c "SELECT ij_check.snapshot('after')" >/dev/null || not_ok "snapshot after the update"
check "every 1.0 row unchanged on the 1.0 columns (jobs, attempts, race_log, contracts, certifications)" $db \
	"SELECT (SELECT count(*) FROM ij_check.rows WHERE tag = 'before') > 20
	    AND NOT EXISTS ((SELECT tab, r FROM ij_check.rows WHERE tag = 'before'
	                     EXCEPT ALL SELECT tab, r FROM ij_check.rows WHERE tag = 'after')
	                    UNION ALL
	                    (SELECT tab, r FROM ij_check.rows WHERE tag = 'after'
	                     EXCEPT ALL SELECT tab, r FROM ij_check.rows WHERE tag = 'before'))"
check "row counts per table unchanged" $db \
	"SELECT bool_and(b.n = a.n) AND count(*) = 5
	 FROM (SELECT tab, count(*) n FROM ij_check.rows WHERE tag = 'before' GROUP BY tab) b
	 JOIN (SELECT tab, count(*) n FROM ij_check.rows WHERE tag = 'after' GROUP BY tab) a USING (tab)"
check "jobs.run_at = created_at; priority 0, max_attempts NULL; error of failed jobs from the attempt that ended them" $db \
	"SELECT count(*) FILTER (WHERE state = 'failed' AND error IS NOT NULL) > 0
	    AND bool_and(run_at = created_at AND priority = 0 AND max_attempts IS NULL)
	    AND bool_and(CASE WHEN state = 'failed'
	                 THEN error IS NOT DISTINCT FROM (SELECT a.error FROM idemjob.attempts a
	                       WHERE a.job_id = j.id AND a.state = 'failed' ORDER BY a.attempt_no DESC LIMIT 1)
	                 ELSE error IS NULL END)
	 FROM idemjob.jobs j"
check "attempts.unknown_at set for unknown attempts (deadline, else start), NULL for the others" $db \
	"SELECT count(*) FILTER (WHERE state = 'unknown') > 0
	    AND bool_and(CASE WHEN state = 'unknown' THEN unknown_at = coalesce(deadline, started_at)
	                 ELSE unknown_at IS NULL END)
	    AND bool_and(dropped_result IS NULL) FROM idemjob.attempts"
check "race_log.provider = the loser attempt's provider (p2 for the failover loser)" $db \
	"SELECT count(*) = 2 AND bool_and(r.provider = a.provider)
	    AND bool_or(r.reason = 'slot_taken' AND r.provider = 'p2')
	 FROM idemjob.race_log r JOIN idemjob.attempts a ON a.id = r.attempt_id"
check "1.2: race_log.intent, idempotency_key and winner_provider filled from the job and the winner; no dropped_result (1.0 kept none)" $db \
	"SELECT count(*) = 2 AND bool_and(r.intent = j.intent AND r.idempotency_key = j.idempotency_key
	        AND r.winner_provider IS NOT DISTINCT FROM w.provider AND r.dropped_result IS NULL)
	    AND bool_or(r.winner_provider IS NOT NULL)
	 FROM idemjob.race_log r JOIN idemjob.jobs j ON j.id = r.job_id
	    LEFT JOIN idemjob.attempts w ON w.id = r.winner_attempt_id"
check "race_log has no foreign key to jobs any more" $db \
	"SELECT NOT EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'idemjob.race_log'::regclass AND contype = 'f')"
check "spent_keys, capabilities, owner_bindings, retry_policies and routes exist, empty, dumped with the extension" $db \
	"SELECT (SELECT count(*) FROM idemjob.spent_keys) = 0 AND (SELECT count(*) FROM idemjob.capabilities) = 0
	    AND (SELECT count(*) FROM idemjob.owner_bindings) = 0 AND (SELECT count(*) FROM idemjob.retry_policies) = 0
	    AND (SELECT count(*) FROM idemjob.routes) = 0
	    AND (SELECT count(*) FROM ij_check.tables()) = 10"
check "a role named \"$hy\" (quoted) lost every table privilege too" $db \
	"SELECT count(*) = 10 AND NOT bool_or(has_table_privilege('$hy', t, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER'))
	 FROM ij_check.tables() t"
check "the 1.0 README's role lost every table privilege" $db \
	"SELECT count(*) = 10 AND NOT bool_or(has_table_privilege('$app', t, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER'))
	 FROM ij_check.tables() t"
# (pure functions that read no table: validate(), uuid_v7() and, since 1.2,
# the owner hash's functions; the owner hash type's own support functions
# are PostgreSQL's int4 ones and not counted)
check "the 1.0 README's role can call no function but validate(), uuid_v7() and the owner hash's" $db \
	"SELECT array_agg(p.proname::text ORDER BY p.proname) = '{owner_hash,owner_hash,owner_hash_id,uuid_v7,uuid_v7,validate}'
	 FROM pg_proc p WHERE p.pronamespace = 'idemjob'::regnamespace
	    AND has_function_privilege('$app', p.oid, 'EXECUTE')
	    AND NOT EXISTS (SELECT FROM pg_type t WHERE p.oid IN (t.typinput, t.typoutput, t.typreceive, t.typsend))
	      AND NOT EXISTS (SELECT FROM pg_operator o WHERE o.oprcode = p.oid)
	      AND NOT EXISTS (SELECT FROM pg_amproc m WHERE m.amproc = p.oid)"
check "... and gets 42501 reading a table" $db \
	"SET ROLE $app; SELECT ij_check.sqlstate('SELECT count(*) FROM idemjob.jobs') = '42501'"
check "nothing on the tables, views or functions for PUBLIC but validate(), uuid_v7() and the owner hash's" $db \
	"SELECT NOT EXISTS (SELECT FROM pg_class c, aclexplode(c.relacl) a
	                    WHERE c.relnamespace = 'idemjob'::regnamespace AND a.grantee = 0)
	    AND (SELECT array_agg(proname::text ORDER BY proname) FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f'::\"char\", p.proowner))) a
	         WHERE p.pronamespace = 'idemjob'::regnamespace AND a.grantee = 0
	           AND NOT EXISTS (SELECT FROM pg_type t WHERE p.oid IN (t.typinput, t.typoutput, t.typreceive, t.typsend))
	      AND NOT EXISTS (SELECT FROM pg_operator o WHERE o.oprcode = p.oid)
	      AND NOT EXISTS (SELECT FROM pg_amproc m WHERE m.amproc = p.oid)) = '{owner_hash,owner_hash,owner_hash_id,uuid_v7,uuid_v7,validate}'"

# behaviour of the upgraded rows
jid() { echo "(SELECT id FROM idemjob.jobs WHERE owner_id = '${2:-o1}' AND idempotency_key = '$1')"; }
aid() { echo "(SELECT id FROM idemjob.attempts WHERE job_id = $(jid "$1") AND attempt_no = ${2:-1})"; }
check "replay of a succeeded 1.0 job: created = false, same job, its result" $db \
	"SELECT NOT created AND job_id = $(jid k-succeeded) AND state = 'succeeded' AND version = 1
	    AND result = '{\"ok\": true, \"ref\": \"r-4\"}'
	 FROM idemjob.submit('o1', 'k-succeeded', 'pay', '{\"amount\": 4}', 'p1')"
check "replay of a pending 1.0 job: created = false" $db \
	"SELECT NOT created AND job_id = $(jid k-pending) AND state = 'pending'
	 FROM idemjob.submit('o1', 'k-pending', 'pay', '{\"amount\": 1}', 'p1')"
check "a 1.0 key reused with other params: IJ001" $db \
	"SELECT ij_check.sqlstate(\$\$SELECT idemjob.submit('o1', 'k-succeeded', 'pay', '{\"amount\": 5}', 'p1')\$\$) = 'IJ001'"
check "a 1.0 attempt in doubt still blocks: IJ002" $db \
	"SELECT ij_check.sqlstate(\$\$SELECT idemjob.start_attempt($(jid k-indoubt))\$\$) = 'IJ002'"
check "... and its worker gets it back (I7)" $db \
	"SELECT id = $(aid k-indoubt) AND state = 'unknown' FROM idemjob.start_attempt($(jid k-indoubt), NULL, NULL, 'w1')"
check "a 1.0 running attempt still blocks: IJ002" $db \
	"SELECT ij_check.sqlstate(\$\$SELECT idemjob.start_attempt($(jid k-running))\$\$) = 'IJ002'"
check "a finished 1.0 job refuses attempts: IJ003" $db \
	"SELECT ij_check.sqlstate(\$\$SELECT idemjob.start_attempt($(jid k-failed))\$\$) = 'IJ003'"
check "a fenced 1.0 attempt's late result loses (version_moved, provider logged)" $db \
	"SELECT outcome = 'lost' AND winner_attempt_id IS NULL AND job_version = 1
	 FROM idemjob.complete_attempt($(aid k-fenced-open), '{\"ok\": true}')"
check "... one race_log row for it: version_moved, provider p1" $db \
	"SELECT count(*) = 1 AND bool_and(reason = 'version_moved' AND provider = 'p1' AND expected_version = 0 AND found_version = 1)
	 FROM idemjob.race_log WHERE attempt_id = $(aid k-fenced-open)"
check "the late result of a cancelled 1.0 job's attempt loses" $db \
	"SELECT outcome = 'lost' FROM idemjob.complete_attempt($(aid k-cancelled), '{\"ok\": true}')"
check "the fenced job is pending and starts at version 1" $db \
	"SELECT state = 'started' AND attempt_no = 2 AND read_version = 1
	 FROM idemjob.start_attempt($(jid k-fenced-open))"
check "a pending 1.0 job can be started" $db \
	"SELECT state = 'started' AND attempt_no = 1 AND read_version = 0
	 FROM idemjob.start_attempt($(jid k-pending))"
check "a running 1.0 attempt completes and wins" $db \
	"SELECT outcome = 'won' AND job_version = 1 FROM idemjob.complete_attempt($(aid k-running), '{\"ok\": true}')"
check "the contract of 1.0 still applies: a violating result is rejected" $db \
	"SELECT outcome = 'rejected' FROM idemjob.complete_attempt($(aid k-pending), '{\"ok\": 1}')"
check "a 1.0 certification still allows failover; the revoked one does not (IJ004)" $db \
	"SELECT ij_check.sqlstate(\$\$SELECT idemjob.start_attempt($(jid k-pending o2), 'p3')\$\$) = 'IJ004'
	    AND (SELECT provider = 'p2' FROM idemjob.start_attempt($(jid k-pending o2), 'p2'))"

# --- 4. the whole suite on a database upgraded from 1.0
if out=$(q -d $db_regress -c "ALTER EXTENSION idemjob UPDATE" 2>&1) &&
	[ "$(q -d $db_regress -c "SELECT extversion FROM pg_extension WHERE extname = 'idemjob'")" = "$default_version" ]; then
	ok "$db_regress updated from 1.0"
else
	not_ok "$db_regress updated from 1.0" "$out"
fi

conn_opts=()
[ -n "${PGHOST:-}" ] && conn_opts+=(--host="$PGHOST")
[ -n "${PGPORT:-}" ] && conn_opts+=(--port="$PGPORT")
[ -n "${PGUSER:-}" ] && conn_opts+=(--user="$PGUSER")

mapfile -t regress_tests < <(regress_test_names)
mkdir -p "$tmp/regress"
if "$pgxs_src/test/regress/pg_regress" --inputdir="$repo" --outputdir="$tmp/regress" \
	--bindir="$PG_BIN" "${conn_opts[@]}" --use-existing --dbname=$db_regress \
	"${regress_tests[@]}" >"$tmp/regress/log" 2>&1; then
	ok "pg_regress suite (${#regress_tests[@]} tests) on $db_regress, upgraded from 1.0"
else
	# the same tests on a fresh CREATE EXTENSION tell what the upgrade broke
	q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS ${db_fresh}_regress" -c "CREATE DATABASE ${db_fresh}_regress TEMPLATE template0" &&
		regress_settings ${db_fresh}_regress && q -d ${db_fresh}_regress -c "CREATE EXTENSION idemjob"
	mkdir -p "$tmp/regress-fresh"
	"$pgxs_src/test/regress/pg_regress" --inputdir="$repo" --outputdir="$tmp/regress-fresh" \
		--bindir="$PG_BIN" "${conn_opts[@]}" --use-existing --dbname=${db_fresh}_regress \
		"${regress_tests[@]}" >"$tmp/regress-fresh/log" 2>&1
	q -d postgres -c "DROP DATABASE IF EXISTS ${db_fresh}_regress"
	failing() { grep -E '\.\.\. FAILED' "$1" | sed -E 's/^(not ok [0-9]+ +- +|test +| +)//; s/ .*//' | sort | xargs; }
	up_failed=$(failing "$tmp/regress/log")
	fresh_failed=$(failing "$tmp/regress-fresh/log")
	not_ok "pg_regress suite (${#regress_tests[@]} tests) on $db_regress, upgraded from 1.0" \
		"$(printf 'failed after the upgrade: %s\nfailed on a fresh CREATE EXTENSION: %s\n' "${up_failed:-none}" "${fresh_failed:-none}"
		   body() { grep -v -E '^(diff |--- |\+\+\+ )' "$1" 2>/dev/null | sed -E 's/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/UUID/g'; }
		   [ "$(body "$tmp/regress-fresh/regression.diffs")" = "$(body "$tmp/regress/regression.diffs")" ] &&
			echo "(the same diffs, but for ids: not the upgrade's doing)"
		   head -60 "$tmp/regress/regression.diffs" 2>/dev/null)"
fi

# isolation: each spec's setup drops and creates the extension; make that
# CREATE EXTENSION ... VERSION '1.0' + ALTER EXTENSION UPDATE
mkdir -p "$tmp/iso/specs" "$tmp/iso/out"
cp -r "$repo/test/isolation/expected" "$tmp/iso/expected"
mapfile -t specs < <(cd "$repo/test/isolation/specs" && ls *.spec | sed 's/\.spec$//' | sort)
rewritten=0
for s in "${specs[@]}"; do
	sed -E "s/CREATE EXTENSION (IF NOT EXISTS )?idemjob;/CREATE EXTENSION \1idemjob VERSION '1.0'; ALTER EXTENSION idemjob UPDATE;/I" \
		"$repo/test/isolation/specs/$s.spec" >"$tmp/iso/specs/$s.spec"
	cmp -s "$repo/test/isolation/specs/$s.spec" "$tmp/iso/specs/$s.spec" || rewritten=$((rewritten + 1))
done
if "$pgxs_src/test/isolation/pg_isolation_regress" --inputdir="$tmp/iso" --outputdir="$tmp/iso/out" \
	--bindir="$PG_BIN" "${conn_opts[@]}" --use-existing --dbname=$db_regress \
	"${specs[@]}" >"$tmp/iso/log" 2>&1; then
	ok "isolation specs (${#specs[@]}, $rewritten set up as 1.0 + UPDATE) on $db_regress"
else
	not_ok "isolation specs (${#specs[@]}, $rewritten set up as 1.0 + UPDATE) on $db_regress" \
		"$(grep -iv ' ok ' "$tmp/iso/log"; head -60 "$tmp/iso/out/regression.diffs" 2>/dev/null)"
fi

# --- 5. catalog: upgraded = fresh
q -d postgres -c "CREATE DATABASE $db_fresh TEMPLATE template0" &&
	q -d $db_fresh -c "CREATE EXTENSION idemjob" || not_ok "CREATE EXTENSION idemjob in a fresh database"

for mode in "" --binary-upgrade; do
	d=
	what="pg_dump --schema-only${mode:+ $mode}: upgraded = fresh"
	"$PG_BIN/pg_dump" --schema-only $mode -N ij_check $db 2>&1 | normalize >"$tmp/upgraded${mode}.sql"
	"$PG_BIN/pg_dump" --schema-only $mode $db_fresh 2>&1 | normalize >"$tmp/fresh${mode}.sql"
	if [ -s "$tmp/fresh${mode}.sql" ] && d=$(diff -u "$tmp/fresh${mode}.sql" "$tmp/upgraded${mode}.sql"); then
		ok "$what ($(grep -c -E '^(CREATE|ALTER|GRANT|REVOKE|SELECT)' "$tmp/fresh${mode}.sql") statements)"
	else
		not_ok "$what" "$d"
	fi
done
# effective privileges on every member object and the schema, whoever holds them
acl_sql="SELECT o.what, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END,
		a.privilege_type, a.is_grantable
	FROM (SELECT pg_describe_object('pg_class'::regclass, c.oid, 0) AS what,
				 coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::\"char\", c.relowner)) AS acl
		  FROM pg_class c WHERE c.relnamespace = 'idemjob'::regnamespace
		  UNION ALL
		  SELECT pg_describe_object('pg_proc'::regclass, p.oid, 0), coalesce(p.proacl, acldefault('f'::\"char\", p.proowner))
		  FROM pg_proc p WHERE p.pronamespace = 'idemjob'::regnamespace
		  UNION ALL
		  SELECT pg_describe_object('pg_type'::regclass, t.oid, 0), coalesce(t.typacl, acldefault('T'::\"char\", t.typowner))
		  FROM pg_type t WHERE t.typnamespace = 'idemjob'::regnamespace
		  UNION ALL
		  SELECT 'schema idemjob', coalesce(n.nspacl, acldefault('n'::\"char\", n.nspowner))
		  FROM pg_namespace n WHERE n.nspname = 'idemjob') o,
		aclexplode(o.acl) a
	WHERE a.grantee <> '$app'::regrole
	ORDER BY 1, 2, 3, 4"
q -d $db -c "$acl_sql" >"$tmp/acl-upgraded" 2>&1
q -d $db_fresh -c "$acl_sql" >"$tmp/acl-fresh" 2>&1
if [ "$(grep -c . "$tmp/acl-fresh")" -gt 40 ] && d=$(diff -u "$tmp/acl-fresh" "$tmp/acl-upgraded"); then
	ok "effective privileges on every object of the schema: upgraded = fresh ($(grep -c . "$tmp/acl-fresh") grants)"
else
	not_ok "effective privileges on every object of the schema: upgraded = fresh" "$d"
fi

d=
"$PG_BIN/psql" -X -d $db -c '\dx+ idemjob' >"$tmp/dx-upgraded" 2>&1
"$PG_BIN/psql" -X -d $db_fresh -c '\dx+ idemjob' >"$tmp/dx-fresh" 2>&1
if [ "$(grep -c . "$tmp/dx-fresh")" -gt 40 ] && d=$(diff -u "$tmp/dx-fresh" "$tmp/dx-upgraded"); then
	ok "\\dx+ idemjob: the same $(grep -c -E '^ (function|table|type|view|index|trigger|sequence)' "$tmp/dx-fresh") member objects"
else
	not_ok "\\dx+ idemjob: the same member objects" "$d"
fi

echo
echo "upgrade: $passed checks passed, $failed failed"
if [ "$failed" -eq 0 ]; then
	for d in $db $db_regress $db_fresh; do q -d postgres -c "DROP DATABASE IF EXISTS $d"; done
	q -d postgres -c "DROP ROLE IF EXISTS $app" -c "DROP ROLE IF EXISTS \"$hy\""
	exit 0
fi
echo "upgrade: databases $db, $db_regress and $db_fresh kept for a look"
exit 1
