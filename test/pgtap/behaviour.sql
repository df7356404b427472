-- pgTAP: unit behaviour of the state machine, error codes and I7 retries
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
SELECT plan(34);

CREATE TEMP TABLE t (name text PRIMARY KEY, id uuid);
INSERT INTO t SELECT 'job', job_id FROM idemjob.submit('tap', 'k1', 'charge', '{"amount": 1}');
CREATE FUNCTION pg_temp.id(n text) RETURNS uuid LANGUAGE sql AS $$ SELECT id FROM t WHERE name = n $$;

SELECT is((SELECT created FROM idemjob.submit('tap', 'k1', 'charge', '{"amount": 1}')), false,
	'a replay is not created');
SELECT throws_ok($$SELECT idemjob.submit('tap', 'k1', 'charge', '{"amount": 2}')$$, 'IJ001', NULL,
	'other params: idempotency_conflict');
SELECT throws_ok($$SELECT idemjob.submit(NULL, 'k', 'i')$$, '22004', NULL, 'NULL owner');
SELECT throws_ok($$SELECT idemjob.submit('o', '', 'i')$$, '22023', NULL, 'empty key');
SELECT throws_ok($$SELECT idemjob.start_attempt('00000000-0000-7000-8000-000000000000')$$, 'IJ006', NULL,
	'unknown job');

INSERT INTO t SELECT 'a1', id FROM idemjob.start_attempt(pg_temp.id('job'), worker => 'w');
SELECT is((SELECT state::text FROM idemjob.jobs WHERE id = pg_temp.id('job')), 'running', 'job running');
SELECT throws_ok($$SELECT idemjob.start_attempt(pg_temp.id('job'))$$, 'IJ002', NULL, 'attempt in doubt');
SELECT is((SELECT id FROM idemjob.start_attempt(pg_temp.id('job'), worker => 'w')), pg_temp.id('a1'),
	'the same worker gets its attempt back');
SELECT is((SELECT state::text FROM idemjob.mark_unknown(pg_temp.id('a1'))), 'unknown', 'timeout: unknown');
SELECT is((SELECT state::text FROM idemjob.jobs WHERE id = pg_temp.id('job')), 'in_doubt', 'job in doubt');
SELECT throws_ok($$SELECT idemjob.start_attempt(pg_temp.id('job'))$$, 'IJ002', NULL, 'still blocked');
SELECT is((SELECT state::text FROM idemjob.cancel_attempt(pg_temp.id('a1'), 'resolved')), 'cancelled', 'cancelled');
SELECT is((SELECT state::text FROM idemjob.jobs WHERE id = pg_temp.id('job')), 'pending', 'job free again');
SELECT throws_ok($$SELECT idemjob.mark_unknown(pg_temp.id('a1'))$$, 'IJ005', NULL, 'cancelled cannot be unknown');

INSERT INTO t SELECT 'a2', id FROM idemjob.start_attempt(pg_temp.id('job'));
SELECT results_eq($$SELECT outcome FROM idemjob.complete_attempt(pg_temp.id('a2'), '{"ok": 2}')$$,
	ARRAY['won'], 'attempt 2 wins');
SELECT results_eq($$SELECT outcome FROM idemjob.complete_attempt(pg_temp.id('a2'), '{"ok": 2}')$$,
	ARRAY['won'], 'retried: the same answer');
SELECT throws_ok($$SELECT idemjob.complete_attempt(pg_temp.id('a2'), '{"ok": 3}')$$, 'IJ001', NULL,
	'retried with another result');
SELECT results_eq($$SELECT outcome FROM idemjob.complete_attempt(pg_temp.id('a1'), '{"ok": 1}')$$,
	ARRAY['lost'], 'the cancelled attempt returns late and loses');
SELECT is((SELECT count(*)::int FROM idemjob.race_log WHERE attempt_id = pg_temp.id('a1')), 1, 'one race_log row');
SELECT is((SELECT result FROM idemjob.jobs WHERE id = pg_temp.id('job')), '{"ok": 2}'::jsonb, 'winner''s result kept');
SELECT is((SELECT version FROM idemjob.jobs WHERE id = pg_temp.id('job')), 1::bigint, 'version 1');
SELECT throws_ok($$SELECT idemjob.start_attempt(pg_temp.id('job'))$$, 'IJ003', NULL, 'finished job');
SELECT throws_ok($$SELECT idemjob.cancel_job(pg_temp.id('job'), 'x')$$, 'IJ003', NULL, 'cannot cancel a succeeded job');
SELECT throws_ok($$UPDATE idemjob.jobs SET result = '{}' WHERE id = pg_temp.id('job')$$, 'IJ005', NULL,
	'raw rewrite of a result');
SELECT throws_ok($$SELECT idemjob.start_attempt(pg_temp.id('job'), timeout => '-1 s')$$, '22023', NULL,
	'negative timeout');
SELECT throws_ok($$SELECT idemjob.certify_provider('no-such-intent', 'p')$$, 'IJ006', NULL,
	'certify without a contract');
SELECT is(idemjob.expire_attempts(), 0, 'nothing to expire');
SELECT is((SELECT substr(idemjob.uuid_v7()::text, 15, 1)), '7', 'uuid version 7');

-- 1.2: a leased claim is confirmed by begin_attempt; a route moves a job
INSERT INTO t SELECT 'lj', job_id FROM idemjob.submit('tap', 'k2', 'tap.lease');
INSERT INTO t SELECT 'l1', attempt_id FROM idemjob.claim('w', '{tap.lease}', lease => true);
SELECT isnt((SELECT lease_until FROM idemjob.attempts WHERE id = pg_temp.id('l1')), NULL,
	'a leased claim is not yet confirmed');
SELECT is((SELECT lease_until FROM idemjob.begin_attempt(pg_temp.id('l1'))), NULL,
	'begin_attempt confirms it');
SELECT is((SELECT id FROM idemjob.begin_attempt(pg_temp.id('l1'))), pg_temp.id('l1'),
	'begin_attempt again: the same attempt (I7)');
SELECT throws_ok($$SELECT idemjob.set_route('tap.lease', '{p,q,p}')$$, '22023', NULL,
	'a provider named twice in a route');
SELECT lives_ok($$SELECT idemjob.set_route('tap.lease', '{default,other}'),
	idemjob.fail_attempt(pg_temp.id('l1'))$$, 'a route, and a failure');
SELECT is((SELECT next_provider FROM idemjob.jobs WHERE id = pg_temp.id('lj')), NULL,
	'the route skips a provider not certified (I4): the job stays on its own');

SELECT * FROM finish();
ROLLBACK;
