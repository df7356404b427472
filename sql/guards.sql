-- Raw DML on the extension's tables (I8, CONTRACT.md "Raw DML"), as the
-- superuser that runs the tests: what the guards refuse (IJ005, with a
-- DETAIL naming what is wrong), what they let through, and that a guard
-- fired anywhere but where the extension declares it raises an error
-- instead of crashing the backend (1.0 crashed).

-- one line per statement: SQLSTATE, message and DETAIL, ids masked
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
	det text;
BEGIN
	EXECUTE sql;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL;
	-- (and a partition of the partitioned layout, idemjob.partitions, named as its table)
	RETURN regexp_replace(regexp_replace(st || ': ' || msg || CASE WHEN det <> '' THEN ' | ' || det ELSE '' END,
		'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<id>', 'g'),
		'"([a-z_]+)_p[0-9]+"', '"\1"', 'g');
END
$$;

--
-- 1. Where a guard fires.  The 1.0 crash: jobs_guard on a temporary table.
--
CREATE TEMP TABLE x (id int4, state idemjob.job_state, version int8,
	attempt_count int4, completed_by uuid, result jsonb, completed_at timestamptz);
SELECT pg_temp.try($$CREATE TRIGGER g BEFORE INSERT ON x FOR EACH ROW EXECUTE FUNCTION idemjob.jobs_guard()$$);
SELECT pg_temp.try($$INSERT INTO x VALUES (1, 'succeeded', 0, 0, NULL, NULL, NULL)$$);
DROP TRIGGER g ON x;
-- every guard function, row level and statement level, on a foreign table:
-- an error (09000), never a crash
SELECT f, lvl, pg_temp.try(format(
		'CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON x FOR EACH %s EXECUTE FUNCTION idemjob.%s(); '
		'INSERT INTO x VALUES (1, ''succeeded'', 0, 0, NULL, NULL, NULL); DROP TRIGGER g ON x', lvl, f))
FROM unnest('{jobs_guard,attempts_guard,race_log_guard,contracts_guard,certifications_guard,spent_keys_guard}'::text[]) f,
	unnest('{ROW,STATEMENT}'::text[]) lvl
ORDER BY 1, 2;
-- AFTER UPDATE on the foreign table (the firing jobs_guard has for updates)
INSERT INTO x VALUES (1, 'succeeded', 0, 0, NULL, NULL, NULL);
SELECT pg_temp.try($$CREATE TRIGGER g AFTER UPDATE ON x FOR EACH ROW EXECUTE FUNCTION idemjob.jobs_guard(); UPDATE x SET version = 1$$);
SELECT pg_temp.try($$CREATE TRIGGER g AFTER UPDATE ON x FOR EACH ROW EXECUTE FUNCTION idemjob.attempts_guard(); UPDATE x SET version = 1$$);
-- a table named like the real one, with the same columns, in another schema
CREATE TEMP TABLE jobs (LIKE idemjob.jobs INCLUDING DEFAULTS);
SELECT pg_temp.try($$CREATE TRIGGER g BEFORE INSERT ON pg_temp.jobs FOR EACH ROW EXECUTE FUNCTION idemjob.jobs_guard();
	INSERT INTO pg_temp.jobs (owner_id, idempotency_key, intent, provider) VALUES ('o', 'k', 'i', 'p')$$);
DROP TABLE pg_temp.jobs;
-- the truncate guard and the contract-cache trigger check too
SELECT pg_temp.try($$CREATE TRIGGER g BEFORE TRUNCATE ON x FOR EACH STATEMENT EXECUTE FUNCTION idemjob.truncate_guard(); TRUNCATE x$$);
SELECT pg_temp.try($$CREATE TRIGGER g BEFORE INSERT ON x FOR EACH ROW EXECUTE FUNCTION idemjob.truncate_guard(); INSERT INTO x (id) VALUES (2)$$);
SELECT pg_temp.try($$CREATE TRIGGER g AFTER INSERT ON x FOR EACH STATEMENT EXECUTE FUNCTION idemjob.contracts_changed(); INSERT INTO x (id) VALUES (2)$$);
SELECT pg_temp.try($$CREATE TRIGGER g AFTER INSERT ON x FOR EACH ROW EXECUTE FUNCTION idemjob.contracts_changed(); INSERT INTO x (id) VALUES (2)$$);
SELECT count(*) AS rows_in_x FROM x;
DROP TABLE x;

-- on the right schema but the wrong table, or the right table but the
-- wrong firing (each attempt rolled back, so nothing stays attached)
SELECT job_id AS pj FROM idemjob.submit('guards', 'firing', 'charge') \gset
SELECT pg_temp.try($$CREATE TRIGGER g BEFORE INSERT ON idemjob.race_log FOR EACH ROW EXECUTE FUNCTION idemjob.jobs_guard();
	INSERT INTO idemjob.race_log (job_id, owner_id, attempt_id, expected_version, found_version, reason, result_sha256, result_bytes, provider)
	VALUES (idemjob.uuid_v7(), 'o', idemjob.uuid_v7(), 0, 1, 'version_moved', sha256(''), 2, 'p')$$);
SELECT pg_temp.try(format($$CREATE TRIGGER g BEFORE UPDATE ON idemjob.jobs FOR EACH ROW EXECUTE FUNCTION idemjob.jobs_guard();
	UPDATE idemjob.jobs SET state = state WHERE id = %L$$, :'pj'));
SELECT pg_temp.try(format($$CREATE TRIGGER g AFTER UPDATE ON idemjob.jobs FOR EACH STATEMENT EXECUTE FUNCTION idemjob.jobs_guard();
	UPDATE idemjob.jobs SET state = state WHERE id = %L$$, :'pj'));
SELECT pg_temp.try(format($$CREATE TRIGGER g AFTER INSERT ON idemjob.attempts FOR EACH ROW EXECUTE FUNCTION idemjob.attempts_guard();
	INSERT INTO idemjob.attempts (job_id, owner_id, attempt_no, provider, read_version, owner_hash) VALUES (%L, 'guards', 1, 'default', 0, 'guards'::text)$$, :'pj'));
SELECT pg_temp.try($$CREATE TRIGGER g BEFORE INSERT ON idemjob.jobs FOR EACH STATEMENT EXECUTE FUNCTION idemjob.truncate_guard();
	INSERT INTO idemjob.jobs (owner_id, idempotency_key, intent, provider, owner_hash) VALUES ('o', 'k', 'i', 'p', 'o'::text)$$);
SELECT pg_temp.try($$CREATE TRIGGER g AFTER INSERT ON idemjob.contracts FOR EACH ROW EXECUTE FUNCTION idemjob.contracts_changed();
	INSERT INTO idemjob.contracts (intent, version, output_schema) VALUES ('i', 1, '{}')$$);
-- the extension's own triggers are the only ones left (on the tables: the
-- partitions of the partitioned layout have their copies)
SELECT tgrelid::regclass AS tab, tgname, tgfoid::regproc AS fn
FROM pg_trigger WHERE NOT tgisinternal
	AND tgrelid::regclass::text LIKE 'idemjob.%'
	AND NOT (SELECT relispartition FROM pg_class WHERE oid = tgrelid)
ORDER BY 1::text, 2;

--
-- 2. UPDATE of jobs: no column the extension defines may change, in any state
--
SELECT id AS a1 FROM idemjob.start_attempt(:'pj') \gset
SELECT c, pg_temp.try(format('UPDATE idemjob.jobs SET %I = %s WHERE id = %L', c, e, :'pj'))
FROM (VALUES ('id', 'idemjob.uuid_v7()'), ('owner_id', '''mallory'''),
	('idempotency_key', '''other'''), ('intent', '''refund'''),
	('params', '''{"amount": 1000}'''), ('provider', '''cheap-ai'''),
	('state', '''pending'''), ('version', 'version + 1'),
	('attempt_count', 'attempt_count - 1'), ('completed_by', 'idemjob.uuid_v7()'),
	('result', '''{"forged": true}'''), ('created_at', 'created_at - interval ''1 day'''),
	('updated_at', 'updated_at + interval ''1 day'''), ('completed_at', 'now()'),
	('cancel_reason', '''why not'''), ('priority', 'priority + 10'),
	('run_at', 'run_at + interval ''1 hour'''), ('max_attempts', '3'),
	('error', '''{"code": "x"}''')) v(c, e);
-- an assignment that changes nothing passes; the job is as it was
SELECT pg_temp.try(format('UPDATE idemjob.jobs SET state = state, params = params, result = result WHERE id = %L', :'pj'));
SELECT state, version, attempt_count, result FROM idemjob.jobs WHERE id = :'pj';
-- a column a DBA added is theirs to change (the guard re-reads the table's shape)
-- (since 1.2 only with the event trigger idemjob_ddl_guard disabled, by a
-- superuser who knows such a column is lost on restore: alter_table.sql)
BEGIN;
ALTER EVENT TRIGGER idemjob_ddl_guard DISABLE;
ALTER TABLE idemjob.jobs ADD COLUMN note text;
SELECT pg_temp.try(format('UPDATE idemjob.jobs SET note = %L WHERE id = %L', 'checked', :'pj'));
SELECT pg_temp.try(format('UPDATE idemjob.jobs SET note = NULL, priority = 5 WHERE id = %L', :'pj'));
ALTER TABLE idemjob.jobs DROP COLUMN note;
SELECT pg_temp.try(format('UPDATE idemjob.jobs SET priority = 5 WHERE id = %L', :'pj'));
ROLLBACK;

--
-- 3. UPDATE of attempts: the same; raw state changes no longer move the job
--
SELECT c, pg_temp.try(format('UPDATE idemjob.attempts SET %I = %s WHERE id = %L', c, e, :'a1'))
FROM (VALUES ('id', 'idemjob.uuid_v7()'), ('job_id', 'idemjob.uuid_v7()'),
	('owner_id', '''mallory'''), ('attempt_no', '7'), ('provider', '''x'''),
	('state', '''unknown'''), ('read_version', '5'), ('worker', '''w'''),
	('started_at', 'started_at - interval ''1 hour'''), ('deadline', 'NULL'),
	('finished_at', 'now()'), ('error', '''{"code": "x"}'''),
	('result_sha256', 'sha256(''x'')'), ('unknown_at', 'now()'),
	('dropped_result', '''{}''')) v(c, e);
SELECT a.state AS attempt, j.state AS job FROM idemjob.attempts a
	JOIN idemjob.jobs j ON j.id = a.job_id WHERE a.id = :'a1';

--
-- 4. The 1.0 findings (issue 8, item 4), each refused now
--
-- an attempt moved to succeeded by UPDATE, then a second attempt winning
SELECT pg_temp.try(format($$UPDATE idemjob.attempts SET state = 'succeeded', finished_at = now() WHERE id = %L$$, :'a1'));
SELECT pg_temp.try(format($$UPDATE idemjob.attempts SET state = 'cancelled', finished_at = now() WHERE id = %L$$, :'a1'));
-- a second attempt in doubt, inserted raw: the row is consistent on its
-- own, and I3's unique index refuses it
SELECT pg_temp.try(format($$INSERT INTO idemjob.attempts (job_id, owner_id, attempt_no, provider, read_version, owner_hash) VALUES (%L, 'guards', 2, 'default', 0, 'guards'::text)$$, :'pj'));
SELECT count(*) AS attempts, count(*) FILTER (WHERE state = 'started') AS started
	FROM idemjob.attempts WHERE job_id = :'pj';
-- an attempt whose owner_id is not its job's (since 1.2; the owner binding
-- reads it on the calls made with an attempt id, so a role bound to another
-- owner could fail this job's attempt)
SELECT pg_temp.try(format($$INSERT INTO idemjob.attempts (job_id, owner_id, attempt_no, provider, read_version, state, finished_at, owner_hash) VALUES (%L, 'someone-else', 7, 'default', 0, 'failed', now(), 'someone-else'::text)$$, :'pj'));
-- a job cancelled without a version bump (a late result then moved the final job)
SELECT pg_temp.try(format($$UPDATE idemjob.jobs SET state = 'cancelled', completed_at = now() WHERE id = %L$$, :'pj'));
-- a forged result with a winner that does not exist; succeeded with no result
SELECT pg_temp.try(format($$UPDATE idemjob.jobs SET state = 'succeeded', result = '{"forged": 1}', completed_by = idemjob.uuid_v7(), version = version + 1, completed_at = now() WHERE id = %L$$, :'pj'));
SELECT pg_temp.try(format($$UPDATE idemjob.jobs SET state = 'succeeded', version = version + 1, completed_at = now() WHERE id = %L$$, :'pj'));
-- counters set to their maximum
SELECT pg_temp.try(format($$UPDATE idemjob.jobs SET attempt_count = 2147483647 WHERE id = %L$$, :'pj'));
SELECT pg_temp.try(format($$UPDATE idemjob.jobs SET version = 9223372036854775807 WHERE id = %L$$, :'pj'));
-- the job still works through the functions: the one attempt wins
SELECT outcome, job_version FROM idemjob.complete_attempt(:'a1', '{"ok": true}');
SELECT state, version, attempt_count, completed_by = :'a1' AS winner_a1, result
	FROM idemjob.jobs WHERE id = :'pj';
-- a final job's state, version and counters cannot move
SELECT c, pg_temp.try(format('UPDATE idemjob.jobs SET %s WHERE id = %L', c, :'pj'))
FROM (VALUES ($$state = 'pending', completed_at = NULL, result = NULL, completed_by = NULL$$),
	($$state = 'cancelled'$$), ('version = version + 1'), ('version = 0'),
	('attempt_count = attempt_count + 1'), ($$result = '{"ok": false}'$$)) v(c);
SELECT pg_temp.try(format($$UPDATE idemjob.attempts SET state = 'superseded' WHERE id = %L$$, :'a1'));
SELECT state, version, attempt_count, result FROM idemjob.jobs WHERE id = :'pj';
-- raw job inserts skipping the name-length checks
SELECT c, pg_temp.try(format($$INSERT INTO idemjob.jobs (owner_id, idempotency_key, intent, provider) VALUES (%s)$$, c))
FROM (VALUES ($$'', 'k', 'i', 'p'$$), ($$'o', '', 'i', 'p'$$), ($$'o', 'k', '', 'p'$$),
	($$'o', 'k', 'i', ''$$), ($$repeat('o', 256), 'k', 'i', 'p'$$),
	($$'o', repeat('k', 256), 'i', 'p'$$), ($$'o', 'k', repeat('i', 256), 'p'$$),
	($$'o', 'k', 'i', repeat('p', 256)$$), ($$'o', repeat('é', 128), 'i', 'p'$$)) v(c);
-- 255 bytes is the limit, not 255 characters
SELECT pg_temp.try($$INSERT INTO idemjob.jobs (owner_id, idempotency_key, intent, provider, owner_hash) VALUES ('guards' || repeat('g', 249), repeat('é', 127) || 'k', repeat('i', 255), repeat('p', 255), 'guards' || repeat('g', 249))$$);
SELECT octet_length(owner_id), octet_length(idempotency_key), length(idempotency_key) FROM idemjob.jobs WHERE owner_id = 'guards' || repeat('g', 249);
-- contracts and certifications written directly
SELECT idemjob.define_contract('guards-summary', '{"type": "object", "required": ["summary"]}');
SELECT provider, contract_version FROM idemjob.certify_provider('guards-summary', 'backup-ai', '{"suite": "v1"}');
SELECT provider, revoke_reason FROM idemjob.revoke_provider('guards-summary', 'backup-ai', 'failed the suite');
SELECT pg_temp.try($$UPDATE idemjob.certifications SET revoked_at = NULL, revoke_reason = NULL WHERE intent = 'guards-summary'$$);
SELECT pg_temp.try($$UPDATE idemjob.certifications SET evidence = '{"suite": "forged"}' WHERE intent = 'guards-summary'$$);
SELECT pg_temp.try($$UPDATE idemjob.contracts SET output_schema = '{"type": "array"}' WHERE intent = 'guards-summary'$$);
SELECT pg_temp.try($$UPDATE idemjob.contracts SET output_schema = '{"type": "array"}', version = version + 1 WHERE intent = 'guards-summary'$$);
SELECT pg_temp.try($$UPDATE idemjob.contracts SET updated_at = updated_at WHERE intent = 'guards-summary'$$);
-- a schema define_contract() refuses is refused by it; inserted raw (a
-- restore of what an older version stored), it is kept with a WARNING since
-- 1.2, and its intent's results are refused until a new version (1.1 refused
-- the row, and a restore then lost every contract and certification)
SELECT pg_temp.try($$SELECT idemjob.define_contract('raw', '{"type": "object", "frobnicate": 1}')$$);
SELECT pg_temp.try($$INSERT INTO idemjob.contracts (intent, version, output_schema) VALUES ('raw-1', 1, '{"type": "object", "frobnicate": 1}')$$);
SELECT pg_temp.try($$INSERT INTO idemjob.contracts (intent, version, output_schema) VALUES ('raw-2', 1, '{"$ref": "#/$defs/nowhere"}')$$);
SELECT pg_temp.try($$INSERT INTO idemjob.contracts (intent, version, output_schema) VALUES ('raw-3', 1, '{"minLength": -1}')$$);
-- and one whose evaluation could multiply without bound (a $ref chain that
-- doubles at each of 60 levels)
SELECT left(pg_temp.try(format($$INSERT INTO idemjob.contracts (intent, version, output_schema) VALUES ('raw-4', 1, %L)$$,
	jsonb_build_object('$ref', '#/$defs/d0', '$defs', (SELECT jsonb_object_agg('d' || n, CASE WHEN n = 60
		THEN '{"type": "string"}'::jsonb
		ELSE jsonb_build_object('allOf', jsonb_build_array(jsonb_build_object('$ref', '#/$defs/d' || (n + 1)),
			jsonb_build_object('$ref', '#/$defs/d' || (n + 1)))) END) FROM generate_series(0, 60) n)))), 90) AS refused;
SELECT pg_temp.try($$INSERT INTO idemjob.contracts (intent, version, output_schema) VALUES ('raw', 0, '{}')$$);
SELECT pg_temp.try($$INSERT INTO idemjob.contracts (intent, version, output_schema) VALUES ('', 1, '{}')$$);
SELECT pg_temp.try($$INSERT INTO idemjob.contracts (intent, version, output_schema) VALUES ('raw', 2147483647, '{}')$$);
-- contracts and certifications are not deleted (nor truncated)
SELECT pg_temp.try($$DELETE FROM idemjob.certifications WHERE intent = 'guards-summary'$$);
SELECT pg_temp.try($$DELETE FROM idemjob.contracts WHERE intent = 'guards-summary'$$);
SELECT pg_temp.try($$TRUNCATE idemjob.contracts CASCADE$$);
SELECT pg_temp.try($$TRUNCATE idemjob.certifications$$);
SELECT intent, version, output_schema FROM idemjob.contracts WHERE intent = 'guards-summary';
SELECT provider, contract_version, revoked_at IS NOT NULL AS revoked, revoke_reason FROM idemjob.certifications WHERE intent = 'guards-summary';
-- inconsistent certifications
SELECT c, pg_temp.try(format($$INSERT INTO idemjob.certifications (intent, provider, contract_version, revoked_at, revoke_reason) VALUES (%s)$$, c))
FROM (VALUES ($$'guards-summary', 'p2', 1, now(), NULL$$), ($$'guards-summary', 'p2', 1, NULL, 'why'$$),
	($$'guards-summary', 'p2', 0, NULL, NULL$$), ($$'guards-summary', '', 1, NULL, NULL$$),
	($$'guards-summary', repeat('p', 256), 1, NULL, NULL$$)) v(c);
-- without the owner's rights, no raw write reaches the tables at all
CREATE ROLE guards_admin;
SELECT idemjob.grant_capability('guards_admin', 'admin');
SET ROLE guards_admin;
SELECT pg_temp.try($$INSERT INTO idemjob.certifications (intent, provider, contract_version) VALUES ('guards-summary', 'p3', 1)$$);
SELECT pg_temp.try($$UPDATE idemjob.jobs SET priority = 1$$);
SELECT pg_temp.try($$DELETE FROM idemjob.race_log$$);
RESET ROLE;
SELECT idemjob.revoke_capability('guards_admin', 'admin');
DROP ROLE guards_admin;

--
-- 5. UPDATE of race_log and spent_keys: refused outright
--
SELECT job_id AS lj FROM idemjob.submit('guards', 'race', 'charge') \gset
SELECT id AS l1 FROM idemjob.start_attempt(:'lj') \gset
SELECT state FROM idemjob.cancel_attempt(:'l1', 'stuck', fence => true);
SELECT id AS l2 FROM idemjob.start_attempt(:'lj') \gset
SELECT outcome FROM idemjob.complete_attempt(:'l2', '{"n": 2}');
SELECT outcome FROM idemjob.complete_attempt(:'l1', '{"n": 1}');
SELECT reason, expected_version, found_version FROM idemjob.race_log WHERE job_id = :'lj';
SELECT pg_temp.try(format($$UPDATE idemjob.race_log SET result_sha256 = sha256('tampered') WHERE job_id = %L$$, :'lj'));
SELECT pg_temp.try(format($$UPDATE idemjob.race_log SET reason = reason WHERE job_id = %L$$, :'lj'));
INSERT INTO idemjob.spent_keys (owner_id, idempotency_key, request_sha256, job_id, final_state, completed_at, owner_hash)
	VALUES ('guards', 'spent', sha256('r'), idemjob.uuid_v7(), 'succeeded', now(), 'guards'::text);
SELECT pg_temp.try($$UPDATE idemjob.spent_keys SET final_state = 'failed' WHERE owner_id = 'guards'$$);
SELECT pg_temp.try($$UPDATE idemjob.spent_keys SET idempotency_key = idempotency_key WHERE owner_id = 'guards'$$);

-- owner_hash (since 1.2) is the owner's hash: a row with another is
-- refused, and no update moves it (a row without one: owner_hash_fill)
SELECT spent.owner_hash = idemjob.owner_hash('guards'::text) AS spent_key_hashed
FROM idemjob.spent_keys spent WHERE idempotency_key = 'spent';
SELECT pg_temp.try($$INSERT INTO idemjob.spent_keys (owner_id, idempotency_key, request_sha256, job_id, final_state, completed_at, owner_hash)
	VALUES ('guards', 'spent-elsewhere', sha256('r'), idemjob.uuid_v7(), 'succeeded', now(), idemjob.owner_hash('other'::text))$$);
SELECT pg_temp.try(format($$INSERT INTO idemjob.race_log (logged_at, job_id, owner_id, attempt_id, expected_version, found_version, reason, result_sha256, result_bytes, provider, owner_hash)
	VALUES (now(), %L, 'guards', idemjob.uuid_v7(), 0, 1, 'version_moved', sha256('x'), 1, 'default', 7)$$, :'lj'));
-- (in the partitioned layout refused as the insert into another partition,
-- or the delete from this one, that PostgreSQL makes of it: guards_1.out)
SELECT pg_temp.try(format($$UPDATE idemjob.jobs SET owner_hash = 7 WHERE id = %L$$, :'lj'));
SELECT pg_temp.try(format($$UPDATE idemjob.attempts SET owner_hash = 7 WHERE id = %L$$, :'l1'));
SELECT pg_temp.try(format($$INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, params, provider, owner_hash)
	VALUES (idemjob.uuid_v7(), 'guards', 'misrouted', 'charge', '{}', 'default', idemjob.owner_hash('other'::text))$$));
-- an id made by the extension carries its owner's hash in its last 32 bits
SELECT idemjob.owner_hash(:'lj'::uuid) = idemjob.owner_hash('guards'::text) AS job_id_hashed,
	idemjob.owner_hash(:'l1'::uuid) = idemjob.owner_hash('guards'::text) AS attempt_id_hashed,
	(SELECT owner_hash FROM idemjob.jobs WHERE id = :'lj') = idemjob.owner_hash('guards'::text) AS job_row_hashed;

--
-- 6. DELETE and TRUNCATE
--
SELECT job_id AS dj FROM idemjob.submit('guards', 'in-flight', 'charge') \gset
SELECT id AS d1 FROM idemjob.start_attempt(:'dj') \gset
SELECT pg_temp.try(format('DELETE FROM idemjob.jobs WHERE id = %L', :'dj'));
SELECT pg_temp.try(format('DELETE FROM idemjob.attempts WHERE id = %L', :'d1'));
SELECT pg_temp.try(format('DELETE FROM idemjob.attempts WHERE id = %L', :'l1'));
SELECT pg_temp.try($$TRUNCATE idemjob.attempts$$);
SET client_min_messages = warning;	-- (the partitions it would cascade to)
SELECT pg_temp.try($$TRUNCATE idemjob.jobs CASCADE$$);
RESET client_min_messages;
SELECT count(*) AS jobs FROM idemjob.jobs WHERE owner_id = 'guards';
-- a final job goes with its attempts; its race-log rows stay
SELECT pg_temp.try(format('DELETE FROM idemjob.jobs WHERE id = %L', :'lj'));
SELECT count(*) AS attempts FROM idemjob.attempts WHERE job_id = :'lj';
SELECT count(*) AS race_log FROM idemjob.race_log WHERE job_id = :'lj';
-- race-log rows and spent keys may be deleted, even truncated
SELECT pg_temp.try(format('DELETE FROM idemjob.race_log WHERE job_id = %L', :'lj'));
SELECT pg_temp.try($$DELETE FROM idemjob.spent_keys WHERE idempotency_key = 'spent'$$);
BEGIN;
SELECT pg_temp.try($$TRUNCATE idemjob.race_log, idemjob.spent_keys$$);
ROLLBACK;

--
-- 7. The messages say what and why
--
\set VERBOSITY default
INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, provider, owner_hash)
	VALUES ('01a23729-5c23-7683-afae-79918f3848fd', 'guards', 'msg', 'charge', 'default', 'guards'::text);
UPDATE idemjob.jobs SET state = 'cancelled' WHERE id = '01a23729-5c23-7683-afae-79918f3848fd';
DELETE FROM idemjob.jobs WHERE id = '01a23729-5c23-7683-afae-79918f3848fd';
INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, provider, state, version, attempt_count, owner_hash)
	VALUES ('01a23729-5c23-7683-afae-79918f3848fc', 'guards', 'msg-2', 'charge', 'default', 'succeeded', 1, 1, 'guards'::text);
SET client_min_messages = warning;
TRUNCATE idemjob.jobs CASCADE;
RESET client_min_messages;
\set VERBOSITY sqlstate

--
-- 8. The extension's own statements do not call the guards (they would
-- return at once on the trusted path); every other statement does, and
-- every other trigger still fires for the extension's statements.
-- Counted with track_functions, each block in one transaction (the counts
-- are those not yet sent to the statistics system, which a backend does
-- only between transactions; pg_stat_force_next_flush() empties them).
--
SET track_functions = 'all';
-- (a DBA's trigger names its tables with their schema: since 1.2 it runs
-- with search_path pinned, and cannot reach a temporary table)
CREATE TABLE public.guards_fired (tg text);
CREATE FUNCTION public.guards_dba_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.guards_fired VALUES (TG_NAME || ' ' || TG_WHEN || ' ' || TG_OP);
	RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END
$$;
CREATE VIEW pg_temp.guard_calls AS
	SELECT f.funcname, coalesce(s.calls, 0) AS calls
	FROM unnest('{jobs_guard,attempts_guard,race_log_guard,contracts_guard,certifications_guard,spent_keys_guard}'::name[]) f(funcname)
	LEFT JOIN pg_stat_xact_user_functions s
		ON s.schemaname = 'idemjob' AND s.funcname = f.funcname
	ORDER BY 1;
SELECT pg_stat_force_next_flush();
BEGIN;
-- a whole life through the functions: submit, start, unknown, a result
-- that wins, a late one that loses, a failed job, a cancelled one
SELECT job_id AS oj FROM idemjob.submit('guards', 'own-1', 'charge', '{}') \gset
SELECT id AS o1 FROM idemjob.start_attempt(:'oj') \gset
SELECT state FROM idemjob.mark_unknown(:'o1', 'timeout');
SELECT state FROM idemjob.cancel_attempt(:'o1', 'gave up', fence => true);
SELECT id AS o2 FROM idemjob.start_attempt(:'oj') \gset
SELECT outcome FROM idemjob.complete_attempt(:'o2', '{"n": 2}');
SELECT outcome FROM idemjob.complete_attempt(:'o1', '{"n": 1}');
SELECT job_id AS fj FROM idemjob.submit('guards', 'own-2', 'charge', '{}', max_attempts => 1) \gset
SELECT id AS f1 FROM idemjob.start_attempt(:'fj') \gset
SELECT state FROM idemjob.fail_attempt(:'f1', '{"e": 1}', false);
SELECT state FROM idemjob.cancel_job((SELECT job_id FROM idemjob.submit('guards', 'own-3', 'charge', '{}')), 'test');
SELECT created FROM idemjob.submit('guards', 'own-6', 'own-claim', '{}');
SELECT attempt_id AS c1 FROM idemjob.claim('w', intents => '{own-claim}') \gset
SELECT count(*) FROM idemjob.heartbeat(:'c1');
SELECT outcome FROM idemjob.complete_attempt(:'c1', '{}');
SELECT * FROM pg_temp.guard_calls;
-- raw DML calls them: a no-op update of each table's row
UPDATE idemjob.jobs SET version = version WHERE id = :'oj';
UPDATE idemjob.attempts SET state = state WHERE id = :'o1';
SELECT * FROM pg_temp.guard_calls;
-- a trigger a DBA adds fires for the extension's statements as before
CREATE TRIGGER dba_before BEFORE INSERT ON idemjob.jobs
	FOR EACH ROW EXECUTE FUNCTION public.guards_dba_trigger();
CREATE TRIGGER dba_after AFTER UPDATE ON idemjob.jobs
	FOR EACH ROW EXECUTE FUNCTION public.guards_dba_trigger();
SELECT job_id AS dj FROM idemjob.submit('guards', 'own-4', 'charge', '{}') \gset
SELECT id AS d1 FROM idemjob.start_attempt(:'dj') \gset
SELECT * FROM public.guards_fired ORDER BY 1;
SELECT * FROM pg_temp.guard_calls;
ROLLBACK;
DROP TABLE public.guards_fired;
DROP FUNCTION public.guards_dba_trigger();
-- an idemjob function that fails half-way leaves no statement unguarded
-- (a refused statement's guard call is not counted: it ended in an error)
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT job_id AS ej FROM idemjob.submit('guards', 'own-5', 'charge', '{}') \gset
SELECT pg_temp.try($$SELECT idemjob.submit('guards', 'own-5', 'charge', '{"other": 1}')$$);
SELECT pg_temp.try(format('UPDATE idemjob.jobs SET state = %L WHERE id = %L', 'cancelled', :'ej'));
UPDATE idemjob.jobs SET version = version WHERE id = :'ej';
SELECT * FROM pg_temp.guard_calls;
ROLLBACK;
RESET track_functions;
