-- Limits of 1.2 (issue 17, findings 9, 10, 11 and 19): the depth of
-- everything stored as JSON, cancel_job's reason, purge's age, the longest
-- wait.  1.1 stored params nested 14,500 levels deep (116 KB, under
-- max_payload_bytes), and the restore of the dump then emptied the whole
-- jobs table: COPY parses each value again, with less stack.
\set VERBOSITY terse
SELECT idemjob.uuid_v7() IS NOT NULL AS loaded;
SHOW idemjob.max_payload_depth;
-- the deepest accepted value, as params, result, error, schema and value
SELECT created FROM idemjob.submit('lim', 'deep-512', 'lim',
	(repeat('[', 511) || '{"a": 1}' || repeat(']', 511))::jsonb);
SELECT idemjob.submit('lim', 'deep-513', 'lim',
	(repeat('[', 512) || '{"a": 1}' || repeat(']', 512))::jsonb);
SELECT idemjob.submit('lim', 'deep-10000', 'lim',
	(repeat('{"a":', 10000) || '1' || repeat('}', 10000))::jsonb);
SELECT count(*) FROM idemjob.jobs WHERE owner_id = 'lim';
SELECT job_id AS lj FROM idemjob.submit('lim', 'deep-result', 'lim') \gset
SELECT id AS la FROM idemjob.start_attempt(:'lj') \gset
SELECT idemjob.complete_attempt(:'la', (repeat('[', 600) || repeat(']', 600))::jsonb);
SELECT idemjob.fail_attempt(:'la', (repeat('[', 600) || repeat(']', 600))::jsonb);
SELECT outcome FROM idemjob.complete_attempt(:'la', (repeat('[', 500) || repeat(']', 500))::jsonb);
SELECT idemjob.define_contract('lim', (repeat('{"not": ', 600) || '{}' || repeat('}', 600))::jsonb);
SELECT idemjob.validate('{}', (repeat('[', 600) || repeat(']', 600))::jsonb);
-- a superuser may lower it (and only a superuser: privileges.sql)
SET idemjob.max_payload_depth = 3;
SELECT idemjob.validate('{}', '[[[]]]') IS NULL AS three_ok;
SELECT idemjob.validate('{}', '[[[[]]]]');
-- shallow values are never walked: their size alone bounds their depth
SELECT idemjob.validate('{}', '[[[1]]]') IS NULL AS small_ok;
RESET idemjob.max_payload_depth;

-- a contract stored by an older version that this one does not compile,
-- or one a restoring session cannot compile again: the row is restored
-- with a WARNING, and its intent's results are refused until a new version
INSERT INTO idemjob.contracts (intent, version, output_schema)
VALUES ('lim-old', 1, '{"$ref": "#/nowhere"}');
SELECT count(*) FROM idemjob.contracts WHERE intent = 'lim-old';
SELECT job_id AS oj FROM idemjob.submit('lim', 'old-contract', 'lim-old') \gset
SELECT id AS oa FROM idemjob.start_attempt(:'oj') \gset
SELECT idemjob.complete_attempt(:'oa', '{}');
SELECT idemjob.define_contract('lim-old', '{"type": "object"}');
SELECT outcome FROM idemjob.complete_attempt(:'oa', '{}');

-- cancel_job's reason is capped as the others are
SET idemjob.max_payload_bytes = 1000;
SELECT idemjob.cancel_job((SELECT job_id FROM idemjob.submit('lim', 'long-reason', 'lim')), repeat('x', 2000));
SELECT state FROM idemjob.cancel_job((SELECT job_id FROM idemjob.submit('lim', 'long-reason', 'lim')), repeat('x', 900));
RESET idemjob.max_payload_bytes;

-- an age past the timestamp range is an argument error (22023), not 22008
SELECT idemjob.purge('1000000 years');
SELECT idemjob.purge_race_log('1000000 years');
SELECT idemjob.purge('1000 years', 1) AS purged_nothing;

-- idemjob.max_wait caps claim(wait) and await_job(timeout)
SET idemjob.max_wait = '200ms';
SELECT pg_catalog.clock_timestamp() AS t0 \gset
SELECT count(*) FROM idemjob.claim('w', '{lim-nothing-due}', wait => '30 s');
SELECT state FROM idemjob.await_job((SELECT job_id FROM idemjob.submit('lim', 'wait', 'lim-nothing-due')), '30 s');
SELECT pg_catalog.clock_timestamp() - :'t0' < interval '5 s' AS capped;
RESET idemjob.max_wait;
