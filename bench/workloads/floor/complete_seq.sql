-- profile only: complete attempt :att of preloaded job :base + i.
\set j 100000000000 + 10 * (:base + :i)
\set n :j + :att
\set i :i + 1
\set won 0
WITH c AS (
  UPDATE floor.jobs SET state = 'succeeded', result = :result, completed_by = ('00000000-0000-7000-8000-' || :n)::uuid,
         version = version + 1, completed_at = now(), updated_at = now()
   WHERE id = ('00000000-0000-7000-8000-' || :j)::uuid AND version = 0 AND completed_by IS NULL
   RETURNING version, pg_notify('idemjob_done', id::text)),
a AS (
  UPDATE floor.attempts SET state = 'succeeded', finished_at = now()
   WHERE id = ('00000000-0000-7000-8000-' || :n)::uuid AND state IN ('started', 'unknown', 'cancelled')
     AND EXISTS (SELECT FROM c))
SELECT 1 AS won, version AS job_version FROM c \aset
\if :won = 0
-- lost: the attempt is superseded, the payload dropped, its fingerprint logged
WITH a AS (
  UPDATE floor.attempts SET state = 'superseded', finished_at = now(),
         result_sha256 = sha256(convert_to(:result::jsonb::text, 'UTF8'))
   WHERE id = ('00000000-0000-7000-8000-' || :n)::uuid AND state IN ('started', 'unknown', 'cancelled')
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
