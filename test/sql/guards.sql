-- raw DML that would break the invariants is refused with IJ005 (I8)
\set VERBOSITY sqlstate

SELECT job_id AS j FROM idemjob.submit('raw', 'job-1', 'charge', '{"amount": 1}') \gset

-- a job's identity cannot change
UPDATE idemjob.jobs SET idempotency_key = 'job-2' WHERE id = :'j';
UPDATE idemjob.jobs SET owner_id = 'mallory' WHERE id = :'j';
UPDATE idemjob.jobs SET params = '{"amount": 1000}' WHERE id = :'j';
UPDATE idemjob.jobs SET intent = 'refund' WHERE id = :'j';
UPDATE idemjob.jobs SET provider = 'cheap-ai' WHERE id = :'j';
UPDATE idemjob.jobs SET id = idemjob.uuid_v7() WHERE id = :'j';
-- nor its version go backwards (forwards is a fence)
UPDATE idemjob.jobs SET version = version + 1 WHERE id = :'j';
UPDATE idemjob.jobs SET version = 0 WHERE id = :'j';
-- nor its attempt count, and a result comes with its winner
UPDATE idemjob.jobs SET attempt_count = -1 WHERE id = :'j';
UPDATE idemjob.jobs SET result = '{"forged": true}' WHERE id = :'j';
UPDATE idemjob.jobs SET completed_by = idemjob.uuid_v7() WHERE id = :'j';
-- harmless columns may change
UPDATE idemjob.jobs SET updated_at = now() WHERE id = :'j';
SELECT id AS a1 FROM idemjob.start_attempt(:'j') \gset
SELECT read_version FROM idemjob.attempts WHERE id = :'a1';

-- no attempt can be inserted by hand, so never a second one in doubt
INSERT INTO idemjob.attempts (job_id, owner_id, attempt_no, provider, read_version)
  VALUES (:'j', 'raw', 2, 'default', 1);
-- an attempt's identity cannot change, nor its state go where the machine does not
UPDATE idemjob.attempts SET read_version = 5 WHERE id = :'a1';
UPDATE idemjob.attempts SET provider = 'x' WHERE id = :'a1';
UPDATE idemjob.attempts SET attempt_no = 7 WHERE id = :'a1';
-- allowed moves keep the job's state in step: unknown makes it in doubt,
-- cancelled frees it
UPDATE idemjob.attempts SET state = 'unknown' WHERE id = :'a1';
SELECT state FROM idemjob.jobs WHERE id = :'j';
UPDATE idemjob.attempts SET state = 'started' WHERE id = :'a1';
UPDATE idemjob.attempts SET state = 'cancelled' WHERE id = :'a1';
SELECT state FROM idemjob.jobs WHERE id = :'j';
UPDATE idemjob.attempts SET state = 'started' WHERE id = :'a1';
UPDATE idemjob.attempts SET state = 'unknown' WHERE id = :'a1';
-- a job in flight and a single attempt cannot be deleted
DELETE FROM idemjob.jobs WHERE id = :'j';
DELETE FROM idemjob.attempts WHERE id = :'a1';
TRUNCATE idemjob.attempts;
TRUNCATE idemjob.jobs CASCADE;
SELECT count(*) FROM idemjob.attempts WHERE job_id = :'j';

-- a written result cannot be rewritten, and a final job never moves
SELECT outcome FROM idemjob.complete_attempt(:'a1', '{"ok": true}');
UPDATE idemjob.jobs SET result = '{"ok": false}' WHERE id = :'j';
UPDATE idemjob.jobs SET completed_by = NULL, result = NULL WHERE id = :'j';
UPDATE idemjob.jobs SET state = 'pending' WHERE id = :'j';
UPDATE idemjob.jobs SET state = 'cancelled' WHERE id = :'j';
UPDATE idemjob.attempts SET state = 'superseded' WHERE id = :'a1';
UPDATE idemjob.attempts SET state = 'failed' WHERE id = :'a1';
SELECT state, result FROM idemjob.jobs WHERE id = :'j';

-- jobs may be inserted by hand only as fresh pending jobs
INSERT INTO idemjob.jobs (owner_id, idempotency_key, intent, provider)
  VALUES ('raw', 'manual', 'charge', 'default');
SELECT state, version, attempt_count, substr(id::text, 15, 1) AS uuid_version
  FROM idemjob.jobs WHERE idempotency_key = 'manual';
INSERT INTO idemjob.jobs (owner_id, idempotency_key, intent, provider, state)
  VALUES ('raw', 'manual-2', 'charge', 'default', 'succeeded');
INSERT INTO idemjob.jobs (owner_id, idempotency_key, intent, provider, version)
  VALUES ('raw', 'manual-3', 'charge', 'default', 4);
-- and the unique constraint holds for raw SQL too
INSERT INTO idemjob.jobs (owner_id, idempotency_key, intent, provider)
  VALUES ('raw', 'manual', 'charge', 'default');
-- I3 is a partial unique index, whatever the triggers do
SELECT indexdef FROM pg_indexes WHERE indexname = 'attempts_one_in_doubt';

-- a final job may be deleted, with its attempts
DELETE FROM idemjob.jobs WHERE id = :'j';
SELECT count(*) FROM idemjob.attempts WHERE job_id = :'j';

-- the messages say what and why
\set VERBOSITY default
INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, provider)
  VALUES ('01a23729-5c23-7683-afae-79918f3848fc', 'raw', 'job-msg', 'charge', 'default');
DELETE FROM idemjob.jobs WHERE idempotency_key = 'job-msg';
