-- test/dump/fill_limits.sql: what a restore must take that one row could
-- otherwise empty a table with (issue 17, findings 9-11).  Run after
-- test/dump/fill.sql on a 1.2 database, as a superuser.
--
--   o-deep, k-deep-params     params nested as deep as idemjob.max_payload_depth takes
--   o-deep, k-deep-result     a result as deep, won
--   deep-contract             a contract schema as deep
--   old-contract              a contract 1.0 stored that 1.1 refuses (a $ref
--                             fan-out), inserted raw as a restore of it is:
--                             kept with a WARNING

\set ON_ERROR_STOP 1
SET client_min_messages = error;

SELECT created FROM idemjob.submit('o-deep', 'k-deep-params', 'deep',
	(repeat('[', 511) || '{"a": 1}' || repeat(']', 511))::jsonb) \gset
SELECT job_id AS j FROM idemjob.submit('o-deep', 'k-deep-result', 'deep') \gset
SELECT id AS a FROM idemjob.start_attempt(:'j') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a', (repeat('[', 511) || '1' || repeat(']', 511))::jsonb) \gset
SELECT idemjob.define_contract('deep-contract',
	(repeat('{"not": ', 511) || '{}' || repeat('}', 511))::jsonb) \gset
INSERT INTO idemjob.contracts (intent, version, output_schema)
SELECT 'old-contract', 1,
	jsonb_build_object('$ref', '#/$defs/d0', '$defs', (SELECT jsonb_object_agg('d' || n, CASE WHEN n = 40
		THEN '{"type": "string"}'::jsonb
		ELSE jsonb_build_object('allOf', jsonb_build_array(jsonb_build_object('$ref', '#/$defs/d' || (n + 1)),
			jsonb_build_object('$ref', '#/$defs/d' || (n + 1)))) END) FROM generate_series(0, 40) n));

RESET client_min_messages;
