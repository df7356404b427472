#!/usr/bin/env bash
# test/upgrade/from_1_1.sh: ALTER EXTENSION idemjob UPDATE from the released
# 1.1, and a fresh install, with the rights a DBA may have left around.
#
#   bash test/upgrade/from_1_1.sh
#
# Needs what test/upgrade/run.sh needs (a running cluster, PGUSER a
# superuser, write access to PG_CONFIG's installation).  It
#   1. builds the released 1.1 from git history (commit 1613263, the last
#      change before the 1.2 work) and installs it;
#   2. in a database where the installing role has default privileges for a
#      role named with a hyphen ("ij-up-app": SELECT on tables, EXECUTE on
#      functions), creates idemjob 1.1, fills it (test/dump/fill.sql: every
#      state, races, contracts, certifications, spent keys), gives that role
#      a column grant on jobs.params, and gives "ij-up-client" the client
#      capability;
#   3. installs this tree and checks that the library refuses the 1.1
#      objects until they are updated (55000, naming both versions), runs
#      ALTER EXTENSION idemjob UPDATE, and checks: the control file's
#      version, every 1.1 row unchanged on the 1.1 columns, "ij-up-app"
#      holding nothing (no table, column or function privilege but
#      validate(), uuid_v7() and the owner hash's), "ij-up-client" keeping exactly its
#      capability's rights, and the jobs behaving; and the same update,
#      of a database filled the same way, into the partitioned layout
#      (idemjob.partitions = 4 in the updating session): every row kept,
#      in its partition, purged keys still refused;
#   4. creates idemjob fresh under the same default privileges: nothing for
#      "ij-up-app"; and in a database where another role made schema
#      idemjob first, CREATE EXTENSION refuses (42501);
#   5. runs the whole pg_regress suite on a database updated from 1.1.
# This tree is installed again on exit, whatever happens.

set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
: "${PG_CONFIG:=/usr/lib/postgresql/15/bin/pg_config}"
PG_BIN=$("$PG_CONFIG" --bindir)
release=${IJ_RELEASE_1_1:-1613263}
label=from-1.1

db=ij_up11				# filled under 1.1, then updated
db_regress=ij_up11_regress	# 1.1, updated, then the whole suite
db_fresh=ij_up11_fresh		# CREATE EXTENSION (current) under default privileges
db_squat=ij_up11_squat		# schema idemjob made first by another role
db_part=ij_up11_part		# filled under 1.1, updated into the partitioned layout
app=ij-up-app
client=ij-up-client

passed=0
failed=0
old_installed=0
tmp=$(mktemp -d /tmp/idemjob-up11.XXXXXX)
source "$here/lib.sh"

preflight "$release"
install_release "$release" 1.1

for d in $db $db_regress $db_fresh $db_squat $db_part; do
	q -d postgres -c "DROP DATABASE IF EXISTS $d" 2>/dev/null || die "cannot drop $d"
done
for r in "$app" "$client" ij_up_squatter; do
	q -d postgres -c "DROP ROLE IF EXISTS \"$r\"" || die "cannot drop role $r"
	q -d postgres -c "CREATE ROLE \"$r\" NOLOGIN" || die "cannot create role $r"
done
# a decoy whose name is the other's quoted name: 1.0 -> 1.1 revoked from it
q -d postgres -c "DROP ROLE IF EXISTS \"\"\"$app\"\"\"" -c "CREATE ROLE \"\"\"$app\"\"\" NOLOGIN" || die "cannot create the decoy role"
# test/dump/fill.sql gives app_client a capability
[ "$(q -d postgres -c "SELECT count(*) FROM pg_roles WHERE rolname = 'app_client'")" = 1 ] ||
	q -d postgres -c "CREATE ROLE app_client NOLOGIN" || die "cannot create role app_client"

defaults="ALTER DEFAULT PRIVILEGES GRANT SELECT, INSERT, UPDATE ON TABLES TO \"$app\";
	ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO \"$app\";
	ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO \"$app\";"
for d in $db $db_regress $db_part; do
	q -d postgres -c "CREATE DATABASE $d TEMPLATE template0" &&
		q -d $d -c "$defaults" -c "CREATE EXTENSION idemjob" 2>/dev/null || die "could not create $d under 1.1"
done
regress_settings $db_regress
q -d $db -f "$repo/test/upgrade/helpers.sql" >/dev/null &&
	q -d $db -f "$repo/test/dump/fill.sql" >/dev/null &&
	q -d $db -c "GRANT SELECT (params, owner_id) ON idemjob.jobs TO \"$app\"" \
		-c "SELECT idemjob.grant_capability('\"$client\"', 'client')" >/dev/null &&
	q -d $db -c "SELECT ij_check.remember_columns()" -c "SELECT ij_check.snapshot('before')" >/dev/null ||
	die "could not fill $db"
q -d $db_part -f "$repo/test/upgrade/helpers.sql" >/dev/null &&
	q -d $db_part -f "$repo/test/dump/fill.sql" >/dev/null &&
	q -d $db_part -c "SELECT ij_check.remember_columns()" -c "SELECT ij_check.snapshot('before')" >/dev/null ||
	die "could not fill $db_part"
check "1.1: the extension is at version 1.1" $db \
	"SELECT extversion = '1.1' FROM pg_extension WHERE extname = 'idemjob'"
check "1.1: $app reads every tenant's params (a column grant, or what 1.0 -> 1.1 left of the default privileges)" $db \
	"SELECT has_column_privilege('$app', 'idemjob.jobs', 'params', 'SELECT')"

# --- this tree
echo "# installing this tree ($repo)"
install_tree || { cat "$tmp/make-current.log" >&2; die "this tree does not build or install"; }
old_installed=0
default_version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$repo/idemjob.control")

out=$(q -d $db -c "SELECT idemjob.job('00000000-0000-0000-0000-000000000000')" 2>&1)
if grep -q "extension idemjob is installed at version 1.1, but its library is version $default_version" <<<"$out"; then
	ok "the $default_version library refuses the 1.1 objects until they are updated"
else
	not_ok "the $default_version library refuses the 1.1 objects until they are updated" "$out"
fi
check "... with SQLSTATE 55000" $db \
	"SELECT ij_check.sqlstate(\$\$SELECT idemjob.job('00000000-0000-0000-0000-000000000000')\$\$) = '55000'"

# every kind of entry point refuses before it reads an argument
refused=0
calls_1_1=(
	"SELECT * FROM idemjob.submit('o1', 'k-between', 'pay', '{}')"
	"SELECT * FROM idemjob.claim('w')"
	"SELECT idemjob.expire_attempts()"
	"SELECT idemjob.purge('30 days')"
	"SELECT idemjob.purge_race_log('30 days')"
	"SELECT idemjob.grant_capability('app_client', 'client')"
)
for c in "${calls_1_1[@]}"; do
	out=$(q -d $db -c "$c" 2>&1)
	if grep -q "extension idemjob is installed at version 1.1, but its library is version $default_version" <<<"$out"; then
		refused=$((refused + 1))
	else
		not_ok "the $default_version library refuses the 1.1 objects: $c" "$out"
	fi
done
[ "$refused" = ${#calls_1_1[@]} ] && ok "... submit, claim, expire_attempts, purge, purge_race_log, grant_capability too"

if out=$(q -d $db -c "ALTER EXTENSION idemjob UPDATE" 2>&1); then
	ok "ALTER EXTENSION idemjob UPDATE on a filled 1.1 database"
else
	not_ok "ALTER EXTENSION idemjob UPDATE on a filled 1.1 database" "$out"
fi
check "the extension is at version $default_version (the control file's)" $db \
	"SELECT extversion = '$default_version' FROM pg_extension WHERE extname = 'idemjob'"
q -d $db -c "SELECT ij_check.snapshot('after')" >/dev/null || not_ok "snapshot after the update"
# the snapshots 'before' and 'after' hold the same rows, of all 7 tables
unchanged="SELECT (SELECT count(DISTINCT tab) FROM ij_check.rows WHERE tag = 'before') = 7
	    AND NOT EXISTS ((SELECT tab, r FROM ij_check.rows WHERE tag = 'before'
	                     EXCEPT ALL SELECT tab, r FROM ij_check.rows WHERE tag = 'after')
	                    UNION ALL
	                    (SELECT tab, r FROM ij_check.rows WHERE tag = 'after'
	                     EXCEPT ALL SELECT tab, r FROM ij_check.rows WHERE tag = 'before'))"
check "every 1.1 row unchanged on the 1.1 columns, in all 7 tables" $db "$unchanged"
# the same update into the partitioned layout (docs/scaling.md): the
# setting in the updating session; every row moves to its partition
if out=$(PGOPTIONS="-c idemjob.partitions=4" q -d $db_part -c "ALTER EXTENSION idemjob UPDATE" 2>&1); then
	ok "ALTER EXTENSION idemjob UPDATE with idemjob.partitions = 4 on a filled 1.1 database"
else
	not_ok "ALTER EXTENSION idemjob UPDATE with idemjob.partitions = 4 on a filled 1.1 database" "$out"
fi
q -d $db_part -c "SELECT ij_check.snapshot('after')" >/dev/null || not_ok "snapshot after the partitioning update"
check "... jobs, attempts, race_log, spent_keys partitioned by owner_hash into 4, the rows in them" $db_part \
	"SELECT bool_and(c.relkind = 'p' AND pg_get_partkeydef(c.oid) = 'HASH (owner_hash)'
	                 AND (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid) = 4)
	    AND (SELECT count(*) FROM idemjob.jobs) > 0
	 FROM pg_class c WHERE c.oid IN ('idemjob.jobs'::regclass, 'idemjob.attempts'::regclass,
	                                 'idemjob.race_log'::regclass, 'idemjob.spent_keys'::regclass)"
check "... every 1.1 row unchanged on the 1.1 columns, in all 7 tables" $db_part "$unchanged"
check "... a purged key is refused (IJ007), a replay answers created = false" $db_part \
	"SELECT ij_check.sqlstate(\$\$SELECT idemjob.submit('o1', 'k-purged-1', 'ship', '{\"to\": \"Oslo\"}', 'p1')\$\$) = 'IJ007'
	    AND NOT (SELECT created FROM idemjob.submit('o1', 'k-scheduled', 'pay', '{\"amount\": 11}', 'p1'))"
# a 1.1 id carries no owner hash: the routed statements find nothing where
# it points, and the calls read the row's own hash instead
check "... a 1.1 job by its id: started, its attempt's result wins, job() reads it, cancel_job refuses it (IJ003)" $db_part \
	"SELECT (SELECT outcome FROM idemjob.complete_attempt(
	            (SELECT id FROM idemjob.start_attempt((SELECT id FROM idemjob.jobs WHERE idempotency_key = 'k-scheduled'))),
	            '{\"ok\": true}')) = 'won'
	    AND (SELECT state FROM idemjob.job((SELECT id FROM idemjob.jobs WHERE idempotency_key = 'k-scheduled'))) = 'succeeded'
	    AND ij_check.sqlstate(\$\$SELECT idemjob.cancel_job((SELECT id FROM idemjob.jobs WHERE idempotency_key = 'k-scheduled'), 'x')\$\$) = 'IJ003'"
check "1.2: the 1.1 race-log rows got intent and key from their jobs, the winner's provider, and the payload an attempt kept" $db \
	"SELECT count(*) >= 3 AND bool_and(r.intent = j.intent AND r.idempotency_key = j.idempotency_key
	        AND r.winner_provider IS NOT DISTINCT FROM w.provider
	        AND r.dropped_result IS NOT DISTINCT FROM a.dropped_result)
	    AND count(*) FILTER (WHERE r.dropped_result IS NOT NULL) = 1
	    AND NOT bool_or(r.reason = 'rejected')
	 FROM idemjob.race_log r JOIN idemjob.jobs j ON j.id = r.job_id
	    JOIN idemjob.attempts a ON a.id = r.attempt_id
	    LEFT JOIN idemjob.attempts w ON w.id = r.winner_attempt_id"
nothing_for() {	# nothing_for ROLE: no privilege on anything of the schema
	echo "SELECT NOT EXISTS (SELECT FROM pg_class c WHERE c.relnamespace = 'idemjob'::regnamespace
	                         AND has_table_privilege('$1', c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER'))
	    AND NOT EXISTS (SELECT FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
	                    WHERE c.relnamespace = 'idemjob'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
	                      AND has_column_privilege('$1', c.oid, a.attnum, 'SELECT, INSERT, UPDATE, REFERENCES'))
	    AND (SELECT array_agg(p.proname::text ORDER BY p.proname) FROM pg_proc p
	         WHERE p.pronamespace = 'idemjob'::regnamespace AND has_function_privilege('$1', p.oid, 'EXECUTE')
	           AND NOT EXISTS (SELECT FROM pg_type t WHERE p.oid IN (t.typinput, t.typoutput, t.typreceive, t.typsend))
	      AND NOT EXISTS (SELECT FROM pg_operator o WHERE o.oprcode = p.oid)
	      AND NOT EXISTS (SELECT FROM pg_amproc m WHERE m.amproc = p.oid))
	        = '{owner_hash,owner_hash,owner_hash_id,uuid_v7,uuid_v7,validate}'
	    AND NOT has_schema_privilege('$1', 'idemjob', 'USAGE, CREATE')"
}
check "$app (a hyphenated name) lost its default, table and column privileges" $db "$(nothing_for "$app")"
check "... and so did the role named \"$app\", quotes included" $db "$(nothing_for "\"$app\"")"
check "$client keeps exactly the client capability's rights" $db \
	"SELECT has_function_privilege('$client', 'idemjob.submit(text, text, text, jsonb, text, timestamptz, int4, int4)', 'EXECUTE')
	    AND has_function_privilege('$client', 'idemjob.await_job(uuid, interval)', 'EXECUTE')
	    AND NOT has_function_privilege('$client', 'idemjob.start_attempt(uuid, text, interval, text)', 'EXECUTE')
	    AND NOT has_table_privilege('$client', 'idemjob.jobs', 'SELECT')"
check "a replay of a 1.1 job answers created = false with its result" $db \
	"SELECT NOT created AND state = 'succeeded' FROM idemjob.submit('o1', 'k-succeeded', 'pay', '{\"amount\": 4}', 'p1')"
check "a 1.1 attempt in doubt still blocks: IJ002" $db \
	"SELECT ij_check.sqlstate(\$\$SELECT idemjob.start_attempt((SELECT id FROM idemjob.jobs WHERE owner_id = 'o1' AND idempotency_key = 'k-indoubt'))\$\$) = 'IJ002'"

# --- fresh installs (without the decoy: the released 1.0 -> 1.1 script,
# which a new install no longer runs, failed on "ij-up-app" then)
q -d postgres -c "DROP ROLE \"\"\"$app\"\"\"" >/dev/null || not_ok "drop the decoy role"
q -d postgres -c "CREATE DATABASE $db_fresh TEMPLATE template0" &&
	q -d $db_fresh -c "$defaults" -c "CREATE EXTENSION idemjob" || not_ok "CREATE EXTENSION under default privileges"
check "a fresh install under the installer's default privileges: nothing for $app" $db_fresh "$(nothing_for "$app")"
# the same capabilities as the updated database, granted after the install
q -d $db_fresh -c "SELECT idemjob.grant_capability('app_client', 'client'), idemjob.grant_capability('\"$client\"', 'client')" >/dev/null ||
	not_ok "grant the capabilities in $db_fresh"
q -d postgres -c "CREATE DATABASE $db_squat TEMPLATE template0" >/dev/null &&
	q -d $db_squat -c "GRANT CREATE ON DATABASE $db_squat TO ij_up_squatter" \
		-c "SET ROLE ij_up_squatter" -c "CREATE SCHEMA idemjob" >/dev/null || not_ok "a role makes schema idemjob first"
out=$(q -d $db_squat -c "CREATE EXTENSION idemjob" 2>&1)
if grep -q "schema idemjob is owned by role ij_up_squatter" <<<"$out" &&
	[ "$(q -d $db_squat -c "SELECT count(*) FROM pg_extension WHERE extname = 'idemjob'")" = 0 ]; then
	ok "CREATE EXTENSION refuses a schema idemjob another role made first"
else
	not_ok "CREATE EXTENSION refuses a schema idemjob another role made first" "$out"
fi

# the objects of an update from 1.1 are those of a new install (which runs
# 1.0 and the 1.0 -> 1.2 script): the schema as pg_dump writes it, and the
# members of the extension
for mode in "" --binary-upgrade; do
	"$PG_BIN/pg_dump" --schema-only $mode -N ij_check $db 2>&1 | normalize >"$tmp/schema-updated$mode.sql"
	"$PG_BIN/pg_dump" --schema-only $mode $db_fresh 2>&1 | normalize >"$tmp/schema-fresh$mode.sql"
	if [ -s "$tmp/schema-fresh$mode.sql" ] &&
		d=$(diff -u "$tmp/schema-fresh$mode.sql" "$tmp/schema-updated$mode.sql"); then
		ok "pg_dump --schema-only${mode:+ $mode}: updated from 1.1 = new install ($(grep -c -E '^(CREATE|ALTER|GRANT|REVOKE|SELECT)' "$tmp/schema-fresh$mode.sql") statements)"
	else
		not_ok "pg_dump --schema-only${mode:+ $mode}: updated from 1.1 = new install" "$d"
	fi
done
"$PG_BIN/psql" -X -d $db -c '\dx+ idemjob' >"$tmp/dx-updated" 2>&1
"$PG_BIN/psql" -X -d $db_fresh -c '\dx+ idemjob' >"$tmp/dx-fresh" 2>&1
if d=$(diff -u "$tmp/dx-fresh" "$tmp/dx-updated"); then
	ok "\\dx+ idemjob: updated from 1.1 = new install ($(grep -c -E '^ (function|table|type|view|index|trigger|sequence|event)' "$tmp/dx-fresh") members)"
else
	not_ok "\\dx+ idemjob: updated from 1.1 = new install" "$d"
fi

# --- the whole suite on a database updated from 1.1
if out=$(q -d $db_regress -c "ALTER EXTENSION idemjob UPDATE" 2>&1); then
	if run_regress $db_regress "$tmp/regress"; then
		ok "pg_regress suite on $db_regress, updated from 1.1"
	else
		not_ok "pg_regress suite on $db_regress, updated from 1.1" \
			"$(grep -E 'FAILED' "$tmp/regress/log"; head -60 "$tmp/regress/regression.diffs" 2>/dev/null)"
	fi
else
	not_ok "$db_regress updated from 1.1" "$out"
fi

echo
echo "$label: $passed checks passed, $failed failed"
if [ "$failed" -eq 0 ]; then
	for d in $db $db_regress $db_fresh $db_squat $db_part; do q -d postgres -c "DROP DATABASE IF EXISTS $d"; done
	for r in "$app" "$client" ij_up_squatter; do
		q -d postgres -c "DROP ROLE IF EXISTS \"${r//\"/\"\"}\""
	done
	exit 0
fi
echo "$label: databases $db $db_regress $db_fresh $db_squat $db_part kept for a look"
exit 1
