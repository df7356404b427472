-- W7 floor: claim one due job (the job UPDATE + the attempt INSERT in one
-- statement, SKIP LOCKED in claim order), then in a second transaction
-- complete it (the CAS UPDATE of the job + the attempt's UPDATE, as
-- lifecycle.sql).  An empty queue claims nothing and completes nothing.
\set got 0
WITH j AS (
  UPDATE floor.jobs SET state = 'running', attempt_count = attempt_count + 1, updated_at = now()
   WHERE id = (SELECT id FROM floor.jobs
                WHERE state = 'pending' AND run_at <= now()
                ORDER BY priority DESC, run_at, id
                LIMIT 1 FOR UPDATE SKIP LOCKED)
   RETURNING id, owner_id, provider, version, attempt_count)
INSERT INTO floor.attempts (job_id, owner_id, attempt_no, provider, read_version, worker, deadline)
SELECT id, owner_id, attempt_count, provider, version, 'w', now() + interval '5 min' FROM j
RETURNING 1 AS got, id AS attempt_id, job_id, read_version \aset
\if :got = 1
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
