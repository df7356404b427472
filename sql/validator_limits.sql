-- validator_limits: what keeps one validation bounded (contract, "Security
-- model", Robust): schemas whose evaluation could multiply are refused with
-- 22023 (define_contract and validate alike), recursive schemas still work
-- and stay linear in the value, a cancel or statement_timeout ends any
-- validation or schema compilation promptly with 57014 (never 2201B or
-- 22023), the contract cache is keyed by the whole intent, and a contract
-- that fails to compile gives its memory back.  Runs as a superuser: it
-- writes a few rows raw, as a restore with --disable-triggers would.

\set VERBOSITY terse
-- whatever goes wrong below, no statement runs for ever
SET statement_timeout = '20s';

-- raw rows first, before this session caches anything: a contract that
-- does not compile (an unsupported keyword, with a large valid part) and
-- one that is an exponential $ref chain (2^21 steps per value)
SET session_replication_role = replica;
INSERT INTO idemjob.contracts (intent, version, output_schema)
SELECT 'limits-no-compile', 1, jsonb_build_object(
	'properties', (SELECT jsonb_object_agg('p' || i, jsonb_build_object('type', 'string', 'maxLength', i))
				   FROM generate_series(1, 2000) i),
	'notAKeywordAtAll', true);
INSERT INTO idemjob.contracts (intent, version, output_schema)
SELECT 'limits-raw-chain', 1, jsonb_build_object(
	'$defs', (SELECT jsonb_object_agg('d' || i, CASE WHEN i = 0 THEN '{"type": "integer"}'::jsonb
				ELSE jsonb_build_object('allOf', jsonb_build_array(
					jsonb_build_object('$ref', '#/$defs/d' || (i - 1)),
					jsonb_build_object('$ref', '#/$defs/d' || (i - 1)))) END)
			  FROM generate_series(0, 20) i),
	'$ref', '#/$defs/d20');
RESET session_replication_role;

-- an error as "SQLSTATE: message", so both show in one row
CREATE FUNCTION pg_temp.try(s jsonb, v jsonb DEFAULT '1') RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	RETURN coalesce(idemjob.validate(s, v)::text, 'valid');
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- a chain of $defs: d0 is {"type": "integer"}, each dN names d(N-1) by
-- the given shape, and the root is {"$ref": "#/$defs/d<levels>"}
CREATE FUNCTION pg_temp.chain(levels int, shape text DEFAULT 'allOf',
							  via_root boolean DEFAULT true) RETURNS jsonb
LANGUAGE sql AS $$
SELECT jsonb_build_object('$defs', jsonb_object_agg('d' || i,
	CASE WHEN i = 0 THEN '{"type": "integer"}'::jsonb
	ELSE (SELECT CASE shape
		WHEN 'allOf' THEN jsonb_build_object('allOf', jsonb_build_array(r, r))
		WHEN 'properties' THEN jsonb_build_object('properties', jsonb_build_object('a', r),
												  'patternProperties', jsonb_build_object('^a$', r))
		WHEN 'items' THEN jsonb_build_object('items', r, 'contains', r)
		WHEN 'tree' THEN jsonb_build_object('properties', jsonb_build_object('left', r, 'right', r))
		END FROM (SELECT jsonb_build_object('$ref', '#/$defs/d' || (i - 1)) AS r) x)
	END))
	|| CASE WHEN via_root THEN jsonb_build_object('$ref', '#/$defs/d' || levels) ELSE '{}' END
FROM generate_series(0, levels) i
$$;

--
-- 1. Refused: a $ref chain that doubles per level.  With every $ref
-- expanded, one value would meet 2^(N+1) subschemas; the bound is 10 per
-- compiled subschema, at least 100,000, so 14 levels pass and 15 do not.
--
SELECT pg_temp.try(pg_temp.chain(14)) AS chain14,
	   pg_temp.try(pg_temp.chain(14), '1.5') AS chain14_bad;
SELECT n, pg_temp.try(pg_temp.chain(n)) FROM unnest('{15, 20}'::int[]) n;
-- the same through define_contract, which stores nothing
\set VERBOSITY default
SELECT idemjob.define_contract('limits-chain', pg_temp.chain(60));
\set VERBOSITY terse
SELECT idemjob.define_contract('limits-chain', pg_temp.chain(27));
SELECT count(*) FROM idemjob.contracts WHERE intent = 'limits-chain';
-- defined but never referenced: refused too (every subschema is counted)
SELECT pg_temp.try(pg_temp.chain(30, 'allOf', false));
-- fan-out that descends into the value: the same member or item checked
-- twice per level (properties + patternProperties; items + contains)
SELECT shape, n, pg_temp.try(pg_temp.chain(n, shape))
  FROM unnest('{properties, items}'::text[]) shape, unnest('{10, 20}'::int[]) n
 ORDER BY 1, 2;
-- ... but branches that exclude each other do not multiply: a 40-level
-- binary tree of definitions is fine
SELECT pg_temp.try(pg_temp.chain(40, 'tree'),
				   (repeat('{"right": 1, "left": ', 40) || '7' || repeat('}', 40))::jsonb) AS tree40,
	   pg_temp.try(pg_temp.chain(40, 'tree'),
				   (repeat('{"right": 1, "left": ', 40) || '7.5' || repeat('}', 40))::jsonb) AS tree40_bad;

--
-- 2. Recursive schemas stay accepted and validate as before
--
SELECT idemjob.define_contract('limits-tree', '{"type": "object", "required": ["name"],
	"properties": {"name": {"type": "string"},
				   "children": {"type": "array", "items": {"$ref": "#"}}},
	"additionalProperties": false}') AS version;
SELECT pg_temp.try(output_schema, v)
  FROM idemjob.contracts,
	   (VALUES ('{"name": "a", "children": [{"name": "b"}, {"name": "c", "children": [{"name": "d"}]}]}'::jsonb),
			   ('{"name": "a", "children": [{"name": "b"}, {"name": "c", "children": [{"nom": "d"}]}]}'),
			   ('{"name": "a", "children": [{"name": "b", "x": 1}]}')) t(v)
 WHERE intent = 'limits-tree';
-- a recursion through the value that checks each member twice (through
-- "properties" and "patternProperties"): without sharing, 2^depth steps;
-- each subschema is decided once per value, so a 60-level value is quick,
-- valid or not (before: 2^60 steps)
SET statement_timeout = '5s';
CREATE TEMP TABLE twice AS
SELECT '{"type": "object", "properties": {"a": {"$ref": "#"}},
		 "patternProperties": {"^a$": {"$ref": "#"}}, "additionalProperties": false}'::jsonb AS s,
	   '{"$defs": {"t": {"type": "object", "properties": {"a": {"$ref": "#/$defs/t"}},
						 "patternProperties": {"^a$": {"$ref": "#/$defs/t"}}, "additionalProperties": false}},
		 "not": {"$ref": "#/$defs/t"}}'::jsonb AS nots;
SELECT pg_temp.try(s, (repeat('{"a": ', 60) || '{}' || repeat('}', 60))::jsonb) AS valid60,
	   pg_temp.try(s, (repeat('{"a": ', 60) || '[]' || repeat('}', 60))::jsonb) = '{"path": "' ||
		   repeat('/a', 60) || '", "keyword": "type", "message": "value must be of type \"object\", found \"array\""}'
		   AS path60,
	   pg_temp.try(nots, (repeat('{"a": ', 60) || '{}' || repeat('}', 60))::jsonb) AS not60,
	   pg_temp.try(nots, (repeat('{"a": ', 60) || '{"b": 1}' || repeat('}', 60))::jsonb) AS not60_valid
  FROM twice;
-- a subschema decided false quietly ("if"), then asked for its message
-- ("else"): the message is built
SELECT pg_temp.try('{"$defs": {"t": {"type": "integer"}},
					 "if": {"$ref": "#/$defs/t"}, "else": {"$ref": "#/$defs/t"}}', v)
  FROM (VALUES ('1'::jsonb), ('"x"')) t(v);
SET statement_timeout = '20s';

--
-- 3. Cancel and statement_timeout: 57014, promptly, wherever they land
--
-- a big value: 300,000 distinct arrays in scrambled order, all with the
-- same prefix (about 30 MB as jsonb)
SET idemjob.max_payload_bytes = 100000000;
-- (set-up, not under test: no timeout, for slow builds such as valgrind's)
SET statement_timeout = 0;
CREATE TEMP TABLE big AS
SELECT jsonb_agg(jsonb_build_array(0, 0, 0, 0, 0, 0, 0, 0, (i::int8 * 7919) % 300007)) AS v
  FROM generate_series(1, 300000) i;
SET statement_timeout = '20s';
-- an accepted schema whose check of it takes seconds: uniqueItems, then
-- every item against an enum of 100 arrays
CREATE TEMP TABLE heavy AS
SELECT jsonb_build_object('uniqueItems', true, 'items', jsonb_build_object('enum',
		 (SELECT jsonb_agg(jsonb_build_array(0, 0, 0, 0, 0, 0, 0, 0, -i)) FROM generate_series(1, 100) i))) AS s;
SELECT idemjob.validate(s, '[[0, 0, 0, 0, 0, 0, 0, 0, -1], [0, 0, 0, 0, 0, 0, 0, 0, -1]]') FROM heavy;
-- each statement below must end within a second, the timeout included
SELECT pg_catalog.clock_timestamp() AS t0 \gset
SET statement_timeout = '100ms';
SELECT idemjob.validate(s, v) FROM heavy, big;
SET statement_timeout = '20s';
SELECT pg_catalog.clock_timestamp() - :'t0' < interval '1 s' AS prompt;
-- the same during complete_attempt, which then commits nothing
SELECT idemjob.define_contract('limits-heavy', s) AS version FROM heavy;
SELECT job_id AS jh FROM idemjob.submit('limits', 'heavy', 'limits-heavy') \gset
SELECT id AS ah FROM idemjob.start_attempt(:'jh') \gset
SELECT pg_catalog.clock_timestamp() AS t0 \gset
SET statement_timeout = '100ms';
SELECT * FROM idemjob.complete_attempt(:'ah', (SELECT v FROM big));
SET statement_timeout = '20s';
SELECT pg_catalog.clock_timestamp() - :'t0' < interval '1 s' AS prompt;
SELECT state, result IS NULL AS no_result FROM idemjob.jobs WHERE id = :'jh';
SELECT state FROM idemjob.attempts WHERE id = :'ah';
-- a regular expression that takes long to match (back-references): the
-- engine gives up with REG_CANCEL, which is the cancel itself, not 2201B
SELECT pg_catalog.clock_timestamp() AS t0 \gset
SET statement_timeout = '100ms';
SELECT idemjob.validate('{"pattern": "^(.*)(.*)(.*)(.*)\\1\\2\\3\\4$"}',
						to_jsonb(repeat('ab', 1000) || 'c'));
SET statement_timeout = '20s';
SELECT pg_catalog.clock_timestamp() - :'t0' < interval '1 s' AS prompt;
-- ... or long to compile: the same (not 22023), from validate and from
-- define_contract
SELECT pg_catalog.clock_timestamp() AS t0 \gset
SET statement_timeout = '100ms';
SELECT idemjob.validate('{"pattern": "([a-z]{0,255}[0-9]{0,255}){0,40}"}', '"a"');
SET statement_timeout = '20s';
SELECT pg_catalog.clock_timestamp() - :'t0' < interval '1 s' AS prompt;
SET statement_timeout = '100ms';
SELECT idemjob.define_contract('limits-regex', '{"pattern": "([a-z]{0,255}[0-9]{0,255}){0,40}"}');
SET statement_timeout = '20s';
SELECT count(*) FROM idemjob.contracts WHERE intent = 'limits-regex';
-- multipleOf with long operands: exact, and the remainder is taken in
-- steps, interruptible between them (one division of these numbers took
-- 0.3 s in one go)
SELECT idemjob.validate('{"multipleOf": 0.25}', to_jsonb(('1' || repeat('0', 2000) || '.25')::numeric)) IS NULL AS m1,
	   idemjob.validate('{"multipleOf": 0.25}', to_jsonb(('1' || repeat('0', 2000) || '.3')::numeric)) IS NULL AS m2,
	   idemjob.validate('{"multipleOf": 3}', '-1e1500') IS NULL AS m3,
	   idemjob.validate('{"multipleOf": 3}', '-3e1500') IS NULL AS m4,
	   idemjob.validate(jsonb_build_object('multipleOf', ('1' || repeat('3', 600) || '.7')::numeric),
						to_jsonb(('1' || repeat('3', 600) || '.7')::numeric * 12345678901234567890123)) IS NULL AS m5,
	   idemjob.validate('{"multipleOf": 1e-300}', to_jsonb(1e-301)) IS NULL AS m6;
-- ten exact multiples, each checked in full: over 100 ms on every version
-- (PostgreSQL 18 divides such numbers about ten times faster than 15);
-- built without a timeout (under valgrind it takes seconds)
SET statement_timeout = 0;
CREATE TEMP TABLE longnum AS
SELECT jsonb_agg(('1' || repeat('3', 16000) || '7')::numeric * (('9' || repeat('7', 114000))::numeric + i)) AS v
  FROM generate_series(1, 10) i;
SELECT pg_catalog.clock_timestamp() AS t0 \gset
SET statement_timeout = '100ms';
SELECT idemjob.validate(jsonb_build_object('items', jsonb_build_object('multipleOf',
						('1' || repeat('3', 16000) || '7')::numeric)), v) IS NULL
  FROM longnum;
SET statement_timeout = '20s';
SELECT pg_catalog.clock_timestamp() - :'t0' < interval '0.25 s' AS prompt;
-- a contract stored raw before these limits: refused when it is used
SELECT job_id AS jc FROM idemjob.submit('limits', 'raw-chain', 'limits-raw-chain') \gset
SELECT id AS ac FROM idemjob.start_attempt(:'jc') \gset
SELECT * FROM idemjob.complete_attempt(:'ac', '1');

--
-- 4. The contract cache is keyed by the whole intent.  A job restored with
-- an intent longer than the functions accept (the first 255 bytes of it
-- are another intent, which has a contract) must not hide that contract.
--
SELECT repeat('i', 255) AS p \gset
SELECT idemjob.define_contract(:'p', '{"type": "object", "required": ["ok"]}') AS version;
SELECT job_id AS jlong FROM idemjob.submit('limits', 'long', 'limits-short') \gset
SELECT id AS along FROM idemjob.start_attempt(:'jlong') \gset
SET session_replication_role = replica;
UPDATE idemjob.jobs SET intent = :'p' || '-and-more' WHERE id = :'jlong';
RESET session_replication_role;
-- no contract for the long intent: its result wins
SELECT outcome FROM idemjob.complete_attempt(:'along', '{}');
-- the 255-byte intent's contract still holds
SELECT job_id AS jp FROM idemjob.submit('limits', 'p', :'p') \gset
SELECT id AS ap FROM idemjob.start_attempt(:'jp') \gset
SELECT outcome FROM idemjob.complete_attempt(:'ap', '{}');
SELECT error->>'keyword' AS keyword FROM idemjob.attempts WHERE id = :'ap';
SELECT id AS ap2 FROM idemjob.start_attempt(:'jp') \gset
SELECT outcome FROM idemjob.complete_attempt(:'ap2', '{"ok": true}');

--
-- 5. A contract that fails to compile gives its memory back: 100 calls
-- that compile it and fail leave the backend's memory where it was
--
SELECT job_id AS jn FROM idemjob.submit('limits', 'no-compile', 'limits-no-compile') \gset
SELECT id AS an FROM idemjob.start_attempt(:'jn') \gset
SELECT * FROM idemjob.complete_attempt(:'an', '{}');
CREATE TEMP TABLE mem AS SELECT sum(total_bytes) AS before FROM pg_backend_memory_contexts;
DO $$
DECLARE
	att uuid := (SELECT t.id FROM idemjob.attempts t JOIN idemjob.jobs j ON j.id = t.job_id
				 WHERE j.intent = 'limits-no-compile');
	refused int := 0;
BEGIN
	FOR i IN 1..100 LOOP
		BEGIN
			PERFORM idemjob.complete_attempt(att, '{}');
		EXCEPTION WHEN invalid_parameter_value THEN
			refused := refused + 1;
		END;
	END LOOP;
	RAISE NOTICE 'refused % times', refused;
END
$$;
SELECT (SELECT sum(total_bytes) FROM pg_backend_memory_contexts) - before < 4000000 AS no_leak
  FROM mem;

RESET statement_timeout;
RESET idemjob.max_payload_bytes;

-- leave nothing behind for the tests that follow
SET session_replication_role = replica;
DELETE FROM idemjob.attempts WHERE owner_id = 'limits';
DELETE FROM idemjob.jobs WHERE owner_id = 'limits';
DELETE FROM idemjob.contracts WHERE intent LIKE 'limits-%' OR intent = :'p';
RESET session_replication_role;
