-- workers (CONTRACT.md "Functions added in 1.1"): submit's scheduling
-- arguments, claim, heartbeat, job, await_job, the retry policy.
-- Notifications are tested in test/isolation/specs/notify.spec (psql prints the
-- sender's PID), waits across sessions in the other specs.
-- Every claim names intents of this file only: other tests' jobs share the
-- database.
\set VERBOSITY sqlstate

-- 'ok' when the call answers, else its SQLSTATE and message (ids masked)
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE sql;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' ||
		regexp_replace(SQLERRM, '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<id>', 'g');
END $$;

--
-- submit: run_at (NULL: now), priority (NULL: 22004), max_attempts (>= 1)
--
SELECT pg_temp.try($$SELECT idemjob.submit('wk', 'bad-1', 'wk.order', priority => NULL)$$);
SELECT pg_temp.try($$SELECT idemjob.submit('wk', 'bad-2', 'wk.order', max_attempts => 0)$$);
SELECT pg_temp.try($$SELECT idemjob.submit('wk', 'bad-3', 'wk.order', max_attempts => -5)$$);
SELECT count(*) AS bad_jobs FROM idemjob.jobs WHERE idempotency_key LIKE 'bad-%';

BEGIN;
SELECT job_id AS j_now, created FROM idemjob.submit('wk', 'now', 'wk.sched') \gset
SELECT run_at = now() AS run_at_is_now, priority, max_attempts, error
  FROM idemjob.jobs WHERE id = :'j_now';
COMMIT;
SELECT job_id AS j_sched FROM idemjob.submit('wk', 'sched', 'wk.sched', '{"a": 1}',
	run_at => '2999-01-01 00:00+00', priority => 7, max_attempts => 3) \gset
SELECT run_at, priority, max_attempts FROM idemjob.jobs WHERE id = :'j_sched';
-- not part of the request: a replay with other values is the job as first
-- submitted (no IJ001, nothing changes)
SELECT job_id = :'j_sched' AS same_job, created, state
  FROM idemjob.submit('wk', 'sched', 'wk.sched', '{"a": 1}',
	run_at => '2001-01-01 00:00+00', priority => -1, max_attempts => 99);
SELECT job_id = :'j_sched' AS same_job, created FROM idemjob.submit('wk', 'sched', 'wk.sched', '{"a": 1}');
SELECT run_at, priority, max_attempts FROM idemjob.jobs WHERE id = :'j_sched';
-- the request still is: another params is IJ001
SELECT pg_temp.try($$SELECT idemjob.submit('wk', 'sched', 'wk.sched', '{"a": 2}', run_at => '2999-01-01')$$);

--
-- claim: arguments (22004, then 22023)
--
SELECT pg_temp.try($$SELECT idemjob.claim(NULL)$$);
SELECT pg_temp.try($$SELECT idemjob.claim('w', '{wk.none}', NULL)$$);
SELECT pg_temp.try($$SELECT idemjob.claim('w', '{wk.none}', wait => NULL)$$);
SELECT pg_temp.try($$SELECT idemjob.claim('')$$);
SELECT pg_temp.try($$SELECT idemjob.claim('w', '{wk.none}', 0)$$);
SELECT pg_temp.try($$SELECT idemjob.claim('w', '{wk.none}', -1)$$);
SELECT pg_temp.try($$SELECT idemjob.claim('w', '{wk.none}', 1001)$$);
SELECT pg_temp.try($$SELECT idemjob.claim('w', '{wk.none}', 1000)$$);
SELECT pg_temp.try($$SELECT idemjob.claim('w', '{wk.none}', 1, '0')$$);
SELECT pg_temp.try($$SELECT idemjob.claim('w', '{wk.none}', 1, '-1 second')$$);
SELECT pg_temp.try($$SELECT idemjob.claim('w', '{wk.none}', 1, '100000000 years')$$);
SELECT pg_temp.try($$SELECT idemjob.claim('w', '{wk.none}', wait => '-1 second')$$);
-- argument errors come before the isolation level
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.try($$SELECT idemjob.claim('w', '{wk.none}', 0, wait => '1 second')$$);
ROLLBACK;

--
-- claim order: priority DESC, then run_at, then oldest (id); scheduled,
-- in-doubt and final jobs are never claimed
--
SELECT created FROM idemjob.submit('wk', 'p0-late', 'wk.order', run_at => '2000-01-03', priority => 0);
SELECT created FROM idemjob.submit('wk', 'p0-early', 'wk.order', run_at => '2000-01-01', priority => 0);
SELECT created FROM idemjob.submit('wk', 'p5-a', 'wk.order', run_at => '2000-01-02', priority => 5);
SELECT created FROM idemjob.submit('wk', 'p5-b', 'wk.order', run_at => '2000-01-02', priority => 5);
SELECT created FROM idemjob.submit('wk', 'p-neg', 'wk.order', run_at => '1999-01-01', priority => -3);
SELECT created FROM idemjob.submit('wk', 'p9-now', 'wk.order', priority => 9);
SELECT created FROM idemjob.submit('wk', 'p99-later', 'wk.order', run_at => now() + interval '1 hour', priority => 99);
SELECT job_id AS j_doubt FROM idemjob.submit('wk', 'p99-doubt', 'wk.order', priority => 99) \gset
SELECT state FROM idemjob.mark_unknown((SELECT id FROM idemjob.start_attempt(:'j_doubt')));
SELECT job_id AS j_final FROM idemjob.submit('wk', 'p99-final', 'wk.order', priority => 99) \gset
SELECT state FROM idemjob.cancel_job(:'j_final', 'test');
SELECT job_id AS j_other FROM idemjob.submit('wk', 'p99-other', 'wk.other', priority => 99) \gset

-- max_jobs 1: the first in claim order
SELECT j.idempotency_key, c.owner_id, c.intent, c.provider, c.attempt_no, c.read_version
  FROM idemjob.claim('w1', '{wk.order}') c JOIN idemjob.jobs j ON j.id = c.job_id;
-- then the rest, in order, up to max_jobs
SELECT c.ordinality, j.idempotency_key, c.attempt_no
  FROM idemjob.claim('w1', '{wk.order}', 3) WITH ORDINALITY c
  JOIN idemjob.jobs j ON j.id = c.job_id ORDER BY c.ordinality;
SELECT c.ordinality, j.idempotency_key
  FROM idemjob.claim('w1', '{wk.order}', 10) WITH ORDINALITY c
  JOIN idemjob.jobs j ON j.id = c.job_id ORDER BY c.ordinality;
-- nothing due is left: the scheduled, in-doubt and final jobs stay
SELECT count(*) FROM idemjob.claim('w1', '{wk.order}', 10);
SELECT idempotency_key, state, attempt_count FROM idemjob.jobs
  WHERE intent = 'wk.order' AND state <> 'running' ORDER BY idempotency_key;
-- another intent is claimed only when named (or with intents NULL)
SELECT j.idempotency_key FROM idemjob.claim('w1', '{wk.nothing,wk.other}') c
  JOIN idemjob.jobs j ON j.id = c.job_id;

-- a claimed attempt is what start_attempt(job, NULL, timeout, worker) makes
BEGIN;
SELECT job_id AS j_c FROM idemjob.submit('wk', 'exact', 'wk.exact', provider => 'prov-x') \gset
SELECT attempt_id AS a_c, deadline AS d_c FROM idemjob.claim('w2', '{wk.exact}', timeout => '42 seconds') \gset
SELECT a.job_id = :'j_c' AS job, a.attempt_no, a.provider, a.state, a.read_version, a.worker,
       a.started_at = now() AS started_now, a.deadline = now() + interval '42 seconds' AS deadline_ok,
       a.deadline = :'d_c' AS returned_deadline, a.finished_at, a.error
  FROM idemjob.attempts a WHERE a.id = :'a_c';
SELECT state, attempt_count, version, run_at = now() AS run_at_kept FROM idemjob.jobs WHERE id = :'j_c';
-- the same worker learns its attempt back from start_attempt (a lost answer)
SELECT id = :'a_c' AS same_attempt FROM idemjob.start_attempt(:'j_c', worker => 'w2');
COMMIT;
-- timeout NULL: idemjob.attempt_timeout; 0 there: no deadline
SET idemjob.attempt_timeout = '2min';
SELECT created FROM idemjob.submit('wk', 'default-timeout', 'wk.exact');
BEGIN;
SELECT deadline = now() + interval '2 minutes' AS deadline_ok FROM idemjob.claim('w2', '{wk.exact}');
COMMIT;
SET idemjob.attempt_timeout = 0;
SELECT created FROM idemjob.submit('wk', 'no-timeout', 'wk.exact');
SELECT deadline FROM idemjob.claim('w2', '{wk.exact}');
RESET idemjob.attempt_timeout;

--
-- claim with wait: nothing due answers no rows after the wait; a job that
-- becomes due during the wait is claimed at once
--
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) FROM idemjob.claim('w3', '{wk.none}', wait => '300 ms');
SELECT clock_timestamp() - :'t0'::timestamptz >= interval '300 ms' AS waited;
SELECT created FROM idemjob.submit('wk', 'soon', 'wk.soon', run_at => clock_timestamp() + interval '400 ms');
SELECT count(*) FROM idemjob.claim('w3', '{wk.soon}');
SELECT clock_timestamp() AS t0 \gset
SELECT j.idempotency_key FROM idemjob.claim('w3', '{wk.soon}', wait => '30 seconds') c
  JOIN idemjob.jobs j ON j.id = c.job_id;
SELECT clock_timestamp() - :'t0'::timestamptz < interval '10 seconds' AS promptly;
-- waiting is cancellable: statement_timeout ends it with 57014
SET statement_timeout = '200ms';
SELECT count(*) FROM idemjob.claim('w3', '{wk.none}', wait => '1 minute');
RESET statement_timeout;
-- under REPEATABLE READ or SERIALIZABLE a waiting claim is 0A000; a claim
-- that does not wait works
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.try($$SELECT idemjob.claim('w3', '{wk.none}', wait => '1 second')$$);
SELECT count(*) FROM idemjob.claim('w3', '{wk.none}');
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT pg_temp.try($$SELECT idemjob.claim('w3', '{wk.none}', wait => '1 second')$$);
ROLLBACK;

--
-- heartbeat
--
SELECT job_id AS j_hb FROM idemjob.submit('wk', 'hb', 'wk.hb') \gset
SELECT attempt_id AS a_hb FROM idemjob.claim('w4', '{wk.hb}', timeout => '1 second') \gset
SELECT pg_temp.try($$SELECT idemjob.heartbeat(NULL)$$);
SELECT pg_temp.try($$SELECT idemjob.heartbeat('00000000-0000-0000-0000-000000000000')$$);
SELECT pg_temp.try(format($$SELECT idemjob.heartbeat(%L, '0')$$, :'a_hb'));
SELECT pg_temp.try(format($$SELECT idemjob.heartbeat(%L, '-1 minute')$$, :'a_hb'));
-- arguments before ids
SELECT pg_temp.try($$SELECT idemjob.heartbeat('00000000-0000-0000-0000-000000000000', '0')$$);
BEGIN;
SELECT id = :'a_hb' AS same, state, deadline = now() + interval '10 minutes' AS extended
  FROM idemjob.heartbeat(:'a_hb', '10 minutes');
COMMIT;
SET idemjob.attempt_timeout = '3min';
BEGIN;
SELECT deadline = now() + interval '3 minutes' AS extended_by_setting FROM idemjob.heartbeat(:'a_hb');
COMMIT;
RESET idemjob.attempt_timeout;
-- not started: IJ005
SELECT state FROM idemjob.mark_unknown(:'a_hb');
SELECT pg_temp.try(format($$SELECT idemjob.heartbeat(%L)$$, :'a_hb'));
SELECT state FROM idemjob.cancel_attempt(:'a_hb', 'test');
SELECT pg_temp.try(format($$SELECT idemjob.heartbeat(%L)$$, :'a_hb'));

--
-- job() and await_job()
--
SELECT pg_temp.try($$SELECT idemjob.job(NULL)$$);
SELECT pg_temp.try($$SELECT idemjob.job('00000000-0000-0000-0000-000000000000')$$);
SELECT idempotency_key, intent, state, priority, max_attempts FROM idemjob.job(:'j_sched');
SELECT idemjob.job(:'j_sched')::text = j::text AS whole_row
  FROM idemjob.jobs j WHERE id = :'j_sched';
SELECT pg_temp.try($$SELECT idemjob.await_job(NULL, '1 second')$$);
SELECT pg_temp.try(format($$SELECT idemjob.await_job(%L, NULL)$$, :'j_sched'));
SELECT pg_temp.try(format($$SELECT idemjob.await_job(%L, '-1 second')$$, :'j_sched'));
SELECT pg_temp.try($$SELECT idemjob.await_job('00000000-0000-0000-0000-000000000000', '1 second')$$);
SELECT pg_temp.try($$SELECT idemjob.await_job('00000000-0000-0000-0000-000000000000', '-1 second')$$);
-- not final: the row as it is when the timeout passes
SELECT clock_timestamp() AS t0 \gset
SELECT idempotency_key, state FROM idemjob.await_job(:'j_sched', '300 ms');
SELECT clock_timestamp() - :'t0'::timestamptz >= interval '300 ms' AS waited;
SELECT state FROM idemjob.await_job(:'j_sched', '0');
-- final: at once
SELECT clock_timestamp() AS t0 \gset
SELECT state FROM idemjob.await_job(:'j_final', '1 minute');
SELECT clock_timestamp() - :'t0'::timestamptz < interval '10 seconds' AS at_once;
SET statement_timeout = '200ms';
SELECT state FROM idemjob.await_job(:'j_sched', '1 minute');
RESET statement_timeout;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.try(format($$SELECT idemjob.await_job(%L, '1 second')$$, :'j_final'));
SELECT state FROM idemjob.job(:'j_final');
ROLLBACK;

--
-- retry policy: run_at = now + retry_backoff * 2^(attempt_count - 1),
-- capped at retry_backoff_max; failed at max_attempts
--
SET idemjob.retry_backoff = '10s';
SET idemjob.retry_backoff_max = '35s';
SELECT idemjob.define_contract('wk.retry', '{"type": "object", "required": ["ok"]}');
SELECT job_id AS j_r FROM idemjob.submit('wk', 'retry', 'wk.retry', max_attempts => 5) \gset
-- attempt 1, a retryable failure: 10 s
SELECT attempt_id AS a FROM idemjob.claim('w5', '{wk.retry}') \gset
BEGIN;
SELECT state FROM idemjob.fail_attempt(:'a', '{"code": "http_503"}');
SELECT state, version, attempt_count, run_at - now() AS backoff, error, completed_at
  FROM idemjob.jobs WHERE id = :'j_r';
COMMIT;
-- scheduled for later: not claimed, but start_attempt ignores run_at
SELECT count(*) FROM idemjob.claim('w5', '{wk.retry}');
-- attempt 2: 20 s
SELECT id AS a FROM idemjob.start_attempt(:'j_r') \gset
BEGIN;
SELECT state FROM idemjob.fail_attempt(:'a', NULL);
SELECT state, attempt_count, run_at - now() AS backoff FROM idemjob.jobs WHERE id = :'j_r';
COMMIT;
-- attempt 3, a rejected result (breaks the contract): 40 s, capped at 35 s
SELECT id AS a FROM idemjob.start_attempt(:'j_r') \gset
BEGIN;
SELECT outcome, job_version FROM idemjob.complete_attempt(:'a', '{"nope": 1}');
SELECT state, attempt_count, run_at - now() AS backoff FROM idemjob.jobs WHERE id = :'j_r';
COMMIT;
-- cancel_attempt makes the job due at once
SELECT id AS a FROM idemjob.start_attempt(:'j_r') \gset
BEGIN;
SELECT state FROM idemjob.cancel_attempt(:'a', 'operator');
SELECT state, attempt_count, run_at = now() AS due_now FROM idemjob.jobs WHERE id = :'j_r';
COMMIT;
-- attempt 5 fails: max_attempts reached, the job ends failed
SELECT attempt_id AS a, attempt_no FROM idemjob.claim('w5', '{wk.retry}') \gset
SELECT :attempt_no AS attempt_no;
BEGIN;
SELECT state FROM idemjob.fail_attempt(:'a', '{"code": "http_500", "body": "boom"}');
SELECT state, version, attempt_count, error, completed_at = now() AS completed,
       run_at - now() < interval '0' AS run_at_untouched
  FROM idemjob.jobs WHERE id = :'j_r';
COMMIT;
-- final: nothing more starts; the replayed submit shows failed; job() the error
SELECT pg_temp.try(format($$SELECT idemjob.start_attempt(%L)$$, :'j_r'));
SELECT created, state, version FROM idemjob.submit('wk', 'retry', 'wk.retry', max_attempts => 50);
SELECT state, error FROM idemjob.job(:'j_r');
-- the failed attempt cannot complete any more (IJ005)
SELECT outcome FROM idemjob.complete_attempt(:'a', '{"ok": true}');

-- max_attempts NULL: the setting; a rejected result at the limit
SET idemjob.max_attempts = 2;
SET idemjob.retry_backoff = 0;
SELECT job_id AS j_r2 FROM idemjob.submit('wk', 'retry-2', 'wk.retry') \gset
SELECT attempt_id AS a FROM idemjob.claim('w5', '{wk.retry}') \gset
BEGIN;
SELECT state FROM idemjob.fail_attempt(:'a');
-- retry_backoff 0: due at once
SELECT state, run_at = now() AS due_now FROM idemjob.jobs WHERE id = :'j_r2';
COMMIT;
SELECT attempt_id AS a FROM idemjob.claim('w5', '{wk.retry}') \gset
SELECT outcome, job_version FROM idemjob.complete_attempt(:'a', '{"nope": 2}');
SELECT state, version, attempt_count, error FROM idemjob.jobs WHERE id = :'j_r2';
-- the setting is read when the attempt fails, not at submit
SELECT job_id AS j_r3 FROM idemjob.submit('wk', 'retry-3', 'wk.retry') \gset
SET idemjob.max_attempts = 1;
SELECT attempt_id AS a FROM idemjob.claim('w5', '{wk.retry}') \gset
SELECT state FROM idemjob.fail_attempt(:'a');
SELECT state, max_attempts, error FROM idemjob.jobs WHERE id = :'j_r3';
RESET idemjob.max_attempts;
RESET idemjob.retry_backoff;
RESET idemjob.retry_backoff_max;
-- the cap: 2^69 backoffs never overflow, the delay stays at the maximum
SET idemjob.retry_backoff = '1h';
SET idemjob.retry_backoff_max = '2h';
SELECT job_id AS j_r4 FROM idemjob.submit('wk', 'retry-4', 'wk.retry', max_attempts => 1000) \gset
BEGIN;
SELECT attempt_id AS a FROM idemjob.claim('w5', '{wk.retry}') \gset
SELECT state FROM idemjob.fail_attempt(:'a');
SELECT run_at - now() AS backoff FROM idemjob.jobs WHERE id = :'j_r4';
DO $$
DECLARE
	a uuid;
BEGIN
	FOR i IN 2..70 LOOP
		SELECT id INTO a FROM idemjob.start_attempt(
			(SELECT id FROM idemjob.jobs WHERE owner_id = 'wk' AND idempotency_key = 'retry-4'));
		PERFORM idemjob.fail_attempt(a);
	END LOOP;
END $$;
SELECT state, attempt_count, run_at - now() AS backoff FROM idemjob.jobs WHERE id = :'j_r4';
COMMIT;
RESET idemjob.retry_backoff;
RESET idemjob.retry_backoff_max;

-- a non-retryable failure: the job's error is the attempt's
SELECT job_id AS j_nr FROM idemjob.submit('wk', 'no-retry', 'wk.retry') \gset
SELECT attempt_id AS a FROM idemjob.claim('w5', '{wk.retry}') \gset
SELECT state FROM idemjob.fail_attempt(:'a', '{"code": "invalid_input"}', false);
SELECT state, version, error FROM idemjob.jobs WHERE id = :'j_nr';
-- without an error: {"code": "failed"}
SELECT job_id AS j_nr2 FROM idemjob.submit('wk', 'no-retry-2', 'wk.retry') \gset
SELECT attempt_id AS a FROM idemjob.claim('w5', '{wk.retry}') \gset
SELECT state FROM idemjob.fail_attempt(:'a', NULL, false);
SELECT state, version, error FROM idemjob.jobs WHERE id = :'j_nr2';
-- a won result leaves error NULL
SELECT job_id AS j_ok FROM idemjob.submit('wk', 'ok', 'wk.retry') \gset
SELECT attempt_id AS a FROM idemjob.claim('w5', '{wk.retry}') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a', '{"ok": true}');
SELECT state, version, error FROM idemjob.jobs WHERE id = :'j_ok';

--
-- owner binding: claim takes only the bound owner's jobs; job, await_job
-- and heartbeat see other owners' rows as absent
--
SELECT job_id AS j_alice FROM idemjob.submit('wk-alice', 'b1', 'wk.bound') \gset
SELECT job_id AS j_bob FROM idemjob.submit('wk-bob', 'b1', 'wk.bound') \gset
SELECT id AS a_bob FROM idemjob.start_attempt(:'j_bob') \gset
SET idemjob.owner_binding = 'setting:wk.owner';
SET wk.owner = 'wk-alice';
SELECT owner_id FROM idemjob.claim('w6', '{wk.bound}', 10);
SELECT count(*) FROM idemjob.claim('w6', '{wk.bound}', 10);
SELECT pg_temp.try(format($$SELECT idemjob.job(%L)$$, :'j_bob'));
SELECT pg_temp.try(format($$SELECT idemjob.await_job(%L, '0')$$, :'j_bob'));
SELECT pg_temp.try(format($$SELECT idemjob.heartbeat(%L)$$, :'a_bob'));
SELECT owner_id, state FROM idemjob.job(:'j_alice');
RESET idemjob.owner_binding;
RESET wk.owner;

-- the claim index serves the claim at any size: a claim of one job keeps
-- its generic plan (LIMIT 1 in its text), an index scan in claim order.
-- On a table of a few rows any plan is cheap: the plans are checked on
-- 20,000 pending jobs of ten intents (inserted as a restore would, then
-- rolled back with their statistics)
BEGIN;
INSERT INTO idemjob.jobs (owner_id, idempotency_key, intent, params, provider, owner_hash)
SELECT 'wk-scale', 'k' || g, CASE WHEN g % 10 = 0 THEN 'wk.order' ELSE 'wk.other' || g % 10 END, '{}', 'p', 'wk-scale'::text
  FROM generate_series(1, 20000) g;
ANALYZE idemjob.jobs;
SET LOCAL plan_cache_mode = force_generic_plan;
PREPARE claim_scan(timestamptz) AS
SELECT id FROM idemjob.jobs
 WHERE state OPERATOR(pg_catalog.=) 'pending'::idemjob.job_state
   AND run_at OPERATOR(pg_catalog.<=) $1
 ORDER BY priority DESC, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED;
EXPLAIN (COSTS OFF) EXECUTE claim_scan(now());
DEALLOCATE claim_scan;
-- a claim of one intent reads that intent's jobs only
PREPARE claim_intent(timestamptz, text) AS
SELECT id FROM idemjob.jobs
 WHERE state OPERATOR(pg_catalog.=) 'pending'::idemjob.job_state
   AND run_at OPERATOR(pg_catalog.<=) $1 AND intent OPERATOR(pg_catalog.=) $2
 ORDER BY priority DESC, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED;
EXPLAIN (COSTS OFF) EXECUTE claim_intent(now(), 'wk.order');
DEALLOCATE claim_intent;
-- a batch is planned for its LIMIT (custom plans: a generic plan would
-- guess 10% of the rows for LIMIT $n)
SET LOCAL plan_cache_mode = force_custom_plan;
PREPARE claim_batch(timestamptz, text, int) AS
SELECT id FROM idemjob.jobs
 WHERE state OPERATOR(pg_catalog.=) 'pending'::idemjob.job_state
   AND run_at OPERATOR(pg_catalog.<=) $1 AND intent OPERATOR(pg_catalog.=) $2
 ORDER BY priority DESC, run_at, id LIMIT $3 FOR UPDATE SKIP LOCKED;
EXPLAIN (COSTS OFF) EXECUTE claim_batch('2100-01-01 00:00:00+00', 'wk.order', 100);
DEALLOCATE claim_batch;
ROLLBACK;
SET plan_cache_mode = force_generic_plan;
SELECT pg_temp.try($$SELECT idemjob.heartbeat('00000000-0000-0000-0000-000000000000', '100000000 years')$$);
RESET plan_cache_mode;
