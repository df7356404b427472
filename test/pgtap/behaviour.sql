-- pgTAP: unit behaviour of the state machine, error codes and I7 retries
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
SELECT plan(34);

SELECT job_id AS job FROM idemjob.submit('tap', 'k1', 'charge', '{"amount": 1}') \gset

SELECT is((SELECT created FROM idemjob.submit('tap', 'k1', 'charge', '{"amount": 1}')), false,
	'a replay is not created');
SELECT throws_ok($$SELECT idemjob.submit('tap', 'k1', 'charge', '{"amount": 2}')$$, 'IJ001', NULL,
	'other params: idempotency_conflict');
SELECT throws_ok($$SELECT idemjob.submit(NULL, 'k', 'i')$$, '22004', NULL, 'NULL owner');
SELECT throws_ok($$SELECT idemjob.submit('o', '', 'i')$$, '22023', NULL, 'empty key');
SELECT throws_ok($$SELECT idemjob.start_attempt('00000000-0000-7000-8000-000000000000')$$, 'IJ006', NULL,
	'unknown job');

SELECT id AS a1 FROM idemjob.start_attempt(:'job'::uuid, worker => 'w') \gset
SELECT is((SELECT state::text FROM idemjob.jobs WHERE id = :'job'::uuid), 'running', 'job running');
SELECT throws_ok(format($$SELECT idemjob.start_attempt(%L)$$, :'job'), 'IJ002', NULL, 'attempt in doubt');
SELECT is((SELECT id FROM idemjob.start_attempt(:'job'::uuid, worker => 'w')), :'a1'::uuid,
	'the same worker gets its attempt back');
SELECT is((SELECT state::text FROM idemjob.mark_unknown(:'a1'::uuid)), 'unknown', 'timeout: unknown');
SELECT is((SELECT state::text FROM idemjob.jobs WHERE id = :'job'::uuid), 'in_doubt', 'job in doubt');
SELECT throws_ok(format($$SELECT idemjob.start_attempt(%L)$$, :'job'), 'IJ002', NULL, 'still blocked');
SELECT is((SELECT state::text FROM idemjob.cancel_attempt(:'a1'::uuid, 'resolved')), 'cancelled', 'cancelled');
SELECT is((SELECT state::text FROM idemjob.jobs WHERE id = :'job'::uuid), 'pending', 'job free again');
SELECT throws_ok(format($$SELECT idemjob.mark_unknown(%L)$$, :'a1'), 'IJ005', NULL, 'cancelled cannot be unknown');

SELECT id AS a2 FROM idemjob.start_attempt(:'job'::uuid) \gset
SELECT results_eq(format($$SELECT outcome FROM idemjob.complete_attempt(%L, '{"ok": 2}')$$, :'a2'),
	ARRAY['won'], 'attempt 2 wins');
SELECT results_eq(format($$SELECT outcome FROM idemjob.complete_attempt(%L, '{"ok": 2}')$$, :'a2'),
	ARRAY['won'], 'retried: the same answer');
SELECT throws_ok(format($$SELECT idemjob.complete_attempt(%L, '{"ok": 3}')$$, :'a2'), 'IJ001', NULL,
	'retried with another result');
SELECT results_eq(format($$SELECT outcome FROM idemjob.complete_attempt(%L, '{"ok": 1}')$$, :'a1'),
	ARRAY['lost'], 'the cancelled attempt returns late and loses');
SELECT is((SELECT count(*)::int FROM idemjob.race_log WHERE attempt_id = :'a1'::uuid), 1, 'one race_log row');
SELECT is((SELECT result FROM idemjob.jobs WHERE id = :'job'::uuid), '{"ok": 2}'::jsonb, 'winner''s result kept');
SELECT is((SELECT version FROM idemjob.jobs WHERE id = :'job'::uuid), 1::bigint, 'version 1');
SELECT throws_ok(format($$SELECT idemjob.start_attempt(%L)$$, :'job'), 'IJ003', NULL, 'finished job');
SELECT throws_ok(format($$SELECT idemjob.cancel_job(%L, 'x')$$, :'job'), 'IJ003', NULL, 'cannot cancel a succeeded job');
SELECT throws_ok(format($$UPDATE idemjob.jobs SET result = '{}' WHERE id = %L$$, :'job'), 'IJ005', NULL,
	'raw rewrite of a result');
SELECT throws_ok(format($$SELECT idemjob.start_attempt(%L, timeout => '-1 s')$$, :'job'), '22023', NULL,
	'negative timeout');
SELECT throws_ok($$SELECT idemjob.certify_provider('no-such-intent', 'p')$$, 'IJ006', NULL,
	'certify without a contract');
SELECT is(idemjob.expire_attempts(), 0, 'nothing to expire');
SELECT is((SELECT substr(idemjob.uuid_v7()::text, 15, 1)), '7', 'uuid version 7');

-- 1.2: a leased claim is confirmed by begin_attempt; a route moves a job
SELECT job_id AS lj FROM idemjob.submit('tap', 'k2', 'tap.lease') \gset
SELECT attempt_id AS l1 FROM idemjob.claim('w', '{tap.lease}', lease => true) \gset
SELECT isnt((SELECT lease_until FROM idemjob.attempts WHERE id = :'l1'::uuid), NULL,
	'a leased claim is not yet confirmed');
SELECT is((SELECT lease_until FROM idemjob.begin_attempt(:'l1'::uuid)), NULL,
	'begin_attempt confirms it');
SELECT is((SELECT id FROM idemjob.begin_attempt(:'l1'::uuid)), :'l1'::uuid,
	'begin_attempt again: the same attempt (I7)');
SELECT throws_ok($$SELECT idemjob.set_route('tap.lease', '{p,q,p}')$$, '22023', NULL,
	'a provider named twice in a route');
SELECT lives_ok(format($$SELECT idemjob.set_route('tap.lease', '{default,other}'),
	idemjob.fail_attempt(%L)$$, :'l1'), 'a route, and a failure');
SELECT is((SELECT next_provider FROM idemjob.jobs WHERE id = :'lj'::uuid), NULL,
	'the route skips a provider not certified (I4): the job stays on its own');

SELECT * FROM finish();
ROLLBACK;
