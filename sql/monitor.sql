-- The monitor capability (1.2): a dashboard's or an exporter's role reads
-- the operator views and provider_stats(since), and nothing else: no
-- table, no function that writes.  Then provider_stats(since): its counts
-- per intent and provider, its window, the owner binding, and that it
-- reads the tables through their indexes.

SET client_min_messages = warning;
DROP ROLE IF EXISTS r_mon;
CREATE ROLE r_mon NOLOGIN;
RESET client_min_messages;

SELECT idemjob.grant_capability('r_mon', 'monitor');
SELECT grantee, capability FROM idemjob.capabilities WHERE grantee = 'r_mon'::regrole;

-- every function and relation of the extension (pg_depend)
CREATE TEMP VIEW ext_functions AS
SELECT p.oid, p.oid::regprocedure::text AS sig, p.prorettype
FROM pg_proc p
	JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
		AND d.deptype = 'e' AND d.refclassid = 'pg_extension'::regclass
	JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idemjob';
CREATE TEMP VIEW ext_relations AS
-- (a table of the partitioned layout, idemjob.partitions, counts as one:
-- its partitions hold no privilege of their own)
SELECT c.oid, c.oid::regclass::text AS rel,
	CASE c.relkind WHEN 'p' THEN 'r' ELSE c.relkind END AS relkind
FROM pg_class c
	JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
		AND d.deptype = 'e' AND d.refclassid = 'pg_extension'::regclass
	JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idemjob'
WHERE c.relkind IN ('r', 'p', 'v') AND NOT c.relispartition;

-- by the catalogs, everything r_mon holds: the schema, the views, the
-- views' row filter and provider_stats(since) (validate and uuid_v7 are
-- PUBLIC's)
SELECT has_schema_privilege('r_mon', 'idemjob', 'USAGE') AS usage,
	has_schema_privilege('r_mon', 'idemjob', 'CREATE') AS create;
SELECT sig FROM ext_functions WHERE has_function_privilege('r_mon', oid, 'EXECUTE') ORDER BY 1;
SELECT rel, p.priv
FROM ext_relations CROSS JOIN unnest('{SELECT,INSERT,UPDATE,DELETE,TRUNCATE,REFERENCES,TRIGGER}'::text[]) p(priv)
WHERE has_table_privilege('r_mon', oid, p.priv)
ORDER BY 1, 2;

-- by calling, as r_mon, inside a subtransaction always rolled back
CREATE FUNCTION pg_temp.call_as(role name, sql text, OUT state text, OUT msg text)
LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		EXECUTE format('SET LOCAL ROLE %I', role);
		EXECUTE sql;
		RAISE SQLSTATE 'ZZ000';		-- roll the call back
	EXCEPTION WHEN SQLSTATE 'ZZ000' THEN
		state := '00000';
	WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	END;
END
$$;

-- every table: 42501; every view: read
SELECT x.rel, x.relkind, o.state
FROM ext_relations x
	CROSS JOIN LATERAL pg_temp.call_as('r_mon', format('SELECT count(*) FROM %s', x.rel)) o
ORDER BY x.relkind, x.rel;

-- every function, called with NULL arguments (the privilege check comes
-- first): 42501 but for the five r_mon may call, which answer (22004 for
-- a NULL argument is an answer) -- the trigger functions cannot be called
-- at all (0A000), and hold no EXECUTE for r_mon either (above)
SELECT o.state, string_agg(split_part(substr(f.sig, 9), '(', 1), ' ' ORDER BY f.sig) AS functions
FROM ext_functions f
	CROSS JOIN LATERAL pg_temp.call_as('r_mon', format('SELECT idemjob.%I(%s)',
		split_part(substr(f.sig, 9), '(', 1),
		(SELECT coalesce(string_agg(format('NULL::%s', t::regtype), ', ' ORDER BY i), '')
		 FROM pg_proc p CROSS JOIN LATERAL unnest(p.proargtypes::oid[]) WITH ORDINALITY u(t, i)
		 WHERE p.oid = f.oid))) o
WHERE f.prorettype NOT IN ('trigger'::regtype, 'event_trigger'::regtype)
GROUP BY o.state ORDER BY o.state;

--
-- provider_stats(since): one attempt of each outcome, for two owners
--
SELECT idemjob.define_contract('m_pay', '{"type": "object", "required": ["id"]}');
SELECT (idemjob.certify_provider('m_pay', 'm_a')).provider;
SELECT (idemjob.certify_provider('m_pay', 'm_b')).provider;
-- a rejected result backs off an hour: that job is scheduled, not due
SELECT (idemjob.set_retry_policy('m_pay', retry_backoff => '1 hour')).intent;
-- won (r_mon, m_a)
SELECT job_id AS j1 FROM idemjob.submit('r_mon', 'm1', 'm_pay', '{}', 'm_a') \gset
SELECT id AS a1 FROM idemjob.start_attempt(:'j1') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a1', '{"id": 1}');
-- a race lost (m_other, m_a): the first attempt cancelled, the second won,
-- then the first one's late result
SELECT job_id AS j2 FROM idemjob.submit('m_other', 'm2', 'm_pay', '{}', 'm_a') \gset
SELECT id AS a2 FROM idemjob.start_attempt(:'j2') \gset
SELECT state FROM idemjob.cancel_attempt(:'a2', 'test');
SELECT id AS a2b FROM idemjob.start_attempt(:'j2') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a2b', '{"id": 2}');
SELECT outcome FROM idemjob.complete_attempt(:'a2', '{"id": 3}');
-- rejected (r_mon, m_b)
SELECT job_id AS j3 FROM idemjob.submit('r_mon', 'm3', 'm_pay', '{}', 'm_b') \gset
SELECT id AS a3 FROM idemjob.start_attempt(:'j3') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a3', '{"no_id": 1}');
-- failed (r_mon, m_b)
SELECT job_id AS j4 FROM idemjob.submit('r_mon', 'm4', 'm_pay', '{}', 'm_b') \gset
SELECT id AS a4 FROM idemjob.start_attempt(:'j4') \gset
SELECT state FROM idemjob.fail_attempt(:'a4', '{"code": "declined"}', false);
-- in doubt (m_other, m_b)
SELECT job_id AS j5 FROM idemjob.submit('m_other', 'm5', 'm_pay', '{}', 'm_b') \gset
SELECT state FROM idemjob.mark_unknown((SELECT id FROM idemjob.start_attempt(:'j5')));
-- cancelled (r_mon, m_a)
SELECT job_id AS j6 FROM idemjob.submit('r_mon', 'm6', 'm_pay', '{}', 'm_a') \gset
SELECT id AS a6 FROM idemjob.start_attempt(:'j6') \gset
SELECT state FROM idemjob.cancel_attempt(:'a6', 'test');

-- as r_mon: every attempt of the hour; the race lost, how late (rounded)
SET ROLE r_mon;
SELECT intent, provider, attempts, succeeded, superseded, rejected, failed,
	in_doubt, cancelled, released, races_lost,
	p50_ms >= 0 AS p50_ok, p95_ms >= p50_ms AS p95_ok,
	last_started_at > now() - interval '1 hour' AS last_ok,
	late_by_p50_ms >= 0 AS late_p50_ok, late_by_p95_ms >= late_by_p50_ms AS late_p95_ok,
	pg_typeof(p50_ms) AS ms_type, p50_ms = round(p50_ms, 1) AS rounded
FROM idemjob.provider_stats('1 hour') WHERE intent LIKE 'm\_%' ORDER BY 1, 2;
-- the same counts as the view over the same attempts
SELECT count(*) AS differences FROM (
	(SELECT intent, provider, attempts, succeeded, superseded, rejected, failed, in_doubt, cancelled, released
	 FROM idemjob.provider_stats('1 hour') WHERE intent LIKE 'm\_%'
	 EXCEPT
	 SELECT intent, provider, attempts, succeeded, superseded, rejected, failed, in_doubt, cancelled, released
	 FROM idemjob.provider_stats WHERE intent LIKE 'm\_%')
	UNION ALL
	(SELECT intent, provider, attempts, succeeded, superseded, rejected, failed, in_doubt, cancelled, released
	 FROM idemjob.provider_stats WHERE intent LIKE 'm\_%'
	 EXCEPT
	 SELECT intent, provider, attempts, succeeded, superseded, rejected, failed, in_doubt, cancelled, released
	 FROM idemjob.provider_stats('1 hour') WHERE intent LIKE 'm\_%')) d;
-- the view's percentiles are rounded to 0.1 ms too (still double precision)
SELECT pg_typeof(p50_ms) AS view_ms_type, p50_ms::numeric = round(p50_ms::numeric, 1) AS rounded
FROM idemjob.provider_stats WHERE intent = 'm_pay' AND provider = 'm_a';
-- the window starts at the transaction's start: nothing started since
SELECT count(*) AS rows_in_empty_window FROM idemjob.provider_stats('0') WHERE intent LIKE 'm\_%';
-- the other views, as r_mon
SELECT intent, provider, state FROM idemjob.in_doubt WHERE intent LIKE 'm\_%';
SELECT intent, due, scheduled, running, in_doubt FROM idemjob.queue_stats WHERE intent LIKE 'm\_%';
SELECT oldest_final_age > interval '0' AS has_final, pg_typeof(final_jobs) AS estimate_type
FROM idemjob.retention_stats;
RESET ROLE;

\set VERBOSITY sqlstate
SELECT * FROM idemjob.provider_stats(NULL);					-- 22004
SELECT * FROM idemjob.provider_stats('-1 second');			-- 22023
SELECT * FROM idemjob.provider_stats('300000 years');		-- 22023
\set VERBOSITY default

-- bound to its own owner, r_mon sees its rows only, in every view and
-- in provider_stats(since)
SELECT idemjob.bind_owner('r_mon', 'role');
SET ROLE r_mon;
SELECT intent, provider, attempts, succeeded, superseded, rejected, failed,
	in_doubt, cancelled, races_lost
FROM idemjob.provider_stats('1 hour') WHERE intent LIKE 'm\_%' ORDER BY 1, 2;
SELECT intent, provider, attempts, succeeded, superseded, rejected, failed, in_doubt, cancelled
FROM idemjob.provider_stats WHERE intent LIKE 'm\_%' ORDER BY 1, 2;
SELECT count(*) AS in_doubt_rows FROM idemjob.in_doubt;
SELECT count(*) AS queue_rows FROM idemjob.queue_stats WHERE intent LIKE 'm\_%';
SELECT oldest_final_age < interval '1 hour' AS own_final_jobs_only,
	oldest_race_log_age < interval '1 hour' AS own_race_log_only
FROM idemjob.retention_stats;
RESET ROLE;
SELECT idemjob.unbind_owner('r_mon');

--
-- The window is read through indexes: 30,000 attempts of two days ago
-- (raw rows shaped as the functions write them) and the handful above;
-- provider_stats('1 hour') walks attempts_pkey and race_log_logged_at
-- and reads each job by its key: no sequential scan of attempts, jobs or
-- race_log (this transaction's own scan counts)
--
SET session_replication_role = replica;
CREATE FUNCTION pg_temp.v7(ts timestamptz) RETURNS uuid LANGUAGE sql AS $$
	SELECT (lpad(to_hex((extract(epoch FROM ts) * 1000)::bigint), 12, '0') || '7'
		|| substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid $$;
INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, params, provider, state,
	version, attempt_count, result, created_at, updated_at, completed_at, run_at, owner_hash)
SELECT pg_temp.v7(t), 'm_bulk', 'mb' || g, 'm_bulk', '{}', 'm_a', 'succeeded', 1, 1,
	'{"id": 1}', t, t + interval '1 s', t + interval '1 s', t, 'm_bulk'::text
FROM generate_series(1, 30000) g, LATERAL (SELECT now() - interval '2 days' - g * interval '1 s' AS t) x;
INSERT INTO idemjob.attempts (id, job_id, owner_id, attempt_no, provider, state, read_version,
	started_at, deadline, finished_at, result_sha256, owner_hash)
SELECT pg_temp.v7(j.created_at), j.id, j.owner_id, 1, j.provider, 'succeeded', 0,
	j.created_at, j.created_at + interval '30 s', j.created_at + interval '1 s', '\x00', j.owner_hash
FROM idemjob.jobs j WHERE j.intent = 'm_bulk';
-- a third of them also lost a race with a second attempt
INSERT INTO idemjob.attempts (id, job_id, owner_id, attempt_no, provider, state, read_version,
	started_at, deadline, finished_at, result_sha256, owner_hash)
SELECT pg_temp.v7(j.created_at + interval '10 ms'), j.id, j.owner_id, 2, 'm_b', 'superseded', 0,
	j.created_at + interval '10 ms', j.created_at + interval '30 s', j.created_at + interval '2 s', '\x01',
	j.owner_hash
FROM idemjob.jobs j WHERE j.intent = 'm_bulk' AND substr(j.idempotency_key, 3)::int % 3 = 0;
INSERT INTO idemjob.race_log (logged_at, job_id, owner_id, attempt_id, winner_attempt_id,
	expected_version, found_version, reason, result_sha256, result_bytes, late_by, provider,
	intent, idempotency_key, owner_hash)
SELECT a.finished_at, a.job_id, a.owner_id, a.id, NULL, 0, 1, 'slot_taken', '\x01', 9,
	interval '1 s', a.provider, 'm_bulk',
	(SELECT j.idempotency_key FROM idemjob.jobs j WHERE j.id = a.job_id), a.owner_hash
FROM idemjob.attempts a WHERE a.owner_id = 'm_bulk' AND a.attempt_no = 2;
RESET session_replication_role;
ANALYZE idemjob.jobs, idemjob.attempts, idemjob.race_log;
BEGIN;
CREATE TEMP TABLE scans0 AS
SELECT relname, seq_scan, idx_scan FROM pg_stat_xact_user_tables WHERE schemaname = 'idemjob';
SELECT count(*) AS bulk_rows_in_the_hour FROM idemjob.provider_stats('1 hour') WHERE intent = 'm_bulk';
-- (the partitions of the partitioned layout, idemjob.partitions, as their table)
SELECT regexp_replace(s.relname, '_p[0-9]+$', '') AS relname,
	sum(s.seq_scan - s0.seq_scan) AS seq_scans, bool_or(s.idx_scan > s0.idx_scan) AS index_read
FROM pg_stat_xact_user_tables s JOIN scans0 s0 USING (relname)
WHERE s.schemaname = 'idemjob'
  AND regexp_replace(s.relname, '_p[0-9]+$', '') IN ('attempts', 'jobs', 'race_log')
GROUP BY 1 ORDER BY 1;
COMMIT;
-- a wider window takes them in
SELECT provider, attempts, succeeded, superseded, races_lost, late_by_p50_ms, late_by_p95_ms
FROM idemjob.provider_stats('3 days') WHERE intent = 'm_bulk' ORDER BY 1;

--
-- revoke_capability takes it all back; operator includes monitor, so an
-- operator's revoked monitor keeps the views
--
SELECT idemjob.revoke_capability('r_mon', 'monitor');
SELECT has_schema_privilege('r_mon', 'idemjob', 'USAGE') AS usage,
	count(*) FILTER (WHERE has_function_privilege('r_mon', f.oid, 'EXECUTE')) AS functions
FROM ext_functions f
WHERE f.sig NOT IN ('idemjob.validate(jsonb,jsonb)', 'idemjob.uuid_v7()');
SELECT idemjob.grant_capability('r_mon', 'operator');
SELECT idemjob.grant_capability('r_mon', 'monitor');
SELECT idemjob.revoke_capability('r_mon', 'monitor');
SELECT has_table_privilege('r_mon', 'idemjob.retention_stats', 'SELECT') AS retention_stats,
	has_function_privilege('r_mon', 'idemjob.provider_stats(interval)', 'EXECUTE') AS provider_stats;
SELECT idemjob.revoke_capability('r_mon', 'operator');
-- the table's constraint knows the name
\set VERBOSITY sqlstate
INSERT INTO idemjob.capabilities (grantee, capability) VALUES ('r_mon', 'watcher');	-- 23514
\set VERBOSITY default

-- clean up: the raw rows, the retry policy, the role
DELETE FROM idemjob.retry_policies WHERE intent = 'm_pay';
SET session_replication_role = replica;
DELETE FROM idemjob.race_log WHERE owner_id = 'm_bulk';
DELETE FROM idemjob.attempts WHERE owner_id = 'm_bulk';
DELETE FROM idemjob.jobs WHERE owner_id = 'm_bulk';
RESET session_replication_role;
SET client_min_messages = warning;
DROP OWNED BY r_mon;
DROP ROLE r_mon;
