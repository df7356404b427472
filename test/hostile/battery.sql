-- test/hostile/battery.sql: a table-driven battery of hostile inputs.
--
-- Every SQL function of idemjob x every argument x a list of hostile values
-- (NULL, empty, 255/256 bytes, multi-megabyte, invalid UTF-8, control
-- characters, quotes and $, 10,000-level jsonb, huge arrays, edge numbers,
-- unknown and malformed uuids, bad intervals), plus lock_timeout and
-- statement_timeout firing in the middle of a call.  Each case has the
-- SQLSTATE the contract (../../../shared/CONTRACT.md) prescribes; where the
-- contract is silent the choice is noted next to the value ("silent:").
--
-- hostile.run_case(id) runs one case inside a subtransaction that is always
-- rolled back at the end (so each case is also "a call inside a rolled-back
-- savepoint"), and records in hostile.results:
--   got        the SQLSTATE (00000 when the call answered)
--   checked    for answered calls, a check of what was stored (byte-equal
--              values, deadline, a retry that changes nothing, ...)
--   unchanged  the tables are exactly as before (nothing remains, no
--              partial row): a fingerprint of every row version
--   guard      the raw-DML guards still refuse a forbidden change after the
--              case (an error mid-call must not leave the trusted path on)
-- run.sh drives it one case per statement, so that a backend crash is seen
-- as a lost connection, and scans the server log for crashes.

\set ON_ERROR_STOP 1
SET client_min_messages = warning;

DROP SCHEMA IF EXISTS hostile CASCADE;
CREATE SCHEMA hostile;
CREATE EXTENSION IF NOT EXISTS dblink;

-- ---------------------------------------------------------------- fixtures
CREATE TABLE hostile.fixtures (name text PRIMARY KEY, id uuid);

CREATE FUNCTION hostile.fx(p_name text) RETURNS uuid
LANGUAGE sql STABLE AS $$ SELECT id FROM hostile.fixtures WHERE name = p_name $$;

-- the ids a case created, for its check
CREATE FUNCTION hostile.last_job() RETURNS uuid
LANGUAGE sql STABLE AS $$ SELECT nullif(current_setting('hostile.last_job', true), '')::uuid $$;
CREATE FUNCTION hostile.last_attempt() RETURNS uuid
LANGUAGE sql STABLE AS $$ SELECT nullif(current_setting('hostile.last_attempt', true), '')::uuid $$;

CREATE SEQUENCE hostile.seq;

-- a fresh pending job (intent p_intent)
CREATE FUNCTION hostile.new_job(p_intent text DEFAULT 'hi') RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE v uuid;
BEGIN
	SELECT job_id INTO v FROM idemjob.submit('hfix', 'fix-' || nextval('hostile.seq'), p_intent);
	PERFORM set_config('hostile.last_job', v::text, true);
	RETURN v;
END $$;

-- a fresh started attempt on a fresh job
CREATE FUNCTION hostile.new_started(p_intent text DEFAULT 'hi', p_timeout interval DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE v uuid;
BEGIN
	SELECT id INTO v FROM idemjob.start_attempt(hostile.new_job(p_intent), NULL, p_timeout, 'hw');
	PERFORM set_config('hostile.last_attempt', v::text, true);
	RETURN v;
END $$;

-- a fresh provider certified for intent hc2
CREATE FUNCTION hostile.new_cert() RETURNS text
LANGUAGE plpgsql AS $$
DECLARE v text := 'hcert-' || nextval('hostile.seq');
BEGIN
	PERFORM idemjob.certify_provider('hc2', v);
	RETURN v;
END $$;

-- a value exactly at idemjob.max_payload_bytes (p_over = 0) or one byte over
-- (p_over = 1): sets the limit for this transaction from the datum's size
CREATE FUNCTION hostile.at_limit(p_value jsonb, p_over int) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('idemjob.max_payload_bytes',
		(pg_column_size(p_value) - p_over)::text, true);
	RETURN p_value;
END $$;

-- large values kept compressed on disk (a toasted, compressed datum reaches
-- the function: the limit is on the uncompressed size)
CREATE TABLE hostile.blobs (name text PRIMARY KEY, v jsonb);
INSERT INTO hostile.blobs VALUES
	('z2mb', jsonb_build_object('s', repeat('ab', 1024 * 1024))),
	('z900k', jsonb_build_object('s', repeat('ab', 450 * 1024)));

-- committed fixtures: contracts, a finished job (for the guard probe)
SELECT idemjob.define_contract('hc', '{"type": "object", "properties": {"bad": false}}');
SELECT idemjob.define_contract('hc2', '{"type": "object"}');
DO $$
DECLARE j uuid; a uuid;
BEGIN
	SELECT job_id INTO j FROM idemjob.submit('hfix', 'succeeded', 'hi');
	SELECT id INTO a FROM idemjob.start_attempt(j);
	PERFORM idemjob.complete_attempt(a, '{"done": true}');
	INSERT INTO hostile.fixtures VALUES ('succeeded_job', j);
END $$;

-- ---------------------------------------------------------------- probes
-- every row version of every idemjob table: any write, kept or partial, changes it
CREATE FUNCTION hostile.fingerprint() RETURNS text
LANGUAGE sql VOLATILE AS $$
	SELECT md5(concat_ws('/',
		(SELECT string_agg(ctid::text || xmin::text, ',' ORDER BY ctid) FROM idemjob.jobs),
		(SELECT string_agg(ctid::text || xmin::text, ',' ORDER BY ctid) FROM idemjob.attempts),
		(SELECT string_agg(ctid::text || xmin::text, ',' ORDER BY ctid) FROM idemjob.race_log),
		(SELECT string_agg(ctid::text || xmin::text, ',' ORDER BY ctid) FROM idemjob.contracts),
		(SELECT string_agg(ctid::text || xmin::text, ',' ORDER BY ctid) FROM idemjob.certifications)))
$$;

-- the raw-DML guard still refuses to rewrite a committed result (IJ005)
CREATE FUNCTION hostile.guard_alive() RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		UPDATE idemjob.jobs SET result = '{"rewritten": true}' WHERE id = hostile.fx('succeeded_job');
	EXCEPTION WHEN OTHERS THEN
		RETURN SQLSTATE = 'IJ005';
	END;
	RAISE EXCEPTION 'guard dead' USING ERRCODE = 'HX002';
EXCEPTION WHEN SQLSTATE 'HX002' THEN
	RETURN false;
END $$;

CREATE FUNCTION hostile.connstr() RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT format('host=%s port=%s dbname=%s user=%s',
		split_part(current_setting('unix_socket_directories'), ',', 1),
		current_setting('port'), current_database(), current_user)
$$;

-- ---------------------------------------------------------------- values
-- class: how the value is expected to be received (see hostile.expect)
CREATE TABLE hostile.vals (kind text, label text, expr text, class text, note text);

INSERT INTO hostile.vals (kind, label, expr, class, note) VALUES
-- identifiers: owner, key, intent, provider, worker (255 bytes at most)
('name', 'null', 'NULL', 'null', NULL),
('name', 'empty', $$''$$, 'bad', NULL),
('name', '255 bytes', $$repeat('n', 255)$$, 'ok', NULL),
('name', '255 bytes multibyte', $$repeat('€', 85)$$, 'ok', NULL),
('name', '256 bytes', $$repeat('n', 256)$$, 'bad', NULL),
('name', '86 chars 258 bytes', $$repeat('€', 86)$$, 'bad', 'the limit is in bytes'),
('name', '3 MB', $$repeat('n', 3 * 1024 * 1024)$$, 'bad', NULL),
('name', 'invalid UTF-8', $$convert_from('\xc328'::bytea, 'UTF8')$$, 'cast:22021', 'raised by convert_from'),
('name', 'control chars', $$E'ctl\x01\x02\x1b[31m\t\r\n\x7f'$$, 'ok', 'silent: any non-empty text'),
('name', 'quotes and $', $q$$x$it's "q" \ $1 $$ %s %n; --$x$$q$, 'ok', NULL),
('name', 'sql injection', $q$$x$x'); DROP TABLE idemjob.jobs; --$x$$q$, 'ok', NULL),
('name', 'one space', $$' '$$, 'ok', 'silent: not empty'),
('name', 'emoji and bidi', $$U&'\+01F600\202E\200B'$$, 'ok', NULL),
-- free text (reasons)
('text', 'null', 'NULL', 'null', NULL),
('text', 'empty', $$''$$, 'ok', 'silent: a reason is free text, empty accepted'),
('text', '256 bytes', $$repeat('r', 256)$$, 'ok', 'silent: not an identifier'),
('text', '3 MB', $$repeat('r', 3 * 1024 * 1024)$$, 'bigtext', 'silent: accepted, or 22023 where it becomes a jsonb note over max_payload_bytes'),
('text', 'invalid UTF-8', $$convert_from('\xc328'::bytea, 'UTF8')$$, 'cast:22021', 'raised by convert_from'),
('text', 'control chars', $$E'ctl\x01\x1b\t\n'$$, 'ok', NULL),
('text', 'quotes and $', $q$$x$it's "q" \ $1 $$ }{ ]$x$$q$, 'ok', NULL),
-- uuids (the "wrong kind" and "valid" values depend on the argument)
('uuid', 'null', 'NULL', 'null', NULL),
('uuid', 'unknown', $$'f0e1d2c3-0000-4000-8000-000000000001'::uuid$$, 'missing', NULL),
('uuid', 'nil', $$'00000000-0000-0000-0000-000000000000'::uuid$$, 'missing', NULL),
('uuid', 'max', $$'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid$$, 'missing', NULL),
('uuid', 'malformed', $$'not-a-uuid'::uuid$$, 'cast:22P02', 'raised by uuid_in'),
('uuid', 'empty', $$''::uuid$$, 'cast:22P02', 'raised by uuid_in'),
('uuid', 'one digit too many', $$'f0e1d2c3-0000-4000-8000-0000000000011'::uuid$$, 'cast:22P02', 'raised by uuid_in'),
-- intervals (timeout)
('interval', 'null', 'NULL', 'null', NULL),
('interval', 'zero', $$'0'::interval$$, 'bad', NULL),
('interval', 'negative', $$'-1 second'::interval$$, 'bad', NULL),
('interval', '-1 microsecond', $$'-1 microsecond'::interval$$, 'bad', NULL),
('interval', '1 mon -30 days', $$'1 mon -30 days'::interval$$, 'bad', 'equal to zero as an interval'),
('interval', '-178000000 years', $$'-178000000 years'::interval$$, 'bad', NULL),
('interval', '1 microsecond', $$'1 microsecond'::interval$$, 'ok', NULL),
('interval', '290000 years', $$'290000 years'::interval$$, 'ok', NULL),
('interval', '300000 years', $$'300000 years'::interval$$, 'range', 'silent: the deadline is past the timestamp range; 22008 or 22023, as an argument error (before IJ006)'),
('interval', '178000000 years', $$'178000000 years'::interval$$, 'range', 'silent: as above'),
-- booleans
('bool', 'null', 'NULL', 'null', NULL),
('bool', 'true', 'true', 'ok', NULL),
('bool', 'false', 'false', 'ok', NULL),
-- jsonb payloads (params, result, error, evidence, validate's value)
('jsonb', 'null', 'NULL', 'null', NULL),
('jsonb', 'empty object', $$'{}'::jsonb$$, 'ok', NULL),
('jsonb', 'json null', $$'null'::jsonb$$, 'ok', 'silent: any jsonb'),
('jsonb', 'empty string', $$'""'::jsonb$$, 'ok', NULL),
('jsonb', 'nested 10000 arrays', $$(repeat('[', 10000) || repeat(']', 10000))::jsonb$$, 'bad', 'since 1.2: deeper than idemjob.max_payload_depth, which a restore could not parse'),
('jsonb', 'nested 10000 objects', $$(repeat('{"a":', 10000) || '1' || repeat('}', 10000))::jsonb$$, 'bad', 'since 1.2: as above'),
('jsonb', 'nested 512 arrays', $$(repeat('[', 512) || repeat(']', 512))::jsonb$$, 'ok', 'the deepest idemjob.max_payload_depth takes'),
('jsonb', 'array of 10000', $$(SELECT jsonb_agg(i) FROM generate_series(1, 10000) i)$$, 'ok', NULL),
('jsonb', 'array of 1000000', $$(SELECT jsonb_agg(i) FROM generate_series(1, 1000000) i)$$, 'big', NULL),
('jsonb', '1e308', $$'{"n": 1e308}'::jsonb$$, 'ok', NULL),
('jsonb', '-0', $$'{"n": -0, "m": -0.0}'::jsonb$$, 'ok', NULL),
('jsonb', '1e-308 and 1e100000', $$'[1e-308, 1e100000]'::jsonb$$, 'ok', NULL),
('jsonb', '5000 decimals', $$('{"n": 0.' || repeat('1', 5000) || '}')::jsonb$$, 'ok', NULL),
('jsonb', 'number out of range', $$'1e1000000'::jsonb$$, 'cast:22003', 'raised by jsonb_in'),
('jsonb', '3 MB string', $$jsonb_build_object('s', repeat('x', 3 * 1024 * 1024))$$, 'big', NULL),
('jsonb', 'exactly max_payload_bytes', $$hostile.at_limit('{"k": "at the limit"}', 0)$$, 'ok', NULL),
('jsonb', 'one byte over', $$hostile.at_limit('{"k": "at the limit"}', 1)$$, 'big', NULL),
('jsonb', '2 MB compressed on disk', $$(SELECT v FROM hostile.blobs WHERE name = 'z2mb')$$, 'big', 'measured uncompressed'),
('jsonb', '900 kB compressed on disk', $$(SELECT v FROM hostile.blobs WHERE name = 'z900k')$$, 'ok', NULL),
('jsonb', 'control chars', $$'{"c": "\u0001\u001f\t\n\u007f"}'::jsonb$$, 'ok', NULL),
('jsonb', 'quotes and $', $q$$x${"q": "it's \"q\" $1 $$ \\"}$x$::jsonb$q$, 'ok', NULL),
('jsonb', 'duplicate keys', $$'{"a": 1, "a": 2}'::jsonb$$, 'ok', NULL),
('jsonb', 'lone surrogate', $$'"\ud800"'::jsonb$$, 'cast:22P02', 'raised by jsonb_in'),
('jsonb', '\u0000', $$'"\u0000"'::jsonb$$, 'cast:22P05', 'raised by jsonb_in'),
('jsonb', 'invalid UTF-8', $$convert_from('\x7b2261223a2280227d'::bytea, 'UTF8')::jsonb$$, 'cast:22021', 'raised by convert_from'),
-- output schemas (define_contract, validate)
('schema', 'null', 'NULL', 'null', NULL),
('schema', 'empty schema', $$'{}'::jsonb$$, 'ok', NULL),
('schema', 'true', $$'true'::jsonb$$, 'ok', NULL),
('schema', 'false', $$'false'::jsonb$$, 'ok', NULL),
('schema', 'json null', $$'null'::jsonb$$, 'bad', 'not a schema'),
('schema', 'array', $$'[]'::jsonb$$, 'bad', 'not a schema'),
('schema', 'number 1e308', $$'1e308'::jsonb$$, 'bad', 'not a schema'),
('schema', 'unknown keyword', $$'{"frobnicate": 1}'::jsonb$$, 'bad', NULL),
('schema', 'remote $ref', $$'{"$ref": "http://example.com/s.json"}'::jsonb$$, 'bad', NULL),
('schema', 'dangling $ref', $$'{"$ref": "#/$defs/nope"}'::jsonb$$, 'bad', NULL),
('schema', '$id below the root', $$'{"properties": {"a": {"$id": "x"}}}'::jsonb$$, 'bad', NULL),
('schema', 'bad type name', $$'{"type": "nonsense"}'::jsonb$$, 'bad', 'silent: a malformed keyword value is a bad schema (validator.h: 22023)'),
('schema', 'negative minLength', $$'{"minLength": -1}'::jsonb$$, 'bad', 'silent: as above'),
('schema', 'invalid pattern', $$'{"pattern": "("}'::jsonb$$, 'bad', 'silent: as above'),
('schema', 'nested 10000 arrays', $$(repeat('[', 10000) || repeat(']', 10000))::jsonb$$, 'bad', 'not a schema'),
('schema', 'nested 10000 not', $$(repeat('{"not":', 10000) || '{}' || repeat('}', 10000))::jsonb$$, 'bad', 'since 1.2: deeper than idemjob.max_payload_depth'),
('schema', '3 MB', $$jsonb_build_object('description', repeat('x', 3 * 1024 * 1024))$$, 'big', NULL);

-- ---------------------------------------------------------------- arguments
-- one row per function argument: the template ({1}, {2}, ... are the
-- arguments, {id} the case number), the default of each argument, the
-- SQLSTATE of a well-formed value, and a check of what an answered call
-- stored ({v} is the value under test)
CREATE TABLE hostile.fns (fn text PRIMARY KEY, template text, nargs int);
CREATE TABLE hostile.args (
	fn		text, pos int, name text, kind text,
	dflt	text,			-- default expression
	nullable boolean,		-- NULL allowed (the contract's exceptions)
	ok_code	text,			-- SQLSTATE for a well-formed value
	wrong	text,			-- uuid args: an id of the other kind
	valid	text,			-- uuid args: a valid id, braced and upper case
	chk		text,			-- check for an answered call
	PRIMARY KEY (fn, pos));

INSERT INTO hostile.fns VALUES
('submit', $$SELECT count(*) FROM idemjob.submit({1}, {2}, {3}, {4}, {5})$$, 5),
('start_attempt', $$SELECT count(*) FROM idemjob.start_attempt({1}, {2}, {3}, {4})$$, 4),
('complete_attempt', $$SELECT count(*) FROM idemjob.complete_attempt({1}, {2})$$, 2),
('fail_attempt', $$SELECT count(*) FROM idemjob.fail_attempt({1}, {2}, {3})$$, 3),
('mark_unknown', $$SELECT count(*) FROM idemjob.mark_unknown({1}, {2})$$, 2),
('cancel_attempt', $$SELECT count(*) FROM idemjob.cancel_attempt({1}, {2}, {3})$$, 3),
('cancel_job', $$SELECT count(*) FROM idemjob.cancel_job({1}, {2})$$, 2),
('define_contract', $$SELECT idemjob.define_contract({1}, {2})$$, 2),
('certify_provider', $$SELECT count(*) FROM idemjob.certify_provider({1}, {2}, {3})$$, 3),
('revoke_provider', $$SELECT count(*) FROM idemjob.revoke_provider({1}, {2}, {3})$$, 3),
('validate', $$SELECT idemjob.validate({1}, {2})$$, 2);

INSERT INTO hostile.args VALUES
('submit', 1, 'owner_id', 'name', $$'hown{id}'$$, false, '00000', NULL, NULL,
 $$SELECT count(*) = 1 FROM idemjob.jobs WHERE owner_id = {v} AND idempotency_key = 'hkey' AND state = 'pending'$$),
('submit', 2, 'idempotency_key', 'name', $$'hkey'$$, false, '00000', NULL, NULL,
 $$SELECT count(*) = 1 FROM idemjob.jobs WHERE owner_id = 'hown{id}' AND idempotency_key = {v}$$),
('submit', 3, 'intent', 'name', $$'hi'$$, false, '00000', NULL, NULL,
 $$SELECT count(*) = 1 FROM idemjob.jobs WHERE owner_id = 'hown{id}' AND intent = {v}$$),
('submit', 4, 'params', 'jsonb', $$'{}'$$, false, '00000', NULL, NULL,
 $$SELECT count(*) = 1 FROM idemjob.jobs WHERE owner_id = 'hown{id}' AND params::text = ({v})::text$$),
('submit', 5, 'provider', 'name', 'NULL', true, '00000', NULL, NULL,
 $$SELECT count(*) = 1 FROM idemjob.jobs WHERE owner_id = 'hown{id}' AND provider = coalesce({v}, 'default')$$),
('start_attempt', 1, 'job_id', 'uuid', 'hostile.new_job()', false, '00000',
 'hostile.new_started()', $$('{' || upper(hostile.new_job()::text) || '}')::uuid$$,
 $$SELECT count(*) = 1 FROM idemjob.attempts WHERE job_id = hostile.last_job() AND state = 'started'$$),
('start_attempt', 2, 'provider', 'name', 'NULL', true, 'IJ004', NULL, NULL,
 $$SELECT count(*) = 1 FROM idemjob.attempts WHERE job_id = hostile.last_job() AND provider = 'default'$$),
('start_attempt', 3, 'timeout', 'interval', 'NULL', true, '00000', NULL, NULL,
 $$SELECT count(*) = 1 FROM idemjob.attempts WHERE job_id = hostile.last_job()
   AND deadline = started_at + coalesce({v}, current_setting('idemjob.attempt_timeout')::interval)$$),
('start_attempt', 4, 'worker', 'name', 'NULL', true, '00000', NULL, NULL,
 $$SELECT count(*) = 1 FROM idemjob.attempts WHERE job_id = hostile.last_job() AND worker IS NOT DISTINCT FROM {v}$$),
('complete_attempt', 1, 'attempt_id', 'uuid', 'hostile.new_started()', false, '00000',
 'hostile.new_job()', $$('{' || upper(hostile.new_started()::text) || '}')::uuid$$,
 $$SELECT state = 'succeeded' FROM idemjob.attempts WHERE id = hostile.last_attempt()$$),
('complete_attempt', 2, 'result', 'jsonb', $$'{"r": 1}'$$, false, '00000', NULL, NULL,
 $$SELECT j.result::text = ({v})::text AND j.completed_by = hostile.last_attempt() AND j.state = 'succeeded'
   FROM idemjob.jobs j WHERE j.id = hostile.last_job()$$),
('fail_attempt', 1, 'attempt_id', 'uuid', 'hostile.new_started()', false, '00000',
 'hostile.new_job()', $$('{' || upper(hostile.new_started()::text) || '}')::uuid$$,
 $$SELECT state = 'failed' FROM idemjob.attempts WHERE id = hostile.last_attempt()$$),
('fail_attempt', 2, 'error', 'jsonb', 'NULL', true, '00000', NULL, NULL,
 $$SELECT a.error::text = coalesce({v}, '{"code": "failed"}')::text AND j.state = 'pending'
   FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id WHERE a.id = hostile.last_attempt()$$),
('fail_attempt', 3, 'retryable', 'bool', 'true', false, '00000', NULL, NULL,
 $$SELECT j.state::text = CASE WHEN {v} THEN 'pending' ELSE 'failed' END
   FROM idemjob.jobs j WHERE j.id = hostile.last_job()$$),
('mark_unknown', 1, 'attempt_id', 'uuid', 'hostile.new_started()', false, '00000',
 'hostile.new_job()', $$('{' || upper(hostile.new_started()::text) || '}')::uuid$$,
 $$SELECT a.state = 'unknown' AND j.state = 'in_doubt' FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id
   WHERE a.id = hostile.last_attempt()$$),
('mark_unknown', 2, 'reason', 'text', $$'timeout'$$, false, '00000', NULL, NULL,
 $$SELECT error->>'code' = 'unknown' AND error->>'reason' = {v} FROM idemjob.attempts WHERE id = hostile.last_attempt()$$),
('cancel_attempt', 1, 'attempt_id', 'uuid', 'hostile.new_started()', false, '00000',
 'hostile.new_job()', $$('{' || upper(hostile.new_started()::text) || '}')::uuid$$,
 $$SELECT a.state = 'cancelled' AND j.state = 'pending' FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id
   WHERE a.id = hostile.last_attempt()$$),
('cancel_attempt', 2, 'reason', 'text', $$'because'$$, false, '00000', NULL, NULL,
 $$SELECT error->>'code' = 'cancelled' AND error->>'reason' = {v} FROM idemjob.attempts WHERE id = hostile.last_attempt()$$),
('cancel_attempt', 3, 'fence', 'bool', 'false', false, '00000', NULL, NULL,
 $$SELECT j.version = CASE WHEN {v} THEN 1 ELSE 0 END FROM idemjob.jobs j WHERE j.id = hostile.last_job()$$),
('cancel_job', 1, 'job_id', 'uuid', 'hostile.new_job()', false, '00000',
 'hostile.new_started()', $$('{' || upper(hostile.new_job()::text) || '}')::uuid$$,
 $$SELECT state = 'cancelled' AND version = 1 FROM idemjob.jobs WHERE id = hostile.last_job()$$),
('cancel_job', 2, 'reason', 'text', $$'because'$$, false, '00000', NULL, NULL,
 $$SELECT state = 'cancelled' FROM idemjob.jobs WHERE id = hostile.last_job()$$),
('define_contract', 1, 'intent', 'name', $$'hdc{id}'$$, false, '00000', NULL, NULL,
 $$SELECT count(*) = 1 FROM idemjob.contracts WHERE intent = {v} AND version = 1$$),
('define_contract', 2, 'output_schema', 'schema', $$'{}'$$, false, '00000', NULL, NULL,
 $$SELECT output_schema::text = ({v})::text FROM idemjob.contracts WHERE intent = 'hdc{id}'$$),
('certify_provider', 1, 'intent', 'name', $$'hc'$$, false, 'IJ006', NULL, NULL, NULL),
('certify_provider', 2, 'provider', 'name', $$'hcp{id}'$$, false, '00000', NULL, NULL,
 $$SELECT count(*) = 1 FROM idemjob.certifications WHERE intent = 'hc' AND provider = {v} AND revoked_at IS NULL$$),
('certify_provider', 3, 'evidence', 'jsonb', 'NULL', true, '00000', NULL, NULL,
 $$SELECT evidence::text IS NOT DISTINCT FROM ({v})::text FROM idemjob.certifications WHERE intent = 'hc' AND provider = 'hcp{id}'$$),
('revoke_provider', 1, 'intent', 'name', $$'hc2'$$, false, 'IJ006', NULL, NULL, NULL),
('revoke_provider', 2, 'provider', 'name', 'hostile.new_cert()', false, 'IJ006', NULL, NULL, NULL),
('revoke_provider', 3, 'reason', 'text', $$'because'$$, false, '00000', NULL, NULL,
 $$SELECT count(*) = 1 FROM idemjob.certifications WHERE intent = 'hc2' AND revoked_at IS NOT NULL
   AND provider = 'hcert-' || currval('hostile.seq')$$),
('validate', 1, 'output_schema', 'schema', $$'{}'$$, false, '00000', NULL, NULL, NULL),
('validate', 2, 'value', 'jsonb', $$'{}'$$, false, '00000', NULL, NULL,
 $$SELECT idemjob.validate('{}', {v}) IS NULL AND idemjob.validate('true', {v}) IS NULL
   AND idemjob.validate('false', {v}) IS NOT NULL$$);

-- ---------------------------------------------------------------- cases
CREATE TABLE hostile.cases (
	id			serial PRIMARY KEY,
	fn			text NOT NULL,
	arg			text NOT NULL,
	label		text NOT NULL,
	kind		text NOT NULL DEFAULT 'plain',	-- plain, lock_timeout, statement_timeout
	sql			text NOT NULL,
	expect		text NOT NULL,					-- SQLSTATEs, '|'-separated
	chk			text,							-- must return true for an answer
	setup		text,							-- committed before the case
	holder		text,							-- run by a second session, holding a lock
	note		text
);

-- submit, start, cancel (no fence), start again, the second wins, the first
-- returns late and loses: every table is written
CREATE FUNCTION hostile.chain() RETURNS text
LANGUAGE plpgsql AS $$
DECLARE j uuid; a1 uuid; a2 uuid; o1 text; o2 text; r text;
BEGIN
	j := hostile.new_job();
	SELECT id INTO a1 FROM idemjob.start_attempt(j);
	PERFORM idemjob.cancel_attempt(a1, 'chain');
	SELECT id INTO a2 FROM idemjob.start_attempt(j);
	SELECT outcome INTO o2 FROM idemjob.complete_attempt(a2, '{"first": 1}');
	SELECT outcome INTO o1 FROM idemjob.complete_attempt(a1, '{"late": 1}');
	SELECT reason INTO r FROM idemjob.race_log WHERE attempt_id = a1;
	RETURN o2 || '/' || o1 || '/' || r;
END $$;

CREATE FUNCTION hostile.expect(p_arg hostile.args, p_class text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE
		WHEN p_class = 'null' THEN CASE WHEN p_arg.nullable THEN '00000' ELSE '22004' END
		WHEN p_class = 'ok' THEN p_arg.ok_code
		WHEN p_class IN ('bad', 'big') THEN '22023'
		WHEN p_class = 'missing' THEN 'IJ006'
		WHEN p_class = 'range' THEN '22008|22023'
		WHEN p_class = 'bigtext' THEN '00000|22023'
		WHEN p_class LIKE 'cast:%' THEN substr(p_class, 6)
	END
$$;

DO $gen$
DECLARE
	f hostile.fns;
	a hostile.args;
	v record;
	s text;
	c text;
	i int;
	e text;
	cid int;
BEGIN
	FOR f IN SELECT * FROM hostile.fns ORDER BY fn LOOP
		FOR a IN SELECT * FROM hostile.args WHERE fn = f.fn ORDER BY pos LOOP
			FOR v IN
				SELECT * FROM hostile.vals WHERE kind = a.kind
				UNION ALL
				SELECT 'uuid', 'id of the other kind', a.wrong, 'missing', NULL WHERE a.wrong IS NOT NULL
				UNION ALL
				SELECT 'uuid', 'valid, braced upper case', a.valid, 'ok', NULL WHERE a.valid IS NOT NULL
			LOOP
				s := f.template;
				FOR i IN 1 .. f.nargs LOOP
					s := replace(s, '{' || i || '}',
						CASE WHEN i = a.pos THEN v.expr
						ELSE (SELECT dflt FROM hostile.args WHERE fn = f.fn AND pos = i) END);
				END LOOP;
				e := hostile.expect(a, v.class);
				c := CASE WHEN e LIKE '00000%' AND a.chk IS NOT NULL
					 THEN replace(a.chk, '{v}', v.expr) END;
				INSERT INTO hostile.cases (fn, arg, label, sql, expect, chk, note)
				VALUES (f.fn, a.name, v.label, s, e, c, v.note) RETURNING id INTO cid;
				UPDATE hostile.cases SET sql = replace(sql, '{id}', cid::text),
					chk = replace(chk, '{id}', cid::text) WHERE id = cid;
			END LOOP;
		END LOOP;
	END LOOP;
END
$gen$;

-- checks on argument order: 22xxx before IJ006, whatever the other arguments
INSERT INTO hostile.cases (fn, arg, label, sql, expect, note) VALUES
('start_attempt', 'timeout', 'negative, unknown job', $$SELECT count(*) FROM idemjob.start_attempt('f0e1d2c3-0000-4000-8000-000000000001', NULL, '-1 s')$$, '22023', 'arguments first'),
('start_attempt', 'timeout', '300000 years, unknown job', $$SELECT count(*) FROM idemjob.start_attempt('f0e1d2c3-0000-4000-8000-000000000001', NULL, '300000 years')$$, '22008|22023', 'arguments first: an out-of-range deadline is an argument error'),
('start_attempt', 'timeout', '300000 years, finished job', $$SELECT count(*) FROM idemjob.start_attempt(hostile.fx('succeeded_job'), NULL, '300000 years')$$, '22008|22023', 'arguments first, before IJ003'),
('start_attempt', 'provider', 'empty, unknown job', $$SELECT count(*) FROM idemjob.start_attempt('f0e1d2c3-0000-4000-8000-000000000001', '')$$, '22023', 'arguments first'),
('start_attempt', 'worker', '256 bytes, unknown job', $$SELECT count(*) FROM idemjob.start_attempt('f0e1d2c3-0000-4000-8000-000000000001', NULL, NULL, repeat('w', 256))$$, '22023', 'arguments first'),
('complete_attempt', 'result', '3 MB, unknown attempt', $$SELECT count(*) FROM idemjob.complete_attempt('f0e1d2c3-0000-4000-8000-000000000001', jsonb_build_object('s', repeat('x', 3 * 1024 * 1024)))$$, '22023', 'arguments first'),
('complete_attempt', 'result', 'NULL, unknown attempt', $$SELECT count(*) FROM idemjob.complete_attempt('f0e1d2c3-0000-4000-8000-000000000001', NULL)$$, '22004', 'arguments first'),
('fail_attempt', 'error', '3 MB, unknown attempt', $$SELECT count(*) FROM idemjob.fail_attempt('f0e1d2c3-0000-4000-8000-000000000001', jsonb_build_object('s', repeat('x', 3 * 1024 * 1024)))$$, '22023', 'arguments first'),
('fail_attempt', 'retryable', 'NULL, unknown attempt', $$SELECT count(*) FROM idemjob.fail_attempt('f0e1d2c3-0000-4000-8000-000000000001', NULL, NULL)$$, '22004', 'arguments first'),
('mark_unknown', 'reason', 'NULL, unknown attempt', $$SELECT count(*) FROM idemjob.mark_unknown('f0e1d2c3-0000-4000-8000-000000000001', NULL)$$, '22004', 'arguments first'),
('cancel_attempt', 'fence', 'NULL, unknown attempt', $$SELECT count(*) FROM idemjob.cancel_attempt('f0e1d2c3-0000-4000-8000-000000000001', 'r', NULL)$$, '22004', 'arguments first'),
('cancel_job', 'reason', 'NULL, unknown job', $$SELECT count(*) FROM idemjob.cancel_job('f0e1d2c3-0000-4000-8000-000000000001', NULL)$$, '22004', 'arguments first'),
('cancel_job', 'reason', 'NULL, finished job', $$SELECT count(*) FROM idemjob.cancel_job(hostile.fx('succeeded_job'), NULL)$$, '22004', 'arguments first, before IJ003'),
('certify_provider', 'evidence', '3 MB, no contract', $$SELECT count(*) FROM idemjob.certify_provider('no-such-intent', 'p', jsonb_build_object('s', repeat('x', 3 * 1024 * 1024)))$$, '22023', 'arguments first'),
('certify_provider', 'provider', 'empty, no contract', $$SELECT count(*) FROM idemjob.certify_provider('no-such-intent', '')$$, '22023', 'arguments first'),
('revoke_provider', 'reason', 'NULL, no contract', $$SELECT count(*) FROM idemjob.revoke_provider('no-such-intent', 'p', NULL)$$, '22004', 'arguments first'),
('define_contract', 'output_schema', 'unknown keyword, 256-byte intent', $$SELECT idemjob.define_contract(repeat('i', 256), '{"frobnicate": 1}')$$, '22023', NULL),
('expire_attempts', '-', 'no arguments', $$SELECT idemjob.expire_attempts()$$, '00000', NULL),
('expire_attempts', '-', 'one expired attempt', $$SELECT idemjob.expire_attempts() >= 1 FROM (SELECT hostile.new_started('hi', '1 microsecond'), pg_sleep(0.01)) x$$, '00000', NULL),
('validate', 'value', 'nested 10000 arrays against items', $$SELECT idemjob.validate('{"items": {"type": "array"}}', (repeat('[', 10000) || repeat(']', 10000))::jsonb)$$, '22023', 'since 1.2: deeper than idemjob.max_payload_depth'),
('validate', 'value', 'nested 10000 objects against a recursive $ref', $$SELECT idemjob.validate('{"$defs": {"n": {"type": "object", "additionalProperties": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}', (repeat('{"a":', 10000) || '{}' || repeat('}', 10000))::jsonb)$$, '22023', 'since 1.2: deeper than idemjob.max_payload_depth'),
-- a chain of calls in one rolled-back savepoint: nothing remains
('complete_attempt', '-', 'submit, start, cancel, start, win, lose: all rolled back', $$SELECT hostile.chain() = 'won/lost/slot_taken'$$, '00000', NULL);

-- ---------------------------------------------------------------- timeouts mid-call
-- A second session (dblink) holds a lock the call needs after it has
-- already written something; lock_timeout (55P03) or statement_timeout
-- (57014) fires while the call waits.  The fixture is committed first, so
-- "unchanged" compares against it: nothing of the call may remain.
CREATE TABLE hostile.tfx (name text PRIMARY KEY, job uuid, attempt uuid);

-- committed fixture for a timeout case
CREATE FUNCTION hostile.prep(p_name text, p_what text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE j uuid; a uuid; a2 uuid;
BEGIN
	IF p_what = 'job' THEN
		j := hostile.new_job();
	ELSIF p_what = 'started' THEN
		a := hostile.new_started(); j := hostile.last_job();
	ELSIF p_what = 'started_hc' THEN
		a := hostile.new_started('hc'); j := hostile.last_job();
	ELSIF p_what = 'expired' THEN
		a := hostile.new_started('hi', '1 microsecond'); j := hostile.last_job();
	ELSIF p_what = 'loser' THEN
		-- a1 cancelled without a fence, a2 won: a1's result will lose
		a := hostile.new_started(); j := hostile.last_job();
		PERFORM idemjob.cancel_attempt(a, 'setup');
		SELECT id INTO a2 FROM idemjob.start_attempt(j);
		PERFORM idemjob.complete_attempt(a2, '{"won": true}');
	ELSIF p_what = 'contract' THEN
		PERFORM idemjob.define_contract(p_name, '{"type": "object"}');
	ELSIF p_what = 'certified' THEN
		PERFORM idemjob.define_contract(p_name, '{"type": "object"}');
		PERFORM idemjob.certify_provider(p_name, 'p1');
	END IF;
	INSERT INTO hostile.tfx VALUES (p_name, j, a);
END $$;

CREATE FUNCTION hostile.tj(p_name text) RETURNS uuid
LANGUAGE sql STABLE AS $$ SELECT job FROM hostile.tfx WHERE name = p_name $$;
CREATE FUNCTION hostile.ta(p_name text) RETURNS uuid
LANGUAGE sql STABLE AS $$ SELECT attempt FROM hostile.tfx WHERE name = p_name $$;

DO $gen$
DECLARE
	t record;
	k text;
	cid int;
BEGIN
	FOR t IN SELECT * FROM (VALUES
		('submit', 'waits for a concurrent insert of the same key', NULL,
		 $h$BEGIN; DO $$ BEGIN PERFORM idemjob.submit('htimeout', 'k{id}', 'hi'); END $$$h$,
		 $$SELECT count(*) FROM idemjob.submit('htimeout', 'k{id}', 'hi')$$),
		('start_attempt', 'job updated, attempt insert waits', 'job',
		 'BEGIN; LOCK TABLE idemjob.attempts IN SHARE MODE',
		 $$SELECT count(*) FROM idemjob.start_attempt(hostile.tj('t{id}'))$$),
		('complete_attempt', 'won: job written, attempt update waits', 'started',
		 'BEGIN; LOCK TABLE idemjob.attempts IN SHARE MODE',
		 $$SELECT count(*) FROM idemjob.complete_attempt(hostile.ta('t{id}'), '{"r": 1}')$$),
		('complete_attempt', 'lost: race_log insert waits', 'loser',
		 'BEGIN; LOCK TABLE idemjob.race_log IN SHARE MODE',
		 $$SELECT count(*) FROM idemjob.complete_attempt(hostile.ta('t{id}'), '{"late": 1}')$$),
		('complete_attempt', 'rejected: attempt written, job update waits', 'started_hc',
		 'BEGIN; LOCK TABLE idemjob.jobs IN SHARE MODE',
		 $$SELECT count(*) FROM idemjob.complete_attempt(hostile.ta('t{id}'), '{"bad": 1}')$$),
		('fail_attempt', 'attempt written, job update waits', 'started',
		 'BEGIN; LOCK TABLE idemjob.jobs IN SHARE MODE',
		 $$SELECT count(*) FROM idemjob.fail_attempt(hostile.ta('t{id}'), NULL, false)$$),
		('mark_unknown', 'attempt written, job update waits', 'started',
		 'BEGIN; LOCK TABLE idemjob.jobs IN SHARE MODE',
		 $$SELECT count(*) FROM idemjob.mark_unknown(hostile.ta('t{id}'))$$),
		('cancel_attempt', 'attempt written, job update waits', 'started',
		 'BEGIN; LOCK TABLE idemjob.jobs IN SHARE MODE',
		 $$SELECT count(*) FROM idemjob.cancel_attempt(hostile.ta('t{id}'), 'r', true)$$),
		('cancel_job', 'job locked, update waits', 'started',
		 'BEGIN; LOCK TABLE idemjob.jobs IN SHARE MODE',
		 $$SELECT count(*) FROM idemjob.cancel_job(hostile.tj('t{id}'), 'r')$$),
		('expire_attempts', 'waits for the tables', 'expired',
		 'BEGIN; LOCK TABLE idemjob.jobs IN SHARE MODE',
		 $$SELECT idemjob.expire_attempts()$$),
		('define_contract', 'contract locked, update waits', 'contract',
		 'BEGIN; LOCK TABLE idemjob.contracts IN SHARE MODE',
		 $$SELECT idemjob.define_contract('t{id}', '{"type": "array"}')$$),
		('certify_provider', 'certification insert waits', 'contract',
		 'BEGIN; LOCK TABLE idemjob.certifications IN SHARE MODE',
		 $$SELECT count(*) FROM idemjob.certify_provider('t{id}', 'p2')$$),
		('revoke_provider', 'certification update waits', 'certified',
		 'BEGIN; LOCK TABLE idemjob.certifications IN SHARE MODE',
		 $$SELECT count(*) FROM idemjob.revoke_provider('t{id}', 'p1', 'r')$$)
	) AS x(fn, label, fixture, holder, sql)
	LOOP
		FOREACH k IN ARRAY ARRAY['lock_timeout', 'statement_timeout'] LOOP
			INSERT INTO hostile.cases (fn, arg, label, kind, sql, expect, holder)
			VALUES (t.fn, k, t.label, k, t.sql,
					CASE k WHEN 'lock_timeout' THEN '55P03' ELSE '57014' END, t.holder)
			RETURNING id INTO cid;
			UPDATE hostile.cases SET
				sql = replace(sql, '{id}', cid::text),
				holder = replace(holder, '{id}', cid::text),
				setup = CASE WHEN t.fixture IS NOT NULL
					THEN format('SELECT hostile.prep(%L, %L)', 't' || cid, t.fixture) END
			WHERE id = cid;
		END LOOP;
	END LOOP;
END
$gen$;

-- ---------------------------------------------------------------- issue 8 (1.0 findings)
-- Each case run as the least-privileged role that can reach the function
-- (hostile.as_role), or as the owner where only the owner can act.
-- hostile.evil() raises HX666: a trap that runs shows as that SQLSTATE.
DO $$
DECLARE r text;
BEGIN
	FOREACH r IN ARRAY '{hostile_none,hostile_c,hostile_w,hostile_cw,hostile_a}'::text[] LOOP
		BEGIN
			EXECUTE format('CREATE ROLE %I NOLOGIN', r);
		EXCEPTION WHEN duplicate_object THEN NULL;
		END;
	END LOOP;
END $$;
SELECT idemjob.grant_capability('hostile_c', 'client'), idemjob.grant_capability('hostile_w', 'worker'),
	idemjob.grant_capability('hostile_cw', 'client'), idemjob.grant_capability('hostile_cw', 'worker'),
	idemjob.grant_capability('hostile_a', 'admin');
GRANT USAGE ON SCHEMA hostile TO PUBLIC;
GRANT SELECT ON hostile.fixtures, hostile.tfx TO PUBLIC;
GRANT USAGE ON SEQUENCE hostile.seq TO PUBLIC;
DROP SCHEMA IF EXISTS hostile_evil CASCADE;
CREATE SCHEMA hostile_evil AUTHORIZATION hostile_cw;
GRANT USAGE ON SCHEMA hostile_evil TO PUBLIC;

CREATE FUNCTION hostile.evil() RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'hijacked: the caller''s code ran as %', current_user USING ERRCODE = 'HX666';
END $$;

-- p_sql as role p_role (SET LOCAL: the case's rollback ends it too)
CREATE FUNCTION hostile.as_role(p_role text, p_sql text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('SET LOCAL ROLE %I', p_role);
	EXECUTE p_sql;
	RESET ROLE;
END $$;

-- the traps: temporary domains named like the types the code uses (made by
-- the calling role), and operators and functions named like built-ins in
-- hostile_evil (made by hostile_cw, which owns it)
CREATE TABLE hostile.traps (name text PRIMARY KEY, sql text);
INSERT INTO hostile.traps
SELECT 'domains', string_agg(format('CREATE DOMAIN pg_temp.%I AS %s CHECK (hostile.evil())', t,
		CASE WHEN t LIKE '%state' THEN 'idemjob.' ELSE 'pg_catalog.' END || t), '; ')
FROM unnest('{text,int4,int8,jsonb,uuid,bool,timestamptz,bytea,name,job_state,attempt_state}'::text[]) t;
INSERT INTO hostile.traps
SELECT 'operators', string_agg(format(
		'CREATE FUNCTION hostile_evil.f%s(%s, %s) RETURNS %s LANGUAGE sql AS ''SELECT NULL::%s FROM (SELECT hostile.evil()) x''; '
		'CREATE OPERATOR hostile_evil.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = hostile_evil.f%s)',
		n, l, r, res, res, op, l, r, n), '; ')
	|| '; CREATE FUNCTION hostile_evil.now() RETURNS timestamptz LANGUAGE sql AS ''SELECT NULL::timestamptz FROM (SELECT hostile.evil()) x'''
	|| '; CREATE FUNCTION hostile_evil.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS ''SELECT NULL::timestamptz FROM (SELECT hostile.evil()) x'''
	|| '; CREATE FUNCTION hostile_evil.sha256(bytea) RETURNS bytea LANGUAGE sql AS ''SELECT NULL::bytea FROM (SELECT hostile.evil()) x'''
	|| '; CREATE FUNCTION hostile_evil.uuid_v7() RETURNS uuid LANGUAGE sql AS ''SELECT NULL::uuid FROM (SELECT hostile.evil()) x'''
FROM (SELECT row_number() OVER () AS n, * FROM (VALUES
	('=', 'idemjob.job_state', 'idemjob.job_state', 'boolean'),
	('<>', 'idemjob.job_state', 'idemjob.job_state', 'boolean'),
	('=', 'idemjob.attempt_state', 'idemjob.attempt_state', 'boolean'),
	('<>', 'idemjob.attempt_state', 'idemjob.attempt_state', 'boolean'),
	('=', 'text', 'text', 'boolean'),
	('<>', 'text', 'text', 'boolean'),
	('=', 'uuid', 'uuid', 'boolean'),
	('=', 'int8', 'int8', 'boolean'),
	('+', 'int8', 'int8', 'int8'),
	('=', 'int4', 'int4', 'boolean'),
	('+', 'int4', 'int4', 'int4'),
	('=', 'jsonb', 'jsonb', 'boolean'),
	('->>', 'jsonb', 'text', 'text'),
	('<', 'timestamptz', 'timestamptz', 'boolean'),
	('+', 'timestamptz', 'interval', 'timestamptz'),
	('-', 'timestamptz', 'timestamptz', 'interval'),
	('||', 'text', 'text', 'text')) v(op, l, r, res)) o;

-- a timeout fixture's ids, in settings hostile.j and hostile.a
CREATE FUNCTION hostile.ids(p_name text) RETURNS void
LANGUAGE sql AS $$
	SELECT set_config('hostile.j', coalesce(job::text, ''), true),
		set_config('hostile.a', coalesce(attempt::text, ''), true)
	FROM (SELECT) d LEFT JOIN hostile.tfx ON name = p_name
$$;

CREATE FUNCTION hostile.trap(p_name text) RETURNS text
LANGUAGE sql STABLE AS $$ SELECT sql FROM hostile.traps WHERE name = p_name $$;

DO $gen$
DECLARE
	t record;
	cid int;
BEGIN
	FOR t IN SELECT * FROM (VALUES
		-- least privilege: role, fixture, call (a SELECT)
		('submit', 'hostile_c', NULL, $$SELECT count(*) FROM idemjob.submit('hown{id}', 'k', 'hi', '{"a": 1}')$$),
		('cancel_job', 'hostile_c', 'job', $$SELECT count(*) FROM idemjob.cancel_job(hostile.tj('t{id}'), 'r')$$),
		('start_attempt', 'hostile_w', 'job', $$SELECT count(*) FROM idemjob.start_attempt(hostile.tj('t{id}'), NULL, '1 hour', 'w')$$),
		('complete_attempt', 'hostile_w', 'started', $$SELECT count(*) FROM idemjob.complete_attempt(hostile.ta('t{id}'), '{"r": 1}')$$),
		('complete_attempt', 'hostile_w', 'loser', $$SELECT count(*) FROM idemjob.complete_attempt(hostile.ta('t{id}'), '{"late": 1}')$$),
		('complete_attempt', 'hostile_w', 'started_hc', $$SELECT count(*) FROM idemjob.complete_attempt(hostile.ta('t{id}'), '{"bad": 1}')$$),
		('fail_attempt', 'hostile_w', 'started', $$SELECT count(*) FROM idemjob.fail_attempt(hostile.ta('t{id}'), '{"e": 1}', false)$$),
		('mark_unknown', 'hostile_w', 'started', $$SELECT count(*) FROM idemjob.mark_unknown(hostile.ta('t{id}'))$$),
		('cancel_attempt', 'hostile_a', 'started', $$SELECT count(*) FROM idemjob.cancel_attempt(hostile.ta('t{id}'), 'r', true)$$),
		('expire_attempts', 'hostile_a', 'expired', $$SELECT idemjob.expire_attempts()$$),
		('define_contract', 'hostile_a', NULL, $$SELECT idemjob.define_contract('hdc{id}', '{"type": "object"}')$$),
		('certify_provider', 'hostile_a', 'contract', $$SELECT count(*) FROM idemjob.certify_provider('t{id}', 'p9')$$),
		('revoke_provider', 'hostile_a', 'certified', $$SELECT count(*) FROM idemjob.revoke_provider('t{id}', 'p1', 'r')$$),
		('validate', 'hostile_c', NULL, $$SELECT idemjob.validate('{"type": "object", "required": ["a"]}', '{"b": 1}')$$)
	) AS x(fn, role, fixture, call)
	LOOP
		-- the fixture's ids are read before the traps are set (the lookup
		-- functions are not hijack-proof; only the extension must be)
		t.call := replace(replace(t.call,
			$$hostile.tj('t{id}')$$, $$pg_catalog.current_setting('hostile.j')::pg_catalog.uuid$$),
			$$hostile.ta('t{id}')$$, $$pg_catalog.current_setting('hostile.a')::pg_catalog.uuid$$);
		-- the caller's temporary domains and the operators on its path
		INSERT INTO hostile.cases (fn, arg, label, sql, expect, note)
		VALUES (t.fn, '-', 'issue 8: shadowing domains and operators, as ' || t.role,
			format($s$SELECT hostile.ids('t{id}'); SELECT hostile.as_role('hostile_cw', hostile.trap('operators')); SELECT hostile.as_role(%L, hostile.trap('domains') || '; SET LOCAL search_path = hostile_evil, pg_catalog; ' || %L)$s$,
				   t.role, t.call),
			'00000', '1.0 ran a temporary pg_temp.text domain''s check inside the trusted path')
		RETURNING id INTO cid;
		UPDATE hostile.cases SET sql = replace(sql, '{id}', cid::text),
			setup = CASE WHEN t.fixture IS NOT NULL THEN format('SELECT hostile.prep(%L, %L)', 't' || cid, t.fixture) END
		WHERE id = cid;
		-- a superuser with the attacker's schema first on its search_path
		INSERT INTO hostile.cases (fn, arg, label, sql, expect, note)
		VALUES (t.fn, '-', 'issue 8: operators planted on a superuser''s search_path',
			format($s$SELECT hostile.ids('t{id}'); SELECT hostile.as_role('hostile_cw', hostile.trap('operators')); SET LOCAL search_path = hostile_evil, pg_catalog, public; %s$s$,
				   t.call),
			'00000', '1.0 ran an "=" on job_state planted this way as the superuser')
		RETURNING id INTO cid;
		UPDATE hostile.cases SET sql = replace(sql, '{id}', cid::text),
			setup = CASE WHEN t.fixture IS NOT NULL THEN format('SELECT hostile.prep(%L, %L)', 't' || cid, t.fixture) END
		WHERE id = cid;
	END LOOP;

	FOR t IN SELECT * FROM (VALUES
		-- rights: role, fixture, statement, expected
		('certify_provider', 'hostile_c', NULL, $$SELECT idemjob.certify_provider('hc', 'evil')$$, '42501'),
		('certify_provider', 'hostile_cw', NULL, $$SELECT idemjob.certify_provider('hc', 'evil')$$, '42501'),
		('define_contract', 'hostile_cw', NULL, $$SELECT idemjob.define_contract('hc', '{}')$$, '42501'),
		('revoke_provider', 'hostile_cw', 'certified', $$SELECT idemjob.revoke_provider('t{id}', 'p1', 'r')$$, '42501'),
		('cancel_attempt', 'hostile_cw', 'started', $$SELECT idemjob.cancel_attempt(hostile.ta('t{id}'), 'r', true)$$, '42501'),
		('expire_attempts', 'hostile_cw', NULL, $$SELECT idemjob.expire_attempts()$$, '42501'),
		('submit', 'hostile_w', NULL, $$SELECT idemjob.submit('hown', 'k', 'hi')$$, '42501'),
		('start_attempt', 'hostile_c', 'job', $$SELECT idemjob.start_attempt(hostile.tj('t{id}'))$$, '42501'),
		('validate', 'hostile_none', NULL, $$SELECT idemjob.validate('{}', '{}')$$, '42501'),
		('grant_capability', 'hostile_a', NULL, $$SELECT idemjob.grant_capability('hostile_none', 'admin')$$, '42501'),
		-- raw DML (1.0: an UPDATE made two attempts win; un-revoke; forged results)
		('raw DML', 'hostile_a', 'started', $$UPDATE idemjob.attempts SET state = 'succeeded' WHERE id = hostile.ta('t{id}')$$, '42501'),
		('raw DML', 'hostile_a', 'job', $$UPDATE idemjob.jobs SET state = 'cancelled' WHERE id = hostile.tj('t{id}')$$, '42501'),
		('raw DML', 'hostile_a', NULL, $$UPDATE idemjob.jobs SET result = '{"forged": 1}' WHERE id = hostile.fx('succeeded_job')$$, '42501'),
		('raw DML', 'hostile_a', 'certified', $$UPDATE idemjob.certifications SET revoked_at = NULL$$, '42501'),
		('raw DML', 'hostile_a', NULL, $$INSERT INTO idemjob.certifications (intent, provider, contract_version) VALUES ('hc', 'evil', 1)$$, '42501'),
		('raw DML', 'hostile_a', NULL, $$UPDATE idemjob.contracts SET output_schema = 'true'$$, '42501'),
		('raw DML', 'hostile_a', NULL, $$DELETE FROM idemjob.race_log$$, '42501'),
		('raw DML', 'hostile_a', NULL, $$TRUNCATE idemjob.jobs CASCADE$$, '42501'),
		('raw DML', 'hostile_a', NULL, $$INSERT INTO idemjob.capabilities VALUES ('hostile_none', 'admin')$$, '42501'),
		-- a guard attached elsewhere (1.0: signal 11)
		('jobs_guard', 'hostile_cw', NULL, $$CREATE TEMP TABLE x (id int4, state idemjob.job_state); CREATE TRIGGER g BEFORE INSERT ON x FOR EACH ROW EXECUTE FUNCTION idemjob.jobs_guard()$$, '42501'),
		-- settings (1.0: any role raised max_payload_bytes)
		('settings', 'hostile_c', NULL, $$SET idemjob.max_payload_bytes = 100000000$$, '42501'),
		('settings', 'hostile_c', NULL, $$SELECT set_config('idemjob.max_payload_bytes', '100000000', true)$$, '42501'),
		('settings', 'hostile_c', NULL, $$SET idemjob.owner_binding = 'off'$$, '42501'),
		('settings', 'hostile_w', NULL, $$SET idemjob.require_certified_failover = off$$, '42501'),
		('settings', 'hostile_w', NULL, $$SET idemjob.max_attempts = 1000000$$, '42501'),
		-- issue 17 (1.2): bindings, settings, the owner bindings table, columns
		('bind_owner', 'hostile_a', NULL, $$SELECT idemjob.bind_owner('hostile_none', 'role')$$, '42501'),
		('unbind_owner', 'hostile_cw', NULL, $$SELECT idemjob.unbind_owner('hostile_c')$$, '42501'),
		('raw DML', 'hostile_a', NULL, $$INSERT INTO idemjob.owner_bindings (bound_role, mode) VALUES ('hostile_c', 'role')$$, '42501'),
		('raw DML', 'hostile_a', NULL, $$DELETE FROM idemjob.owner_bindings$$, '42501'),
		('settings', 'hostile_c', NULL, $$SET idemjob.max_payload_depth = 100000$$, '42501'),
		('settings', 'hostile_w', NULL, $$SET idemjob.max_wait = '1 day'$$, '42501'),
		('settings', 'hostile_c', NULL, $$SET idemjob.notify = full$$, '42501'),
		('ALTER TABLE', 'hostile_a', NULL, $$ALTER TABLE idemjob.jobs ADD COLUMN x int$$, '0A000'),
		-- issue 19 (1.2): the retry policy is an admin's
		('set_retry_policy', 'hostile_cw', NULL, $$SELECT idemjob.set_retry_policy('hx', 1000000, '0', '0')$$, '42501'),
		('raw DML', 'hostile_a', NULL, $$INSERT INTO idemjob.retry_policies (intent, max_attempts) VALUES ('hx', 1000000)$$, '42501'),
		-- validation that could not be stopped: refused when defined
		('define_contract', 'hostile_a', NULL, $$SELECT idemjob.define_contract('hx{id}', (SELECT jsonb_build_object('$defs', jsonb_object_agg('d' || n, CASE WHEN n = 0 THEN '{"type": "integer"}'::jsonb ELSE jsonb_build_object('allOf', jsonb_build_array(jsonb_build_object('$ref', '#/$defs/d' || (n - 1)), jsonb_build_object('$ref', '#/$defs/d' || (n - 1)))) END), '$ref', '#/$defs/d60') FROM generate_series(0, 60) n))$$, '22023')
	) AS x(fn, role, fixture, stmt, expect)
	LOOP
		INSERT INTO hostile.cases (fn, arg, label, sql, expect, note)
		VALUES (t.fn, '-', 'issue 8: as ' || t.role, format('SELECT hostile.as_role(%L, %L)', t.role, t.stmt),
			t.expect, NULL)
		RETURNING id INTO cid;
		UPDATE hostile.cases SET sql = replace(sql, '{id}', cid::text),
			setup = CASE WHEN t.fixture IS NOT NULL THEN format('SELECT hostile.prep(%L, %L)', 't' || cid, t.fixture) END
		WHERE id = cid;
	END LOOP;

	-- the owner: the guards (IJ005), and a guard attached elsewhere (09000)
	FOR t IN SELECT * FROM (VALUES
		('raw DML', 'started', $$UPDATE idemjob.attempts SET state = 'succeeded' WHERE id = hostile.ta('t{id}')$$, 'IJ005'),
		('raw DML', 'job', $$UPDATE idemjob.jobs SET state = 'cancelled' WHERE id = hostile.tj('t{id}')$$, 'IJ005'),
		('raw DML', NULL, $$UPDATE idemjob.jobs SET result = '{"forged": 1}' WHERE id = hostile.fx('succeeded_job')$$, 'IJ005'),
		('raw DML', 'certified', $$UPDATE idemjob.certifications SET revoked_at = NULL WHERE intent = 't{id}'$$, 'IJ005'),
		('raw DML', NULL, $$UPDATE idemjob.contracts SET output_schema = 'true' WHERE intent = 'hc'$$, 'IJ005'),
		('raw DML', NULL, $$TRUNCATE idemjob.attempts CASCADE$$, 'IJ005'),
		('jobs_guard', NULL, $$CREATE TEMP TABLE x (id int4, state idemjob.job_state, version int8, attempt_count int4, completed_by uuid, result jsonb, completed_at timestamptz); CREATE TRIGGER g BEFORE INSERT ON x FOR EACH ROW EXECUTE FUNCTION idemjob.jobs_guard(); INSERT INTO x VALUES (1, 'succeeded', 0, 0, NULL, NULL, NULL)$$, '09000'),
		('truncate_guard', NULL, $$CREATE TEMP TABLE x (id int4); CREATE TRIGGER g BEFORE TRUNCATE ON x FOR EACH STATEMENT EXECUTE FUNCTION idemjob.jobs_guard(); TRUNCATE x$$, '09000'),
		-- tenancy (1.0: any role read and cancelled every owner's jobs)
		('cancel_job', 'job', $$SET LOCAL idemjob.owner_binding = 'role'; SELECT hostile.as_role('hostile_c', 'SELECT idemjob.cancel_job(hostile.tj(''t{id}''), ''r'')')$$, 'IJ006'),
		('submit', NULL, $$SET LOCAL idemjob.owner_binding = 'role'; SELECT hostile.as_role('hostile_c', 'SELECT idemjob.submit(''hfix'', ''k'', ''hi'')')$$, '42501'),
		('complete_attempt', 'started', $$SET LOCAL idemjob.owner_binding = 'setting:request.jwt.claims/sub'; SET LOCAL request.jwt.claims = '{"sub": "someone else"}'; SELECT hostile.as_role('hostile_w', 'SELECT idemjob.complete_attempt(hostile.ta(''t{id}''), ''{}'')')$$, 'IJ006'),
		('submit', NULL, $$SET LOCAL idemjob.owner_binding = 'setting:request.jwt.claims/sub'; SET LOCAL request.jwt.claims = '{"sub": "hfix"'; SELECT hostile.as_role('hostile_c', 'SELECT idemjob.submit(''hfix'', ''k'', ''hi'')')$$, '42501')
	) AS x(fn, fixture, stmt, expect)
	LOOP
		INSERT INTO hostile.cases (fn, arg, label, sql, expect, note)
		VALUES (t.fn, '-', 'issue 8: as the owner', t.stmt, t.expect, NULL)
		RETURNING id INTO cid;
		UPDATE hostile.cases SET sql = replace(sql, '{id}', cid::text),
			setup = CASE WHEN t.fixture IS NOT NULL THEN format('SELECT hostile.prep(%L, %L)', 't' || cid, t.fixture) END
		WHERE id = cid;
	END LOOP;
END
$gen$;

-- ---------------------------------------------------------------- the runner
CREATE TABLE hostile.results (
	id			int PRIMARY KEY,
	got			text,
	message		text,
	checked		boolean,
	unchanged	boolean,
	guard		boolean,
	pass		boolean,
	ms			numeric
);

CREATE FUNCTION hostile.run_case(p_id int) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	c hostile.cases;
	fp_before text;
	fp_after text;
	v_got text := '00000';
	v_msg text;
	v_chk boolean;
	v_guard boolean;
	v_pass boolean;
	t0 timestamptz := clock_timestamp();
BEGIN
	SELECT * INTO STRICT c FROM hostile.cases WHERE id = p_id;
	PERFORM set_config('hostile.last_job', '', true);
	PERFORM set_config('hostile.last_attempt', '', true);
	IF 'holder' = ANY (dblink_get_connections()) THEN
		PERFORM dblink_disconnect('holder');
	END IF;
	IF c.holder IS NOT NULL THEN
		PERFORM dblink_connect('holder', hostile.connstr());
		PERFORM dblink_exec('holder', c.holder);
	END IF;
	fp_before := hostile.fingerprint();
	IF c.kind = 'lock_timeout' THEN
		PERFORM set_config('lock_timeout', '300ms', true);
	END IF;
	BEGIN
		EXECUTE c.sql;
		IF c.chk IS NOT NULL THEN
			EXECUTE c.chk INTO v_chk;
		END IF;
		-- every case ends in a rolled-back savepoint
		RAISE EXCEPTION 'roll back the case' USING ERRCODE = 'HX001';
	EXCEPTION
		WHEN query_canceled THEN
			v_got := SQLSTATE; v_msg := SQLERRM;
		WHEN OTHERS THEN
			v_got := SQLSTATE; v_msg := SQLERRM;
	END;
	IF v_got = 'HX001' THEN
		v_got := '00000';
		v_msg := NULL;
	END IF;
	PERFORM set_config('lock_timeout', '0', true);
	IF c.holder IS NOT NULL THEN
		PERFORM dblink_exec('holder', 'ROLLBACK');
		PERFORM dblink_disconnect('holder');
	END IF;
	fp_after := hostile.fingerprint();
	v_guard := hostile.guard_alive();
	v_pass := v_got = ANY (string_to_array(c.expect, '|'))
		AND (v_got <> '00000' OR c.chk IS NULL OR v_chk IS TRUE)
		AND fp_before = fp_after
		AND v_guard;
	INSERT INTO hostile.results VALUES (p_id, v_got, left(v_msg, 200),
		CASE WHEN c.chk IS NOT NULL AND v_got = '00000' THEN coalesce(v_chk, false) END,
		fp_before = fp_after, v_guard, v_pass,
		round(1000 * extract(epoch FROM clock_timestamp() - t0)::numeric, 1));
	RETURN v_pass;
END $$;
