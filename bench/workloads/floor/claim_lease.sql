-- W7 floor, the two-phase claim: claim one due job with a lease (as
-- claim_one.sql, the attempt's lease_until set), confirm it in a second
-- transaction (one UPDATE: inside its lease, its job not final), then
-- complete it in a third (the CAS, as claim_one.sql).
\set got 0
WITH j AS (
  UPDATE floor.jobs SET state = 'running', attempt_count = attempt_count + 1, updated_at = now()
   WHERE id = (SELECT id FROM floor.jobs
                WHERE state = 'pending' AND run_at <= now()
                ORDER BY priority DESC, run_at, id
                LIMIT 1 FOR UPDATE SKIP LOCKED)
   RETURNING id, owner_id, provider, version, attempt_count)
INSERT INTO floor.attempts (job_id, owner_id, attempt_no, provider, read_version, worker, deadline, lease_until)
SELECT id, owner_id, attempt_count, provider, version, 'w', now() + interval '5 min', now() + interval '5 s' FROM j
RETURNING 1 AS got, id AS attempt_id, job_id, read_version \aset
\if :got = 1
UPDATE floor.attempts a SET lease_until = NULL,
       deadline = CASE WHEN a.deadline < now() THEN now() + (a.deadline - a.started_at) ELSE a.deadline END
  FROM floor.jobs j
 WHERE a.id = :attempt_id AND a.state = 'started' AND a.lease_until >= clock_timestamp()
   AND j.id = a.job_id AND j.state IN ('pending', 'running', 'in_doubt')
RETURNING a.state \aset
WITH c AS (
  UPDATE floor.jobs SET state = 'succeeded', result = '{"ok": true}', completed_by = :attempt_id,
         version = version + 1, completed_at = now(), updated_at = now()
   WHERE id = :job_id AND version = :read_version AND completed_by IS NULL
   RETURNING version, pg_notify('idemjob_done', id::text)),
a AS (
  UPDATE floor.attempts SET state = 'succeeded', finished_at = now()
   WHERE id = :attempt_id AND state IN ('started', 'unknown', 'cancelled')
     AND EXISTS (SELECT FROM c))
SELECT 1 AS won, version AS job_version FROM c \aset
\endif
