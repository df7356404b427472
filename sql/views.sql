-- the operator views: in_doubt, queue_stats, provider_stats
\set VERBOSITY sqlstate

-- their columns, in order, with their types
SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod)
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
 WHERE c.relnamespace = 'idemjob'::regnamespace
   AND c.relname IN ('in_doubt', 'queue_stats', 'provider_stats') AND a.attnum > 0
 ORDER BY c.relname, a.attnum;

-- small cases, each row checked
SELECT job_id AS p FROM idemjob.submit('v1', 'pending', 'v_mail', '{}') \gset
SELECT job_id AS later FROM idemjob.submit('v1', 'later', 'v_mail', '{}', run_at => now() + interval '1 hour') \gset
SELECT job_id AS r FROM idemjob.submit('v1', 'running', 'v_mail', '{}', 'smtp-a') \gset
SELECT id AS r_a FROM idemjob.start_attempt(:'r', NULL, '1 hour', 'w1') \gset
SELECT job_id AS u FROM idemjob.submit('v2', 'unknown', 'v_mail', '{}', 'smtp-b') \gset
SELECT id AS u_a FROM idemjob.start_attempt(:'u', NULL, '1 hour', 'w2') \gset
SELECT state FROM idemjob.mark_unknown(:'u_a');
-- started, past its deadline: in doubt although nobody said so
SELECT job_id AS o FROM idemjob.submit('v1', 'overdue', 'v_sms', '{}', 'twilio') \gset
SELECT id AS o_a FROM idemjob.start_attempt(:'o', NULL, '10 ms', 'w3') \gset
SELECT pg_sleep(0.05);

SELECT job_id = :'u' AS job, owner_id, intent, attempt_id = :'u_a' AS attempt, attempt_no,
       provider, worker, state, started_at IS NOT NULL AS started, deadline > started_at AS deadline_ok,
       unknown_at IS NOT NULL AS unknown_at_set, in_doubt_since = unknown_at AS since_unknown,
       age = now() - unknown_at AS age_ok
  FROM idemjob.in_doubt WHERE job_id = :'u';
SELECT job_id = :'o' AS job, owner_id, intent, attempt_id = :'o_a' AS attempt, provider, worker,
       state, unknown_at, in_doubt_since = deadline AS since_deadline, age > interval '0' AS age_ok
  FROM idemjob.in_doubt WHERE job_id = :'o';
-- the running attempt within its deadline is not in doubt
SELECT count(*) FROM idemjob.in_doubt WHERE job_id = :'r';

SELECT intent, due, scheduled, running, in_doubt, oldest_due_age > interval '0' AS aged
  FROM idemjob.queue_stats WHERE intent LIKE 'v\_%' ORDER BY intent;

-- provider_stats: one attempt of every outcome for intent "v_quote"
SELECT idemjob.define_contract('v_quote', '{"type": "object", "required": ["price"]}') IS NOT NULL AS defined;
SELECT job_id AS q1 FROM idemjob.submit('v1', 'q1', 'v_quote', '{}', 'acme') \gset
SELECT id AS q1_a FROM idemjob.start_attempt(:'q1') \gset
SELECT pg_sleep(0.02);
SELECT outcome FROM idemjob.complete_attempt(:'q1_a', '{"price": 1}');
SELECT job_id AS q2 FROM idemjob.submit('v1', 'q2', 'v_quote', '{}', 'acme') \gset
SELECT id AS q2_a FROM idemjob.start_attempt(:'q2') \gset
SELECT state FROM idemjob.cancel_job(:'q2', 'no longer needed');
SELECT outcome FROM idemjob.complete_attempt(:'q2_a', '{"price": 2}');
SELECT job_id AS q3 FROM idemjob.submit('v1', 'q3', 'v_quote', '{}', 'acme') \gset
SELECT outcome FROM idemjob.complete_attempt((SELECT id FROM idemjob.start_attempt(:'q3')), '{"cost": 3}');
SELECT state FROM idemjob.fail_attempt((SELECT id FROM idemjob.start_attempt(:'q3')), '{"code": "timeout"}', true);
SELECT state FROM idemjob.cancel_attempt((SELECT id FROM idemjob.start_attempt(:'q3')), 'worker lost', false);
SELECT id AS q3_d FROM idemjob.start_attempt(:'q3') \gset
SELECT intent, provider, attempts, succeeded, superseded, rejected, failed, in_doubt, cancelled,
       p50_ms > 0 AS p50_ok, p95_ms >= p50_ms AS p95_ok, last_started_at IS NOT NULL AS last_ok
  FROM idemjob.provider_stats WHERE intent LIKE 'v\_%' ORDER BY intent, provider;

-- under an owner binding, another owner's rows are absent
SET idemjob.owner_binding = 'setting:app.owner';
SET app.owner = 'v1';
SELECT owner_id, intent, state FROM idemjob.in_doubt WHERE intent LIKE 'v\_%' ORDER BY intent;
SELECT intent, due, scheduled, running, in_doubt FROM idemjob.queue_stats WHERE intent LIKE 'v\_%' ORDER BY intent;
SELECT intent, provider, attempts FROM idemjob.provider_stats WHERE intent LIKE 'v\_%' ORDER BY intent, provider;
RESET idemjob.owner_binding;
RESET app.owner;

-- 6,000 jobs, most of them finished: the views read the jobs and
-- attempts in flight through indexes, never a scan of either table
DO $$
DECLARE
  j uuid;
  a uuid;
BEGIN
  FOR i IN 1..6000 LOOP
    SELECT s.job_id INTO j FROM idemjob.submit('bulk' || (i % 10), 'k' || i, 'bulk' || (i % 3), '{}') s;
    IF i <= 5800 THEN
      SELECT s.id INTO a FROM idemjob.start_attempt(j) s;
      PERFORM idemjob.complete_attempt(a, '{}');
    ELSIF i <= 5850 THEN
      PERFORM idemjob.start_attempt(j, NULL, '1 hour');
    ELSIF i <= 5900 THEN
      PERFORM idemjob.mark_unknown((SELECT s.id FROM idemjob.start_attempt(j) s));
    END IF;
  END LOOP;
END $$;
ANALYZE idemjob.jobs, idemjob.attempts;
-- how each table is read: through an index (plain, bitmap or index-only:
-- the planner's pick among the indexes depends on statistics) or by a
-- sequential scan, which must never show up even where the planner is
-- told to avoid one: the views can be read through an index.  (Whether it
-- prefers to depends on how much of the table is active: in a database the
-- whole suite ran in after an upgrade, queue_stats once read jobs whole.)
CREATE FUNCTION pg_temp.scans(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    IF line ~ 'Bitmap Index Scan' THEN
      CONTINUE;
    ELSIF line ~ 'Seq Scan' THEN
      RETURN NEXT 'sequential scan of ' || regexp_replace(substring(line from ' on (\S+)'), '_p[0-9]+$', '');
    ELSIF line ~ 'Scan' THEN
      -- (a partition of the partitioned layout, idemjob.partitions, as its table)
      RETURN NEXT 'index scan of ' || regexp_replace(substring(line from ' on (\S+)'), '_p[0-9]+$', '');
    END IF;
  END LOOP;
END $$;
SET enable_seqscan = off;
SELECT DISTINCT s FROM pg_temp.scans('SELECT * FROM idemjob.in_doubt') s ORDER BY 1;
SELECT DISTINCT s FROM pg_temp.scans('SELECT * FROM idemjob.queue_stats') s ORDER BY 1;
RESET enable_seqscan;
SELECT count(*) AS in_doubt FROM idemjob.in_doubt WHERE intent LIKE 'bulk%';
SELECT intent, due, scheduled, running, in_doubt FROM idemjob.queue_stats
 WHERE intent LIKE 'bulk%' ORDER BY intent;
SELECT sum(attempts) AS attempts, sum(succeeded) AS succeeded, sum(in_doubt) AS in_doubt
  FROM idemjob.provider_stats WHERE intent LIKE 'bulk%';
