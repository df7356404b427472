-- test/upgrade/fill.sql: jobs, attempts, races, contracts and
-- certifications in every state, written through the functions of 1.0
-- (their signatures are the same in 1.1, so test/dump/fill.sql uses this
-- file too).  Run as a superuser with psql -v ON_ERROR_STOP=1.
--
-- What it leaves, by idempotency key (owner o1 unless said):
--   k-pending       pending, no attempt (o2 has a job with the same key)
--   k-running       running: attempt 1 started (worker w1, deadline in 1 h)
--   k-indoubt       in_doubt: attempt 1 unknown (worker w1)
--   k-succeeded     succeeded: attempt 1 succeeded
--   k-failed        failed: attempt 1 failed (not retryable)
--   k-cancelled     cancelled by cancel_job: attempt 1 still started (fenced)
--   k-rejected      succeeded: attempt 1 failed (contract violation),
--                   attempt 2 succeeded
--   k-race          succeeded: attempt 1 on failover provider p2 superseded
--                   (race_log slot_taken, loser provider p2), attempt 2 won
--   k-fenced        succeeded: attempt 1 fenced then returned (race_log
--                   version_moved), attempt 2 won
--   k-fenced-open   pending at version 1: attempt 1 cancelled with a fence;
--                   its late result must lose
--   k-ship          succeeded, intent ship, on failover provider p2
-- Contracts: pay at version 2 (p2 certified at 1 and 2, p3 certified at 2
-- then revoked), ship at version 1 (p2 certified).

\set ON_ERROR_STOP 1
SET client_min_messages = warning;

SELECT idemjob.define_contract('pay', '{"type": "object", "required": ["ok"]}') AS v \gset
SELECT idemjob.certify_provider('pay', 'p2', '{"suite": "pay-v1"}') IS NOT NULL AS certified \gset
SELECT idemjob.define_contract('pay', '{"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}') AS v \gset
SELECT idemjob.certify_provider('pay', 'p2', '{"suite": "pay-v2"}') IS NOT NULL AS certified \gset
SELECT idemjob.certify_provider('pay', 'p3') IS NOT NULL AS certified \gset
SELECT idemjob.revoke_provider('pay', 'p3', 'failed the nightly suite') IS NOT NULL AS revoked \gset
SELECT idemjob.define_contract('ship', '{"type": "object"}') AS v \gset
SELECT idemjob.certify_provider('ship', 'p2') IS NOT NULL AS certified \gset

-- pending
SELECT job_id AS j FROM idemjob.submit('o1', 'k-pending', 'pay', '{"amount": 1}', 'p1') \gset
SELECT job_id AS j FROM idemjob.submit('o2', 'k-pending', 'pay', '{"amount": 1}', 'p1') \gset

-- running
SELECT job_id AS j FROM idemjob.submit('o1', 'k-running', 'pay', '{"amount": 2}', 'p1') \gset
SELECT id AS a FROM idemjob.start_attempt(:'j', NULL, '1 hour', 'w1') \gset

-- in doubt
SELECT job_id AS j FROM idemjob.submit('o1', 'k-indoubt', 'pay', '{"amount": 3}', 'p1') \gset
SELECT id AS a FROM idemjob.start_attempt(:'j', NULL, '1 hour', 'w1') \gset
SELECT state FROM idemjob.mark_unknown(:'a', 'connection lost') \gset

-- succeeded
SELECT job_id AS j FROM idemjob.submit('o1', 'k-succeeded', 'pay', '{"amount": 4}', 'p1') \gset
SELECT id AS a FROM idemjob.start_attempt(:'j') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a', '{"ok": true, "ref": "r-4"}') \gset

-- failed
SELECT job_id AS j FROM idemjob.submit('o1', 'k-failed', 'pay', '{"amount": 5}', 'p1') \gset
SELECT id AS a FROM idemjob.start_attempt(:'j') \gset
SELECT state FROM idemjob.fail_attempt(:'a', '{"code": "declined"}', false) \gset

-- cancelled by cancel_job, its attempt still out
SELECT job_id AS j FROM idemjob.submit('o1', 'k-cancelled', 'pay', '{"amount": 6}', 'p1') \gset
SELECT id AS a FROM idemjob.start_attempt(:'j', NULL, '1 hour') \gset
SELECT state FROM idemjob.cancel_job(:'j', 'customer left') \gset

-- a rejected result, then a winner
SELECT job_id AS j FROM idemjob.submit('o1', 'k-rejected', 'pay', '{"amount": 7}', 'p1') \gset
SELECT id AS a FROM idemjob.start_attempt(:'j') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a', '{"ok": "yes"}') \gset
SELECT id AS a FROM idemjob.start_attempt(:'j') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a', '{"ok": true, "ref": "r-7"}') \gset

-- slot_taken: the failover attempt on p2 returns after the winner on p1
SELECT job_id AS j FROM idemjob.submit('o1', 'k-race', 'pay', '{"amount": 8}', 'p1') \gset
SELECT id AS a1 FROM idemjob.start_attempt(:'j', 'p2') \gset
SELECT state FROM idemjob.mark_unknown(:'a1') \gset
SELECT state FROM idemjob.cancel_attempt(:'a1', 'p2 does not answer') \gset
SELECT id AS a2 FROM idemjob.start_attempt(:'j') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a2', '{"ok": true, "ref": "r-8"}') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a1', '{"ok": true, "ref": "late-8"}') \gset

-- version_moved: a fenced attempt returns
SELECT job_id AS j FROM idemjob.submit('o1', 'k-fenced', 'pay', '{"amount": 9}', 'p1') \gset
SELECT id AS a1 FROM idemjob.start_attempt(:'j') \gset
SELECT state FROM idemjob.cancel_attempt(:'a1', 'stuck', true) \gset
SELECT id AS a2 FROM idemjob.start_attempt(:'j') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a1', '{"ok": true, "ref": "late-9"}') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a2', '{"ok": true, "ref": "r-9"}') \gset

-- fenced, not yet returned: the job is pending again at version 1
SELECT job_id AS j FROM idemjob.submit('o1', 'k-fenced-open', 'pay', '{"amount": 10}', 'p1') \gset
SELECT id AS a FROM idemjob.start_attempt(:'j') \gset
SELECT state FROM idemjob.mark_unknown(:'a') \gset
SELECT state FROM idemjob.cancel_attempt(:'a', 'operator fenced it', true) \gset

-- another intent, on a failover provider
SELECT job_id AS j FROM idemjob.submit('o1', 'k-ship', 'ship', '{"to": "Lyon"}', 'p1') \gset
SELECT id AS a FROM idemjob.start_attempt(:'j', 'p2') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a', '{"tracking": "T-1"}') \gset

RESET client_min_messages;
