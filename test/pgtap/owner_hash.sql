-- pgTAP: the owner hash (since 1.2, docs/scaling.md): what it is, that the
-- ids the functions make carry it, and that the rows hold it
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
SELECT plan(31);

-- what it is: hash_bytes over the owner's bytes, which is what hashtext()
-- gives under a deterministic collation
SELECT is(idemjob.owner_hash('tenant-1'::text)::int4, hashtext('tenant-1' COLLATE "C"),
	'owner_hash(text) is hash_bytes of the owner_id');
SELECT is(idemjob.owner_hash(''::text)::int4, hashtext('' COLLATE "C"), '... of an empty text too');
SELECT is(('tenant-1'::text)::idemjob.owner_hash, idemjob.owner_hash('tenant-1'::text),
	'the cast from text is owner_hash(text)');

-- an id carries it in its last 32 bits, keeps its version and variant,
-- and stays time-ordered
SELECT is(idemjob.owner_hash(idemjob.uuid_v7(h::idemjob.owner_hash))::int4, h,
	format('uuid_v7(%s) carries it', h))
FROM unnest(ARRAY[0, 1, -1, 2147483647, -2147483648]) h;
SELECT is(substr(idemjob.uuid_v7(7::idemjob.owner_hash)::text, 15, 1), '7', 'uuid_v7(h) is version 7');
SELECT ok(substr(idemjob.uuid_v7(7::idemjob.owner_hash)::text, 20, 1) IN ('8', '9', 'a', 'b'),
	'... of the RFC 9562 variant');
SELECT ok((SELECT bool_and(a < b) FROM (
		SELECT id AS a, lead(id) OVER (ORDER BY n) AS b FROM (
			SELECT n, idemjob.uuid_v7((-5)::idemjob.owner_hash) AS id
			FROM generate_series(1, 1000) n) s) s2 WHERE b IS NOT NULL),
	'... and ids made in a row sort in the order they were made');
SELECT is(idemjob.owner_hash_id(258::idemjob.owner_hash), '00000000-0000-0000-0000-000000000102'::uuid,
	'owner_hash_id(h): only the hash''s bits');

-- the ids and rows the functions make
CREATE TEMP TABLE t AS
SELECT job_id FROM idemjob.submit('tap-hash', 'k1', 'charge', '{}');
SELECT is((SELECT idemjob.owner_hash(job_id) FROM t), idemjob.owner_hash('tap-hash'::text),
	'submit: the job id carries its owner''s hash');
SELECT is((SELECT owner_hash FROM idemjob.jobs WHERE id = (SELECT job_id FROM t)),
	idemjob.owner_hash('tap-hash'::text), '... and so does its row');
SELECT is((SELECT idemjob.owner_hash(id) FROM idemjob.start_attempt((SELECT job_id FROM t))),
	idemjob.owner_hash('tap-hash'::text), 'start_attempt: the attempt id carries it');
SELECT is((SELECT count(*)::int FROM idemjob.attempts
		   WHERE job_id = (SELECT job_id FROM t) AND owner_hash = idemjob.owner_hash('tap-hash'::text)),
	1, '... and so does its row');

-- claim makes its attempts in SQL (uuid_v7 of the job's hash)
CREATE TEMP TABLE t2 AS SELECT job_id FROM idemjob.submit('tap-hash-2', 'k1', 'tap_hash_claim', '{}');
SELECT is((SELECT idemjob.owner_hash(attempt_id) FROM idemjob.claim('w', ARRAY['tap_hash_claim'])),
	idemjob.owner_hash('tap-hash-2'::text), 'claim: the attempt id carries its owner''s hash');

-- an id made before 1.2 carries no hash: the calls find its job all the
-- same (the fast paths, which look where the id's hash says, miss it and
-- the full ones find it by its id).  Not under Citus: distribute() takes
-- empty tables only, so every id there carries its owner's hash
SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') AS citus \gset
\if :citus
SELECT skip('Citus: no id made before 1.2', 13);
\else
INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, params, provider, owner_hash)
VALUES ('01900000-0000-7000-8000-00000000cafe', 'tap-legacy', 'k1', 'charge', '{}', 'default',
		'tap-legacy'::text);
SELECT isnt(idemjob.owner_hash('01900000-0000-7000-8000-00000000cafe'::uuid),
	idemjob.owner_hash('tap-legacy'::text), 'a legacy id does not carry its owner''s hash');
CREATE TEMP TABLE t3 AS SELECT id FROM idemjob.start_attempt('01900000-0000-7000-8000-00000000cafe');
SELECT is((SELECT count(*)::int FROM t3), 1, 'start_attempt finds a job by a legacy id');
SELECT is(idemjob.owner_hash((SELECT id FROM t3)), idemjob.owner_hash('01900000-0000-7000-8000-00000000cafe'::uuid),
	'an attempt id carries its job id''s last 32 bits (for a job made since 1.2, its owner''s hash)');
SELECT is((SELECT outcome FROM idemjob.complete_attempt((SELECT id FROM t3), '{"ok": 1}')), 'won',
	'... and its attempt''s result wins');

-- every other call finds a legacy id too, in every layout (in a routed
-- one, by reading the row's own hash where the id's found nothing)
SELECT is((SELECT state::text FROM idemjob.job('01900000-0000-7000-8000-00000000cafe')), 'succeeded',
	'job() reads a job by a legacy id');
INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, params, provider, owner_hash)
VALUES ('01900000-0000-7000-8000-00000000cafd', 'tap-legacy', 'k2', 'charge', '{}', 'default',
		'tap-legacy'::text);
CREATE TEMP TABLE t4 AS SELECT id FROM idemjob.start_attempt('01900000-0000-7000-8000-00000000cafd', timeout => '1 hour');
SELECT isnt((SELECT deadline FROM idemjob.heartbeat((SELECT id FROM t4), '2 hours')), NULL,
	'heartbeat extends a legacy job''s attempt');
SELECT is((SELECT state::text FROM idemjob.mark_unknown((SELECT id FROM t4), 'timeout')), 'unknown',
	'mark_unknown on it');
SELECT is((SELECT state::text FROM idemjob.jobs WHERE id = '01900000-0000-7000-8000-00000000cafd'), 'in_doubt',
	'... and its job is in doubt');
SELECT is((SELECT state::text FROM idemjob.cancel_attempt((SELECT id FROM t4), 'gave up', true)), 'cancelled',
	'cancel_attempt on it');
SELECT is((SELECT state::text FROM idemjob.jobs WHERE id = '01900000-0000-7000-8000-00000000cafd'), 'pending',
	'... and its job is pending again');
SELECT is((SELECT outcome FROM idemjob.complete_attempt((SELECT id FROM t4), '{"late": 1}')), 'lost',
	'its late result loses (fenced) ...');
SELECT is((SELECT count(*)::int FROM idemjob.race_log WHERE attempt_id = (SELECT id FROM t4)), 1,
	'... and is logged');
SELECT is((SELECT state::text FROM idemjob.cancel_job('01900000-0000-7000-8000-00000000cafd', 'done')), 'cancelled',
	'cancel_job by a legacy id');
\endif

-- in the partitioned layout, a job's whole life reads and writes its
-- owner's partitions only (each statement says which owner_hash it looks
-- under); plain tables: skipped
SELECT relkind = 'p' AS partitioned FROM pg_class WHERE oid = 'idemjob.jobs'::regclass \gset
CREATE TEMP TABLE scans_before AS
SELECT relid, relname, coalesce(seq_scan, 0) + coalesce(idx_scan, 0) + n_tup_ins + n_tup_upd AS n
FROM pg_stat_xact_all_tables WHERE schemaname = 'idemjob';
CREATE TEMP TABLE life AS SELECT job_id FROM idemjob.submit('tap-route', 'k1', 'charge', '{}');
CREATE TEMP TABLE life_a AS SELECT id FROM idemjob.start_attempt((SELECT job_id FROM life));
CREATE TEMP TABLE life_c AS SELECT outcome FROM idemjob.complete_attempt((SELECT id FROM life_a), '{"ok": 1}');
CREATE TEMP TABLE life_j AS SELECT state FROM idemjob.job((SELECT job_id FROM life));
CREATE TEMP TABLE scans_after AS
SELECT relid, relname, coalesce(seq_scan, 0) + coalesce(idx_scan, 0) + n_tup_ins + n_tup_upd AS n
FROM pg_stat_xact_all_tables WHERE schemaname = 'idemjob';
\if :partitioned
SELECT is((SELECT array_agg(DISTINCT substring(a.relname FROM '_p([0-9]+)$'))
		FROM scans_after a JOIN scans_before b USING (relid)
		WHERE a.n > b.n AND a.relname ~ '_p[0-9]+$'),
	   ARRAY[(SELECT substring(tableoid::regclass::text FROM '_p([0-9]+)$')
			  FROM idemjob.jobs WHERE id = (SELECT job_id FROM life))],
	   'partitioned: submit, start_attempt, complete_attempt and job() touch one partition number');
\else
SELECT skip('no partitions');
\endif

SELECT * FROM finish();
ROLLBACK;
