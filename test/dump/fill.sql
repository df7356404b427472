-- test/dump/fill.sql: a 1.1 database with something in every idemjob table.
-- Run as a superuser with psql -v ON_ERROR_STOP=1, after CREATE EXTENSION
-- idemjob, the role app_client existing.
--
--   k-purged-1, k-purged-2  finished, then purged by idemjob.purge() when
--                           it is written (else they stay as jobs)
--   (test/upgrade/fill.sql) jobs and attempts in every state, both race
--                           reasons, contracts, certifications, one revoked
--   k-scheduled             pending, run_at tomorrow, priority 5, max 3
--   k-race-kept             a loser whose payload is kept (dropped_result)
--   k-rejected-kept         a rejected result, its payload kept
--   k-purged-3              purged, then its fenced attempt's late result
--                           (race_log rows of all three reasons, 1.2)
--   spent_keys              one raw row (o1, k-spent-raw), as a restore
--                           writes it
--   capabilities            app_client: client
--   retry_policies          ship: 4 attempts, 30 s doubling to 10 min,
--                           unknown fenced after 1 h
--   routes                  ship: p1, p2
--   k-routed                ship, failed once on p1: next_provider p2
--   k-released              lease: attempt 1 released (lease_until kept),
--                           attempt 2 leased, not confirmed, its lease
--                           ended but not yet released
--                           (these four from 1.2; a 1.1 database has none)

\set ON_ERROR_STOP 1
SET client_min_messages = warning;

-- purged jobs: spent keys written by the extension itself
SELECT job_id AS j FROM idemjob.submit('o1', 'k-purged-1', 'ship', '{"to": "Oslo"}', 'p1') \gset
SELECT id AS a FROM idemjob.start_attempt(:'j') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a', '{"tracking": "T-0"}') \gset
SELECT job_id AS j FROM idemjob.submit('o1', 'k-purged-2', 'ship', '{"to": "Rome"}', 'p1') \gset
SELECT state FROM idemjob.cancel_job(:'j', 'not needed') \gset
-- k-purged-3: a fenced attempt answers after the purge (its race-log row
-- written from the spent key's tombstone, with the job's intent and key)
SELECT job_id AS j FROM idemjob.submit('o1', 'k-purged-3', 'ship', '{"to": "Kyiv"}', 'p1') \gset
SELECT id AS late FROM idemjob.start_attempt(:'j') \gset
SELECT state FROM idemjob.cancel_attempt(:'late', 'stuck', true) \gset
SELECT id AS a FROM idemjob.start_attempt(:'j') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a', '{"tracking": "T-3"}') \gset
SELECT pg_sleep(0.01) \gset
DO $$
BEGIN
	PERFORM idemjob.purge('0 seconds');
EXCEPTION WHEN internal_error THEN
	-- purge() not written yet: the two jobs stay
	NULL;
END
$$;

-- (1.1 answered it IJ006, and logged nothing)
CREATE FUNCTION pg_temp.late(a uuid, r jsonb) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN (SELECT c.outcome FROM idemjob.complete_attempt(a, r) c);
EXCEPTION WHEN sqlstate 'IJ006' THEN
	RETURN 'IJ006';
END $$;
SELECT pg_temp.late(:'late', '{"tracking": "T-late"}') \gset

\ir ../upgrade/fill.sql
SET client_min_messages = warning;

SELECT job_id AS j FROM idemjob.submit('o1', 'k-scheduled', 'pay', '{"amount": 11}', 'p1',
	run_at => pg_catalog.now() + interval '1 day', priority => 5, max_attempts => 3) \gset

SET idemjob.keep_dropped_results = on;
SELECT job_id AS j FROM idemjob.submit('o1', 'k-race-kept', 'pay', '{"amount": 12}', 'p1') \gset
SELECT id AS a1 FROM idemjob.start_attempt(:'j') \gset
SELECT state FROM idemjob.cancel_attempt(:'a1', 'stuck', true) \gset
SELECT id AS a2 FROM idemjob.start_attempt(:'j') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a2', '{"ok": true, "ref": "r-12"}') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a1', '{"ok": true, "ref": "late-12"}') \gset
-- a rejected result kept (1.2: its race-log row, with the payload)
SELECT job_id AS j FROM idemjob.submit('o1', 'k-rejected-kept', 'pay', '{"amount": 14}', 'p1') \gset
SELECT id AS a1 FROM idemjob.start_attempt(:'j') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a1', '{"ok": "no", "ref": "rj-14"}') \gset
RESET idemjob.keep_dropped_results;

-- a spent key as a restore writes it: raw INSERT by a superuser
-- (since 1.2 with its owner's hash, which the partitioned layout needs:
-- this file fills 1.1 databases too)
SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'idemjob.spent_keys'::regclass
			   AND attname = 'owner_hash') AS has_owner_hash \gset
\if :has_owner_hash
INSERT INTO idemjob.spent_keys (owner_id, idempotency_key, request_sha256, job_id,
								final_state, completed_at, purged_at, owner_hash)
VALUES ('o1', 'k-spent-raw', sha256('pay/p1/{"amount": 13}'), idemjob.uuid_v7(),
		'succeeded', now() - interval '2 days', now() - interval '1 day', 'o1'::text);
\else
INSERT INTO idemjob.spent_keys (owner_id, idempotency_key, request_sha256, job_id,
								final_state, completed_at, purged_at)
VALUES ('o1', 'k-spent-raw', sha256('pay/p1/{"amount": 13}'), idemjob.uuid_v7(),
		'succeeded', now() - interval '2 days', now() - interval '1 day');
\endif

SELECT idemjob.grant_capability('app_client', 'client') \gset

DO $$
DECLARE
	a uuid;
BEGIN
	PERFORM idemjob.set_retry_policy('ship', 4, '30 seconds', '10 minutes', '1 hour');
	PERFORM idemjob.set_route('ship', '{p1,p2}');
	PERFORM idemjob.submit('o1', 'k-routed', 'ship', '{"to": "Lima"}', 'p1', priority => 9);
	SELECT c.attempt_id INTO a FROM idemjob.claim('w-dump', '{ship}') c;
	PERFORM idemjob.fail_attempt(a, '{"code": "down"}');
	PERFORM idemjob.submit('o1', 'k-released', 'lease', '{}', 'p1');
	SET LOCAL idemjob.claim_lease = '1ms';
	PERFORM idemjob.claim('w-dump', '{lease}', lease => true);
EXCEPTION WHEN undefined_function THEN
	-- 1.1: no retry policies, routes or leases yet
	NULL;
END $$;
-- the lease above ends; its release is a transaction of its own
SELECT pg_sleep(0.01) \gset
SELECT idemjob.expire_attempts() >= 0 AS expired \gset
DO $$
BEGIN
	SET LOCAL idemjob.claim_lease = '1ms';
	PERFORM idemjob.claim('w-dump', '{lease}', lease => true);
EXCEPTION WHEN undefined_function OR invalid_name THEN
	-- 1.1: no claim_lease (a name in the library's reserved prefix)
	NULL;
END $$;

RESET client_min_messages;
