#!/usr/bin/env bash
#
# bench/audit.sh: the four audit questions (README "Auditing") at 1M jobs.
#
#   PGHOST, PGPORT, PGUSER   the server (a superuser: the data is loaded raw)
#   N                        jobs of history (default 1000000)
#   RUNS                     runs of each question; the median is printed
#                            (default 7)
#
# Creates database bench_audit (dropped first) and loads N jobs over 30
# days, 20,000 customers (owner_id), intents charge_card (70 %) and
# send_email, providers stripe, adyen and braintree, with the guards set
# aside (session_replication_role = replica: loading only), each row as the
# functions write it:
#   - 3.0 % lost races: attempt 1 cancelled without a fence, attempt 2 won
#     on the next provider, then attempt 1's late result (race_log
#     slot_taken, late_by 0.2 to 60 s);
#   - 0.5 % fenced then cancelled jobs whose attempt answered late
#     (version_moved, late_by since the fence);
#   - 0.5 % contract violations, then a second attempt that won (rejected);
#   - 2.0 % failed jobs; 200 attempts in doubt (100 unknown by the
#     sweeper, 100 marked unknown by their worker); the rest succeeded at
#     the first attempt; keep_dropped_results on for half the race-log rows.
# Then ANALYZE, and for each question (the README's query) the median
# execution time of RUNS runs of EXPLAIN (ANALYZE, FORMAT JSON) with the
# plan's index, the planning time, and the row count; also the 1.1
# README's refund query (race_log joined to attempts, by time) for
# comparison, and how long the 1.2 update's fill of the race log's new
# columns takes on these rows (run in a transaction rolled back).
#
set -euo pipefail
N=${N:-1000000}
RUNS=${RUNS:-7}
DB=bench_audit
PSQL=(psql -X -q -v ON_ERROR_STOP=1)

"${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
t0=$(date +%s)
"${PSQL[@]}" -d $DB <<EOF
CREATE EXTENSION idemjob;
SET session_replication_role = replica;
SET work_mem = '256MB';
CREATE UNLOGGED TABLE h AS
SELECT i, i % 1000 AS c,
	idemjob.uuid_v7() AS job_id, idemjob.uuid_v7() AS a1, idemjob.uuid_v7() AS a2,
	'cust-' || (hashint4(i) & 65535) % 20000 AS owner_id,
	CASE WHEN i % 10 < 7 THEN 'charge_card' ELSE 'send_email' END AS intent,
	(ARRAY['stripe', 'adyen', 'braintree'])[1 + i % 3] AS p1,
	(ARRAY['adyen', 'braintree', 'stripe'])[1 + i % 3] AS p2,
	now() - (i::float8 / $N) * interval '30 days' AS at,
	(200 + (hashint4(i * 7) & 65535) % 59800) * interval '1 ms' AS late
FROM generate_series(1, $N) i;
-- in doubt: 200 recent jobs
UPDATE h SET c = 1000 WHERE i <= 200 * 997 AND i % 997 = 0;
INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, params, provider, state,
	version, attempt_count, completed_by, result, created_at, updated_at, completed_at,
	run_at, error, cancel_reason, owner_hash)
SELECT job_id, owner_id, 'order-' || i, intent, jsonb_build_object('amount', i % 5000, 'currency', 'EUR'), p1,
	(CASE WHEN c = 1000 THEN 'in_doubt' WHEN c BETWEEN 30 AND 34 THEN 'cancelled'
	      WHEN c BETWEEN 40 AND 59 THEN 'failed' ELSE 'succeeded' END)::idemjob.job_state,
	CASE WHEN c = 1000 THEN 0 WHEN c BETWEEN 30 AND 34 THEN 2 ELSE 1 END,
	CASE WHEN c < 40 AND c NOT BETWEEN 30 AND 34 THEN 2 ELSE 1 END,
	CASE WHEN c < 30 OR c BETWEEN 35 AND 39 THEN a2 WHEN c >= 60 AND c < 1000 THEN a1 END,
	CASE WHEN c < 30 OR c BETWEEN 35 AND 39 OR (c >= 60 AND c < 1000)
		THEN jsonb_build_object('charge_id', 'ch_' || i) END,
	at - interval '3 s', at, CASE WHEN c < 1000 THEN at END, at - interval '3 s',
	CASE WHEN c BETWEEN 40 AND 59 THEN '{"code": "card_declined"}'::jsonb END,
	CASE WHEN c BETWEEN 30 AND 34 THEN 'customer gave up' END, owner_id
FROM h;
-- attempt 1
INSERT INTO idemjob.attempts (id, job_id, owner_id, attempt_no, provider, state, read_version,
	worker, started_at, deadline, finished_at, error, result_sha256, unknown_at, dropped_result,
	owner_hash)
SELECT a1, job_id, owner_id, 1, p1,
	(CASE WHEN c = 1000 THEN 'unknown' WHEN c < 35 THEN 'superseded'
	      WHEN c < 60 THEN 'failed' ELSE 'succeeded' END)::idemjob.attempt_state,
	0, 'worker-' || i % 16, at - interval '3 s', at + interval '27 s',
	CASE WHEN c < 1000 THEN CASE WHEN c < 35 THEN at + late ELSE at END END,
	CASE WHEN c = 1000 AND i % 2 = 0 THEN '{"code": "unknown", "reason": "deadline"}'::jsonb
	     WHEN c = 1000 THEN '{"code": "unknown", "reason": "provider timeout"}'::jsonb
	     WHEN c < 30 THEN '{"code": "cancelled", "reason": "slow"}'::jsonb
	     WHEN c < 35 THEN '{"code": "cancelled", "reason": "stuck"}'::jsonb
	     WHEN c < 40 THEN '{"code": "contract_violation", "errors": []}'::jsonb
	     WHEN c < 60 THEN '{"code": "card_declined"}'::jsonb END,
	CASE WHEN c < 40 THEN sha256(convert_to(jsonb_build_object('charge_id', 'late_' || i)::text, 'UTF8')) END,
	CASE WHEN c = 1000 THEN at END,
	CASE WHEN c < 40 AND i % 2 = 0 THEN jsonb_build_object('charge_id', 'late_' || i) END, owner_id
FROM h;
-- attempt 2 (the winner) of the lost races and the rejected ones
INSERT INTO idemjob.attempts (id, job_id, owner_id, attempt_no, provider, state, read_version,
	worker, started_at, deadline, finished_at, owner_hash)
SELECT a2, job_id, owner_id, 2, CASE WHEN c < 30 THEN p2 ELSE p1 END, 'succeeded', 0,
	'worker-' || (i + 1) % 16, at - interval '1 s', at + interval '29 s', at, owner_id
FROM h WHERE c < 30 OR c BETWEEN 35 AND 39;
-- the race log: one row per result not committed
INSERT INTO idemjob.race_log (logged_at, job_id, owner_id, attempt_id, winner_attempt_id,
	expected_version, found_version, reason, result_sha256, result_bytes, late_by, provider,
	intent, idempotency_key, winner_provider, dropped_result, fenced_at, owner_hash)
SELECT CASE WHEN c < 35 THEN at + late ELSE at - interval '2 s' END, job_id, owner_id, a1,
	CASE WHEN c < 30 THEN a2 END, 0, CASE WHEN c < 30 THEN 1 WHEN c < 35 THEN 2 ELSE 0 END,
	CASE WHEN c < 30 THEN 'slot_taken' WHEN c < 35 THEN 'version_moved' ELSE 'rejected' END,
	sha256(convert_to(r::text, 'UTF8')), octet_length(r::text),
	CASE WHEN c < 30 THEN late END, p1, intent, 'order-' || i,
	CASE WHEN c < 30 THEN p2 END, CASE WHEN i % 2 = 0 THEN r END,
	CASE WHEN c BETWEEN 30 AND 34 THEN at END, owner_id
FROM h, LATERAL (SELECT jsonb_build_object('charge_id', 'late_' || i) AS r) x
WHERE c < 40;
RESET session_replication_role;
DROP TABLE h;
VACUUM ANALYZE idemjob.jobs, idemjob.attempts, idemjob.race_log;
SELECT (SELECT count(*) FROM idemjob.jobs) AS jobs, (SELECT count(*) FROM idemjob.attempts) AS attempts,
	(SELECT count(*) FROM idemjob.race_log) AS race_log_rows,
	(SELECT count(*) FROM idemjob.in_doubt) AS in_doubt,
	pg_size_pretty(pg_total_relation_size('idemjob.race_log')) AS race_log_size;
EOF
echo "# loaded $N jobs in $(( $(date +%s) - t0 )) s"

# a customer with a few extra charges, as an auditor would pick one
cust=$("${PSQL[@]}" -d $DB -At -c "SELECT owner_id FROM idemjob.race_log WHERE intent = 'charge_card'
	GROUP BY owner_id ORDER BY count(*) DESC, owner_id LIMIT 1")

declare -A Q
Q[1-charged-twice]="SELECT idempotency_key, provider, reason, dropped_result ->> 'charge_id' AS extra_charge
  FROM idemjob.compensations WHERE owner_id = '$cust' AND intent = 'charge_card'"
Q[2-refunds]="SELECT * FROM idemjob.compensations
 WHERE intent = 'charge_card' AND logged_at >= now() - interval '1 day' ORDER BY logged_at"
Q[3-providers]="SELECT provider, count(*) FILTER (WHERE reason <> 'rejected') AS lost,
       count(*) FILTER (WHERE reason = 'rejected') AS rejected,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY late_by) AS median_late_by
  FROM idemjob.compensations
 WHERE intent = 'charge_card' AND logged_at >= now() - interval '1 day'
 GROUP BY provider"
Q[4-stuck]="SELECT job_id, intent, provider, worker, age, reason FROM idemjob.in_doubt ORDER BY age DESC"
Q[old-1.1-refunds]="SELECT r.logged_at, r.job_id, r.provider, r.reason, r.late_by,
       a.dropped_result ->> 'charge_id' AS charge_to_refund
  FROM idemjob.race_log r JOIN idemjob.attempts a ON a.id = r.attempt_id
 WHERE r.logged_at > now() - interval '1 day'"

echo "# customer: $cust; median of $RUNS runs of EXPLAIN (ANALYZE, FORMAT JSON)"
printf '| question | rows | execution ms (median) | planning ms (median) | scans |\n|---|---|---|---|---|\n'
# warm the cache once
for k in "${!Q[@]}"; do "${PSQL[@]}" -d $DB -c "${Q[$k]}" >/dev/null; done
for k in $(printf '%s\n' "${!Q[@]}" | sort); do
	"${PSQL[@]}" -d $DB -At -F ' | ' <<EOF
CREATE TEMP TABLE t (plan json);
DO \$\$
DECLARE p json;
BEGIN
	FOR i IN 1..$RUNS LOOP
		EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || \$q\$${Q[$k]}\$q\$ INTO p;
		INSERT INTO t VALUES (p);
	END LOOP;
END \$\$;
WITH s AS (SELECT (plan -> 0 ->> 'Execution Time')::float8 AS ex,
		(plan -> 0 ->> 'Planning Time')::float8 AS pl, plan FROM t)
SELECT '| $k', (SELECT (plan -> 0 -> 'Plan' ->> 'Actual Rows') FROM t LIMIT 1),
	round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ex)::numeric, 2),
	round(percentile_cont(0.5) WITHIN GROUP (ORDER BY pl)::numeric, 2),
	(WITH RECURSIVE n(node) AS (
		SELECT (SELECT plan -> 0 -> 'Plan' FROM t LIMIT 1)
		UNION ALL
		SELECT json_array_elements(node -> 'Plans') FROM n WHERE node -> 'Plans' IS NOT NULL)
	 SELECT string_agg(DISTINCT (node ->> 'Node Type') || coalesce(' on ' || (node ->> 'Index Name'), ''), ', ')
	 FROM n WHERE node ->> 'Node Type' LIKE '%Scan' AND node ->> 'Node Type' <> 'Subquery Scan') || ' |'
FROM s;
EOF
done

# the 1.2 update's fill of the new race-log columns on these rows, and its
# two new indexes, as the update script runs them (rolled back)
echo "# the 1.2 update's race-log fill (two UPDATEs) and its two CREATE INDEX:"
"${PSQL[@]}" -d $DB <<'EOF'
BEGIN;
ALTER TABLE idemjob.race_log DISABLE TRIGGER race_log_guard;
DROP INDEX idemjob.race_log_owner_logged_at;
DROP INDEX idemjob.race_log_intent_logged_at;
\timing on
UPDATE idemjob.race_log r SET
	(intent, idempotency_key) = (SELECT j.intent, j.idempotency_key FROM idemjob.jobs j
								 WHERE j.id OPERATOR(pg_catalog.=) r.job_id),
	winner_provider = (SELECT w.provider FROM idemjob.attempts w
					   WHERE w.id OPERATOR(pg_catalog.=) r.winner_attempt_id),
	dropped_result = (SELECT a.dropped_result FROM idemjob.attempts a
					  WHERE a.id OPERATOR(pg_catalog.=) r.attempt_id);
UPDATE idemjob.race_log r SET idempotency_key = s.idempotency_key
	FROM idemjob.spent_keys s
	WHERE r.idempotency_key IS NULL
		AND s.job_id OPERATOR(pg_catalog.=) r.job_id
		AND s.owner_id OPERATOR(pg_catalog.=) r.owner_id;
CREATE INDEX race_log_owner_logged_at ON idemjob.race_log (owner_id, logged_at);
CREATE INDEX race_log_intent_logged_at ON idemjob.race_log (intent, logged_at);
\timing off
ROLLBACK;
EOF
