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
DROP INDEX idemjob.attempts_one_in_doubt;		-- I3's backstop is off

-- a committed result overwritten (on a job a reader saw finished)
UPDATE idemjob.jobs SET result = result || '{"tampered": true}'
WHERE id = (SELECT j.id FROM idemjob.jobs j JOIN soak.history h ON h.job_id = j.id
			WHERE h.fn = 'read' AND h.answer->'result' <> 'null' LIMIT 1);

-- a loser without its race_log row, another with a wrong fingerprint
DELETE FROM idemjob.race_log
WHERE attempt_id = (SELECT attempt_id FROM idemjob.race_log ORDER BY logged_at LIMIT 1);
UPDATE idemjob.race_log SET result_sha256 = pg_catalog.sha256('tampered')
WHERE attempt_id = (SELECT attempt_id FROM idemjob.race_log ORDER BY logged_at DESC LIMIT 1);

-- a second and third attempt in doubt, and a second winner, on one job
INSERT INTO idemjob.attempts (id, job_id, owner_id, attempt_no, provider, state, read_version)
SELECT gen_random_uuid(), a.job_id, a.owner_id, j.attempt_count + n, a.provider,
	   CASE n WHEN 3 THEN 'succeeded' ELSE 'started' END::idemjob.attempt_state, a.read_version
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

\set in_selftest 1
\ir check.sql
ROLLBACK;
