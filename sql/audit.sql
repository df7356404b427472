-- Auditing (issue 21): a race log that stands alone, compensations, the
-- reason a job is stuck.  Every result that was not committed (lost, or
-- rejected by the contract) is one row of idemjob.compensations, with what
-- it takes to undo it, the same before and after purge(); the four audit
-- questions are each one query, read through indexes.
\set VERBOSITY sqlstate
-- this test's owner only (purge, expire_attempts and the views are bound)
SET idemjob.owner_binding = 'setting:au.owner';
SET au.owner = 'au';
SET idemjob.keep_dropped_results = on;
SELECT idemjob.define_contract('au_charge',
	'{"type": "object", "required": ["charge_id"], "properties": {"charge_id": {"type": "string"}}}');
SELECT provider FROM idemjob.certify_provider('au_charge', 'p2');

-- 1. a lost race (slot_taken): a1 gave up on p1, a2 won on p2, then a1's
-- provider answers
SELECT job_id AS j1 FROM idemjob.submit('au', 'k1', 'au_charge', '{}', 'p1') \gset
SELECT id AS a1 FROM idemjob.start_attempt(:'j1') \gset
SELECT state FROM idemjob.cancel_attempt(:'a1', 'slow');
SELECT id AS a2 FROM idemjob.start_attempt(:'j1', 'p2') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a2', '{"charge_id": "ch_a2"}');
SELECT outcome, winner_attempt_id = :'a2' AS winner_a2
  FROM idemjob.complete_attempt(:'a1', '{"charge_id": "ch_a1"}');

-- 2. a version_moved loser: b1 fenced, its job cancelled, then b1 answers
SELECT job_id AS j2 FROM idemjob.submit('au', 'k2', 'au_charge', '{}', 'p1') \gset
SELECT id AS b1 FROM idemjob.start_attempt(:'j2') \gset
SELECT state FROM idemjob.cancel_attempt(:'b1', 'stuck', fence => true);
SELECT pg_sleep(0.02);
SELECT state FROM idemjob.cancel_job(:'j2', 'customer gave up');
SELECT outcome, winner_attempt_id IS NULL AS no_winner
  FROM idemjob.complete_attempt(:'b1', '{"charge_id": "ch_b1"}');

-- 3. a rejected result (the provider charged, but broke the contract),
-- then a second attempt that wins
SELECT job_id AS j3 FROM idemjob.submit('au', 'k3', 'au_charge', '{}', 'p1') \gset
SELECT id AS c1 FROM idemjob.start_attempt(:'j3') \gset
SELECT outcome FROM idemjob.complete_attempt(:'c1', '{"charge_id": 123}');
SELECT id AS c2 FROM idemjob.start_attempt(:'j3') \gset
SELECT outcome FROM idemjob.complete_attempt(:'c2', '{"charge_id": "ch_c2"}');
-- retried: the same answer, and no second row (one per attempt)
SELECT outcome FROM idemjob.complete_attempt(:'c1', '{"charge_id": 123}');
SELECT count(*) AS rows_of_c1 FROM idemjob.race_log WHERE attempt_id = :'c1';
-- a retried loser adds none either
SELECT outcome FROM idemjob.complete_attempt(:'a1', '{"charge_id": "ch_a1"}');
SELECT count(*) AS rows_of_a1 FROM idemjob.race_log WHERE attempt_id = :'a1';

-- 4. and 5. two jobs alike: an attempt in doubt, fenced, the second wins;
-- the first answers before the purge (j5) or after it (j4)
SELECT job_id AS j4 FROM idemjob.submit('au', 'k4', 'au_charge', '{}', 'p1') \gset
SELECT id AS d1 FROM idemjob.start_attempt(:'j4') \gset
SELECT state FROM idemjob.mark_unknown(:'d1', 'provider timeout');
SELECT state FROM idemjob.cancel_attempt(:'d1', 'gave up', fence => true);
SELECT id AS d2 FROM idemjob.start_attempt(:'j4', 'p2') \gset
SELECT outcome FROM idemjob.complete_attempt(:'d2', '{"charge_id": "ch_d2"}');
SELECT job_id AS j5 FROM idemjob.submit('au', 'k5', 'au_charge', '{}', 'p1') \gset
SELECT id AS e1 FROM idemjob.start_attempt(:'j5') \gset
SELECT state FROM idemjob.mark_unknown(:'e1', 'provider timeout');
SELECT state FROM idemjob.cancel_attempt(:'e1', 'gave up', fence => true);
SELECT id AS e2 FROM idemjob.start_attempt(:'j5', 'p2') \gset
SELECT outcome FROM idemjob.complete_attempt(:'e2', '{"charge_id": "ch_e2"}');
SELECT outcome FROM idemjob.complete_attempt(:'e1', '{"charge_id": "ch_e1"}');

-- stuck: three jobs in doubt, for three reasons
SELECT job_id AS j8 FROM idemjob.submit('au', 'k8', 'au_charge', '{}', 'p1') \gset
SELECT id AS h1 FROM idemjob.start_attempt(:'j8', timeout => '1 ms') \gset
SELECT pg_sleep(0.01);
SELECT idemjob.expire_attempts() AS expired;
SELECT job_id AS j7 FROM idemjob.submit('au', 'k7', 'au_charge', '{}', 'p1') \gset
SELECT id AS g1 FROM idemjob.start_attempt(:'j7', worker => 'w1') \gset
SELECT state FROM idemjob.mark_unknown(:'g1', 'provider timeout');
SELECT job_id AS j6 FROM idemjob.submit('au', 'k6', 'au_charge', '{}', 'p1') \gset
SELECT id AS f1 FROM idemjob.start_attempt(:'j6', timeout => '1 ms') \gset
SELECT pg_sleep(0.01);

-- every result that was not committed, once, with all its columns
SELECT CASE attempt_id WHEN :'a1' THEN 'a1' WHEN :'b1' THEN 'b1' WHEN :'c1' THEN 'c1'
		WHEN :'e1' THEN 'e1' END AS attempt,
	CASE job_id WHEN :'j1' THEN 'j1' WHEN :'j2' THEN 'j2' WHEN :'j3' THEN 'j3'
		WHEN :'j5' THEN 'j5' END AS job,
	owner_id, idempotency_key AS key, intent, provider, reason,
	CASE winner_attempt_id WHEN :'a2' THEN 'a2' WHEN :'e2' THEN 'e2' END AS winner,
	winner_provider, late_by > '0' AS late, late_by < '1 min' AS recent,
	result_bytes, encode(result_sha256, 'hex') = encode(sha256(convert_to(dropped_result::text, 'UTF8')), 'hex') AS sha_of_kept,
	dropped_result ->> 'charge_id' AS charge_to_refund, expected_version, found_version
FROM idemjob.compensations ORDER BY logged_at;
-- late_by of the version_moved loser: since its fence (the cancellation),
-- 20 ms before the job's cancellation; in the race log, fenced_at, and
-- late_by NULL as the contract has it
SELECT c.late_by - (c.logged_at - j.completed_at) >= '20 ms' AS since_fence,
	c.late_by = r.logged_at - r.fenced_at AS from_fenced_at, r.late_by IS NULL AS contract_late_by
FROM idemjob.compensations c, idemjob.race_log r, idemjob.jobs j
WHERE c.attempt_id = :'b1' AND r.attempt_id = :'b1' AND j.id = :'j2';

CREATE TEMP TABLE before_purge AS SELECT * FROM idemjob.compensations;
SELECT pg_sleep(0.01);
SELECT idemjob.purge('0') AS purged;
SELECT count(*) AS jobs_left FROM idemjob.jobs WHERE id IN (:'j1', :'j2', :'j3', :'j4', :'j5');
-- the late result after the purge: lost, logged from the spent key
SELECT outcome, winner_attempt_id = :'d2' AS winner_d2
  FROM idemjob.complete_attempt(:'d1', '{"charge_id": "ch_d1"}');
-- compensations after the purge: the rows of before, unchanged ...
SELECT (SELECT count(*) FROM before_purge) AS before,
	(SELECT count(*) FROM (TABLE before_purge EXCEPT SELECT * FROM idemjob.compensations) x) AS lost_by_purge;
-- ... and d1's, as e1's was before the purge (same job history)
SELECT CASE attempt_id WHEN :'d1' THEN 'd1 (after purge)' WHEN :'e1' THEN 'e1 (before purge)' END AS attempt,
	job_id IN (:'j4', :'j5') AS its_job, owner_id, idempotency_key AS key, intent, provider, reason,
	winner_attempt_id IN (:'d2', :'e2') AS its_winner, winner_provider,
	late_by > '0' AS late, result_bytes, dropped_result ->> 'charge_id' AS charge_to_refund,
	expected_version, found_version
FROM idemjob.compensations WHERE attempt_id IN (:'d1', :'e1') ORDER BY logged_at;

--
-- The four audit questions, one query each
--
-- "Was customer au charged twice?"  Each row is a charge besides the one
-- the job kept.
SELECT idempotency_key, provider, reason, dropped_result ->> 'charge_id' AS extra_charge
  FROM idemjob.compensations
 WHERE owner_id = 'au' AND intent = 'au_charge'
 ORDER BY logged_at;
-- "What must be refunded?"  Since a time (the last refund run).
SELECT owner_id, idempotency_key, provider, dropped_result ->> 'charge_id' AS refund
  FROM idemjob.compensations
 WHERE intent = 'au_charge' AND logged_at >= now() - interval '1 day'
 ORDER BY logged_at;
-- "Which provider loses races, and by how much?"
SELECT provider, count(*) FILTER (WHERE reason <> 'rejected') AS lost,
	count(*) FILTER (WHERE reason = 'rejected') AS rejected,
	max(late_by) > '0' AS late_by_known, max(late_by) < '1 min' AS within_a_minute
  FROM idemjob.compensations
 WHERE intent = 'au_charge' AND logged_at >= now() - interval '1 day'
 GROUP BY provider ORDER BY provider;
-- "What is stuck, and why?"
SELECT CASE attempt_id WHEN :'f1' THEN 'f1' WHEN :'g1' THEN 'g1' WHEN :'h1' THEN 'h1' END AS attempt,
	intent, provider, worker, state, age > '0' AS aged, reason
  FROM idemjob.in_doubt ORDER BY reason;

RESET idemjob.keep_dropped_results;
RESET au.owner;
RESET idemjob.owner_binding;

--
-- The same questions on 20,000 jobs and 20,000 race-log rows of other
-- owners (a raw fill, as the functions would write them; the guards set
-- aside), analyzed: each is read through an index
--
SET session_replication_role = replica;
CREATE TEMP TABLE fill AS
SELECT i, idemjob.uuid_v7() AS job_id, idemjob.uuid_v7() AS att,
	'au-cust-' || (i % 2000) AS owner_id,
	CASE WHEN i % 5 = 0 THEN 'au_mail' ELSE 'au_charge' END AS intent,
	'p' || (i % 4 + 1) AS provider,
	now() - i * interval '2 min' AS at
FROM generate_series(1, 20000) i;
INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, params, provider, state,
	version, attempt_count, completed_by, result, created_at, updated_at, completed_at, run_at, owner_hash)
SELECT job_id, owner_id, 'k' || i, intent, '{}', provider, 'succeeded', 1, 1, att,
	'{"charge_id": "x"}', at - interval '1 s', at, at, at - interval '1 s', owner_id FROM fill;
INSERT INTO idemjob.attempts (id, job_id, owner_id, attempt_no, provider, state, read_version,
	started_at, finished_at, owner_hash)
SELECT att, job_id, owner_id, 1, provider, 'succeeded', 0, at - interval '1 s', at, owner_id FROM fill;
INSERT INTO idemjob.race_log (logged_at, job_id, owner_id, attempt_id, winner_attempt_id,
	expected_version, found_version, reason, result_sha256, result_bytes, late_by, provider,
	intent, idempotency_key, winner_provider, owner_hash)
SELECT at + interval '3 s', job_id, owner_id, idemjob.uuid_v7(), att, 0, 1, 'slot_taken',
	sha256('{}'), 2, interval '3 s', 'p' || ((i + 1) % 4 + 1), intent, 'k' || i, provider,
	owner_id FROM fill;
RESET session_replication_role;
ANALYZE idemjob.jobs, idemjob.attempts, idemjob.race_log;

-- how each query reads each table: through an index, or a sequential scan
-- (the plan's node types, not its text: which of two fitting indexes the
-- planner takes may differ between versions)
CREATE FUNCTION pg_temp.scans(q text) RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE
	p jsonb;
BEGIN
	EXECUTE 'EXPLAIN (FORMAT JSON, COSTS OFF) ' || q INTO p;
	RETURN QUERY
	-- (a partition of the partitioned layout, idemjob.partitions, as its table)
	SELECT DISTINCT regexp_replace(n ->> 'Relation Name', '_p[0-9]+$', '') || ': ' ||
		CASE WHEN n ->> 'Node Type' = 'Seq Scan' THEN 'sequential scan' ELSE 'index' END
	FROM jsonb_path_query(p, 'lax $.**') n
	WHERE jsonb_typeof(n) = 'object' AND n ? 'Relation Name'
	ORDER BY 1;
END
$f$;
SELECT pg_temp.scans($q$
SELECT idempotency_key, provider, reason, dropped_result ->> 'charge_id' AS extra_charge
  FROM idemjob.compensations
 WHERE owner_id = 'au-cust-7' AND intent = 'au_charge'
 ORDER BY logged_at
$q$);
SELECT pg_temp.scans($q$
SELECT owner_id, idempotency_key, provider, dropped_result ->> 'charge_id' AS refund
  FROM idemjob.compensations
 WHERE intent = 'au_charge' AND logged_at >= now() - interval '1 day'
 ORDER BY logged_at
$q$);
SELECT pg_temp.scans($q$
SELECT provider, count(*) FILTER (WHERE reason <> 'rejected') AS lost,
	count(*) FILTER (WHERE reason = 'rejected') AS rejected,
	percentile_disc(0.5) WITHIN GROUP (ORDER BY late_by) AS median_late_by,
	max(late_by) AS max_late_by
  FROM idemjob.compensations
 WHERE intent = 'au_charge' AND logged_at >= now() - interval '1 day'
 GROUP BY provider ORDER BY provider
$q$);
SELECT pg_temp.scans($q$
SELECT * FROM idemjob.in_doubt ORDER BY age DESC
$q$);
-- and their answers on the fill: customer au-cust-7's 10 extra charges,
-- a day of refunds, the providers of that day
SELECT count(*) AS extra_charges FROM idemjob.compensations
 WHERE owner_id = 'au-cust-7' AND intent = 'au_charge';
SELECT count(*) AS refunds_of_a_day FROM idemjob.compensations
 WHERE intent = 'au_charge' AND logged_at >= now() - interval '1 day';
SELECT provider, count(*) FILTER (WHERE reason <> 'rejected') AS lost,
	percentile_disc(0.5) WITHIN GROUP (ORDER BY late_by) AS median_late_by
  FROM idemjob.compensations
 WHERE intent = 'au_charge' AND logged_at >= now() - interval '1 day'
 GROUP BY provider ORDER BY provider;

-- owner_visible() is PARALLEL SAFE: the views' filter in parallel workers,
-- which read the owner bindings with the statement's snapshot (taking the
-- latest one there was "cannot update SecondarySnapshot during a parallel
-- operation"), and apply the binding as the leader does
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SELECT count(*) AS visible FROM idemjob.race_log WHERE idemjob.owner_visible(owner_id) AND owner_id LIKE 'au-cust-%';
SET idemjob.owner_binding = 'setting:au.owner';
SET au.owner = 'au-cust-7';
SELECT count(*) AS visible_bound FROM idemjob.race_log WHERE idemjob.owner_visible(owner_id);
RESET au.owner;
RESET idemjob.owner_binding;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

-- leave nothing for the tests after this one
SET session_replication_role = replica;
DELETE FROM idemjob.race_log WHERE owner_id LIKE 'au%';
DELETE FROM idemjob.attempts WHERE owner_id LIKE 'au%';
DELETE FROM idemjob.jobs WHERE owner_id LIKE 'au%';
DELETE FROM idemjob.spent_keys WHERE owner_id LIKE 'au%';
DELETE FROM idemjob.certifications WHERE intent = 'au_charge';
DELETE FROM idemjob.contracts WHERE intent = 'au_charge';
RESET session_replication_role;
ANALYZE idemjob.jobs, idemjob.attempts, idemjob.race_log;
