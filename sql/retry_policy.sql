-- set_retry_policy(): max_attempts, backoff and its cap per intent (1.2),
-- falling back to the settings; a job's own max_attempts still wins
\set VERBOSITY sqlstate

-- arguments
SELECT idemjob.set_retry_policy(NULL);
SELECT idemjob.set_retry_policy('');
SELECT idemjob.set_retry_policy(repeat('x', 256));
SELECT idemjob.set_retry_policy('rp', 0);
SELECT idemjob.set_retry_policy('rp', NULL, '-1 second');
SELECT idemjob.set_retry_policy('rp', NULL, NULL, '-1 second');
SELECT count(*) FROM idemjob.retry_policies;

-- a policy; again with the same values: the same row (I7), updated_at kept
SELECT intent, max_attempts, retry_backoff, retry_backoff_max
FROM idemjob.set_retry_policy('rp', 2, '0', '1 hour');
CREATE TEMP TABLE first_set AS SELECT updated_at FROM idemjob.retry_policies WHERE intent = 'rp';
SELECT r.updated_at = f.updated_at AS same_row
FROM idemjob.set_retry_policy('rp', 2, '0', '1 hour') r, first_set f;

-- a function that fails the job's started attempt
CREATE FUNCTION pg_temp.fail_once(i text) RETURNS text LANGUAGE sql AS $$
  SELECT f.state::text FROM idemjob.claim('w', ARRAY[i]) c,
    idemjob.fail_attempt(c.attempt_id, '{"code": "boom"}') f
$$;
CREATE FUNCTION pg_temp.job_of(k text) RETURNS text LANGUAGE sql AS $$
  SELECT state || ' ' || attempt_count || ' ' || coalesce(error ->> 'code', '-')
  FROM idemjob.jobs WHERE idempotency_key = k
$$;

-- the intent's max_attempts (2) ends the job at its second failure, though
-- the setting allows 25; backoff 0: due again at once
SELECT job_id IS NOT NULL AS submitted FROM idemjob.submit('o', 'rp-1', 'rp', '{}');
SELECT pg_temp.fail_once('rp'), pg_temp.job_of('rp-1');
SELECT pg_temp.fail_once('rp'), pg_temp.job_of('rp-1');

-- a job's own max_attempts wins over the intent's
SELECT job_id IS NOT NULL AS submitted FROM idemjob.submit('o', 'rp-2', 'rp', '{}', max_attempts => 3);
SELECT pg_temp.fail_once('rp'), pg_temp.job_of('rp-2');
SELECT pg_temp.fail_once('rp'), pg_temp.job_of('rp-2');
SELECT pg_temp.fail_once('rp'), pg_temp.job_of('rp-2');

-- the intent's backoff and cap: 3 minutes after the first failure
-- (3 min x 2^0); with a cap of 2 minutes, 2
SELECT intent, max_attempts, retry_backoff, retry_backoff_max
FROM idemjob.set_retry_policy('rb', 5, '3 minutes', '1 hour');
SELECT job_id IS NOT NULL AS submitted FROM idemjob.submit('o', 'rb-1', 'rb', '{}');
SELECT pg_temp.fail_once('rb'), pg_temp.job_of('rb-1');
SELECT round(extract(epoch FROM run_at - now()) / 60) AS due_in_minutes
FROM idemjob.jobs WHERE idempotency_key = 'rb-1';
SELECT count(*) AS claimable_now FROM idemjob.claim('w', ARRAY['rb']);
-- a policy's backoff longer than its maximum is refused (22023), and the
-- table refuses it too; one longer than the setting it falls back to is
-- capped at that maximum when it is used
SELECT intent FROM idemjob.set_retry_policy('rb', 5, '3 minutes', '2 minutes');
INSERT INTO idemjob.retry_policies (intent, retry_backoff, retry_backoff_max)
	VALUES ('rb-raw', '3 minutes', '2 minutes');
SET idemjob.retry_backoff_max = '2min';
SELECT intent FROM idemjob.set_retry_policy('rb', 5, '3 minutes', NULL);
SELECT job_id IS NOT NULL AS submitted FROM idemjob.submit('o', 'rb-2', 'rb', '{}');
SELECT pg_temp.fail_once('rb'), pg_temp.job_of('rb-2');
SELECT round(extract(epoch FROM run_at - now()) / 60) AS due_in_minutes
FROM idemjob.jobs WHERE idempotency_key = 'rb-2';
RESET idemjob.retry_backoff_max;

-- no policy, or a NULL in it: the settings
SET idemjob.retry_backoff = '0';
SET idemjob.max_attempts = 1;
SELECT job_id IS NOT NULL AS submitted FROM idemjob.submit('o', 'np-1', 'none', '{}');
SELECT pg_temp.fail_once('none'), pg_temp.job_of('np-1');
SELECT intent, max_attempts, retry_backoff FROM idemjob.set_retry_policy('nulls');
SELECT job_id IS NOT NULL AS submitted FROM idemjob.submit('o', 'np-2', 'nulls', '{}');
SELECT pg_temp.fail_once('nulls'), pg_temp.job_of('np-2');
RESET idemjob.max_attempts;
RESET idemjob.retry_backoff;

-- a rejected result counts like a failure
SELECT idemjob.define_contract('rj', '{"type": "object", "required": ["ok"]}');
SELECT intent FROM idemjob.set_retry_policy('rj', 1);
SELECT job_id IS NOT NULL AS submitted FROM idemjob.submit('o', 'rj-1', 'rj', '{}');
SELECT r.outcome FROM idemjob.claim('w', ARRAY['rj']) c, idemjob.complete_attempt(c.attempt_id, '{}') r;
SELECT pg_temp.job_of('rj-1');

-- raw DML is held to the same rules by the table's constraints
INSERT INTO idemjob.retry_policies (intent, max_attempts) VALUES ('raw', 0);
INSERT INTO idemjob.retry_policies (intent, retry_backoff) VALUES ('raw', '-1 day');
INSERT INTO idemjob.retry_policies (intent) VALUES ('');
