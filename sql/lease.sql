-- The two-phase claim (1.2): claim(lease => true), begin_attempt(), the
-- release of an attempt not confirmed within idemjob.claim_lease, IJ008
-- for a late confirmation or result; abandon_attempts(); the doubt policy
-- (set_retry_policy's fence_unknown_after).  A plain claim keeps 1.1's
-- meaning.  Every claim names intents of this file only.
\set VERBOSITY sqlstate

CREATE FUNCTION pg_temp.att(id uuid) RETURNS text LANGUAGE sql AS $$
  SELECT a.state || ' ' || (a.lease_until IS NOT NULL)::text || ' '
      || coalesce(a.error ->> 'code', '-') || ' / ' || j.state || ' '
      || j.attempt_count || ' ' || j.version
  FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id WHERE a.id = $1
$$;
-- let a lease end: claim_lease is 1 ms below where a lease must end
CREATE FUNCTION pg_temp.lapse() RETURNS void LANGUAGE sql AS $$ SELECT pg_sleep(0.02) $$;

-- arguments
SELECT * FROM idemjob.claim('w', '{ls}', lease => NULL);
SELECT * FROM idemjob.begin_attempt(NULL);
SELECT * FROM idemjob.begin_attempt('00000000-0000-0000-0000-000000000000');
SELECT idemjob.abandon_attempts(NULL);
SELECT idemjob.abandon_attempts('');
SET idemjob.claim_lease = 0;
SHOW idemjob.claim_lease;

-- a plain claim: no lease; nothing releases it (1.1's meaning)
SELECT job_id AS p FROM idemjob.submit('o', 'ls-plain', 'ls') \gset
SELECT attempt_id AS p1 FROM idemjob.claim('w', '{ls}') \gset
SELECT pg_temp.att(:'p1');
-- (other files' attempts may expire too: the attempt's row is the test)
SELECT idemjob.expire_attempts() >= 0 AS ran;
SELECT pg_temp.att(:'p1');
SELECT outcome FROM idemjob.complete_attempt(:'p1', '{"ok": 1}');

-- leased, confirmed, completed: the common path
SELECT job_id AS c FROM idemjob.submit('o', 'ls-confirm', 'ls') \gset
SELECT attempt_id AS c1, deadline AS c1_deadline FROM idemjob.claim('w', '{ls}', lease => true) \gset
SELECT pg_temp.att(:'c1');
SELECT state, lease_until IS NULL AS confirmed, deadline = :'c1_deadline' AS deadline_kept
FROM idemjob.begin_attempt(:'c1');
-- again: the same row (I7)
SELECT state, lease_until IS NULL AS confirmed FROM idemjob.begin_attempt(:'c1');
SELECT outcome FROM idemjob.complete_attempt(:'c1', '{"ok": 2}');
SELECT pg_temp.att(:'c1');
-- begin on an ended attempt: IJ005
SELECT * FROM idemjob.begin_attempt(:'c1');

-- a result confirms a leased attempt that was never begun (in its lease)
SELECT job_id AS r FROM idemjob.submit('o', 'ls-result', 'ls') \gset
SELECT attempt_id AS r1 FROM idemjob.claim('w', '{ls}', lease => true) \gset
SELECT outcome FROM idemjob.complete_attempt(:'r1', '{"ok": 3}');
SELECT pg_temp.att(:'r1');
-- and a heartbeat, and mark_unknown, and fail_attempt
SELECT job_id AS h FROM idemjob.submit('o', 'ls-heartbeat', 'ls') \gset
SELECT attempt_id AS h1 FROM idemjob.claim('w', '{ls}', lease => true) \gset
SELECT state, lease_until IS NULL AS confirmed FROM idemjob.heartbeat(:'h1');
SELECT state FROM idemjob.mark_unknown(:'h1');
SELECT state FROM idemjob.cancel_attempt(:'h1', 'test', true);
SELECT attempt_id AS h2 FROM idemjob.claim('w', '{ls}', lease => true) \gset
SELECT state FROM idemjob.fail_attempt(:'h2', NULL, false);
SELECT pg_temp.att(:'h2');

-- not confirmed within the lease: released, the job due at once, nothing
-- counted; a late confirmation or result is refused (IJ008)
SET idemjob.claim_lease = '1ms';
SELECT job_id AS x FROM idemjob.submit('o', 'ls-expire', 'ls', max_attempts => 1) \gset
SELECT attempt_id AS x1, provider FROM idemjob.claim('w', '{ls}', lease => true) \gset
SELECT pg_temp.lapse();
-- past the lease, before the sweeper: refused already, nothing written
SELECT * FROM idemjob.begin_attempt(:'x1');
SELECT * FROM idemjob.complete_attempt(:'x1', '{"late": true}');
SELECT * FROM idemjob.fail_attempt(:'x1');
SELECT * FROM idemjob.mark_unknown(:'x1');
SELECT * FROM idemjob.heartbeat(:'x1');
SELECT pg_temp.att(:'x1');
-- not in doubt, though past its lease: the in_doubt view leaves it out
SELECT count(*) AS in_doubt FROM idemjob.in_doubt WHERE job_id = :'x';
SELECT idemjob.expire_attempts() >= 1 AS changed;
SELECT pg_temp.att(:'x1');
SELECT run_at <= now() AS due_now FROM idemjob.jobs WHERE id = :'x';
SELECT * FROM idemjob.begin_attempt(:'x1');
SELECT * FROM idemjob.complete_attempt(:'x1', '{"late": true}');
SELECT * FROM idemjob.cancel_attempt(:'x1', 'test');
-- the job is claimed again: attempt 2, on the same provider; max_attempts
-- is 1 and the released attempt was not counted, so a failure now ends it
RESET idemjob.claim_lease;
SELECT attempt_id AS x2, attempt_no, provider = :'provider' AS same_provider
FROM idemjob.claim('w', '{ls}', lease => true) \gset
SELECT :attempt_no AS attempt_no, :'same_provider' AS same_provider;
SELECT state FROM idemjob.begin_attempt(:'x2');
SELECT state FROM idemjob.fail_attempt(:'x2', '{"code": "boom"}');
SELECT state, error ->> 'code' AS code FROM idemjob.jobs WHERE id = :'x';
-- a released attempt in provider_stats
SELECT released, attempts FROM idemjob.provider_stats WHERE intent = 'ls';

-- the job ended while the attempt waited to be sent: IJ003, not sent
SELECT job_id AS k FROM idemjob.submit('o', 'ls-cancelled', 'ls') \gset
SELECT attempt_id AS k1 FROM idemjob.claim('w', '{ls}', lease => true) \gset
SELECT state FROM idemjob.cancel_job(:'k', 'test');
SELECT * FROM idemjob.begin_attempt(:'k1');

-- a leased attempt past its deadline is not expired to unknown (never
-- sent); a deadline that passed while it waited starts again when it is
-- confirmed
SELECT job_id AS d FROM idemjob.submit('o', 'ls-deadline', 'ls') \gset
SELECT attempt_id AS d1 FROM idemjob.claim('w', '{ls}', timeout => '1ms', lease => true) \gset
SELECT pg_temp.lapse();
SELECT idemjob.expire_attempts() >= 0 AS ran;
SELECT pg_temp.att(:'d1');
SELECT state FROM idemjob.begin_attempt(:'d1');
SELECT pg_temp.lapse();
SELECT idemjob.expire_attempts() >= 1 AS expired;
SELECT pg_temp.att(:'d1');

-- abandon_attempts: a restarted worker gives up what it left behind.
-- Leased and unconfirmed: released.  Confirmed: cancelled and fenced (a
-- late result loses), the job retried.  Another worker's: untouched.
SELECT intent, fence_unknown_after FROM idemjob.set_retry_policy('ls', retry_backoff => '0');
SELECT job_id AS a FROM idemjob.submit('o', 'ls-abandon-1', 'ls') \gset
SELECT job_id AS b FROM idemjob.submit('o', 'ls-abandon-2', 'ls') \gset
SELECT job_id AS o FROM idemjob.submit('o', 'ls-abandon-3', 'ls') \gset
SELECT attempt_id AS a1 FROM idemjob.claim('w-crashed', '{ls}', lease => true) \gset
SELECT attempt_id AS b1 FROM idemjob.claim('w-crashed', '{ls}', lease => true) \gset
SELECT attempt_id AS o1 FROM idemjob.claim('w-other', '{ls}') \gset
SELECT state FROM idemjob.begin_attempt(:'b1');
SELECT idemjob.abandon_attempts('w-crashed') AS abandoned;
SELECT pg_temp.att(:'a1');
SELECT pg_temp.att(:'b1');
SELECT pg_temp.att(:'o1');
SELECT outcome FROM idemjob.complete_attempt(:'b1', '{"late": true}');
SELECT reason FROM idemjob.race_log WHERE attempt_id = :'b1';
-- again: nothing left (I7)
SELECT idemjob.abandon_attempts('w-crashed') AS abandoned;

-- the doubt policy: an attempt unknown longer than fence_unknown_after is
-- given up (cancelled, fenced, retried); without it, left for an operator
SELECT idemjob.set_retry_policy('lsp', retry_backoff => '0', fence_unknown_after => '0');
SELECT idemjob.set_retry_policy('lsp', retry_backoff => '0', fence_unknown_after => '-1s');
SELECT fence_unknown_after FROM idemjob.set_retry_policy('lsp', retry_backoff => '0', fence_unknown_after => '10ms');
SELECT job_id AS u FROM idemjob.submit('o', 'ls-policy', 'lsp') \gset
SELECT job_id AS v FROM idemjob.submit('o', 'ls-operator', 'ls-op') \gset
SELECT attempt_id AS u1 FROM idemjob.claim('w', '{lsp}') \gset
SELECT attempt_id AS v1 FROM idemjob.claim('w', '{ls-op}') \gset
SELECT state FROM idemjob.mark_unknown(:'u1');
SELECT state FROM idemjob.mark_unknown(:'v1');
SELECT pg_temp.lapse();
SELECT idemjob.expire_attempts() >= 1 AS changed;
SELECT pg_temp.att(:'u1');
SELECT pg_temp.att(:'v1');
SELECT outcome FROM idemjob.complete_attempt(:'u1', '{"late": true}');
SELECT outcome FROM idemjob.complete_attempt(:'v1', '{"ok": true}');
-- the policy is this file's only: the retry_policy test counts rows
DELETE FROM idemjob.retry_policies WHERE intent IN ('ls', 'lsp');
