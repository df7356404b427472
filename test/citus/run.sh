#!/bin/bash
# test/citus/run.sh [BASEPORT]: idemjob distributed on a real Citus cluster
# (docs/scaling.md#citus).  Installs Citus from the cache (building it from
# ../shared/vendor/citus on a miss, test/citus/lib.sh), starts a
# coordinator and two workers with idemjob preloaded, creates the extension
# on the coordinator (Citus creates it on the workers) and distributes it,
# then checks through the coordinator:
#   - what idemjob.distribute() made: four tables distributed by owner_hash
#     in one co-location group, six reference tables, thirteen calls
#     delegated by their owner, id or node; a second call changes nothing;
#   - the guarantees, each call in its own transaction as a client sends
#     it: a double click, the same key with other input (IJ001), an attempt
#     in doubt blocking the next (IJ002), a timeout made unknown and still
#     blocking, a late result after a fence lost and logged, a result sent
#     again (I7), a finished job (IJ003), a spent key (IJ001), await_job;
#   - that each call reaches one node (citus.log_remote_commands), and
#     there one shard group only (pg_stat_statements, track = all, on every
#     node), none of its statements run by Citus (citus.log_local_commands),
#     with no two-phase commit;
#   - the pgTAP suite (test/pgtap), through the coordinator;
#   - calls inside transaction blocks (force_delegation): a whole job, a
#     double click, IJ001 rolling the block back, ROLLBACK, one block over
#     owners on both workers;
#   - claim through the coordinator (asking the workers in turn, undone by
#     a ROLLBACK), and claim on each worker over its own shards; purge,
#     expire_attempts and abandon_attempts through the coordinator (on
#     every node with shards, in the caller's transaction): every job claimed once,
#     deadlines expired, a purged key refused (IJ007); each node's
#     sweeper expiring its own shards;
#   - every row in the shard Citus computes for its owner_hash;
#   - the isolation specs through the coordinator (notify on the worker of
#     its owner), each permutation in a database of its own
#     (test/citus/isolation.sh: how each is run);
#   - the soak with the history checker (test/soak/run.sh --short), in a
#     distributed database of its own, through the coordinator;
#   - distribute() over rows, a shard group moved, a one-server dump and a
#     distributed install's dump (through the coordinator) restored into
#     distributed installs, DROP EXTENSION on a distributed install.
# Prints one ok/FAIL line per check and exits non-zero on any failure.
#
# IJ_CITUS_BIN=/path/to/bin runs against another PostgreSQL build than
# Debian's postgresql-$PG_MAJOR (idemjob must be installed there).

set -uo pipefail
cd "$(dirname "$0")/../.."
. test/citus/lib.sh
set +e
PG_BIN=${IJ_CITUS_BIN:-$PG_BIN}
label=citus
passed=0
failed=0
. test/checks.sh

base=${1:-5750}
ij_citus_install "$PG_BIN/pg_config" || die "could not install Citus"
# pg_stat_statements (track = all): the statements a call runs on each node
IJ_CITUS_PRELOAD=idemjob,pg_stat_statements IJ_CITUS_DB=idemjob_citus \
	IJ_CITUS_CONF="pg_stat_statements.track = all" \
	ij_citus_start "$base" 2 || die "could not start the cluster"
workers=("${IJ_CITUS_PORTS[@]:1}")
db=idemjob_citus
export PGOPTIONS="-c client_min_messages=warning"
# call SQL: the one value it answers, or "ERROR:  SQLSTATE"
call() { q -d $db -c '\set VERBOSITY sqlstate' -c "$1" 2>&1; }
expect() {	# expect NAME SQL WANT
	local out
	out=$(call "$2")
	if [ "$out" = "$3" ]; then ok "$1"; else not_ok "$1" "want: $3"$'\n'"got:  $out"; fi
}
# run SQL (several statements, each sent alone as a client sends it): its
# output, errors as "ERROR:  SQLSTATE"; stops at the first error
run() {
	q -d $db -f - <<<"\\set VERBOSITY sqlstate
$1" 2>&1 | sed 's/^psql:<stdin>:[0-9]*: //'
}
# sum SQL: the sum of SQL's answers on every node (or its errors)
on_each_node() {
	local port out sum=0 errors=
	for port in "${IJ_CITUS_PORTS[@]}"; do
		out=$(q -d $db -p "$port" -c "$1" 2>&1)
		if [[ "$out" =~ ^[0-9]+$ ]]; then sum=$((sum + out)); else errors+="$port: $out"$'\n'; fi
	done
	[ -z "$errors" ] && echo "$sum" || echo "$errors"
}

q -d $db -c "CREATE EXTENSION idemjob" -c "CREATE EXTENSION pg_stat_statements" >/dev/null ||
	die "CREATE EXTENSION idemjob failed"
# before distribute(): plain tables on the coordinator; distribute() wants
# them empty (docs/scaling.md#citus)
check "before distribute(): a job submitted and claimed on the coordinator's own tables" $db \
	"SELECT (SELECT created FROM idemjob.submit('early', 'k-1', 'early', '{}'))
	    AND (SELECT count(*) FROM idemjob.claim('w', ARRAY['early'])) = 1"
# a job as 1.1 made them: an id that carries no owner_hash (a raw insert)
q -d $db -c "INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, params, provider)
	VALUES (gen_random_uuid(), 'legacy', 'k-1', 'early', '{}', 'default')" >/dev/null
expect "... and distribute() refuses an id made before 1.2: 55000" "SELECT idemjob.distribute()" "ERROR:  55000"
q -d $db -c "SET session_replication_role = replica" -c "DELETE FROM idemjob.jobs WHERE owner_id = 'legacy'" >/dev/null
q -d $db -c "SELECT idemjob.distribute(shard_count => 8)" >/dev/null || die "SELECT idemjob.distribute() failed"
early=$(q -d $db -c "SELECT id FROM idemjob.attempts WHERE owner_id = 'early'")
expect "distribute() took the early job and its attempt into the shards: the attempt wins through the coordinator" \
	"SELECT outcome FROM idemjob.complete_attempt('$early', '{\"r\": 1}')" won
check "... and the coordinator's own tables are empty" $db \
	"SELECT pg_relation_size('idemjob.jobs') + pg_relation_size('idemjob.attempts') = 0"

ij_log "what distribute() made"
check "jobs, attempts, race_log, spent_keys: distributed by owner_hash, 8 shards each, one co-location group" $db \
	"SELECT count(*) = 4 AND count(DISTINCT colocationid) = 1
	        AND bool_and(partmethod = 'h' AND column_to_column_name(logicalrelid, partkey) = 'owner_hash')
	        AND bool_and((SELECT count(*) FROM pg_dist_shard s WHERE s.logicalrelid = p.logicalrelid) = 8)
	 FROM pg_dist_partition p
	 WHERE logicalrelid IN ('idemjob.jobs'::regclass, 'idemjob.attempts'::regclass,
	                        'idemjob.race_log'::regclass, 'idemjob.spent_keys'::regclass)"
check "contracts, certifications, capabilities, owner_bindings, retry_policies, routes: reference tables" $db \
	"SELECT count(*) = 6 AND bool_and(partmethod = 'n' AND repmodel = 't')
	 FROM pg_dist_partition
	 WHERE logicalrelid::text IN ('idemjob.contracts', 'idemjob.certifications', 'idemjob.capabilities',
	                              'idemjob.owner_bindings', 'idemjob.retry_policies', 'idemjob.routes')"
check "thirteen calls delegated by their owner, id or node argument, co-located with jobs" $db \
	"SELECT count(*) = 13 AND bool_and(o.colocationid = (SELECT colocationid FROM pg_dist_partition
	                                                     WHERE logicalrelid = 'idemjob.jobs'::regclass))
	        AND bool_and(p.proargnames[o.distribution_argument_index + 1] IN ('owner_id', 'job_id', 'attempt_id', 'node'))
	 FROM pg_dist_object o JOIN pg_proc p ON p.oid = o.objid
	 WHERE o.classid = 'pg_proc'::regclass AND p.pronamespace = 'idemjob'::regnamespace
	   AND o.distribution_argument_index IS NOT NULL"
if out=$(q -d $db -c "SELECT idemjob.distribute(shard_count => 8)" 2>&1); then
	ok "distribute() again: no error"
else
	not_ok "distribute() again: no error" "$out"
fi
# the pgTAP suite through the coordinator: calls inside a transaction
# block, in expressions, with arguments read from a table or a variable
# (those Citus does not send itself: each call sends itself to its node)
if out=$(q -d $db -c "CREATE EXTENSION IF NOT EXISTS pgtap" 2>&1 &&
	pg_prove -h "$IJ_CITUS_DIR" -p "$base" -U postgres -d $db test/pgtap/*.sql 2>&1); then
	ok "the pgTAP suite, through the coordinator: $(grep -o 'Tests=[0-9]*' <<<"$out")"
else
	not_ok "the pgTAP suite, through the coordinator" "$out"
fi
for port in "${workers[@]}"; do
	check "worker $port: idemjob $(q -d $db -p "$port" -c "SELECT extversion FROM pg_extension WHERE extname = 'idemjob'"), its shards carry the guards" $db \
		"SET citus.override_table_visibility = off;
		 SELECT count(*) > 0 AND bool_and(tgenabled = 'O')
		 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		 WHERE c.relnamespace = 'idemjob'::regnamespace AND c.relname ~ '^jobs_[0-9]+$' AND NOT t.tgisinternal" -p "$port"
done

ij_log "the guarantees, one call per transaction"
# (each call alone in its statement, SELECT ... FROM idemjob.f(...): what
# Citus sends whole to the node of its shard, docs/scaling.md#citus)
j=$(call "SELECT job_id FROM idemjob.submit('alice', 'order-1', 'charge', '{\"amount\": 5}')")
expect "double click: the second submit answers the same job, created = false" \
	"SELECT job_id = '$j' AND NOT created FROM idemjob.submit('alice', 'order-1', 'charge', '{\"amount\": 5}')" t
expect "the same key with other params: IJ001" \
	"SELECT 1 FROM idemjob.submit('alice', 'order-1', 'charge', '{\"amount\": 6}')" "ERROR:  IJ001"
check "one job for the key, in the shard of its owner's hash" $db \
	"SELECT count(*) = 1 AND bool_and(owner_hash = idemjob.owner_hash('alice'::text)
	        AND idemjob.owner_hash(id) = owner_hash)
	 FROM idemjob.jobs WHERE owner_id = 'alice' AND idempotency_key = 'order-1'"
a1=$(call "SELECT id FROM idemjob.start_attempt('$j', timeout => '1 hour')")
expect "an attempt started, a second start_attempt: IJ002" "SELECT 1 FROM idemjob.start_attempt('$j')" "ERROR:  IJ002"
expect "a timeout makes it unknown, not failed" "SELECT state FROM idemjob.mark_unknown('$a1', 'timeout')" unknown
expect "... and the job in doubt" "SELECT state FROM idemjob.job('$j')" in_doubt
expect "... which still blocks a new attempt: IJ002" "SELECT 1 FROM idemjob.start_attempt('$j')" "ERROR:  IJ002"
expect "cancelled and fenced" "SELECT state FROM idemjob.cancel_attempt('$a1', 'given up', fence => true)" cancelled
expect "... the job pending again" "SELECT state FROM idemjob.job('$j')" pending
a2=$(call "SELECT id FROM idemjob.start_attempt('$j', timeout => '1 hour')")
expect "the second attempt extends its deadline" "SELECT state FROM idemjob.heartbeat('$a2', '2 hours')" started
check "... by two hours" $db "SELECT deadline > now() + interval '90 minutes' FROM idemjob.attempts WHERE id = '$a2'"
expect "its result wins" "SELECT outcome FROM idemjob.complete_attempt('$a2', '{\"ok\": 2}')" won
expect "the first attempt's late result loses (reverse order)" \
	"SELECT outcome FROM idemjob.complete_attempt('$a1', '{\"ok\": 1}')" lost
expect "... and is logged for the DBA" \
	"SELECT reason FROM idemjob.race_log WHERE attempt_id = '$a1'" slot_taken
expect "the winner's result sent again: the same answer (I7)" \
	"SELECT winner_attempt_id FROM idemjob.complete_attempt('$a2', '{\"ok\": 2}')" "$a2"
expect "... another result for it: IJ001" \
	"SELECT 1 FROM idemjob.complete_attempt('$a2', '{\"ok\": 3}')" "ERROR:  IJ001"
expect "a finished job refuses a new attempt: IJ003" "SELECT 1 FROM idemjob.start_attempt('$j')" "ERROR:  IJ003"
expect "... and cancel_job: IJ003" "SELECT 1 FROM idemjob.cancel_job('$j', 'late')" "ERROR:  IJ003"
expect "await_job answers a final job at once" "SELECT state FROM idemjob.await_job('$j', '5 seconds')" succeeded
j2=$(call "SELECT job_id FROM idemjob.submit('bob', 'order-1', 'charge', '{}')")
a3=$(call "SELECT id FROM idemjob.start_attempt('$j2')")
expect "another owner: a failed attempt" \
	"SELECT state FROM idemjob.fail_attempt('$a3', '{\"code\": \"declined\"}', false)" failed
expect "... not retryable: the job failed" "SELECT state FROM idemjob.job('$j2')" failed
# a spent key, as a restore brings it: its rows are in spent_keys' shards
# only, and the coordinator's table is an empty shell (the 1.1 bug: the
# look-up was skipped while the table had no block)
q -d $db -c "INSERT INTO idemjob.spent_keys (owner_id, idempotency_key, request_sha256, job_id,
	             final_state, completed_at, purged_at, owner_hash)
	         VALUES ('carol', 'spent-1', decode(repeat('00', 32), 'hex'), idemjob.uuid_v7(), 'succeeded', now(), now(), 'carol'::text)" >/dev/null ||
	not_ok "a spent key inserted as a restore would"
expect "a spent key never starts a job again (IJ001 for another request)" \
	"SELECT 1 FROM idemjob.submit('carol', 'spent-1', 'charge', '{}')" "ERROR:  IJ001"

ij_log "owner bindings and certifications on every node"
# owner_bindings is a reference table: each node reads its own copy (the
# shell table is empty), and the upserts pass the clock, not now(), which
# Citus refuses in DO UPDATE SET
q -d $db -c "CREATE ROLE tenant_7 LOGIN" -c "CREATE ROLE api LOGIN" \
	-c "SELECT idemjob.grant_capability(r::regrole, 'client') FROM unnest(ARRAY['tenant_7', 'api']) r" >/dev/null ||
	not_ok "roles and capabilities"
expect "bind_owner: a role bound to its own name" "SELECT count(*) FROM (SELECT idemjob.bind_owner('tenant_7', 'role')) b" 1
expect "bind_owner again: the same (I7)" "SELECT count(*) FROM (SELECT idemjob.bind_owner('tenant_7', 'role')) b" 1
expect "bind_owner: a role bound to a setting" "SELECT count(*) FROM (SELECT idemjob.bind_owner('api', 'setting:app.owner')) b" 1
as_role() { q -d $db -U "$1" -f - <<<"\\set VERBOSITY sqlstate
$2" 2>&1 | sed 's/^psql:<stdin>:[0-9]*: //'; }
out=$(as_role tenant_7 "SELECT created FROM idemjob.submit('tenant_7', 'bound-1', 'charge', '{}');")
[ "$out" = t ] && ok "the bound role submits for its owner, through the coordinator" ||
	not_ok "the bound role submits for its owner" "$out"
out=$(as_role tenant_7 "SELECT created FROM idemjob.submit('tenant_8', 'bound-1', 'charge', '{}');")
[ "$out" = "ERROR:  42501" ] && ok "... and for another owner: 42501, on the worker that runs it" ||
	not_ok "the bound role submits for another owner: 42501" "$out"
out=$(as_role api "BEGIN;
SET LOCAL app.owner = 'acme';
SELECT created FROM idemjob.submit('acme', 'bound-2', 'charge', '{}');")
[ "$out" = "ERROR:  42501" ] && ok "a setting binding: the coordinator's setting does not reach the worker, refused (42501)" ||
	not_ok "a setting binding refused on the worker" "$out"
expect "certify_provider, and again (I7)" \
	"SELECT idemjob.define_contract('charge', '{\"type\": \"object\"}') IS NOT NULL;
	 SELECT provider FROM idemjob.certify_provider('charge', 'fallback', '{}');
	 SELECT provider FROM idemjob.certify_provider('charge', 'fallback', '{}')" "t
fallback
fallback"
# a write to a reference table reaches every node's copy through Citus,
# whose guards let it through only as the function's own
# (citus_internal connection, as the extension's owner)
out=$(run "SELECT idemjob.define_contract('charge', '{\"type\": \"object\", \"required\": [\"ok\"]}');
BEGIN;
SELECT revoked_at IS NOT NULL FROM idemjob.revoke_provider('charge', 'fallback', 'failed a run');
COMMIT;")
copies=$(on_each_node "SET citus.override_table_visibility = off;
	SELECT count(*) FROM (
	  SELECT (xpath('/row/n/text()', query_to_xml(format(
	    'SELECT count(*) AS n FROM idemjob.%I c JOIN idemjob.%I k USING (intent)
	     WHERE c.version = 2 AND k.revoked_at IS NOT NULL', 'contracts_' || c.shardid, 'certifications_' || k.shardid),
	    false, true, '')))[1]::text::int AS n
	  FROM pg_dist_shard c, pg_dist_shard k
	  WHERE c.logicalrelid = 'idemjob.contracts'::regclass AND k.logicalrelid = 'idemjob.certifications'::regclass) x
	WHERE n = 1")
[ "$out" = $'2\nt' ] && [ "$copies" = 3 ] &&
	ok "a contract's second version and a revocation (in a block) reach the copies on all 3 nodes" ||
	not_ok "a contract's second version and a revocation reach every node's copy" "$out / copies: $copies"
out=$(as_role api "UPDATE idemjob.contracts SET version = 9" 2>&1)
[[ "$out" == *42501* ]] && ok "a role with no rights on the tables still cannot write them" ||
	not_ok "a role cannot write the reference tables" "$out"

ij_log "one node, one shard group per call"
# the coordinator sends the call (citus.log_remote_commands); on the node
# it reaches, the call's statements run on the shards of one group as that
# node's own statements (pg_stat_statements, track = all), Citus planning
# and running none of them (citus.log_local_commands would show it)
for port in "${IJ_CITUS_PORTS[@]}"; do
	q -d $db -p "$port" -c "ALTER SYSTEM SET citus.log_local_commands = on" \
		-c "ALTER SYSTEM SET citus.log_remote_commands = on" -c "SELECT pg_reload_conf()" >/dev/null
done
sleep 1
tx0=$(q -d $db -c "SELECT count(*) FROM pg_dist_transaction")
# the shards the statements recorded on a node name, and their calls
shards_seen="SELECT string_agg(DISTINCT m[1], ',') FROM pg_stat_statements s,
	regexp_matches(s.query, 'idemjob\.(?:jobs|attempts|race_log|spent_keys)_([0-9]+)', 'g') m
	WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
traced() {	# traced NAME SQL: the call reaches one node, and one shard group there
	local out remote planned port seen shards="" nodes=0 groups
	for port in "${IJ_CITUS_PORTS[@]}"; do
		q -d $db -p "$port" -c "SELECT pg_stat_statements_reset()" >/dev/null
	done
	out=$(PGOPTIONS="-c client_min_messages=notice" q -d $db -c "$2" 2>&1 >/dev/null)
	remote=$(grep -c "issuing " <<<"$out")
	planned=$(grep "executing the command locally" <<<"$out" |
		grep -cE "idemjob\.(jobs|attempts|race_log|spent_keys)_[0-9]+")
	for port in "${IJ_CITUS_PORTS[@]}"; do
		seen=$(q -d $db -p "$port" -c "$shards_seen")
		[ -n "$seen" ] && nodes=$((nodes + 1)) && shards=${shards:+$shards,}$seen
	done
	if [ -z "$shards" ]; then
		not_ok "$1: one node, one shard group" "no shard in pg_stat_statements; the log:"$'\n'"$out"
		return
	fi
	groups=$(q -d $db -c "SELECT count(DISTINCT shardminvalue) FROM pg_dist_shard WHERE shardid IN ($shards)")
	if [ "$remote" = 1 ] && [ "$nodes" = 1 ] && [ "$groups" = 1 ] && [ "$planned" = 0 ]; then
		ok "$1: sent whole to one node, its statements there on shards $shards (one group), none through Citus"
	else
		not_ok "$1: one node, one shard group" \
			"$remote commands sent, shards $shards on $nodes nodes in $groups groups, $planned run by Citus:"$'\n'"$out"
	fi
}
traced "submit" "SELECT job_id FROM idemjob.submit('dave', 'order-9', 'charge', '{}')"
j3=$(call "SELECT job_id FROM idemjob.submit('dave', 'order-9', 'charge', '{}')")
traced "submit, replayed" "SELECT job_id FROM idemjob.submit('dave', 'order-9', 'charge', '{}')"
traced "start_attempt" "SELECT id FROM idemjob.start_attempt('$j3', timeout => '1 hour')"
a4=$(q -d $db -c "SELECT id FROM idemjob.attempts WHERE job_id = '$j3'")
traced "heartbeat" "SELECT state FROM idemjob.heartbeat('$a4', '1 hour')"
traced "mark_unknown" "SELECT state FROM idemjob.mark_unknown('$a4', 'timeout')"
traced "complete_attempt" "SELECT outcome FROM idemjob.complete_attempt('$a4', '{\"ok\": 1}')"
traced "job" "SELECT state FROM idemjob.job('$j3')"
traced "await_job" "SELECT state FROM idemjob.await_job('$j3', '1 second')"
tx1=$(q -d $db -c "SELECT count(*) FROM pg_dist_transaction")
if [ "$tx0" = "$tx1" ]; then
	ok "no two-phase commit (pg_dist_transaction: $tx1 rows before and after)"
else
	not_ok "no two-phase commit" "pg_dist_transaction: $tx0 rows before, $tx1 after"
fi

ij_log "calls inside transaction blocks (force_delegation)"
out=$(run "BEGIN;
SELECT job_id AS tj FROM idemjob.submit('erin', 'tx-1', 'charge', '{}') \\gset
SELECT id AS ta FROM idemjob.start_attempt(:'tj', timeout => '1 hour') \\gset
SELECT outcome FROM idemjob.complete_attempt(:'ta', '{\"ok\": 1}');
SELECT job_id = :'tj' AND NOT created FROM idemjob.submit('erin', 'tx-1', 'charge', '{}');
SELECT state FROM idemjob.job(:'tj');
COMMIT;
SELECT state FROM idemjob.jobs WHERE id = :'tj';")
[ "$out" = $'won\nt\nsucceeded\nsucceeded' ] &&
	ok "BEGIN; submit, start_attempt, complete_attempt (won), a double click, job; COMMIT: succeeded" ||
	not_ok "BEGIN; submit ... COMMIT" "$out"
out=$(run "BEGIN;
SELECT 1 FROM idemjob.submit('erin', 'tx-2', 'charge', '{}');
SELECT 1 FROM idemjob.submit('erin', 'tx-2', 'charge', '{\"other\": 1}');")
[ "$out" = $'1\nERROR:  IJ001' ] && ok "the same key with other params inside a block: IJ001" ||
	not_ok "the same key with other params inside a block: IJ001" "$out"
check "... and nothing of the block committed" $db \
	"SELECT count(*) = 0 FROM idemjob.jobs WHERE owner_id = 'erin' AND idempotency_key = 'tx-2'"
out=$(run "BEGIN;
SELECT 1 FROM idemjob.submit('frank', 'tx-3', 'charge', '{}');
ROLLBACK;
SELECT count(*) FROM idemjob.jobs WHERE owner_id = 'frank';")
[ "$out" = $'1\n0' ] && ok "ROLLBACK undoes a submit sent to a worker" ||
	not_ok "ROLLBACK undoes a submit sent to a worker" "$out"
out=$(run "BEGIN;
$(for i in $(seq 1 8); do printf "SELECT FROM idemjob.submit('multi-%s', 'tx-4', 'charge', '{}');\n" "$i"; done)
COMMIT;")
check "one block, owners on both workers: every submit committed (two-phase)" $db \
	"SELECT count(*) = 8 AND count(DISTINCT p.groupid) = 2
	 FROM idemjob.jobs j
	 JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('idemjob.jobs', j.owner_hash)
	 WHERE j.idempotency_key = 'tx-4'"

ij_log "claim, expiry and purge, on each node over its own shards"
for port in "${IJ_CITUS_PORTS[@]}"; do
	q -d $db -p "$port" -c "ALTER SYSTEM RESET citus.log_local_commands" \
		-c "ALTER SYSTEM RESET citus.log_remote_commands" -c "SELECT pg_reload_conf()" >/dev/null
done
for i in $(seq 1 20); do call "SELECT 1 FROM idemjob.submit('tenant-$i', 'b-1', 'batch', '{}')" >/dev/null; done
# the coordinator holds no shard: its claim asks the workers in turn
# (claim_on), in the caller's transaction
out=$(run "BEGIN;
SELECT count(*) FROM idemjob.claim('w-rb', ARRAY['batch'], 100);
ROLLBACK;")
[ "$out" = 20 ] && ok "a claim through the coordinator, in a block, takes the 20 jobs of both workers ..." ||
	not_ok "a claim through the coordinator takes the jobs of both workers" "$out"
claimed=()
for port in "${IJ_CITUS_PORTS[@]}"; do
	[ "$port" = "$base" ] && max=4 || max=100
	claimed+=("$(q -d $db -p "$port" -c "SELECT count(*) FROM idemjob.claim('w-$port', ARRAY['batch'], $max, '1 hour')" 2>&1)")
done
if [ "${claimed[0]}" = 4 ] && [ $((claimed[1] + claimed[2])) = 16 ] && [ "${claimed[1]}" -gt 0 ] && [ "${claimed[2]}" -gt 0 ]; then
	ok "... ROLLBACK gives them back: the coordinator's claim takes 4, each worker's the rest of its shards: ${claimed[1]} + ${claimed[2]} = 16"
else
	not_ok "claim through the coordinator, then on each worker" "coordinator, workers: ${claimed[*]}"
fi
check "... each job once: 20 attempts on 20 jobs, each by the worker of its node" $db \
	"SELECT count(*) = 20 AND count(DISTINCT job_id) = 20
	 FROM idemjob.attempts a WHERE a.job_id IN (SELECT id FROM idemjob.jobs WHERE intent = 'batch')"
check "... and a second claim finds none" $db \
	"SELECT (SELECT count(*) FROM idemjob.claim('again', ARRAY['batch'], 100)) = 0" -p "${workers[0]}"
won=0
for a in $(q -d $db -c "SELECT id FROM idemjob.attempts WHERE job_id IN (SELECT id FROM idemjob.jobs WHERE intent = 'batch')"); do
	[ "$(call "SELECT outcome FROM idemjob.complete_attempt('$a', '{\"ok\": true}')")" = won ] && won=$((won + 1))
done
[ $won = 20 ] && ok "their results, through the coordinator: 20 won" || not_ok "their results won" "$won of 20"
# (the final jobs of the checks above go too)
# purge on the coordinator, which holds no shards: on every node that does
# (on_node), in the caller's transaction, max_jobs over them all
out=$(run "BEGIN;
SELECT idemjob.purge('0', 5);
ROLLBACK;
SELECT count(*) FROM idemjob.jobs WHERE intent = 'batch';")
[ "$out" = $'5\n20' ] && ok "purge through the coordinator: max_jobs over all nodes (5), undone by ROLLBACK" ||
	not_ok "purge through the coordinator, in a block" "$out"
purged=$(q -d $db -c "SELECT idemjob.purge('0', 1000)" 2>&1)
check "purge through the coordinator: the 20 final jobs gone from both workers, 20 spent keys kept" $db \
	"SELECT (SELECT count(*) FROM idemjob.jobs WHERE intent = 'batch') = 0
	    AND (SELECT count(*) FROM idemjob.spent_keys WHERE idempotency_key = 'b-1') = 20
	    AND '$purged' ~ '^[0-9]+$' AND '$purged'::int >= 20"
expect "a purged key with the same request: IJ007" \
	"SELECT 1 FROM idemjob.submit('tenant-7', 'b-1', 'batch', '{}')" "ERROR:  IJ007"
for i in 1 2 3 4 5 6; do call "SELECT 1 FROM idemjob.submit('late-$i', 'e-1', 'expiring', '{}')" >/dev/null; done
for port in "${workers[@]}"; do
	q -d $db -p "$port" -c "SELECT count(*) FROM idemjob.claim('w', ARRAY['expiring'], 100, '1 second')" >/dev/null
done
sleep 1.5
expired=$(q -d $db -c "SELECT idemjob.expire_attempts()" 2>&1)
check "expire_attempts through the coordinator: the 6 attempts past their deadline, on both workers, unknown, their jobs in doubt" $db \
	"SELECT '$expired' = '6' AND count(*) = 6 AND bool_and(a.state = 'unknown' AND j.state = 'in_doubt')
	 FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id AND j.owner_hash = a.owner_hash
	 WHERE j.intent = 'expiring'"
check "... and no new attempt while in doubt (IJ002)" $db \
	"SELECT count(*) = 0 FROM idemjob.claim('w', ARRAY['expiring'], 100)" -p "${workers[1]}"
abandoned=$(q -d $db -c "SELECT idemjob.abandon_attempts('w')" 2>&1)
check "abandon_attempts through the coordinator: the 6 given up, their jobs pending again" $db \
	"SELECT '$abandoned' = '6' AND count(*) = 6 AND bool_and(state = 'pending')
	 FROM idemjob.jobs WHERE intent = 'expiring'"

# each node's sweeper, on its own shards
for port in "${IJ_CITUS_PORTS[@]}"; do
	q -d $db -p "$port" -c "ALTER SYSTEM SET idemjob.sweeper_databases = '$db'" \
		-c "ALTER SYSTEM SET idemjob.sweeper_interval = '200ms'" -c "SELECT pg_reload_conf()" >/dev/null
done
for i in 1 2 3 4 5 6; do call "SELECT 1 FROM idemjob.submit('swept-$i', 's-1', 'swept', '{}')" >/dev/null; done
swept_claims=$(on_each_node "SELECT count(*) FROM idemjob.claim('w', ARRAY['swept'], 100, '1 second')")
for _ in $(seq 1 50); do
	[ "$(q -d $db -c "SELECT count(*) FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id
	                   AND j.owner_hash = a.owner_hash WHERE j.intent = 'swept' AND a.state = 'unknown'")" = 6 ] && break
	sleep 0.2
done
check "each node's sweeper expires its own shards: the 6 claimed attempts unknown after their deadline" $db \
	"SELECT '$swept_claims' = '6' AND count(*) = 6 AND bool_and(a.state = 'unknown' AND j.state = 'in_doubt')
	 FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id AND j.owner_hash = a.owner_hash
	 WHERE j.intent = 'swept'"
check "... a sweeper on every node" $db \
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idemjob sweeper'" -p "${workers[0]}"

# every row in the shard Citus computes for its owner_hash: the calls
# write into a shard they choose themselves (docs/scaling.md#citus).  Each
# node counts the rows of its own shards matching COND (a NULL count, from
# a query that read nothing, makes the sum fail)
shard_rows() {
	on_each_node "SET citus.override_table_visibility = off;
	SELECT CASE WHEN coalesce(bool_and(n IS NOT NULL), true) THEN coalesce(sum(n), 0) ELSE -1000000 END FROM (
	  SELECT (xpath('/row/n/text()', query_to_xml(format(
	    'SELECT count(*) AS n FROM idemjob.%I WHERE $1',
	    t.relname || '_' || d.shardid, 'idemjob.' || t.relname, d.shardid), false, true, '')))[1]::text::int AS n
	  FROM pg_dist_shard d JOIN pg_dist_placement p ON p.shardid = d.shardid
	  JOIN pg_class t ON t.oid = d.logicalrelid
	  WHERE t.relname IN ('jobs', 'attempts', 'race_log', 'spent_keys')
	    AND p.groupid = (SELECT groupid FROM pg_dist_local_group)) x"
}
# rows_placed NAME: check that every row of $db lies in its shard, and that
# the count read in the shards is every row
rows_placed() {
	local misplaced in_shards rows
	misplaced=$(shard_rows "get_shard_id_for_distribution_column(%L, owner_hash) <> %s")
	in_shards=$(shard_rows "%L IS NOT NULL AND %s IS NOT NULL")
	rows=$(q -d $db -c "SELECT (SELECT count(*) FROM idemjob.jobs) + (SELECT count(*) FROM idemjob.attempts)
		+ (SELECT count(*) FROM idemjob.race_log) + (SELECT count(*) FROM idemjob.spent_keys)")
	if [ "$misplaced" = 0 ] && [ "$rows" -gt 0 ] && [ "$in_shards" = "$rows" ]; then
		ok "$1: each of the $rows rows"
	else
		not_ok "$1" "misplaced: $misplaced (of $rows; read in the shards: $in_shards)"
	fi
}
rows_placed "every row lies in the shard Citus computes for its owner_hash"

# the operator's views and provider_stats(since), read through the
# coordinator over every node's shards
ij_log "the views and provider_stats, through the coordinator"
check "provider_stats counts every attempt, once" $db \
	"SELECT (SELECT sum(attempts) FROM idemjob.provider_stats) = (SELECT count(*) FROM idemjob.attempts)
	    AND (SELECT count(*) FROM idemjob.attempts) > 0"
check "provider_stats(since) too" $db \
	"SELECT (SELECT sum(attempts) FROM idemjob.provider_stats('100 years'::interval)) = (SELECT count(*) FROM idemjob.attempts)"
for v in in_doubt queue_stats compensations retention_stats; do
	check "the view $v answers" $db "SELECT count(*) >= 0 FROM idemjob.$v"
done

ij_log "the isolation specs, through the coordinator"
. test/citus/isolation.sh
citus_isolation

# the soak (test/soak/run.sh --short) in a distributed database of its own:
# pgbench clients on the coordinator, ten owners over the shards of both
# workers, every call logged in the coordinator's soak.history in the
# call's transaction, then the history checker (on a snapshot) and its
# self-test, amcheck on each worker's shards
ij_log "a soak with the history checker, through the coordinator"
soak_db=idemjob_soak
if ij_citus_db $soak_db && PGDATABASE=$soak_db ij_citus_psql "$base" -c "CREATE EXTENSION idemjob" \
	-c "CREATE EXTENSION amcheck" -c "SELECT idemjob.distribute(shard_count => 8)" >/dev/null; then
	if out=$(PGHOST=$IJ_CITUS_DIR PGPORT=$base PGUSER=postgres PGOPTIONS= PG_BIN=$PG_BIN SOAK_DB=$soak_db \
		SOAK_EXISTING_DB=1 SOAK_CLIENTS=4 bash test/soak/run.sh --short 2>&1); then
		ok "soak through the coordinator: $(grep "^soak: calls" <<<"$out" | sed "s/^soak: //"), the checker's self-test caught $(grep -o "[0-9]* of [0-9]* deliberate breakages" <<<"$out")"
	else
		not_ok "soak through the coordinator" "$(grep -v '^      0  ' <<<"$out" | tail -40)"
	fi
	check "... its owners' rows on both workers, in several shards" $soak_db \
		"SELECT count(DISTINCT p.nodeport) = 2 AND count(DISTINCT p.shardid) >= 4
		 FROM (SELECT DISTINCT get_shard_id_for_distribution_column('idemjob.jobs', owner_hash) AS shardid
		       FROM idemjob.jobs) x JOIN pg_dist_shard_placement p USING (shardid)"
	db=$soak_db
	rows_placed "... every row in the shard of its owner_hash"
	db=idemjob_citus
else
	not_ok "soak through the coordinator" "could not make the distributed database $soak_db"
fi

# a shard group moved to the other worker while a session on each node
# stays open (citus_move_shard_placement, as the rebalancer moves them):
# each node reads which shards it holds again, and the calls follow the
# rows (docs/scaling.md#citus)
ij_log "a shard group moved to the other worker"
mv_owner=$(q -d $db -c "SELECT o FROM (SELECT 'mover-' || i AS o FROM generate_series(1, 1000) i) x
	JOIN pg_dist_shard_placement p
	  ON p.shardid = get_shard_id_for_distribution_column('idemjob.jobs', idemjob.owner_hash(o))
	WHERE p.nodeport = ${workers[0]} LIMIT 1")
mv_shard=$(q -d $db -c "SELECT get_shard_id_for_distribution_column('idemjob.jobs', idemjob.owner_hash('$mv_owner'::text))")
mv_job=$(call "SELECT job_id FROM idemjob.submit('$mv_owner', 'm-1', 'moved', '{}')")
call "SELECT 1 FROM idemjob.submit('$mv_owner', 'm-2', 'moved', '{}')" >/dev/null
# one session on each worker: a claim before the move, the move, a claim after
move="$PG_BIN/psql -X -q -A -t -v ON_ERROR_STOP=1 -h $IJ_CITUS_DIR -p $base -U postgres -d $db -c \"SELECT citus_move_shard_placement($mv_shard, '127.0.0.1', ${workers[0]}, '127.0.0.1', ${workers[1]}, shard_transfer_mode => 'block_writes')\""
out0=$(q -d $db -p "${workers[0]}" -c "SELECT attempt_id FROM idemjob.claim('w-move', ARRAY['moved'], 1, '1 hour')" \
	-c "\\! $move" -c "SELECT count(*) FROM idemjob.claim('w-move', ARRAY['moved'], 10, '1 hour')" 2>&1)
mv_attempt=$(head -1 <<<"$out0")
check "the group of $mv_owner's shard moved from the first worker to the second" $db \
	"SELECT array_agg(nodeport) = ARRAY[${workers[1]}] FROM pg_dist_shard_placement WHERE shardid = $mv_shard"
[ "$(tail -1 <<<"$out0")" = 0 ] && ok "... the first worker's session, which claimed one job before the move, claims none of the group after it" ||
	not_ok "the first worker's session claims none of the moved group" "$out0"
check "... the second worker claims the other job of the group" $db \
	"SELECT count(*) = 1 FROM idemjob.claim('w-move-2', ARRAY['moved'], 10, '1 hour')" -p "${workers[1]}"
expect "... the attempt claimed before the move wins through the coordinator" \
	"SELECT outcome FROM idemjob.complete_attempt('$mv_attempt', '{\"moved\": true}')" won
expect "... a double click of the moved key answers its job" \
	"SELECT created::text || ' ' || (job_id = '$mv_job') FROM idemjob.submit('$mv_owner', 'm-1', 'moved', '{}')" "false true"
rows_placed "... every row still in the shard Citus computes for its owner_hash"

# one server's rows into a distributed install: a data-only dump of a
# database without Citus (test/citus/restore_source.sql), restored into a
# fresh distributed one with psql -f and with pg_restore -j 2; rows Citus
# copies into the shards pass the shards' guards, which read their own
# shard group only (docs/scaling.md "Moving onto Citus")
ij_log "one server's rows restored into a distributed install"
# restore_into DB SHARDS HOW SQL DIR: DB made afresh, distributed into SHARDS
# shards, and loaded as the docs say (step 5 of "Moving onto Citus") by HOW:
# "psql -f" from the plain dump SQL, "pg_restore -j 2" from the -Fd dump DIR
# (every table side by side: a certification may come before its contract,
# on every node, and the guards wait for it).  Its output in $out; returns 2
# when DB cannot be made.
restore_into() {
	if ! { ij_citus_db "$1" && PGDATABASE=$1 ij_citus_psql "$base" -c "CREATE EXTENSION idemjob" \
		-c "SELECT idemjob.distribute(shard_count => $2)" >/dev/null; }; then
		out="could not make the distributed database $1"
		return 2
	fi
	if [ "$3" = "psql -f" ]; then
		out=$(q -d "$1" -f "$4" 2>&1)
	else
		out=$(ij_as_postgres "$PG_BIN/pg_restore" -h "$IJ_CITUS_DIR" -p "$base" -U postgres -j 2 \
			--exit-on-error -d "$1" "$5" 2>&1)
	fi
}
plain=idemjob_plain
counts="SELECT (SELECT count(*) FROM idemjob.jobs) || ' ' || (SELECT count(*) FROM idemjob.attempts) || ' '
	|| (SELECT count(*) FROM idemjob.race_log) || ' ' || (SELECT count(*) FROM idemjob.spent_keys) || ' '
	|| (SELECT count(*) FROM idemjob.contracts) || ' ' || (SELECT count(*) FROM idemjob.certifications)"
dump=$(mktemp -d /tmp/idemjob-citus-dump.XXXXXX)
chmod 777 "$dump"
if q -d postgres -c "CREATE DATABASE $plain" >/dev/null && q -d $plain -c "CREATE EXTENSION idemjob" >/dev/null &&
	q -d $plain -f test/citus/restore_source.sql >/dev/null &&
	ij_as_postgres "$PG_BIN/pg_dump" -h "$IJ_CITUS_DIR" -p "$base" -U postgres --data-only -f "$dump/plain.sql" $plain &&
	ij_as_postgres "$PG_BIN/pg_dump" -h "$IJ_CITUS_DIR" -p "$base" -U postgres --data-only -Fd -f "$dump/dir" $plain; then
	source_counts=$(q -d $plain -c "$counts")
	j10=$(q -d $plain -c "SELECT id FROM idemjob.jobs WHERE owner_id = 'r10'")
	j7=$(q -d $plain -c "SELECT id FROM idemjob.jobs WHERE owner_id = 'r7'")
	a6=$(q -d $plain -c "SELECT id FROM idemjob.attempts WHERE owner_id = 'r6'")
	j6=$(q -d $plain -c "SELECT id FROM idemjob.jobs WHERE owner_id = 'r6'")
	for how in "psql -f" "pg_restore -j 2"; do
		rdb=idemjob_restored_${how%% *}
		restore_into $rdb 8 "$how" "$dump/plain.sql" "$dump/dir"
		rc=$?
		[ $rc = 2 ] && { not_ok "$how into a distributed install" "$out"; continue; }
		if [ $rc = 0 ] && [ "$(q -d $rdb -c "$counts")" = "$source_counts" ]; then
			ok "$how: every row of the one-server dump restored into the distributed install ($source_counts)"
		else
			not_ok "$how into a distributed install" "exit $rc, rows: $(q -d $rdb -c "$counts" 2>&1), want $source_counts"$'\n'"$out"
		fi
		db=$rdb
		rows_placed "... every row in the shard of its owner_hash"
		expect "... a restored key answers its own job" \
			"SELECT created::text || ' ' || (job_id = '$j10') FROM idemjob.submit('r10', 'k', 'r', '{\"i\": 10}')" "false true"
		expect "... a restored spent key: IJ007" "SELECT 1 FROM idemjob.submit('r1', 'k', 'r', '{\"i\": 1}')" "ERROR:  IJ007"
		expect "... the restored attempt in doubt blocks a new one (IJ002)" \
			"SELECT 1 FROM idemjob.start_attempt('$j6')" "ERROR:  IJ002"
		expect "... and then wins" "SELECT outcome FROM idemjob.complete_attempt('$a6', '{\"r\": 6}')" won
		expect "... the job whose late result lost takes its second attempt" \
			"SELECT attempt_no FROM idemjob.start_attempt('$j7')" 2
		db=idemjob_citus
	done
else
	not_ok "a one-server dump to restore" "could not make or dump $plain"
fi
rm -rf "$dump"

# A distributed install dumped through the coordinator (the documented way
# to a new version: docs/scaling.md, "ALTER EXTENSION ... UPDATE") and
# restored into a fresh distributed install, with psql -f and with the
# pg_restore -j 2: every table's rows, compared as text, the same
ij_log "a distributed install dumped through the coordinator and restored"
# sums DB: a checksum of each table's rows, sorted, one line
sums() {
	local t
	for t in jobs attempts race_log spent_keys contracts certifications capabilities owner_bindings retry_policies routes; do
		printf '%s:%s ' $t "$(q -d "$1" -c "SELECT r::text FROM idemjob.$t r ORDER BY 1" | md5sum | cut -c1-12)"
	done
}
dump=$(mktemp -d /tmp/idemjob-citus-dump.XXXXXX)
chmod 777 "$dump"
src=idemjob_citus
if ij_as_postgres "$PG_BIN/pg_dump" -h "$IJ_CITUS_DIR" -p "$base" -U postgres --data-only -f "$dump/dist.sql" $src &&
	ij_as_postgres "$PG_BIN/pg_dump" -h "$IJ_CITUS_DIR" -p "$base" -U postgres --data-only -Fd -f "$dump/dir" $src; then
	want=$(sums $src)
	# a job the dump holds, and the submit that made it
	kept_id=$(q -d $src -c "SELECT id FROM idemjob.jobs ORDER BY id LIMIT 1")
	kept_call=$(q -d $src -c "SELECT pg_catalog.format('idemjob.submit(%L, %L, %L, %L)', owner_id, idempotency_key, intent, params)
		FROM idemjob.jobs WHERE id = '$kept_id'")
	expect "the dump holds the tables' rows, not their shards'" \
		"SELECT $(grep -c '^COPY ' "$dump/dist.sql") || ' ' || $(grep -c '^COPY idemjob\.[a-z_]*_[0-9]* ' "$dump/dist.sql")" "10 0"
	for how in "psql -f" "pg_restore -j 2"; do
		rdb=idemjob_redist_${how%% *}
		restore_into $rdb 4 "$how" "$dump/dist.sql" "$dump/dir"
		rc=$?
		[ $rc = 2 ] && { not_ok "$how: a distributed dump into a distributed install" "$out"; continue; }
		got=$(sums $rdb)
		if [ $rc = 0 ] && [ "$got" = "$want" ]; then
			ok "$how: a distributed install's dump restored into an install of 4 shards (the source has 8), every table's rows the same"
		else
			not_ok "$how: a distributed dump into a distributed install" "exit $rc"$'\n'"want: $want"$'\n'"got:  $got"$'\n'"$out"
		fi
		db=$rdb
		rows_placed "... every row in the shard of its owner_hash"
		expect "... a double click answers a restored job" "SELECT (created, job_id = '$kept_id')::text FROM $kept_call" "(f,t)"
		expect "... a restored spent key: IJ007" \
			"SELECT 1 FROM idemjob.submit('alice', 'order-1', 'charge', '{\"amount\": 5}')" "ERROR:  IJ007"
		db=idemjob_citus
	done
else
	not_ok "a dump of the distributed install through the coordinator"
fi
rm -rf "$dump"

# DROP EXTENSION on a distributed install (with rows: the database the psql
# restore filled): refused while an object of the caller's depends on it,
# and then still distributed; then dropped from every node, shards and
# Citus's metadata with it; then made and distributed again
ij_log "DROP EXTENSION on a distributed install"
db=idemjob_restored_psql
# what is left of idemjob on node PORT: relations, extension, Citus metadata
left_on() {
	q -d $db -p "$1" -c "SELECT (SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = 'idemjob' OR c.relname ~ '^(jobs|attempts|race_log|spent_keys|contracts|certifications)_[0-9]+$')
		|| ' ' || (SELECT count(*) FROM pg_catalog.pg_extension WHERE extname = 'idemjob')
		|| ' ' || (SELECT count(*) FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid::text LIKE 'idemjob.%')"
}
q -d $db -c "CREATE VIEW public.my_jobs AS SELECT id, owner_id FROM idemjob.jobs" >/dev/null
expect "a view of the caller's on jobs: DROP EXTENSION refused (2BP01)" "DROP EXTENSION idemjob" "ERROR:  2BP01"
expect "... and the install is still distributed" \
	"SELECT count(*) FROM pg_catalog.pg_dist_partition WHERE logicalrelid::text LIKE 'idemjob.%'" 10
expect "... and answers calls" "SELECT created FROM idemjob.submit('r10', 'k2', 'r', '{}')" t
rows_placed "... every row still in the shard of its owner_hash"
q -d $db -c "DROP VIEW public.my_jobs" >/dev/null
expect "DROP EXTENSION idemjob on the coordinator" "DROP EXTENSION idemjob" ""
for port in "${IJ_CITUS_PORTS[@]}"; do
	expect "... nothing of it left on node $port (relations, extension, Citus metadata)" "SELECT '$(left_on "$port")'" "0 0 0"
done
if q -d $db -c "CREATE EXTENSION idemjob" -c "SELECT idemjob.distribute(shard_count => 8)" >/dev/null 2>&1; then
	expect "... created and distributed again: a call" "SELECT created FROM idemjob.submit('r10', 'k', 'r', '{}')" t
	expect "... and DROP EXTENSION ... CASCADE" "DROP EXTENSION idemjob CASCADE" ""
else
	not_ok "... created and distributed again"
fi
db=idemjob_citus

ij_citus_stop
echo "$label: $passed checks passed, $failed failed"
[ "$failed" = 0 ]
