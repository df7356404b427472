-- W3 and W6 floor: submit, start (job UPDATE + attempt INSERT in one statement),
-- complete (the CAS UPDATE of the job + the attempt's UPDATE in one statement;
-- on a lost CAS, the attempt superseded and a race_log row).
\set k random(1, 1000000000000000)
\set o :k % 1000
\set created 0
INSERT INTO floor.jobs (owner_id, idempotency_key, intent, params, provider)
  VALUES (:o, :k, :intent, jsonb_build_object('amount', :k::bigint, 'currency', 'EUR'), 'default')
  ON CONFLICT (owner_id, idempotency_key) DO NOTHING
  RETURNING 1 AS created, id AS job_id, state, version, pg_notify('idemjob', :intent) \aset
\if :created = 0
-- the key exists: read the job and compare the request (a mismatch is IJ001)
SELECT id AS job_id, state, version, result,
       (intent = :intent AND params = jsonb_build_object('amount', :k::bigint, 'currency', 'EUR')
        AND provider = 'default')::int AS same
  FROM floor.jobs WHERE owner_id = :o AND idempotency_key = :k \gset
\endif
WITH j AS (
  UPDATE floor.jobs SET attempt_count = attempt_count + 1, state = 'running', updated_at = now()
   WHERE id = :job_id AND state = 'pending'
   RETURNING id, owner_id, provider, version, attempt_count)
INSERT INTO floor.attempts (job_id, owner_id, attempt_no, provider, read_version, deadline)
SELECT id, owner_id, attempt_count, provider, version, now() + interval '5 min' FROM j
RETURNING id AS attempt_id, read_version \gset
\set won 0
WITH c AS (
  UPDATE floor.jobs SET state = 'succeeded', result = :result, completed_by = :attempt_id,
         version = version + 1, completed_at = now(), updated_at = now()
   WHERE id = :job_id AND version = :read_version AND completed_by IS NULL
   RETURNING version, pg_notify('idemjob_done', id::text)),
a AS (
  UPDATE floor.attempts SET state = 'succeeded', finished_at = now()
   WHERE id = :attempt_id AND state IN ('started', 'unknown', 'cancelled')
     AND EXISTS (SELECT FROM c))
SELECT 1 AS won, version AS job_version FROM c \aset
\if :won = 0
-- lost: the attempt is superseded, the payload dropped, its fingerprint logged
WITH a AS (
  UPDATE floor.attempts SET state = 'superseded', finished_at = now(),
         result_sha256 = sha256(convert_to(:result::jsonb::text, 'UTF8'))
   WHERE id = :attempt_id AND state IN ('started', 'unknown', 'cancelled')
   RETURNING id, job_id, owner_id, read_version, result_sha256, provider)
INSERT INTO floor.race_log (job_id, owner_id, attempt_id, winner_attempt_id, expected_version,
                            found_version, reason, result_sha256, result_bytes, late_by, provider)
SELECT a.job_id, a.owner_id, a.id, j.completed_by, a.read_version, j.version,
       CASE WHEN j.completed_by IS NULL THEN 'version_moved' ELSE 'slot_taken' END,
       a.result_sha256, octet_length(:result::jsonb::text),
       CASE WHEN j.completed_by IS NOT NULL THEN clock_timestamp() - j.completed_at END,
       a.provider
  FROM a JOIN floor.jobs j ON j.id = a.job_id;
\endif
