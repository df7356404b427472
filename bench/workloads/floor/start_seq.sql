-- profile only: start an attempt on preloaded pending job :base + i.
\set n 100000000000 + 10 * (:base + :i)
\set i :i + 1
WITH j AS (
  UPDATE floor.jobs SET attempt_count = attempt_count + 1, state = 'running', updated_at = now()
   WHERE id = ('00000000-0000-7000-8000-' || :n)::uuid AND state = 'pending'
   RETURNING id, owner_id, provider, version, attempt_count)
INSERT INTO floor.attempts (job_id, owner_id, attempt_no, provider, read_version, deadline)
SELECT id, owner_id, attempt_count, provider, version, now() + interval '5 min' FROM j
RETURNING id AS attempt_id, read_version \gset
