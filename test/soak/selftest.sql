-- test/soak/selftest.sql: prove the checker can fail.
--
-- After a soak, break the data the ways a buggy extension would (with the
-- row guards off, as raw DML by a superuser), run check.sql on the broken
-- data, and roll everything back.  run.sh requires each named check to
-- report violations; a checker that stays at 0 here is a defect.

\set ON_ERROR_STOP 1
SET client_min_messages = warning;
BEGIN;
SET LOCAL session_replication_role = replica;	-- the guards (I8) are off
\if :{?snapshot}
\else
\set snapshot f
\endif
\if :snapshot
-- (on Citus run.sh points this script at a snapshot in local tables,
-- which have no indexes: nothing to drop)
\else
DROP INDEX idemjob.attempts_one_in_doubt;		-- I3's backstop is off
\endif

-- a committed result overwritten (on a job a reader saw finished)
UPDATE idemjob.jobs SET result = result || '{"tampered": true}'
WHERE id = (SELECT j.id FROM idemjob.jobs j JOIN soak.history h ON h.job_id = j.id
			WHERE h.fn = 'read' AND h.answer->'result' <> 'null' LIMIT 1);

-- a loser without its race_log row, another with a wrong fingerprint
-- (the first loser still has its attempt: older ones may be purged)
DELETE FROM idemjob.race_log
WHERE attempt_id = (SELECT r.attempt_id FROM idemjob.race_log r
					JOIN idemjob.attempts a ON a.id = r.attempt_id
					ORDER BY r.logged_at LIMIT 1);
UPDATE idemjob.race_log SET result_sha256 = pg_catalog.sha256('tampered')
WHERE attempt_id = (SELECT attempt_id FROM idemjob.race_log ORDER BY logged_at DESC LIMIT 1);

-- a second and third attempt in doubt, and a second winner, on one job
INSERT INTO idemjob.attempts (id, job_id, owner_id, attempt_no, provider, state, read_version, owner_hash)
SELECT gen_random_uuid(), a.job_id, a.owner_id, j.attempt_count + n, a.provider,
	   CASE n WHEN 3 THEN 'succeeded' ELSE 'started' END::idemjob.attempt_state, a.read_version, a.owner_hash
FROM idemjob.jobs j JOIN idemjob.attempts a ON a.id = j.completed_by,
	 generate_series(1, 3) n
WHERE j.id = (SELECT id FROM idemjob.jobs WHERE state = 'succeeded' ORDER BY id LIMIT 1);

-- a job moved to another key
UPDATE idemjob.jobs SET idempotency_key = idempotency_key || '-tampered'
WHERE id = (SELECT job_id FROM soak.history WHERE fn = 'submit' AND phase = 'dup50' LIMIT 1);

-- a submit told "created" that did not create
UPDATE soak.history SET answer = pg_catalog.jsonb_set(answer, '{created}', 'true')
WHERE seq = (SELECT seq FROM soak.history WHERE fn = 'submit'
			 AND NOT (answer->>'created')::boolean ORDER BY seq LIMIT 1);

-- a call that met an error nobody expected
INSERT INTO soak.history (phase, client, fn, sent, sqlstate, expected)
VALUES ('selftest', 0, 'submit', '{}', 'XX000', false);

-- a purged loser's race_log row lost with its job (a loser a client was
-- told "lost" about: since 1.2 the race log holds rejected results too)
DELETE FROM idemjob.race_log
WHERE attempt_id = (SELECT r.attempt_id FROM idemjob.race_log r
					WHERE NOT EXISTS (SELECT 1 FROM idemjob.attempts a WHERE a.id = r.attempt_id)
					  AND EXISTS (SELECT 1 FROM soak.history h
								  WHERE h.attempt_id = r.attempt_id AND h.sqlstate = '00000'
									AND h.fn = 'complete_attempt'
									AND h.answer ->> 'outcome' = 'lost')
					ORDER BY r.logged_at LIMIT 1);

-- a purged job without its spent key
DELETE FROM idemjob.spent_keys
WHERE job_id = (SELECT s.job_id FROM idemjob.spent_keys s JOIN soak.history h ON h.job_id = s.job_id
				WHERE h.fn = 'submit' AND (h.answer->>'created')::boolean LIMIT 1);

-- a second job id for a live worker job's key
INSERT INTO idemjob.spent_keys (owner_id, idempotency_key, request_sha256, job_id,
								final_state, completed_at, purged_at, owner_hash)
SELECT j.owner_id, j.idempotency_key, pg_catalog.sha256('tampered'), gen_random_uuid(),
	   'succeeded', pg_catalog.now(), pg_catalog.now(), j.owner_hash
FROM idemjob.jobs j WHERE j.intent = 'soakw' ORDER BY j.id LIMIT 1;

-- a retry claimed before its backoff had passed (the oldest retried job),
-- and two attempts in doubt at once (the newest: the failure recorded
-- after the next attempt started)
UPDATE idemjob.attempts b SET started_at = a.finished_at
FROM idemjob.attempts a
WHERE a.job_id = b.job_id AND b.attempt_no = a.attempt_no + 1 AND a.state = 'failed'
  AND b.job_id = (SELECT a2.job_id FROM idemjob.attempts a2 JOIN idemjob.jobs j ON j.id = a2.job_id
				  WHERE j.intent = 'soakw' AND a2.state = 'failed' AND a2.attempt_no < j.attempt_count
				  ORDER BY a2.job_id LIMIT 1);
UPDATE idemjob.attempts a SET finished_at = b.started_at + interval '1 s'
FROM idemjob.attempts b
WHERE a.job_id = b.job_id AND b.attempt_no = a.attempt_no + 1 AND a.state = 'failed'
  AND a.job_id = (SELECT a2.job_id FROM idemjob.attempts a2 JOIN idemjob.jobs j ON j.id = a2.job_id
				  WHERE j.intent = 'soakw' AND a2.state = 'failed' AND a2.attempt_no < j.attempt_count
				  ORDER BY a2.job_id DESC LIMIT 1);

-- a job given more attempts than it allows
UPDATE idemjob.jobs j SET max_attempts = a.attempt_no
FROM (SELECT a2.job_id, a2.attempt_no FROM idemjob.attempts a2
	  JOIN idemjob.jobs j2 ON j2.id = a2.job_id
	  WHERE j2.intent = 'soakw' AND a2.state = 'failed' AND a2.attempt_no < j2.attempt_count
	  ORDER BY a2.job_id LIMIT 1) a
WHERE j.id = a.job_id;

-- the same three breakages on a retry made up on a live worker job (the
-- purges may leave no real retried job in the tables): attempt n+1 failed
-- a second after attempt n+2 started, with max_attempts n+1
WITH j AS (SELECT id, owner_id, provider, version, owner_hash,
				  (SELECT coalesce(max(attempt_no), 0) FROM idemjob.attempts a
				   WHERE a.job_id = jobs.id) AS n
		   FROM idemjob.jobs WHERE intent = 'soakw'
		   -- not the job given a second winner above: its broken numbering
		   -- must stay broken
		   AND id <> (SELECT id FROM idemjob.jobs WHERE state = 'succeeded' ORDER BY id LIMIT 1)
		   ORDER BY id LIMIT 1),
ins AS (
	INSERT INTO idemjob.attempts (id, job_id, owner_id, attempt_no, provider, state,
								  read_version, started_at, deadline, finished_at, owner_hash)
	SELECT gen_random_uuid(), j.id, j.owner_id, j.n + k, j.provider,
		   CASE k WHEN 1 THEN 'failed' ELSE 'started' END::idemjob.attempt_state,
		   j.version, pg_catalog.now() - interval '1 min' * (3 - k),
		   pg_catalog.now() + interval '1 min',
		   CASE k WHEN 1 THEN pg_catalog.now() - interval '1 min' + interval '1 s' END,
		   j.owner_hash
	FROM j, generate_series(1, 2) k
	RETURNING job_id)
UPDATE idemjob.jobs SET attempt_count = j.n + 2, max_attempts = j.n + 1
FROM j WHERE jobs.id = j.id AND EXISTS (SELECT FROM ins);

-- a worker job back to pending and due, with nobody claiming it: a failed
-- one if any is left (purges may have taken them all, and a run may end
-- none by max_attempts), else whichever worker job is newest
UPDATE idemjob.jobs SET state = 'pending', run_at = pg_catalog.now() - interval '1 s',
	   completed_at = NULL, completed_by = NULL, result = NULL, error = NULL,
	   version = version + 1
WHERE id = (SELECT id FROM idemjob.jobs WHERE intent = 'soakw'
			ORDER BY state = 'failed' DESC, id DESC LIMIT 1);

\set in_selftest 1
\ir check.sql
ROLLBACK;
