-- Raw INSERT (a restore: pg_dump's COPY and INSERTs fire the guards) is
-- accepted when the row is consistent on its own, and refused with IJ005
-- and a DETAIL otherwise (CONTRACT.md "Raw DML").  Restored jobs then work
-- as if they had never left.

-- insert one row, built from a base row and overrides, and undo it:
-- 'accepted', or the refusal's SQLSTATE and DETAIL
CREATE FUNCTION pg_temp.check(tab text, base jsonb, o jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text;
	det text;
BEGIN
	EXECUTE format('INSERT INTO idemjob.%I SELECT (jsonb_populate_record(NULL::idemjob.%I, $1)).*', tab, tab)
		USING base || o;
	RAISE SQLSTATE 'ZZ999';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, det = PG_EXCEPTION_DETAIL;
	IF st = 'ZZ999' THEN
		RETURN 'accepted';
	END IF;
	RETURN st || ': ' || det;
END
$$;

--
-- jobs
--
-- (every row with its owner's hash, as a dump of 1.2 has it: in the
-- partitioned layout a row without one is refused before anything else)
SELECT jsonb_build_object('id', idemjob.uuid_v7(), 'owner_id', 'restore', 'owner_hash', idemjob.owner_hash('restore'::text),
	'idempotency_key', 'k', 'intent', 'charge', 'params', '{}'::jsonb,
	'provider', 'default', 'state', 'pending', 'version', 0, 'attempt_count', 0,
	'created_at', now(), 'updated_at', now(), 'run_at', now(), 'priority', 0) AS job \gset
SELECT label, pg_temp.check('jobs', :'job', o::jsonb) FROM (VALUES
	('pending', '{}'),
	('pending, fenced once, retried', '{"attempt_count": 2, "version": 1, "max_attempts": 5, "priority": -3}'),
	('running', '{"state": "running", "attempt_count": 1}'),
	('in_doubt', '{"state": "in_doubt", "attempt_count": 1}'),
	('succeeded', '{"state": "succeeded", "attempt_count": 1, "version": 1, "completed_at": "2024-01-01T00:00:00Z", "completed_by": "01a23729-5c23-7683-afae-79918f3848fc", "result": {"ok": true}}'),
	('failed, with error', '{"state": "failed", "attempt_count": 3, "version": 1, "completed_at": "2024-01-01T00:00:00Z", "error": {"code": "max_attempts"}}'),
	('failed, no error (from 1.0)', '{"state": "failed", "attempt_count": 1, "version": 1, "completed_at": "2024-01-01T00:00:00Z"}'),
	('cancelled before any attempt', '{"state": "cancelled", "version": 1, "completed_at": "2024-01-01T00:00:00Z", "cancel_reason": "user"}'),
	('updated and completed before created', '{"state": "cancelled", "version": 1, "created_at": "2024-01-02T00:00:00Z", "updated_at": "2024-01-01T00:00:00Z", "completed_at": "2024-01-01T00:00:00Z"}'),
	('counters one short of the maximum', '{"version": 9223372036854775806, "attempt_count": 2147483646}'),
	-- refused
	('succeeded, no result', '{"state": "succeeded", "attempt_count": 1, "version": 1, "completed_at": "2024-01-01T00:00:00Z", "completed_by": "01a23729-5c23-7683-afae-79918f3848fc"}'),
	('succeeded, no winner', '{"state": "succeeded", "attempt_count": 1, "version": 1, "completed_at": "2024-01-01T00:00:00Z", "result": {"ok": true}}'),
	('succeeded, not completed', '{"state": "succeeded", "attempt_count": 1, "version": 1, "completed_by": "01a23729-5c23-7683-afae-79918f3848fc", "result": {"ok": true}}'),
	('succeeded at version 0', '{"state": "succeeded", "attempt_count": 1, "completed_at": "2024-01-01T00:00:00Z", "completed_by": "01a23729-5c23-7683-afae-79918f3848fc", "result": {"ok": true}}'),
	('pending with a result', '{"completed_by": "01a23729-5c23-7683-afae-79918f3848fc", "result": {"ok": true}}'),
	('pending with a winner only', '{"completed_by": "01a23729-5c23-7683-afae-79918f3848fc"}'),
	('pending, completed', '{"completed_at": "2024-01-01T00:00:00Z"}'),
	('cancelled at version 0', '{"state": "cancelled", "completed_at": "2024-01-01T00:00:00Z"}'),
	('cancelled, not completed', '{"state": "cancelled", "version": 1}'),
	('running with no attempt', '{"state": "running"}'),
	('failed with no attempt', '{"state": "failed", "version": 1, "completed_at": "2024-01-01T00:00:00Z"}'),
	('error on a cancelled job', '{"state": "cancelled", "version": 1, "completed_at": "2024-01-01T00:00:00Z", "error": {"code": "x"}}'),
	('error on a pending job', '{"error": {"code": "x"}}'),
	('negative version', '{"version": -1}'),
	('version at its maximum', '{"version": 9223372036854775807}'),
	('negative attempt count', '{"attempt_count": -1}'),
	('attempt count at its maximum', '{"attempt_count": 2147483647}'),
	('max_attempts 0', '{"max_attempts": 0}'),
	('state NULL', '{"state": null}'),
	('run_at NULL', '{"run_at": null}'),
	('owner empty', '{"owner_id": ""}'),
	('key of 256 bytes', jsonb_build_object('idempotency_key', repeat('k', 256))),
	('intent of 256 bytes', jsonb_build_object('intent', repeat('é', 128))),
	('provider empty', '{"provider": ""}')
) v(label, o);
-- a result may be the JSON null (it is not SQL NULL)
BEGIN;
INSERT INTO idemjob.jobs (owner_id, idempotency_key, intent, provider, state, version, attempt_count, completed_by, result, completed_at, owner_hash)
	VALUES ('restore', 'json-null', 'charge', 'default', 'succeeded', 1, 1, idemjob.uuid_v7(), 'null', now(), 'restore'::text);
SELECT state, result FROM idemjob.jobs WHERE idempotency_key = 'json-null';
ROLLBACK;

--
-- attempts (on a job that exists: the foreign key still holds)
--
SELECT job_id AS host FROM idemjob.submit('restore', 'host', 'charge') \gset
SELECT jsonb_build_object('id', idemjob.uuid_v7(), 'job_id', :'host',
	'owner_id', 'restore', 'owner_hash', idemjob.owner_hash('restore'::text), 'attempt_no', 1, 'provider', 'default',
	'state', 'started', 'read_version', 0, 'worker', 'w1',
	'started_at', now(), 'deadline', now() + interval '5 min') AS att \gset
SELECT label, pg_temp.check('attempts', :'att', o::jsonb) FROM (VALUES
	('started', '{}'),
	('started, no worker, no deadline', '{"worker": null, "deadline": null}'),
	('unknown', '{"state": "unknown", "unknown_at": "2024-01-01T00:00:00Z", "error": {"code": "unknown"}}'),
	('succeeded', '{"state": "succeeded", "finished_at": "2024-01-01T00:00:00Z"}'),
	('superseded, dropped result kept', '{"state": "superseded", "finished_at": "2024-01-01T00:00:00Z", "result_sha256": "\\xe5d5f7c1d225fd6b13623ebb1b5b9d075c705659f81868b1e37005a0923b0346", "dropped_result": {"n": 1}}'),
	('failed (rejected)', '{"state": "failed", "finished_at": "2024-01-01T00:00:00Z", "result_sha256": "\\xe5d5f7c1d225fd6b13623ebb1b5b9d075c705659f81868b1e37005a0923b0346", "error": {"code": "contract_violation"}}'),
	('failed (provider)', '{"state": "failed", "finished_at": "2024-01-01T00:00:00Z", "error": {"code": "failed"}}'),
	('unknown, no unknown_at (as 1.0 wrote it)', '{"state": "unknown"}'),
	('cancelled after unknown', '{"state": "cancelled", "finished_at": "2024-01-01T00:00:00Z", "unknown_at": "2024-01-01T00:00:00Z"}'),
	('read_version one short of the maximum', '{"read_version": 9223372036854775806, "attempt_no": 2147483647}'),
	-- refused
	('attempt_no 0', '{"attempt_no": 0}'),
	('negative read_version', '{"read_version": -1}'),
	('read_version at its maximum', '{"read_version": 9223372036854775807}'),
	('owner empty', '{"owner_id": ""}'),
	('provider of 256 bytes', jsonb_build_object('provider', repeat('p', 256))),
	('worker empty', '{"worker": ""}'),
	('started, finished', '{"finished_at": "2024-01-01T00:00:00Z"}'),
	('unknown, finished', '{"state": "unknown", "unknown_at": "2024-01-01T00:00:00Z", "finished_at": "2024-01-01T00:00:00Z"}'),
	('succeeded, not finished', '{"state": "succeeded"}'),
	('cancelled, not finished', '{"state": "cancelled"}'),
	('started, with unknown_at', '{"unknown_at": "2024-01-01T00:00:00Z"}'),
	('superseded, no fingerprint', '{"state": "superseded", "finished_at": "2024-01-01T00:00:00Z"}'),
	('succeeded with a fingerprint', '{"state": "succeeded", "finished_at": "2024-01-01T00:00:00Z", "result_sha256": "\\xe5d5f7c1d225fd6b13623ebb1b5b9d075c705659f81868b1e37005a0923b0346"}'),
	('fingerprint of 31 bytes', '{"state": "superseded", "finished_at": "2024-01-01T00:00:00Z", "result_sha256": "\\xe5d5f7c1d225fd6b13623ebb1b5b9d075c705659f81868b1e37005a0923b03"}'),
	('dropped result on a winner', '{"state": "succeeded", "finished_at": "2024-01-01T00:00:00Z", "dropped_result": {"n": 1}}'),
	('state NULL', '{"state": null}')
) v(label, o);

--
-- race_log (no foreign key since 1.1: rows outlive their job)
--
SELECT jsonb_build_object('logged_at', now(), 'job_id', idemjob.uuid_v7(),
	'owner_id', 'restore', 'owner_hash', idemjob.owner_hash('restore'::text), 'attempt_id', idemjob.uuid_v7(),
	'winner_attempt_id', idemjob.uuid_v7(), 'expected_version', 0,
	'found_version', 2, 'reason', 'slot_taken',
	'result_sha256', '\xe5d5f7c1d225fd6b13623ebb1b5b9d075c705659f81868b1e37005a0923b0346',
	'result_bytes', 8, 'late_by', '00:00:01.5', 'provider', 'default') AS race \gset
SELECT label, pg_temp.check('race_log', :'race', o::jsonb) FROM (VALUES
	('slot_taken', '{}'),
	('slot_taken, no late_by', '{"late_by": null}'),
	('version_moved', '{"reason": "version_moved", "winner_attempt_id": null, "late_by": null, "found_version": 1}'),
	-- since 1.2 (issue 21): fenced_at, the rejected, the columns that stand alone
	('version_moved, fenced_at', '{"reason": "version_moved", "winner_attempt_id": null, "late_by": null, "fenced_at": "2026-01-01 00:00:00+00"}'),
	('rejected, version not moved', '{"reason": "rejected", "winner_attempt_id": null, "late_by": null, "found_version": 0}'),
	('rejected on a won job', '{"reason": "rejected", "late_by": null}'),
	('intent, key, winner_provider', '{"intent": "charge", "idempotency_key": "k1", "winner_provider": "p2"}'),
	('dropped_result of the fingerprint', '{"dropped_result": {"n": 1}}'),
	-- refused
	('slot_taken, no winner', '{"winner_attempt_id": null}'),
	('slot_taken, the loser as winner', jsonb_build_object('winner_attempt_id', (:'race'::jsonb)->'attempt_id')),
	('version_moved with a winner', '{"reason": "version_moved", "late_by": null}'),
	('version_moved with late_by (the contract: NULL)', '{"reason": "version_moved", "winner_attempt_id": null}'),
	('slot_taken with fenced_at', '{"fenced_at": "2026-01-01 00:00:00+00"}'),
	('rejected with late_by', '{"reason": "rejected"}'),
	('rejected with fenced_at', '{"reason": "rejected", "late_by": null, "fenced_at": "2026-01-01 00:00:00+00"}'),
	('rejected, found < expected', '{"reason": "rejected", "late_by": null, "expected_version": 3}'),
	('winner_provider without winner', '{"reason": "version_moved", "winner_attempt_id": null, "winner_provider": "p2"}'),
	('intent empty', '{"intent": ""}'),
	('key of 256 bytes', jsonb_build_object('idempotency_key', repeat('k', 256))),
	('dropped_result of another result', '{"dropped_result": {"n": 2}}'),
	('another reason', '{"reason": "timeout"}'),
	('found = expected', '{"found_version": 0}'),
	('found < expected', '{"expected_version": 3}'),
	('negative expected', '{"expected_version": -1}'),
	('result_bytes 0', '{"result_bytes": 0}'),
	('fingerprint of 16 bytes', '{"result_sha256": "\\x00112233445566778899aabbccddeeff"}'),
	('owner empty', '{"owner_id": ""}'),
	('provider NULL', '{"provider": null}')
) v(label, o);

--
-- spent_keys
--
SELECT jsonb_build_object('owner_id', 'restore', 'owner_hash', idemjob.owner_hash('restore'::text), 'idempotency_key', 'gone',
	'request_sha256', '\xe5d5f7c1d225fd6b13623ebb1b5b9d075c705659f81868b1e37005a0923b0346',
	'job_id', idemjob.uuid_v7(), 'final_state', 'succeeded',
	'completed_at', now(), 'purged_at', now()) AS spent \gset
SELECT label, pg_temp.check('spent_keys', :'spent', o::jsonb) FROM (VALUES
	('succeeded', '{}'),
	('failed', '{"final_state": "failed"}'),
	('cancelled', '{"final_state": "cancelled"}'),
	-- refused
	('pending', '{"final_state": "pending"}'),
	('in_doubt', '{"final_state": "in_doubt"}'),
	('empty fingerprint', '{"request_sha256": "\\x"}'),
	('key of 256 bytes', jsonb_build_object('idempotency_key', repeat('k', 256))),
	('owner empty', '{"owner_id": ""}'),
	('completed_at NULL', '{"completed_at": null}')
) v(label, o);

--
-- contracts and certifications
--
SELECT label, pg_temp.check('contracts', jsonb_build_object('intent', 'restored',
	'version', 3, 'output_schema', '{"type": "object"}'::jsonb, 'updated_at', now()), o::jsonb)
FROM (VALUES
	('version 3', '{}'),
	('a schema with $defs and $ref', '{"output_schema": {"$defs": {"s": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/s"}}}}'),
	-- refused
	('unsupported keyword', '{"output_schema": {"type": "object", "x-extra": true}}'),
	('version 0', '{"version": 0}'),
	('intent of 256 bytes', jsonb_build_object('intent', repeat('i', 256)))
) v(label, o);
SELECT idemjob.define_contract('restored', '{"type": "object"}');
SELECT label, pg_temp.check('certifications', jsonb_build_object('intent', 'restored',
	'provider', 'backup-ai', 'contract_version', 1, 'certified_at', now()), o::jsonb)
FROM (VALUES
	('in force', '{}'),
	('revoked, before it was certified', '{"certified_at": "2024-01-02T00:00:00Z", "revoked_at": "2024-01-01T00:00:00Z", "revoke_reason": "lapsed"}'),
	-- refused
	('revoked without a reason', '{"revoked_at": "2024-01-01T00:00:00Z"}'),
	('a reason without revoked_at', '{"revoke_reason": "lapsed"}'),
	('contract_version 0', '{"contract_version": 0}'),
	('provider empty', '{"provider": ""}')
) v(label, o);

-- nothing stayed behind (but the host job and the contract defined above)
SELECT (SELECT count(*) FROM idemjob.jobs WHERE owner_id = 'restore') AS jobs,
	(SELECT count(*) FROM idemjob.attempts WHERE owner_id = 'restore') AS attempts,
	(SELECT count(*) FROM idemjob.race_log WHERE owner_id = 'restore') AS race_log,
	(SELECT count(*) FROM idemjob.spent_keys WHERE owner_id = 'restore') AS spent_keys,
	(SELECT count(*) FROM idemjob.contracts WHERE intent = 'restored') AS contracts,
	(SELECT count(*) FROM idemjob.certifications WHERE intent = 'restored') AS certifications;

--
-- A restore as pg_dump writes it (COPY; since 1.2 with each row's
-- owner_hash: idemjob.owner_hash('restore') is -1303831314), then the restored jobs behave.
--   r1: succeeded; attempt 1 was cancelled with a fence (version 1),
--       attempt 2 won (version 2), attempt 1's late result lost.
--   r2: in doubt (attempt 1 unknown).
--   r3: pending again after a cancelled attempt.
--
COPY idemjob.jobs (id, owner_id, idempotency_key, intent, params, provider, state, version, attempt_count, completed_by, result, created_at, updated_at, completed_at, cancel_reason, priority, run_at, max_attempts, error, owner_hash) FROM stdin;
01900000-0000-7000-8000-000000000001	restore	r1	charge	{"amount": 5}	default	succeeded	2	2	01900000-0000-7000-8000-0000000000a2	{"n": 2}	2024-06-01 10:00:00+00	2024-06-01 10:05:00+00	2024-06-01 10:05:00+00	\N	0	2024-06-01 10:00:00+00	\N	\N	-1303831314
01900000-0000-7000-8000-000000000002	restore	r2	charge	{"amount": 6}	default	in_doubt	0	1	\N	\N	2024-06-01 10:00:00+00	2024-06-01 10:01:00+00	\N	\N	0	2024-06-01 10:00:00+00	\N	\N	-1303831314
01900000-0000-7000-8000-000000000003	restore	r3	charge	{"amount": 7}	default	pending	0	1	\N	\N	2024-06-01 10:00:00+00	2024-06-01 10:02:00+00	\N	\N	0	2024-06-01 10:02:00+00	\N	\N	-1303831314
\.
COPY idemjob.attempts (id, job_id, owner_id, attempt_no, provider, state, read_version, worker, started_at, deadline, finished_at, error, result_sha256, unknown_at, dropped_result, owner_hash) FROM stdin;
01900000-0000-7000-8000-0000000000a1	01900000-0000-7000-8000-000000000001	restore	1	default	superseded	0	w1	2024-06-01 10:00:00+00	2024-06-01 10:01:00+00	2024-06-01 10:06:00+00	{"code": "cancelled", "reason": "stuck"}	\\xe5d5f7c1d225fd6b13623ebb1b5b9d075c705659f81868b1e37005a0923b0346	\N	\N	-1303831314
01900000-0000-7000-8000-0000000000a2	01900000-0000-7000-8000-000000000001	restore	2	default	succeeded	1	w2	2024-06-01 10:02:00+00	2024-06-01 10:07:00+00	2024-06-01 10:05:00+00	\N	\N	\N	\N	-1303831314
01900000-0000-7000-8000-0000000000b1	01900000-0000-7000-8000-000000000002	restore	1	default	unknown	0	w1	2024-06-01 10:00:00+00	2024-06-01 10:01:00+00	\N	{"code": "unknown", "reason": "deadline"}	\N	2024-06-01 10:01:00+00	\N	-1303831314
01900000-0000-7000-8000-0000000000c1	01900000-0000-7000-8000-000000000003	restore	1	default	cancelled	0	w1	2024-06-01 10:00:00+00	2024-06-01 10:01:00+00	2024-06-01 10:02:00+00	{"code": "cancelled", "reason": "stuck"}	\N	\N	\N	-1303831314
\.
COPY idemjob.race_log (logged_at, job_id, owner_id, attempt_id, winner_attempt_id, expected_version, found_version, reason, result_sha256, result_bytes, late_by, provider, owner_hash) FROM stdin;
2024-06-01 10:06:00+00	01900000-0000-7000-8000-000000000001	restore	01900000-0000-7000-8000-0000000000a1	01900000-0000-7000-8000-0000000000a2	0	2	slot_taken	\\xe5d5f7c1d225fd6b13623ebb1b5b9d075c705659f81868b1e37005a0923b0346	8	00:01:00	default	-1303831314
\.
-- a replay answers from the restored job
SELECT created, state, version, result FROM idemjob.submit('restore', 'r1', 'charge', '{"amount": 5}');
\set VERBOSITY sqlstate
SELECT * FROM idemjob.submit('restore', 'r1', 'charge', '{"amount": 50}');
-- the winner completed again: the same answer (I7)
SELECT outcome, job_version, winner_attempt_id FROM idemjob.complete_attempt('01900000-0000-7000-8000-0000000000a2', '{"n": 2}');
-- the loser again: lost, from its restored fingerprint and race-log row
SELECT outcome, job_version, winner_attempt_id FROM idemjob.complete_attempt('01900000-0000-7000-8000-0000000000a1', '{"n": 1}');
SELECT * FROM idemjob.complete_attempt('01900000-0000-7000-8000-0000000000a1', '{"n": 3}');
-- the restored final job cannot start again
SELECT * FROM idemjob.start_attempt('01900000-0000-7000-8000-000000000001');
-- an attempt in doubt still blocks a new one
SELECT * FROM idemjob.start_attempt('01900000-0000-7000-8000-000000000002');
-- the pending job starts its second attempt at its version, and wins
SELECT attempt_no, read_version FROM idemjob.start_attempt('01900000-0000-7000-8000-000000000003');
SELECT outcome, job_version FROM idemjob.complete_attempt(
	(SELECT id FROM idemjob.attempts WHERE job_id = '01900000-0000-7000-8000-000000000003' AND attempt_no = 2), '{"n": 7}');
-- the cancelled attempt's late result now loses: the slot is taken
SELECT outcome, job_version FROM idemjob.complete_attempt('01900000-0000-7000-8000-0000000000c1', '{"n": 8}');
-- a COPY with one inconsistent row loads nothing
\set VERBOSITY default
COPY idemjob.jobs (id, owner_id, idempotency_key, intent, params, provider, state, version, attempt_count, created_at, updated_at, completed_at, run_at, owner_hash) FROM stdin;
01900000-0000-7000-8000-000000000004	restore	r4	charge	{}	default	pending	0	0	2024-06-01 10:00:00+00	2024-06-01 10:00:00+00	\N	2024-06-01 10:00:00+00	-1303831314
01900000-0000-7000-8000-000000000005	restore	r5	charge	{}	default	cancelled	0	0	2024-06-01 10:00:00+00	2024-06-01 10:00:00+00	2024-06-01 10:00:00+00	2024-06-01 10:00:00+00	-1303831314
\.
\set VERBOSITY sqlstate
SELECT count(*) FROM idemjob.jobs WHERE idempotency_key IN ('r4', 'r5');
